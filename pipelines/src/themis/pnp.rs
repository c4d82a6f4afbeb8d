//! THEMIS's Proactive Notification Point: CNP generation at the DC edge (paper section IV,
//! "Generating CNPs", "Aligning with DCQCN Behavior", "PNP overview", Figure 6).
//!
//! The paper: "When an ECN-marked data packet arrives at ESW, ESW checks the timestamp of the
//! most recent CNP sent for the flow. If no CNP has been sent within the past *cnp_interval*, it
//! mirrors the data packet, modifies the necessary fields to form a CNP, and sends it to the
//! sender. ESW clears ECN-mark and forwards the data packet ordinarily."
//!
//! [`Pnp::on_data`] does this for a RoCEv2 packet going from the DC toward the WAN:
//! 1. Not RoCEv2 data (no BTH, or a CNP) -> [`PnpVerdict::NotRoce`]; ECN not CE ->
//!    [`PnpVerdict::NoCe`].
//! 2. Look up QP_field with (IP source = client, IP destination = server, BTH DestQP = sQPN)
//!    (see [`super::daemon`] for why that is the paper's match field). No entry ->
//!    [`PnpVerdict::CeNoEntry`], counted `ce_without_entry`, and **CE is left as is**: the paper
//!    clears CE because "the sender has already reduced the rate upon receiving the CNP from
//!    ESW, [so] additional CNPs from the receiver will cause the inter-DC flow to be throttled
//!    even more severely"; without an entry the ESW cannot send that CNP, so clearing CE would
//!    erase the only congestion signal the sender can get. Left in place, the remote receiver
//!    answers it as plain DCQCN would.
//! 3. With an entry: the CNP timestamp register cell of the key says whether a CNP was sent less
//!    than `cnp_interval` ago. If not (`now - last >= cnp_interval`), the CNP is built into
//!    `out_buf` and the cell is set to `now` ([`PnpVerdict::Cnp`]); otherwise
//!    [`PnpVerdict::Suppressed`]. In both cases CE is rewritten to ECT(0) on the forwarded data
//!    packet (`wire::ecn::set`, IPv4 header checksum updated incrementally; the ICRC masks the
//!    ECN bits, so it stays valid).
//!
//! # Choices where the paper is silent or ambiguous
//!
//! - **What the register stores.** "Aligning with DCQCN Behavior" says the register records "the
//!   timestamp of the last received ECN mark", the "PNP overview" says ESW "checks the timestamp
//!   of the most recent CNP sent for the flow". We store the time of the last CNP *sent*: that is
//!   what a DCQCN notification point does (at most one CNP per QP per interval, the consistency
//!   the paper asks for), whereas updating on every mark would, under continuous marking, never
//!   let a second CNP out.
//! - **Interval comparison.** A CNP goes out when `now - last >= cnp_interval` (the first CE of a
//!   flow always yields one).
//! - **Register indexing and collisions.** The register has `register_size` cells indexed by a
//!   hash of the QP_field key (P4's `Register` indexed by a hash, as the Tofino prototype does);
//!   each cell holds `(tag, time)` where the tag is 32 other bits of the same 64-bit hash. Two
//!   keys sharing a cell are told apart by the tag (a different tag counts as "no recent CNP":
//!   counted `register_collisions`, the cell is taken over). So a collision can only produce an
//!   extra CNP, never suppress another flow's CNP while its CE is being cleared (which would
//!   hide congestion from that flow's sender completely). With `register_size >= qp_capacity`
//!   collisions are rare; the tag makes them harmless.
//! - **The CNP's UDP source port** is the data packet's UDP source port: receivers ignore it,
//!   and reusing it keeps the per-QP entropy (ECMP/LAG hashing of CNPs spreads like the QP's own
//!   traffic, deterministically).
//! - **Addresses.** The CNP goes back where the data came from: Ethernet source/destination
//!   swapped (VLAN tags of the data frame kept), IP source = the data's destination, IP
//!   destination = the data's source, DSCP `cnp_dscp` (48 by default, as hosts use), ECT(0), TTL
//!   64, DestQP = cQPN, P_Key 0xffff, PSN 0, BECN, 16 zero bytes, ICRC
//!   (`wire::roce::build_cnp_v4`/`_v6`, DESIGN.md section 5).
//! - **A CNP that cannot be built** (`out_buf` too small): [`PnpVerdict::BuildFailed`], counted,
//!   the register is not updated and CE is left in place (the receiver will notify instead).

use super::daemon::{QpField, QpKey};
use longhaul_dataplane::asic::register::{RegisterArray, RegisterError};
use longhaul_dataplane::time::Nanos;
use longhaul_dataplane::wire::parse::{L3Kind, Parsed};
use longhaul_dataplane::wire::roce::{self, Bth};
use longhaul_dataplane::wire::{ecn, ipv4, ipv6};
use std::net::{Ipv4Addr, Ipv6Addr};

/// Parameters of the PNP stage.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PnpParams {
    /// Least time between two CNPs for one flow, ns (DCQCN's CNP interval; 50 us).
    pub cnp_interval_ns: Nanos,
    /// QP_field capacity (the paper's tables hold 1024 entries, section VI).
    pub qp_capacity: usize,
    /// DSCP of generated CNPs (48).
    pub cnp_dscp: u8,
    /// Cells of the CNP timestamp register (>= 1; default 1024).
    pub register_size: usize,
}

impl Default for PnpParams {
    fn default() -> Self {
        PnpParams {
            cnp_interval_ns: 50_000,
            qp_capacity: 1024,
            cnp_dscp: 48,
            register_size: 1024,
        }
    }
}

impl PnpParams {
    /// A QP_field table of `qp_capacity` entries.
    pub fn new_qp_field(&self) -> QpField {
        QpField::new(self.qp_capacity)
    }
}

/// What [`Pnp::on_data`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PnpVerdict {
    /// Not a RoCEv2 data packet (no BTH, a CNP, or an unreadable header): untouched.
    NotRoce,
    /// RoCEv2 without CE: untouched.
    NoCe,
    /// CE but no QP_field entry: counted, CE left in place.
    CeNoEntry,
    /// CE, entry, CNP sent less than `cnp_interval` ago: CE cleared, no CNP.
    Suppressed,
    /// CE, entry: a CNP of `len` bytes is in `out_buf`; CE cleared.
    Cnp { len: usize },
    /// CE, entry, CNP due but `out_buf` too small: counted, CE left in place.
    BuildFailed,
}

longhaul_dataplane::counters! {
    /// Counters of the PNP stage.
    #[derive(Copy)]
    pub struct PnpStats: "themis.pnp" {
        /// RoCEv2 data packets seen.
        pub roce_data: u64,
        /// Of which CE-marked.
        pub ce: u64,
        /// CNPs generated.
        pub generated: u64,
        /// CE packets with an entry whose CNP was suppressed by `cnp_interval`.
        pub suppressed: u64,
        /// CE packets without a QP_field entry.
        pub ce_without_entry: u64,
        /// CE marks cleared to ECT(0).
        pub ce_cleared: u64,
        /// Register cells taken over from another key (tag mismatch).
        pub register_collisions: u64,
        /// CNPs not built (no room).
        pub build_errors: u64,
    }
}

/// The PNP stage: parameters, the CNP timestamp register and counters. QP_field is passed in
/// (it is shared with the daemon path).
#[derive(Clone, Debug)]
pub struct Pnp {
    params: PnpParams,
    /// Per cell: (tag, time of the last CNP), `None` = no CNP since reset.
    last_cnp: RegisterArray<Option<(u32, Nanos)>>,
    stats: PnpStats,
}

/// 64-bit finalizer (splitmix64).
#[inline]
fn mix64(mut x: u64) -> u64 {
    x ^= x >> 30;
    x = x.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x ^= x >> 27;
    x = x.wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// The deterministic 64-bit hash of a QP_field key (low 32 bits index the register, high 32 bits
/// are the cell's tag).
pub fn key_hash(k: &QpKey) -> u64 {
    let mut h = mix64(k.sqpn as u64 ^ 0x504e_5000); // "PNP"
    for w in [
        k.client_ip as u64,
        (k.client_ip >> 64) as u64,
        k.server_ip as u64,
        (k.server_ip >> 64) as u64,
    ] {
        h = mix64(h ^ w);
    }
    h
}

/// The data packet's addresses.
enum Addrs {
    V4(Ipv4Addr, Ipv4Addr),
    V6(Ipv6Addr, Ipv6Addr),
}

fn read_addrs(frame: &[u8], parsed: &Parsed) -> Option<Addrs> {
    let l3 = parsed.l3_off as usize;
    match parsed.l3 {
        L3Kind::V4 => {
            let ip = ipv4::Ipv4Packet::new_checked(frame.get(l3..)?).ok()?;
            Some(Addrs::V4(ip.src_addr(), ip.dst_addr()))
        }
        L3Kind::V6 => {
            let ip = ipv6::Ipv6Packet::new_checked(frame.get(l3..)?).ok()?;
            Some(Addrs::V6(ip.src_addr(), ip.dst_addr()))
        }
        _ => None,
    }
}

impl Pnp {
    /// A stage with an all-empty register. `register_size == 0` is refused.
    pub fn new(params: PnpParams) -> Result<Self, RegisterError> {
        Ok(Pnp {
            params,
            last_cnp: RegisterArray::new(params.register_size)?,
            stats: PnpStats::default(),
        })
    }

    /// The parameters.
    pub fn params(&self) -> &PnpParams {
        &self.params
    }

    /// Change `cnp_interval` (control command).
    pub fn set_cnp_interval(&mut self, ns: Nanos) {
        self.params.cnp_interval_ns = ns;
    }

    /// Counters.
    pub fn stats(&self) -> PnpStats {
        self.stats
    }

    /// Every counter by a stable name (`themis.pnp.*`), for metrics.
    pub fn counters(&self, out: &mut dyn FnMut(&'static str, u64)) {
        self.stats.for_each(out);
    }

    /// The register cell of `key`.
    pub fn register_index(&self, key: &QpKey) -> usize {
        self.last_cnp.index_for_hash(key_hash(key) as u32)
    }

    /// Reset register cell `idx` (no CNP recorded): the daemon's destroy ("reset the register
    /// storing its CNP timestamp", section IV). `false` when out of range.
    pub fn reset_register(&mut self, idx: usize) -> bool {
        self.last_cnp.reset(idx)
    }

    /// Reset the cell of `key`, if it still belongs to `key` (a cell taken over by a colliding
    /// key is left alone). Returns whether a cell was reset.
    pub fn reset_for(&mut self, key: &QpKey) -> bool {
        let h = key_hash(key);
        let idx = self.last_cnp.index_for_hash(h as u32);
        match self.last_cnp.get(idx) {
            Some(Some((tag, _))) if tag == (h >> 32) as u32 => self.last_cnp.reset(idx),
            _ => false,
        }
    }

    /// The time of the last CNP recorded in `key`'s cell (for the control plane and tests).
    pub fn last_cnp(&self, key: &QpKey) -> Option<Nanos> {
        let h = key_hash(key);
        match self.last_cnp.get(self.last_cnp.index_for_hash(h as u32)) {
            Some(Some((tag, t))) if tag == (h >> 32) as u32 => Some(t),
            _ => None,
        }
    }

    /// Process one packet going toward the WAN (see the module documentation). `frame` is the
    /// forwarded packet (its CE may be cleared); a CNP, when due, is written to `out_buf` (a CNP
    /// is 74 bytes over IPv4, 94 over IPv6, plus 4 per VLAN tag).
    #[inline]
    pub fn on_data(
        &mut self,
        frame: &mut [u8],
        parsed: &Parsed,
        now: Nanos,
        qp_field: &mut QpField,
        out_buf: &mut [u8],
    ) -> PnpVerdict {
        if parsed.bth_off == 0 || !parsed.is_ip() {
            return PnpVerdict::NotRoce;
        }
        let bth_off = parsed.bth_off as usize;
        let Some(bth) = frame.get(bth_off..).and_then(|b| Bth::new_checked(b).ok()) else {
            return PnpVerdict::NotRoce;
        };
        if bth.opcode() == roce::opcode::CNP {
            return PnpVerdict::NotRoce;
        }
        let dest_qp = bth.dest_qp();
        // No IP version nibble reads as not ECN-capable: NoCe, as a packet without CE.
        let ecn = ecn::get(frame, parsed.l3_off as usize).unwrap_or(ecn::NOT_ECT);
        self.on_roce_data(frame, parsed, dest_qp, ecn, now, qp_field, out_buf)
    }

    /// [`Pnp::on_data`] for a caller that has read the packet already: `parsed` is an IP RoCE
    /// packet whose opcode is not CNP, `dest_qp` is its BTH's DestQP and `ecn` the ECN codepoint
    /// in `frame` now. The ESW's ingress reads the BTH once for its own CNP test, and takes the
    /// ECN from its parse (nothing writes the frame before PNP), and comes here: the common case
    /// (no CE) is a counter and a compare, inline; everything after CE is out of line.
    #[allow(clippy::too_many_arguments)]
    #[inline]
    pub fn on_roce_data(
        &mut self,
        frame: &mut [u8],
        parsed: &Parsed,
        dest_qp: u32,
        ecn: u8,
        now: Nanos,
        qp_field: &mut QpField,
        out_buf: &mut [u8],
    ) -> PnpVerdict {
        self.stats.roce_data += 1;
        if ecn != ecn::CE {
            return PnpVerdict::NoCe;
        }
        self.on_ce(frame, parsed, dest_qp, now, qp_field, out_buf)
    }

    /// A CE-marked RoCE data packet: QP_field, the CNP timestamp register, the CNP (Fig. 3).
    #[inline(never)]
    fn on_ce(
        &mut self,
        frame: &mut [u8],
        parsed: &Parsed,
        dest_qp: u32,
        now: Nanos,
        qp_field: &mut QpField,
        out_buf: &mut [u8],
    ) -> PnpVerdict {
        let l3 = parsed.l3_off as usize;
        self.stats.ce += 1;
        let Some(addrs) = read_addrs(frame, parsed) else {
            return PnpVerdict::NotRoce;
        };
        let key = match addrs {
            Addrs::V4(s, d) => QpKey::v4(u32::from(s), u32::from(d), dest_qp),
            Addrs::V6(s, d) => QpKey {
                client_ip: u128::from(s),
                server_ip: u128::from(d),
                sqpn: dest_qp,
            },
        };
        let Some(cqpn) = qp_field.lookup(&key, now) else {
            self.stats.ce_without_entry += 1;
            return PnpVerdict::CeNoEntry;
        };
        let h = key_hash(&key);
        let idx = self.last_cnp.index_for_hash(h as u32);
        let tag = (h >> 32) as u32;
        let due = match self.last_cnp.read(idx) {
            Some((t, at)) if t == tag => now.saturating_sub(at) >= self.params.cnp_interval_ns,
            Some(_) => {
                self.stats.register_collisions += 1;
                true
            }
            None => true,
        };
        if !due {
            self.stats.suppressed += 1;
            self.clear_ce(frame, l3);
            return PnpVerdict::Suppressed;
        }
        match self.build_cnp(frame, parsed, &addrs, cqpn, out_buf) {
            Some(len) => {
                self.last_cnp.write(idx, Some((tag, now)));
                self.stats.generated += 1;
                self.clear_ce(frame, l3);
                PnpVerdict::Cnp { len }
            }
            None => {
                self.stats.build_errors += 1;
                PnpVerdict::BuildFailed
            }
        }
    }

    fn clear_ce(&mut self, frame: &mut [u8], l3: usize) {
        if ecn::set(frame, l3, ecn::ECT0) {
            self.stats.ce_cleared += 1;
        }
    }

    /// The CNP for the data packet in `frame`, written to `out`; its length.
    fn build_cnp(
        &self,
        frame: &[u8],
        parsed: &Parsed,
        addrs: &Addrs,
        cqpn: u32,
        out: &mut [u8],
    ) -> Option<usize> {
        let l3 = parsed.l3_off as usize;
        // Untagged: l3 == 14. Tags sit between the MACs and the EtherType.
        let tags_len = l3.checked_sub(14)?;
        let l2 = frame.get(..l3)?;
        let mut dst_mac = [0u8; 6];
        let mut src_mac = [0u8; 6];
        dst_mac.copy_from_slice(&l2[6..12]);
        src_mac.copy_from_slice(&l2[..6]);
        let sport = parsed.src_port;
        let dscp = self.params.cnp_dscp;
        let body = out.get_mut(tags_len..)?;
        let n = match *addrs {
            Addrs::V4(s, d) => {
                roce::build_cnp_v4(body, src_mac, dst_mac, d, s, sport, cqpn, dscp).ok()?
            }
            Addrs::V6(s, d) => {
                roce::build_cnp_v6(body, src_mac, dst_mac, d, s, sport, cqpn, dscp).ok()?
            }
        };
        if tags_len > 0 {
            // MACs, then the data frame's tags; the EtherType written by the builder stays.
            out[..6].copy_from_slice(&dst_mac);
            out[6..12].copy_from_slice(&src_mac);
            out[12..12 + tags_len].copy_from_slice(&l2[12..12 + tags_len]);
        }
        Some(n + tags_len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use longhaul_dataplane::wire::ethernet::MacAddr;
    use longhaul_dataplane::wire::icrc;
    use longhaul_dataplane::wire::parse::{parse, ParseOptions};
    use longhaul_dataplane::wire::roce::{BthRepr, RoceAddrs};

    const CLIENT: Ipv4Addr = Ipv4Addr::new(10, 1, 0, 5);
    const SERVER: Ipv4Addr = Ipv4Addr::new(10, 200, 0, 9);
    const SQPN: u32 = 0x00_0a_bc;
    const CQPN: u32 = 0x12_34_56;

    fn data(ecn_bits: u8) -> Vec<u8> {
        let mut b = [0u8; 256];
        let a = RoceAddrs {
            src_mac: MacAddr([2, 0, 0, 0, 0, 5]),
            dst_mac: MacAddr([2, 0, 0, 0, 0, 0xee]),
            src_ip: CLIENT,
            dst_ip: SERVER,
            udp_sport: 0xc001,
            dscp: 26,
            ecn: ecn_bits,
        };
        let bth = BthRepr {
            opcode: roce::opcode::RC_SEND_ONLY,
            solicited: false,
            mig_req: false,
            pad_count: 0,
            tver: 0,
            pkey: 0xffff,
            fecn: false,
            becn: false,
            dest_qp: SQPN,
            ack_req: true,
            psn: 7,
        };
        let n = roce::build_roce_v4(&mut b, &a, &bth, &[0x5a; 64]).unwrap();
        b[..n].to_vec()
    }

    fn setup() -> (Pnp, QpField, QpKey) {
        let pnp = Pnp::new(PnpParams::default()).unwrap();
        let mut qp = PnpParams::default().new_qp_field();
        let key = QpKey::v4(u32::from(CLIENT), u32::from(SERVER), SQPN);
        qp.insert(key, CQPN, 0).unwrap();
        (pnp, qp, key)
    }

    #[test]
    fn cnp_then_suppressed_then_again() {
        let (mut pnp, mut qp, key) = setup();
        let mut out = [0u8; 128];
        let mut f = data(ecn::CE);
        let p = parse(&f, &ParseOptions::default());
        assert_eq!(
            pnp.on_data(&mut f, &p, 1_000, &mut qp, &mut out),
            PnpVerdict::Cnp { len: 74 }
        );
        assert_eq!(ecn::get(&f, 14), Some(ecn::ECT0));
        assert_eq!(icrc::verify(&f, 14), Ok(true));
        assert_eq!(pnp.last_cnp(&key), Some(1_000));
        let cnp = &out[..74];
        assert_eq!(icrc::verify(cnp, 14), Ok(true));
        let c = parse(cnp, &ParseOptions::default());
        assert_eq!(c.anomaly, None);
        assert_eq!((c.dscp, c.src_port), (48, 0xc001));
        let b = Bth::new_checked(&cnp[42..]).unwrap();
        assert_eq!((b.opcode(), b.becn(), b.dest_qp()), (0x81, true, CQPN));
        assert_eq!(&cnp[26..30], &SERVER.octets());
        assert_eq!(&cnp[30..34], &CLIENT.octets());
        // Suppressed within the interval (exactly 49_999 ns later), CE still cleared.
        let mut g = data(ecn::CE);
        assert_eq!(
            pnp.on_data(&mut g, &p, 50_999, &mut qp, &mut out),
            PnpVerdict::Suppressed
        );
        assert_eq!(ecn::get(&g, 14), Some(ecn::ECT0));
        // Exactly cnp_interval later: a CNP.
        let mut g = data(ecn::CE);
        assert_eq!(
            pnp.on_data(&mut g, &p, 51_000, &mut qp, &mut out),
            PnpVerdict::Cnp { len: 74 }
        );
        // Reset (destroy) lets the next one out at once.
        assert!(pnp.reset_for(&key));
        let mut g = data(ecn::CE);
        assert_eq!(
            pnp.on_data(&mut g, &p, 51_001, &mut qp, &mut out),
            PnpVerdict::Cnp { len: 74 }
        );
        let s = pnp.stats();
        assert_eq!((s.generated, s.suppressed, s.ce_cleared), (3, 1, 4));
    }

    #[test]
    fn no_entry_no_ce_no_room() {
        let (mut pnp, _, _) = setup();
        let mut empty = QpField::new(4);
        let mut out = [0u8; 128];
        let mut f = data(ecn::CE);
        let p = parse(&f, &ParseOptions::default());
        assert_eq!(
            pnp.on_data(&mut f, &p, 0, &mut empty, &mut out),
            PnpVerdict::CeNoEntry
        );
        assert_eq!(ecn::get(&f, 14), Some(ecn::CE));
        let (mut pnp, mut qp, _) = setup();
        let mut f = data(ecn::ECT0);
        let p = parse(&f, &ParseOptions::default());
        assert_eq!(
            pnp.on_data(&mut f, &p, 0, &mut qp, &mut out),
            PnpVerdict::NoCe
        );
        let mut f = data(ecn::CE);
        assert_eq!(
            pnp.on_data(&mut f, &p, 0, &mut qp, &mut [0u8; 73]),
            PnpVerdict::BuildFailed
        );
        assert_eq!(ecn::get(&f, 14), Some(ecn::CE));
        assert_eq!(pnp.stats().build_errors, 1);
        assert!(Pnp::new(PnpParams {
            register_size: 0,
            ..PnpParams::default()
        })
        .is_err());
    }

    #[test]
    fn collisions_never_suppress_another_flow() {
        let mut pnp = Pnp::new(PnpParams {
            register_size: 1,
            ..PnpParams::default()
        })
        .unwrap();
        let mut qp = QpField::new(4);
        let k1 = QpKey::v4(u32::from(CLIENT), u32::from(SERVER), SQPN);
        let k2 = QpKey::v4(u32::from(CLIENT), u32::from(SERVER), SQPN + 1);
        qp.insert(k1, CQPN, 0).unwrap();
        qp.insert(k2, CQPN + 1, 0).unwrap();
        let mut out = [0u8; 128];
        let mut f = data(ecn::CE);
        let p = parse(&f, &ParseOptions::default());
        assert!(matches!(
            pnp.on_data(&mut f, &p, 0, &mut qp, &mut out),
            PnpVerdict::Cnp { .. }
        ));
        let mut g = data(ecn::CE);
        g[14 + 20 + 8 + 7] += 1; // DestQP + 1 (ICRC no longer valid; PNP does not check it)
        assert!(matches!(
            pnp.on_data(&mut g, &p, 10, &mut qp, &mut out),
            PnpVerdict::Cnp { .. }
        ));
        assert_eq!(Bth::new_checked(&out[42..]).unwrap().dest_qp(), CQPN + 1);
        assert_eq!(pnp.stats().register_collisions, 1);
        // k1's cell now belongs to k2: resetting k1 leaves it alone.
        assert!(!pnp.reset_for(&k1));
        assert!(pnp.reset_for(&k2));
    }
}
