#!/usr/bin/env bash
# make test-sanitizers: the Swift test suite under AddressSanitizer (with LeakSanitizer) and under
# ThreadSanitizer, each in its own scratch path (.build-asan, .build-tsan). SANITIZERS picks
# which (default "address thread"). With LIVE_ASAN=1 the live tests also run against the ASan
# build of presence-server (leak checks off there: see docs/robustness.md).
set -euo pipefail
cd "$(dirname "$0")/.."

sanitizers="${SANITIZERS:-address thread}"
# Reports come from the sanitizer runtime; Swift's backtracer would race it.
export SWIFT_BACKTRACE=enable=no
export LSAN_OPTIONS="suppressions=$PWD/Fuzz/lsan-suppressions.txt${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
export TSAN_OPTIONS="halt_on_error=1${TSAN_OPTIONS:+:$TSAN_OPTIONS}"

for sanitizer in $sanitizers; do
    scratch=".build-${sanitizer/address/asan}"
    scratch="${scratch/thread/tsan}"
    echo "== swift test --sanitize=$sanitizer ($scratch)"
    nice -n 10 swift build --build-tests --sanitize="$sanitizer" --scratch-path "$scratch"
    nice -n 10 swift test --skip-build --sanitize="$sanitizer" --scratch-path "$scratch"
done

if [ "${LIVE_ASAN:-0}" = "1" ]; then
    echo "== live tests against the ASan presence-server"
    nice -n 10 swift build --sanitize=address --scratch-path .build-asan
    ASAN_OPTIONS="detect_leaks=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}" PRESENCE_SERVER=.build-asan/debug/presence-server \
        python3 -m pytest -p no:hypothesispytest -q Tests/live
fi
echo "== sanitizers passed: $sanitizers"
