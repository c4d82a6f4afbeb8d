#!/usr/bin/env bash
# Builds the THEMIS authors' NS-3 simulator (Networked-System-and-Security-Group/Themis,
# NS3/simulation: ns-3.17, the HPCC simulator with THEMIS added) for the cross-check in
# validation/themis/ (README.md there).
#
#   validation/themis/build.sh SRC BUILD_DIR
#
# SRC: a checkout of the fork (with NS3/simulation/waf) or its bare git mirror (HEAD is
# extracted). The fork commits its own build/ output and a few large result files; those are
# left out, and blobs a partial mirror lacks are skipped unless they are sources. BUILD_DIR:
# where NS3/simulation and NS3/traffic_gen end up (BUILD_DIR/simulation, BUILD_DIR/traffic_gen)
# and are built, outside this repository; compare.py takes it as --ns3 BUILD_DIR.
#
# The copy gets patch_themis.py (THEMIS_NS3_OFF=1 turns the fork's THEMIS off; a counters line
# at exit), then validation/hpcc/build.sh builds it as it builds the HPCC simulator (with its
# patch_variants.py switches, all off unless set: without them the simulator runs as published;
# python 2.7 for waf; about 13 minutes on 2 idle cores). Environment: JOBS, NICE, PYTHON2 (as
# validation/hpcc/build.sh).
set -euo pipefail

usage() {
  echo "usage: $0 SRC BUILD_DIR" >&2
  exit 2
}
[ $# -eq 2 ] || usage
src=$1
build=$2
here=$(cd "$(dirname "$0")" && pwd)

if [ ! -e "$src" ]; then
  echo "$0: $src: no such source (a checkout of Networked-System-and-Security-Group/Themis or its bare git mirror)" >&2
  exit 1
fi
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT

if [ -f "$src/NS3/simulation/waf" ]; then
  cp -a "$src/NS3/simulation" "$src/NS3/traffic_gen" "$stage/"
  rm -rf "$stage/simulation/build"
elif git --git-dir="$src" rev-parse --verify -q HEAD >/dev/null 2>&1; then
  # Every blob under NS3/simulation and NS3/traffic_gen but the committed build output.
  git --git-dir="$src" ls-tree -r HEAD -- NS3/simulation NS3/traffic_gen |
    awk -F '\t' '$2 !~ /^NS3\/simulation\/build\// {split($1, a, " "); print a[3] "\t" $2}' >"$stage/list"
  if [ ! -s "$stage/list" ]; then
    echo "$0: $src: no NS3/simulation in HEAD: not the THEMIS fork" >&2
    exit 1
  fi
  cut -f1 "$stage/list" | git --git-dir="$src" cat-file --batch-check |
    awk '$2 == "missing" {print $1}' >"$stage/missing"
  if [ -s "$stage/missing" ]; then
    bad=$(grep -F -f "$stage/missing" "$stage/list" | cut -f2 | grep -E '\.(cc|h|py)$|/wscript$|/waf$' || true)
    if [ -n "$bad" ]; then
      echo "$0: $src lacks source files: $bad" >&2
      exit 1
    fi
    echo "$0: skipping $(wc -l <"$stage/missing") blobs the mirror lacks (recorded results, not sources)" >&2
    grep -v -F -f "$stage/missing" "$stage/list" >"$stage/keep" || true
    mv "$stage/keep" "$stage/list"
  fi
  # A scratch index of HEAD (trees only) and checkout-index of the listed paths (literal).
  GIT_INDEX_FILE=$stage/index git --git-dir="$src" read-tree HEAD
  mkdir "$stage/co"
  cut -f2 "$stage/list" | tr '\n' '\0' |
    GIT_INDEX_FILE=$stage/index git --git-dir="$src" --work-tree="$stage/co" checkout-index -z --stdin --prefix="$stage/co/"
  mv "$stage/co/NS3/simulation" "$stage/co/NS3/traffic_gen" "$stage/"
  rm -rf "$stage/co" "$stage/index" "$stage/list" "$stage/missing"
else
  echo "$0: $src: neither a checkout with NS3/simulation/waf nor a git repository" >&2
  exit 1
fi
sim=$stage/simulation
if [ ! -f "$sim/scratch/third.cc" ] || ! grep -q 'ExternalSwitch' "$sim/scratch/third.cc"; then
  echo "$0: $src: not the THEMIS fork (no ExternalSwitch in NS3/simulation/scratch/third.cc)" >&2
  exit 1
fi
rm -f "$sim"/.lock-waf*
python3 "$here/patch_themis.py" "$sim/src/point-to-point/model"
"$here/../hpcc/build.sh" "$stage" "$build"
