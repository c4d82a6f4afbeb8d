//! The `wire` target: every parser of `dataplane/src/wire/` on one frame.
//!
//! Input: byte 0 chooses the parser options (VLAN tag limit, IPv4 checksum check, RoCE and INT
//! UDP ports), the rest is the frame. The full frame parser runs first; every header parser then
//! runs at the offsets it found (and at the fixed offsets of an untagged frame), read-only views
//! first, then the in-place rewriters (ECN marking, ARP reply, ICRC fill, INT push/strip) on
//! copies.

use crate::input::Input;
use longhaul_dataplane::packet::{HeapBuf, PacketBuf};
use longhaul_dataplane::wire::{
    arp, ecn, ethernet, icrc, int, ipv4, ipv6, mlcc, ndp, parse, pfc, reflex, roce, tcp, udp,
};

/// The UDP ports that announce INT in the shipped configs (MLCC, Reflex) and the default.
const INT_PORTS: [u16; 4] = [int::DEFAULT_INT_PORT, 5001, 4790, 6000];

pub fn wire(data: &[u8]) {
    let mut inp = Input::new(data);
    let o = inp.u8();
    let frame = inp.rest();
    let opts = parse::ParseOptions {
        max_vlan_tags: o & 3,
        verify_ipv4_checksum: o & 4 != 0,
        roce_port: if o & 8 != 0 {
            roce::ROCE_V2_PORT
        } else {
            INT_PORTS[(o >> 4 & 3) as usize]
        },
    };
    let int_port = INT_PORTS[(o >> 6) as usize];
    let p = parse::parse(frame, &opts);
    let mut meta = longhaul_dataplane::packet::Meta::default();
    p.apply_to_meta(&mut meta);
    let _ = (p.is_roce(), p.is_ip());
    let _ = parse::flow_hash_symmetric(frame, &p);
    let _ = parse::ipv4_udp(frame);
    let _ = ethernet::walk_tags(frame, opts.max_vlan_tags);
    if let Ok(eth) = ethernet::EthernetFrame::new_checked(frame) {
        let _ = (
            eth.dst().is_broadcast(),
            eth.src(),
            eth.ethertype(),
            eth.payload().len(),
        );
    }
    let _ = pfc::parse(frame);

    // L3 at the parser's offset, and at 14 (an untagged frame) when the parser stopped early.
    let mut l3s = [p.l3_off as usize, 14];
    if l3s[0] == 0 {
        l3s[0] = 14;
    }
    for (k, &l3) in l3s.iter().enumerate() {
        if k == 1 && l3 == l3s[0] {
            break;
        }
        let Some(ip) = frame.get(l3..) else { continue };
        let _ = parse::ip_pair_u128(frame, l3);
        let _ = arp::Arp::parse(ip);
        let _ = ndp::Nd::parse(ip);
        v4(ip);
        v6(ip);
        let _ = ecn::get(frame, l3);
        let _ = icrc::IcrcLayout::locate(frame, l3);
        let _ = icrc::compute(frame, l3);
        let _ = icrc::stored(frame, l3);
        let _ = icrc::verify(frame, l3);
        if let Ok(il) = int::locate_int(frame, l3) {
            let _ = frame.get(il.shim_off..).map(int::IntShim::new_checked);
        }
        if let Ok(hs) = int::HopStack::new(frame, l3) {
            for h in hs.take(64) {
                let _ = h;
            }
        }
        if let Ok(m) = mlcc::locate(frame, l3, int_port) {
            for i in 0..m.hops.min(64) + 1 {
                let _ = mlcc::hop(frame, &m, i);
            }
            let mut out = [0u8; 512];
            let _ = mlcc::build_switch_int(frame, l3, &m, 48, [2; 6], [4; 6], &mut out);
            let mut f = frame.to_vec();
            let _ = mlcc::set_c_d(&mut f, &m, 7);
        }
        let bth = if p.bth_off != 0 {
            p.bth_off as usize
        } else {
            l3 + 28
        };
        if let Ok(si) = mlcc::parse_switch_int(frame, l3, bth) {
            for i in 0..si.hops().min(64) + 1 {
                let _ = si.hop(i);
            }
        }
        if let Ok((off, m)) = mlcc::locate_mceth(frame, l3) {
            let _ = (off, m.bytes());
        }
        if let Ok(v) = reflex::locate(frame, l3, int_port) {
            let _ = (v.is_nsf(), v.is_echo());
            let mut f = frame.to_vec();
            let _ = reflex::set_ts(&mut f, &v, 12345);
        }
        rewriters(frame, l3, int_port);
    }
    if let Some(b) = frame.get(p.bth_off as usize..).filter(|_| p.bth_off != 0) {
        bth_views(b);
    }
    if p.l4_off != 0 {
        if let Some(seg) = frame.get(p.l4_off as usize..) {
            l4(seg);
        }
    }
    // MAC address text (the config and API parse these).
    if let Ok(s) = std::str::from_utf8(frame) {
        if let Ok(m) = ethernet::MacAddr::parse(s) {
            let mut out = [0u8; 17];
            let _ = m.format(&mut out);
        }
    }
}

fn v4(ip: &[u8]) {
    if let Ok(h) = ipv4::Ipv4Packet::new_checked(ip) {
        let _ = h.check_len();
        let _ = (h.verify_checksum(), h.is_fragment(), h.is_later_fragment());
        let _ = (h.has_options(), h.dscp(), h.ecn(), h.payload().len());
        let mut c = ip.to_vec();
        if let Ok(mut m) = ipv4::Ipv4Packet::new_checked(&mut c[..]) {
            let _ = m.decrement_ttl();
            m.set_tos_update(0x03);
            m.set_total_len_update(60);
        }
    }
}

fn v6(ip: &[u8]) {
    if let Ok(h) = ipv6::Ipv6Packet::new_checked(ip) {
        let _ = h.check_len();
        let _ = (
            h.flow_label(),
            h.payload().len(),
            h.src_u128() ^ h.dst_u128(),
        );
        let mut c = ip.to_vec();
        if let Ok(mut m) = ipv6::Ipv6Packet::new_checked(&mut c[..]) {
            let _ = m.decrement_hop_limit();
            m.set_dscp(46);
        }
    }
}

fn l4(seg: &[u8]) {
    if let Ok(u) = udp::UdpPacket::new_checked(seg) {
        let _ = u.check_len();
        let _ = (u.len(), u.payload().len(), u.datagram().len());
    }
    if let Ok(t) = tcp::TcpPacket::new_checked(seg) {
        let _ = (t.mss(), t.flags(), t.payload().len());
        for o in t.option_iter().take(64) {
            let _ = o;
        }
    }
}

fn bth_views(b: &[u8]) {
    if let Ok(h) = roce::Bth::new_checked(b) {
        let _ = (h.opcode(), h.pad_count(), h.dest_qp(), h.psn(), h.becn());
        if let Some(rest) = b.get(roce::BTH_LEN..) {
            if let Ok(a) = roce::Aeth::new_checked(rest) {
                let _ = (a.decoded(), a.msn());
            }
            if let Ok(r) = roce::Reth::new_checked(rest) {
                let _ = (r.va(), r.rkey(), r.dma_len());
            }
        }
    }
}

/// The in-place rewriters, each on its own copy (in a buffer with headroom, as the engine's).
fn rewriters(frame: &[u8], l3: usize, int_port: u16) {
    let mut f = frame.to_vec();
    let _ = ecn::mark_ce(&mut f, l3);
    let mut f = frame.to_vec();
    let _ = ecn::set(&mut f, l3, 1);
    let mut f = frame.to_vec();
    let _ = icrc::fill(&mut f, l3);
    let mut f = frame.to_vec();
    let _ = arp::reply_in_place(&mut f, l3, [2, 0, 0, 0, 0, 9]);

    let mut b = HeapBuf::from_bytes(frame);
    let _ = int::strip_int(&mut b, l3);
    let mut b = HeapBuf::from_bytes(frame);
    let _ = int::push_hop_metadata(&mut b, l3, &int::HopMetadata::default());
    let mut b = HeapBuf::from_bytes(frame);
    let cfg = int::IntConfig {
        int_port,
        instructions: int::INS_SUPPORTED,
        max_hops: 4,
        domain_id: 0,
        ds_instruction: 0,
        ds_words: 0,
        ds_flags: 0,
    };
    if int::insert_int_md(&mut b, l3, &cfg).is_ok() {
        let _ = int::strip_int(&mut b, l3);
    }
    let mut b = HeapBuf::from_bytes(frame);
    let hop = mlcc::MlccHop::default();
    let _ = mlcc::push(&mut b, l3, &hop);
    let mut b = HeapBuf::from_bytes(frame);
    let _ = mlcc::source(&mut b, l3, int_port, 4, Some(3), &hop);
    let mut b = HeapBuf::from_bytes(frame);
    let _ = reflex::insert(&mut b, l3, int_port, reflex::ReflexHop { ts: 1, qpn: 2 }, 0);
    let _ = b.len();
}
