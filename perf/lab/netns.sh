#!/usr/bin/env bash
# Network-namespace lab: longhaul on DPDK (net_af_packet PMD over veth pairs) between two hosts
# in their own network namespaces, carrying real kernel traffic. Root, no hugepages, no NIC.
#
#   bash perf/lab/netns.sh [--config FILE] [--keep]
#
#   namespace h1: eth0, MAC 02:00:00:00:10:01
#       | veth
#   namespace sw: sw-h1 ... longhaul run (EAL --vdev=net_af_packet*,iface=sw-h1 / sw-h2) ... sw-h2
#       | veth
#   namespace h2: eth0, MAC 02:00:00:00:20:01
#
# The namespaces are named lh<PID>-{sw,h1,h2}; nothing is created in the root namespace. The
# hosts are set up for the config's lab mode (a `# lab: mode = MODE` line in it, else detected):
#   routed-static  h1 10.0.0.2/24, h2 10.1.0.2/24; each host's gateway is longhaul's port
#                  (10.0.0.1 / 10.1.0.1) through a static ARP entry for the port's MAC; the config
#                  has [[routes]] with next_hop_mac (perf/lab/lab-baseline.toml, lab-themis.toml)
#   routed-arp     the ports have addresses (perf/lab/lab-routed-arp.toml); each host gets the
#                  address after its port's (IPv4, and IPv6 when the port has one: IPv6 is then
#                  on in the hosts, without DAD, RAs or router solicitations) and uses the port's
#                  addresses as default gateways, with no static neighbour entry: longhaul answers
#                  ARP / neighbour solicitations and resolves the hosts itself
#   wire           the ports are a [[wire]] pair (perf/lab/lab-wire.toml): h1 10.0.0.2/24 and h2
#                  10.0.0.3/24 on one subnet, resolving each other by ARP through the bump
# Checks, each printing a PASS or FAIL line: ping both ways (TTL decremented by one when routed,
# unchanged through a wire pair; IPv6 too in routed-arp), a TCP transfer (sha256 of what
# arrives), captures on both hosts (source MAC = longhaul's egress port when routed, the other
# host's through a wire pair; TTL; checksums and RoCE ICRCs recomputed by
# pcap-tests/oracle/verify.py), the shipped RoCE trace (examples/roce-64flows.pcap, MACs
# rewritten by tcprewrite; in routed-arp and wire modes also its IPs, to h1 -> h2, with the
# ICRCs recomputed) replayed by tcpreplay and found byte-exact (as routed, or unchanged) on h2
# and decoded by tshark, a generated RoCE trace with ECN CE (THEMIS configs: a daemon message
# first, then CNPs expected back at h1 with valid ICRCs and CE cleared toward h2; other configs:
# CE kept, no CNPs), the hosts' neighbour entries (dynamic in routed-arp and wire modes),
# longhaul's ARP / ND frames decoded by scapy and its neighbour counters (routed-arp), longhaul's
# tx counters against the captures, no drops during the checks (routed-arp: only the first
# packets toward a host not resolved yet; before the checks, only drop.no_route of the hosts'
# kernels' own frames to neither host), and a clean stop. Exit status 1 if any check fails.
#
# --config FILE   longhaul config (default perf/lab/lab-baseline.toml; lab-themis.toml runs
#                 THEMIS, lab-routed-arp.toml and lab-wire.toml the other modes). It must have
#                 two DPDK ports on vdevs with iface=sw-h1 and iface=sw-h2 in [dpdk] eal_args.
#                 @RUN@ in the file is replaced by the run's id (use it in --file-prefix). The
#                 file is copied into the run's directory, so relative paths in it would break;
#                 vdev paths are relative to the repository root.
# --keep          leave the namespaces, longhaul and the run's directory (logs, captures) in
#                 place at the end, and print how to remove them.
# --rfc2544 SIZES after the checks, an RFC 2544 throughput search h1 -> h2 through longhaul for
#                 each frame size in the comma-separated list (perf/lab/rfc2544.py: zero-loss
#                 binary search under tcpreplay's top speed); results in the run's directory.
# --trial S       seconds per RFC 2544 trial (default 2; the RFC asks for 60).
#
# Environment: LONGHAUL_BIN (a longhaul binary built with --features dpdk; without it the script
# runs cargo build --release --features dpdk --locked and uses target/release/longhaul).
# Needs: iproute2, ethtool, tcpdump, tshark, tcpreplay (tcprewrite), iputils-ping, python3 with
# scapy.
set -Eeuo pipefail

usage() { sed -n '2,/^set -Eeuo/p' "$0" | sed '$d; s/^# \{0,1\}//'; }

CONFIG=
KEEP=0
RFC2544=
TRIAL=2
while [ $# -gt 0 ]; do
  case "$1" in
    --config) [ $# -ge 2 ] || { echo "--config needs a file" >&2; exit 2; }; CONFIG=$2; shift 2 ;;
    --config=*) CONFIG=${1#--config=}; shift ;;
    --keep) KEEP=1; shift ;;
    --rfc2544) [ $# -ge 2 ] || { echo "--rfc2544 needs frame sizes" >&2; exit 2; }; RFC2544=$2; shift 2 ;;
    --trial) [ $# -ge 2 ] || { echo "--trial needs seconds" >&2; exit 2; }; TRIAL=$2; shift 2 ;;
    -h | --help) usage; exit 0 ;;
    *) echo "unknown argument '$1' (try --help)" >&2; exit 2 ;;
  esac
done

# Paths given by the caller are relative to where it runs; then work from the repository root.
if [ -n "$CONFIG" ]; then
  CONFIG=$(realpath -e "$CONFIG") || { echo "FAIL: --config: no such file"; exit 1; }
fi
if [ -n "${LONGHAUL_BIN:-}" ]; then
  LONGHAUL_BIN=$(realpath -e "$LONGHAUL_BIN") || { echo "FAIL: LONGHAUL_BIN: no such file"; exit 1; }
fi
cd "$(dirname "$0")/../.."
ROOT=$PWD
CONFIG=${CONFIG:-$ROOT/perf/lab/lab-baseline.toml}
LAB_PY=(python3 "$ROOT/perf/lab/lab_check.py")

NPASS=0
NFAIL=0
pass() { echo "PASS: $*"; NPASS=$((NPASS + 1)); }
fail() { echo "FAIL: $*"; NFAIL=$((NFAIL + 1)); }
step() { echo "== $*"; }
indent() { sed 's/^/  /'; }

[ "$(id -u)" = 0 ] || { echo "FAIL: needs root (network namespaces, af_packet)"; exit 1; }
missing=()
for c in ip ethtool tcpdump tshark tcpreplay tcprewrite ping python3 sha256sum; do
  command -v "$c" >/dev/null 2>&1 || missing+=("$c")
done
python3 -c 'import scapy.contrib.roce' 2>/dev/null || missing+=("python3-scapy")
if [ ${#missing[@]} -gt 0 ]; then
  echo "FAIL: missing tools: ${missing[*]} (apt-get install iproute2 ethtool tcpdump tshark tcpreplay iputils-ping; pip install scapy)"
  exit 1
fi

RUN=lh$$
NS_SW=$RUN-sw
NS_H1=$RUN-h1
NS_H2=$RUN-h2
H1_MAC=02:00:00:00:10:01
H2_MAC=02:00:00:00:20:01
WORK=$(mktemp -d "/tmp/longhaul-lab-$RUN.XXXXXX")
CREATED_NS=()
LH_PID=
CAP_PIDS=()
T_START=$SECONDS

cleanup() {
  local rc=$?
  set +e
  trap - EXIT INT TERM ERR
  if [ "$KEEP" = 1 ]; then
    echo "== --keep: left in place: namespaces ${CREATED_NS[*]}, longhaul pid ${LH_PID:-none}, $WORK"
    echo "   remove with: kill ${LH_PID:-}; for n in ${CREATED_NS[*]}; do ip netns del \$n; done; rm -rf $WORK"
    exit "$rc"
  fi
  for p in "${CAP_PIDS[@]}"; do kill -INT "$p" 2>/dev/null; done
  if [ -n "$LH_PID" ] && kill -0 "$LH_PID" 2>/dev/null; then
    kill -TERM "$LH_PID"
    for _ in $(seq 50); do kill -0 "$LH_PID" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$LH_PID" 2>/dev/null
  fi
  for ns in "${CREATED_NS[@]}"; do
    # Anything still running in our own namespaces was started by this script.
    for p in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$p" 2>/dev/null; done
  done
  wait 2>/dev/null
  # Deleting a namespace destroys its end of each veth pair, and with it the pair.
  for ns in "${CREATED_NS[@]}"; do ip netns del "$ns" 2>/dev/null; done
  if [ "$rc" = 0 ] && [ "$NFAIL" = 0 ]; then
    rm -rf "$WORK"
  else
    echo "logs and captures kept in $WORK"
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'echo "FAIL: interrupted (SIGINT)"; exit 130' INT
trap 'echo "FAIL: terminated (SIGTERM)"; exit 143' TERM
trap 'echo "FAIL: netns.sh line $LINENO: a command failed (status $?); stopping"' ERR

# ---- the binary and the config --------------------------------------------------------------

if [ -n "${LONGHAUL_BIN:-}" ]; then
  LH=$LONGHAUL_BIN
else
  step "cargo build --release --features dpdk --locked"
  cargo build --release --features dpdk --locked
  LH=$ROOT/target/release/longhaul
fi
[ -x "$LH" ] || { echo "FAIL: $LH is not an executable"; exit 1; }

step "config $CONFIG (run $RUN, directory $WORK)"
sed "s/@RUN@/$RUN/g" "$CONFIG" >"$WORK/config.toml"
if out=$("$LH" check-config "$WORK/config.toml" 2>&1); then
  pass "check-config: ${out#"$WORK/"}"
else
  echo "$out"
  fail "check-config $CONFIG"
  exit 1
fi
CFG_API='' CFG_TOKEN='' CFG_PIPELINE='' CFG_MODE='' CFG_H1_PORT='' CFG_H1_PORT_MAC='' CFG_H2_PORT='' CFG_H2_PORT_MAC=''
CFG_H1_GW='' CFG_H1_ADDR='' CFG_H1_GW6='' CFG_H1_ADDR6='' CFG_H2_GW='' CFG_H2_ADDR='' CFG_H2_GW6='' CFG_H2_ADDR6=''
if ! cfg_vars=$("${LAB_PY[@]}" config "$WORK/config.toml" 2>&1); then
  fail "lab mode of $CONFIG: $cfg_vars"
  exit 1
fi
eval "$cfg_vars"
echo "mode $CFG_MODE, pipeline $CFG_PIPELINE; h1 on port $CFG_H1_PORT ($CFG_H1_PORT_MAC), h2 on port $CFG_H2_PORT ($CFG_H2_PORT_MAC); API $CFG_API"
# What each mode sets up on the hosts and expects. H?_ADDR: address/len; H?_GW: the default
# gateway (none through a wire pair); *6: IPv6 (routed-arp only); NEXT_MAC: the destination MAC
# of what h1 sends toward h2; AT_H?_SRC_MAC: the source MAC of frames from the other side as the
# host receives them; FROM_H?: the source addresses of h1's (h2's) traffic, replayed traces
# included; TRACE_SRC/DST: the IPs the shipped trace is rewritten to (empty: kept).
H1_ADDR6='' H2_ADDR6='' H1_GW6='' H2_GW6=''
case "$CFG_MODE" in
  routed-static)
    H1_ADDR=10.0.0.2/24 H2_ADDR=10.1.0.2/24 H1_GW=10.0.0.1 H2_GW=10.1.0.1
    TTL_DEC=1
    FROM_H1=10.0.0.0/24 FROM_H2=10.1.0.0/16 # the shipped trace's 10.0.0.x -> 10.1.0.x
    ;;
  routed-arp)
    H1_ADDR=$CFG_H1_ADDR H2_ADDR=$CFG_H2_ADDR H1_GW=$CFG_H1_GW H2_GW=$CFG_H2_GW
    H1_ADDR6=$CFG_H1_ADDR6 H2_ADDR6=$CFG_H2_ADDR6 H1_GW6=$CFG_H1_GW6 H2_GW6=$CFG_H2_GW6
    TTL_DEC=1
    ;;
  wire)
    H1_ADDR=10.0.0.2/24 H2_ADDR=10.0.0.3/24 H1_GW='' H2_GW=''
    TTL_DEC=0
    ;;
  *) fail "unknown lab mode '$CFG_MODE'"; exit 1 ;;
esac
H1_IP=${H1_ADDR%/*} H2_IP=${H2_ADDR%/*} H1_IP6=${H1_ADDR6%/*} H2_IP6=${H2_ADDR6%/*}
if [ "$CFG_MODE" = wire ]; then
  NEXT_MAC=$H2_MAC AT_H2_SRC_MAC=$H1_MAC AT_H1_SRC_MAC=$H2_MAC
  DAEMON_TO=$H2_IP # any address on the link: dc0 takes UDP to port 12345 off the wire
else
  NEXT_MAC=$CFG_H1_PORT_MAC AT_H2_SRC_MAC=$CFG_H2_PORT_MAC AT_H1_SRC_MAC=$CFG_H1_PORT_MAC
  DAEMON_TO=$H1_GW
fi
if [ "$CFG_MODE" = routed-static ]; then
  TRACE_SRC='' TRACE_DST=''
else
  FROM_H1=$H1_IP FROM_H2=$H2_IP TRACE_SRC=$H1_IP TRACE_DST=$H2_IP
fi
EXP_TTL=$((64 - TTL_DEC))
CTL=("$LH" ctl --addr "$CFG_API")
if [ -n "$CFG_TOKEN" ]; then CTL+=(--token "$CFG_TOKEN"); fi

# ---- topology ---------------------------------------------------------------------------------

step "namespaces $NS_SW $NS_H1 $NS_H2, veth pairs h1:eth0 - sw:sw-h1, h2:eth0 - sw:sw-h2"
if [ -n "$H1_ADDR6" ] && [ ! -d /proc/sys/net/ipv6 ]; then
  fail "mode $CFG_MODE: the config's ports have IPv6 addresses, but this kernel has no IPv6"
  exit 1
fi
for ns in "$NS_SW" "$NS_H1" "$NS_H2"; do
  if ip netns list | grep -qw "^$ns"; then echo "FAIL: namespace $ns exists already"; exit 1; fi
  ip netns add "$ns"
  CREATED_NS+=("$ns")
  ip -n "$ns" link set lo up
  [ -d /proc/sys/net/ipv6 ] || continue
  if [ "$ns" != "$NS_SW" ] && [ -n "$H1_ADDR6" ]; then
    # IPv6 on the hosts (before their eth0 exists, so that it inherits "default"): no duplicate
    # address detection (the addresses are ours; nothing waits), no router advertisements or
    # solicitations (the gateway is configured, longhaul sends no RAs), and the MLD reports of
    # the link coming up sent within milliseconds (rather than over a second), before longhaul
    # starts (see the wait below).
    ip netns exec "$ns" sysctl -qw net.ipv6.conf.all.accept_dad=0 net.ipv6.conf.default.accept_dad=0 \
      net.ipv6.conf.all.accept_ra=0 net.ipv6.conf.default.accept_ra=0 \
      net.ipv6.conf.all.router_solicitations=0 net.ipv6.conf.default.router_solicitations=0 \
      net.ipv6.conf.default.mldv1_unsolicited_report_interval=10 \
      net.ipv6.conf.default.mldv2_unsolicited_report_interval=10
  else
    # No IPv6: no router solicitations, MLD or DAD frames through the switch.
    ip netns exec "$ns" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1
  fi
done
ip -n "$NS_SW" link add sw-h1 type veth peer name eth0 netns "$NS_H1"
ip -n "$NS_SW" link add sw-h2 type veth peer name eth0 netns "$NS_H2"
setup_host() { # ns mac addr/len gateway gateway-mac addr6/len gateway6
  ip -n "$1" link set eth0 address "$2" mtu 1500
  ip -n "$1" addr add "$3" dev eth0
  if [ -n "$6" ]; then ip -n "$1" addr add "$6" dev eth0 nodad; fi
  # The kernel's checksums and segments as they are on the wire: af_packet hands longhaul the
  # frames as the veth carries them (a partial checksum or a 64 KB GSO frame otherwise).
  ip netns exec "$1" ethtool -K eth0 tx off tso off gso off gro off >/dev/null
  ip -n "$1" link set eth0 up
  # routed-static: the gateway's MAC as a static entry; routed-arp: none (ARP / ND); wire: no
  # gateway (one subnet, ARP through the bump).
  if [ -n "$5" ]; then ip -n "$1" neigh replace "$4" lladdr "$5" dev eth0 nud permanent; fi
  if [ -n "$4" ]; then ip -n "$1" route add default via "$4" dev eth0; fi
  if [ -n "$7" ]; then ip -n "$1" -6 route add default via "$7" dev eth0; fi
}
if [ "$CFG_MODE" = routed-static ]; then
  H1_GW_MAC=$CFG_H1_PORT_MAC H2_GW_MAC=$CFG_H2_PORT_MAC
else
  H1_GW_MAC='' H2_GW_MAC=''
fi
setup_host "$NS_H1" "$H1_MAC" "$H1_ADDR" "$H1_GW" "$H1_GW_MAC" "$H1_ADDR6" "$H1_GW6"
setup_host "$NS_H2" "$H2_MAC" "$H2_ADDR" "$H2_GW" "$H2_GW_MAC" "$H2_ADDR6" "$H2_GW6"
for i in sw-h1 sw-h2; do
  ip -n "$NS_SW" link set "$i" mtu 1500
  ip netns exec "$NS_SW" ethtool -K "$i" tx off tso off gso off gro off >/dev/null
  ip -n "$NS_SW" link set "$i" up
done
if [ -n "$H1_ADDR6" ]; then
  # IPv6 hosts announce their multicast groups (MLD reports to ff02::16) when the link comes up.
  # longhaul does not take part in MLD: on a routed port it would count each report as
  # drop.no_route (no route to ff02::16). Let them go out before longhaul starts: the link-local
  # address appears when the carrier is up, the reports follow within a few tens of ms.
  for ns in "$NS_H1" "$NS_H2"; do
    for _ in $(seq 150); do
      if ip -n "$ns" -6 addr show dev eth0 scope link | grep -q fe80; then break; fi
      sleep 0.02
    done
  done
  sleep 0.2
fi

# ---- captures ---------------------------------------------------------------------------------

capture() { # ns interface file: what the interface receives
  ip netns exec "$1" tcpdump -i "$2" -Q in -n --immediate-mode -U -s 0 -B 8192 -Z root -w "$3" 2>"$3.log" &
  CAP_PIDS+=($!)
  for _ in $(seq 100); do
    grep -q "listening on" "$3.log" 2>/dev/null && return 0
    sleep 0.05
  done
  cat "$3.log"
  return 1
}
stop_captures() {
  for p in "${CAP_PIDS[@]}"; do kill -INT "$p" 2>/dev/null || true; done
  for p in "${CAP_PIDS[@]}"; do wait "$p" || true; done
  CAP_PIDS=()
}

# What the hosts' kernels send toward longhaul before the checks start (longhaul's side of each
# veth pair): shown if longhaul counted drops then (see "longhaul's counters").
capture "$NS_SW" sw-h1 "$WORK/pre-sw-h1.pcap" || { fail "tcpdump did not start on sw-h1"; exit 1; }
capture "$NS_SW" sw-h2 "$WORK/pre-sw-h2.pcap" || { fail "tcpdump did not start on sw-h2"; exit 1; }

# ---- longhaul ---------------------------------------------------------------------------------

step "longhaul run in $NS_SW"
T_LH=$(date +%s.%N)
ip netns exec "$NS_SW" "$LH" run --config "$WORK/config.toml" >"$WORK/longhaul.out" 2>"$WORK/longhaul.err" &
LH_PID=$!
T0=$SECONDS
up=0
for _ in $(seq 300); do
  if ip netns exec "$NS_SW" "${CTL[@]}" health >"$WORK/health.json" 2>&1; then
    up=1
    break
  fi
  kill -0 "$LH_PID" 2>/dev/null || break
  sleep 0.1
done
if [ "$up" = 1 ]; then
  pass "longhaul up: management API health answered after $((SECONDS - T0)) s ($(wc -l <"$WORK/longhaul.err") lines on stderr)"
else
  sed 's/^/  longhaul: /' "$WORK/longhaul.err"
  fail "longhaul did not come up within 30 s (management API $CFG_API in $NS_SW)"
  exit 1
fi

capture "$NS_H1" eth0 "$WORK/h1.pcap" || { fail "tcpdump did not start on h1"; exit 1; }
capture "$NS_H2" eth0 "$WORK/h2.pcap" || { fail "tcpdump did not start on h2"; exit 1; }
sleep 0.3
ip netns exec "$NS_SW" "${CTL[@]}" stats --json >"$WORK/stats0.json"
# The switch-side captures end here (the host captures go on): the traffic below is the lab's.
kill -INT "${CAP_PIDS[0]}" "${CAP_PIDS[1]}" 2>/dev/null || true
wait "${CAP_PIDS[0]}" "${CAP_PIDS[1]}" || true
CAP_PIDS=("${CAP_PIDS[@]:2}")

# ---- traffic ----------------------------------------------------------------------------------

FIRST_LOST=0
first_contact() { # from-ns to-ip label
  # longhaul knows neither host yet: it learns h1 from h1's own ARP request / neighbour
  # solicitation for its gateway, but must solicit h2, and drops the packet that needed h2's MAC
  # (drop.neighbor_unresolved); the kernel's ping does not retransmit, the next request passes.
  local out received
  out=$(ip netns exec "$1" ping -n -c 3 -i 0.1 -W 1 "$2" 2>&1) || true
  received=$(sed -n 's/.* \([0-9][0-9]*\) received.*/\1/p' <<<"$out")
  FIRST_LOST=$((FIRST_LOST + 3 - ${received:-0}))
  if [ "${received:-0}" -ge 1 ]; then
    pass "first contact $3: ${received}/3 replies ($((3 - received)) lost while longhaul resolved the next hop)"
  else
    indent <<<"$out"
    fail "first contact $3: no reply in 3 pings: longhaul did not resolve the next hop"
  fi
}
ping_check() { # from-ns to-ip label
  local out received ttls
  out=$(ip netns exec "$1" ping -n -c 5 -i 0.1 -W 2 "$2" 2>&1) || true
  received=$(sed -n 's/.* \([0-9][0-9]*\) received.*/\1/p' <<<"$out")
  ttls=$(grep -o 'ttl=[0-9]*' <<<"$out" | sort | uniq -c | awk '{printf "%s%s x%s", s, $2, $1; s=", "}') || true
  if [ "${received:-0}" = 5 ] && [ "$ttls" = "ttl=$EXP_TTL x5" ]; then
    pass "ping $3: 5/5 replies, $ttls ($(tail -n 1 <<<"$out"))"
  else
    indent <<<"$out"
    fail "ping $3: ${received:-0}/5 replies, TTLs: ${ttls:-none} (expected ttl=$EXP_TTL)"
  fi
}
if [ "$CFG_MODE" = routed-arp ]; then
  step "first contact: the hosts resolve their gateways, longhaul resolves the hosts (3 pings each)"
  first_contact "$NS_H1" "$H2_IP" "h1 -> h2"
  if [ -n "$H2_IP6" ]; then first_contact "$NS_H1" "$H2_IP6" "h1 -> h2 (IPv6)"; fi
fi
step "ping"
ping_check "$NS_H1" "$H2_IP" "h1 -> h2"
ping_check "$NS_H2" "$H1_IP" "h2 -> h1"
if [ -n "$H2_IP6" ]; then
  ping_check "$NS_H1" "$H2_IP6" "h1 -> h2 (IPv6, hop limit)"
  ping_check "$NS_H2" "$H1_IP6" "h2 -> h1 (IPv6, hop limit)"
fi

step "TCP h1 -> h2, 8 MiB"
head -c $((8 << 20)) /dev/urandom >"$WORK/tcp.bin"
ip netns exec "$NS_H2" "${LAB_PY[@]}" tcp-sink --timeout 15 "$H2_IP" 5001 "$WORK/tcp.recv" >"$WORK/tcp-sink.log" 2>&1 &
SINK_PID=$!
for _ in $(seq 100); do grep -q listening "$WORK/tcp-sink.log" && break; sleep 0.05; done
if send_out=$(ip netns exec "$NS_H1" "${LAB_PY[@]}" tcp-send --timeout 15 "$H2_IP" 5001 "$WORK/tcp.bin" 2>&1) &&
  wait "$SINK_PID"; then
  want=$(sha256sum <"$WORK/tcp.bin" | cut -d' ' -f1)
  got=$(sha256sum <"$WORK/tcp.recv" | cut -d' ' -f1)
  if [ "$want" = "$got" ]; then
    pass "TCP h1 -> h2: $send_out, sha256 ${got:0:16}... identical"
  else
    fail "TCP h1 -> h2: $(stat -c %s "$WORK/tcp.recv") bytes arrived, sha256 $got != $want"
  fi
else
  indent <<<"$send_out"
  indent <"$WORK/tcp-sink.log"
  fail "TCP h1 -> h2: transfer failed"
fi

if [ -z "$TRACE_DST" ]; then
  step "tcpreplay of examples/roce-64flows.pcap from h1 (MACs rewritten by tcprewrite)"
  tcprewrite --enet-smac="$H1_MAC" --enet-dmac="$NEXT_MAC" \
    -i examples/roce-64flows.pcap -o "$WORK/roce64.pcap"
else
  # tcprewrite would rewrite the IPs but leave the ICRCs invalid: lab_check.py recomputes them.
  step "tcpreplay of examples/roce-64flows.pcap from h1 (MACs and IPs rewritten to h1 -> h2, ICRCs recomputed)"
  "${LAB_PY[@]}" retarget examples/roce-64flows.pcap "$WORK/roce64.pcap" \
    --src-mac "$H1_MAC" --dst-mac "$NEXT_MAC" --src "$TRACE_SRC" --dst "$TRACE_DST"
fi
if out=$(ip netns exec "$NS_H1" tcpreplay -i eth0 --pps=5000 "$WORK/roce64.pcap" 2>&1); then
  pass "tcpreplay: $(sed -n 's/^ *\(Actual: .*\)/\1/p' <<<"$out")"
else
  indent <<<"$out"
  fail "tcpreplay of $WORK/roce64.pcap failed"
fi

CE_N=32
CQPN=0x111
SQPN=0x222
step "RoCE with ECN CE from h1 ($CE_N SEND_ONLY to $H2_IP, DestQP $SQPN; pipeline $CFG_PIPELINE)"
"${LAB_PY[@]}" gen-roce "$WORK/roce-ce.pcap" --src-mac "$H1_MAC" --dst-mac "$NEXT_MAC" \
  --src "$H1_IP" --dst "$H2_IP" --dqpn "$SQPN" --count "$CE_N" --ce
if [ "$CFG_PIPELINE" = themis ]; then
  # THEMIS's host daemon would announce the QP: (client, destination, sQPN) -> cQPN.
  ip netns exec "$NS_H1" "${LAB_PY[@]}" send-daemon "$DAEMON_TO" "$H2_IP" "$CQPN" "$SQPN" 1
  sleep 0.3 # the control thread installs the QP_field entry
  EXP_ECN=2 # CE cleared to ECT(0) by PNP
else
  EXP_ECN=3 # CE kept
fi
# 5 ms apart, far more than a CNP interval (50 us): under THEMIS each CE packet is normally due a
# CNP (but a busy machine can bunch frames up: see the CNP check).
if out=$(ip netns exec "$NS_H1" tcpreplay -i eth0 --pps=200 "$WORK/roce-ce.pcap" 2>&1); then
  pass "tcpreplay: $(sed -n 's/^ *\(Actual: .*\)/\1/p' <<<"$out")"
else
  indent <<<"$out"
  fail "tcpreplay of $WORK/roce-ce.pcap failed"
fi

sleep 0.5 # stats_interval and the last frames
ip netns exec "$NS_SW" "${CTL[@]}" stats --json >"$WORK/stats1.json"
stop_captures

# ---- what the hosts received --------------------------------------------------------------------

# Frames in a capture matching a display filter (one field per frame: a summary line can hold a
# payload's newline).
nframes() { # capture [filter]
  tshark -r "$1" -d udp.port==4791,infiniband -Y "${2:-frame}" -T fields -e frame.number 2>/dev/null | wc -l
}
CAP_H1=$(nframes "$WORK/h1.pcap")
CAP_H2=$(nframes "$WORK/h2.pcap")
step "captures: h1 received $CAP_H1 frames, h2 $CAP_H2"
for h in h1 h2; do
  dropped=$(sed -n 's/^\([0-9]*\) packets dropped by kernel$/\1/p' "$WORK/$h.pcap.log")
  [ "${dropped:-0}" = 0 ] || fail "tcpdump on $h: $dropped packets dropped by kernel"
done
if [ "$CFG_MODE" = wire ]; then
  SRC_WHO="the sending host's own: not rewritten" MAC_WHAT="no MAC rewrite"
else
  SRC_WHO="longhaul's egress port" MAC_WHAT="MAC rewrite"
fi
mac_check() { # capture ip|ipv6 from-prefix source-mac host-mac label
  # Forwarded frames only: CNPs (BTH opcode 0x81) are longhaul's own (THEMIS), checked below.
  local sel rows others ttl=ip.ttl fam=IPv4
  if [ "$2" = ipv6 ]; then ttl=ipv6.hlim fam=IPv6; fi
  sel="$2.src == $3 && !(infiniband.bth.opcode == 0x81 && !icmp)"
  # One line per (source MAC, destination MAC, TTL) with its count: a single tshark pass.
  rows=$(tshark -r "$1" -d udp.port==4791,infiniband -Y "$sel" -T fields -E occurrence=f -e eth.src -e eth.dst -e "$ttl" 2>/dev/null |
    sort | uniq -c) || true
  others=$(awk -v s="$4" -v d="$5" -v t="$EXP_TTL" '!($2 == s && $3 == d && $4 == t)' <<<"$rows")
  rows=$(awk '{printf "%s%s -> %s ttl %s: %s", s, $2, $3, $4, $1; s="; "}' <<<"$rows")
  if [ -n "$rows" ] && [ -z "$others" ]; then
    pass "$6: every $fam frame from $3 has source MAC $4 ($SRC_WHO), destination $5, TTL $EXP_TTL ($rows)"
  else
    fail "$6: $fam frames from $3: ${rows:-none} (expected $4 -> $5 ttl $EXP_TTL only)"
  fi
}
mac_check "$WORK/h2.pcap" ip "$FROM_H1" "$AT_H2_SRC_MAC" "$H2_MAC" "$MAC_WHAT toward h2 (capture on h2)"
mac_check "$WORK/h1.pcap" ip "$FROM_H2" "$AT_H1_SRC_MAC" "$H1_MAC" "$MAC_WHAT toward h1 (capture on h1)"
if [ -n "$H1_IP6" ]; then
  mac_check "$WORK/h2.pcap" ipv6 "$H1_IP6" "$AT_H2_SRC_MAC" "$H2_MAC" "$MAC_WHAT toward h2 (capture on h2)"
  mac_check "$WORK/h1.pcap" ipv6 "$H2_IP6" "$AT_H1_SRC_MAC" "$H1_MAC" "$MAC_WHAT toward h1 (capture on h1)"
fi
if [ "$CFG_MODE" = wire ]; then
  # Through the bump, each host receives only the other's frames, ARP included: every frame
  # at h2 is from h1's MAC, and every frame at h1 (THEMIS's CNPs too) from h2's.
  all_from() { # capture source-mac label
    local rows others
    rows=$(tshark -r "$1" -d udp.port==4791,infiniband -T fields -e eth.src -e _ws.col.Protocol 2>/dev/null |
      sort | uniq -c) || true
    others=$(awk -v s="$2" '$2 != s' <<<"$rows")
    rows=$(awk '{printf "%s%s %s: %s", s, $2, $3, $1; s="; "}' <<<"$rows")
    if [ -n "$rows" ] && [ -z "$others" ]; then
      pass "$3: every frame has source MAC $2 ($rows)"
    else
      fail "$3: frames by source MAC and protocol: ${rows:-none} (expected $2 only)"
    fi
  }
  all_from "$WORK/h2.pcap" "$H1_MAC" "wire: all frames at h2 are h1's, unchanged"
  all_from "$WORK/h1.pcap" "$H2_MAC" "wire: all frames at h1 are h2's (CNPs: the data's MACs swapped)"
fi

for h in h1 h2; do
  if out=$(python3 pcap-tests/oracle/verify.py "$WORK/$h.pcap" 2>&1); then
    pass "checksums on $h (pcap-tests/oracle/verify.py: IPv4 header, TCP and UDP checksums, RoCE ICRCs recomputed): $(tail -n 1 <<<"$out")"
  else
    head -n 20 <<<"$out" | indent
    fail "checksums on $h: pcap-tests/oracle/verify.py found violations"
  fi
done

if out=$("${LAB_PY[@]}" forwarded "$WORK/roce64.pcap" "$WORK/h2.pcap" \
  --src-mac "$AT_H2_SRC_MAC" --dst-mac "$H2_MAC" --ttl-dec "$TTL_DEC" 2>&1); then
  pass "shipped RoCE trace at h2: $out"
else
  fail "shipped RoCE trace at h2: $out"
fi
# tshark's own RoCE decode: BTH opcodes and how many of each ("1 x896, 2 x64 (960)").
decode() { # capture filter
  tshark -r "$1" -d udp.port==4791,infiniband -Y "$2" -T fields -e infiniband.bth.opcode 2>/dev/null |
    sort | uniq -c | awk '{printf "%s%s x%s", s, $2, $1; n += $1; s=", "} END {printf "%s (%d)", (n ? "" : "none"), n}'
}
want=$(decode "$WORK/roce64.pcap" "infiniband.bth.opcode")
# (ICMP errors quote RoCE packets too: left out.)
got=$(decode "$WORK/h2.pcap" "infiniband.bth.destqp != $SQPN && infiniband.bth.opcode && !icmp")
if [ "$got" = "$want" ]; then
  pass "tshark decodes the replayed trace at h2 as RoCE: BTH opcodes $got"
else
  fail "tshark at h2: BTH opcodes $got, sent $want"
fi
got=$(decode "$WORK/h2.pcap" "infiniband.bth.destqp == $SQPN && infiniband.bth.opcode == 0x04 && !icmp")
if [ "$got" = "4 x$CE_N ($CE_N)" ]; then
  pass "tshark decodes the CE trace at h2: BTH opcodes $got"
else
  fail "tshark at h2, CE trace: BTH opcodes $got, expected 4 x$CE_N ($CE_N)"
fi
ecn_names=([2]="ECT(0): CE cleared" [3]="CE kept")
if out=$("${LAB_PY[@]}" ecn "$WORK/h2.pcap" --src "$H1_IP" --dst "$H2_IP" --dqpn "$SQPN" --count "$CE_N" --ecn "$EXP_ECN" 2>&1); then
  pass "ECN at h2 (${ecn_names[$EXP_ECN]}, pipeline $CFG_PIPELINE): $out"
else
  fail "ECN at h2 (pipeline $CFG_PIPELINE): $out"
fi
# CNPs. Baseline: none. THEMIS: PNP sends at most one CNP per QP per cnp_interval_ns, so a CE
# packet that reaches the switch within the interval after one that made a CNP is suppressed: the
# paced frames can still arrive bunched up when the machine is busy (seen once: two of them 6 us
# apart at h2, 31 CNPs and 1 suppression). So: every CE packet made a CNP or was suppressed, at
# least one CNP was made, and every CNP longhaul counts as sent arrived at h1, valid.
EXP_CNPS=0
if [ "$CFG_PIPELINE" = themis ]; then
  read -r GEN SUP SENT < <("${LAB_PY[@]}" counter "$WORK/stats0.json" "$WORK/stats1.json" \
    themis.pnp.generated themis.pnp.suppressed themis.cnps_sent | paste -sd' ')
  if [ $((GEN + SUP)) = "$CE_N" ] && [ "$GEN" -ge 1 ] && [ "$SENT" = "$GEN" ]; then
    pass "PNP accounted for every CE packet: $GEN CNPs generated + $SUP suppressed within cnp_interval_ns = $CE_N (themis.cnps_sent $SENT)"
  else
    fail "PNP: themis.pnp.generated $GEN + suppressed $SUP, expected $CE_N in all and at least 1 generated; themis.cnps_sent $SENT"
  fi
  EXP_CNPS=$SENT
fi
# At h1: tshark's count (BTH opcode 0x81 = 129) and lab_check.py's field and ICRC checks.
got=$(decode "$WORK/h1.pcap" "infiniband.bth.opcode == 0x81 && !icmp")
want="none (0)"
[ "$EXP_CNPS" = 0 ] || want="129 x$EXP_CNPS ($EXP_CNPS)"
if out=$("${LAB_PY[@]}" cnps "$WORK/h1.pcap" --count "$EXP_CNPS" --dqpn "$CQPN" --src "$H2_IP" --dst "$H1_IP" \
  --eth-src "$AT_H1_SRC_MAC" --eth-dst "$H1_MAC" 2>&1) && [ "$got" = "$want" ]; then
  pass "CNPs at h1 (pipeline $CFG_PIPELINE): $out; tshark BTH opcodes: $got"
else
  fail "CNPs at h1 (pipeline $CFG_PIPELINE): $out; tshark BTH opcodes: $got, expected: $want"
fi

# ---- neighbours ---------------------------------------------------------------------------------

neigh_check() { # ns -4|-6 address expected-mac label
  # A dynamic entry (learned from ARP / ND, in a state the kernel reached by itself), not one the
  # script wrote (PERMANENT / NOARP), with the expected MAC.
  local out mac state
  out=$(ip -n "$1" "$2" neigh show "$3" dev eth0 | sed 's/ *$//')
  mac=$(sed -n 's/.* lladdr \([0-9a-f:]*\).*/\1/p' <<<"$out")
  state=$(awk '{print $NF}' <<<"$out")
  if [ "$mac" = "$4" ] && [[ $state =~ ^(REACHABLE|STALE|DELAY|PROBE)$ ]]; then
    pass "$5: '$out' (learned dynamically)"
  else
    fail "$5: '${out:-no entry}', expected lladdr $4 in a dynamic state (REACHABLE, STALE, DELAY or PROBE)"
  fi
}
case "$CFG_MODE" in
  routed-arp)
    step "neighbour tables of the hosts, longhaul's ARP / ND frames and counters"
    neigh_check "$NS_H1" -4 "$H1_GW" "$CFG_H1_PORT_MAC" "h1's neighbour entry for its gateway"
    neigh_check "$NS_H2" -4 "$H2_GW" "$CFG_H2_PORT_MAC" "h2's neighbour entry for its gateway"
    if [ -n "$H1_GW6" ]; then
      neigh_check "$NS_H1" -6 "$H1_GW6" "$CFG_H1_PORT_MAC" "h1's IPv6 neighbour entry for its gateway"
      neigh_check "$NS_H2" -6 "$H2_GW6" "$CFG_H2_PORT_MAC" "h2's IPv6 neighbour entry for its gateway"
    fi
    # Every ARP / ND frame longhaul sent, as each host received it, checked by scapy.
    declare -A NEIGH=()
    for h in h1 h2; do
      if [ $h = h1 ]; then
        args=(--port-mac "$CFG_H1_PORT_MAC" --port-ip "$H1_GW" --port-ip6 "$H1_GW6" --host-mac "$H1_MAC" --host-ip "$H1_IP" --host-ip6 "$H1_IP6")
      else
        args=(--port-mac "$CFG_H2_PORT_MAC" --port-ip "$H2_GW" --port-ip6 "$H2_GW6" --host-mac "$H2_MAC" --host-ip "$H2_IP" --host-ip6 "$H2_IP6")
      fi
      if out=$("${LAB_PY[@]}" neighbor "$WORK/$h.pcap" "${args[@]}" 2>&1); then
        pass "longhaul's ARP / ND frames at $h: $(grep -v '^NEIGH_' <<<"$out")"
      else
        fail "longhaul's ARP / ND frames at $h: $(grep -v '^NEIGH_' <<<"$out")"
      fi
      while IFS='=' read -r k v; do
        NEIGH[$k]=$((${NEIGH[$k]:-0} + v))
      done < <(grep '^NEIGH_[A-Z_]*=[0-9]*$' <<<"$out")
    done
    read -r N_ARP N_ND N_SOL N_PROBED N_LEARNED N_NFU N_INVALID < <("${LAB_PY[@]}" counter "$WORK/stats0.json" "$WORK/stats1.json" \
      neighbor.arp_answered neighbor.nd_answered neighbor.solicited neighbor.probed neighbor.learned \
      neighbor.not_for_us neighbor.invalid | paste -sd' ')
    c_req=$((${NEIGH[NEIGH_ARP_REQUEST]:-0} + ${NEIGH[NEIGH_NS]:-0}))
    c_probe=$((${NEIGH[NEIGH_ARP_PROBE]:-0} + ${NEIGH[NEIGH_NS_PROBE]:-0}))
    want6=0
    if [ -n "$H1_GW6" ]; then want6=1; fi
    if [ "$N_ARP" -gt 0 ] && [ "$N_ARP" = "${NEIGH[NEIGH_ARP_REPLY]:-0}" ] &&
      { [ "$want6" = 0 ] || [ "$N_ND" -gt 0 ]; } && [ "$N_ND" = "${NEIGH[NEIGH_NA]:-0}" ] &&
      [ "$N_SOL" -gt 0 ] && [ "$N_SOL" = "$c_req" ] && [ "$N_PROBED" = "$c_probe" ] && [ "$N_INVALID" = 0 ]; then
      pass "longhaul's neighbour counters match the captures: neighbor.arp_answered $N_ARP = ARP replies, neighbor.nd_answered $N_ND = NAs, neighbor.solicited $N_SOL = broadcast ARP requests + multicast NSs, neighbor.probed $N_PROBED = unicast ones (neighbor.learned $N_LEARNED, neighbor.not_for_us $N_NFU, neighbor.invalid 0)"
    else
      fail "longhaul's neighbour counters: neighbor.arp_answered $N_ARP (ARP replies captured ${NEIGH[NEIGH_ARP_REPLY]:-0}), nd_answered $N_ND (NAs ${NEIGH[NEIGH_NA]:-0}), solicited $N_SOL (requests + NSs $c_req), probed $N_PROBED (unicast $c_probe), invalid $N_INVALID; expected equal, answered and solicited > 0"
    fi
    ;;
  wire)
    step "neighbour tables of the hosts (ARP through the wire pair)"
    neigh_check "$NS_H1" -4 "$H2_IP" "$H2_MAC" "h1's neighbour entry for h2 (h2's own MAC, through the bump)"
    neigh_check "$NS_H2" -4 "$H1_IP" "$H1_MAC" "h2's neighbour entry for h1"
    arps=$(nframes "$WORK/h2.pcap" "arp && eth.src == $H1_MAC && arp.src.hw_mac == $H1_MAC && arp.dst.proto_ipv4 == $H2_IP")
    arpr=$(nframes "$WORK/h1.pcap" "arp && eth.src == $H2_MAC && arp.src.hw_mac == $H2_MAC && arp.src.proto_ipv4 == $H2_IP")
    if [ "$arps" -ge 1 ] && [ "$arpr" -ge 1 ]; then
      pass "ARP through the wire pair: h2 received $arps ARP frame(s) from h1 about $H2_IP, h1 received $arpr from h2 with h2's MAC"
    else
      fail "ARP through the wire pair: h2 received $arps ARP frames from h1 about $H2_IP, h1 $arpr from h2 (expected at least one each)"
    fi
    ;;
esac

# ---- longhaul's counters ------------------------------------------------------------------------

step "longhaul counters (ctl stats)"
stats=$("${LAB_PY[@]}" stats "$WORK/stats0.json" "$WORK/stats1.json")
sed '/=/d' <<<"$stats"
TX_H1=$(sed -n "s/^TX_$CFG_H1_PORT=//p" <<<"$stats")
TX_H2=$(sed -n "s/^TX_$CFG_H2_PORT=//p" <<<"$stats")
DROPS=$(sed -n 's/^DROPS=//p' <<<"$stats")
ERRORS=$(sed -n 's/^ERRORS=//p' <<<"$stats")
if [ "$TX_H1" = "$CAP_H1" ] && [ "$TX_H2" = "$CAP_H2" ]; then
  pass "longhaul's tx counters match the captures: $CFG_H1_PORT sent $TX_H1 = h1 received $CAP_H1, $CFG_H2_PORT sent $TX_H2 = h2 received $CAP_H2"
else
  fail "longhaul's tx counters vs captures: $CFG_H1_PORT sent $TX_H1, h1 received $CAP_H1; $CFG_H2_PORT sent $TX_H2, h2 received $CAP_H2"
fi
if [ "$CFG_MODE" = routed-arp ]; then
  # The only drops expected: the first packets toward a host longhaul had not resolved yet, one
  # per ping lost in the first contact (nothing else meets an unresolved neighbour).
  UNRES=$(sed -n 's/^DROP_neighbor_unresolved=//p' <<<"$stats")
  if [ "$ERRORS" = 0 ] && [ "$DROPS" = "${UNRES:-0}" ] && [ "${UNRES:-0}" = "$FIRST_LOST" ] && [ "$FIRST_LOST" -ge 1 ]; then
    pass "drops: only drop.neighbor_unresolved $UNRES = the $FIRST_LOST first-contact pings lost while longhaul resolved the next hop; no rx/tx errors"
  else
    fail "longhaul counted $DROPS drops (drop.neighbor_unresolved ${UNRES:-0}; first-contact pings lost: $FIRST_LOST; expected equal, at least 1, and no other drop) and $ERRORS rx/tx errors (above)"
  fi
else
  if [ "$DROPS" = 0 ] && [ "$ERRORS" = 0 ]; then
    pass "no drops, no rx/tx errors in longhaul's counters"
  else
    fail "longhaul counted $DROPS drops and $ERRORS rx/tx errors (above)"
  fi
fi
# Before the checks the hosts send nothing of the lab's, but their kernels may (an IPv6 or ARP
# frame of their own): a routed port rightly drops what it has no route for, as drop.no_route. Each
# such drop must match a frame the hosts sent toward longhaul after it started, to neither host.
BEFORE=$(sed -n 's/^DROPS_BEFORE=//p' <<<"$stats")
if [ "$BEFORE" != 0 ]; then
  BEFORE_NR=$(sed -n 's/^DROPS_BEFORE_NO_ROUTE=//p' <<<"$stats")
  to_hosts="ip.dst == $H1_IP || ip.dst == $H2_IP"
  if [ -n "$H1_IP6" ]; then to_hosts+=" || ipv6.dst == $H1_IP6 || ipv6.dst == $H2_IP6"; fi
  stray="frame.time_epoch >= $T_LH && !($to_hosts)"
  n_stray=0
  for i in sw-h1 sw-h2; do
    echo "  frames from ${i#sw-} toward longhaul after it started, before the checks, to neither host:"
    tshark -r "$WORK/pre-$i.pcap" -Y "$stray" 2>/dev/null | indent
    n_stray=$((n_stray + $(nframes "$WORK/pre-$i.pcap" "$stray")))
  done
  if [ "$CFG_MODE" != wire ] && [ "$BEFORE_NR" = "$BEFORE" ] && [ "$BEFORE" -le "$n_stray" ]; then
    pass "before the checks: drop.no_route $BEFORE, within the $n_stray frames the hosts' kernels sent to neither host (above)"
  else
    fail "before the checks: longhaul counted $BEFORE drops (drop.no_route ${BEFORE_NR:-0}), the hosts sent $n_stray frames to neither host (expected: only drop.no_route, at most that many; none through a wire pair)"
  fi
fi
if [ "$CFG_MODE" = wire ]; then
  read -r WIRED ROUTED < <("${LAB_PY[@]}" counter "$WORK/stats0.json" "$WORK/stats1.json" baseline.wired baseline.routed | paste -sd' ')
  if [ "$WIRED" -gt 0 ] && [ "$ROUTED" = 0 ]; then
    pass "wire pair: baseline.wired $WIRED, baseline.routed 0"
  else
    fail "wire pair: baseline.wired $WIRED (expected > 0), baseline.routed $ROUTED (expected 0)"
  fi
fi

# ---- RFC 2544 throughput ------------------------------------------------------------------------

if [ -n "$RFC2544" ]; then
  step "RFC 2544 throughput h1 -> h2, frame sizes $RFC2544, trials of $TRIAL s"
  if python3 "$ROOT/perf/lab/rfc2544.py" --h1 "$NS_H1" --h2 "$NS_H2" --src-mac "$H1_MAC" \
    --dst-mac "$NEXT_MAC" --src-ip "$H1_IP" --dst-ip "$H2_IP" --sizes "$RFC2544" \
    --trial "$TRIAL" --out "$WORK/rfc2544.json" | indent; then
    pass "RFC 2544: a zero-loss rate found for every frame size (trials in $WORK/rfc2544.json)"
  else
    fail "RFC 2544: no zero-loss rate for some frame size (above)"
  fi
fi

# ---- stop -----------------------------------------------------------------------------------------

if [ "$KEEP" = 1 ]; then
  echo "== --keep: longhaul left running (pid $LH_PID); the stop is not checked"
else
  step "stop longhaul (SIGINT)"
  kill -INT "$LH_PID"
  stopped=0
  for _ in $(seq 100); do
    kill -0 "$LH_PID" 2>/dev/null || { stopped=1; break; }
    sleep 0.1
  done
  if [ "$stopped" = 1 ]; then
    lh_rc=0
    wait "$LH_PID" || lh_rc=$?
    LH_PID=
    if [ "$lh_rc" = 0 ] && grep -q "^port\.$CFG_H1_PORT\.rx_pkts " "$WORK/longhaul.out"; then
      pass "longhaul stopped on SIGINT: exit 0, final counters printed ($(wc -l <"$WORK/longhaul.out") lines)"
    else
      tail -n 5 "$WORK/longhaul.err" | sed 's/^/  longhaul: /'
      fail "longhaul exited with status $lh_rc on SIGINT"
    fi
  else
    fail "longhaul still running 10 s after SIGINT"
  fi
fi

echo "== $NPASS passed, $NFAIL failed ($((SECONDS - T_START)) s; config $CONFIG)"
if [ "$NFAIL" -gt 0 ]; then exit 1; fi
