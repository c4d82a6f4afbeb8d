//! Neighbours of the routed ports (DESIGN.md section 4b): answering ARP (RFC 826) and IPv6
//! neighbour solicitations (RFC 4861 section 7.2.4) for the ports' own addresses, and resolving
//! next hops into MACs with a bounded table.
//!
//! Who does what:
//! - **The worker** answers a request for one of its ingress port's addresses at once (an ARP
//!   request is turned into its reply in place; a neighbour advertisement is built), and solicits
//!   a next hop it has no MAC for (broadcast ARP request / multicast NS, at most one per
//!   `retrans_ms` per neighbour). The packet that needed the MAC is dropped and counted
//!   (`drop.neighbor_unresolved`): a sender retransmits, as it would behind any router whose
//!   neighbour entry is incomplete (Linux keeps three packets; we keep none, so nothing is ever
//!   held for a neighbour that never answers).
//! - **The control thread** learns: every ARP or ND packet that carries a mapping for this
//!   port (a request or reply addressed to its address, a gratuitous ARP, an advertisement) is
//!   punted; the control plane checks that the address is on one of the port's subnets and sends
//!   the entry to every worker ([`super::BaselineCommand::NeighborSet`]), so all workers resolve
//!   alike whichever of them received the answer. Replay runs that handler inline after the
//!   configured control latency.
//! - **Ageing** (RFC 4861 section 7.3.2's states, simplified): an entry is used freely for
//!   `reachable_ms` after it was confirmed; then it is still used while up to `probes` unicast
//!   probes go out, `retrans_ms` apart; when they are unanswered for one more `retrans_ms` it
//!   falls back to incomplete (broadcast solicitations, packets dropped). Entries nobody looks up
//!   for twice `reachable_ms` are removed. Static entries (`[[neighbors.static]]`) never age.
//! - **Never flood**: ARP and ND that are not for this port's addresses are consumed, counted as
//!   `neighbor.not_for_us`, and go nowhere.

use longhaul_control::config::{map_v4, unmap_v4, Config, NeighborConfig, PortAddr};
use longhaul_dataplane::asic::table::{ExactTable, TableConfig, WhenFull};
use longhaul_dataplane::control::Punt;
use longhaul_dataplane::counters::DropReason;
use longhaul_dataplane::engine::{Action, Ctx};
use longhaul_dataplane::packet::{BufPool, PacketBuf};
use longhaul_dataplane::time::Nanos;
use longhaul_dataplane::wire::arp::{self, Arp};
use longhaul_dataplane::wire::ethernet::{ETHERTYPE_ARP, MIN_FRAME_LEN};
use longhaul_dataplane::wire::ndp::{self, Nd};
use longhaul_dataplane::wire::parse::{L3Kind, Parsed};

/// Punt reason of an ARP / ND packet the control plane learns from. Baseline punt reasons sit
/// at the top of the range, away from the mechanisms' own (which count up from 1).
pub const PUNT_NEIGHBOR: u16 = 0xff00;

/// A neighbour: (port id, address; IPv4 mapped into IPv6).
pub type NeighborKey = (u16, u128);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Entry {
    mac: [u8; 6],
    /// The MAC is known (otherwise: incomplete, being solicited).
    known: bool,
    /// When the control plane last confirmed the MAC.
    confirmed: Nanos,
    /// When the last solicitation or probe went out.
    solicited: Nanos,
    /// Unicast probes sent since the entry went stale.
    probes: u32,
}

longhaul_dataplane::counters! {
    /// What a worker counts of ARP / ND.
    pub struct NeighborStats: "neighbor" {
        /// ARP requests for a port's address, answered.
        pub arp_answered: u64,
        /// Neighbour solicitations for a port's address, answered.
        pub nd_answered: u64,
        /// ARP / ND packets punted for learning.
        pub learn_punted: u64,
        /// Entries set by the control plane.
        pub learned: u64,
        /// Broadcast ARP requests and multicast solicitations sent for next hops.
        pub solicited: u64,
        /// Unicast probes of stale entries.
        pub probed: u64,
        /// Entries that fell back to incomplete after unanswered probes.
        pub failed: u64,
        /// ARP / ND for addresses that are not this port's: consumed, never flooded.
        pub not_for_us: u64,
        /// ARP / ND packets that failed validation (length, checksum, hop limit 255, ...).
        pub invalid: u64,
        /// Misses that could not get an entry (table full): no solicitation went out.
        pub table_full: u64,
        /// A next hop on a port with no address of its family to solicit from.
        pub no_source_address: u64,
        /// Answers or solicitations lost for want of a buffer.
        pub no_buffer: u64,
    }
}

/// The neighbour state of one worker.
pub struct Neighbors {
    reachable_ns: Nanos,
    probes: u32,
    retrans_ns: Nanos,
    /// Port id -> its addresses.
    addrs: Vec<Vec<PortAddr>>,
    learned: ExactTable<NeighborKey, Entry>,
    statics: ExactTable<NeighborKey, [u8; 6]>,
    /// Some port has addresses.
    active: bool,
    /// Class of the frames this sends (network control: what DSCP 48 maps to).
    class: u8,
    scratch: [u8; ndp::FRAME_LEN],
    pub stats: NeighborStats,
}

/// Room for entries the control plane adds beyond the configured ones.
const STATIC_HEADROOM: usize = 64;
/// Stale entries removed per miss or learn at most (bounded work).
const EXPIRE_PER_CALL: usize = 4;

impl Neighbors {
    pub fn new(cfg: &Config, class: u8) -> Self {
        let n: &NeighborConfig = &cfg.neighbors;
        let max_id = cfg.ports.iter().map(|p| p.id).max().unwrap_or(0) as usize;
        let mut addrs = vec![Vec::new(); max_id + 1];
        for p in &cfg.ports {
            addrs[p.id as usize] = p.addresses.clone();
        }
        // Only a config with addresses resolves anything: otherwise the tables stay tiny.
        let any = cfg.ports.iter().any(|p| !p.addresses.is_empty());
        let learned = ExactTable::new(
            if any { n.capacity } else { 1 },
            TableConfig {
                when_full: WhenFull::Refuse,
                idle_timeout: Some(n.reachable_ns.saturating_mul(2)),
            },
        );
        let mut statics = ExactTable::new(
            n.statics.len() + STATIC_HEADROOM,
            TableConfig {
                when_full: WhenFull::Refuse,
                idle_timeout: None,
            },
        );
        for s in &n.statics {
            // Cannot fail: capacity covers every configured entry (duplicates were refused).
            let _ = statics.insert((s.port, s.ip), s.mac, 0);
        }
        Neighbors {
            reachable_ns: n.reachable_ns,
            probes: n.probes,
            retrans_ns: n.retrans_ns,
            addrs,
            learned,
            statics,
            active: any,
            class,
            scratch: [0; ndp::FRAME_LEN],
            stats: NeighborStats::default(),
        }
    }

    fn port_addrs(&self, port: u16) -> &[PortAddr] {
        self.addrs.get(port as usize).map_or(&[], |v| v.as_slice())
    }

    /// Whether any port has addresses (otherwise there is nothing to answer or resolve).
    #[inline]
    pub fn active(&self) -> bool {
        self.active
    }

    /// Whether `ip` is one of `port`'s own addresses.
    pub fn is_own(&self, port: u16, ip: u128) -> bool {
        self.port_addrs(port).iter().any(|a| a.mapped() == ip)
    }

    /// Whether `ip` is on one of `port`'s subnets (the control plane learns only those).
    pub fn on_link(&self, port: u16, ip: u128) -> bool {
        self.port_addrs(port).iter().any(|a| a.contains(ip))
    }

    /// The address `port` speaks from toward `target`: one on the target's subnet, else the
    /// first of its family.
    fn source_for(&self, port: u16, target: u128) -> Option<u128> {
        let v4 = unmap_v4(target).is_some();
        let fam = |a: &&PortAddr| matches!(a, PortAddr::V4 { .. }) == v4;
        let a = self.port_addrs(port);
        a.iter()
            .filter(fam)
            .find(|a| a.contains(target))
            .or_else(|| a.iter().find(fam))
            .map(PortAddr::mapped)
    }

    /// ARP or ND arriving on routed port `port`: `Some(action)` when this stage took it (the
    /// frame answered in place, or consumed), `None` for anything else (ICMPv6 that is not
    /// NS/NA, every other packet).
    pub fn ingress<P: BufPool>(
        &mut self,
        ctx: &mut Ctx<'_, P>,
        pkt: &mut P::Buf,
        p: &Parsed,
        port: u16,
    ) -> Option<Action> {
        match p.l3 {
            L3Kind::Other if p.ethertype == ETHERTYPE_ARP => Some(self.arp(ctx, pkt, p, port)),
            L3Kind::V6 if p.proto == ndp::NEXT_HEADER_ICMPV6 => self.nd(ctx, pkt, p, port),
            _ => None,
        }
    }

    fn arp<P: BufPool>(
        &mut self,
        ctx: &mut Ctx<'_, P>,
        pkt: &mut P::Buf,
        p: &Parsed,
        port: u16,
    ) -> Action {
        let off = p.l3_off as usize;
        let a = match pkt.data().get(off..).map(Arp::parse) {
            Some(Ok(a)) => a,
            _ => {
                self.stats.invalid += 1;
                return Action::Drop(DropReason::Pipeline);
            }
        };
        let for_us = self.is_own(port, map_v4(a.tpa));
        let gratuitous = a.spa == a.tpa;
        if (for_us || gratuitous) && ctx.punt_packet(PUNT_NEIGHBOR, pkt) {
            self.stats.learn_punted += 1;
        }
        if !for_us || gratuitous {
            if !gratuitous {
                self.stats.not_for_us += 1;
            }
            return Action::Consume;
        }
        if a.op != arp::OP_REQUEST {
            return Action::Consume;
        }
        let Some(mac) = ctx.port(port).map(|p| p.mac) else {
            return Action::Drop(DropReason::BadPort);
        };
        if arp::reply_in_place(pkt.data_mut(), off, mac).is_err() {
            self.stats.invalid += 1;
            return Action::Drop(DropReason::Pipeline);
        }
        // A request from a virtual link may come unpadded (42 bytes): the reply is a full
        // Ethernet frame.
        let short = MIN_FRAME_LEN.saturating_sub(pkt.len());
        if short > 0 {
            if let Some(pad) = pkt.append(short) {
                pad.fill(0);
            }
        }
        self.stats.arp_answered += 1;
        let m = pkt.meta_mut();
        m.egress_port = port;
        m.class = self.class;
        Action::Forward
    }

    fn nd<P: BufPool>(
        &mut self,
        ctx: &mut Ctx<'_, P>,
        pkt: &mut P::Buf,
        p: &Parsed,
        port: u16,
    ) -> Option<Action> {
        let frame = pkt.data();
        let ip = frame.get(p.l3_off as usize..)?;
        // The ICMPv6 type: only NS and NA are ours.
        let t = *ip.get(40)?;
        if t != ndp::NS && t != ndp::NA {
            return None;
        }
        let nd = match Nd::parse(ip) {
            Ok(nd) => nd,
            Err(_) => {
                self.stats.invalid += 1;
                return Some(Action::Drop(DropReason::Pipeline));
            }
        };
        let own = self.is_own(port, nd.target);
        if (nd.kind == ndp::NA || (own && nd.src != 0)) && ctx.punt_packet(PUNT_NEIGHBOR, pkt) {
            self.stats.learn_punted += 1;
        }
        if nd.kind == ndp::NA {
            return Some(Action::Consume);
        }
        if !own {
            self.stats.not_for_us += 1;
            return Some(Action::Consume);
        }
        let mut requester = [0u8; 6];
        requester.copy_from_slice(&frame[6..12]);
        let Some(mac) = ctx.port(port).map(|p| p.mac) else {
            return Some(Action::Drop(DropReason::BadPort));
        };
        if let Ok(n) = ndp::build_advertisement(&mut self.scratch, &nd, requester, mac) {
            if self.send(ctx, n, port) {
                self.stats.nd_answered += 1;
            }
        }
        Some(Action::Consume)
    }

    /// Emit `scratch[..n]` out of `port`.
    fn send<P: BufPool>(&mut self, ctx: &mut Ctx<'_, P>, n: usize, port: u16) -> bool {
        let Some(mut g) = ctx.pool().alloc_from(&self.scratch[..n]) else {
            self.stats.no_buffer += 1;
            return false;
        };
        let m = g.meta_mut();
        m.ingress_port = port;
        m.egress_port = port;
        m.class = self.class;
        ctx.emit(g);
        true
    }

    /// Solicit `target` on `port`: broadcast (`to` = `None`) or a unicast probe to `to`.
    fn solicit<P: BufPool>(
        &mut self,
        ctx: &mut Ctx<'_, P>,
        port: u16,
        target: u128,
        to: Option<[u8; 6]>,
    ) {
        let Some(src) = self.source_for(port, target) else {
            self.stats.no_source_address += 1;
            return;
        };
        let Some(mac) = ctx.port(port).map(|p| p.mac) else {
            return;
        };
        let built = match (unmap_v4(src), unmap_v4(target), to) {
            (Some(s), Some(t), None) => arp::build_request(&mut self.scratch, mac, s, t),
            (Some(s), Some(t), Some(d)) => arp::build_probe(&mut self.scratch, d, mac, s, t),
            (None, None, None) => ndp::build_solicitation(&mut self.scratch, mac, src, target),
            (None, None, Some(d)) => ndp::build_probe(&mut self.scratch, d, mac, src, target),
            _ => return,
        };
        if let Ok(n) = built {
            if self.send(ctx, n, port) {
                match to {
                    None => self.stats.solicited += 1,
                    Some(_) => self.stats.probed += 1,
                }
            }
        }
    }

    /// The MAC of neighbour `ip` on `port`, soliciting it when unknown or stale (see the module
    /// documentation). `Err(NeighborUnresolved)`: drop the packet.
    #[inline]
    pub fn resolve<P: BufPool>(
        &mut self,
        ctx: &mut Ctx<'_, P>,
        port: u16,
        ip: u128,
    ) -> Result<[u8; 6], DropReason> {
        let key = (port, ip);
        if !self.statics.is_empty() {
            if let Some(m) = self.statics.lookup(&key, ctx.now) {
                return Ok(*m);
            }
        }
        let now = ctx.now;
        let (reachable, probes, retrans) = (self.reachable_ns, self.probes, self.retrans_ns);
        enum Then {
            Use([u8; 6]),
            Probe([u8; 6]),
            Solicit,
            Wait,
        }
        let then = match self.learned.lookup_mut(&key, now) {
            Some(e) if e.known => {
                let quiet = now.saturating_sub(e.solicited) >= retrans;
                // Reachable, or stale with a probe out less than `retrans` ago: use it.
                if now.saturating_sub(e.confirmed) < reachable || !quiet {
                    Then::Use(e.mac)
                } else if e.probes < probes {
                    e.probes += 1;
                    e.solicited = now;
                    Then::Probe(e.mac)
                } else {
                    e.known = false;
                    e.probes = 0;
                    e.solicited = now;
                    self.stats.failed += 1;
                    Then::Solicit
                }
            }
            Some(e) => {
                if now.saturating_sub(e.solicited) >= retrans {
                    e.solicited = now;
                    Then::Solicit
                } else {
                    Then::Wait
                }
            }
            None => {
                self.learned.expire(now, EXPIRE_PER_CALL, |_, _| {});
                let e = Entry {
                    mac: [0; 6],
                    known: false,
                    confirmed: 0,
                    solicited: now,
                    probes: 0,
                };
                match self.learned.insert(key, e, now) {
                    Ok(_) => Then::Solicit,
                    Err(_) => {
                        self.stats.table_full += 1;
                        Then::Wait
                    }
                }
            }
        };
        match then {
            Then::Use(mac) => Ok(mac),
            Then::Probe(mac) => {
                self.solicit(ctx, port, ip, Some(mac));
                Ok(mac)
            }
            Then::Solicit => {
                self.solicit(ctx, port, ip, None);
                Err(DropReason::NeighborUnresolved)
            }
            Then::Wait => Err(DropReason::NeighborUnresolved),
        }
    }

    /// Set (learned: confirm) or, with `mac` = `None`, remove an entry (control command).
    pub fn set(
        &mut self,
        now: Nanos,
        key: NeighborKey,
        mac: Option<[u8; 6]>,
        is_static: bool,
    ) -> Result<(), &'static str> {
        if self.addrs.get(key.0 as usize).is_none() {
            return Err("no such port");
        }
        match (mac, is_static) {
            (Some(mac), true) => {
                self.statics
                    .insert(key, mac, now)
                    .map_err(|_| "static neighbour table full")?;
            }
            (Some(mac), false) => {
                self.learned.expire(now, EXPIRE_PER_CALL, |_, _| {});
                let e = Entry {
                    mac,
                    known: true,
                    confirmed: now,
                    solicited: now,
                    probes: 0,
                };
                self.learned
                    .insert(key, e, now)
                    .map_err(|_| "neighbour table full")?;
                self.stats.learned += 1;
            }
            (None, true) => {
                self.statics
                    .remove(&key)
                    .ok_or("no such static neighbour")?;
            }
            (None, false) => {
                self.learned.remove(&key).ok_or("no such neighbour")?;
            }
        }
        Ok(())
    }

    /// Whether `key` has a usable MAC right now (tests, listing).
    pub fn known(&self, key: &NeighborKey) -> Option<[u8; 6]> {
        self.statics
            .peek(key)
            .copied()
            .or_else(|| self.learned.peek(key).filter(|e| e.known).map(|e| e.mac))
    }

    /// Entries in the learned table (incomplete ones included).
    pub fn learned_len(&self) -> usize {
        self.learned.len()
    }

    /// Table counters of the learned table.
    pub fn table(&self) -> longhaul_dataplane::engine::TableCounters {
        let s = self.learned.stats();
        longhaul_dataplane::engine::TableCounters {
            hits: s.hits,
            misses: s.misses,
            entries: self.learned.len() as u64,
            capacity: self.learned.capacity() as u64,
            full_events: s.full_events,
        }
    }

    /// Counters by name.
    pub fn counters(&self, out: &mut dyn FnMut(&'static str, u64)) {
        self.stats.for_each(out);
    }
}

/// What the control plane learns from a punted ARP / ND packet: (address, MAC) of the sender,
/// `None` when it carries no mapping. The address is IPv4-mapped for IPv4.
pub fn learnable(p: &Punt) -> Option<(u128, [u8; 6])> {
    let f = p.bytes();
    let parsed = longhaul_dataplane::wire::parse::parse(f, &Default::default());
    let off = parsed.l3_off as usize;
    match parsed.l3 {
        L3Kind::Other if parsed.ethertype == ETHERTYPE_ARP => {
            let a = Arp::parse(f.get(off..)?).ok()?;
            (a.spa != 0).then_some((map_v4(a.spa), a.sha))
        }
        L3Kind::V6 => {
            let nd = Nd::parse(f.get(off..)?).ok()?;
            match nd.kind {
                ndp::NS if nd.src != 0 => Some((nd.src, nd.lladdr?)),
                ndp::NA => Some((nd.target, nd.lladdr?)),
                _ => None,
            }
        }
        _ => None,
    }
}
