#!/usr/bin/env bash
# Installs the Debian packages the benchmarks (not the tests) use, when missing:
#   mosquitto   the broker bench/compare.sh and bench/fanout-vs-mosquitto.sh measure against (2.0.11 on Debian 12)
#   linux-perf  perf, for bench/profile.sh
#   valgrind    callgrind, for instruction counts when perf has no usable events
# With arguments, only those packages. Safe to run repeatedly.
set -euo pipefail
packages=("$@")
if [ ${#packages[@]} -eq 0 ]; then packages=(mosquitto linux-perf valgrind); fi
missing=()
for package in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
[ ${#missing[@]} -eq 0 ] && exit 0
echo "installing Debian packages for the benchmarks: ${missing[*]}"
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
# Debian's mosquitto starts a system broker on 1883 (on systemd hosts); the bench starts its own.
if [[ " ${missing[*]} " == *" mosquitto "* ]] && [ -d /run/systemd/system ]; then
    $sudo systemctl disable --now --quiet mosquitto 2>/dev/null || true
fi
