#!/usr/bin/env bash
# Compare the criterion benchmarks of two commits, bench by bench (issue 17): each commit is
# checked out into a temporary worktree, its benchmarks run with one shared target directory,
# the first saved as a criterion baseline and the second measured against it, so criterion
# prints each benchmark's change ("change: [-2.1% -1.0% +0.2%]", "No change in performance
# detected", "Performance has regressed").
#
#   perf/bench-compare.sh [--quick] OLD NEW [BENCH ...]
#
# OLD, NEW: any git revisions (NEW may be "." for the working tree as it is). BENCH: bench
# targets of longhaul-pipelines (default: baseline themis spray reflex mlcc bifrost; one that
# OLD does not have is measured for NEW only). --quick: 1 s warm-up and 3 s measurement per
# benchmark instead of criterion's 3 s and 5 s. Run it on a quiet machine: both sides share it.
set -euo pipefail
cd "$(dirname "$0")/.."

quick=()
if [ "${1:-}" = --quick ]; then
  quick=(--warm-up-time 1 --measurement-time 3)
  shift
fi
[ $# -ge 2 ] || { sed -n '2,13p' "$0"; exit 2; }
old=$1 new=$2
shift 2
benches=("$@")
[ ${#benches[@]} -gt 0 ] || benches=(baseline themis spray reflex mlcc bifrost)

work=$(mktemp -d /tmp/longhaul-bench-compare.XXXXXX)
export CARGO_TARGET_DIR=$work/target
cleanup() {
  git worktree remove --force "$work/old" 2>/dev/null || true
  if [ "$new" != . ]; then git worktree remove --force "$work/new" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
git worktree add --detach -q "$work/old" "$old"
if [ "$new" = . ]; then
  new_dir=$PWD
else
  git worktree add --detach -q "$work/new" "$new"
  new_dir=$work/new
fi

has_bench() { grep -q "^name = \"$2\"" "$1/pipelines/Cargo.toml"; }

for b in "${benches[@]}"; do
  echo "== $b: $old"
  if has_bench "$work/old" "$b"; then
    (cd "$work/old" && cargo bench -q -p longhaul-pipelines --bench "$b" -- --noplot "${quick[@]}" --save-baseline old 2>&1) |
      grep -E '^[a-z_]+/[a-z_]+ |time:|^error|^warning' || true
    base=(--baseline old)
  else
    echo "   (no bench '$b' at $old)"
    base=()
  fi
  echo "== $b: $new against $old"
  (cd "$new_dir" && cargo bench -q -p longhaul-pipelines --bench "$b" -- --noplot "${quick[@]}" "${base[@]}" 2>&1) |
    grep -E '^[a-z_]+/[a-z_]+ |time:|change:|Performance|No change|within noise|^error|^warning' || true
done
