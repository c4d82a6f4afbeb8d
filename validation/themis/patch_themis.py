#!/usr/bin/env python3
"""Adds a run-time switch and counters to a copy of the THEMIS fork's point-to-point model
(NS3/simulation/src/point-to-point/model/), after validation/hpcc/patch_variants.py:

  THEMIS_NS3_OFF=1   switch-node.cc: the external switches (node id >= 48) do not answer a
                     CE-marked data packet with their own CNP ("module 1", the only THEMIS
                     stage the fork runs: its "module 2", throttling by recirculation, is
                     compiled out with `if(0&&...)`): they are the HPCC simulator's switches.
                     Unset, the simulator runs as published.

  THEMIS_NS3_ECMP_SALT=N
                     switch-node.cc: N is added to every switch's ECMP hash seed (its node id):
                     other paths for the same flows, to see how much the hash alone moves the
                     figures (gen.py --ecmp-salt does the same on longhaul's side). Unset: 0.

  counters           printed to stderr at exit, one line, `themis-ns3-counters: k=v ...`:
                     esw_ce_cleared (CE-marked data packets whose mark an ESW cleared),
                     esw_cnps (CNPs the ESWs sent), host_cnps (those CNPs received by a sender),
                     ack_cnps (ACKs carrying the CNP flag: the receivers' DCQCN notifications),
                     nacks (NACKs received by senders). compare.py reads them.

    python3 patch_themis.py PATH/TO/simulation/src/point-to-point/model

Idempotent per file; exits with an error naming the file and the anchor when the source is not
the one expected.
"""
import importlib.util
import os
import sys

# validation/hpcc/patch_variants.py's patch(): anchors counted, idempotent per file.
_spec = importlib.util.spec_from_file_location(
    "patch_variants", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "hpcc",
                                   "patch_variants.py"))
pv = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(pv)

MARK = "/* longhaul validation/themis switch and counters */"

SWITCH_DECL = MARK + """
static const bool lh_themis_off = std::getenv("THEMIS_NS3_OFF") && std::getenv("THEMIS_NS3_OFF")[0] == '1';
static const unsigned lh_ecmp_salt = std::getenv("THEMIS_NS3_ECMP_SALT") ? (unsigned)std::strtoul(std::getenv("THEMIS_NS3_ECMP_SALT"), 0, 10) : 0;
static unsigned long lh_esw_ce_cleared = 0, lh_esw_cnps = 0;
namespace ns3 { extern int ack_cnp, cnp; extern unsigned long lh_nacks; }
static struct LhThemisCounters { ~LhThemisCounters() {
  std::fprintf(stderr, "themis-ns3-counters: esw_ce_cleared=%lu esw_cnps=%lu host_cnps=%d ack_cnps=%d nacks=%lu themis=%d\\n",
    lh_esw_ce_cleared, lh_esw_cnps, ns3::cnp, ns3::ack_cnp, ns3::lh_nacks, lh_themis_off ? 0 : 1); } } lh_themis_counters;
"""

EDITS = {
    "switch-node.cc": [
        ("#include <cmath>", "#include <cmath>\n#include <cstdio>\n#include <cstdlib>\n" + SWITCH_DECL, 1),
        ("if(1&&isDataPkt(ch) && ch.GetIpv4EcnBits() && m_id >= 48){",
         "if(!lh_themis_off&&isDataPkt(ch) && ch.GetIpv4EcnBits() && m_id >= 48){ lh_esw_ce_cleared++;", 1),
        ("EcmpHash(buf.u8, 12, m_ecmpSeed)", "EcmpHash(buf.u8, 12, m_ecmpSeed + lh_ecmp_salt)", 1),
        ("Simulator::Schedule(ns3::MicroSeconds(2), &QbbNetDevice::SendCnp, device, p, ch);",
         "Simulator::Schedule(ns3::MicroSeconds(2), &QbbNetDevice::SendCnp, device, p, ch); lh_esw_cnps++;", 2),
    ],
    "rdma-hw.cc": [
        ("int ack_cnp = 0,cnp =0;", "int ack_cnp = 0,cnp =0;\n" + MARK + "\nunsigned long lh_nacks = 0;", 1),
        ("if (ch.l3Prot == 0xFD) // NACK\n\t\tRecoverQueue(qp);",
         "if (ch.l3Prot == 0xFD) // NACK\n\t\t{ lh_nacks++; RecoverQueue(qp); }", 1),
    ],
}


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: patch_themis.py PATH/TO/simulation/src/point-to-point/model")
    for name, edits in EDITS.items():
        pv.patch(os.path.join(sys.argv[1], name), edits, MARK, "the THEMIS fork's source")


if __name__ == "__main__":
    main()
