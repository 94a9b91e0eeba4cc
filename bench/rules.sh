#!/usr/bin/env bash
# Rule evaluations per second for the presence rules, and the cost rules add to a write (in process).
# Env: USERS (100000), ITERATIONS (200000), RULES (rules/presence.rules.json).
source "$(dirname "$0")/common.sh"
build
cd "$ROOT"
"$BENCH" rules --rules "${RULES:-rules/presence.rules.json}" --users "${USERS:-100000}" --iterations "${ITERATIONS:-200000}"
