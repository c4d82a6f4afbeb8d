#!/usr/bin/env bash
# Instructions per frame of the forwarding lcore, longhaul against DPDK's l3fwd, under callgrind.
#
#   perf/instructions.sh [SECONDS] [CONFIG...]   (defaults 30 and perf/dpdk-baseline.toml)
#   L3FWD=$(perf/build-l3fwd.sh) perf/instructions.sh 30 perf/dpdk-baseline.toml perf/dpdk-spray.toml
#
# perf/testpmd.sh's rates swing by 20-40% from one minute to the next on a shared VM (perf/README.md,
# every section); an instruction count does not. For each CONFIG this runs `longhaul run` under
# `valgrind --tool=callgrind` for SECONDS (stopped with SIGINT), then l3fwd on the same --vdev
# arguments (when L3FWD is set), and prints, per frame received: the worker lcore's instructions
# (longhaul: inclusive cost of `lcore::trampoline`, the PMDs' rx and tx included; l3fwd: inclusive
# cost of `lpm_main_loop`), DPDK's own share of them (the PMDs', mempool's and ethdev's functions),
# and the ratio l3fwd / longhaul. An instruction ratio is not a rate ratio: the
# PMDs' copies stall on memory and our code mostly does not, so on this VM the rate ratio has been
# 1.5-2 times the instruction ratio (perf/README.md). It is the stable measure to compare commits by.
#
# Frames: longhaul's `run: N frames in` line at exit; l3fwd's `Rx-total:` line at exit (the l3fwd
# build of perf/build-l3fwd.sh prints it). CONFIG needs `[dpdk] eal_args` with its --vdev arguments,
# as perf/testpmd.sh's configs have. Env: LONGHAUL (binary; default: build the dist profile with the dpdk
# feature), L3FWD (optional), OUT (directory for the callgrind files; default a new one in /tmp).
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION=${1:-30}
shift || true
CONFIGS=("$@")
[ ${#CONFIGS[@]} -gt 0 ] || CONFIGS=(perf/dpdk-baseline.toml)
OUT=${OUT:-$(mktemp -d /tmp/longhaul-instructions.XXXXXX)}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
command -v valgrind >/dev/null || { echo "needs valgrind (apt-get install valgrind)" >&2; exit 1; }
command -v callgrind_annotate >/dev/null || { echo "needs callgrind_annotate (valgrind)" >&2; exit 1; }
if [ -z "${LONGHAUL:-}" ]; then
  cargo build --profile dist --features dpdk --locked -q
  LONGHAUL=target/dist/longhaul
fi
for c in "${CONFIGS[@]}"; do [ -f "$c" ] || { echo "no config $c" >&2; exit 1; }; done
# shellcheck source=perf/l3fwd-args.sh
. perf/l3fwd-args.sh

# cost FILE yes|no PATTERN...: the summed inclusive (yes) or own (no) instructions of the functions
# whose name matches one of the patterns, each counted once.
cost() {
  local file=$1 incl=$2
  shift 2
  # From /: run inside the repository, callgrind_annotate resolves some of the binary's relative
  # source names and then lists a function under two names, splitting its cost.
  (cd / && callgrind_annotate --auto=no --inclusive="$incl" --threshold=100 "$file") 2>/dev/null | python3 -c '
import re, sys
pats = sys.argv[1:]
total, seen = 0, set()
for line in sys.stdin:
    m = re.match(r"\s*([\d,]+) \([^)]*\)\s+(\S.*)$", line)
    if not m:
        continue
    name = m.group(2)
    if name in seen or not any(p in name for p in pats):
        continue
    seen.add(name)
    total += int(m.group(1).replace(",", ""))
print(total)' "$@"
}

# DPDK's own instructions on the forwarding path: the functions of its PMD, mempool, mbuf and ethdev
# shared libraries (stripped, so callgrind names many by library and address), own cost only. (Not
# the EAL's: l3fwd's main lcore spins in rte_delay_ms there.)
DPDK_PATTERNS=("/librte_net_" "/librte_mempool" "/librte_mbuf" "/librte_ethdev")

# measure NAME PROGRAM FRAMES_AWK ROOT -- CMD...: run CMD under callgrind for DURATION and take
# the frames it received from its log (FRAMES_AWK prints them). Sets FRAMES, PER_FRAME (ROOT's
# inclusive instructions per frame) and DPDK_PER_FRAME.
measure() {
  local name=$1 prog=$2 frames_awk=$3 root=$4 worker dpdk
  shift 5
  timeout -s INT "$DURATION" valgrind --tool=callgrind --callgrind-out-file="$OUT/$name.$prog.cg" \
    "$@" </dev/null >"$OUT/$name.$prog.log" 2>&1 || true
  FRAMES=$(awk "$frames_awk" "$OUT/$name.$prog.log")
  if [ -z "$FRAMES" ] || [ "$FRAMES" -eq 0 ]; then
    echo "$name: $prog reported no frames (awk '$frames_awk'); see $OUT/$name.$prog.log" >&2
    exit 1
  fi
  worker=$(cost "$OUT/$name.$prog.cg" yes "$root")
  dpdk=$(cost "$OUT/$name.$prog.cg" no "${DPDK_PATTERNS[@]}")
  PER_FRAME=$(python3 -c "print(round($worker / $FRAMES))")
  DPDK_PER_FRAME=$(python3 -c "print(round($dpdk / $FRAMES))")
}

ROW='%-28s %12s %10s %10s %10s %8s\n'
# shellcheck disable=SC2059 # the format is ROW
printf "$ROW" config program frames "instr/fr" "DPDK/fr" ratio
for CONFIG in "${CONFIGS[@]}"; do
  name=$(basename "$CONFIG" .toml)
  read -r VDEVS_STR < <(python3 -c '
import sys, tomllib
cfg = tomllib.load(open(sys.argv[1], "rb"))
v = [a for a in cfg.get("dpdk", {}).get("eal_args", []) if a.startswith("--vdev=")]
if not v:
    sys.exit(f"{sys.argv[1]}: no --vdev in [dpdk] eal_args")
print(*v)' "$CONFIG")
  read -r -a VDEVS <<<"$VDEVS_STR"

  # shellcheck disable=SC2016 # awk programs
  measure "$name" longhaul '/^run: / { print $2 }' "lcore::trampoline [" -- \
    "$LONGHAUL" run --config "$CONFIG"
  # shellcheck disable=SC2059
  printf "$ROW" "$name" longhaul "$FRAMES" "$PER_FRAME" "$DPDK_PER_FRAME" ""
  if [ -n "${L3FWD:-}" ]; then
    lh=$PER_FRAME
    l3fwd_cmd "$L3FWD" "$OUT" "longhaul-instr-$$" "${VDEVS[@]}"
    # shellcheck disable=SC2016
    measure "$name" l3fwd '/Rx-total:/ { print $2 }' "lpm_main_loop [" -- "${L3_CMD[@]}"
    # shellcheck disable=SC2059
    printf "$ROW" "" l3fwd "$FRAMES" "$PER_FRAME" "$DPDK_PER_FRAME" \
      "$(python3 -c "print(f'{$PER_FRAME / $lh:.3f}')")"
  fi
done
echo "(callgrind files and logs in $OUT)"
