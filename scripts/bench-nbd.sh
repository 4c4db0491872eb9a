#!/usr/bin/env bash
# Benchmarks `noftl serve` through fio's nbd engine, on unix sockets, loopback only.
#
#   scripts/bench-nbd.sh iops      # --clock none vs `nbdkit memory`: 4 KiB randread/randwrite, QD1 and QD16
#   scripts/bench-nbd.sh latency   # --clock real, QD1: fio's latency vs the device model's
#   scripts/bench-nbd.sh multiconn # --clock none, 4 connections (fio numjobs=4, nbdcopy
#                                  # --connections=4) on the page FTL and memdisk vs `nbdkit memory`
#   scripts/bench-nbd.sh cells     # issue 35's table: --clock none, 4 connections (multi-conn),
#                                  # 4 KiB randread/randwrite at QD1 and QD16, 128 KiB read/write;
#                                  # page FTL (before its first GC) and memdisk vs `nbdkit memory`,
#                                  # ROUNDS rounds, every cell on fresh servers, interleaved
#   scripts/bench-nbd.sh steady    # the page FTL in steady state (GC running): 4 KiB randwrite at
#                                  # QD1 and QD16 over JOBS connections, wall-clock IOPS against
#                                  # the IOPS of the FTL's own model over the same cell
#
# Environment:
#   NOFTL      the binary (default target/release/noftl; build with cargo build --release -p noftl)
#   TARGET     target flags for the latency run (default: memdisk, which models no time, so the
#              run measures the server's own overhead; e.g. TARGET="--target page --preset tiny")
#   SIZE       export size for the IOPS run (default 1G: memdisk on the noftl13 preset)
#   RUNTIME    seconds per fio run (default 10)
#   JOBS       connections of the multiconn and cells runs (default 4)
#   ROUNDS     rounds of the cells run (default 2)
#   CELL_MIB   cells run: the region fio works on, prefilled first (default 256)
#   WRITE_MIB  cells run: bytes a write cell writes at most (all connections), so that the page
#              FTL (noftl13, 952 MiB exported) never collects garbage (default 512)
#   QD_SEQ     cells run: queue depth per connection of the 128 KiB cells (default 4)
#   CELLS      cells run: which cells (default all six: rr1 rr16 rw1 rw16 sr sw)
#   PAGE_SERVE cells run: more `noftl serve` flags for the page FTL's server (e.g. --prefault:
#              the device's memory faulted in before serving)
#   AUTOGROUP_NICE  run in a session of its own whose autogroup has this nice value (e.g. -10;
#              needs root for a negative one). With the kernel's autogroups (Debian's default)
#              every session gets an equal share of the CPUs whatever its processes' nice
#              values, and on a machine busy with other sessions' work the share a server gets
#              then depends on how many threads it has runnable, not on its CPU per request:
#              this gives the benchmark's session (fio and both servers alike) the CPUs.
#   PRECOND_X  steady run: random writes before the cells, as a multiple of the export (default 2)
#   OUT        directory for logs and JSON (default: a temp dir, printed)
#
# Prints one line per run; `docs/PERFORMANCE.md` records results.
set -euo pipefail
cd "$(dirname "$0")/.."

MODE=${1:-iops}
if [ -n "${AUTOGROUP_NICE:-}" ] && [ -z "${BENCH_NBD_SESSION:-}" ]; then
  exec setsid env BENCH_NBD_SESSION=1 bash -c \
    'echo "$AUTOGROUP_NICE" > /proc/self/autogroup && exec bash "$0" "$@"' "$0" "$@"
fi
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
  fio_summary "$OUT/$name.json" "$rw"
}

# fio_summary JSON RW [full]: IOPS, mean, p50 and p99 completion latency (us) of the job's read
# or write side; with "full" also MiB/s and the I/O count.
fio_summary() {
  python3 - "$1" "$2" "${3:-}" <<'EOF'
import json, sys
j = json.load(open(sys.argv[1]))["jobs"][0]
side = "read" if "read" in sys.argv[2] else "write"
s = j[side]; c = s["clat_ns"]; p = c.get("percentile", {})
out = f'{s["iops"]:.0f} {c["mean"]/1e3:.1f} {p.get("50.000000", 0)/1e3:.1f} {p.get("99.000000", 0)/1e3:.1f}'
if sys.argv[3] == "full":
    out += f' {s["bw_bytes"]/2**20:.0f} {s["total_ios"]}'
print(out)
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
elif [ "$MODE" = cells ]; then
  command -v nbdkit >/dev/null || { echo "nbdkit missing" >&2; exit 1; }
  JOBS=${JOBS:-4} ROUNDS=${ROUNDS:-2} CELL_MIB=${CELL_MIB:-256} WRITE_MIB=${WRITE_MIB:-512}
  QD_SEQ=${QD_SEQ:-4}
  read -r -a CELL_LIST <<< "${CELLS:-rr1 rr16 rw1 rw16 sr sw}"
  # start_server NAME SOCK: a fresh server (a fresh device) on SOCK, its pid in SRV_PID.
  start_server() {
    local name=$1 sock=$2
    rm -f "$sock"
    case $name in
      page)
        # shellcheck disable=SC2086 # PAGE_SERVE is a list of flags
        "$NOFTL" serve --target page --clock none --socket "$sock" ${PAGE_SERVE:-} \
            --stats-file "$sock.stats.json" 2>"$sock.log" & ;;
      memdisk)
        "$NOFTL" serve --target memdisk --clock none --socket "$sock" \
            --stats-file "$sock.stats.json" 2>"$sock.log" & ;;
      nbdkit) nbdkit -f -U "$sock" memory 1G 2>"$sock.log" & ;;
    esac
    SRV_PID=$!
    PIDS+=("$SRV_PID")
    wait_socket "$sock"
  }
  # cell_run NAME URI CELL -> "iops mean_us p50_us p99_us MiB/s"
  cell_run() {
    local name=$1 uri=$2 cell=$3 rw bs qd
    local -a extra
    case $cell in
      rr1) rw=randread bs=4k qd=1 ;; rr16) rw=randread bs=4k qd=16 ;;
      rw1) rw=randwrite bs=4k qd=1 ;; rw16) rw=randwrite bs=4k qd=16 ;;
      sr) rw=read bs=128k qd=$QD_SEQ ;; sw) rw=write bs=128k qd=$QD_SEQ ;;
      *) echo "unknown cell $cell" >&2; exit 2 ;;
    esac
    case $cell in
      # Sequential: each connection streams its own part of the region.
      sr|sw) extra=(--size=$((CELL_MIB / JOBS))M --offset_increment=$((CELL_MIB / JOBS))M) ;;
      *) extra=(--size="${CELL_MIB}M") ;;
    esac
    case $cell in
      # Writes stop at WRITE_MIB in all (or at RUNTIME), so that the page FTL never needs GC.
      rw*|sw) extra+=(--io_size=$((WRITE_MIB / JOBS))M --runtime="$RUNTIME") ;;
      *) extra+=(--time_based --runtime="$RUNTIME") ;;
    esac
    fio --name="$name" --ioengine=nbd --uri="$uri" --rw="$rw" --bs="$bs" --iodepth="$qd" \
        --numjobs="$JOBS" --group_reporting --randseed=42 "${extra[@]}" \
        --output-format=json --output="$OUT/$name.json" >/dev/null
    fio_summary "$OUT/$name.json" "$rw" full
  }
  # cpu_ticks PID: user + system CPU of a process so far, in clock ticks.
  cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
  HZ=$(getconf CLK_TCK)
  RES=$OUT/cells.tsv
  : > "$RES"
  echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg); autogroup: $(cat /proc/self/autogroup)"
  printf '%-5s %-5s %-8s %10s %9s %9s %9s %9s %9s %9s %6s\n' round cell server iops MiB_s mean_us p50_us p99_us cpu_us/io vs_nbdkit gc
  for round in $(seq "$ROUNDS"); do
    for cell in "${CELL_LIST[@]}"; do
      kiops=
      for srv in nbdkit page memdisk; do
        sock=$OUT/$srv-$round-$cell.sock
        start_server "$srv" "$sock"
        uri="nbd+unix:///?socket=$sock"
        if [ "$round$cell" = "1${CELL_LIST[0]}" ]; then
          nbdinfo --can multi-conn "$uri" || { echo "$srv does not offer multi-conn" >&2; exit 1; }
        fi
        # Write the region once, so that reads hit data and writes overwrite.
        fio --name=fill --ioengine=nbd --uri="$uri" --rw=write --bs=1m --iodepth=4 \
            --size="${CELL_MIB}M" >/dev/null
        t0=$(cpu_ticks "$SRV_PID")
        read -r iops mean p50 p99 mibs ios < <(cell_run "$srv-$round-$cell" "$uri" "$cell")
        t1=$(cpu_ticks "$SRV_PID")
        # The server's CPU per request (user + system, all its threads): what it costs the
        # machine whatever the load, unlike IOPS on a shared 2-core box.
        cpu=$(awk "BEGIN { printf \"%.1f\", ($t1 - $t0) * 1e6 / $HZ / $ios }")
        kill -TERM "$SRV_PID"; wait "$SRV_PID" 2>/dev/null || true
        gc=-
        if [ "$srv" = page ]; then
          # GC work in the cell (erases and page copies): 0 means "before its first GC".
          gc=$(python3 -c 'import json,sys; g=json.load(open(sys.argv[1]))["ftl"]["gc"]; print(g["erases"] + g["migrations"])' "$sock.stats.json")
        fi
        [ "$srv" = nbdkit ] && kiops=$iops
        ratio=$(awk "BEGIN { printf \"%.2f\", $iops / $kiops }")
        printf '%-5s %-5s %-8s %10s %9s %9s %9s %9s %9s %9s %6s\n' "$round" "$cell" "$srv" "$iops" "$mibs" "$mean" "$p50" "$p99" "$cpu" "$ratio" "$gc"
        printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$round" "$cell" "$srv" "$iops" "$ratio" "$gc" "$cpu" >> "$RES"
      done
    done
  done
  echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
  # Per cell and server: the range over the rounds, and of the ratio to nbdkit.
  python3 - "$RES" <<'EOF'
import sys, collections
r = collections.defaultdict(list)
for line in open(sys.argv[1]):
    _, cell, srv, iops, ratio, gc, cpu = line.rstrip("\n").split("\t")
    r[(cell, srv)].append((float(iops), float(ratio), gc, float(cpu)))
print(f"\n{'cell':<6} {'nbdkit iops':<16} {'page iops (x nbdkit)':<30} {'memdisk iops (x nbdkit)':<30} {'cpu us/io nbdkit/page/memdisk':<32} page gc work")
for c in dict.fromkeys(c for c, _ in r):
    def rng(srv, ratio=True):
        v = r[(c, srv)]
        s = f"{min(x[0] for x in v):.0f}-{max(x[0] for x in v):.0f}"
        if ratio:
            s += f" ({min(x[1] for x in v):.2f}-{max(x[1] for x in v):.2f}x)"
        return s
    gc = ",".join(x[2] for x in r[(c, "page")])
    cpu = " / ".join(f"{min(x[3] for x in r[(c, s)]):.1f}-{max(x[3] for x in r[(c, s)]):.1f}" for s in ("nbdkit", "page", "memdisk"))
    print(f"{c:<6} {rng('nbdkit', False):<16} {rng('page'):<30} {rng('memdisk'):<30} {cpu:<32} {gc}")
EOF
elif [ "$MODE" = steady ]; then
  # The page FTL in steady state against its own model: noftl13's export written sequentially
  # once, then random 4 KiB writes of PRECOND_X times its size from JOBS connections (GC
  # running), then 4 KiB random writes at QD1 and QD16 per connection for RUNTIME s each. The
  # server's statistics before and after each cell (SIGUSR1) give the modelled device's own
  # rate over the cell: host writes over the device clock's advance. wall/model >= 1: the
  # emulator serves faster than the device it models (it could run in real time).
  JOBS=${JOBS:-4}
  PRECOND_X=${PRECOND_X:-2}
  S=$OUT/steady.sock STATS=$OUT/steady-stats.json
  rm -f "$S"
  "$NOFTL" serve --target page --clock none --socket "$S" --stats-file "$STATS" 2>"$OUT/steady.log" &
  PID=$!; PIDS+=($PID)
  wait_socket "$S"
  U="nbd+unix:///?socket=$S"
  SIZE=$(nbdinfo --size "$U")
  prefill "$U"
  fio --name=precondition --ioengine=nbd --uri="$U" --rw=randwrite --bs=4k --iodepth=16 \
      --numjobs="$JOBS" --group_reporting --size="$SIZE" --norandommap --randrepeat=0 \
      --randseed=7 --io_size=$((PRECOND_X * SIZE / JOBS)) --output-format=json \
      --output="$OUT/precondition.json" >/dev/null
  snap() { rm -f "$STATS"; kill -USR1 "$PID"; for _ in $(seq 200); do [ -s "$STATS" ] && break; sleep 0.05; done; cp "$STATS" "$1"; }
  printf '%-9s %-4s %10s %12s %10s %10s %12s\n' rw qd wall_iops model_iops wall/model ftl_waf gc_copies
  for qd in 1 16; do
    snap "$OUT/before-qd$qd.json"
    read -r iops _ < <(fio_run "steady-randwrite-qd$qd" "$U" randwrite "$qd" "$JOBS")
    snap "$OUT/after-qd$qd.json"
    python3 - "$OUT/before-qd$qd.json" "$OUT/after-qd$qd.json" "$iops" "$qd" <<'EOF'
import json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:3])
wall = float(sys.argv[3])
writes = b["ftl"]["host"]["writes"] - a["ftl"]["host"]["writes"]
clock_s = (b["nand"]["virtual_ns"] - a["nand"]["virtual_ns"]) / 1e9
programs = b["nand"]["flash"]["programs"] - a["nand"]["flash"]["programs"]
copies = b["ftl"]["gc"]["migrations"] - a["ftl"]["gc"]["migrations"]
model = writes / clock_s if clock_s > 0 else float("nan")
print(f'{"randwrite":<9} {sys.argv[4]:<4} {wall:>10.0f} {model:>12.0f} {wall / model:>10.1f} {programs / max(writes, 1):>10.2f} {copies:>12}')
EOF
  done
else
  echo "usage: $0 iops|latency|multiconn|cells|steady" >&2; exit 2
fi
