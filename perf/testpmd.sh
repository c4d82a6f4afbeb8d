#!/usr/bin/env bash
# The DESIGN.md section 7 yardstick: dpdk-testpmd io forwarding, then `longhaul run` (baseline
# pipeline, one worker lcore), on the same vdevs for the same time; prints both packet rates and
# their ratio. No hugepages, no NIC (--no-huge --no-pci).
#
#   perf/testpmd.sh [SECONDS]        (default 10; run from anywhere, it cds to the repo root)
#
# Vdevs, for both: net_pcap0 reads examples/roce-64flows.pcap in a loop (infinite_rx=1: 64 RoCE
# flows, 314-byte frames), net_null0 (no-rx=1) drops what it is given. EAL -l 0-1: lcore 0 is the
# main lcore, lcore 1 forwards (testpmd's forwarding core; longhaul's worker). longhaul uses
# perf/dpdk-baseline.toml (dc0 = net_pcap0, routed to wan0 = net_null0).
#
# Rates are steady state: after WARMUP seconds (default 2), testpmd's per-second Tx-pps of port 1
# are averaged; longhaul's wan0 tx_pkts is read from the management API at the start and the end
# of the window. Env: WARMUP, LONGHAUL (binary; default: cargo build --release --features dpdk
# and target/release/longhaul), TESTPMD (default dpdk-testpmd).
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION=${1:-10}
WARMUP=${WARMUP:-2}
TESTPMD=${TESTPMD:-dpdk-testpmd}
TRACE=examples/roce-64flows.pcap
API=127.0.0.1:9490 # perf/dpdk-baseline.toml [control] api_listen
OUT=$(mktemp -d /tmp/longhaul-testpmd.XXXXXX)

if [ -z "${LONGHAUL:-}" ]; then
  cargo build --release --features dpdk --locked -q
  LONGHAUL=target/release/longhaul
fi

echo "== dpdk-testpmd io forwarding, ${DURATION} s (+${WARMUP} s warm-up)"
TP_CMD=("$TESTPMD" -l 0-1 --no-huge -m 1024 --no-pci --no-shconf --no-telemetry
  --file-prefix=longhaul-testpmd-$$
  "--vdev=net_pcap0,rx_pcap=$TRACE,infinite_rx=1" --vdev=net_null0,no-rx=1
  -- --forward-mode=io --stats-period 1)
echo "${TP_CMD[*]}"
timeout -s INT $((DURATION + WARMUP + 1)) "${TP_CMD[@]}" </dev/null >"$OUT/testpmd.log" 2>&1 || true
# Port 1 (net_null0) Tx-pps, one line per second; skip the warm-up samples.
TP_PPS=$(awk -v warm="$WARMUP" -v dur="$DURATION" '
  /NIC statistics for port 1/ { p1 = 1 }
  /NIC statistics for port 0/ { p1 = 0 }
  p1 && /Tx-pps:/ { n++; if (n > warm && m < dur) { s += $2; m++ } }
  END { if (m == 0) { print 0 } else { printf "%.0f\n", s / m } }' "$OUT/testpmd.log")
if [ "$TP_PPS" = 0 ]; then
  echo "testpmd reported no rate; its output is in $OUT/testpmd.log" >&2
  exit 1
fi

echo "== longhaul run (baseline, 1 worker lcore), ${DURATION} s (+${WARMUP} s warm-up)"
LH_CMD=("$LONGHAUL" run --config perf/dpdk-baseline.toml)
echo "${LH_CMD[*]}"
"${LH_CMD[@]}" >"$OUT/longhaul.out" 2>"$OUT/longhaul.err" &
LH_PID=$!
trap 'kill -INT $LH_PID 2>/dev/null || true' EXIT
tx_wan0() {
  curl -sf "http://$API/stats" |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["workers"][0]["ports"][2]["tx_pkts"])'
}
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
grep -E '^run:|^drop\.' "$OUT/longhaul.out" || true

echo "== result (logs in $OUT)"
python3 - "$TP_PPS" "$LH_PPS" <<'EOF'
import sys
tp, lh = int(sys.argv[1]), int(sys.argv[2])
print(f"testpmd io:        {tp / 1e6:8.2f} Mpps")
print(f"longhaul baseline: {lh / 1e6:8.2f} Mpps")
print(f"ratio:             {lh / tp:8.3f}  (goal >= 0.8)")
EOF
