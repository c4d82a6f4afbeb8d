#!/usr/bin/env python3
"""Adds run-time switches to a copy of the HPCC simulator's point-to-point model
(simulation/src/point-to-point/model/), all off unless their environment variable is set, so that
one build runs the simulator as published and with one of longhaul's modeling choices instead:

  HPCC_ECN_AT_ENQUEUE=1        switch-node.cc: mark ECN when a packet joins the egress queue (on
                               the queue it finds, itself included), not when it leaves
  HPCC_SWITCH_ACK_HIGH_PRIO=1  switch-node.cc: switches put ACKs and NAKs in queue 0 (strict
                               priority, never paused), the `AckHighPrio` attribute third.cc
                               never sets
  HPCC_WIRE_EXTRA_BYTES=N      qbb-net-device.cc, rdma-hw.cc: N more bytes of serialization per
                               packet on every link and in the senders' pacing (longhaul's frames
                               are 34 bytes longer than HPCC's packets: Ethernet instead of PPP,
                               BTH and ICRC instead of SeqTs, and 24 bytes of preamble, IFG, FCS)

    python3 patch_variants.py PATH/TO/simulation/src/point-to-point/model

Idempotent per file; exits with an error naming the file and the anchor when the source is not
the one expected.
"""
import os
import sys

MARK = "/* longhaul validation/hpcc variants */"
ENV = MARK + """
#include <cstdlib>
static bool LonghaulEnvOn(const char *k) { const char *v = std::getenv(k); return v && v[0] == '1'; }
static unsigned LonghaulEnvUint(const char *k) { const char *v = std::getenv(k); return v ? (unsigned)std::strtoul(v, 0, 10) : 0; }
"""
SWITCH = ENV + """static const bool lh_ecn_at_enqueue = LonghaulEnvOn("HPCC_ECN_AT_ENQUEUE");
static const bool lh_switch_ack_high_prio = LonghaulEnvOn("HPCC_SWITCH_ACK_HIGH_PRIO");
"""
WIRE = ENV + """static const unsigned lh_wire_extra = LonghaulEnvUint("HPCC_WIRE_EXTRA_BYTES");
"""
MARK_CE = ("if (lh_ecn_at_enqueue && m_ecnEnabled && m_mmu->ShouldSendCN(idx, qIndex)) {"
           " PppHeader ppp; Ipv4Header h; p->RemoveHeader(ppp); p->RemoveHeader(h);"
           " h.SetEcn((Ipv4Header::EcnType)0x03); p->AddHeader(h); p->AddHeader(ppp); }")

# file -> [(anchor, replacement, times the anchor occurs)].
EDITS = {
    "switch-node.cc": [
        ("#include <cmath>", "#include <cmath>\n" + SWITCH, 1),
        ("(m_ackHighPrio && (", "((m_ackHighPrio || lh_switch_ack_high_prio) && (", 1),
        ("m_mmu->UpdateEgressAdmission(idx, qIndex, p->GetSize());",
         "m_mmu->UpdateEgressAdmission(idx, qIndex, p->GetSize());\n\t\t\t\t" + MARK_CE, 1),
        ("if (m_ecnEnabled){", "if (m_ecnEnabled && !lh_ecn_at_enqueue){", 1),
    ],
    "qbb-net-device.cc": [
        ('#include "ns3/flow-id-tag.h"', '#include "ns3/flow-id-tag.h"\n' + WIRE, 1),
        ("Seconds(m_bps.CalculateTxTime(p->GetSize()))",
         "Seconds(m_bps.CalculateTxTime(p->GetSize() + lh_wire_extra))", 1),
    ],
    "rdma-hw.cc": [
        ('#include "cn-header.h"', '#include "cn-header.h"\n' + WIRE, 1),
        ("CalculateTxTime(pkt_size)", "CalculateTxTime(pkt_size + lh_wire_extra)", 2),
        ("CalculateTxTime(qp->lastPktSize)", "CalculateTxTime(qp->lastPktSize + lh_wire_extra)", 2),
    ],
}


def patch(path, edits, mark=MARK, source="the HPCC simulator's source"):
    """Applies edits [(anchor, replacement, times the anchor occurs)] to path, unless `mark` is
    already in it (validation/themis/patch_themis.py uses it too, with its own)."""
    try:
        with open(path) as f:
            text = f.read()
    except OSError as e:
        sys.exit("%s: cannot read: %s" % (path, e.strerror))
    if mark in text:
        print("%s: already patched" % path)
        return
    for anchor, new, times in edits:
        n = text.count(anchor)
        if n != times:
            sys.exit("%s: expected '%s' %d times, found it %d times: not %s this patch was "
                     "written for" % (path, anchor, times, n, source))
        text = text.replace(anchor, new)
    with open(path, "w") as f:
        f.write(text)
    print("%s: patched" % path)


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: patch_variants.py PATH/TO/simulation/src/point-to-point/model")
    for name, edits in EDITS.items():
        patch(os.path.join(sys.argv[1], name), edits)


if __name__ == "__main__":
    main()
