#!/usr/bin/env bash
# The DESIGN.md section 7 yardstick: dpdk-testpmd io forwarding, then `longhaul run` (one worker
# lcore) with a given config, on the same vdevs for the same time; prints both packet rates and
# their ratio. No hugepages, no NIC (--no-huge --no-pci); HUGE=1: hugepages for all three (below).
#
#   perf/testpmd.sh [SECONDS] [CONFIG]   (defaults 10 and perf/dpdk-baseline.toml; run from
#                                         anywhere, it cds to the repo root)
#   perf/testpmd.sh 10 perf/dpdk-themis.toml     # the THEMIS ESW pipeline
#   perf/testpmd.sh 10 perf/dpdk-spray.toml      # the Themis spraying ToR (four net_null paths)
#   perf/testpmd.sh 10 perf/dpdk-bifrost.toml    # THEMIS ESW + Bifrost governing dc0 (class 3)
#
# CONFIG must give one port `io = { kind = "dpdk", device = "net_null0" }` (the egress counted),
# `[control] api_listen`, and `[dpdk] eal_args` whose --vdev arguments testpmd then uses too.
# Further net_null1, net_null2, ... ports are counted with it (longhaul's rate is the sum of the
# tx of every net_null port: the spray config's four paths); testpmd still forwards port 0 (the
# pcap) to port 1 (net_null0) only, its other null ports receiving nothing.
#
# Vdevs, for both: net_pcap0 reads examples/roce-64flows.pcap in a loop (infinite_rx=1: 64 RoCE
# flows, 314-byte frames), net_null0 (no-rx=1) drops what it is given. EAL -l 0-1: lcore 0 is the
# main lcore, lcore 1 forwards (testpmd's forwarding core; longhaul's worker). The default
# config, perf/dpdk-baseline.toml, runs the baseline pipeline (dc0 = net_pcap0, routed to
# wan0 = net_null0); perf/dpdk-themis.toml the THEMIS ESW with the same ports; perf/dpdk-spray.toml
# the spraying ToR (h0 = net_pcap0 reading perf/spray-64qps.pcap, 64 QPs of RDMA WRITEs, 314-byte
# frames; up0..up3 = net_null0..net_null3).
#
# Rates are steady state: after WARMUP seconds (default 2), testpmd's per-second Tx-pps of port 1
# are averaged; longhaul's tx_pkts of the net_null ports (wan0; up0..up3 for spray) is read from
# the management API at the start and the end of the window and summed. Env: WARMUP, LONGHAUL
# (binary; default: cargo build --profile dist --features dpdk and target/dist/longhaul), TESTPMD
# (default dpdk-testpmd), L3FWD (optional: DPDK's l3fwd built by perf/build-l3fwd.sh; when set, it
# runs between the two on the same vdevs and its rate is printed too: a minimal DPDK router as a
# second yardstick), REPEAT (default 1: rounds of l3fwd then longhaul, alternated, after the one
# testpmd run; with more than one, each round's pair and the median and range of longhaul / l3fwd
# over the rounds: one run's rate swings by 10-20% on a shared VM, perf/README.md), HUGE (1: every program's memory on 2 MiB hugepages, as a deployment has it:
# --no-huge becomes --huge-unlink for testpmd, l3fwd and a copy of CONFIG; needs 512 free
# hugepages, e.g. `echo 1024 > /proc/sys/vm/nr_hugepages` and hugetlbfs mounted at /dev/hugepages).
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION=${1:-10}
CONFIG=${2:-perf/dpdk-baseline.toml}
WARMUP=${WARMUP:-2}
REPEAT=${REPEAT:-1}
[[ "$REPEAT" =~ ^[1-9][0-9]*$ ]] || { echo "REPEAT must be a positive integer, not '$REPEAT'" >&2; exit 1; }
TESTPMD=${TESTPMD:-dpdk-testpmd}
OUT=$(mktemp -d /tmp/longhaul-testpmd.XXXXXX)
[ -f "$CONFIG" ] || { echo "no config $CONFIG" >&2; exit 1; }
# From the config: the API address, the indices of the net_null ports (net_null0 first; their tx
# is counted), the pipeline's name, and the EAL --vdev arguments (testpmd gets the same ones).
CFG_PY='
import sys, tomllib
cfg = tomllib.load(open(sys.argv[1], "rb"))
idx = [i for i, p in enumerate(cfg["ports"]) if p.get("io", {}).get("device") == "net_null0"]
if len(idx) != 1 or "api_listen" not in cfg.get("control", {}):
    sys.exit(f"{sys.argv[1]}: need exactly one net_null0 port and [control] api_listen")
idx += [i for i, p in enumerate(cfg["ports"])
        if p.get("io", {}).get("device", "").startswith("net_null") and i != idx[0]]
vdevs = [a for a in cfg.get("dpdk", {}).get("eal_args", []) if a.startswith("--vdev=")]
if not vdevs:
    sys.exit(f"{sys.argv[1]}: no --vdev in [dpdk] eal_args")
print(cfg["control"]["api_listen"], ",".join(map(str, idx)), cfg["switch"].get("pipeline", "baseline"), *vdevs)
'
read -r API TX_PORTS PIPELINE VDEVS_STR < <(python3 -c "$CFG_PY" "$CONFIG")
read -r -a VDEVS <<<"$VDEVS_STR"
# Memory: 4 KiB pages by default (--no-huge: runs anywhere, CI included); HUGE=1 hugepages.
MEM_MODE=--no-huge
if [ "${HUGE:-0}" = 1 ]; then
  free=$(awk '/^HugePages_Free:/ { print $2 }' /proc/meminfo)
  [ "${free:-0}" -ge 512 ] || { echo "HUGE=1 needs 512 free 2 MiB hugepages (HugePages_Free: ${free:-0})" >&2; exit 1; }
  MEM_MODE=--huge-unlink
  grep -q '"--no-huge"' "$CONFIG" || { echo "$CONFIG: no \"--no-huge\" in [dpdk] eal_args to replace" >&2; exit 1; }
  sed 's/"--no-huge"/"--huge-unlink"/' "$CONFIG" >"$OUT/config-huge.toml"
  CONFIG=$OUT/config-huge.toml
fi

if [ -z "${LONGHAUL:-}" ]; then
  cargo build --profile dist --features dpdk --locked -q
  LONGHAUL=target/dist/longhaul
fi

echo "== dpdk-testpmd io forwarding, ${DURATION} s (+${WARMUP} s warm-up)"
TP_CMD=("$TESTPMD" -l 0-1 "$MEM_MODE" -m 1024 --no-pci --no-shconf --no-telemetry
  --file-prefix=longhaul-testpmd-$$ "${VDEVS[@]}"
  -- --forward-mode=io --stats-period 1)
echo "${TP_CMD[*]}"
timeout -s INT $((DURATION + WARMUP + 1)) "${TP_CMD[@]}" </dev/null >"$OUT/testpmd.log" 2>&1 || true
# Port 1 (net_null0) Tx-pps, one line per second; skip the warm-up samples. (Any other port's
# block ends port 1's: with the spray config, ports 2-4 follow it.)
TP_PPS=$(awk -v warm="$WARMUP" -v dur="$DURATION" '
  /NIC statistics for port / { p1 = ($0 ~ /NIC statistics for port 1 /) }
  p1 && /Tx-pps:/ { n++; if (n > warm && m < dur) { s += $2; m++ } }
  END { if (m == 0) { print 0 } else { printf "%.0f\n", s / m } }' "$OUT/testpmd.log")
if [ "$TP_PPS" = 0 ]; then
  echo "testpmd reported no rate; its output is in $OUT/testpmd.log" >&2
  exit 1
fi

if [ -n "${L3FWD:-}" ]; then
  # DPDK's l3fwd (perf/build-l3fwd.sh) on the same vdevs (its arguments: perf/l3fwd-args.sh).
  # shellcheck source=perf/l3fwd-args.sh
  . perf/l3fwd-args.sh
  L3_MEM_MODE=$MEM_MODE l3fwd_cmd "$L3FWD" "$OUT" "longhaul-l3fwd-$$" "${VDEVS[@]}"
fi
# l3fwd's rate (L3_PPS) over the window, from its per-second Tx-pps lines.
run_l3fwd() {
  echo "== DPDK l3fwd (LPM), ${DURATION} s (+${WARMUP} s warm-up)"
  # shellcheck disable=SC2153 # L3_CMD: set by l3fwd_cmd (perf/l3fwd-args.sh)
  echo "${L3_CMD[*]}"
  timeout -s INT $((DURATION + WARMUP + 1)) "${L3_CMD[@]}" </dev/null >"$OUT/l3fwd.log" 2>&1 || true
  L3_PPS=$(awk -v warm="$WARMUP" -v dur="$DURATION" '
    /Tx-pps:/ { n++; if (n > warm && m < dur) { s += $2; m++ } }
    END { if (m == 0) { print 0 } else { printf "%.0f\n", s / m } }' "$OUT/l3fwd.log")
  [ "$L3_PPS" != 0 ] || { echo "l3fwd reported no rate; its output is in $OUT/l3fwd.log" >&2; exit 1; }
}

# The tx_pkts of the counted ports (wan0 for the baseline and THEMIS, up0..up3 for spray), summed.
tx_wan0() {
  curl -sf "http://$API/stats" |
    python3 -c 'import json,sys; p = json.load(sys.stdin)["workers"][0]["ports"]; print(sum(p[int(i)]["tx_pkts"] for i in sys.argv[1].split(",")))' "$TX_PORTS"
}
# longhaul's rate (LH_PPS) over the window, from its API's counters at the window's ends.
run_longhaul() {
  echo "== longhaul run ($PIPELINE, $CONFIG, 1 worker lcore), ${DURATION} s (+${WARMUP} s warm-up)"
  LH_CMD=("$LONGHAUL" run --config "$CONFIG")
  echo "${LH_CMD[*]}"
  "${LH_CMD[@]}" >"$OUT/longhaul.out" 2>"$OUT/longhaul.err" &
  LH_PID=$!
  trap 'kill -INT $LH_PID 2>/dev/null || true' EXIT
  for _ in $(seq 100); do
    tx_wan0 >/dev/null 2>&1 && break
    kill -0 $LH_PID 2>/dev/null || { cat "$OUT/longhaul.err" >&2; exit 1; }
    sleep 0.1
  done
  sleep "$WARMUP"
  T0=$(date +%s.%N); C0=$(tx_wan0)
  sleep "$DURATION"
  T1=$(date +%s.%N); C1=$(tx_wan0)
  kill -INT $LH_PID
  wait $LH_PID || { echo "longhaul exited with $?" >&2; cat "$OUT/longhaul.err" >&2; exit 1; }
  trap - EXIT
  LH_PPS=$(python3 -c "print(round(($C1 - $C0) / ($T1 - $T0)))")
  grep -E '^run:|^drop\.|^spray\.(s\.|unknown_qp)|^port\.[^.]*\.tx_pkts' "$OUT/longhaul.out" || true
}

# REPEAT rounds of (l3fwd, longhaul), alternated: a round's pair shares its minute.
L3_ALL=()
LH_ALL=()
for _ in $(seq "$REPEAT"); do
  L3_PPS=
  [ -z "${L3FWD:-}" ] || run_l3fwd
  run_longhaul
  L3_ALL+=("${L3_PPS:-0}")
  LH_ALL+=("$LH_PPS")
done

echo "== result (logs in $OUT)"
python3 - "$TP_PPS" "$PIPELINE" "${L3_ALL[*]}" "${LH_ALL[*]}" <<'EOF'
import statistics, sys
tp, name = int(sys.argv[1]), sys.argv[2]
l3s = [int(x) for x in sys.argv[3].split()]
lhs = [int(x) for x in sys.argv[4].split()]
has_l3 = all(l3s)
print(f"testpmd io:        {tp / 1e6:8.2f} Mpps")
if len(lhs) == 1:
    l3, lh = l3s[0], lhs[0]
    if has_l3:
        print(f"DPDK l3fwd (LPM):  {l3 / 1e6:8.2f} Mpps  ({l3 / tp:.3f} of testpmd io)")
    print(f"longhaul {name + ':':9s} {lh / 1e6:8.2f} Mpps")
    print(f"ratio:             {lh / tp:8.3f}  (goal >= 0.8)")
    if has_l3:
        print(f"longhaul / l3fwd:  {lh / l3:8.3f}")
    sys.exit(0)
# Several rounds: each round's pair, then the medians and ranges.
for i, (l3, lh) in enumerate(zip(l3s, lhs), 1):
    line = f"round {i}: longhaul {lh / 1e6:6.2f} Mpps"
    if has_l3:
        line += f", l3fwd {l3 / 1e6:6.2f} Mpps, longhaul / l3fwd {lh / l3:.3f}"
    print(line)
print(f"longhaul {name + ':':9s} median {statistics.median(lhs) / 1e6:6.2f} Mpps "
      f"({min(lhs) / 1e6:.2f}-{max(lhs) / 1e6:.2f}), {statistics.median(lhs) / tp:.3f} of testpmd io")
if has_l3:
    r = [lh / l3 for l3, lh in zip(l3s, lhs)]
    print(f"DPDK l3fwd (LPM):  median {statistics.median(l3s) / 1e6:6.2f} Mpps "
          f"({min(l3s) / 1e6:.2f}-{max(l3s) / 1e6:.2f})")
    print(f"longhaul / l3fwd:  median {statistics.median(r):.3f} ({min(r):.3f}-{max(r):.3f}) over {len(r)} rounds")
EOF
