#!/usr/bin/env python3
"""Self-tests of the cases' check.py scripts against oracle/refmodel.py (a good switch) and
mutations of its output (a broken one): python3 pcap-tests/oracle/test_checks.py"""
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
CASES = os.path.join(HERE, "..", "cases")
sys.path.insert(0, HERE)
import refmodel  # noqa: E402
from pcaputil import read_pcap, write_pcap  # noqa: E402

NEXT_HOP = bytes.fromhex("020000000201")


def model_outputs(case):
    d = os.path.join(CASES, case)
    inputs = {p: read_pcap(os.path.join(d, f"in_{p}.pcap")) for p in ("dc0", "dc1")}
    return inputs, refmodel.run(d, inputs, NEXT_HOP)


class CheckScripts(unittest.TestCase):
    def run_check(self, case, inputs, outs):
        with tempfile.TemporaryDirectory() as d:
            for p, recs in inputs.items():
                write_pcap(os.path.join(d, f"in_{p}.pcap"), recs)
            for p, recs in outs.items():
                write_pcap(os.path.join(d, f"out_{p}.pcap"), recs)
            r = subprocess.run([sys.executable, os.path.join(CASES, case, "check.py"), d],
                               capture_output=True, text=True, cwd=os.path.join(CASES, case))
            return r.returncode, r.stdout + r.stderr

    def assert_fails(self, case, inputs, outs, needle):
        rc, out = self.run_check(case, inputs, outs)
        self.assertEqual(rc, 1, out)
        self.assertIn(needle, out)

    def test_ecn_model_passes_and_mutations_fail(self):
        inputs, outs = model_outputs("ecn_marking")
        rc, out = self.run_check("ecn_marking", inputs, outs)
        self.assertEqual(rc, 0, out)
        wan = outs["wan0"]
        unmark = [(t, refmodel.rewrite(f[:15] + bytes([f[15] & 0xFC | 2]) + f[16:22] + bytes([f[22] + 1]) + f[23:],
                                       f[6:12], f[0:6], False)) for t, f in wan]
        self.assert_fails("ecn_marking", inputs, dict(outs, wan0=unmark), "not marked at or above Kmax")
        self.assert_fails("ecn_marking", inputs, dict(outs, wan0=unmark), "expected some, not all")
        mark_all = [(t, refmodel.rewrite(f[:22] + bytes([f[22] + 1]) + f[23:], f[6:12], f[0:6], True)) for t, f in wan]
        self.assert_fails("ecn_marking", inputs, dict(outs, wan0=mark_all), "CE-marked below Kmin")
        self.assert_fails("ecn_marking", inputs, dict(outs, wan0=wan[:50] + wan[51:]), "dropped")
        self.assert_fails("ecn_marking", inputs, dict(outs, wan0=wan + [wan[3]]), "duplicates")
        squeezed = [(t - 3 * i, f) for i, (t, f) in enumerate(wan)]
        self.assert_fails("ecn_marking", inputs, dict(outs, wan0=squeezed), "wire time")
        self.assert_fails("ecn_marking", inputs, dict(outs, dc0=[wan[0]]), "sent out of dc0")
        bad_ttl = [(t, f[:22] + bytes([f[22] + 1]) + f[23:]) for t, f in wan]
        self.assert_fails("ecn_marking", inputs, dict(outs, wan0=bad_ttl), "TTL")

    def test_pfc_model_passes_and_mutations_fail(self):
        inputs, outs = model_outputs("pfc_xoff_xon")
        rc, out = self.run_check("pfc_xoff_xon", inputs, outs)
        self.assertEqual(rc, 0, out)
        self.assertIn("XON", out)
        dc0 = outs["dc0"]
        self.assert_fails("pfc_xoff_xon", inputs, dict(outs, dc0=dc0[:-1]), "one final XON")
        self.assert_fails("pfc_xoff_xon", inputs, dict(outs, dc0=[]), "no XOFF")
        late = [(t + 5000, f) for t, f in dc0]
        self.assert_fails("pfc_xoff_xon", inputs, dict(outs, dc0=late), "were buffered by")
        early = [(t - 5000, f) for t, f in dc0]
        self.assert_fails("pfc_xoff_xon", inputs, dict(outs, dc0=early), "bytes buffered")
        wrong_q = [(t, f[:24] + b"\x00\x01" + f[26:]) if f[24:26] != b"\0\0" else (t, f) for t, f in dc0]
        self.assert_fails("pfc_xoff_xon", inputs, dict(outs, dc0=wrong_q), "expected pause_quanta")
        wrong_prio = [(t, f[:17] + b"\x10" + f[18:]) for t, f in dc0]
        self.assert_fails("pfc_xoff_xon", inputs, dict(outs, dc0=wrong_prio), "class-enable vector")
        no_refresh = [dc0[0], dc0[-1]]
        self.assert_fails("pfc_xoff_xon", inputs, dict(outs, dc0=no_refresh), "not refreshed")
        wan = outs["wan0"]
        self.assert_fails("pfc_xoff_xon", inputs, dict(outs, wan0=wan[:-1]), "dropped")



class SprayChecks(unittest.TestCase):
    """The spray cases' check.py pass on their expected outputs and fail on mutants."""

    GOOD = {
        "spray_fig6_nack_validation": {"spray.d.nacks_invalid": 1, "spray.d.nacks_valid": 1,
                                       "spray.d.nacks_undetermined": 0,
                                       "spray.d.nacks_regenerated": 0, "spray.nacks_dropped": 1},
        "spray_fig7_lazy_drop": {"spray.d.nacks_undetermined": 2, "spray.d.nacks_regenerated": 2,
                                 "spray.d.nacks_avoidance": 1, "spray.nacks_generated": 2,
                                 "spray.d.nacks_invalid": 0, "spray.d.nacks_valid": 0},
    }

    def run_check(self, case, outs, counters):
        with tempfile.TemporaryDirectory() as d:
            for p, recs in outs.items():
                write_pcap(os.path.join(d, f"out_{p}.pcap"), recs)
            with open(os.path.join(d, "counters.txt"), "w") as f:
                for k, v in counters.items():
                    f.write(f"{k} {v}\n")
            r = subprocess.run([sys.executable, os.path.join(CASES, case, "check.py"), d],
                               capture_output=True, text=True, cwd=os.path.join(CASES, case))
            return r.returncode, r.stdout + r.stderr

    def expected(self, case):
        d = os.path.join(CASES, case)
        return {p: read_pcap(os.path.join(d, f"expected_{p}.pcap")) for p in ("h0", "up0", "up1")}

    def test_pass_on_expected(self):
        for case, counters in self.GOOD.items():
            rc, out = self.run_check(case, self.expected(case), counters)
            self.assertEqual(rc, 0, out)

    def test_fig7_mutants(self):
        case = "spray_fig7_lazy_drop"
        good = self.expected(case)
        # The avoidance signal missing on the second generated NAK.
        outs = dict(good)
        ts, f = outs["up0"][-1]
        f = bytearray(f)
        f[46] &= ~0x20
        outs["up0"] = outs["up0"][:-1] + [(ts, bytes(f))]
        rc, _ = self.run_check(case, outs, self.GOOD[case])
        self.assertEqual(rc, 1)
        # The first generated NAK missing.
        outs = dict(good)
        outs["up0"] = outs["up0"][1:]
        rc, _ = self.run_check(case, outs, self.GOOD[case])
        self.assertEqual(rc, 1)
        # The off-policy mark left on a packet to the RNIC.
        outs = dict(good)
        ts, f = outs["h0"][3]
        f = bytearray(f)
        f[46] |= 0x10
        outs["h0"] = outs["h0"][:3] + [(ts, bytes(f))] + outs["h0"][4:]
        rc, _ = self.run_check(case, outs, self.GOOD[case])
        self.assertEqual(rc, 1)

    def test_fig6_mutants(self):
        case = "spray_fig6_nack_validation"
        good = self.expected(case)
        # The invalid NAK for 2 forwarded too.
        outs = dict(good)
        ts, f = outs["up0"][-1]
        f = bytearray(f)
        f[53] = 2  # BTH PSN low byte: a NAK for 2
        outs["up0"] = outs["up0"] + [(ts + 1, bytes(f))]
        rc, _ = self.run_check(case, outs, self.GOOD[case])
        self.assertEqual(rc, 1)
        bad = dict(self.GOOD[case], **{"spray.d.nacks_invalid": 0})
        rc, _ = self.run_check(case, good, bad)
        self.assertEqual(rc, 1)

if __name__ == "__main__":
    unittest.main()
