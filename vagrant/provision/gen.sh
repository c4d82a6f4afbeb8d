#!/usr/bin/env bash
# The generator VM: Pktgen-DPDK built from its release source against Debian's DPDK 22.11, with
# Lua (the benchmarks are perf/pktgen/*.lua), installed as /usr/local/bin/pktgen, and
# /usr/local/bin/lh-pktgen to run a benchmark on the lab's two NICs. Idempotent (skips the build
# when that version is installed).
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive

# Pktgen-DPDK pktgen-23.06.1 (the newest tag that builds against Debian 12's DPDK 22.11), built by
# perf/pktgen/build-pktgen.sh, the script CI builds it with (it checks the tarball's commit and
# applies the two fixes Debian's DPDK needs). The tarball: LONGHAUL_PKTGEN_TARBALL if set, else
# the tag's tarball from GitHub.
version=23.06.1
url="https://github.com/pktgen/Pktgen-DPDK/archive/refs/tags/pktgen-$version.tar.gz"

apt-get install -y -qq --no-install-recommends \
  build-essential meson ninja-build pkg-config git libnuma-dev libpcap-dev \
  liblua5.3-dev lua5.3 python3-scapy >/dev/null

if [[ "$(cat /usr/local/share/pktgen-version 2>/dev/null)" != "$version" ]]; then
  tarball=${LONGHAUL_PKTGEN_TARBALL:-/usr/local/src/pktgen-$version.tar.gz}
  if [[ ! -f "$tarball" ]]; then
    curl -fsSL -o "$tarball" "$url" || { echo "gen.sh: cannot fetch $url" >&2; exit 1; }
  fi
  bin=$(bash /longhaul/perf/pktgen/build-pktgen.sh "$tarball" "/usr/local/src/pktgen-$version" | tail -n 1)
  install -m 0755 "$bin" /usr/local/bin/pktgen
  mkdir -p /usr/local/share/pktgen
  cp "/usr/local/src/pktgen-$version/src/Pktgen.lua" /usr/local/share/pktgen/
  echo "$version" > /usr/local/share/pktgen-version
fi

# The shipped RoCE trace, retargeted to the lab's MACs (longhaul's dc0 as destination; the IPs
# and ICRCs unchanged), for Pktgen's pcap mode.
mkdir -p /var/lib/longhaul-lab
python3 - /longhaul/examples/roce-64flows.pcap /var/lib/longhaul-lab/roce-64flows.pcap <<'PY'
import sys
from scapy.all import rdpcap, wrpcap
pkts = rdpcap(sys.argv[1])
for p in pkts:
    p.src, p.dst = "52:54:00:4c:01:01", "52:54:00:4c:02:01"
wrpcap(sys.argv[2], pkts)
PY

# lh-pktgen SCRIPT.lua [pktgen args]: Pktgen on the two lab NICs (port 0 -> longhaul, port 1 <-
# the sink), cores 1-3 (1: display/Lua, 2: port 0, 3: port 1), running the script.
cat > /usr/local/bin/lh-pktgen <<'RUN'
#!/usr/bin/env bash
set -euo pipefail
script=${1:?usage: lh-pktgen SCRIPT.lua [extra pktgen args]}; shift
mapfile -t nics < /etc/longhaul-lab/nics
(( ${#nics[@]} == 2 )) || { echo "lh-pktgen: /etc/longhaul-lab/nics must list 2 NICs" >&2; exit 1; }
cd /usr/local/share/pktgen
exec pktgen -l 1-3 -n 2 --proc-type auto --file-prefix pktgen \
  -a "${nics[0]}" -a "${nics[1]}" -- -P -T -m "2.0,3.1" -f "$script" "$@"
RUN
chmod 0755 /usr/local/bin/lh-pktgen
echo "gen.sh: pktgen $version in /usr/local/bin; run a benchmark with lh-pktgen /longhaul/perf/pktgen/rfc2544.lua"
