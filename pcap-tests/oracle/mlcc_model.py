#!/usr/bin/env python3
"""Independent model of MLCC's wire formats (paper 001, section 3).

    python3 mlcc_model.py decode FILE.pcap [--int-port 5000]   # one JSON object per frame

Written from docs/wire-formats.md ("INT over UDP" and "MLCC: INT, Switch-INT feedback and the
credit fields, version 1"), never from longhaul's Rust code. Standard library for decoding;
scapy builds frames (Ether/IP/UDP, and the RoCEv2 BTH/AETH with their ICRC); the ICRC is
checked with oracle/verify.py's independent code.

* INT (MLCC domain, DS ID 0x4D4C) in RoCE RC data:
  `build_int_data` (RoCEv2 built by scapy with its ICRC, then shim + INT-MD header + 28-byte hop
  records right after UDP, UDP dport = the INT port, lengths and the IPv4 checksum fixed, the ICRC
  left as it was), `insert_int`, `strip_int`, `decode_int` (the hops, newest first; `c_d` (None
  when the DS Flags carry no credit); the E bit; `icrc_ok` once the INT is stripped).
* Switch-INT (a CNP carrying the stack): `build_switch_int`, `expected_switch_int` (what the
  sender-side DCI must send for a given INT data frame), `decode_switch_int`.
* MCETH (the credit header after the AETH of an RC ACK): `build_ack_mceth`, `decode_mceth`,
  `with_r_dqm` (the ACK as the receiver-side DCI rewrites it).

Every decoder returns a dict with a `problems` list (deviations from version 1 of the format;
empty = conforms) and `conforms`, or None when the frame is not of that kind at all.
"""
import json
import os
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from verify import icrc as verify_icrc, inet_checksum  # noqa: E402
from pcaputil import read_pcap  # noqa: E402

ROCE_PORT = 4791
INT_PORT = 5000                   # [int] udp_port / [mlcc] int_udp_port in the configs

# INT over UDP (P4.org INT v2.1, INT-MD), MLCC domain.
SHIM_LEN = 4
MD_LEN = 12
SHIM_BYTE0 = (1 << 4) | (1 << 2)  # type 1 (INT-MD) | NPT 1 (original UDP dport in bytes 2-3)
MD_VER = 2
HOP_ML = 7                        # 4-byte words per hop
HOP_LEN = HOP_ML * 4              # 28
INSTRUCTIONS = 0x9400             # node id | queue id + occupancy | egress timestamp
DS_ID = 0x4D4C                    # "ML"
DS_INSTRUCTION = 0xC000           # tx bytes (8) | link rate (4)
FLAG_CD = 0x8000                  # DS Flags: C_D present in the low 15 bits
QOCC_MAX = (1 << 24) - 1

# Switch-INT (in a CNP's 16 reserved bytes, then the hops).
OP_CNP = 0x81
SI_VERSION = 1
SI_HDR_LEN = 16
SI_MAX_HOPS = 8
SI_FLAG_CUT = 0x80                # the stack was cut to 8 hops
SI_FLAG_E = 0x40                  # the data's INT E bit

# MCETH (after the AETH of an RC ACK).
OP_ACK = 0x11
MCETH_LEN = 20
MCETH_VERSION = 1
MCETH_CREDIT = 0x80               # C_R and R_credit valid
MCETH_DQM = 0x40                  # R_DQM valid (written by the DCI)

# RC data opcodes: SEND first..only-imm (0x00-0x05), RDMA WRITE first..only-imm (0x06-0x0B).
RC_DATA_OPCODES = tuple(range(0x00, 0x0C))
TOS_RDMA = (26 << 2) | 0b10       # DSCP 26, ECT(0)
TOS_CNP = (48 << 2) | 0b10        # DSCP 48, ECT(0): the Switch-INT's (docs/wire-formats.md)


# ------------------------------------------------------------------------------------------
# Hop records
# ------------------------------------------------------------------------------------------

HOP_KEYS = ("node_id", "queue_id", "qocc", "ts", "tx_bytes", "rate_mbps")


def hop(node_id, queue_id, qocc, ts, tx_bytes, rate_mbps):
    """A hop record as a dict (the fields of docs/wire-formats.md, in order)."""
    return dict(node_id=node_id, queue_id=queue_id, qocc=qocc, ts=ts, tx_bytes=tx_bytes,
                rate_mbps=rate_mbps)


def hop_bytes(h):
    """The 28 bytes of a hop record: node id (4) | queue id (1) + occupancy (3) | egress ts (8)
    | tx bytes (8) | link rate in Mbit/s (4), big-endian."""
    assert 0 <= h["queue_id"] <= 0xFF and 0 <= h["qocc"] <= QOCC_MAX, h
    return struct.pack("!IIQQI", h["node_id"], (h["queue_id"] << 24) | h["qocc"], h["ts"],
                       h["tx_bytes"], h["rate_mbps"])


def parse_hop(b):
    node_id, q, ts, tx, rate = struct.unpack("!IIQQI", bytes(b[:HOP_LEN]))
    return hop(node_id, q >> 24, q & 0xFFFFFF, ts, tx, rate)


# ------------------------------------------------------------------------------------------
# Frame plumbing
# ------------------------------------------------------------------------------------------

def mac_str(b):
    return ":".join("%02x" % x for x in b)


def _ip(b):
    if len(b) == 4:
        return ".".join(str(x) for x in b)
    import ipaddress
    return str(ipaddress.IPv6Address(bytes(b)))


def _locate(frame):
    """(ip offset, UDP offset, ipv6) of an Ethernet II (no VLAN) IPv4/IPv6 UDP frame, or None."""
    if len(frame) < 14:
        return None
    et = struct.unpack("!H", frame[12:14])[0]
    if et == 0x0800 and len(frame) >= 34:
        ihl = (frame[14] & 0x0F) * 4
        if frame[14] >> 4 != 4 or ihl < 20 or frame[23] != 17 or len(frame) < 14 + ihl + 8:
            return None
        return 14, 14 + ihl, False
    if et == 0x86DD and len(frame) >= 14 + 40 + 8:
        if frame[20] != 17:
            return None
        return 14, 54, True
    return None


def _ip_fields(frame, ip_off, ipv6, problems):
    """IP header fields as a dict and the end of the IP packet in the frame."""
    d = {}
    if ipv6:
        h = frame[ip_off:ip_off + 40]
        tc = ((h[0] & 0x0F) << 4) | (h[1] >> 4)
        plen = struct.unpack("!H", h[4:6])[0]
        d.update(ip_version=6, ip_src=_ip(h[8:24]), ip_dst=_ip(h[24:40]), dscp=tc >> 2, ecn=tc & 3,
                 ttl=h[7], ip_id=None, df=None, ip_len=plen)
        end = ip_off + 40 + plen
    else:
        ihl = (frame[ip_off] & 0x0F) * 4
        h = frame[ip_off:ip_off + ihl]
        tot, ipid, frag = struct.unpack("!HHH", h[2:8])
        d.update(ip_version=4, ip_src=_ip(h[12:16]), ip_dst=_ip(h[16:20]), dscp=h[1] >> 2, ecn=h[1] & 3,
                 ttl=h[8], ip_id=ipid, df=bool(frag & 0x4000), mf=bool(frag & 0x2000),
                 frag_offset=frag & 0x1FFF, ip_len=tot, ip_ihl=ihl,
                 ip_checksum_ok=inet_checksum(h) == 0)
        end = ip_off + tot
        if inet_checksum(h) != 0:
            problems.append("bad IPv4 header checksum")
    if end > len(frame):
        problems.append(f"IP length {d['ip_len']} exceeds the frame")
        end = len(frame)
    d["trailer_len"] = len(frame) - end
    return d, end


def _bth_fields(bth):
    return dict(bth_opcode=bth[0], bth_se=bth[1] >> 7, bth_m=(bth[1] >> 6) & 1,
                bth_pad=(bth[1] >> 4) & 3, bth_tver=bth[1] & 0xF,
                bth_pkey=struct.unpack("!H", bth[2:4])[0], bth_byte4=bth[4], bth_fecn=bth[4] >> 7,
                bth_becn=(bth[4] >> 6) & 1, bth_destqp=int.from_bytes(bth[5:8], "big"),
                bth_ackreq=bth[8] >> 7, bth_rsvd7=bth[8] & 0x7F,
                bth_psn=int.from_bytes(bth[9:12], "big"))


def _icrc_ok(frame, ip_off, end, ipv6):
    """The stored ICRC (last 4 bytes of the IP packet) verifies (oracle/verify.py's code)."""
    if end - ip_off < 4:
        return False
    return verify_icrc(frame[ip_off:end - 4], ipv6) == frame[end - 4:end]


def _set_lengths(b, ip_off, l4, ipv6, delta):
    """Add `delta` to the UDP length and the IP total / payload length; IPv4 checksum redone."""
    ulen = struct.unpack("!H", b[l4 + 4:l4 + 6])[0]
    b[l4 + 4:l4 + 6] = struct.pack("!H", (ulen + delta) & 0xFFFF)
    if ipv6:
        plen = struct.unpack("!H", b[ip_off + 4:ip_off + 6])[0]
        b[ip_off + 4:ip_off + 6] = struct.pack("!H", (plen + delta) & 0xFFFF)
    else:
        tot = struct.unpack("!H", b[ip_off + 2:ip_off + 4])[0]
        b[ip_off + 2:ip_off + 4] = struct.pack("!H", (tot + delta) & 0xFFFF)
        b[ip_off + 10:ip_off + 12] = b"\0\0"
        b[ip_off + 10:ip_off + 12] = struct.pack("!H", inet_checksum(bytes(b[ip_off:l4])))


def routed(frame, src_mac, dst_mac):
    """`frame` as a router forwards it, done by scapy: MACs rewritten, TTL / hop limit - 1,
    IPv4 checksum recomputed; every other byte (lengths, INT, ICRC) as it was."""
    from scapy.layers.l2 import Ether
    from scapy.layers.inet import IP
    from scapy.layers.inet6 import IPv6
    p = Ether(bytes(frame))
    p.src = src_mac if isinstance(src_mac, str) else mac_str(src_mac)
    p.dst = dst_mac if isinstance(dst_mac, str) else mac_str(dst_mac)
    if IP in p:
        p[IP].ttl -= 1
        p[IP].chksum = None
    else:
        p[IPv6].hlim -= 1
    out = bytes(p)
    assert len(out) == len(frame)
    return out


# ------------------------------------------------------------------------------------------
# INT in data packets
# ------------------------------------------------------------------------------------------

def int_bytes(hops, *, rhc=None, max_hops=3, c_d=None, e=False, orig_port=ROCE_PORT,
              ds_flags=None):
    """The INT bytes of docs/wire-formats.md: shim (4), INT-MD header (12), the hop records
    (`hops` newest first). RemainingHopCount = `rhc` (default max_hops - len(hops): each hop
    that pushed a record took one), DS Flags = 0x8000 | C_D when `c_d` is given, else 0."""
    n = SHIM_LEN + MD_LEN + HOP_LEN * len(hops)
    if rhc is None:
        rhc = max(0, max_hops - len(hops))
    if ds_flags is None:
        ds_flags = 0 if c_d is None else FLAG_CD | (c_d & 0x7FFF)
    shim = struct.pack("!BBH", SHIM_BYTE0, n // 4, orig_port)
    md0 = (MD_VER << 28) | ((1 if e else 0) << 26) | (HOP_ML << 8) | rhc
    md = struct.pack("!IHHHH", md0, INSTRUCTIONS, DS_ID, DS_INSTRUCTION, ds_flags)
    out = shim + md + b"".join(hop_bytes(h) for h in hops)
    assert len(out) == n
    return out


def insert_int(frame, ins, int_port=INT_PORT):
    """Insert the INT bytes `ins` (shim first) into a RoCEv2 frame right after its UDP header:
    UDP dport = `int_port`, UDP and IP lengths + len(ins), IPv4 checksum recomputed (by scapy,
    cross-checked with plain byte surgery). The ICRC is left as it was."""
    from scapy.layers.l2 import Ether
    from scapy.layers.inet import IP, UDP
    from scapy.layers.inet6 import IPv6
    from scapy.packet import Raw
    p = Ether(frame)
    assert p.haslayer(UDP) and p[UDP].dport == ROCE_PORT, "not a RoCEv2 frame"
    udp = p[UDP]
    rest = bytes(udp.payload)
    if IP in p:
        ip = p[IP].copy()
        ip.remove_payload()
        ip.len, ip.chksum = None, None
    else:
        ip = p[IPv6].copy()
        ip.remove_payload()
        ip.plen = None
    out = bytes(Ether(src=p.src, dst=p.dst, type=p.type) / ip
                / UDP(sport=udp.sport, dport=int_port, len=None, chksum=udp.chksum) / Raw(ins + rest))
    ip_off, l4, ipv6 = _locate(frame)
    b = bytearray(frame[:l4 + 8] + ins + frame[l4 + 8:])
    b[l4 + 2:l4 + 4] = struct.pack("!H", int_port)
    _set_lengths(b, ip_off, l4, ipv6, len(ins))
    assert bytes(b) == out, "scapy and byte insertion disagree"
    return out


def roce_frame(src_mac, dst_mac, src, dst, *, dqpn, psn, opcode=0x0A, payload=b"", pad=0,
               pkey=0xFFFF, ackreq=0, tos=TOS_RDMA, ttl=64, ipid=1, sport=49152, df=True,
               ipv6=False, ext=b""):
    """A RoCEv2 frame built by scapy (ICRC computed by scapy.contrib.roce); `ext` = extension
    header bytes before the payload (e.g. a RETH). Default opcode: RDMA WRITE ONLY (0x0A)."""
    from scapy.layers.l2 import Ether
    from scapy.layers.inet import IP, UDP
    from scapy.layers.inet6 import IPv6
    from scapy.packet import Raw
    from scapy.contrib.roce import BTH
    if ipv6:
        l3 = IPv6(src=src, dst=dst, tc=tos, hlim=ttl)
    else:
        l3 = IP(src=src, dst=dst, tos=tos, ttl=ttl, id=ipid, flags="DF" if df else 0)
    return bytes(Ether(src=src_mac, dst=dst_mac) / l3 / UDP(sport=sport, dport=ROCE_PORT, chksum=0)
                 / BTH(opcode=opcode, padcount=pad, pkey=pkey, dqpn=dqpn, psn=psn, ackreq=ackreq)
                 / Raw(ext + payload + bytes(pad)))


def build_int_data(src_mac, dst_mac, src, dst, *, dqpn, psn, hops, max_hops=3, rhc=None, c_d=None,
                   e=False, int_port=INT_PORT, **roce_kw):
    """MLCC INT data: the RoCEv2 RC data frame of `roce_frame` (valid ICRC), then the MLCC INT
    with `hops` (newest first) inserted after UDP. The ICRC stays the one without INT."""
    f = roce_frame(src_mac, dst_mac, src, dst, dqpn=dqpn, psn=psn, **roce_kw)
    return insert_int(f, int_bytes(hops, rhc=rhc, max_hops=max_hops, c_d=c_d, e=e), int_port)


def strip_int(frame, int_port=INT_PORT):
    """The frame without its INT (UDP dport from the shim, UDP/IP lengths - INT bytes, IPv4
    checksum recomputed), or None if it has no INT-MD shim on `int_port`."""
    frame = bytes(frame)
    loc = _locate(frame)
    if loc is None:
        return None
    ip_off, l4, ipv6 = loc
    if struct.unpack("!H", frame[l4 + 2:l4 + 4])[0] != int_port or len(frame) < l4 + 8 + SHIM_LEN:
        return None
    shim = frame[l4 + 8:l4 + 12]
    n = shim[1] * 4
    if shim[0] >> 4 != 1 or n < SHIM_LEN + MD_LEN or len(frame) < l4 + 8 + n:
        return None
    b = bytearray(frame[:l4 + 8] + frame[l4 + 8 + n:])
    b[l4 + 2:l4 + 4] = shim[2:4]
    _set_lengths(b, ip_off, l4, ipv6, -n)
    return bytes(b)


def decode_int(frame, int_port=INT_PORT):
    """Every field of an MLCC INT data frame as a dict; None if `frame` is not UDP to `int_port`
    with an INT-MD shim and an INT-MD header of the MLCC domain (DS ID 0x4D4C).

    Keys: the Ethernet/IP/UDP fields, shim_* and md_* (md_e = the E bit), ds_*, `hops` (list of
    hop dicts, newest first), `c_d` (None when DS Flags has no credit), bth_*, payload_len,
    `icrc_ok` (the ICRC verifies once the INT is stripped), `problems`, `conforms`."""
    frame = bytes(frame)
    loc = _locate(frame)
    if loc is None:
        return None
    ip_off, l4, ipv6 = loc
    sport, dport, ulen, ucsum = struct.unpack("!HHHH", frame[l4:l4 + 8])
    s = l4 + 8
    if dport != int_port or len(frame) < s + SHIM_LEN + MD_LEN:
        return None
    shim0, shim_words, orig = frame[s], frame[s + 1], struct.unpack("!H", frame[s + 2:s + 4])[0]
    md0, instr, ds_id, ds_instr, ds_flags = struct.unpack("!IHHHH", frame[s + 4:s + 16])
    if shim0 >> 4 != 1 or ds_id != DS_ID:
        return None
    problems = []
    d = dict(mlcc_int=True, len=len(frame), eth_dst=mac_str(frame[0:6]), eth_src=mac_str(frame[6:12]),
             ethertype=struct.unpack("!H", frame[12:14])[0])
    ipd, end = _ip_fields(frame, ip_off, ipv6, problems)
    d.update(ipd)
    d.update(udp_sport=sport, udp_dport=dport, udp_len=ulen, udp_checksum=ucsum)
    if l4 + ulen != end:
        problems.append(f"UDP length {ulen} disagrees with the IP length")
    d.update(shim_byte0=shim0, shim_type=shim0 >> 4, shim_npt=(shim0 >> 2) & 3, shim_rsvd=shim0 & 3,
             shim_len_words=shim_words, shim_orig_dport=orig,
             md_ver=md0 >> 28, md_d=(md0 >> 27) & 1, md_e=(md0 >> 26) & 1, md_m=(md0 >> 25) & 1,
             md_rsvd=(md0 >> 13) & 0xFFF, md_hop_ml=(md0 >> 8) & 0x1F, md_rhc=md0 & 0xFF,
             md_instructions=instr, ds_id=ds_id, ds_instruction=ds_instr, ds_flags=ds_flags,
             c_d=(ds_flags & 0x7FFF) if ds_flags & FLAG_CD else None, e=bool((md0 >> 26) & 1))
    for k, v in [("shim_byte0", SHIM_BYTE0), ("shim_orig_dport", ROCE_PORT), ("md_ver", MD_VER),
                 ("md_d", 0), ("md_m", 0), ("md_rsvd", 0), ("md_hop_ml", HOP_ML),
                 ("md_instructions", INSTRUCTIONS), ("ds_instruction", DS_INSTRUCTION)]:
        if d[k] != v:
            problems.append(f"{k} = {d[k]:#x}, expected {v:#x}")
    if not ds_flags & FLAG_CD and ds_flags:
        problems.append(f"ds_flags {ds_flags:#06x}: bits set without the C_D flag 0x8000")
    n = shim_words * 4
    stack = n - SHIM_LEN - MD_LEN
    hops = []
    if stack < 0 or stack % HOP_LEN:
        problems.append(f"shim length {n} bytes: the stack ({stack} bytes) is not a whole number "
                        f"of {HOP_LEN}-byte hops")
    elif s + n > end:
        problems.append(f"shim length {n} bytes runs past the IP packet")
    else:
        hops = [parse_hop(frame[o:o + HOP_LEN]) for o in range(s + SHIM_LEN + MD_LEN, s + n, HOP_LEN)]
    d["hops"] = hops
    d["n_hops"] = len(hops)
    b = s + n
    if end - b < 12 + 4:
        problems.append("too short for BTH + ICRC after the INT")
        d.update(problems=problems, conforms=False, icrc_ok=False)
        return d
    d.update(_bth_fields(frame[b:b + 12]))
    d["payload_len"] = end - 4 - (b + 12)
    d["icrc"] = frame[end - 4:end].hex()
    if d["bth_opcode"] not in RC_DATA_OPCODES:
        problems.append(f"BTH opcode {d['bth_opcode']:#04x} is not RC SEND / RDMA WRITE data")
    plain = strip_int(frame[:end], int_port)
    if plain is None:
        d["icrc_ok"] = False
    else:
        pl = _locate(plain)
        d["icrc_ok"] = _icrc_ok(plain, pl[0], len(plain), ipv6)
    if not d["icrc_ok"]:
        problems.append("ICRC does not verify with the INT stripped")
    d["problems"] = problems
    d["conforms"] = not problems
    return d


# ------------------------------------------------------------------------------------------
# Switch-INT
# ------------------------------------------------------------------------------------------

def switch_int_header(n_hops, data_psn, flags=0, version=SI_VERSION, instructions=INSTRUCTIONS,
                      ds_instruction=DS_INSTRUCTION, hop_ml=HOP_ML):
    """The 16 bytes in the CNP's reserved field (docs/wire-formats.md)."""
    return struct.pack("!HBBHHBBHI", DS_ID, version, n_hops, instructions, ds_instruction, hop_ml,
                       flags, 0, data_psn & 0xFFFFFF)


def build_switch_int(src_mac, dst_mac, src, dst, *, dqpn, data_psn, hops, flags=0, sport=49152,
                     dscp=48, ecn=2, ttl=64, ipid=0, ipv6=False):
    """A Switch-INT built by scapy: CNP (opcode 0x81, BECN, P_Key 0xFFFF, PSN 0) whose 16
    reserved bytes are the Switch-INT header, then the hops (newest first), then the ICRC
    (computed by scapy over all of it). IPv4: DF, IP ID `ipid`, ToS = dscp << 2 | ecn."""
    from scapy.layers.l2 import Ether
    from scapy.layers.inet import IP, UDP
    from scapy.layers.inet6 import IPv6
    from scapy.packet import Raw
    from scapy.contrib.roce import BTH
    tos = (dscp << 2) | ecn
    if ipv6:
        l3 = IPv6(src=src, dst=dst, tc=tos, hlim=ttl)
    else:
        l3 = IP(src=src, dst=dst, tos=tos, ttl=ttl, id=ipid, flags="DF")
    body = switch_int_header(len(hops), data_psn, flags) + b"".join(hop_bytes(h) for h in hops)
    return bytes(Ether(src=src_mac, dst=dst_mac) / l3 / UDP(sport=sport, dport=ROCE_PORT, chksum=0)
                 / BTH(opcode=OP_CNP, becn=1, pkey=0xFFFF, dqpn=dqpn, psn=0) / Raw(body))


def expected_switch_int(data, src_mac, dst_mac, *, ttl=63, dscp=48, int_port=INT_PORT):
    """The Switch-INT docs/wire-formats.md prescribes for the INT data frame `data` as it leaves
    the DCI toward the sender with MACs (src_mac, dst_mac) and `ttl` (64 - 1 after routing):
    addresses swapped, the data's UDP sport, DestQP = the data's DestQP, the data's PSN, the
    hops as in the data (cut to 8, flag 0x80), flag 0x40 = the data's E bit."""
    d = decode_int(data, int_port)
    assert d is not None and "bth_psn" in d, "not MLCC INT data"
    hops = d["hops"]
    flags = (SI_FLAG_E if d["e"] else 0) | (SI_FLAG_CUT if len(hops) > SI_MAX_HOPS else 0)
    sm = src_mac if isinstance(src_mac, str) else mac_str(src_mac)
    dm = dst_mac if isinstance(dst_mac, str) else mac_str(dst_mac)
    return build_switch_int(sm, dm, d["ip_dst"], d["ip_src"], dqpn=d["bth_destqp"],
                            data_psn=d["bth_psn"], hops=hops[:SI_MAX_HOPS], flags=flags,
                            sport=d["udp_sport"], dscp=dscp, ttl=ttl, ipv6=d["ip_version"] == 6)


def decode_switch_int(frame):
    """Every field of a Switch-INT as a dict; None if `frame` is not a RoCEv2 CNP (UDP 4791,
    opcode 0x81) whose reserved bytes start with 0x4D4C.

    Keys: Ethernet/IP/UDP fields, bth_*, si_magic, si_version, si_n (hop count), si_instructions,
    si_ds_instruction, si_hop_ml, si_flags, cut (0x80), e (0x40), si_rsvd (bytes 10-11),
    si_psn_word (bytes 12-15), data_psn, hops (newest first), icrc_ok, problems, conforms."""
    frame = bytes(frame)
    loc = _locate(frame)
    if loc is None:
        return None
    ip_off, l4, ipv6 = loc
    sport, dport, ulen, ucsum = struct.unpack("!HHHH", frame[l4:l4 + 8])
    b = l4 + 8
    if dport != ROCE_PORT or len(frame) < b + 12 + SI_HDR_LEN or frame[b] != OP_CNP:
        return None
    h = b + 12
    if struct.unpack("!H", frame[h:h + 2])[0] != DS_ID:
        return None
    problems = []
    d = dict(switch_int=True, len=len(frame), eth_dst=mac_str(frame[0:6]), eth_src=mac_str(frame[6:12]),
             ethertype=struct.unpack("!H", frame[12:14])[0])
    ipd, end = _ip_fields(frame, ip_off, ipv6, problems)
    d.update(ipd)
    d.update(udp_sport=sport, udp_dport=dport, udp_len=ulen, udp_checksum=ucsum)
    if l4 + ulen != end:
        problems.append(f"UDP length {ulen} disagrees with the IP length")
    d.update(_bth_fields(frame[b:b + 12]))
    magic, ver, n, instr, ds_instr, hop_ml, flags, rsvd, psn_word = struct.unpack(
        "!HBBHHBBHI", frame[h:h + SI_HDR_LEN])
    d.update(si_magic=magic, si_version=ver, si_n=n, si_instructions=instr, si_ds_instruction=ds_instr,
             si_hop_ml=hop_ml, si_flags=flags, cut=bool(flags & SI_FLAG_CUT), e=bool(flags & SI_FLAG_E),
             si_rsvd=rsvd, si_psn_word=psn_word, data_psn=psn_word & 0xFFFFFF)
    for k, v in [("bth_becn", 1), ("bth_fecn", 0), ("bth_pkey", 0xFFFF), ("bth_psn", 0),
                 ("bth_se", 0), ("bth_m", 0), ("bth_pad", 0), ("bth_tver", 0), ("bth_ackreq", 0),
                 ("bth_rsvd7", 0), ("si_version", SI_VERSION), ("si_instructions", INSTRUCTIONS),
                 ("si_ds_instruction", DS_INSTRUCTION), ("si_hop_ml", HOP_ML), ("si_rsvd", 0)]:
        if d[k] != v:
            problems.append(f"{k} = {d[k]:#x}, expected {v:#x}")
    if flags & ~(SI_FLAG_CUT | SI_FLAG_E):
        problems.append(f"si_flags {flags:#04x} has bits other than 0x80/0x40")
    if psn_word >> 24:
        problems.append(f"si_psn_word {psn_word:#010x}: top byte not 0")
    if n > SI_MAX_HOPS:
        problems.append(f"hop count {n} > {SI_MAX_HOPS}")
    body = end - 4 - (h + SI_HDR_LEN)          # bytes between the header and the ICRC
    hops = []
    if body != n * HOP_LEN:
        problems.append(f"{body} bytes of hops between the header and the ICRC, expected "
                        f"{n} x {HOP_LEN}")
    if body >= 0:
        hops = [parse_hop(frame[o:o + HOP_LEN])
                for o in range(h + SI_HDR_LEN, h + SI_HDR_LEN + min(n, body // HOP_LEN) * HOP_LEN, HOP_LEN)]
    d["hops"] = hops
    if not ipv6 and d["ip_len"] != 60 + HOP_LEN * n:
        problems.append(f"IPv4 total length {d['ip_len']}, expected {60 + HOP_LEN * n}")
    d["icrc"] = frame[end - 4:end].hex()
    d["icrc_ok"] = _icrc_ok(frame, ip_off, end, ipv6)
    if not d["icrc_ok"]:
        problems.append("ICRC does not verify")
    d["problems"] = problems
    d["conforms"] = not problems
    return d


# ------------------------------------------------------------------------------------------
# ACK with MCETH
# ------------------------------------------------------------------------------------------

def mceth_bytes(qpn, c_r, r_credit_kbps, r_dqm_kbps=0, flags=MCETH_CREDIT, version=MCETH_VERSION):
    """The 20 MCETH bytes of docs/wire-formats.md."""
    return struct.pack("!HBBIHHII", DS_ID, version, flags, qpn & 0xFFFFFF, c_r & 0x7FFF, 0,
                       r_credit_kbps, r_dqm_kbps)


def build_ack_mceth(src_mac, dst_mac, src, dst, *, dqpn, psn, qpn, c_r, r_credit_kbps, r_dqm_kbps=0,
                    flags=MCETH_CREDIT, syndrome=0x1F, msn=0, pkey=0xFFFF, tos=TOS_RDMA & ~3,
                    ttl=64, ipid=0, sport=49152, ipv6=False):
    """An RC ACK (opcode 0x11, AETH) with the MCETH after the AETH, built by scapy (ICRC over
    all of it). `dqpn` = the requester's QP (BTH.DestQP), `qpn` = the responder's (MCETH)."""
    from scapy.layers.l2 import Ether
    from scapy.layers.inet import IP, UDP
    from scapy.layers.inet6 import IPv6
    from scapy.packet import Raw
    from scapy.contrib.roce import BTH, AETH
    if ipv6:
        l3 = IPv6(src=src, dst=dst, tc=tos, hlim=ttl)
    else:
        l3 = IP(src=src, dst=dst, tos=tos, ttl=ttl, id=ipid, flags="DF")
    return bytes(Ether(src=src_mac, dst=dst_mac) / l3 / UDP(sport=sport, dport=ROCE_PORT, chksum=0)
                 / BTH(opcode=OP_ACK, pkey=pkey, dqpn=dqpn, psn=psn)
                 / AETH(syndrome=syndrome, msn=msn)
                 / Raw(mceth_bytes(qpn, c_r, r_credit_kbps, r_dqm_kbps, flags)))


def with_r_dqm(frame, r_dqm_kbps, flags=None):
    """The ACK `frame` with MCETH R_DQM = `r_dqm_kbps`, flags |= 0x40 (or `flags`), and its
    ICRC recomputed by scapy: what the receiver-side DCI writes."""
    from scapy.layers.l2 import Ether
    from scapy.contrib.roce import BTH
    d = decode_mceth(frame)
    assert d is not None, "no MCETH"
    m = d["mceth_off"]
    b = bytearray(frame)
    b[m + 3] = (d["flags"] | MCETH_DQM) if flags is None else flags
    b[m + 16:m + 20] = struct.pack("!I", r_dqm_kbps)
    p = Ether(bytes(b))
    p[BTH].icrc = None
    return bytes(p)


def decode_mceth(frame):
    """Every field of an RC ACK (UDP 4791, opcode 0x11) carrying an MCETH (0x4D4C right after
    the AETH) as a dict; None otherwise.

    Keys: Ethernet/IP/UDP fields, bth_*, aeth_syndrome, aeth_msn, magic, version, flags, credit
    (0x80), dqm (0x40), rsvd4 (byte 4), qpn, c_r_word (bytes 8-9), c_r, rsvd10 (bytes 10-11),
    r_credit_kbps, r_dqm_kbps, mceth_off (frame offset), icrc_ok, problems, conforms."""
    frame = bytes(frame)
    loc = _locate(frame)
    if loc is None:
        return None
    ip_off, l4, ipv6 = loc
    sport, dport, ulen, ucsum = struct.unpack("!HHHH", frame[l4:l4 + 8])
    b = l4 + 8
    m = b + 12 + 4
    if dport != ROCE_PORT or len(frame) < m + 2 or frame[b] != OP_ACK:
        return None
    if struct.unpack("!H", frame[m:m + 2])[0] != DS_ID:
        return None
    problems = []
    d = dict(mceth=True, len=len(frame), eth_dst=mac_str(frame[0:6]), eth_src=mac_str(frame[6:12]),
             ethertype=struct.unpack("!H", frame[12:14])[0])
    ipd, end = _ip_fields(frame, ip_off, ipv6, problems)
    d.update(ipd)
    d.update(udp_sport=sport, udp_dport=dport, udp_len=ulen, udp_checksum=ucsum)
    if l4 + ulen != end:
        problems.append(f"UDP length {ulen} disagrees with the IP length")
    d.update(_bth_fields(frame[b:b + 12]))
    aeth = struct.unpack("!I", frame[b + 12:b + 16])[0]
    d.update(aeth_syndrome=aeth >> 24, aeth_msn=aeth & 0xFFFFFF, mceth_off=m)
    if end - 4 - m != MCETH_LEN:
        problems.append(f"{end - 4 - m} bytes between the AETH and the ICRC, expected {MCETH_LEN}")
        d.update(problems=problems, conforms=False, icrc_ok=False)
        return d
    magic, ver, flags, qpn_word, c_r_word, rsvd10, r_credit, r_dqm = struct.unpack(
        "!HBBIHHII", frame[m:m + MCETH_LEN])
    d.update(magic=magic, version=ver, flags=flags, credit=bool(flags & MCETH_CREDIT),
             dqm=bool(flags & MCETH_DQM), rsvd4=qpn_word >> 24, qpn=qpn_word & 0xFFFFFF,
             c_r_word=c_r_word, c_r=c_r_word & 0x7FFF, rsvd10=rsvd10, r_credit_kbps=r_credit,
             r_dqm_kbps=r_dqm)
    for k, v in [("version", MCETH_VERSION), ("rsvd4", 0), ("rsvd10", 0)]:
        if d[k] != v:
            problems.append(f"{k} = {d[k]:#x}, expected {v:#x}")
    if flags & ~(MCETH_CREDIT | MCETH_DQM):
        problems.append(f"flags {flags:#04x} has bits other than 0x80/0x40")
    if c_r_word >> 15:
        problems.append(f"C_R word {c_r_word:#06x}: bit 15 set (C_R has 15 bits)")
    if not ipv6 and d["ip_len"] != 68:
        problems.append(f"IPv4 total length {d['ip_len']}, expected 68 (an ACK's 48 + 20)")
    d["icrc"] = frame[end - 4:end].hex()
    d["icrc_ok"] = _icrc_ok(frame, ip_off, end, ipv6)
    if not d["icrc_ok"]:
        problems.append("ICRC does not verify")
    d["problems"] = problems
    d["conforms"] = not problems
    return d


def kbps(bps):
    """bit/s -> the kbit/s of the MCETH fields: integer truncation of bps / 1000."""
    return int(bps) // 1000


# ------------------------------------------------------------------------------------------
# Helpers for the mlcc_* / int_source_* cases' check.py scripts
# ------------------------------------------------------------------------------------------

def load_case_config(case_dir):
    """The switch config a case runs (case.toml's `config`, relative to the case dir)."""
    import tomllib
    with open(os.path.join(case_dir, "case.toml"), "rb") as f:
        case = tomllib.load(f)
    with open(os.path.normpath(os.path.join(case_dir, case["config"])), "rb") as f:
        return tomllib.load(f)


def port_macs(cfg):
    return {p["name"]: mac_str(bytes.fromhex(p["mac"].replace(":", ""))) for p in cfg["ports"]}


def port_rate_bps(cfg, name):
    for p in cfg["ports"]:
        if p["name"] == name:
            return int(round(float(p["rate_gbps"]) * 1e9))
    raise KeyError(name)


def next_hop(cfg, prefix):
    for r in cfg["routes"]:
        if r["prefix"] == prefix:
            return r["port"], r["next_hop_mac"]
    raise KeyError(prefix)


def read_port(outdir, name):
    """out_<name>.pcap of a run ([] when the file is absent)."""
    path = os.path.join(outdir, f"out_{name}.pcap")
    return read_pcap(path) if os.path.exists(path) else []


def first_diff(a, b):
    """Index of the first differing byte (len of the shorter if one is a prefix), or None."""
    for k in range(min(len(a), len(b))):
        if a[k] != b[k]:
            return k
    return None if len(a) == len(b) else min(len(a), len(b))


# ------------------------------------------------------------------------------------------
# CLI
# ------------------------------------------------------------------------------------------

def decode_any(frame, int_port=INT_PORT):
    """The first of decode_int / decode_switch_int / decode_mceth that recognises `frame`,
    with `kind` = "int" / "switch_int" / "mceth"; None if none does."""
    for kind, fn in (("int", lambda f: decode_int(f, int_port)), ("switch_int", decode_switch_int),
                     ("mceth", decode_mceth)):
        d = fn(frame)
        if d is not None:
            d["kind"] = kind
            return d
    return None


def main(argv):
    if len(argv) < 2 or argv[0] != "decode":
        print(__doc__, file=sys.stderr)
        return 2
    port = INT_PORT
    args = list(argv[1:])
    if "--int-port" in args:
        k = args.index("--int-port")
        port = int(args[k + 1])
        del args[k:k + 2]
    for path in args:
        for ts, f in read_pcap(path):
            d = decode_any(f, port)
            if d is None:
                print(json.dumps({"kind": None}))
            else:
                d["pcap_ts_ns"] = ts
                print(json.dumps(d, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
