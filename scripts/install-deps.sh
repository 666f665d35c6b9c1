#!/bin/sh
# Installs the Debian 12 packages libkprobes needs to build and test.
# As root it uses apt-get; otherwise it names what is missing and fails.
set -e

# `make check-arm64` needs more: the cross compilers (C and C++), the
# emulator and cpio (the arm64 libraries and kernel are unpacked from
# Debian packages into build/arm64 by tests/arm64/arm64.sh, not
# installed).  Only the arm64 targets ask for them (--arm64).
arm64_deps() {
    pkgs="gcc-aarch64-linux-gnu g++-aarch64-linux-gnu binutils-aarch64-linux-gnu qemu-system-arm cpio"
    missing=""
    for p in $pkgs; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
    done
    [ -z "$missing" ] && return 0
    if [ "$(id -u)" = 0 ]; then
        echo "installing:$missing"
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq || true
        apt-get install -y -qq --no-install-recommends $missing >/dev/null
    else
        echo "make check-arm64 needs these Debian packages:$missing" >&2
        echo "install them with: sudo apt-get install$missing" >&2
        return 1
    fi
}
if [ "${1:-}" = "--arm64" ]; then
    arm64_deps
    exit
fi

# gzip, sqlite3, python3.11: the real programs tests/real/ probes; binutils:
# objdump/readelf; gdb: the oracle of the stack and variables-by-name
# tests; jq reads the latter's JSON; uftrace: the oracle of tests/record/
# and `make bench`; libexpat1: a library test_toolapi loads after the last
# registration, to unwind through.
PKGS="gcc make pkg-config libzydis-dev libelf-dev libdw-dev zlib1g-dev liblzma-dev libbz2-dev libcriterion-dev g++ gzip sqlite3 python3.11 binutils gdb jq uftrace libexpat1"
missing=""
for p in $PKGS; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" = 0 ]; then
    echo "installing:$missing"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq || true
    apt-get install -y -qq --no-install-recommends $missing >/dev/null
else
    echo "libkprobes needs these Debian packages:$missing" >&2
    echo "install them with: sudo apt-get install$missing" >&2
    exit 1
fi
