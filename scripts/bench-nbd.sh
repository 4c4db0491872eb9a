#!/usr/bin/env bash
# Benchmarks `noftl serve` through fio's nbd engine, on unix sockets, loopback only.
#
#   scripts/bench-nbd.sh iops      # --clock none vs `nbdkit memory`: 4 KiB randread/randwrite, QD1 and QD16
#   scripts/bench-nbd.sh latency   # --clock real, QD1: fio's latency vs the device model's
#   scripts/bench-nbd.sh multiconn # --clock none, 4 connections (fio numjobs=4, nbdcopy
#                                  # --connections=4) on the page FTL and memdisk vs `nbdkit memory`
#
# Environment:
#   NOFTL      the binary (default target/release/noftl; build with cargo build --release -p noftl)
#   TARGET     target flags for the latency run (default: memdisk, which models no time, so the
#              run measures the server's own overhead; e.g. TARGET="--target page --preset tiny")
#   SIZE       export size for the IOPS run (default 1G: memdisk on the noftl13 preset)
#   RUNTIME    seconds per fio run (default 10)
#   JOBS       connections of the multiconn run (default 4)
#   OUT        directory for logs and JSON (default: a temp dir, printed)
#
# Prints one line per run; `docs/PERFORMANCE.md` records results.
set -euo pipefail
cd "$(dirname "$0")/.."

MODE=${1:-iops}
NOFTL=${NOFTL:-target/release/noftl}
RUNTIME=${RUNTIME:-10}
SIZE=${SIZE:-1G}
OUT=${OUT:-$(mktemp -d)}
mkdir -p "$OUT"
echo "bench-nbd: $MODE, logs in $OUT" >&2

[ -x "$NOFTL" ] || { echo "build first: cargo build --release -p noftl" >&2; exit 1; }
bash scripts/install-test-deps.sh >&2

PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT

wait_socket() { for _ in $(seq 200); do [ -S "$1" ] && return 0; sleep 0.05; done; echo "no socket $1" >&2; exit 1; }

# fio_run NAME URI RW QD [JOBS] -> prints "iops clat_mean_us clat_p50_us clat_p99_us"
# (JOBS > 1: that many jobs, each on its own connection, reported as one group)
fio_run() {
  local name=$1 uri=$2 rw=$3 qd=$4 jobs=${5:-1}
  fio --name="$name" --ioengine=nbd --uri="$uri" --rw="$rw" --bs=4k --iodepth="$qd" \
      --numjobs="$jobs" --group_reporting \
      --size="$SIZE" --time_based --runtime="$RUNTIME" --ramp_time=1 --randseed=42 \
      --output-format=json --output="$OUT/$name.json" >/dev/null
  python3 - "$OUT/$name.json" "$rw" <<'EOF'
import json, sys
j = json.load(open(sys.argv[1]))["jobs"][0]
side = "read" if "read" in sys.argv[2] else "write"
s = j[side]; c = s["clat_ns"]; p = c.get("percentile", {})
print(f'{s["iops"]:.0f} {c["mean"]/1e3:.1f} {p.get("50.000000", 0)/1e3:.1f} {p.get("99.000000", 0)/1e3:.1f}')
EOF
}

prefill() { # write the whole export once so reads hit data, not holes
  fio --name=fill --ioengine=nbd --uri="$1" --rw=write --bs=1m --iodepth=4 --size="$SIZE" >/dev/null
}

if [ "$MODE" = iops ]; then
  command -v nbdkit >/dev/null || { echo "nbdkit missing" >&2; exit 1; }
  S1=$OUT/noftl.sock S2=$OUT/nbdkit.sock
  rm -f "$S1" "$S2"
  # memdisk on the default preset (noftl13): 1 GiB.
  "$NOFTL" serve --target memdisk --clock none --socket "$S1" --stats-file "$OUT/noftl-stats.json" 2>"$OUT/noftl.log" &
  PIDS+=($!)
  nbdkit -f -U "$S2" memory "$SIZE" 2>"$OUT/nbdkit.log" &
  PIDS+=($!)
  wait_socket "$S1"; wait_socket "$S2"
  U1="nbd+unix:///?socket=$S1" U2="nbd+unix:///?socket=$S2"
  prefill "$U1"; prefill "$U2"
  printf '%-10s %-4s %-14s %10s %10s %10s %10s\n' rw qd server iops mean_us p50_us p99_us
  for rw in randread randwrite; do
    for qd in 1 16; do
      for srv in noftl nbdkit; do
        uri=$U1; [ $srv = nbdkit ] && uri=$U2
        read -r iops mean p50 p99 < <(fio_run "$srv-$rw-qd$qd" "$uri" "$rw" "$qd")
        printf '%-10s %-4s %-14s %10s %10s %10s %10s\n' "$rw" "$qd" "$srv" "$iops" "$mean" "$p50" "$p99"
      done
    done
  done
elif [ "$MODE" = latency ]; then
  read -r -a TARGET_ARGS <<< "${TARGET:---target memdisk}"
  S=$OUT/noftl-real.sock
  rm -f "$S"
  "$NOFTL" serve "${TARGET_ARGS[@]}" --clock real --socket "$S" --stats-file "$OUT/real-stats.json" 2>"$OUT/real.log" &
  PID=$!; PIDS+=($PID)
  wait_socket "$S"
  U="nbd+unix:///?socket=$S"
  SIZE=$(nbdinfo --size "$U")
  prefill "$U"
  printf '%-10s %10s %12s %12s %14s %14s\n' rw iops fio_mean_us fio_p50_us model_mean_us served_mean_us
  for rw in randread randwrite; do
    kill -USR1 "$PID"; sleep 0.2; cp "$OUT/real-stats.json" "$OUT/before-$rw.json"
    read -r iops mean p50 _ < <(fio_run "real-$rw-qd1" "$U" "$rw" 1)
    kill -USR1 "$PID"; sleep 0.2; cp "$OUT/real-stats.json" "$OUT/after-$rw.json"
    # The model's mean over this run only: difference of the cumulative histograms' sums.
    read -r model served < <(python3 - "$OUT/before-$rw.json" "$OUT/after-$rw.json" <<'EOF'
import json, sys
a, b = (json.load(open(f))["latency_us"] for f in sys.argv[1:3])
def run_mean(k):
    n = b[k]["count"] - a[k]["count"]
    return (b[k]["mean"] * b[k]["count"] - a[k]["mean"] * a[k]["count"]) / max(n, 1)
print(f'{run_mean("model"):.1f} {run_mean("served"):.1f}')
EOF
)
    printf '%-10s %10s %12s %12s %14s %14s\n' "$rw" "$iops" "$mean" "$p50" "$model" "$served"
  done
elif [ "$MODE" = multiconn ]; then
  command -v nbdkit >/dev/null || { echo "nbdkit missing" >&2; exit 1; }
  JOBS=${JOBS:-4}
  SP=$OUT/page.sock SM=$OUT/memdisk.sock SK=$OUT/nbdkit.sock
  rm -f "$SP" "$SM" "$SK"
  # The page FTL on the default preset (noftl13: 1 GiB of flash, 7% spare), memdisk of the
  # same preset, and nbdkit memory of the page FTL's exported size.
  "$NOFTL" serve --target page --clock none --socket "$SP" --stats-file "$OUT/page-stats.json" 2>"$OUT/page.log" &
  PIDS+=($!)
  "$NOFTL" serve --target memdisk --clock none --socket "$SM" --stats-file "$OUT/memdisk-stats.json" 2>"$OUT/memdisk.log" &
  PIDS+=($!)
  wait_socket "$SP"; wait_socket "$SM"
  UP="nbd+unix:///?socket=$SP" UM="nbd+unix:///?socket=$SM" UK="nbd+unix:///?socket=$SK"
  SIZE=$(nbdinfo --size "$UP")
  nbdkit -f -U "$SK" memory "$SIZE" 2>"$OUT/nbdkit.log" &
  PIDS+=($!)
  wait_socket "$SK"
  for u in "$UP" "$UM" "$UK"; do
    nbdinfo --can multi-conn "$u" || { echo "$u does not offer multi-conn" >&2; exit 1; }
  done
  # nbdcopy over $JOBS connections: a file of the export's size in, then out (wall seconds).
  head -c "$SIZE" /dev/urandom > "$OUT/src.bin"
  printf '%-14s %-8s %12s\n' server copy seconds
  for srv in page memdisk nbdkit; do
    case $srv in page) u=$UP;; memdisk) u=$UM;; nbdkit) u=$UK;; esac
    for dir in in out; do
      t0=$(date +%s%N)
      if [ $dir = in ]; then
        nbdcopy --connections="$JOBS" --threads="$JOBS" "$OUT/src.bin" "$u"
      else
        nbdcopy --connections="$JOBS" --threads="$JOBS" "$u" "$OUT/dst-$srv.bin"
      fi
      t1=$(date +%s%N)
      printf '%-14s %-8s %12s\n' "$srv" "$dir" "$(awk "BEGIN { printf \"%.2f\", ($t1 - $t0) / 1e9 }")"
    done
    # (memdisk exports the whole preset, a little more than the page FTL: its tail stays zero)
    cmp -s -n "$SIZE" "$OUT/src.bin" "$OUT/dst-$srv.bin" || { echo "$srv: data copied out differs" >&2; exit 1; }
    rm -f "$OUT/dst-$srv.bin"
  done
  # Every export now holds the data written once (nbdcopy in), so reads hit data.
  printf '%-10s %-4s %-5s %-14s %10s %10s %10s %10s\n' rw qd conns server iops mean_us p50_us p99_us
  for rw in randread randwrite; do
    for qd in 1 4 16; do
      for srv in page memdisk nbdkit; do
        case $srv in page) u=$UP;; memdisk) u=$UM;; nbdkit) u=$UK;; esac
        read -r iops mean p50 p99 < <(fio_run "$srv-$rw-qd$qd-j$JOBS" "$u" "$rw" "$qd" "$JOBS")
        printf '%-10s %-4s %-5s %-14s %10s %10s %10s %10s\n' "$rw" "$qd" "$JOBS" "$srv" "$iops" "$mean" "$p50" "$p99"
      done
    done
  done
else
  echo "usage: $0 iops|latency|multiconn" >&2; exit 2
fi
