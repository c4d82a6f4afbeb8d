#!/usr/bin/env bash
# Build DPDK's own l3fwd example (22.11, from Debian's dpdk-doc package) as a second yardstick for
# perf/testpmd.sh: an IPv4/IPv6 LPM router (SSE lookups four at a time, RFC 1812 checks, TTL
# decrement with checksum update, MAC rewrite) with no traffic manager, no PFC, no ECN and no
# checksum verification. It shows what a minimal DPDK router reaches on the same vdevs.
#
#   perf/build-l3fwd.sh [OUTDIR]     (default /tmp/longhaul-l3fwd; prints the binary's path)
#   L3FWD=$(perf/build-l3fwd.sh) perf/testpmd.sh 10
#
# Needs: apt-get install dpdk-doc (the examples' sources), dpdk-dev libdpdk-dev, make, gcc.
#
# Two changes to the example, both for vdevs, neither on its forwarding path:
#  1. It asks every port for Rx checksum offload (RTE_ETH_RX_OFFLOAD_CHECKSUM) and exits when a
#     port has none; net_pcap has none. The request is dropped. (l3fwd never verifies the IPv4
#     checksum in software: without the offload it simply forwards.)
#  2. Its main lcore forwards too (CALL_MAIN). Here the main lcore forwards nothing and prints
#     port 1's transmitted packets per second instead, in testpmd's "Tx-pps:" format, so both
#     programs are measured the same way (lcore 0 = main, lcore 1 = forwarding); and at exit
#     port 0's received and port 1's transmitted totals ("Rx-total: N Tx-total: M").
set -euo pipefail
SRC=/usr/share/dpdk/examples
OUT=${1:-/tmp/longhaul-l3fwd}
[ -d "$SRC/l3fwd" ] || { echo "no $SRC/l3fwd: apt-get install dpdk-doc" >&2; exit 1; }
rm -rf "$OUT"
mkdir -p "$OUT"
cp -r "$SRC/l3fwd" "$SRC/common" "$OUT/"
cd "$OUT/l3fwd"
python3 - <<'EOF'
s = open("main.c").read()
old_rx = ".offloads = RTE_ETH_RX_OFFLOAD_CHECKSUM,"
old_launch = "rte_eal_mp_remote_launch(l3fwd_lkp.main_loop, NULL, CALL_MAIN);"
assert s.count(old_rx) == 1 and s.count(old_launch) == 1, "l3fwd main.c changed: update perf/build-l3fwd.sh"
s = s.replace(old_rx, ".offloads = 0,")
s = s.replace(old_launch, """rte_eal_mp_remote_launch(l3fwd_lkp.main_loop, NULL, SKIP_MAIN);
	{
		uint64_t prev = 0, t0 = rte_get_tsc_cycles(), hz = rte_get_tsc_hz();

		while (!force_quit) {
			struct rte_eth_stats st;
			uint64_t t1;

			rte_delay_ms(1000);
			t1 = rte_get_tsc_cycles();
			if (rte_eth_stats_get(1, &st) == 0) {
				printf("  Tx-pps: %.0f\\n",
				       (double)(st.opackets - prev) * hz / (double)(t1 - t0));
				fflush(stdout);
				prev = st.opackets;
			}
			t0 = t1;
		}
		/* Totals at exit, for perf/instructions.sh (frames under callgrind, where the rate
		 * lines above come only every few seconds). */
		{
			struct rte_eth_stats in, out;

			if (rte_eth_stats_get(0, &in) == 0 && rte_eth_stats_get(1, &out) == 0)
				printf("  Rx-total: %" PRIu64 " Tx-total: %" PRIu64 "\\n",
				       in.ipackets, out.opackets);
		}
	}""")
open("main.c", "w").write(s)
EOF
make -s -j2 >&2
echo "$OUT/l3fwd/build/l3fwd"
