#!/usr/bin/env bash
# The SQLite storage engine alone (in process): presence writes committed in groups, as the
# server's storage thread commits each loop iteration's writes, in every durability mode.
# Env: WRITES_PER_COMMIT ("1 20 100"), COMMITS_WRITES (total writes per run, 20000), MODES ("off normal full").
source "$(dirname "$0")/common.sh"
build
cd "$ROOT"
for mode in ${MODES:-off normal full}; do
    for per in ${WRITES_PER_COMMIT:-1 20 100}; do
        "$BENCH" storage --durability "$mode" --writes-per-commit "$per" --commits $(( ${COMMITS_WRITES:-20000} / per ))
    done
done
