#!/usr/bin/env bash
# make fuzz: builds presence-fuzz with libFuzzer and AddressSanitizer (scratch path .build-fuzz)
# and runs each fuzz target for FUZZ_SECONDS (default 60), or FUZZ_RUNS executions when set.
# Fails on the first crash, leak, timeout or broken invariant; the input is saved under
# .build-fuzz/crashes/<target>/ and printed in base64, to be added to Fuzz/regressions/<target>/
# (swift test replays those). FUZZ_TARGETS picks targets (default: all, see `presence-fuzz --list`).
set -euo pipefail
cd "$(dirname "$0")/.."

seconds="${FUZZ_SECONDS:-60}"
runs="${FUZZ_RUNS:-}"
targets="${FUZZ_TARGETS:-json wire rules token path rest query}"
scratch=.build-fuzz

echo "== building presence-fuzz with -sanitize=fuzzer,address"
nice -n 10 swift build -c release --product presence-fuzz --scratch-path "$scratch" \
    -Xswiftc -DFUZZING -Xswiftc -sanitize=fuzzer,address -Xswiftc -use-ld=lld
binary="$scratch/release/presence-fuzz"
# libFuzzer reports crashes itself; Swift's backtracer would race it (and trips ASan).
export SWIFT_BACKTRACE=enable=no
export LSAN_OPTIONS="suppressions=$PWD/Fuzz/lsan-suppressions.txt${LSAN_OPTIONS:+:$LSAN_OPTIONS}"

for target in $targets; do
    corpus="$scratch/corpus/$target"      # libFuzzer adds what it finds here
    crashes="$scratch/crashes/$target/"
    mkdir -p "$corpus" "$crashes"
    limit=(-max_total_time="$seconds")
    [ -n "$runs" ] && limit=(-runs="$runs")
    echo "== fuzzing $target (${runs:+$runs runs}${runs:-$seconds s})"
    log="$scratch/fuzz-$target.log"
    if ! nice -n 10 "$binary" "$target" "${limit[@]}" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
        -artifact_prefix="$crashes" "$corpus" "Fuzz/corpus/$target" > "$log" 2>&1; then
        tail -n 60 "$log"
        for input in "$crashes"*; do
            [ -f "$input" ] || continue
            echo "== $target: crashing input $input (base64):"
            base64 -w0 "$input"; echo
        done
        echo "FAIL: $target crashed; add the input to Fuzz/regressions/$target/ once fixed (full log: $log)"
        exit 1
    fi
    grep -E "^stat::number_of_executed_units|^stat::average_exec_per_sec|^#[0-9]+.*DONE" "$log" | tr '\n' ' '
    echo
done
echo "== fuzzing passed: $targets"
