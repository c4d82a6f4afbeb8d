//! THEMIS's TCP handshake monitor with SYN cookies (paper section IV, "Reducing switch memory
//! overhead", and Figure 5).
//!
//! The paper: "the data plane of the ESW can monitor the TCP connection establishment procedure
//! to collect information about inter-DC flows. To prevent SYN-flood attacks from consuming ESW
//! resources, we design an SYN-Cookie-based mechanism in the data plane. When ESW receives an SYN
//! packet, it replies an SYN-ACK packet with a cookie, instead of maintaining a state of TCP flow
//! in the data plane. If ESW receives an ACK packet with the correct sequence number, it replies
//! with a TCP RST packet to re-establish transmission and record the flow [...]. Subsequently,
//! the TCP connection can re-establish the handshake procedure. [...] The data plane only
//! forwards flow information to the control plane upon detecting an ACK packet, i.e., during the
//! third handshake" (Figure 5).
//!
//! This stage is that monitor, for TCP segments going from the DC toward the WAN:
//! - [`SynCookies::on_syn`]: a SYN is answered by a SYN-ACK whose sequence number is a cookie.
//!   Nothing is stored: a SYN flood cannot grow any state ([`SynCookies`] is `Copy`: it owns no
//!   heap memory at all, and every field has a fixed size).
//! - [`SynCookies::on_ack`]: an ACK whose `ack - 1` is a valid cookie of the current or previous
//!   time window is answered by a RST to the client, and the flow's IP pair is returned as
//!   inter-DC ([`AckVerdict::Valid`]) so that the caller records it (THEMIS's "TCP-cookie register
//!   array", here [`super::daemon::InterDcPairs`]) and punts it to the control plane.
//!
//! Which TCP segments are monitored is the caller's business: typically the SYNs leaving the DC
//! whose IP pair is *not yet* known as inter-DC (once recorded, the client's retried handshake
//! must be forwarded, or it would be answered by a cookie again), and the ACKs of pairs not yet
//! known. The RST follows RFC 9293 section 3.10.7.1 for a segment carrying an ACK:
//! `<SEQ=SEG.ACK><CTL=RST>`; its sequence number is exactly the client's `RCV.NXT` (cookie + 1),
//! so it is accepted even under RFC 5961's strict RST check.
//!
//! # Cookie encoding (32 bits, the SYN-ACK's sequence number)
//!
//! As Linux's syncookies (net/ipv4/syncookies.c) divide the ISN into a counter, an MSS index and a
//! hash, with a keyed PRF instead of Linux's two-part sum:
//!
//! ```text
//!  31      27 26   24 23                                0
//! +----------+-------+-----------------------------------+
//! | t mod 32 |  mss  |  SipHash-2-4(K_t, M) & 0xffffff   |
//! +----------+-------+-----------------------------------+
//! ```
//! - `t` is the time window, `now / period_ns`; `t mod 32` (5 bits) tells the validator which
//!   secret to use. A cookie is valid in its own window and the next one (so it lives between one
//!   and two periods), never later: `t mod 32` of an older window matches neither the current nor
//!   the previous one.
//! - `mss` (3 bits) indexes [`MSS_TABLE`]: the largest entry not above the client's MSS option
//!   (536 when absent). The SYN-ACK advertises that MSS.
//! - `K_t` is window `t`'s 128-bit secret, `SipHash-2-4(K_seed, t || i)` for `i` in 0, 1 with
//!   `K_seed` from the constructor's seed: secrets are deterministic (replay reproduces every
//!   byte) yet unpredictable without the seed, and the previous window's secret is recomputed on
//!   rotation rather than stored history.
//! - `M` is [`COOKIE_MSG_LEN`] bytes: IP version (4 or 6), client address, server address (16
//!   bytes each, IPv4 zero-extended), client port, server port (big-endian), the client's ISN
//!   (SYN sequence number; on the ACK: `seq - 1`), `t` (8 bytes, little-endian) and the MSS
//!   index. Binding the ISN makes a cookie valid for one handshake only.
//!
//! A forged ACK passes with probability 2^-24 per try: the 5-bit counter selects exactly one
//! secret, so there is a single hash to guess.

use longhaul_dataplane::time::{Nanos, NS_PER_SEC};
use longhaul_dataplane::wire::parse::{L3Kind, Parsed};
use longhaul_dataplane::wire::tcp::{self, TcpPacket, TcpRepr};
use longhaul_dataplane::wire::{ipv4, ipv6};
use std::net::IpAddr;

/// MSS values a cookie can encode (3 bits), ascending. The first entries are Linux's IPv4
/// `msstab` (536, 1300, 1440, 1460), completed with common IPv6 / jumbo values.
pub const MSS_TABLE: [u16; 8] = [536, 1220, 1300, 1380, 1440, 1460, 4312, 8960];

/// Default rotation period: 64 s, Linux's syncookie counter granularity (a cookie then lives 64
/// to 128 s; Linux accepts two counter values too, MAX_SYNCOOKIE_AGE = 2).
pub const DEFAULT_PERIOD_NS: Nanos = 64 * NS_PER_SEC;

/// Window advertised in the SYN-ACK (no window scale option: the connection is reset anyway).
pub const SYNACK_WINDOW: u16 = 65535;

/// TTL / hop limit of generated segments.
pub const GENERATED_TTL: u8 = 64;

/// Bytes hashed per cookie (see the module documentation).
pub const COOKIE_MSG_LEN: usize = 1 + 16 + 16 + 2 + 2 + 4 + 8 + 1;

const HASH_MASK: u32 = 0x00ff_ffff;

/// SipHash-2-4 (Aumasson and Bernstein) of `msg` under the key `(k0, k1)`, the 64-bit variant,
/// as in the reference implementation (key bytes 0-7 and 8-15 read little-endian).
pub fn siphash24(k0: u64, k1: u64, msg: &[u8]) -> u64 {
    #[inline(always)]
    fn round(v: &mut [u64; 4]) {
        v[0] = v[0].wrapping_add(v[1]);
        v[1] = v[1].rotate_left(13);
        v[1] ^= v[0];
        v[0] = v[0].rotate_left(32);
        v[2] = v[2].wrapping_add(v[3]);
        v[3] = v[3].rotate_left(16);
        v[3] ^= v[2];
        v[0] = v[0].wrapping_add(v[3]);
        v[3] = v[3].rotate_left(21);
        v[3] ^= v[0];
        v[2] = v[2].wrapping_add(v[1]);
        v[1] = v[1].rotate_left(17);
        v[1] ^= v[2];
        v[2] = v[2].rotate_left(32);
    }
    let mut v = [
        0x736f_6d65_7073_6575 ^ k0,
        0x646f_7261_6e64_6f6d ^ k1,
        0x6c79_6765_6e65_7261 ^ k0,
        0x7465_6462_7974_6573 ^ k1,
    ];
    let mut chunks = msg.chunks_exact(8);
    for c in &mut chunks {
        let mut w = [0u8; 8];
        w.copy_from_slice(c);
        let m = u64::from_le_bytes(w);
        v[3] ^= m;
        round(&mut v);
        round(&mut v);
        v[0] ^= m;
    }
    let mut last = [0u8; 8];
    let rest = chunks.remainder();
    last[..rest.len()].copy_from_slice(rest);
    last[7] = msg.len() as u8;
    let b = u64::from_le_bytes(last);
    v[3] ^= b;
    round(&mut v);
    round(&mut v);
    v[0] ^= b;
    v[2] ^= 0xff;
    for _ in 0..4 {
        round(&mut v);
    }
    v[0] ^ v[1] ^ v[2] ^ v[3]
}

/// A 128-bit SipHash key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Secret(u64, u64);

/// What [`SynCookies::on_ack`] decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AckVerdict {
    /// Not a handshake ACK carrying one of our valid cookies (wrong flags, bad checksum, wrong
    /// hash, expired window): the caller forwards or drops it as its policy says.
    NotACookie,
    /// A valid cookie: the flow is inter-DC. A RST to the client is in `out_buf[..rst_len]`
    /// (`rst_len == 0` when `out_buf` was too small; counted in `no_room`). `client_ip` sent the
    /// SYN (inside the DC), `server_ip` is the remote end.
    Valid {
        rst_len: usize,
        client_ip: IpAddr,
        server_ip: IpAddr,
    },
}

longhaul_dataplane::counters! {
    /// Counters of the handshake monitor.
    #[derive(Copy)]
    pub struct SynCookieStats: "themis.syncookie" {
        /// SYN-ACKs with a cookie sent.
        pub synacks: u64,
        /// Segments given to `on_syn` that were not a pure SYN (or unusable: anomaly, bad
        /// checksum).
        pub syn_ignored: u64,
        /// ACKs with a valid cookie (RSTs sent, pairs reported).
        pub valid_acks: u64,
        /// ACKs whose cookie did not verify in a current window (wrong hash, forged, altered).
        pub bad_cookies: u64,
        /// ACKs whose cookie's time counter is neither the current nor the previous window.
        pub expired_cookies: u64,
        /// Segments given to `on_ack` that were not a handshake ACK (or unusable).
        pub ack_ignored: u64,
        /// Replies not built because `out_buf` was too small.
        pub no_room: u64,
    }
}

/// The stateless SYN-cookie handshake monitor. It is `Copy`: it holds two secrets, a window
/// number and counters, whatever the traffic.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SynCookies {
    seed: Secret,
    period_ns: Nanos,
    /// Current window `t`.
    window: u64,
    cur: Secret,
    prev: Secret,
    stats: SynCookieStats,
    /// Secret rotations (window changes); not among the counters by name.
    rotations: u64,
}

/// The fields of a TCP segment both handlers need.
#[derive(Clone, Copy, Debug)]
struct Seg {
    v6: bool,
    src: IpAddr,
    dst: IpAddr,
    sport: u16,
    dport: u16,
    seq: u32,
    ack: u32,
    flags: u8,
    mss: Option<u16>,
    dscp: u8,
}

fn addr_bytes(a: IpAddr) -> [u8; 16] {
    match a {
        IpAddr::V4(v) => {
            let mut b = [0u8; 16];
            b[..4].copy_from_slice(&v.octets());
            b
        }
        IpAddr::V6(v) => v.octets(),
    }
}

/// Read the segment at `parsed`'s offsets; `None` when it is not a clean TCP segment with a
/// valid checksum.
fn read_seg(frame: &[u8], parsed: &Parsed) -> Option<Seg> {
    if parsed.anomaly.is_some() || parsed.proto != ipv4::PROTO_TCP || parsed.l4_off == 0 {
        return None;
    }
    let l3 = parsed.l3_off as usize;
    let l4 = parsed.l4_off as usize;
    let end = parsed.l3_end as usize;
    let (v6, src, dst) = match parsed.l3 {
        L3Kind::V4 => {
            let ip = ipv4::Ipv4Packet::new_checked(frame.get(l3..end)?).ok()?;
            (false, IpAddr::V4(ip.src_addr()), IpAddr::V4(ip.dst_addr()))
        }
        L3Kind::V6 => {
            let ip = ipv6::Ipv6Packet::new_checked(frame.get(l3..end)?).ok()?;
            (true, IpAddr::V6(ip.src_addr()), IpAddr::V6(ip.dst_addr()))
        }
        _ => return None,
    };
    let t = TcpPacket::new_checked(frame.get(l4..end)?).ok()?;
    let ok = match (src, dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => t.verify_checksum_v4(s, d),
        (IpAddr::V6(s), IpAddr::V6(d)) => t.verify_checksum_v6(s, d),
        _ => false,
    };
    if !ok {
        return None;
    }
    Some(Seg {
        v6,
        src,
        dst,
        sport: t.src_port(),
        dport: t.dst_port(),
        seq: t.seq(),
        ack: t.ack(),
        flags: t.flags(),
        mss: t.mss(),
        dscp: parsed.dscp,
    })
}

/// Index of the largest [`MSS_TABLE`] entry not above `mss` (0 when absent or smaller than all).
pub fn mss_index(mss: Option<u16>) -> u8 {
    let m = mss.unwrap_or(MSS_TABLE[0]);
    MSS_TABLE.iter().rposition(|&e| e <= m).unwrap_or(0) as u8
}

/// Write the reply to `seg` into `out`: the frame's L2 header (VLAN tags kept) with the MACs
/// swapped, an option-less IP header with the addresses swapped (DSCP of the received segment,
/// not-ECT, TTL/hop limit 64, IPv4 ID 0 and DF), and the TCP header `r` with its checksum.
fn build_reply(
    frame: &[u8],
    parsed: &Parsed,
    seg: &Seg,
    r: &TcpRepr,
    out: &mut [u8],
) -> Option<usize> {
    let l3 = parsed.l3_off as usize;
    let tl = r.header_len();
    let iph = if seg.v6 {
        ipv6::HEADER_LEN
    } else {
        ipv4::HEADER_LEN
    };
    let total = l3 + iph + tl;
    let l2 = frame.get(..l3).filter(|l2| l2.len() >= 12)?;
    let o = out.get_mut(..total)?;
    o[..l3].copy_from_slice(l2);
    o[..6].copy_from_slice(&l2[6..12]);
    o[6..12].copy_from_slice(&l2[..6]);
    let l4 = l3 + iph;
    match (seg.dst, seg.src) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            ipv4::write_header(
                &mut o[l3..],
                &ipv4::Ipv4Repr {
                    src: s,
                    dst: d,
                    protocol: ipv4::PROTO_TCP,
                    dscp: seg.dscp,
                    ecn: 0,
                    ident: 0,
                    dont_frag: true,
                    ttl: GENERATED_TTL,
                    payload_len: tl as u16,
                },
            )
            .ok()?;
            tcp::write_segment(&mut o[l4..], r).ok()?;
            let c = tcp::checksum_v4(&o[l4..], s, d);
            o[l4 + 16..l4 + 18].copy_from_slice(&c.to_be_bytes());
        }
        (IpAddr::V6(s), IpAddr::V6(d)) => {
            ipv6::write_header(
                &mut o[l3..],
                &ipv6::Ipv6Repr {
                    src: s,
                    dst: d,
                    next_header: ipv4::PROTO_TCP,
                    dscp: seg.dscp,
                    ecn: 0,
                    flow_label: 0,
                    hop_limit: GENERATED_TTL,
                    payload_len: tl as u16,
                },
            )
            .ok()?;
            tcp::write_segment(&mut o[l4..], r).ok()?;
            let c = tcp::checksum_v6(&o[l4..], s, d);
            o[l4 + 16..l4 + 18].copy_from_slice(&c.to_be_bytes());
        }
        _ => return None,
    }
    Some(total)
}

impl SynCookies {
    /// A monitor whose secrets derive from `secret_seed` (take it from the config or a random
    /// source at start: whoever knows it can forge cookies) and rotate every `period_ns`
    /// (0 is taken as 1 ns).
    pub fn new(secret_seed: u64, period_ns: Nanos) -> Self {
        let seed = Secret(
            secret_seed,
            secret_seed.rotate_left(32) ^ 0x5379_6e43_6f6f_6b69, // "SynCooki"
        );
        let mut s = SynCookies {
            seed,
            period_ns: period_ns.max(1),
            window: 0,
            cur: Secret(0, 0),
            prev: Secret(0, 0),
            stats: SynCookieStats::default(),
            rotations: 0,
        };
        s.cur = s.secret(0);
        s.prev = s.secret(u64::MAX);
        s
    }

    /// Window `t`'s secret.
    fn secret(&self, t: u64) -> Secret {
        let mut m = [0u8; 9];
        m[..8].copy_from_slice(&t.to_le_bytes());
        let a = siphash24(self.seed.0, self.seed.1, &m);
        m[8] = 1;
        let b = siphash24(self.seed.0, self.seed.1, &m);
        Secret(a, b)
    }

    /// The rotation period.
    pub fn period_ns(&self) -> Nanos {
        self.period_ns
    }

    /// The current time window (`now / period` as of the last rotation).
    pub fn window(&self) -> u64 {
        self.window
    }

    /// Counters.
    pub fn stats(&self) -> SynCookieStats {
        self.stats
    }

    /// Secret rotations (window changes) so far.
    pub fn rotations(&self) -> u64 {
        self.rotations
    }

    /// Zero the counters.
    pub fn reset_stats(&mut self) {
        self.stats = SynCookieStats::default();
    }

    /// Move to window `now / period` if it is later than the current one: the current secret
    /// becomes the previous one (or, after a gap of several windows, both are recomputed), so
    /// cookies of the window just ended stay valid for one more period. Returns whether the
    /// window changed. Time going backwards changes nothing. [`on_syn`](Self::on_syn) and
    /// [`on_ack`](Self::on_ack) call it, so a timer calling it is optional.
    pub fn rotate(&mut self, now: Nanos) -> bool {
        let t = now / self.period_ns;
        if t <= self.window {
            return false;
        }
        self.prev = if t == self.window + 1 {
            self.cur
        } else {
            self.secret(t - 1)
        };
        self.cur = self.secret(t);
        self.window = t;
        self.rotations += 1;
        true
    }

    /// The 24-bit hash of the cookie for `seg` (client = `seg.src`) in window `t`.
    fn hash(key: Secret, t: u64, seg: &Seg, isn: u32, mss_idx: u8) -> u32 {
        let mut m = [0u8; COOKIE_MSG_LEN];
        m[0] = if seg.v6 { 6 } else { 4 };
        m[1..17].copy_from_slice(&addr_bytes(seg.src));
        m[17..33].copy_from_slice(&addr_bytes(seg.dst));
        m[33..35].copy_from_slice(&seg.sport.to_be_bytes());
        m[35..37].copy_from_slice(&seg.dport.to_be_bytes());
        m[37..41].copy_from_slice(&isn.to_be_bytes());
        m[41..49].copy_from_slice(&t.to_le_bytes());
        m[49] = mss_idx;
        siphash24(key.0, key.1, &m) as u32 & HASH_MASK
    }

    fn make_cookie(&self, seg: &Seg, isn: u32, mss_idx: u8) -> u32 {
        let t = self.window;
        ((t as u32 & 0x1f) << 27)
            | ((mss_idx as u32 & 7) << 24)
            | Self::hash(self.cur, t, seg, isn, mss_idx)
    }

    /// Check `cookie` for a handshake whose client is `seg.src`; `Ok(mss_index)` when valid,
    /// `Err(true)` when its window is neither the current nor the previous one, `Err(false)`
    /// when the hash is wrong.
    fn check_cookie(&self, seg: &Seg, isn: u32, cookie: u32) -> Result<u8, bool> {
        let tc = cookie >> 27;
        let mss_idx = ((cookie >> 24) & 7) as u8;
        let (key, t) = if tc == (self.window as u32 & 0x1f) {
            (self.cur, self.window)
        } else if tc == (self.window.wrapping_sub(1) as u32 & 0x1f) && self.window > 0 {
            (self.prev, self.window - 1)
        } else {
            return Err(true);
        };
        if Self::hash(key, t, seg, isn, mss_idx) == cookie & HASH_MASK {
            Ok(mss_idx)
        } else {
            Err(false)
        }
    }

    /// The cookie a SYN from `client` (address, port) to `server` with sequence number `isn`
    /// gets at `now` (after [`rotate`](Self::rotate)`(now)`), for tests and tools.
    pub fn cookie_for(
        &mut self,
        client: (IpAddr, u16),
        server: (IpAddr, u16),
        isn: u32,
        mss: Option<u16>,
        now: Nanos,
    ) -> u32 {
        self.rotate(now);
        let seg = Seg {
            v6: client.0.is_ipv6(),
            src: client.0,
            dst: server.0,
            sport: client.1,
            dport: server.1,
            seq: isn,
            ack: 0,
            flags: tcp::SYN,
            mss,
            dscp: 0,
        };
        self.make_cookie(&seg, isn, mss_index(mss))
    }

    /// A SYN (SYN set; ACK, RST and FIN clear; clean parse; valid TCP checksum): write the SYN-ACK
    /// (seq = cookie, ack = ISN + 1, MSS option from [`MSS_TABLE`], window 65535) into `out_buf`
    /// and return its length. `None` for anything else (counted `syn_ignored`) or when `out_buf`
    /// is too small (`no_room`). Stores nothing.
    pub fn on_syn(
        &mut self,
        frame: &[u8],
        parsed: &Parsed,
        now: Nanos,
        out_buf: &mut [u8],
    ) -> Option<usize> {
        self.rotate(now);
        let Some(seg) = read_seg(frame, parsed)
            .filter(|s| s.flags & (tcp::SYN | tcp::ACK | tcp::RST | tcp::FIN) == tcp::SYN)
        else {
            self.stats.syn_ignored += 1;
            return None;
        };
        let mss_idx = mss_index(seg.mss);
        let r = TcpRepr {
            src_port: seg.dport,
            dst_port: seg.sport,
            seq: self.make_cookie(&seg, seg.seq, mss_idx),
            ack: seg.seq.wrapping_add(1),
            flags: tcp::SYN | tcp::ACK,
            window: SYNACK_WINDOW,
            mss: Some(MSS_TABLE[mss_idx as usize]),
        };
        match build_reply(frame, parsed, &seg, &r, out_buf) {
            Some(n) => {
                self.stats.synacks += 1;
                Some(n)
            }
            None => {
                self.stats.no_room += 1;
                None
            }
        }
    }

    /// A handshake ACK (ACK set; SYN and RST clear; clean parse; valid TCP checksum): when
    /// `ack - 1` is a valid cookie for this 4-tuple and ISN `seq - 1`, write a RST to the client
    /// (`seq` = the ACK's ack number, no ACK flag, window 0) into `out_buf` and report the pair.
    pub fn on_ack(
        &mut self,
        frame: &[u8],
        parsed: &Parsed,
        now: Nanos,
        out_buf: &mut [u8],
    ) -> AckVerdict {
        self.rotate(now);
        let Some(seg) = read_seg(frame, parsed)
            .filter(|s| s.flags & (tcp::SYN | tcp::ACK | tcp::RST) == tcp::ACK)
        else {
            self.stats.ack_ignored += 1;
            return AckVerdict::NotACookie;
        };
        let cookie = seg.ack.wrapping_sub(1);
        let isn = seg.seq.wrapping_sub(1);
        match self.check_cookie(&seg, isn, cookie) {
            Ok(_) => {}
            Err(expired) => {
                if expired {
                    self.stats.expired_cookies += 1;
                } else {
                    self.stats.bad_cookies += 1;
                }
                return AckVerdict::NotACookie;
            }
        }
        self.stats.valid_acks += 1;
        let r = TcpRepr {
            src_port: seg.dport,
            dst_port: seg.sport,
            seq: seg.ack,
            ack: 0,
            flags: tcp::RST,
            window: 0,
            mss: None,
        };
        let rst_len = match build_reply(frame, parsed, &seg, &r, out_buf) {
            Some(n) => n,
            None => {
                self.stats.no_room += 1;
                0
            }
        };
        AckVerdict::Valid {
            rst_len,
            client_ip: seg.src,
            server_ip: seg.dst,
        }
    }
}

/// An IPv4 address as the u32 the daemon format and [`super::daemon::InterDcPairs`] use; `None`
/// for IPv6.
pub fn ipv4_u32(a: IpAddr) -> Option<u32> {
    match a {
        IpAddr::V4(v) => Some(u32::from(v)),
        IpAddr::V6(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use longhaul_dataplane::wire::ethernet::MacAddr;
    use longhaul_dataplane::wire::parse::{parse, ParseOptions};
    use std::net::{Ipv4Addr, Ipv6Addr};

    const CLIENT: Ipv4Addr = Ipv4Addr::new(10, 1, 0, 5);
    const SERVER: Ipv4Addr = Ipv4Addr::new(10, 200, 0, 9);
    const CMAC: MacAddr = MacAddr([2, 0, 0, 0, 0, 5]);
    const SMAC: MacAddr = MacAddr([2, 0, 0, 0, 0, 0xee]);

    fn seg_v4(flags: u8, seq: u32, ack: u32, mss: Option<u16>) -> Vec<u8> {
        let mut b = [0u8; 128];
        let r = TcpRepr {
            src_port: 40000,
            dst_port: 18515,
            seq,
            ack,
            flags,
            window: 1000,
            mss,
        };
        let n = tcp::build_frame_v4(&mut b, SMAC, CMAC, CLIENT, SERVER, &r).unwrap();
        b[..n].to_vec()
    }

    /// Independent ones'-complement sum over a byte slice (RFC 1071), no dataplane code.
    fn ocsum(parts: &[&[u8]]) -> u16 {
        let mut s: u32 = 0;
        for p in parts {
            for c in p.chunks(2) {
                let w = if c.len() == 2 {
                    u16::from_be_bytes([c[0], c[1]])
                } else {
                    u16::from_be_bytes([c[0], 0])
                };
                s += w as u32;
            }
        }
        while s >> 16 != 0 {
            s = (s & 0xffff) + (s >> 16);
        }
        !(s as u16)
    }

    #[test]
    fn siphash_reference_vectors() {
        let k0 = u64::from_le_bytes([0, 1, 2, 3, 4, 5, 6, 7]);
        let k1 = u64::from_le_bytes([8, 9, 10, 11, 12, 13, 14, 15]);
        let m: Vec<u8> = (0u8..16).collect();
        assert_eq!(siphash24(k0, k1, &m[..0]), 0x726f_db47_dd0e_0e31);
        assert_eq!(siphash24(k0, k1, &m[..1]), 0x74f8_39c5_93dc_67fd);
        assert_eq!(siphash24(k0, k1, &m[..8]), 0x93f5_f579_9a93_2462);
        assert_eq!(siphash24(k0, k1, &m[..15]), 0xa129_ca61_49be_45e5);
        assert_eq!(siphash24(k0, k1, &m[..16]), 0x3f2a_cc7f_57c2_9bdb);
    }

    #[test]
    fn mss_index_rounds_down() {
        assert_eq!(mss_index(None), 0);
        assert_eq!(mss_index(Some(100)), 0);
        assert_eq!(mss_index(Some(1460)), 5);
        assert_eq!(mss_index(Some(1459)), 4);
        assert_eq!(mss_index(Some(9000)), 7);
    }

    #[test]
    fn syn_synack_ack_rst_v4() {
        let mut sc = SynCookies::new(42, 1_000_000_000);
        let syn = seg_v4(tcp::SYN, 1000, 0, Some(1460));
        let p = parse(&syn, &ParseOptions::default());
        let mut out = [0u8; 128];
        let n = sc.on_syn(&syn, &p, 10, &mut out).unwrap();
        assert_eq!(n, 58);
        let sa = &out[..n];
        // MACs, IPs, ports swapped.
        assert_eq!(&sa[0..6], &CMAC.0);
        assert_eq!(&sa[6..12], &SMAC.0);
        assert_eq!(&sa[26..30], &SERVER.octets());
        assert_eq!(&sa[30..34], &CLIENT.octets());
        assert_eq!(u16::from_be_bytes([sa[34], sa[35]]), 18515);
        assert_eq!(u16::from_be_bytes([sa[36], sa[37]]), 40000);
        assert_eq!(sa[47], tcp::SYN | tcp::ACK);
        // IPv4 header checksum and TCP checksum, independently.
        assert_eq!(ocsum(&[&sa[14..34]]), 0);
        let mut ph = Vec::new();
        ph.extend_from_slice(&sa[26..34]);
        ph.extend_from_slice(&[0, 6, 0, 24]);
        assert_eq!(ocsum(&[&ph, &sa[34..58]]), 0);
        let cookie = u32::from_be_bytes([sa[38], sa[39], sa[40], sa[41]]);
        let ackno = u32::from_be_bytes([sa[42], sa[43], sa[44], sa[45]]);
        assert_eq!(ackno, 1001);
        assert_eq!((cookie >> 24) & 7, 5, "MSS index of 1460");
        assert_eq!(&sa[54..58], &[2, 4, 0x05, 0xb4]);
        assert_eq!(
            cookie,
            sc.cookie_for(
                (CLIENT.into(), 40000),
                (SERVER.into(), 18515),
                1000,
                Some(1460),
                10
            )
        );
        // The third handshake ACK.
        let ack = seg_v4(tcp::ACK, 1001, cookie.wrapping_add(1), None);
        let p = parse(&ack, &ParseOptions::default());
        let v = sc.on_ack(&ack, &p, 20, &mut out);
        let AckVerdict::Valid {
            rst_len,
            client_ip,
            server_ip,
        } = v
        else {
            panic!("{v:?}")
        };
        assert_eq!((client_ip, server_ip), (CLIENT.into(), SERVER.into()));
        assert_eq!(rst_len, 54);
        let rst = &out[..rst_len];
        assert_eq!(rst[47], tcp::RST);
        assert_eq!(
            u32::from_be_bytes([rst[38], rst[39], rst[40], rst[41]]),
            cookie.wrapping_add(1)
        );
        assert_eq!(ocsum(&[&rst[14..34]]), 0);
        let mut ph = Vec::new();
        ph.extend_from_slice(&rst[26..34]);
        ph.extend_from_slice(&[0, 6, 0, 20]);
        assert_eq!(ocsum(&[&ph, &rst[34..54]]), 0);
        // Wrong ack number, wrong ISN, altered port: not cookies.
        for (seq, ackn) in [
            (1001, cookie.wrapping_add(2)),
            (1002, cookie.wrapping_add(1)),
        ] {
            let f = seg_v4(tcp::ACK, seq, ackn, None);
            let p = parse(&f, &ParseOptions::default());
            assert_eq!(sc.on_ack(&f, &p, 20, &mut out), AckVerdict::NotACookie);
        }
        // A SYN given to on_ack, an ACK given to on_syn: ignored.
        let p = parse(&syn, &ParseOptions::default());
        assert_eq!(sc.on_ack(&syn, &p, 20, &mut out), AckVerdict::NotACookie);
        let p = parse(&ack, &ParseOptions::default());
        assert_eq!(sc.on_syn(&ack, &p, 20, &mut out), None);
        let s = sc.stats();
        assert_eq!(
            (s.synacks, s.valid_acks, s.bad_cookies, s.ack_ignored),
            (1, 1, 2, 1)
        );
        assert_eq!(s.syn_ignored, 1);
    }

    #[test]
    fn windows_and_rotation() {
        let period = 1_000;
        let mut sc = SynCookies::new(7, period);
        let syn = seg_v4(tcp::SYN, 5, 0, None);
        let p = parse(&syn, &ParseOptions::default());
        let mut out = [0u8; 128];
        let n = sc.on_syn(&syn, &p, 999, &mut out).unwrap();
        let cookie = u32::from_be_bytes([out[38], out[39], out[40], out[41]]);
        assert_eq!(n, 58);
        let ack = seg_v4(tcp::ACK, 6, cookie.wrapping_add(1), None);
        let pa = parse(&ack, &ParseOptions::default());
        // Same window, next window (previous secret): valid.
        let mut same = sc;
        assert!(matches!(
            same.on_ack(&ack, &pa, 999, &mut out),
            AckVerdict::Valid { .. }
        ));
        let mut next = sc;
        assert!(next.rotate(1_000));
        assert!(!next.rotate(1_500));
        assert!(!next.rotate(10), "time going backwards changes nothing");
        assert!(matches!(
            next.on_ack(&ack, &pa, 1_999, &mut out),
            AckVerdict::Valid { .. }
        ));
        // Two windows later: expired.
        let mut later = sc;
        assert_eq!(
            later.on_ack(&ack, &pa, 2_000, &mut out),
            AckVerdict::NotACookie
        );
        assert_eq!(later.stats().expired_cookies, 1);
        // 32 windows later the 5-bit counter wraps to the same value, but the secret differs.
        let mut wrap = sc;
        assert_eq!(
            wrap.on_ack(&ack, &pa, 32_500, &mut out),
            AckVerdict::NotACookie
        );
        assert_eq!(wrap.stats().bad_cookies, 1);
        // A jump of several windows recomputes the previous secret.
        let mut a = SynCookies::new(7, period);
        let mut b = SynCookies::new(7, period);
        for t in 1..=5 {
            a.rotate(t * period);
        }
        b.rotate(5 * period);
        assert_eq!((a.cur, a.prev, a.window), (b.cur, b.prev, b.window));
        // Another seed gives other cookies.
        let mut o = SynCookies::new(8, period);
        assert_eq!(o.on_ack(&ack, &pa, 999, &mut out), AckVerdict::NotACookie);
    }

    #[test]
    fn no_room_and_v6() {
        let mut sc = SynCookies::new(1, DEFAULT_PERIOD_NS);
        let syn = seg_v4(tcp::SYN, 5, 0, None);
        let p = parse(&syn, &ParseOptions::default());
        assert_eq!(sc.on_syn(&syn, &p, 0, &mut [0u8; 57]), None);
        assert_eq!(sc.stats().no_room, 1);
        let (s6, d6): (Ipv6Addr, Ipv6Addr) =
            ("fd00:1::5".parse().unwrap(), "fd00:2::9".parse().unwrap());
        let r = TcpRepr {
            src_port: 1,
            dst_port: 2,
            seq: 77,
            flags: tcp::SYN,
            mss: Some(1440),
            ..TcpRepr::default()
        };
        let mut b = [0u8; 128];
        let n = tcp::build_frame_v6(&mut b, SMAC, CMAC, s6, d6, &r).unwrap();
        let p = parse(&b[..n], &ParseOptions::default());
        let mut out = [0u8; 128];
        let m = sc.on_syn(&b[..n], &p, 0, &mut out).unwrap();
        assert_eq!(m, 78);
        let q = parse(&out[..m], &ParseOptions::default());
        assert_eq!(q.anomaly, None);
        let t = TcpPacket::new_checked(&out[54..m]).unwrap();
        assert!(t.verify_checksum_v6(d6, s6));
        assert_eq!((t.ack(), t.mss()), (78, Some(1440)));
    }
}
