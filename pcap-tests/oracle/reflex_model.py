#!/usr/bin/env python3
"""Independent model of Reflex's wire format and NSF state machine (paper 003, section III).

    python3 reflex_model.py decode FILE.pcap [--int-port 5000]   # one JSON object per frame

Written from docs/wire-formats.md ("INT over UDP" and "Reflex: timestamps, their echo, and
pseudo-ACKs, version 1") and docs/reflex.md, never from longhaul's Rust code:

* `build_reflex_data` / `build_reflex_ack`: frames made with scapy. The RoCEv2 packet is built
  WITHOUT INT first (scapy's RoCE layer computes its ICRC), then the INT (4-byte shim, 12-byte
  INT-MD header, one 12-byte hop) goes right after the UDP header, the UDP destination port
  becomes the INT port (4791 moves into the shim) and the IP/UDP lengths grow by 28 (scapy
  recomputes the IPv4 header checksum).
* `decode(frame)`: every field as a dict (None if the frame is not a Reflex INT frame), with
  `icrc_ok` = the ICRC verifies once the INT is stripped (UDP port 4791, lengths and the IPv4
  checksum restored), checked with oracle/verify.py's independent ICRC.
* `nsf_model(...)`: the NSF flow state machine (docs/reflex.md "The NSF state machine"):
  which data packets make a pseudo-ACK.
"""
import json
import os
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from verify import icrc as verify_icrc, inet_checksum  # noqa: E402
from pcaputil import read_pcap  # noqa: E402

ROCE_PORT = 4791
INT_PORT = 5000                  # [reflex] int_udp_port default
INT_LEN = 28                     # shim 4 + INT-MD header 12 + one hop 12
SHIM_BYTE0 = (1 << 4) | (1 << 2)  # type 1 (INT-MD) | NPT 1 (original UDP port in bytes 2-3)
SHIM_WORDS = INT_LEN // 4        # 7
MD_VER = 2
HOP_ML = 3                       # words per hop: 8-byte timestamp + 4-byte QPN word
INSTRUCTIONS = 0x0400            # bit 5: egress timestamp (8 bytes)
DS_ID = 0x5246                   # "RF"
DS_INSTRUCTION = 0x8000          # bit 0: the requester's QPN (4 bytes)
FLAG_NSF = 0x8000
FLAG_ECHO = 0x4000
OP_ACK = 0x11                    # RC Acknowledge
OP_ATOMIC_ACK = 0x12
OP_CNP = 0x81
SYNDROME_ACK = 0x1F              # ACK, credits invalid
AETH_OPCODES = (0x0D, 0x0F, 0x10, OP_ACK, OP_ATOMIC_ACK)  # RC read response first/last/only, ACK

TOS_RDMA = (26 << 2) | 0b10      # DSCP 26, ECT(0)
TOS_PSEUDO_ACK = 48 << 2         # DSCP 48, Not-ECT


# ------------------------------------------------------------------------------------------
# Building frames (scapy)
# ------------------------------------------------------------------------------------------

def int_bytes(ts, qpn, ds_flags=0, orig_port=ROCE_PORT):
    """The 28 INT bytes of docs/wire-formats.md: shim, INT-MD header, one hop."""
    shim = struct.pack("!BBH", SHIM_BYTE0, SHIM_WORDS, orig_port)
    md = struct.pack("!IHHHH", (MD_VER << 28) | (HOP_ML << 8) | 0, INSTRUCTIONS, DS_ID,
                     DS_INSTRUCTION, ds_flags)
    hop = struct.pack("!QI", ts, qpn & 0xFFFFFF)
    out = shim + md + hop
    assert len(out) == INT_LEN
    return out


def insert_int(frame, ts, qpn, ds_flags=0, int_port=INT_PORT):
    """Insert the Reflex INT into a RoCEv2 frame (bytes, Ether/IPv4 or IPv6/UDP 4791/...): the
    INT goes right after the UDP header, UDP dport = int_port, IP and UDP lengths + 28, IPv4
    header checksum recomputed by scapy. The ICRC bytes are left as they were."""
    from scapy.layers.l2 import Ether
    from scapy.layers.inet import IP, UDP
    from scapy.layers.inet6 import IPv6
    from scapy.packet import Raw
    p = Ether(frame)
    assert p.haslayer(UDP) and p[UDP].dport == ROCE_PORT, "not a RoCEv2 frame"
    udp = p[UDP]
    rest = bytes(udp.payload)              # BTH ... ICRC
    ins = int_bytes(ts, qpn, ds_flags, ROCE_PORT)
    if IP in p:
        ip = p[IP].copy()
        ip.remove_payload()
        ip.len, ip.chksum = None, None
    else:
        ip = p[IPv6].copy()
        ip.remove_payload()
        ip.plen = None
    eth = Ether(src=p.src, dst=p.dst, type=p.type)
    out = bytes(eth / ip / UDP(sport=udp.sport, dport=int_port, len=None, chksum=udp.chksum)
                / Raw(ins + rest))
    # Cross-check with plain byte surgery (the same thing, done by hand).
    ip_off, l4, _ = _locate(frame)
    b = bytearray(frame[:l4 + 8] + ins + frame[l4 + 8:])
    b[l4 + 2:l4 + 4] = struct.pack("!H", int_port)
    b[l4 + 4:l4 + 6] = struct.pack("!H", struct.unpack("!H", frame[l4 + 4:l4 + 6])[0] + INT_LEN)
    if IP in p:
        b[ip_off + 2:ip_off + 4] = struct.pack("!H", struct.unpack("!H", frame[ip_off + 2:ip_off + 4])[0] + INT_LEN)
        b[ip_off + 10:ip_off + 12] = b"\0\0"
        b[ip_off + 10:ip_off + 12] = struct.pack("!H", inet_checksum(bytes(b[ip_off:l4])))
    else:
        b[ip_off + 4:ip_off + 6] = struct.pack("!H", struct.unpack("!H", frame[ip_off + 4:ip_off + 6])[0] + INT_LEN)
    assert bytes(b) == out, "scapy and byte insertion disagree"
    return out


def _roce(src_mac, dst_mac, src, dst, bth_kw, body, tos, ttl, ipid, sport, df, ipv6):
    from scapy.layers.l2 import Ether
    from scapy.layers.inet import IP, UDP
    from scapy.layers.inet6 import IPv6
    from scapy.contrib.roce import BTH
    if ipv6:
        l3 = IPv6(src=src, dst=dst, tc=tos, hlim=ttl)
    else:
        l3 = IP(src=src, dst=dst, tos=tos, ttl=ttl, id=ipid, flags="DF" if df else 0)
    return bytes(Ether(src=src_mac, dst=dst_mac) / l3 / UDP(sport=sport, dport=ROCE_PORT, chksum=0)
                 / BTH(**bth_kw) / body)


def build_reflex_data(src_mac, dst_mac, src, dst, *, ts, qpn, dqpn, psn, opcode=0x07,
                      payload=b"", pad=0, pkey=0xFFFF, ackreq=0, tos=TOS_RDMA, ttl=64, ipid=1,
                      sport=49152, ds_flags=0, df=True, ipv6=False, int_port=INT_PORT):
    """Reflex data: RoCEv2 (default RDMA WRITE MIDDLE) from the requester, its ICRC computed by
    scapy without INT, then the INT with one hop (ts, requester QPN `qpn`), DS flags 0."""
    from scapy.packet import Raw
    kw = dict(opcode=opcode, padcount=pad, pkey=pkey, dqpn=dqpn, psn=psn, ackreq=ackreq)
    f = _roce(src_mac, dst_mac, src, dst, kw, Raw(payload + bytes(pad)), tos, ttl, ipid, sport,
              df, ipv6)
    return insert_int(f, ts, qpn, ds_flags, int_port)


def build_reflex_ack(src_mac, dst_mac, src, dst, *, ts, qpn, psn, dqpn=None, syndrome=SYNDROME_ACK,
                     msn=0, pkey=0xFFFF, tos=TOS_PSEUDO_ACK, ttl=64, ipid=0, sport=49152,
                     ds_flags=FLAG_NSF | FLAG_ECHO, df=True, ipv6=False, int_port=INT_PORT):
    """A Reflex ACK: RC Acknowledge (opcode 0x11) + AETH, BTH.DestQP = `dqpn` (default: the
    hop's requester QPN), INT hop (ts, qpn) with `ds_flags` (default NSF|ECHO: a pseudo-ACK;
    an RNIC's ACK has ECHO only). Defaults are the pseudo-ACK's fixed fields."""
    from scapy.contrib.roce import AETH
    kw = dict(opcode=OP_ACK, pkey=pkey, dqpn=qpn if dqpn is None else dqpn, psn=psn)
    f = _roce(src_mac, dst_mac, src, dst, kw, AETH(syndrome=syndrome, msn=msn), tos, ttl, ipid,
              sport, df, ipv6)
    return insert_int(f, ts, qpn, ds_flags, int_port)


def expected_pseudo_ack(data, src_mac, dst_mac, ttl=63, dscp=48, int_port=INT_PORT):
    """The pseudo-ACK docs/wire-formats.md prescribes for the data frame `data` (bytes), as it
    leaves the switch toward the requester with MACs (src_mac, dst_mac) and `ttl`."""
    d = decode(data, int_port)
    assert d is not None and not d["echo"], "not Reflex data"
    return build_reflex_ack(src_mac, dst_mac, d["ip_dst"], d["ip_src"], ts=d["ts"], qpn=d["qpn"],
                            psn=d["bth_psn"], pkey=d["bth_pkey"], tos=dscp << 2, ttl=ttl, ipid=0,
                            sport=d["udp_sport"], ipv6=d["ip_version"] == 6, int_port=int_port)


# ------------------------------------------------------------------------------------------
# Decoding (standard library only)
# ------------------------------------------------------------------------------------------

def mac_str(b):
    return ":".join("%02x" % x for x in b)


def _ip(b):
    if len(b) == 4:
        return ".".join(str(x) for x in b)
    import ipaddress
    return str(ipaddress.IPv6Address(bytes(b)))


def strip_int(frame, int_port=INT_PORT):
    """The frame without its INT (UDP dport from the shim, UDP/IP lengths - INT bytes, IPv4
    checksum recomputed), or None if it has no INT-MD shim on `int_port`."""
    p = _locate(frame)
    if p is None:
        return None
    ip_off, l4, ipv6 = p
    if struct.unpack("!H", frame[l4 + 2:l4 + 4])[0] != int_port or len(frame) < l4 + 12:
        return None
    shim = frame[l4 + 8:l4 + 12]
    n = shim[1] * 4
    if shim[0] >> 4 != 1 or n < 16 or len(frame) < l4 + 8 + n:
        return None
    b = bytearray(frame[:l4 + 8] + frame[l4 + 8 + n:])
    b[l4 + 2:l4 + 4] = shim[2:4]
    ulen = struct.unpack("!H", frame[l4 + 4:l4 + 6])[0]
    b[l4 + 4:l4 + 6] = struct.pack("!H", (ulen - n) & 0xFFFF)
    if ipv6:
        plen = struct.unpack("!H", frame[ip_off + 4:ip_off + 6])[0]
        b[ip_off + 4:ip_off + 6] = struct.pack("!H", (plen - n) & 0xFFFF)
    else:
        tot = struct.unpack("!H", frame[ip_off + 2:ip_off + 4])[0]
        b[ip_off + 2:ip_off + 4] = struct.pack("!H", (tot - n) & 0xFFFF)
        b[ip_off + 10:ip_off + 12] = b"\0\0"
        b[ip_off + 10:ip_off + 12] = struct.pack("!H", inet_checksum(bytes(b[ip_off:l4])))
    return bytes(b)


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


def decode(frame, int_port=INT_PORT):
    """Every field of a Reflex INT frame as a dict; None if `frame` is not one (not UDP to
    `int_port` with an INT-MD shim and INT-MD header of the Reflex domain 0x5246).

    `problems` lists every deviation from version 1 of the format (empty = conforms);
    `icrc_ok` says whether the stored ICRC verifies once the INT is stripped."""
    frame = bytes(frame)
    loc = _locate(frame)
    if loc is None:
        return None
    ip_off, l4, ipv6 = loc
    sport, dport, ulen, ucsum = struct.unpack("!HHHH", frame[l4:l4 + 8])
    if dport != int_port or len(frame) < l4 + 8 + 16:
        return None
    s = l4 + 8
    shim0, shim_words, orig = frame[s], frame[s + 1], struct.unpack("!H", frame[s + 2:s + 4])[0]
    md0, instr, ds_id, ds_instr, ds_flags = struct.unpack("!IHHHH", frame[s + 4:s + 16])
    if shim0 >> 4 != 1 or ds_id != DS_ID:
        return None
    d = dict(reflex=True, len=len(frame), eth_dst=mac_str(frame[0:6]), eth_src=mac_str(frame[6:12]),
             ethertype=struct.unpack("!H", frame[12:14])[0])
    problems = []
    if ipv6:
        h = frame[ip_off:ip_off + 40]
        tc = ((h[0] & 0x0F) << 4) | (h[1] >> 4)
        plen = struct.unpack("!H", h[4:6])[0]
        d.update(ip_version=6, ip_src=_ip(h[8:24]), ip_dst=_ip(h[24:40]), dscp=tc >> 2, ecn=tc & 3,
                 ttl=h[7], ip_id=None, df=None, ip_len=plen, flow_label=struct.unpack("!I", h[0:4])[0] & 0xFFFFF)
        end = ip_off + 40 + plen
    else:
        ihl = (frame[ip_off] & 0x0F) * 4
        h = frame[ip_off:ip_off + ihl]
        tot, ipid, frag = struct.unpack("!HHH", h[2:8])
        d.update(ip_version=4, ip_src=_ip(h[12:16]), ip_dst=_ip(h[16:20]), dscp=h[1] >> 2, ecn=h[1] & 3,
                 ttl=h[8], ip_id=ipid, df=bool(frag & 0x4000), mf=bool(frag & 0x2000),
                 frag_offset=frag & 0x1FFF, ip_len=tot, ip_checksum_ok=inet_checksum(h) == 0,
                 ip_ihl=ihl)
        end = ip_off + tot
        if inet_checksum(h) != 0:
            problems.append("bad IPv4 header checksum")
    if end > len(frame):
        problems.append(f"IP length {d['ip_len']} exceeds the frame")
        end = len(frame)
    d["trailer_len"] = len(frame) - end
    d.update(udp_sport=sport, udp_dport=dport, udp_len=ulen, udp_checksum=ucsum)
    if l4 + ulen != end:
        problems.append(f"UDP length {ulen} disagrees with the IP length")
    d.update(shim_byte0=shim0, shim_type=shim0 >> 4, shim_npt=(shim0 >> 2) & 3, shim_rsvd=shim0 & 3,
             shim_len_words=shim_words, shim_orig_dport=orig,
             md_ver=md0 >> 28, md_d=(md0 >> 27) & 1, md_e=(md0 >> 26) & 1, md_m=(md0 >> 25) & 1,
             md_rsvd=(md0 >> 13) & 0xFFF, md_hop_ml=(md0 >> 8) & 0x1F, md_rhc=md0 & 0xFF,
             md_instructions=instr, ds_id=ds_id, ds_instruction=ds_instr, ds_flags=ds_flags,
             nsf=bool(ds_flags & FLAG_NSF), echo=bool(ds_flags & FLAG_ECHO))
    # The hop stack (newest first): each hop ts (8) + QPN word (4) when HopML is 3.
    n = shim_words * 4
    hops = []
    hml = d["md_hop_ml"] * 4
    if hml:
        for off in range(s + 16, s + n, hml):
            if off + hml > end or hml < 12:
                break
            hop = frame[off:off + hml]
            hops.append(dict(ts=struct.unpack("!Q", hop[0:8])[0], qpn_word=struct.unpack("!I", hop[8:12])[0],
                             qpn=struct.unpack("!I", hop[8:12])[0] & 0xFFFFFF))
    d["hops"] = hops
    d["ts"] = hops[0]["ts"] if hops else None
    d["qpn"] = hops[0]["qpn"] if hops else None
    want = [("shim_byte0", SHIM_BYTE0), ("shim_len_words", SHIM_WORDS), ("shim_orig_dport", ROCE_PORT),
            ("md_ver", MD_VER), ("md_d", 0), ("md_e", 0), ("md_m", 0), ("md_rsvd", 0),
            ("md_hop_ml", HOP_ML), ("md_rhc", 0), ("md_instructions", INSTRUCTIONS),
            ("ds_instruction", DS_INSTRUCTION)]
    for k, v in want:
        if d[k] != v:
            problems.append(f"{k} = {d[k]:#x}, expected {v:#x}")
    if ds_flags & ~(FLAG_NSF | FLAG_ECHO) & 0xFFFF:
        problems.append(f"ds_flags {ds_flags:#06x} has bits other than NSF/ECHO")
    if ds_flags & FLAG_NSF and not ds_flags & FLAG_ECHO:
        problems.append("NSF without ECHO")
    if len(hops) != 1:
        problems.append(f"{len(hops)} hops, expected 1")
    elif hops[0]["qpn_word"] >> 24:
        problems.append(f"hop QPN word {hops[0]['qpn_word']:#010x}: top byte not 0")
    # RoCE after the INT.
    b = s + n
    if end - b < 12 + 4:
        problems.append("too short for BTH + ICRC after the INT")
        d["problems"] = problems
        d["conforms"] = False
        d["icrc_ok"] = False
        return d
    bth = frame[b:b + 12]
    d.update(bth_opcode=bth[0], bth_se=bth[1] >> 7, bth_m=(bth[1] >> 6) & 1, bth_pad=(bth[1] >> 4) & 3,
             bth_tver=bth[1] & 0xF, bth_pkey=struct.unpack("!H", bth[2:4])[0], bth_byte4=bth[4],
             bth_fecn=bth[4] >> 7, bth_becn=(bth[4] >> 6) & 1, bth_destqp=int.from_bytes(bth[5:8], "big"),
             bth_ackreq=bth[8] >> 7, bth_rsvd7=bth[8] & 0x7F, bth_psn=int.from_bytes(bth[9:12], "big"))
    body = b + 12
    if bth[0] in AETH_OPCODES and end - body >= 4 + 4:
        aeth = struct.unpack("!I", frame[body:body + 4])[0]
        d.update(aeth_syndrome=aeth >> 24, aeth_msn=aeth & 0xFFFFFF)
        body += 4
    d["payload_len"] = end - 4 - body
    d["icrc"] = frame[end - 4:end].hex()
    plain = strip_int(frame[:end], int_port)
    if plain is None:
        d["icrc_ok"] = False
    else:
        pip = plain[ip_off:]
        d["icrc_ok"] = verify_icrc(pip[:-4], ipv6) == pip[-4:]
    if not d["icrc_ok"]:
        problems.append("ICRC does not verify with the INT stripped")
    d["problems"] = problems
    d["conforms"] = not problems
    return d


def is_data(d):
    """A Reflex data packet (docs/reflex.md: opcode other than Acknowledge and CNP, no ECHO)."""
    return d is not None and not d["echo"] and d.get("bth_opcode") not in (None, OP_ACK, OP_CNP)


# ------------------------------------------------------------------------------------------
# The NSF flow state machine (docs/reflex.md)
# ------------------------------------------------------------------------------------------

SILENT, ACTIVE, COOLING = "Silent", "Active", "Cooling"


def t_src(now, ts):
    """T_src = now - ts; a timestamp in the future counts as 0."""
    return max(0, now - ts)


def nsf_model(events, thresh_ns, interval_ns, n_cool, trace=None):
    """events: [(time_ns, flow_key, t_src_ns)] in departure order (any number of flows, each
    with its own state). Returns the indices of the events that produce a pseudo-ACK.

    Per flow, for each packet (docs/reflex.md's transition table):
      Silent:  T_src > thresh -> Active; else Silent
      Active:  T_src > thresh -> Active; else Cooling with counter n_cool (Silent if n_cool = 0)
      Cooling: T_src > thresh -> Active; else counter - 1, Silent when it reaches 0
    A pseudo-ACK when the state after the step is Active or Cooling and none was sent for the
    flow in the last interval (now - last >= interval, or none yet).
    If `trace` is a list, (index, key, t_src, state after, counter, pseudo-ACK) is appended."""
    flows = {}
    out = []
    for i, (now, key, ts_src) in enumerate(events):
        st = flows.setdefault(key, dict(state=SILENT, c=0, last=None))
        high = max(0, ts_src) > thresh_ns
        if st["state"] == SILENT:
            if high:
                st["state"] = ACTIVE
        elif st["state"] == ACTIVE:
            if not high:
                if n_cool == 0:
                    st["state"] = SILENT
                else:
                    st["state"], st["c"] = COOLING, n_cool
        else:  # Cooling
            if high:
                st["state"], st["c"] = ACTIVE, 0
            else:
                st["c"] -= 1
                if st["c"] == 0:
                    st["state"] = SILENT
        pa = st["state"] in (ACTIVE, COOLING) and (st["last"] is None or now - st["last"] >= interval_ns)
        if pa:
            st["last"] = now
            out.append(i)
        if trace is not None:
            trace.append((i, key, ts_src, st["state"], st["c"], pa))
    return out


# ------------------------------------------------------------------------------------------
# Helpers for the reflex_* cases' check.py scripts
# ------------------------------------------------------------------------------------------

def load_case_config(case_dir):
    """The switch config a case runs (case.toml's `config`, relative to the case dir)."""
    import tomllib
    with open(os.path.join(case_dir, "case.toml"), "rb") as f:
        case = tomllib.load(f)
    with open(os.path.normpath(os.path.join(case_dir, case["config"])), "rb") as f:
        return tomllib.load(f)


def port_macs(cfg):
    return {p["name"]: bytes.fromhex(p["mac"].replace(":", "")) for p in cfg["ports"]}


def next_hop(cfg, prefix):
    for r in cfg["routes"]:
        if r["prefix"] == prefix:
            return r["port"], bytes.fromhex(r["next_hop_mac"].replace(":", ""))
    raise KeyError(prefix)


def routed(frame, src_mac, dst_mac):
    """`frame` (IPv4) as a router forwards it: MACs rewritten, TTL - 1, IPv4 checksum updated."""
    b = bytearray(frame)
    b[0:6], b[6:12] = dst_mac, src_mac
    b[22] -= 1
    ihl = (b[14] & 0x0F) * 4
    b[24:26] = b"\0\0"
    b[24:26] = struct.pack("!H", inet_checksum(bytes(b[14:14 + ihl])))
    return bytes(b)


def with_ts(frame, ts):
    """`frame` (a Reflex frame) with its hop timestamp replaced."""
    ip_off, l4, _ = _locate(frame)
    off = l4 + 8 + 16
    return frame[:off] + struct.pack("!Q", ts) + frame[off + 8:]


def wire_ns(frame_len, rate_bps, overhead=24):
    """Serialization time, ns, rounded up (longhaul's convention; checks allow 1 ns either way)."""
    return -(-(frame_len + overhead) * 8 * 1_000_000_000 // rate_bps)


def read_port(outdir, name):
    """out_<name>.pcap of a run ([] when the file is absent)."""
    path = os.path.join(outdir, f"out_{name}.pcap")
    return read_pcap(path) if os.path.exists(path) else []


# ------------------------------------------------------------------------------------------
# CLI
# ------------------------------------------------------------------------------------------

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
            d = decode(f, port)
            if d is None:
                print(json.dumps({"reflex": False}))
            else:
                d["pcap_ts_ns"] = ts
                print(json.dumps(d, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
