#!/usr/bin/env python3
"""Adds two run-time switches to a copy of the HPCC simulator's switch model
(simulation/src/point-to-point/model/switch-node.cc), both off unless their environment variable
is 1, so that one build runs the simulator as published and with either modeling choice flipped:

  HPCC_ECN_AT_ENQUEUE=1        mark ECN when a packet joins the egress queue (the queue it finds,
                               itself included), not when it leaves (`SwitchNotifyDequeue`)
  HPCC_SWITCH_ACK_HIGH_PRIO=1  switches put ACKs and NAKs in queue 0 (strict priority, never
                               paused), as the `AckHighPrio` attribute third.cc never sets

    python3 patch_variants.py PATH/TO/switch-node.cc

Idempotent; exits with an error naming the file and the anchor when the source is not the one
expected.
"""
import sys

MARK = "/* longhaul validation/hpcc variants */"
HELPERS = MARK + """
#include <cstdlib>
static bool LonghaulEnvOn(const char *k) { const char *v = std::getenv(k); return v && v[0] == '1'; }
static const bool lh_ecn_at_enqueue = LonghaulEnvOn("HPCC_ECN_AT_ENQUEUE");
static const bool lh_switch_ack_high_prio = LonghaulEnvOn("HPCC_SWITCH_ACK_HIGH_PRIO");
"""
MARK_CE = ("if (lh_ecn_at_enqueue && m_ecnEnabled && m_mmu->ShouldSendCN(idx, qIndex)) {"
           " PppHeader ppp; Ipv4Header h; p->RemoveHeader(ppp); p->RemoveHeader(h);"
           " h.SetEcn((Ipv4Header::EcnType)0x03); p->AddHeader(h); p->AddHeader(ppp); }")

# (anchor, replacement): each anchor must occur exactly once.
EDITS = [
    ("#include <cmath>", "#include <cmath>\n" + HELPERS),
    ("(m_ackHighPrio && (", "((m_ackHighPrio || lh_switch_ack_high_prio) && ("),
    ("m_mmu->UpdateEgressAdmission(idx, qIndex, p->GetSize());",
     "m_mmu->UpdateEgressAdmission(idx, qIndex, p->GetSize());\n\t\t\t\t" + MARK_CE),
    ("if (m_ecnEnabled){", "if (m_ecnEnabled && !lh_ecn_at_enqueue){"),
]


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: patch_variants.py PATH/TO/switch-node.cc")
    path = sys.argv[1]
    try:
        with open(path) as f:
            text = f.read()
    except OSError as e:
        sys.exit("%s: cannot read: %s" % (path, e.strerror))
    if MARK in text:
        print("%s: already patched" % path)
        return
    for anchor, new in EDITS:
        n = text.count(anchor)
        if n != 1:
            sys.exit("%s: expected '%s' once, found it %d times: not the HPCC simulator's "
                     "switch-node.cc this patch was written for" % (path, anchor, n))
        text = text.replace(anchor, new)
    with open(path, "w") as f:
        f.write(text)
    print("%s: patched (HPCC_ECN_AT_ENQUEUE, HPCC_SWITCH_ACK_HIGH_PRIO)" % path)


if __name__ == "__main__":
    main()
