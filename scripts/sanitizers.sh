#!/usr/bin/env bash
# make test-sanitizers: the Swift test suite under AddressSanitizer (with LeakSanitizer) and under
# ThreadSanitizer, each in its own scratch path (.build-asan, .build-tsan). SANITIZERS picks
# which (default "address thread"). THREAD_FILTER, when set, is a `swift test --filter` for the
# ThreadSanitizer run only (make test-hostile sets it in CI; see docs/robustness.md). With
# LIVE_ASAN=1 the live tests also run against the ASan build of presence-server, and any
# sanitizer report in a server's log fails the run.
set -euo pipefail
cd "$(dirname "$0")/.."

sanitizers="${SANITIZERS:-address thread}"
# Reports come from the sanitizer runtime; Swift's backtracer would race it.
export SWIFT_BACKTRACE=enable=no
export LSAN_OPTIONS="suppressions=$PWD/Fuzz/lsan-suppressions.txt${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
export TSAN_OPTIONS="halt_on_error=1:suppressions=$PWD/Fuzz/tsan-suppressions.txt${TSAN_OPTIONS:+:$TSAN_OPTIONS}"

for sanitizer in $sanitizers; do
    scratch=".build-${sanitizer/address/asan}"
    scratch="${scratch/thread/tsan}"
    echo "== swift test --sanitize=$sanitizer ($scratch)"
    # Only the test bundle and what it links (not presence-bench and the other executables).
    nice -n 10 swift build --product presencePackageTests --sanitize="$sanitizer" --scratch-path "$scratch"
    filter=()
    if [ "$sanitizer" = thread ] && [ -n "${THREAD_FILTER:-}" ]; then filter=(--filter "$THREAD_FILTER"); fi
    nice -n 10 swift test --skip-build --sanitize="$sanitizer" --scratch-path "$scratch" "${filter[@]}"
done

if [ "${LIVE_ASAN:-0}" = "1" ]; then
    # The server from the ASan build, the CLI the tests also run (presence-client, found next to
    # the server) from the plain build: the server is what is under test, with leak checks on.
    echo "== live tests against the ASan presence-server"
    nice -n 10 swift build --sanitize=address --scratch-path .build-asan --product presence-server
    nice -n 10 swift build --product presence-client
    mkdir -p .build-asan/live
    ln -sf "$PWD/.build-asan/debug/presence-server" .build-asan/live/presence-server
    ln -sf "$PWD/.build/debug/presence-client" .build-asan/live/presence-client
    logs_before=$(date +%s)
    PRESENCE_SERVER=.build-asan/live/presence-server python3 -m pytest -p no:hypothesispytest -q Tests/live
    # A sanitizer report in a server's log (the tests keep them in the temp directory) fails the run.
    reports=$(find "${TMPDIR:-/tmp}" -maxdepth 1 -name 'presence-server-*.log' -newermt "@$logs_before" \
        -exec grep -l "Sanitizer" {} + 2>/dev/null || true)
    if [ -n "$reports" ]; then echo "sanitizer reports in: $reports"; exit 1; fi
fi
echo "== sanitizers passed: $sanitizers"
