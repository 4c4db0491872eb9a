#!/usr/bin/env bash
# The engine against SQLite, per core: TPC-B at scale 1, one terminal, no device time on either
# side (the engine on `memdisk` with the real clock; SQLite on tmpfs with WAL and
# synchronous=FULL, scripts/sqlite_tpcb.c says why those settings). Runs the two interleaved,
# ROUNDS times each, so that whatever else the machine does falls on both alike, and prints a
# Markdown table for docs/PERFORMANCE.md with the machine's load beside every run.
#
#   scripts/bench-sqlite.sh [TXNS [ROUNDS]]      (defaults: 200000 transactions, 3 rounds)
#
# Needs: a C compiler and Debian's libsqlite3-dev (the script says so if they are missing), and
# the release binary (`cargo build --release -p noftl`; NOFTL=path overrides).
set -euo pipefail
cd "$(dirname "$0")/.."

txns=${1:-200000}
rounds=${2:-3}
noftl=${NOFTL:-${CARGO_TARGET_DIR:-target}/release/noftl}
[ -x "$noftl" ] || { echo "error: $noftl not found: run 'cargo build --release -p noftl' (or set NOFTL)" >&2; exit 1; }
command -v cc >/dev/null 2>&1 || { echo "error: a C compiler (cc) is needed: apt-get install gcc" >&2; exit 1; }
[ -f /usr/include/sqlite3.h ] || { echo "error: sqlite3.h not found: apt-get install libsqlite3-dev" >&2; exit 1; }

work=$(mktemp -d "${TMPDIR:-/tmp}/bench-sqlite.XXXXXX")
trap 'rm -rf "$work"' EXIT
cc -O2 -o "$work/sqlite_tpcb" scripts/sqlite_tpcb.c -lsqlite3
shm=/dev/shm
[ -d "$shm" ] && [ -w "$shm" ] || shm=$work
sqlite_version=$(cc -E -dM -include sqlite3.h -x c /dev/null | awk '/define SQLITE_VERSION /{gsub(/"/,"",$3); print $3}')

echo "| round | load (1 min) | engine tx/s | SQLite $sqlite_version tx/s | SQLite CPU us/tx | engine / SQLite |"
echo "|---|---|---|---|---|---|"
for r in $(seq 1 "$rounds"); do
    load=$(cut -d' ' -f1 /proc/loadavg)
    # SQLite first in odd rounds, the engine first in even ones.
    run_sqlite() {
        "$work/sqlite_tpcb" "$shm/bench-sqlite-$$.db" 1 "$txns" "$r"
    }
    run_engine() {
        # tx/s of the measured run alone (the result file times the load apart).
        "$noftl" bench tpcb --storage memdisk --scale 1 --terminals 1 --txns "$txns" \
            --clock real --seed "$r" --json "$work/engine.json" >/dev/null 2>&1
    }
    if [ $((r % 2)) -eq 1 ]; then s=$(run_sqlite); run_engine; else run_engine; s=$(run_sqlite); fi
    python3 - "$work/engine.json" "$s" "$r" "$load" <<'PY'
import json, sys
res, sq, r, load = sys.argv[1:]
d = json.load(open(res))
if d["committed"] <= 0 or d["consistency"].get("status") == "violated":
    sys.exit(f"the engine's run is not usable: {d['committed']} committed, {d['consistency']}")
eng_tps = d["throughput_tps"]
f = dict(kv.split("=") for kv in sq.split())
sq_tps = float(f["tx_per_s"])
sq_cpu_us = float(f["cpu_s"]) * 1e6 / int(f["txns"])
print(f"| {r} | {load} | {eng_tps:,.0f} | {sq_tps:,.0f} | {sq_cpu_us:.1f} | {eng_tps / sq_tps:.2f}x |")
PY
done
