#!/usr/bin/env python3
"""Self-test of a THEMIS case's check.py on the case's own fresh outputs: python3
../../oracle/themis_mutations.py OUTDIR, run from the case directory as a second `[[check]]`.

check.py must pass on OUTDIR as it is and fail (exit 1, with the expected message) on each
mutation below, applied to a copy: a lost, delayed or altered packet, a wrong counter. This shows
the oracle can fail on exactly the outputs it judges (DESIGN.md section 6: tests must be able to
fail), without a reference model of the whole switch.
"""
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from pcaputil import read_pcap, write_pcap  # noqa: E402


def _edit(port, fn):
    def m(d):
        p = os.path.join(d, f"out_{port}.pcap")
        write_pcap(p, fn(read_pcap(p)))
    return m


def drop(port, idx):
    return _edit(port, lambda r: r[:idx] + r[idx + 1:])


def shift(port, idx, dt):
    return _edit(port, lambda r: r[:idx] + [(r[idx][0] + dt, r[idx][1])] + r[idx + 1:])


def flip(port, idx, off):
    def fn(r):
        t, f = r[idx]
        f = bytearray(f)
        f[off] ^= 1
        return r[:idx] + [(t, bytes(f))] + r[idx + 1:]
    return _edit(port, fn)


def counter(name, delta):
    def m(d):
        p = os.path.join(d, "counters.txt")
        lines = open(p).read().splitlines()
        out = []
        for line in lines:
            k, v = line.split()
            out.append(f"{k} {int(v) + delta}" if k == name else line)
        open(p, "w").write("\n".join(out) + "\n")
    return m


TCP_SEQ = 14 + 20 + 7  # low byte of the TCP sequence number
MUTATIONS = {
    "themis_syn_cookie": [
        ("a lost SYN-ACK", drop("dc0", 500), "SYN-ACKs for"),
        ("a wrong cookie", flip("dc0", 0, TCP_SEQ), "!= cookie"),
        ("a wrong RST sequence number", flip("dc0", 1, TCP_SEQ), "RST seq"),
        ("the retried SYN not forwarded", drop("wan0", 1), "out_wan0 has"),
        ("state grown by the flood", counter("table.inter_dc.entries", 1), "table.inter_dc.entries"),
    ],
    "themis_daemon": [
        ("a lost CNP", drop("dc0", 0), "CNPs (time ns, DestQP)"),
        ("a late CNP", shift("dc0", 1, 1000), "CNPs (time ns, DestQP)"),
        ("CE not cleared", flip("wan0", 1, 15), "ECN of data"),
    ],
    "themis_trp_loops": [
        ("the untouched flow looped once", shift("dc0", 5, 2026), "untouched flow"),
        ("a throttled packet one loop early", shift("dc0", 10, -2026), "departs at"),
        ("a lost packet", drop("dc0", 7), "never left dc0"),
    ],
    "themis_alg1_trace": [
        ("one loop too few", shift("dc0", 20, -2026), "!= loop_num"),
        ("one loop too many", shift("dc0", 3, 2026), "!= loop_num"),
    ],
}


def run_check(outdir):
    r = subprocess.run([sys.executable, "check.py", outdir], capture_output=True, text=True)
    return r.returncode, r.stdout + r.stderr


def main(outdir):
    case = os.path.basename(os.path.abspath(os.getcwd()))
    muts = MUTATIONS.get(case)
    if not muts:
        print(f"themis_mutations: no mutations for case {case}")
        sys.exit(1)
    rc, out = run_check(outdir)
    if rc != 0:
        print(f"themis_mutations: check.py fails on the unmodified outputs:\n{out}")
        sys.exit(1)
    bad = 0
    for what, mutate, needle in muts:
        with tempfile.TemporaryDirectory() as d:
            shutil.copytree(outdir, d, dirs_exist_ok=True)
            mutate(d)
            rc, out = run_check(d)
        ok = rc == 1 and needle in out
        print(f"themis_mutations: {case}: {what}: {'caught' if ok else 'NOT CAUGHT'}")
        if not ok:
            bad += 1
            print(out[-2000:])
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main(sys.argv[1])
