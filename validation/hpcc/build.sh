#!/usr/bin/env bash
# Builds the HPCC NS-3 simulator (alibaba-edu/High-Precision-Congestion-Control, ns-3.17) for
# the cross-check in validation/hpcc/ (README.md there).
#
#   validation/hpcc/build.sh SRC_DIR BUILD_DIR
#
# SRC_DIR: the simulator's source, either a checkout (with simulation/waf) or a bare git mirror
# (its HEAD is extracted). BUILD_DIR: where the source is copied and built (outside this
# repository); compare.py takes it as --ns3 BUILD_DIR.
#
# The copy gets one addition, off unless asked for at run time (patch_variants.py): the
# environment variables HPCC_ECN_AT_ENQUEUE=1 (mark ECN when a packet is queued instead of when
# it leaves) and HPCC_SWITCH_ACK_HIGH_PRIO=1 (switches put ACKs/NAKs in the strict-priority
# queue 0). Without them the simulator runs exactly as published.
#
# Needs python 2.7 (waf 1.7): $PYTHON2, else python2.7 on PATH, else pyenv's 2.7.18. About 13
# minutes on 2 idle cores (gcc 12). Environment: JOBS (default 2), NICE (default 10).
set -euo pipefail

usage() {
  echo "usage: $0 SRC_DIR BUILD_DIR" >&2
  exit 2
}
[ $# -eq 2 ] || usage
src=$1
build=$2
here=$(cd "$(dirname "$0")" && pwd)
jobs=${JOBS:-2}
nice_level=${NICE:-10}

if [ ! -e "$src" ]; then
  echo "$0: $src: no such source directory (a checkout of alibaba-edu/High-Precision-Congestion-Control or its bare git mirror)" >&2
  exit 1
fi

is_python27() {
  "$1" -c 'import sys; assert sys.version_info[:2] == (2, 7)' >/dev/null 2>&1
}
python2=
if [ -n "${PYTHON2:-}" ]; then
  is_python27 "$PYTHON2" || { echo "$0: PYTHON2=$PYTHON2 is not a working python 2.7" >&2; exit 1; }
  python2=$PYTHON2
else
  for c in python2.7 "$HOME/.pyenv/versions/2.7.18/bin/python"; do
    if is_python27 "$c"; then
      python2=$c
      break
    fi
  done
fi
if [ -z "$python2" ]; then
  echo "$0: python 2.7 not found (the simulator's waf needs it): set PYTHON2, or install it (pyenv install 2.7.18)" >&2
  exit 1
fi

mkdir -p "$build"
if [ -f "$src/simulation/waf" ]; then
  cp -a "$src/." "$build/"
elif git --git-dir="$src" rev-parse --verify -q HEAD >/dev/null 2>&1; then
  git --git-dir="$src" archive HEAD | tar -x -C "$build"
else
  echo "$0: $src: neither a checkout with simulation/waf nor a git repository" >&2
  exit 1
fi
sim=$build/simulation
if [ ! -f "$sim/scratch/third.cc" ] || [ ! -f "$sim/src/point-to-point/model/switch-node.cc" ]; then
  echo "$0: $src: not the HPCC simulator (no simulation/scratch/third.cc or switch-node.cc)" >&2
  exit 1
fi
python3 "$here/patch_variants.py" "$sim/src/point-to-point/model"

cd "$sim"
CXXFLAGS="-O3 -std=c++11 -Wno-error -fpermissive -w" nice -n "$nice_level" "$python2" ./waf configure \
  --build-profile=optimized --disable-python --disable-examples --disable-tests \
  --enable-modules=core,network,internet,point-to-point,applications
nice -n "$nice_level" "$python2" ./waf build -j"$jobs"
echo "built: $sim (compare.py --ns3 $build)"
