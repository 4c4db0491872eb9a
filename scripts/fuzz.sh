#!/usr/bin/env bash
# Coverage-guided fuzzing of noftl's parsers and on-flash decoders with AFL++ through cargo-afl
# (stable toolchain). Installs cargo-afl and builds AFL++ when missing.
#
#   scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]     (default: 60 s, every target)
#
# Each target fuzzes from fuzz/corpus/TARGET/ into fuzz/out/TARGET/ (not committed). A crash
# or hang AFL finds is copied to fuzz/regressions/TARGET/ (committed with its fix: the corpus
# test replays it in `cargo test`), and the script exits 1.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds="${1:-60}"
shift || true
if ! command -v cargo-afl >/dev/null 2>&1; then
    cargo install cargo-afl --locked
fi
# Builds AFL++ for this rustc once; says so (and changes nothing) when it is built already.
cargo afl config --build >/dev/null 2>&1 || true

export CARGO_TARGET_DIR="${FUZZ_TARGET_DIR:-target/afl}"
cargo afl build --release --features afl -p noftl-fuzz
bin="$CARGO_TARGET_DIR/release/fuzz-afl"

targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
    mapfile -t targets < <(ls fuzz/corpus)
fi

export AFL_SKIP_CPUFREQ=1 AFL_I_DONT_CARE_ABOUT_MISSING_CRASHES=1 AFL_NO_UI=1
export AFL_BENCH_UNTIL_CRASH="${AFL_BENCH_UNTIL_CRASH:-}"
found=0
for t in "${targets[@]}"; do
    out="fuzz/out/$t"
    rm -rf "$out"
    mkdir -p "$out"
    echo "== $t: $seconds s"
    # -t: a hang is an input that runs past 2 s (the decoders bound their input; a flash
    # target opens a small device in milliseconds).
    cargo afl fuzz -V "$seconds" -t 2000 -i "fuzz/corpus/$t" -o "$out" "$bin" "$t" \
        >"$out/afl.log" 2>&1 || true
    stats="$out/default/fuzzer_stats"
    if [ -f "$stats" ]; then
        grep -E '^(execs_done|execs_per_sec|corpus_count|saved_crashes|saved_hangs|bitmap_cvg) ' "$stats" \
            | sed "s/^/  /"
    else
        tail -20 "$out/afl.log"
        exit 1
    fi
    for kind in crashes hangs; do
        for f in "$out"/default/"$kind"/id*; do
            [ -e "$f" ] || continue
            mkdir -p "fuzz/regressions/$t"
            cp "$f" "fuzz/regressions/$t/$kind-$(basename "$f" | cut -c1-9)"
            found=1
        done
    done
done
if [ "$found" = 1 ]; then
    echo "crashes or hangs found: fuzz/regressions/ (each needs a fix; the corpus test replays them)" >&2
    exit 1
fi
