# shellcheck shell=bash
# Sourced by perf/testpmd.sh and perf/instructions.sh: the DPDK l3fwd command (perf/build-l3fwd.sh)
# on a config's vdevs, as both scripts run it.
#
#   l3fwd_cmd L3FWD OUT PREFIX VDEV...   sets the array L3_CMD
#
# LPM routes as the baseline config's (10.1.0.0/16 -> port 1 = net_null0), lcore 1 forwarding
# port 0's one rx queue. l3fwd opens a tx queue per lcore on every port, so net_pcap0 gets two
# tx_pcap files in OUT (nothing is sent there). The route files are written to OUT. Memory:
# L3_MEM_MODE (default --no-huge; perf/testpmd.sh's HUGE=1 sets --huge-unlink).
l3fwd_cmd() {
  local bin=$1 out=$2 prefix=$3 v
  shift 3
  printf 'R10.1.0.0/16 1\nR10.0.0.0/24 0\n' >"$out/l3fwd.v4"
  printf 'R2001:0db8:0001:0000:0000:0000:0000:0000/48 1\n' >"$out/l3fwd.v6"
  local vdevs=()
  for v in "$@"; do
    case "$v" in
      --vdev=net_pcap0,*) vdevs+=("$v,tx_pcap=$out/l3fwd-tx0.pcap,tx_pcap=$out/l3fwd-tx1.pcap") ;;
      *) vdevs+=("$v") ;;
    esac
  done
  # shellcheck disable=SC2034 # read by the sourcing script
  L3_CMD=("$bin" -l 0-1 "${L3_MEM_MODE:---no-huge}" -m 1024 --no-pci --no-shconf --no-telemetry
    --file-prefix="$prefix" "${vdevs[@]}"
    -- -p 0x3 --config="(0,0,1)" --parse-ptype --lookup=lpm
    --rule_ipv4="$out/l3fwd.v4" --rule_ipv6="$out/l3fwd.v6")
}
