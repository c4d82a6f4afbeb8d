//! THEMIS daemon messages, their acceptance policy, the inter-DC pair set and the QP_field table
//! (paper section IV, "Generating CNPs" and "Event-driven flow state maintenance").
//!
//! # The messages
//!
//! The paper: "THEMIS uses eBPF to monitor [ibv_modify_qp] and capture cQPN at the host side, and
//! mark daemon packets with lossless DSCP value to ensure delivery. Subsequently, the corresponding
//! entries are inserted into the QP_field table" and "when the host invokes the ibv_destroy_qp
//! function, the ESW control plane is also notified to delete the corresponding QP_field entry
//! and reset the register storing its CNP timestamp". The wire format is left open by the paper;
//! we accept the public prototype's (papers/README.md, DESIGN.md section 5): a UDP datagram to
//! port [`DAEMON_PORT`] (12345) whose payload is exactly 16 bytes, four big-endian u32:
//!
//! ```text
//! 0: destination IP (the remote host, IPv4)   4: cQPN (the host's own QP)
//! 8: sQPN (the remote QP)                    12: flag (1 = created/modified, 0 = destroyed)
//! ```
//! The client IP is the datagram's IPv4 source address. The datagram's own destination (the
//! switch, or a broadcast address as the prototype's daemon uses) is not checked.
//!
//! # The QP_field key
//!
//! The paper: "The srcIP in the daemon packet's header as well as the dstIP and sQPN in the
//! payload form a unique match field, with cQPN as an action parameter. A packet replicated from
//! an ECN-marked packet will pass through this QP_field table, where its BTH header's
//! *destination QPN* field is modified, converting it into a CNP directed to the original
//! sender." and section III-B: "RDMA packets only carry the server-side QPN (sQPN)". So a data
//! packet from the client (the daemon's host, inside the DC) to the server (across the WAN) has
//! IP source = client IP, IP destination = server IP and BTH DestQP = sQPN, and its CNP must go
//! back to the client with DestQP = cQPN:
//!
//! ```text
//! QP_field: (client IP = data IP src, server IP = data IP dst, sQPN = data BTH DestQP) -> cQPN
//! ```
//! ([`QpKey`]; the key holds 128-bit addresses, IPv4 as IPv4-mapped IPv6, so that entries for
//! IPv6 flows can be inserted by the control plane although the daemon format is IPv4-only.)
//!
//! # Which messages are accepted
//!
//! Control inputs from the network are trusted only from configured ports and prefixes (DESIGN.md
//! section 8): [`DaemonPolicy::check`] refuses a message that arrived on a port not in
//! `allowed_ports` (DC-facing ports) or whose client IP is outside `allowed_prefixes` (host
//! subnets); both lists empty means nothing is accepted. A create is then applied only for an
//! inter-DC pair (the paper: "The QP_field table entries are inserted after receiving daemon
//! packets from the host side only if the control plane recognizes the flow as an inter-DC
//! flow"), known either from the TCP handshake monitor ([`InterDcPairs`], filled from
//! [`super::syncookie::AckVerdict::Valid`]) or from configured remote prefixes.

use super::syncookie::ipv4_u32;
use longhaul_dataplane::asic::table::{ExactTable, TableConfig, TableFull, TableStats, WhenFull};
use longhaul_dataplane::time::Nanos;
use longhaul_dataplane::wire::ipv4;
use longhaul_dataplane::wire::parse::{L3Kind, Parsed};
use longhaul_dataplane::wire::udp::{self, UdpPacket};
use std::net::{IpAddr, Ipv4Addr};

/// UDP destination port of daemon messages (the public prototype's).
pub const DAEMON_PORT: u16 = 12345;
/// UDP payload length of a daemon message.
pub const DAEMON_PAYLOAD_LEN: usize = 16;
/// Default capacity of [`InterDcPairs`].
pub const DEFAULT_PAIRS_CAPACITY: usize = 4096;
/// Largest QPN (24 bits).
pub const QPN_MAX: u32 = 0x00ff_ffff;

/// What a daemon message asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DaemonOp {
    /// Flag 1: the QP was created or modified (`ibv_modify_qp`): insert or update the entry.
    CreateOrModify,
    /// Flag 0: the QP was destroyed (`ibv_destroy_qp`): delete the entry, reset its register.
    Destroy,
}

/// A decoded daemon message. Addresses are IPv4 as host-order `u32` (`u32::from(Ipv4Addr)`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct DaemonMsg {
    /// The datagram's source: the host that owns cQPN (the data sender, inside the DC).
    pub client_ip: u32,
    /// Payload word 0: the remote host.
    pub dst_ip: u32,
    /// Payload word 1: the client's QPN.
    pub cqpn: u32,
    /// Payload word 2: the remote (server) QPN, the one data packets carry in BTH DestQP.
    pub sqpn: u32,
    /// Payload word 3.
    pub op: DaemonOp,
}

impl DaemonMsg {
    /// The QP_field key this message is about.
    pub fn key(&self) -> QpKey {
        QpKey::v4(self.client_ip, self.dst_ip, self.sqpn)
    }

    /// Encode as a 16-byte payload (for tests and tools).
    pub fn payload(&self) -> [u8; DAEMON_PAYLOAD_LEN] {
        let mut b = [0u8; DAEMON_PAYLOAD_LEN];
        b[0..4].copy_from_slice(&self.dst_ip.to_be_bytes());
        b[4..8].copy_from_slice(&self.cqpn.to_be_bytes());
        b[8..12].copy_from_slice(&self.sqpn.to_be_bytes());
        let flag: u32 = match self.op {
            DaemonOp::CreateOrModify => 1,
            DaemonOp::Destroy => 0,
        };
        b[12..16].copy_from_slice(&flag.to_be_bytes());
        b
    }
}

/// Why a frame is not a usable daemon message.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DaemonError {
    /// Not IPv4 (the format carries an IPv4 destination, so an IPv6 datagram cannot be one).
    NotIpv4,
    /// The parser flagged the frame (truncated, bad lengths, bad IPv4 checksum, options, ...).
    Malformed,
    /// Not UDP.
    NotUdp,
    /// UDP, but not to [`DAEMON_PORT`].
    NotDaemonPort,
    /// The UDP payload is not exactly 16 bytes (its length).
    BadLength(usize),
    /// A non-zero UDP checksum that does not verify.
    BadChecksum,
    /// The flag word is neither 0 nor 1 (its value).
    BadFlag(u32),
    /// cQPN or sQPN does not fit 24 bits.
    BadQpn,
}

/// Decode the daemon message in `frame` (offsets from `parsed`). Never panics; checks, in order:
/// IPv4, no parser anomaly, UDP to port 12345, UDP payload exactly 16 bytes, UDP checksum (when
/// non-zero), flag 0 or 1, QPNs within 24 bits.
pub fn parse_daemon(frame: &[u8], parsed: &Parsed) -> Result<DaemonMsg, DaemonError> {
    if parsed.l3 != L3Kind::V4 {
        return Err(DaemonError::NotIpv4);
    }
    if parsed.anomaly.is_some() {
        return Err(DaemonError::Malformed);
    }
    if parsed.proto != ipv4::PROTO_UDP || parsed.l4_off == 0 {
        return Err(DaemonError::NotUdp);
    }
    if parsed.dst_port != DAEMON_PORT {
        return Err(DaemonError::NotDaemonPort);
    }
    let l3 = parsed.l3_off as usize;
    let end = parsed.l3_end as usize;
    let ip = frame
        .get(l3..end)
        .and_then(|b| ipv4::Ipv4Packet::new_checked(b).ok())
        .ok_or(DaemonError::Malformed)?;
    let (src, dst) = (ip.src_addr(), ip.dst_addr());
    let dgram = frame
        .get(parsed.l4_off as usize..end)
        .ok_or(DaemonError::Malformed)?;
    let u = UdpPacket::new_checked(dgram).map_err(|_| DaemonError::Malformed)?;
    u.check_len().map_err(|_| DaemonError::Malformed)?;
    let ulen = u.len() as usize;
    let plen = ulen.saturating_sub(udp::HEADER_LEN);
    if plen != DAEMON_PAYLOAD_LEN {
        return Err(DaemonError::BadLength(plen));
    }
    let dgram = dgram.get(..ulen).ok_or(DaemonError::Malformed)?;
    let u = UdpPacket::new_checked(dgram).map_err(|_| DaemonError::Malformed)?;
    if !u.verify_checksum_v4(src, dst) {
        return Err(DaemonError::BadChecksum);
    }
    let p = u.payload();
    let word = |i: usize| -> Result<u32, DaemonError> {
        p.get(i * 4..i * 4 + 4)
            .map(|w| u32::from_be_bytes([w[0], w[1], w[2], w[3]]))
            .ok_or(DaemonError::BadLength(p.len()))
    };
    let (dst_ip, cqpn, sqpn, flag) = (word(0)?, word(1)?, word(2)?, word(3)?);
    let op = match flag {
        1 => DaemonOp::CreateOrModify,
        0 => DaemonOp::Destroy,
        f => return Err(DaemonError::BadFlag(f)),
    };
    if cqpn > QPN_MAX || sqpn > QPN_MAX {
        return Err(DaemonError::BadQpn);
    }
    Ok(DaemonMsg {
        client_ip: u32::from(src),
        dst_ip,
        cqpn,
        sqpn,
        op,
    })
}

/// Whether `ip` is inside `prefix` (`(address, length)`, host-order address). Length 0 matches
/// everything; a length above 32 is invalid and matches nothing.
pub fn prefix_contains(prefix: (u32, u8), ip: u32) -> bool {
    let (addr, len) = prefix;
    match len {
        0 => true,
        1..=32 => {
            let mask = u32::MAX << (32 - len as u32);
            (addr & mask) == (ip & mask)
        }
        _ => false,
    }
}

/// How the control plane knows that a pair is inter-DC.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum InterDcSource {
    /// From the TCP handshake monitor (paper Figure 5): the pair must be in [`InterDcPairs`].
    HandshakeMonitor,
    /// From configuration: the message's destination IP is in one of these remote-DC prefixes.
    RemotePrefixes(Vec<(u32, u8)>),
}

/// Why an accepted-format daemon message was not applied.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Refusal {
    /// It arrived on a port not in `allowed_ports`.
    PortNotAllowed,
    /// Its client (source) IP is outside `allowed_prefixes`.
    SourceNotAllowed,
    /// A create for a pair not known as inter-DC.
    NotInterDc,
    /// A create for a new key while QP_field is full.
    TableFull,
}

/// Which daemon messages are trusted (DESIGN.md section 8). Configuration, read-only per packet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DaemonPolicy {
    /// Host subnets daemon messages may come from (`(address, length)`); empty = none.
    pub allowed_prefixes: Vec<(u32, u8)>,
    /// DC-facing ingress port ids daemon messages may arrive on; empty = none.
    pub allowed_ports: Vec<u16>,
    /// How inter-DC pairs are recognized.
    pub inter_dc: InterDcSource,
}

impl DaemonPolicy {
    /// Trust check: the ingress port, then the client IP's prefix. (The inter-DC condition is
    /// [`is_inter_dc`](Self::is_inter_dc), applied to creates only.)
    pub fn check(&self, msg: &DaemonMsg, ingress_port: u16) -> Result<(), Refusal> {
        if !self.allowed_ports.contains(&ingress_port) {
            return Err(Refusal::PortNotAllowed);
        }
        if !self
            .allowed_prefixes
            .iter()
            .any(|&p| prefix_contains(p, msg.client_ip))
        {
            return Err(Refusal::SourceNotAllowed);
        }
        Ok(())
    }

    /// Whether the message's pair (client IP, destination IP) is inter-DC.
    pub fn is_inter_dc(&self, msg: &DaemonMsg, pairs: &InterDcPairs) -> bool {
        match &self.inter_dc {
            InterDcSource::HandshakeMonitor => pairs.contains(msg.client_ip, msg.dst_ip),
            InterDcSource::RemotePrefixes(v) => v.iter().any(|&p| prefix_contains(p, msg.dst_ip)),
        }
    }
}

/// The set of IP pairs known to be inter-DC: THEMIS's "TCP-cookie register array", filled from
/// the handshake monitor's valid ACKs. Bounded: an [`ExactTable`] of `capacity` entries keyed by
/// the *unordered* pair (lower address first), so it does not matter on which side of the DC the
/// handshake was initiated.
///
/// When full, the default ([`WhenFull::EvictOldest`], counted in `evictions`) forgets the pair
/// recorded longest ago: new inter-DC flows keep being learned, and a forgotten pair only means
/// that its next create message is refused ([`Refusal::NotInterDc`]) until its next TCP handshake
/// passes the monitor again; existing QP_field entries are not touched. [`WhenFull::Refuse`]
/// keeps the old pairs and refuses new ones instead (counted in `full_events`).
#[derive(Debug)]
pub struct InterDcPairs {
    table: ExactTable<(u32, u32), ()>,
}

fn pair_key(a: u32, b: u32) -> (u32, u32) {
    if a <= b {
        (a, b)
    } else {
        (b, a)
    }
}

impl InterDcPairs {
    /// A set of at most `capacity` pairs, evicting the oldest when full.
    pub fn new(capacity: usize) -> Self {
        Self::with_config(
            capacity,
            TableConfig {
                when_full: WhenFull::EvictOldest,
                idle_timeout: None,
            },
        )
    }

    /// As [`new`](Self::new) with another full behaviour or an idle timeout.
    pub fn with_config(capacity: usize, cfg: TableConfig) -> Self {
        InterDcPairs {
            table: ExactTable::new(capacity, cfg),
        }
    }

    /// Record the pair (either order). `Err` only under [`WhenFull::Refuse`] when full.
    pub fn record(&mut self, a: u32, b: u32, now: Nanos) -> Result<(), TableFull> {
        self.table.insert(pair_key(a, b), (), now).map(|_| ())
    }

    /// Record a pair reported by the handshake monitor; IPv6 pairs are not recorded (the daemon
    /// format is IPv4-only) and return `false`, as does a refused insert.
    pub fn record_ip(&mut self, a: IpAddr, b: IpAddr, now: Nanos) -> bool {
        match (ipv4_u32(a), ipv4_u32(b)) {
            (Some(a), Some(b)) => self.record(a, b, now).is_ok(),
            _ => false,
        }
    }

    /// Whether the pair (either order) is known. Does not count or refresh.
    pub fn contains(&self, a: u32, b: u32) -> bool {
        self.table.peek(&pair_key(a, b)).is_some()
    }

    /// Forget the pair.
    pub fn remove(&mut self, a: u32, b: u32) -> bool {
        self.table.remove(&pair_key(a, b)).is_some()
    }

    /// Pairs known.
    pub fn len(&self) -> usize {
        self.table.len()
    }

    /// No pair known.
    pub fn is_empty(&self) -> bool {
        self.table.is_empty()
    }

    /// The table's counters.
    pub fn stats(&self) -> TableStats {
        self.table.stats()
    }

    /// The underlying table (control-plane listing, ageing with `expire`).
    pub fn table_ref(&self) -> &ExactTable<(u32, u32), ()> {
        &self.table
    }

    /// The underlying table, writable.
    pub fn table_mut(&mut self) -> &mut ExactTable<(u32, u32), ()> {
        &mut self.table
    }
}

/// The QP_field match key: (client IP, server IP, sQPN), see the module documentation. Addresses
/// are IPv6 or IPv4-mapped IPv6 (`::ffff:a.b.c.d`) as `u128`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct QpKey {
    /// The data sender (daemon datagram's source; data packet's IP source).
    pub client_ip: u128,
    /// The remote receiver (daemon payload's destination IP; data packet's IP destination).
    pub server_ip: u128,
    /// The receiver's QPN, which data packets carry in BTH DestQP.
    pub sqpn: u32,
}

/// An IPv4 address (host-order `u32`) as an IPv4-mapped IPv6 `u128`.
#[inline]
pub const fn v4_mapped(ip: u32) -> u128 {
    0xffff_0000_0000 | ip as u128
}

impl QpKey {
    /// The key of an IPv4 flow.
    pub const fn v4(client_ip: u32, server_ip: u32, sqpn: u32) -> Self {
        QpKey {
            client_ip: v4_mapped(client_ip),
            server_ip: v4_mapped(server_ip),
            sqpn: sqpn & QPN_MAX,
        }
    }

    /// The key of any flow.
    pub fn from_ips(client: IpAddr, server: IpAddr, sqpn: u32) -> Self {
        let m = |a: IpAddr| match a {
            IpAddr::V4(v) => v4_mapped(u32::from(v)),
            IpAddr::V6(v) => u128::from(v),
        };
        QpKey {
            client_ip: m(client),
            server_ip: m(server),
            sqpn: sqpn & QPN_MAX,
        }
    }

    /// The client address as IPv4 when it is IPv4-mapped.
    pub fn client_v4(&self) -> Option<Ipv4Addr> {
        std::net::Ipv6Addr::from(self.client_ip).to_ipv4_mapped()
    }
}

/// What [`QpField::apply`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QpUpdate {
    /// A new entry.
    Created { key: QpKey, cqpn: u32 },
    /// The key existed (repeated `ibv_modify_qp` messages: INIT, RTR, RTS); `old` was its cQPN.
    Modified { key: QpKey, old: u32, cqpn: u32 },
    /// The entry was deleted: reset its CNP timestamp register
    /// ([`super::pnp::Pnp::reset_for`]).
    Destroyed { key: QpKey, cqpn: u32 },
    /// A destroy for a key that is absent, or present with another cQPN (a stale destroy for an
    /// earlier QP: the newer entry is kept). Nothing changed.
    DestroyIgnored { key: QpKey },
}

impl QpUpdate {
    /// The key whose CNP timestamp register should be reset: after a destroy, and after a modify
    /// that changed the cQPN (another QP now owns the key).
    pub fn register_reset(&self) -> Option<QpKey> {
        match *self {
            QpUpdate::Destroyed { key, .. } => Some(key),
            QpUpdate::Modified { key, old, cqpn } if old != cqpn => Some(key),
            _ => None,
        }
    }
}

/// THEMIS's QP_field table: [`QpKey`] -> cQPN, bounded. When full, creates of new keys are
/// refused ([`Refusal::TableFull`], counted): silently evicting a live QP's entry would stop its
/// CNPs without anyone noticing, while a refused create is visible in the counters and the flow
/// keeps its end-to-end DCQCN loop (PNP leaves CE in place for flows without an entry). The paper
/// sizes its tables at 1024 (section VI).
#[derive(Debug)]
pub struct QpField {
    table: ExactTable<QpKey, u32>,
}

impl QpField {
    /// A table of `capacity` entries that refuses new keys when full, without idle timeout
    /// (entries live until their destroy message).
    pub fn new(capacity: usize) -> Self {
        Self::with_config(capacity, TableConfig::default())
    }

    /// With another table configuration.
    pub fn with_config(capacity: usize, cfg: TableConfig) -> Self {
        QpField {
            table: ExactTable::new(capacity, cfg),
        }
    }

    /// The cQPN for `key`, counting a hit or a miss (the data path's lookup).
    #[inline]
    pub fn lookup(&mut self, key: &QpKey, now: Nanos) -> Option<u32> {
        self.table.lookup(key, now).copied()
    }

    /// Insert or replace `key -> cqpn` directly (control plane).
    pub fn insert(&mut self, key: QpKey, cqpn: u32, now: Nanos) -> Result<Option<u32>, TableFull> {
        self.table.insert(key, cqpn & QPN_MAX, now)
    }

    /// Delete `key`, returning its cQPN.
    pub fn remove(&mut self, key: &QpKey) -> Option<u32> {
        self.table.remove(key)
    }

    /// Apply a daemon message that passed [`DaemonPolicy::check`]. `inter_dc` is
    /// [`DaemonPolicy::is_inter_dc`]'s answer; it matters only for a create of a new key (a
    /// modify of an existing entry is accepted: the pair was inter-DC when it was created).
    pub fn apply(
        &mut self,
        msg: &DaemonMsg,
        inter_dc: bool,
        now: Nanos,
    ) -> Result<QpUpdate, Refusal> {
        let key = msg.key();
        match msg.op {
            DaemonOp::CreateOrModify => {
                if let Some(old) = self.table.peek(&key).copied() {
                    let _ = self.table.insert(key, msg.cqpn, now);
                    return Ok(QpUpdate::Modified {
                        key,
                        old,
                        cqpn: msg.cqpn,
                    });
                }
                if !inter_dc {
                    return Err(Refusal::NotInterDc);
                }
                match self.table.insert(key, msg.cqpn, now) {
                    Ok(_) => Ok(QpUpdate::Created {
                        key,
                        cqpn: msg.cqpn,
                    }),
                    Err(TableFull) => Err(Refusal::TableFull),
                }
            }
            DaemonOp::Destroy => match self.table.peek(&key).copied() {
                Some(c) if c == msg.cqpn => {
                    self.table.remove(&key);
                    Ok(QpUpdate::Destroyed { key, cqpn: c })
                }
                _ => Ok(QpUpdate::DestroyIgnored { key }),
            },
        }
    }

    /// Entries.
    pub fn len(&self) -> usize {
        self.table.len()
    }

    /// No entry.
    pub fn is_empty(&self) -> bool {
        self.table.is_empty()
    }

    /// The cQPN for `key` without counting (control plane, tests).
    pub fn peek(&self, key: &QpKey) -> Option<u32> {
        self.table.peek(key).copied()
    }

    /// The table's counters.
    pub fn stats(&self) -> TableStats {
        self.table.stats()
    }

    /// The underlying table (listing).
    pub fn table(&self) -> &ExactTable<QpKey, u32> {
        &self.table
    }
}

longhaul_dataplane::counters! {
    /// Counters of daemon-message handling.
    #[derive(Copy)]
    pub struct DaemonStats: "themis.daemon" {
        /// Frames that were not daemon messages at all (not IPv4/UDP/port 12345): not counted as
        /// errors elsewhere.
        pub not_daemon: u64,
        /// Daemon-port datagrams that failed to decode (malformed, length, checksum, flag, QPN).
        pub malformed: u64,
        /// Refused: ingress port not allowed.
        pub refused_port: u64,
        /// Refused: client IP outside the allowed prefixes.
        pub refused_source: u64,
        /// Refused: create for a pair not known inter-DC.
        pub refused_not_inter_dc: u64,
        /// Refused: QP_field full.
        pub refused_table_full: u64,
        /// Entries created.
        pub created: u64,
        /// Entries modified (same key again).
        pub modified: u64,
        /// Entries destroyed.
        pub destroyed: u64,
        /// Destroys that matched no entry (or another cQPN).
        pub destroy_ignored: u64,
    }
}

impl DaemonStats {
    /// Count a refusal.
    pub fn count_refusal(&mut self, r: Refusal) {
        match r {
            Refusal::PortNotAllowed => self.refused_port += 1,
            Refusal::SourceNotAllowed => self.refused_source += 1,
            Refusal::NotInterDc => self.refused_not_inter_dc += 1,
            Refusal::TableFull => self.refused_table_full += 1,
        }
    }

    /// Count a decoding error.
    pub fn count_error(&mut self, e: DaemonError) {
        match e {
            DaemonError::NotIpv4 | DaemonError::NotUdp | DaemonError::NotDaemonPort => {
                self.not_daemon += 1
            }
            _ => self.malformed += 1,
        }
    }

    /// Count an applied update.
    pub fn count_update(&mut self, u: &QpUpdate) {
        match u {
            QpUpdate::Created { .. } => self.created += 1,
            QpUpdate::Modified { .. } => self.modified += 1,
            QpUpdate::Destroyed { .. } => self.destroyed += 1,
            QpUpdate::DestroyIgnored { .. } => self.destroy_ignored += 1,
        }
    }
}

/// Why [`Daemon::handle`] did not apply a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DaemonReject {
    /// Not a (valid) daemon message.
    Decode(DaemonError),
    /// A valid message that the policy or the table refused.
    Refused(Refusal),
}

/// The whole daemon path (on the control thread from a punt, or on a worker): decode, trust
/// check, inter-DC check, QP_field update, counters. Allocation-free.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Daemon {
    /// The acceptance policy.
    pub policy: DaemonPolicy,
    /// Counters.
    pub stats: DaemonStats,
}

impl Daemon {
    /// A handler with zeroed counters.
    pub fn new(policy: DaemonPolicy) -> Self {
        Daemon {
            policy,
            stats: DaemonStats::default(),
        }
    }

    /// Handle one frame that arrived on `ingress_port`. On [`QpUpdate::register_reset`] the
    /// caller resets the CNP timestamp register of the returned key.
    #[allow(clippy::too_many_arguments)]
    pub fn handle(
        &mut self,
        frame: &[u8],
        parsed: &Parsed,
        ingress_port: u16,
        now: Nanos,
        pairs: &InterDcPairs,
        qp_field: &mut QpField,
    ) -> Result<QpUpdate, DaemonReject> {
        let msg = match parse_daemon(frame, parsed) {
            Ok(m) => m,
            Err(e) => {
                self.stats.count_error(e);
                return Err(DaemonReject::Decode(e));
            }
        };
        let res = self.policy.check(&msg, ingress_port).and_then(|()| {
            let inter = msg.op == DaemonOp::Destroy || self.policy.is_inter_dc(&msg, pairs);
            qp_field.apply(&msg, inter, now)
        });
        match res {
            Ok(u) => {
                self.stats.count_update(&u);
                Ok(u)
            }
            Err(r) => {
                self.stats.count_refusal(r);
                Err(DaemonReject::Refused(r))
            }
        }
    }
}

/// Build a daemon datagram (Ethernet | IPv4 | UDP to [`DAEMON_PORT`] with a valid checksum |
/// payload) into `buf`, for tests and tools; returns its length (58).
pub fn build_daemon_frame(
    buf: &mut [u8],
    src_mac: [u8; 6],
    dst_mac: [u8; 6],
    client: Ipv4Addr,
    to: Ipv4Addr,
    msg: &DaemonMsg,
) -> Option<usize> {
    use longhaul_dataplane::wire::ethernet::{self, MacAddr};
    let udp_len = udp::HEADER_LEN + DAEMON_PAYLOAD_LEN;
    let total = ethernet::HEADER_LEN + ipv4::HEADER_LEN + udp_len;
    let b = buf.get_mut(..total)?;
    let mut off = ethernet::write_header(
        b,
        MacAddr(dst_mac),
        MacAddr(src_mac),
        ethernet::ETHERTYPE_IPV4,
    )
    .ok()?;
    off += ipv4::write_header(
        &mut b[off..],
        &ipv4::Ipv4Repr {
            src: client,
            dst: to,
            protocol: ipv4::PROTO_UDP,
            dscp: 0,
            ecn: 0,
            ident: 0,
            dont_frag: true,
            ttl: 64,
            payload_len: udp_len as u16,
        },
    )
    .ok()?;
    let l4 = off;
    off += udp::write_header(&mut b[off..], 50000, DAEMON_PORT, DAEMON_PAYLOAD_LEN as u16).ok()?;
    b[off..off + DAEMON_PAYLOAD_LEN].copy_from_slice(&msg.payload());
    let c = udp::checksum_v4(&b[l4..total], client, to);
    b[l4 + 6..l4 + 8].copy_from_slice(&c.to_be_bytes());
    Some(total)
}

#[cfg(test)]
mod tests {
    use super::*;
    use longhaul_dataplane::wire::parse::{parse, ParseOptions};

    const HOST: Ipv4Addr = Ipv4Addr::new(10, 1, 0, 5);
    const REMOTE: Ipv4Addr = Ipv4Addr::new(10, 200, 0, 9);

    fn msg(op: DaemonOp) -> DaemonMsg {
        DaemonMsg {
            client_ip: u32::from(HOST),
            dst_ip: u32::from(REMOTE),
            cqpn: 0x11,
            sqpn: 0x22,
            op,
        }
    }

    fn frame(m: &DaemonMsg) -> Vec<u8> {
        let mut b = [0u8; 128];
        let n = build_daemon_frame(&mut b, [2; 6], [4; 6], HOST, Ipv4Addr::BROADCAST, m).unwrap();
        b[..n].to_vec()
    }

    fn policy() -> DaemonPolicy {
        DaemonPolicy {
            allowed_prefixes: vec![(u32::from(Ipv4Addr::new(10, 1, 0, 0)), 16)],
            allowed_ports: vec![1],
            inter_dc: InterDcSource::HandshakeMonitor,
        }
    }

    #[test]
    fn parse_ok_and_errors() {
        let m = msg(DaemonOp::CreateOrModify);
        let f = frame(&m);
        let p = parse(&f, &ParseOptions::default());
        assert_eq!(parse_daemon(&f, &p), Ok(m));
        // Bad flag (checksum fixed up).
        let mut g = f.clone();
        g[42 + 15] = 2;
        g[40] = 0;
        g[41] = 0; // no UDP checksum
        let p = parse(&g, &ParseOptions::default());
        assert_eq!(parse_daemon(&g, &p), Err(DaemonError::BadFlag(2)));
        // Bad checksum.
        let mut g = f.clone();
        g[42 + 15] = 0;
        let p = parse(&g, &ParseOptions::default());
        assert_eq!(parse_daemon(&g, &p), Err(DaemonError::BadChecksum));
        // QPN above 24 bits.
        let mut g = f.clone();
        g[42 + 4] = 1;
        g[40] = 0;
        g[41] = 0;
        let p = parse(&g, &ParseOptions::default());
        assert_eq!(parse_daemon(&g, &p), Err(DaemonError::BadQpn));
        // Other port.
        let mut g = f.clone();
        g[36..38].copy_from_slice(&12346u16.to_be_bytes());
        let p = parse(&g, &ParseOptions::default());
        assert_eq!(parse_daemon(&g, &p), Err(DaemonError::NotDaemonPort));
        // Payload 12 bytes: shorten UDP and IP lengths.
        let mut g = f[..54].to_vec();
        g[16..18].copy_from_slice(&40u16.to_be_bytes());
        g[24] = 0;
        g[25] = 0;
        let ck = longhaul_dataplane::wire::checksum::checksum(&g[14..34]);
        g[24..26].copy_from_slice(&ck.to_be_bytes());
        g[38..40].copy_from_slice(&20u16.to_be_bytes());
        g[40] = 0;
        g[41] = 0;
        let p = parse(&g, &ParseOptions::default());
        assert_eq!(p.anomaly, None);
        assert_eq!(parse_daemon(&g, &p), Err(DaemonError::BadLength(12)));
        // Truncated frame.
        let p = parse(&f[..40], &ParseOptions::default());
        assert!(parse_daemon(&f[..40], &p).is_err());
    }

    #[test]
    fn prefixes() {
        let a = u32::from(Ipv4Addr::new(10, 1, 2, 3));
        assert!(prefix_contains(
            (u32::from(Ipv4Addr::new(10, 1, 0, 0)), 16),
            a
        ));
        assert!(!prefix_contains(
            (u32::from(Ipv4Addr::new(10, 2, 0, 0)), 16),
            a
        ));
        assert!(prefix_contains((0, 0), a));
        assert!(prefix_contains((a, 32), a));
        assert!(!prefix_contains((a, 33), a));
    }

    #[test]
    fn policy_and_table() {
        let mut d = Daemon::new(policy());
        let mut pairs = InterDcPairs::new(4);
        let mut qp = QpField::new(2);
        let create = msg(DaemonOp::CreateOrModify);
        let f = frame(&create);
        let p = parse(&f, &ParseOptions::default());
        // Not inter-DC yet.
        assert_eq!(
            d.handle(&f, &p, 1, 0, &pairs, &mut qp),
            Err(DaemonReject::Refused(Refusal::NotInterDc))
        );
        // Wrong port.
        assert_eq!(
            d.handle(&f, &p, 2, 0, &pairs, &mut qp),
            Err(DaemonReject::Refused(Refusal::PortNotAllowed))
        );
        assert!(pairs.record(u32::from(REMOTE), u32::from(HOST), 0).is_ok());
        let key = QpKey::v4(u32::from(HOST), u32::from(REMOTE), 0x22);
        assert_eq!(
            d.handle(&f, &p, 1, 0, &pairs, &mut qp),
            Ok(QpUpdate::Created { key, cqpn: 0x11 })
        );
        assert_eq!(qp.peek(&key), Some(0x11));
        let u = d.handle(&f, &p, 1, 0, &pairs, &mut qp).unwrap();
        assert_eq!(u.register_reset(), None);
        // Destroy with another cQPN: ignored; with the right one: deleted.
        let mut other = msg(DaemonOp::Destroy);
        other.cqpn = 0x12;
        let g = frame(&other);
        let pg = parse(&g, &ParseOptions::default());
        assert_eq!(
            d.handle(&g, &pg, 1, 0, &pairs, &mut qp),
            Ok(QpUpdate::DestroyIgnored { key })
        );
        let g = frame(&msg(DaemonOp::Destroy));
        let pg = parse(&g, &ParseOptions::default());
        let u = d.handle(&g, &pg, 1, 0, &pairs, &mut qp).unwrap();
        assert_eq!(u, QpUpdate::Destroyed { key, cqpn: 0x11 });
        assert_eq!(u.register_reset(), Some(key));
        assert!(qp.is_empty());
        let s = d.stats;
        assert_eq!(
            (
                s.refused_not_inter_dc,
                s.refused_port,
                s.created,
                s.modified,
                s.destroyed,
                s.destroy_ignored
            ),
            (1, 1, 1, 1, 1, 1)
        );
        // RemotePrefixes policy.
        let pol = DaemonPolicy {
            inter_dc: InterDcSource::RemotePrefixes(vec![(u32::from(REMOTE), 24)]),
            ..policy()
        };
        assert!(pol.is_inter_dc(&create, &InterDcPairs::new(1)));
        let mut near = create;
        near.dst_ip = u32::from(Ipv4Addr::new(10, 1, 0, 6));
        assert!(!pol.is_inter_dc(&near, &InterDcPairs::new(1)));
    }

    #[test]
    fn qp_field_full_and_pairs_evict() {
        let mut qp = QpField::new(1);
        let m1 = msg(DaemonOp::CreateOrModify);
        let mut m2 = m1;
        m2.sqpn = 0x23;
        assert!(qp.apply(&m1, true, 0).is_ok());
        assert_eq!(qp.apply(&m2, true, 0), Err(Refusal::TableFull));
        let mut pairs = InterDcPairs::new(2);
        for i in 0..3u32 {
            pairs.record(i, 100 + i, i as u64).unwrap();
        }
        assert!(!pairs.contains(0, 100));
        assert!(pairs.contains(102, 2) && pairs.contains(1, 101));
        assert_eq!(pairs.stats().evictions, 1);
        let mut refuse = InterDcPairs::with_config(1, TableConfig::default());
        refuse.record(1, 2, 0).unwrap();
        assert!(refuse.record(3, 4, 0).is_err());
        assert!(!refuse.record_ip("fd00::1".parse().unwrap(), "fd00::2".parse().unwrap(), 0));
    }
}
