"""Independent Python models of THEMIS (paper 000) for the THEMIS conformance cases.

No longhaul code is imported or run. Two pieces:

1. `syn_cookie(...)`: the SYN cookie of docs/wire-formats.md ("THEMIS SYN cookies, version 1"),
   with SipHash-2-4 written from the SipHash paper (Aumasson and Bernstein, 2012) and checked
   against its published test vector (`_selftest`). The fixture generator uses it to build the
   client's ACK (the replay cannot feed the switch's SYN-ACK back to the client), and the case's
   check.py uses it to check the SYN-ACK's sequence numbers.

2. `TrpModel`: Algorithm 1 of the paper (appendix B, "Throttling Algorithm"), written from the
   pseudocode, plus appendix D's reorder-free recovery, driving a model of the recirculation port
   (a FIFO link of `recirc_rate_gbps`, each trip = serialization + `loop_delay_ns`) and of the
   DC-facing egress port. Where the pseudocode is ambiguous the model follows the readings that
   pipelines/src/themis/trp.rs *documents* in its module documentation ("Where the paper is
   ambiguous, and what we do", points 1-7), each marked `reading N` below; it was written from
   those comments and the paper, not from the Rust code.
"""
import heapq

MASK64 = (1 << 64) - 1
PSN_MOD = 1 << 24


# ---------------------------------------------------------------------------------------------
# SipHash-2-4 and the SYN cookie
# ---------------------------------------------------------------------------------------------

def _rotl(x, b):
    return ((x << b) | (x >> (64 - b))) & MASK64


def siphash24(k0, k1, msg):
    """SipHash-2-4 of bytes `msg` under the 128-bit key (k0, k1) (key bytes 0-7 and 8-15 read
    little-endian), as in the SipHash paper."""
    v0 = 0x736F6D6570736575 ^ k0
    v1 = 0x646F72616E646F6D ^ k1
    v2 = 0x6C7967656E657261 ^ k0
    v3 = 0x7465646279746573 ^ k1

    def sipround():
        nonlocal v0, v1, v2, v3
        v0 = (v0 + v1) & MASK64
        v1 = _rotl(v1, 13) ^ v0
        v0 = _rotl(v0, 32)
        v2 = (v2 + v3) & MASK64
        v3 = _rotl(v3, 16) ^ v2
        v0 = (v0 + v3) & MASK64
        v3 = _rotl(v3, 21) ^ v0
        v2 = (v2 + v1) & MASK64
        v1 = _rotl(v1, 17) ^ v2
        v2 = _rotl(v2, 32)

    n = len(msg)
    full = n - n % 8
    for i in range(0, full, 8):
        m = int.from_bytes(msg[i:i + 8], "little")
        v3 ^= m
        sipround()
        sipround()
        v0 ^= m
    b = int.from_bytes(msg[full:] + bytes(7 - (n - full)) + bytes([n & 0xFF]), "little")
    v3 ^= b
    sipround()
    sipround()
    v0 ^= b
    v2 ^= 0xFF
    for _ in range(4):
        sipround()
    return v0 ^ v1 ^ v2 ^ v3


def _selftest():
    # SipHash paper, appendix A: key 00..0f, message 00..0e -> a129ca6149be45e5.
    k = bytes(range(16))
    got = siphash24(int.from_bytes(k[:8], "little"), int.from_bytes(k[8:], "little"), bytes(range(15)))
    assert got == 0xA129CA6149BE45E5, hex(got)


_selftest()

MSS_TABLE = [536, 1220, 1300, 1380, 1440, 1460, 4312, 8960]  # wire-formats.md, cookie bits 26-24


def mss_index(mss):
    """Index of the largest table entry not above the client's MSS (536 when absent)."""
    m = MSS_TABLE[0] if mss is None else mss
    idx = 0
    for i, e in enumerate(MSS_TABLE):
        if e <= m:
            idx = i
    return idx


def _seed_key(seed):
    # K_seed = (seed, rotl(seed, 32) ^ "SynCooki" as a big-endian u64) (wire-formats.md).
    return seed & MASK64, _rotl(seed & MASK64, 32) ^ int.from_bytes(b"SynCooki", "big")


def window_secret(seed, t):
    """K_t = (SipHash(K_seed, t as u64 LE || 0x00), SipHash(K_seed, t as u64 LE || 0x01))."""
    k0, k1 = _seed_key(seed)
    m = (t & MASK64).to_bytes(8, "little")
    return siphash24(k0, k1, m + b"\x00"), siphash24(k0, k1, m + b"\x01")


def syn_cookie(seed, period_ns, now_ns, client_ip, server_ip, client_port, server_port, isn, mss):
    """The 32-bit cookie (SYN-ACK sequence number) for an IPv4 SYN client -> server seen at
    `now_ns`: bits 31-27 t mod 32, 26-24 MSS index, 23-0 the low 24 bits of SipHash-2-4(K_t, M),
    M = IP version | client addr (16 B, IPv4 zero-extended) | server addr (16 B) | client port |
    server port (BE) | ISN (BE) | t (8 B LE) | MSS index."""
    t = now_ns // period_ns
    idx = mss_index(mss)
    msg = (bytes([4]) + bytes(client_ip) + bytes(12) + bytes(server_ip) + bytes(12)
           + client_port.to_bytes(2, "big") + server_port.to_bytes(2, "big")
           + (isn & 0xFFFFFFFF).to_bytes(4, "big") + t.to_bytes(8, "little") + bytes([idx]))
    assert len(msg) == 50
    k0, k1 = window_secret(seed, t)
    h = siphash24(k0, k1, msg) & 0xFFFFFF
    return ((t & 0x1F) << 27) | (idx << 24) | h


# ---------------------------------------------------------------------------------------------
# Algorithm 1 (appendix B) + appendix D, with the recirculation port
# ---------------------------------------------------------------------------------------------

class Ambiguous(Exception):
    """The trace reached a point where the paper's pseudocode and trp.rs's documented readings do
    not pin the behaviour down; fix the trace rather than guess."""


class Flow:
    """Algorithm 1's per-flow state (inputs alpha, beta; state cnp_num, flow_status, cnp_time,
    loop_num) plus appendix D's register of the last PSN forwarded to the correct port."""

    def __init__(self, alpha):
        self.cnp_num = 0
        self.status = "normal"
        self.cnp_time = None
        self.loop_num = 0
        self.alpha = alpha
        self.last_psn = None
        self.log = []  # (time, event, cnp_num, status, loop_num, alpha)

    def snap(self, now, what):
        self.log.append((now, what, self.cnp_num, self.status, self.loop_num, self.alpha))


def psn_ahead(psn, ref):
    """psn is after ref in 24-bit serial arithmetic."""
    d = (psn - ref) % PSN_MOD
    return 0 < d < PSN_MOD // 2


class TrpModel:
    def __init__(self, alpha, beta_ns, loop_delay_ns, recirc_rate_gbps, egress_rate_gbps,
                 egress_overhead=24, reorder_free=True, hold_loops=8, max_loop_num=255):
        self.alpha0 = alpha
        self.beta = beta_ns
        self.loop_delay = loop_delay_ns
        self.recirc_bps = int(round(recirc_rate_gbps * 1e9))
        self.egress_bps = int(round(egress_rate_gbps * 1e9))
        self.overhead = egress_overhead
        self.reorder_free = reorder_free
        self.hold = hold_loops
        self.max_loop = max_loop_num
        self.flows = {}

    @staticmethod
    def ser(nbytes, bps):
        return -(-nbytes * 8 * 1_000_000_000 // bps)  # ceil

    def per_loop_ns(self, frame_len):
        """One trip round an idle recirculation port: serialization at its rate + its delay."""
        return self.ser(frame_len, self.recirc_bps) + self.loop_delay

    def flow(self, key):
        return self.flows.setdefault(key, Flow(self.alpha0))

    # Lines 17-21, once per quiet period (reading 2), floor 1 on alpha (reading 3).
    def beta_test(self, f, now):
        if f.status == "throttled" and now - f.cnp_time > self.beta:
            f.status = "recover"
            f.alpha = max(f.alpha // 2, 1)
            f.cnp_num = 0
            f.snap(now, "recover")

    # Lines 1-8, then the beta test after the branch (reading 5: line 17 runs after the branch,
    # so a CNP, which has just set cnp_time, never starts recovery itself).
    def on_cnp(self, key, now):
        f = self.flow(key)
        f.cnp_num += 1
        f.status = "throttled"
        f.cnp_time = now
        if f.cnp_num % f.alpha == 1:  # reading 1: line 5 literally
            f.loop_num += 1  # reading 4: loop_num is never reset
            f.alpha += 1
        f.snap(now, "cnp")
        self.beta_test(f, now)

    def on_data_pass(self, key, psn, loops_done, now):
        """Lines 9-16 for one ingress pass of a data packet (reading 6: the loop target is read
        again on every pass). Returns 'loop' or 'forward'."""
        f = self.flows.get(key)
        if f is None or f.status == "normal":
            return "forward"
        if loops_done > 0 and f.status == "throttled" and now - f.cnp_time > self.beta:
            # Whether a pass back from the loop runs lines 17-21 is not documented: avoid it.
            raise Ambiguous(f"looped packet psn {psn} back at {now} after beta without CNP")
        if f.status == "throttled":
            verdict = "loop" if loops_done < min(f.loop_num, self.max_loop) else "forward"
        elif not self.reorder_free:
            verdict = "forward"  # reading 8 (direct recovery)
        else:  # reading 7 (appendix D, reorder-free)
            nxt = None if f.last_psn is None else (f.last_psn + 1) % PSN_MOD
            if nxt is not None and psn == nxt:
                verdict = "forward"
            elif loops_done == 0:
                verdict = "loop"
            elif nxt is not None and psn_ahead(psn, nxt) and loops_done < max(f.loop_num, 1) + self.hold:
                verdict = "loop"
            else:
                verdict = "forward"
        if verdict == "forward":
            f.last_psn = psn
        if loops_done == 0:
            self.beta_test(f, now)
        return verdict

    def run(self, events):
        """events: list of (t_ns, kind, key, psn, frame_len) with kind 'cnp' or 'data' (data:
        WAN -> DC toward the one modelled DC egress port). Returns {(key, psn): (arrival,
        departure, loops)} for data packets; departure = start of transmission."""
        q = []
        seq = 0
        for t, kind, key, psn, ln in events:
            heapq.heappush(q, (t, 1, seq, kind, key, psn, ln, 0, t))
            seq += 1
        loop_busy = 0
        egress_free = 0
        out = {}
        while q:
            now, _prio, _s, kind, key, psn, ln, loops, arr = heapq.heappop(q)
            if kind == "cnp":
                self.on_cnp(key, now)
                continue
            v = self.on_data_pass(key, psn, loops, now)
            if v == "loop":
                start = max(now, loop_busy)
                done = start + self.ser(ln, self.recirc_bps)
                loop_busy = done
                # Returns are processed before new arrivals at the same instant (prio 0).
                heapq.heappush(q, (done + self.loop_delay, 0, seq, kind, key, psn, ln, loops + 1, arr))
                seq += 1
            else:
                dep = max(now, egress_free)
                egress_free = dep + self.ser(ln + self.overhead, self.egress_bps)
                out[(key, psn)] = (arr, dep, loops)
        return out
