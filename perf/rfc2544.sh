#!/usr/bin/env bash
# RFC 2544 throughput (section 26.1) of longhaul, per shipped config, on one machine: longhaul runs
# live with its ingress and egress ports on DPDK memif interfaces, and `longhaul rfc2544` (a paced
# DPDK generator and counter in a second process) offers frames to one and counts them on the
# other, searching for the highest zero-loss rate at each frame size and with the config's RoCE
# trace. No hugepages, no NIC, root not needed (memif shares memory by file descriptor).
#
#   perf/rfc2544.sh [--bin PATH] [--sizes LIST] [--trial S] [--settle-ms MS] [--resolution F]
#                   [--out DIR] [--no-trace] [CONFIG | testpmd-io ...]
#
# `testpmd-io` in place of a config measures dpdk-testpmd's io forwarding between the same two
# memif ports instead of longhaul: the yardstick (what the memif path and the tester allow).
#
# Defaults: target/dist/longhaul (built with --features dpdk if missing), sizes
# 64,128,256,512,1024,1280,1518, 10 s trials, 2000 ms settle, 1% resolution, every config that
# has a known ingress/egress pair below. Writes DIR/<config>/rfc2544.{csv,json} and the plots,
# DIR/summary.csv (all configs), and prints each config's table. Exit 1 when a run fails or a
# config passes no rate at all.
#
# Topology (the two memif links; the tester is lcore 0, longhaul's worker lcore 1):
#
#   longhaul rfc2544  net_memif0 (server) ==A==> net_memif0 (client)  IN  [longhaul run]
#                     net_memif1 (server) <==B== net_memif1 (client)  OUT
#
# The tester holds both servers and starts first: a DPDK 22.11 memif client connects once, when
# its port starts, and does not retry. Rings of 16384 slots (rsize=14) on both links: with
# memif's default 1024 a scheduling hiccup of the busy-polling processes on a shared machine
# (a millisecond at 1 Mpps) overflows a ring, and zero-loss rates fell tenfold.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

bin=target/dist/longhaul
sizes=64,128,256,512,1024,1280,1518
trial=10
settle=2000
resolution=0.01
out=
use_trace=1
configs=()
while [ $# -gt 0 ]; do
  case "$1" in
    --bin) bin="$2"; shift 2 ;;
    --sizes) sizes="$2"; shift 2 ;;
    --trial) trial="$2"; shift 2 ;;
    --settle-ms) settle="$2"; shift 2 ;;
    --resolution) resolution="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --no-trace) use_trace=0; shift ;;
    -h|--help) sed -n '2,28p' "$0"; exit 0 ;;
    -*) echo "rfc2544.sh: unknown option $1" >&2; exit 2 ;;
    *) configs+=("$1"); shift ;;
  esac
done

# config -> ingress port, egress port, trace (the pair a frame to 10.1.0.0/16 crosses).
pair_for() {
  case "$(basename "$1" .toml)" in
    baseline|baseline-live|themis-esw|bifrost-dci|mlcc-dci|dci-wire-dpdk) echo "dc0 wan0 examples/roce-64flows.pcap" ;;
    reflex-esw) echo "dc0 wan0 perf/reflex-64flows.pcap" ;;
    mlcc-tor) echo "host0 up0 examples/roce-64flows.pcap" ;;
    routed-arp) echo "dc1 wan1 examples/roce-64flows.pcap" ;;   # its [[wire]] pair
    testpmd-io) echo "port0 port1 examples/roce-64flows.pcap" ;;
    *) echo "" ;;
  esac
}
if [ ${#configs[@]} -eq 0 ]; then
  # Not spray-tor: it sprays over four uplinks, the tester receives on one.
  configs=(configs/baseline.toml configs/themis-esw.toml configs/bifrost-dci.toml
           configs/mlcc-dci.toml configs/reflex-esw.toml configs/mlcc-tor.toml
           configs/routed-arp.toml configs/dci-wire-dpdk.toml)
fi
for c in "${configs[@]}"; do
  [ -f "$c" ] || [ "$c" = testpmd-io ] || { echo "rfc2544.sh: $c: no such config" >&2; exit 2; }
  [ -n "$(pair_for "$c")" ] || { echo "rfc2544.sh: $c: no ingress/egress pair known for it (edit pair_for)" >&2; exit 2; }
done
if [ ! -x "$bin" ]; then
  cargo build --profile dist --locked --features dpdk
fi
"$bin" --version | grep -q "DPDK ports: built in" || { echo "rfc2544.sh: $bin was built without --features dpdk" >&2; exit 2; }

work=$(mktemp -d /tmp/longhaul-rfc2544.XXXXXX)
[ -n "$out" ] || out="$work/out"
mkdir -p "$out"
dut_pid=
gen_pid=
# shellcheck disable=SC2317  # called by the trap
cleanup() {
  for p in $gen_pid $dut_pid; do
    kill -INT "$p" 2>/dev/null && wait "$p" 2>/dev/null
  done
  rm -rf "$work/run"
}
trap cleanup EXIT INT TERM

echo "label,frame,size_bytes,line_rate_pps,zero_loss_pps,zero_loss_gbps,percent_of_line_rate,top_offered_pps,top_lost,max_forwarded_pps,trials,generator_limited" >"$out/summary.csv"
fail=0
for cfg in "${configs[@]}"; do
  name=$(basename "$cfg" .toml)
  read -r in_port out_port trace <<<"$(pair_for "$cfg")"
  mkdir -p "$work/run" "$out/$name"
  id="lh$$-$name"
  sock_a="$work/run/a.sock"; sock_b="$work/run/b.sock"
  dut="$work/run/$name.toml"
  if [ "$cfg" = testpmd-io ]; then
    in_mac=02:00:00:00:00:01
  else
  # The config with IN and OUT on memif, every other port without I/O (null), the API on an
  # ephemeral port, EAL on lcore 1 without hugepages; prints the IN port's MAC.
  in_mac=$(python3 perf/memif-dut.py "$cfg" "$dut" "$in_port" "$out_port" "$sock_a" "$sock_b" "$id")
  "$bin" check-config "$dut" >/dev/null
  fi
  targs=(--eal "-l 0 --no-huge -m 512 --no-pci --no-telemetry --file-prefix=$id-gen --vdev=net_memif0,role=server,id=0,rsize=14,socket=$sock_a --vdev=net_memif1,role=server,id=1,rsize=14,socket=$sock_b"
         --tx net_memif0 --rx net_memif1 --dst-mac "$in_mac" --sizes "$sizes"
         --trial "$trial" --settle-ms "$settle" --resolution "$resolution"
         --label "$name" --out-dir "$out/$name")
  [ "$use_trace" = 1 ] && targs+=(--trace "$root/$trace")
  echo "== $name ($in_port -> $out_port, memif; $cfg)"
  # The tester first: it holds both memif servers; longhaul's clients connect when its ports
  # start (a DPDK memif client does not retry), and the tester waits 10 s for the links.
  "$bin" rfc2544 "${targs[@]}" >"$out/$name/table.txt" 2>"$out/$name/trials.log" &
  gen_pid=$!
  sleep 1
  if [ "$cfg" = testpmd-io ]; then
    # Forwarding without looking at the frames, until SIGINT (--stats-period keeps it running).
    dpdk-testpmd -l 0,1 --no-huge -m 512 --no-pci --no-telemetry --file-prefix="$id-dut" \
      "--vdev=net_memif0,role=client,id=0,rsize=14,socket=$sock_a" \
      "--vdev=net_memif1,role=client,id=1,rsize=14,socket=$sock_b" -- \
      --forward-mode=io --port-topology=paired --auto-start --stats-period 5 \
      --total-num-mbufs=32768 >"$out/$name/longhaul.out" 2>"$out/$name/longhaul.err" </dev/null &
  else
    "$bin" run --config "$dut" --nonzero >"$out/$name/longhaul.out" 2>"$out/$name/longhaul.err" &
  fi
  dut_pid=$!
  status=0
  wait "$gen_pid" || status=$?
  kill -INT "$dut_pid" 2>/dev/null || true
  dut_status=0; wait "$dut_pid" || dut_status=$?
  dut_pid=; gen_pid=
  cat "$out/$name/table.txt"
  if [ "$status" != 0 ] || [ "$dut_status" != 0 ]; then
    echo "FAIL: $name: tester exit $status, longhaul exit $dut_status" >&2
    tail -n 5 "$out/$name/trials.log" "$out/$name/longhaul.err" >&2
    fail=1
  elif grep -q "packet conservation violated" "$out/$name/longhaul.err"; then
    echo "FAIL: $name: longhaul's ledger did not balance" >&2; fail=1
  elif ! awk -F, 'NR > 1 && $5 > 0 { ok = 1 } END { exit !ok }' "$out/$name/rfc2544.csv"; then
    echo "FAIL: $name: no zero-loss rate at any size" >&2; fail=1
  fi
  [ -f "$out/$name/rfc2544.csv" ] && tail -n +2 "$out/$name/rfc2544.csv" >>"$out/summary.csv"
  rm -rf "$work/run"
done
echo "results: $out (summary.csv; per config: table.txt, rfc2544.csv/json, rfc2544_*.png/svg, trials.log, longhaul.out/err)"
exit $fail
