//! The baseline: a plain lossless RoCE switch (no paper mechanism), and the stages every other
//! pipeline starts from.
//!
//! Each port is `routed` (the L3 hop below) or one of a `[[wire]]` pair (DESIGN.md section 4b):
//! a wire port is a transparent bump in the wire: every frame it receives leaves by the pair's
//! other port unchanged (ARP, ND, LLDP, anomalies included: counted, never dropped by the parser
//! policy, never routed), and the mechanisms act only on the traffic they own. A packet a
//! mechanism generates in reply to one that came in on a wire port goes back out of that port
//! with the trigger's MACs swapped ([`Forwarding::reply_macs`], [`Forwarding::route_generated`]).
//!
//! Ingress of a routed port, in order:
//! 1. **parse** (`wire::parse`): offsets into the metadata, the first anomaly found;
//! 2. **neighbours** (`neighbor`): ARP and IPv6 neighbour discovery for the port's own addresses
//!    are answered, learned from (through the control plane) or consumed; never flooded;
//! 3. **anomaly policy**: each anomaly is counted by reason, then dropped or kept by the
//!    configured policy (`[parser.policy]`). Frames too short to switch (`truncated`) and IP
//!    headers that are not IP (`bad_ip_header`) are always dropped;
//! 4. **classify**: traffic class from DSCP or PCP (`[qos] trust`);
//! 5. **L2**: a destination MAC in the static L2 table is bridged unchanged to its port;
//! 6. **L3**: otherwise an IP packet is routed by longest-prefix match on its destination:
//!    TTL / hop limit decremented (IPv4 checksum updated incrementally; the RoCE ICRC masks the
//!    TTL so it stays valid), source MAC = egress port's MAC, destination MAC = the route's next
//!    hop (static `next_hop_mac`, or resolved by `neighbor` for a `next_hop` gateway and for the
//!    ports' connected subnets). A TTL of 0 or 1 is dropped (`ttl_expired`), no match is dropped
//!    (`no_route`), a next hop not resolved yet is dropped (`neighbor_unresolved`).
//!    A route may be an **ECMP group** (`[[routes]] next_hops`, up to 16 members): the member is
//!    the one the seeded hash of the packet's 5-tuple selects (`asic::ecmp`, `switch.ecmp_seed`;
//!    the UDP source port is a RoCEv2 QP's entropy), so a flow stays on one member and flows
//!    spread over the members. Both directions of a flow are hashed independently (not
//!    symmetric), IPv4 fragments without their ports (all fragments of a datagram on one
//!    member). A single-next-hop route costs what it did: one more match on the LPM entry.
//!
//! A kept anomaly whose L3 header is still usable (IPv4 options, fragments, a bad IPv4 checksum)
//! is routed like any packet (a bad checksum stays bad: we do not repair what we did not break);
//! one whose L3 cannot be trusted (bad length, unknown EtherType, VLAN stack) is only bridged by
//! the L2 table, and dropped as `no_route` when its MAC is unknown.
//!
//! The traffic manager behind it does the rest: DSCP class queues, RED/ECN, PFC for the lossless
//! classes, shaping at port rate.

pub mod control;
pub mod ingress;
pub mod int;
pub mod mechanism;
pub mod neighbor;

use longhaul_control::config::{
    map_v4, Config, IpPrefix, ParserConfig, Policy, RouteHop, Trust, MAX_ECMP_MEMBERS,
};
use longhaul_dataplane::asic::ecmp;
use longhaul_dataplane::asic::lpm::Lpm;
use longhaul_dataplane::asic::table::{ExactTable, TableConfig, WhenFull};
use longhaul_dataplane::counters::{DropCounters, DropReason};
use longhaul_dataplane::engine::{Action, Ctx, Pipeline, TableCounters};
use longhaul_dataplane::packet::{BufPool, PacketBuf, NUM_CLASSES};
use longhaul_dataplane::wire::ipv4;
use longhaul_dataplane::wire::ipv6::Ipv6Packet;
use longhaul_dataplane::wire::parse::{parse, parse_built_udp, L3Kind, ParseOptions, Parsed};
use neighbor::Neighbors;

/// Spare capacity in the forwarding tables beyond the configured entries, for entries the control
/// plane adds at run time.
const TABLE_HEADROOM: usize = 1024;

/// The L2 table's key for a MAC: its 48 bits in a `u64` (one word to hash and compare, where a
/// `[u8; 6]` key is hashed and compared byte-wise).
#[inline]
pub fn mac_key(mac: &[u8; 6]) -> u64 {
    let [a, b, c, d, e, f] = *mac;
    u64::from_be_bytes([0, 0, a, b, c, d, e, f])
}

/// Where a route sends a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NextHop {
    pub port: u16,
    /// The next hop's MAC: static ([`Via::Mac`]) or, once resolved, the neighbour's.
    pub mac: [u8; 6],
    pub via: Via,
}

/// How a route's next-hop MAC is found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Via {
    /// `next_hop_mac`: static.
    Mac,
    /// `next_hop`: the gateway's address (IPv4-mapped), resolved by ARP / ND.
    Gateway(u128),
    /// A port's connected subnet: the destination itself, resolved by ARP / ND.
    Direct,
}

impl NextHop {
    /// A configured next hop (its MAC still unresolved when it is a gateway).
    pub fn from_config(h: &RouteHop) -> Self {
        NextHop {
            port: h.port,
            mac: h.next_hop_mac,
            via: h.next_hop.map_or(Via::Mac, Via::Gateway),
        }
    }
}

/// What a route's LPM entry holds: one next hop, or an ECMP group (an index into
/// [`Forwarding::ecmp_groups`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RouteEntry {
    One(NextHop),
    Group(u32),
}

/// An ECMP group: its members and how many packets the hash sent to each.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EcmpGroup {
    pub prefix: IpPrefix,
    /// 1 ..= [`MAX_ECMP_MEMBERS`] (a group's size is checked by the config).
    len: u8,
    members: [NextHop; MAX_ECMP_MEMBERS],
    packets: [u64; MAX_ECMP_MEMBERS],
    /// Bit i: member i's port is up ([`Forwarding::set_link`]); the hash picks among these.
    live: u16,
    /// Replaced or deleted by a control command: no route points here any more.
    pub retired: bool,
}

impl EcmpGroup {
    /// The members, in config order.
    pub fn members(&self) -> &[NextHop] {
        &self.members[..self.len as usize]
    }
    /// Packets the hash sent to each member.
    pub fn packets(&self) -> &[u64] {
        &self.packets[..self.len as usize]
    }

    /// Every member's bit.
    fn all(&self) -> u16 {
        (((1u32 << self.len) - 1) & 0xffff) as u16
    }
}

/// `baseline.ecmp_member.<i>`: packets sent to the i-th member of their ECMP group, summed
/// over the groups (static names, so counters never allocate).
const ECMP_MEMBER_NAMES: [&str; MAX_ECMP_MEMBERS] = [
    "baseline.ecmp_member.0",
    "baseline.ecmp_member.1",
    "baseline.ecmp_member.2",
    "baseline.ecmp_member.3",
    "baseline.ecmp_member.4",
    "baseline.ecmp_member.5",
    "baseline.ecmp_member.6",
    "baseline.ecmp_member.7",
    "baseline.ecmp_member.8",
    "baseline.ecmp_member.9",
    "baseline.ecmp_member.10",
    "baseline.ecmp_member.11",
    "baseline.ecmp_member.12",
    "baseline.ecmp_member.13",
    "baseline.ecmp_member.14",
    "baseline.ecmp_member.15",
];

/// No wire peer.
const NO_PEER: u16 = u16::MAX;

/// A forwarding decision.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Egress {
    /// The L2 table: out of this port, unchanged.
    Bridge(u16),
    /// A route: out of its port with TTL - 1 and the next hop's MAC.
    Route(Hop),
}

/// A route's resolved next hop: what the rewrite needs (8 bytes, where a [`NextHop`] with its
/// [`Via`] is 32: the decision is carried from the lookup to the rewrite in registers).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Hop {
    pub port: u16,
    pub mac: [u8; 6],
}

impl From<NextHop> for Hop {
    #[inline(always)]
    fn from(nh: NextHop) -> Self {
        Hop::from(&nh)
    }
}

/// A static next hop's [`Hop`] read in place from the route table: copying the whole
/// [`NextHop`] out (48 bytes with its [`Via`]) and reading it back piecewise cost the baseline
/// ingress a load chain through the stack on every routed frame.
impl From<&NextHop> for Hop {
    #[inline(always)]
    fn from(nh: &NextHop) -> Self {
        Hop {
            port: nh.port,
            mac: nh.mac,
        }
    }
}

impl Egress {
    /// The egress port.
    pub fn port(&self) -> u16 {
        match self {
            Egress::Bridge(p) => *p,
            Egress::Route(nh) => nh.port,
        }
    }
}

longhaul_dataplane::counters! {
    /// The baseline's own counters (drops are counted by the engine, by reason; anomalies in
    /// [`Forwarding::anomalies`]).
    #[derive(Copy)]
    pub struct BaselineStats: "baseline" {
        /// Packets routed by the LPM tables.
        pub routed: u64,
        /// Packets bridged by the L2 table.
        pub bridged: u64,
        /// Anomalous frames kept (forwarded) by policy.
        pub anomalies_forwarded: u64,
        /// Packets passed between the ports of a `[[wire]]` pair.
        pub wired: u64,
        /// Routed packets addressed to one of the switch's own addresses (not answered: the
        /// appliance terminates only ARP / ND), dropped as `no_route`.
        pub to_local: u64,
    }
}

longhaul_dataplane::counters! {
    /// The baseline's ECMP counters (shown when the config has ECMP groups).
    #[derive(Copy)]
    pub struct EcmpStats: "baseline" {
        /// Lookups that hit an ECMP group (the member chosen by the hash).
        pub ecmp_routed: u64,
        /// Of those, the ones hashed among the members still up because a member's link is
        /// down ([`Forwarding::set_link`]).
        pub ecmp_failover: u64,
    }
}

/// The index of the `k`-th set bit of `mask` (from bit 0), `None` when it has fewer.
fn nth_set_bit(mask: u16, k: u32) -> Option<usize> {
    let mut m = mask;
    for _ in 0..k {
        m &= m.checked_sub(1)?;
    }
    (m != 0).then(|| m.trailing_zeros() as usize)
}

/// The forwarding state and stages of the baseline switch.
pub struct Forwarding {
    parse_opts: ParseOptions,
    parser: ParserConfig,
    trust: Trust,
    default_class: u8,
    dscp_map: [u8; 64],
    pcp_map: [u8; 8],
    /// Port id -> MAC, for the source MAC of routed packets.
    port_macs: Vec<Option<[u8; 6]>>,
    /// Destination MAC (as [`mac_key`]) -> port.
    l2: ExactTable<u64, u16>,
    /// Port id -> the port's MAC as an L2 key (`u64::MAX`, never a MAC key, for no port).
    port_mac_keys: Vec<u64>,
    /// L2 entries whose MAC is one of the switch's port MACs. While there are none, a frame sent
    /// to one of the switch's port MACs (every routed frame: its ingress port's, or another
    /// port's) skips the L2 lookup, which would miss.
    l2_port_macs: u32,
    /// The least and greatest of `port_mac_keys` (the MAC keys of the ports that have one;
    /// `lo > hi` when none has): a destination outside the range is no port's MAC, so a bridged
    /// frame pays two compares before its lookup, not a scan of the ports.
    port_mac_range: (u64, u64),
    v4: Lpm<u32, RouteEntry>,
    v6: Lpm<u128, RouteEntry>,
    /// The configured ECMP groups (built once; a replaced one is retired, never reused).
    ecmp_groups: Vec<EcmpGroup>,
    /// `switch.ecmp_seed`.
    ecmp_seed: u64,
    /// Ports whose link is down ([`Forwarding::set_link`]).
    down: Vec<u16>,
    /// Port id -> its `[[wire]]` peer ([`NO_PEER`]: routed).
    wire_peer: Vec<u16>,
    pub neigh: Neighbors,
    pub stats: BaselineStats,
    pub ecmp: EcmpStats,
    /// Anomalies seen by the parser, by reason, whether dropped or kept by policy (named
    /// `baseline.anomaly.<reason>` when not zero).
    pub anomalies: DropCounters,
}

impl Forwarding {
    /// Whether `key` is another of the switch's port MACs (a frame sent to the wrong port of
    /// this switch). Out of line: the common frame (to its ingress port's own MAC, or bridged
    /// to a MAC outside the ports' range) does not carry this test's code; inlined, it moved
    /// the code generation of the stages it is inlined into (the Reflex ESW's frame took 42
    /// more instructions).
    /// The range's ends are port MACs (the least and the greatest), so a key at either end
    /// (with two ports, every other port's MAC) answers without the scan.
    #[inline(never)]
    fn another_port_mac(&self, key: u64) -> bool {
        let (lo, hi) = self.port_mac_range;
        (lo..=hi).contains(&key) && (key == lo || key == hi || self.port_mac_keys.contains(&key))
    }

    /// Build the tables from a validated config.
    pub fn new(cfg: &Config) -> Self {
        let max_id = cfg.ports.iter().map(|p| p.id).max().unwrap_or(0) as usize;
        let mut port_macs = vec![None; max_id + 1];
        for p in &cfg.ports {
            port_macs[p.id as usize] = Some(p.mac);
        }
        let mut l2 = ExactTable::new(
            cfg.l2.len() + TABLE_HEADROOM,
            TableConfig {
                when_full: WhenFull::Refuse,
                idle_timeout: None,
            },
        );
        let port_mac_keys: Vec<u64> = port_macs
            .iter()
            .map(|m| m.as_ref().map_or(u64::MAX, mac_key))
            .collect();
        let port_mac_range = port_mac_keys
            .iter()
            .filter(|&&k| k != u64::MAX)
            .fold((u64::MAX, 0), |(lo, hi), &k| (lo.min(k), hi.max(k)));
        let mut l2_port_macs = 0;
        for e in &cfg.l2 {
            // Cannot fail: capacity covers every configured entry (duplicates were refused).
            let _ = l2.insert(mac_key(&e.mac), e.port, 0);
            l2_port_macs += port_mac_keys.contains(&mac_key(&e.mac)) as u32;
        }
        let n4 = cfg
            .routes
            .iter()
            .filter(|r| matches!(r.prefix, IpPrefix::V4 { .. }))
            .count();
        let n6 = cfg.routes.len() - n4;
        // Connected subnets first, so a configured route for the same prefix replaces one.
        let connected = cfg
            .ports
            .iter()
            .flat_map(|p| p.addresses.iter().map(move |a| (a.subnet(), p.id)));
        let mut ecmp_groups = Vec::new();
        let mut configured = Vec::with_capacity(cfg.routes.len());
        for r in &cfg.routes {
            let entry = if r.is_group() {
                let mut g = EcmpGroup {
                    prefix: r.prefix,
                    len: 0,
                    members: [NextHop::from_config(&r.hops[0]); MAX_ECMP_MEMBERS],
                    packets: [0; MAX_ECMP_MEMBERS],
                    live: 0,
                    retired: false,
                };
                for (slot, h) in g.members.iter_mut().zip(&r.hops) {
                    *slot = NextHop::from_config(h);
                    g.len += 1;
                }
                g.live = g.all();
                ecmp_groups.push(g);
                RouteEntry::Group(ecmp_groups.len() as u32 - 1)
            } else if let Some(h) = r.hops.first() {
                RouteEntry::One(NextHop::from_config(h))
            } else {
                continue;
            };
            configured.push((r.prefix, entry));
        }
        let n_conn = cfg.ports.iter().map(|p| p.addresses.len()).sum::<usize>();
        let mut v4 = Lpm::new(n4 + n_conn + TABLE_HEADROOM);
        let mut v6 = Lpm::new(n6 + n_conn + TABLE_HEADROOM);
        let all = connected
            .map(|(prefix, port)| {
                let nh = NextHop {
                    port,
                    mac: [0; 6],
                    via: Via::Direct,
                };
                (prefix, RouteEntry::One(nh))
            })
            .chain(configured);
        for (prefix, nh) in all {
            // Cannot fail: validated prefixes, capacity covers every configured route.
            let _ = match prefix {
                IpPrefix::V4 { addr, len } => v4.insert(addr, len, nh),
                IpPrefix::V6 { addr, len } => v6.insert(addr, len, nh),
            };
        }
        let mut wire_peer = vec![NO_PEER; max_id + 1];
        for &(a, b) in &cfg.wire {
            wire_peer[a as usize] = b;
            wire_peer[b as usize] = a;
        }
        let control_class = class_of(cfg.qos.trust, &cfg.qos.dscp_map, cfg.qos.default_class, 48);
        Forwarding {
            parse_opts: ParseOptions {
                max_vlan_tags: cfg.parser.max_vlan_tags,
                verify_ipv4_checksum: cfg.parser.verify_ipv4_checksum,
                ..ParseOptions::default()
            },
            parser: cfg.parser.clone(),
            trust: cfg.qos.trust,
            default_class: cfg.qos.default_class,
            dscp_map: cfg.qos.dscp_map,
            pcp_map: cfg.qos.pcp_map,
            port_macs,
            l2,
            port_mac_keys,
            l2_port_macs,
            port_mac_range,
            v4,
            v6,
            ecmp_groups,
            ecmp_seed: cfg.switch.ecmp_seed,
            down: Vec::new(),
            wire_peer,
            neigh: Neighbors::new(cfg, control_class),
            stats: BaselineStats::default(),
            ecmp: EcmpStats::default(),
            anomalies: DropCounters::default(),
        }
    }

    /// The `[[wire]]` peer of `port`, `None` for a routed port.
    #[inline(always)]
    pub fn wire_peer(&self, port: u16) -> Option<u16> {
        match self.wire_peer.get(port as usize) {
            Some(&p) if p != NO_PEER => Some(p),
            _ => None,
        }
    }

    /// The (source, destination) MACs of a packet this switch generates in reply to `trigger`
    /// (received on `in_port`): on a wire port, the trigger's swapped (the reply looks like it
    /// comes from the router the trigger was sent to, and goes back out of `in_port`, see
    /// [`Forwarding::route_generated`]); on a routed port, the port's own MAC twice (the reply
    /// is then routed like a received packet, which rewrites both).
    pub fn reply_macs(&self, in_port: u16, trigger: &[u8]) -> Option<([u8; 6], [u8; 6])> {
        if self.wire_peer(in_port).is_some() {
            let dst = *trigger.get(6..12)?.first_chunk::<6>()?;
            let src = *trigger.first_chunk::<6>()?;
            return Some((src, dst));
        }
        let m = self.port_macs.get(in_port as usize).copied().flatten()?;
        Some((m, m))
    }

    /// The first ingress stage of every pipeline: parse the frame and record the result in its
    /// metadata. The result lives in the caller's frame and the later stages borrow it
    /// ([`Forwarding::admit_stage`], [`Forwarding::lookup_stage`]): returning the
    /// 32-byte struct inside a `Result` copies it through the stack and stalls every
    /// mechanism's ingress on store forwarding.
    #[inline(always)]
    pub fn parse_meta<B: PacketBuf>(&self, pkt: &mut B) -> Parsed {
        let p = parse(pkt.data(), &self.parse_opts);
        // meta.flow_hash is left 0 ("not computed"): no baseline stage reads it, and hashing
        // every packet costs ~8% of the forwarding rate.
        p.apply_to_meta(pkt.meta_mut());
        p
    }

    /// The stage after [`Forwarding::parse_meta`]:
    /// - on a wire port: anomalies counted, nothing dropped (`Ok(false)`: not routable, the
    ///   lookup bridges it to the pair's other port);
    /// - on a routed port: ARP / ND for the port's addresses taken by the neighbour stage
    ///   (`Err(action)`: answered in place, or consumed), then the anomaly policy
    ///   (`Err(Drop)`); `Ok(routable)`: whether the L3 header may be used for routing.
    #[inline(always)]
    pub fn admit_stage<P: BufPool>(
        &mut self,
        ctx: &mut Ctx<'_, P>,
        pkt: &mut P::Buf,
        p: &Parsed,
    ) -> Result<bool, Action> {
        let port = pkt.meta().ingress_port;
        if self.wire_peer(port).is_some() {
            // ARP is not an anomaly to a wire (the parser calls every non-IP EtherType unknown).
            let arp = p.l3 == L3Kind::Other
                && p.ethertype == longhaul_dataplane::wire::ethernet::ETHERTYPE_ARP;
            if let Some(a) = p.anomaly.filter(|_| !arp) {
                self.anomalies.inc(a);
                self.stats.anomalies_forwarded += 1;
            }
            return Ok(false);
        }
        if self.neigh.active() && matches!(p.l3, L3Kind::Other | L3Kind::V6) {
            if let Some(a) = self.neigh.ingress(ctx, pkt, p, port) {
                return Err(a);
            }
        }
        self.policy(p).map_err(Action::Drop)
    }

    /// The anomaly policy over a parse result: `Ok(routable)` or the drop reason.
    #[inline(always)]
    fn policy(&mut self, p: &Parsed) -> Result<bool, DropReason> {
        let Some(a) = p.anomaly else {
            return Ok(p.is_ip());
        };
        self.anomalies.inc(a);
        let (policy, l3_usable) = match a {
            DropReason::BadLength => (self.parser.on_bad_length, false),
            DropReason::UnknownEtherType => (self.parser.on_unknown_ethertype, false),
            DropReason::VlanStack => (self.parser.on_vlan_stack, false),
            DropReason::Ipv4Options => (self.parser.on_ipv4_options, true),
            DropReason::Ipv4Fragment => (self.parser.on_ipv4_fragment, true),
            DropReason::BadIpChecksum => (self.parser.on_bad_ip_checksum, true),
            // Truncated, BadIpHeader and anything else: nothing safe to forward on.
            _ => (Policy::Drop, false),
        };
        match policy {
            Policy::Drop => Err(a),
            Policy::Forward => {
                self.stats.anomalies_forwarded += 1;
                Ok(l3_usable && p.is_ip())
            }
        }
    }

    /// The class of a packet this switch generates with `dscp` (CNPs): the DSCP map when
    /// trusting DSCP, the default class otherwise.
    pub fn class_of_dscp(&self, dscp: u8) -> u8 {
        class_of(self.trust, &self.dscp_map, self.default_class, dscp)
    }

    /// Traffic class from DSCP or PCP.
    #[inline(always)]
    pub fn classify(&self, p: &Parsed) -> u8 {
        let c = match self.trust {
            Trust::Dscp if p.is_ip() => self.dscp_map[(p.dscp & 63) as usize],
            Trust::Pcp => p
                .outer_pcp
                .map_or(self.default_class, |pcp| self.pcp_map[(pcp & 7) as usize]),
            _ => self.default_class,
        };
        c.min(NUM_CLASSES as u8 - 1)
    }

    /// The forwarding decision without touching the frame: a wire port's peer; else the L2
    /// table by destination MAC, then (when `routable`) LPM on the destination IP and, for a
    /// route through a gateway or to a connected subnet, the neighbour's MAC (soliciting it
    /// when unknown: `Err(NeighborUnresolved)`).
    #[inline(always)]
    pub fn lookup_stage<P: BufPool>(
        &mut self,
        ctx: &mut Ctx<'_, P>,
        pkt: &P::Buf,
        p: &Parsed,
        routable: bool,
    ) -> Result<Egress, DropReason> {
        self.lookup_stage_with::<P, false>(ctx, pkt, p, routable)
    }

    /// [`Forwarding::lookup_stage`]; with `PORT_MAC_ENDS`, a destination MAC equal to the least
    /// or the greatest port MAC (with two ports, every other port's MAC) is found to be the
    /// switch's own by two compares inline, before the out-of-line
    /// [`Forwarding::another_port_mac`] (the same answer: the ends are port MACs). For a
    /// pipeline whose frames commonly come to another of its ports' MACs (MLCC's WAN -> DC
    /// frames in perf/dpdk-mlcc.toml): the call and the registers saved around it cost about
    /// 50 instructions a frame there; in the other pipelines' ingress the same two compares,
    /// never reached by their frames, move the code generation (Reflex's frame +39
    /// instructions), so they keep `false`.
    #[inline(always)]
    pub fn lookup_stage_with<P: BufPool, const PORT_MAC_ENDS: bool>(
        &mut self,
        ctx: &mut Ctx<'_, P>,
        pkt: &P::Buf,
        p: &Parsed,
        routable: bool,
    ) -> Result<Egress, DropReason> {
        let in_port = pkt.meta().ingress_port;
        if let Some(peer) = self.wire_peer(in_port) {
            return Ok(Egress::Bridge(peer));
        }
        let now = ctx.now;
        let frame = pkt.data();
        if let Some(dst) = frame.first_chunk::<6>() {
            let key = mac_key(dst);
            // The ingress port's own MAC first (every routed frame of a router), then, within
            // the ports' range, any other port's (a frame sent to another of this switch's
            // ports: routed as before, without the lookup that would miss).
            let (lo, hi) = self.port_mac_range;
            let to_me = self.l2_port_macs == 0
                && (self.port_mac_keys.get(in_port as usize) == Some(&key)
                    || (PORT_MAC_ENDS && (key == lo || key == hi))
                    || self.another_port_mac(key));
            if !to_me {
                if let Some(&port) = self.l2.lookup(&key, now) {
                    return Ok(Egress::Bridge(port));
                }
            }
        }
        if !routable {
            return Err(DropReason::NoRoute);
        }
        let l3 = p.l3_off as usize;
        let rest = frame.get(l3..).ok_or(DropReason::Truncated)?;
        let (nh, dst) = match p.l3 {
            L3Kind::V4 => {
                // `routable`: the parser checked this header (version, IHL, lengths).
                let ip = ipv4::fixed_header(rest).ok_or(DropReason::Truncated)?;
                let d = ipv4::dst_of(ip);
                let nh = match self.v4.lookup_ref(d) {
                    Some(RouteEntry::One(nh)) if matches!(nh.via, Via::Mac) => {
                        return Ok(Egress::Route(nh.into()))
                    }
                    Some(&RouteEntry::One(nh)) => Some(nh),
                    Some(&RouteEntry::Group(g)) => {
                        let src = map_v4(ipv4::src_of(ip));
                        self.ecmp_member(g, src, map_v4(d), p, ipv4::is_fragment_fixed(ip))
                    }
                    None => None,
                };
                (nh, map_v4(d))
            }
            L3Kind::V6 => {
                let ip = Ipv6Packet::new_checked(rest).map_err(|e| e.drop_reason())?;
                let d = ip.dst_u128();
                let nh = match self.v6.lookup_ref(d) {
                    Some(RouteEntry::One(nh)) if matches!(nh.via, Via::Mac) => {
                        return Ok(Egress::Route(nh.into()))
                    }
                    Some(&RouteEntry::One(nh)) => Some(nh),
                    Some(&RouteEntry::Group(g)) => self.ecmp_member(g, ip.src_u128(), d, p, false),
                    None => None,
                };
                (nh, d)
            }
            _ => (None, 0),
        };
        let mut nh = nh.ok_or(DropReason::NoRoute)?;
        let target = match nh.via {
            Via::Mac => return Ok(Egress::Route(nh.into())),
            Via::Gateway(ip) => ip,
            Via::Direct => {
                if self.neigh.is_own(nh.port, dst) {
                    self.stats.to_local += 1;
                    return Err(DropReason::NoRoute);
                }
                dst
            }
        };
        nh.mac = self.neigh.resolve(ctx, nh.port, target)?;
        Ok(Egress::Route(nh.into()))
    }

    /// The member of ECMP group `g` for a packet from `src` to `dst` (IPv4-mapped for IPv4):
    /// the one the seeded hash of its 5-tuple selects (ports only for TCP / UDP and not for a
    /// fragment, so every fragment of a datagram takes one member), counted.
    #[inline]
    fn ecmp_member(
        &mut self,
        g: u32,
        src: u128,
        dst: u128,
        p: &Parsed,
        fragment: bool,
    ) -> Option<NextHop> {
        let grp = self.ecmp_groups.get_mut(g as usize)?;
        let (sport, dport) = if p.l4_off != 0 && !fragment {
            (p.src_port, p.dst_port)
        } else {
            (0, 0)
        };
        let h = ecmp::hash5(src, dst, p.proto, sport, dport, self.ecmp_seed);
        let i = if grp.live == grp.all() {
            ecmp::pick(h, u32::from(grp.len)) as usize
        } else {
            // A member's link is down: the hash picks among the others (no member up: no
            // route).
            let k = ecmp::pick(h, grp.live.count_ones().max(1));
            self.ecmp.ecmp_failover += 1;
            nth_set_bit(grp.live, k)?
        };
        let nh = *grp.members.get(i)?;
        if let Some(c) = grp.packets.get_mut(i) {
            *c += 1;
        }
        self.ecmp.ecmp_routed += 1;
        Some(nh)
    }

    /// The link of port `port` (its id) went down (`up` false) or came back: ECMP groups hash
    /// among their members whose port is up, as the HPCC simulator's `TakeDownLink` recomputes
    /// every route (`scratch/third.cc`) and a switch's fast failover takes a dead member out
    /// of its groups. A route of one next hop is left as it is.
    pub fn set_link(&mut self, port: u16, up: bool) {
        self.down.retain(|&p| p != port);
        if !up {
            self.down.push(port);
        }
        for g in &mut self.ecmp_groups {
            let dead = g
                .members()
                .iter()
                .enumerate()
                .filter(|(_, m)| self.down.contains(&m.port))
                .fold(0u16, |d, (i, _)| d | 1 << i);
            g.live = g.all() & !dead;
        }
    }

    /// The ECMP groups the config built (a retired one was replaced or deleted since).
    pub fn ecmp_groups(&self) -> &[EcmpGroup] {
        &self.ecmp_groups
    }

    /// Carry out a decision of [`Forwarding::lookup_stage`]: set `meta.egress_port`; for a route,
    /// decrement the TTL / hop limit (IPv4 checksum updated incrementally) and rewrite the MACs.
    #[inline(always)]
    pub fn apply_stage<B: PacketBuf>(
        &mut self,
        pkt: &mut B,
        p: &Parsed,
        e: Egress,
    ) -> Result<(), DropReason> {
        let nh = match e {
            Egress::Bridge(port) if self.wire_peer(port).is_some() => {
                self.stats.wired += 1;
                pkt.meta_mut().egress_port = port;
                return Ok(());
            }
            Egress::Bridge(port) => {
                self.stats.bridged += 1;
                pkt.meta_mut().egress_port = port;
                return Ok(());
            }
            Egress::Route(nh) => nh,
        };
        let src = self
            .port_macs
            .get(nh.port as usize)
            .copied()
            .flatten()
            .ok_or(DropReason::BadPort)?;
        let l3 = p.l3_off as usize;
        let frame = pkt.data_mut();
        let rest = frame.get_mut(l3..).ok_or(DropReason::Truncated)?;
        match p.l3 {
            L3Kind::V4 => {
                // Looked up by `lookup_stage`: a header the parser checked.
                let ip = ipv4::fixed_header_mut(rest).ok_or(DropReason::Truncated)?;
                ipv4::decrement_ttl_fixed(ip).map_err(|e| e.drop_reason())?;
            }
            L3Kind::V6 => {
                let mut ip = Ipv6Packet::new_checked(rest).map_err(|e| e.drop_reason())?;
                ip.decrement_hop_limit().map_err(|e| e.drop_reason())?;
            }
            _ => return Err(DropReason::NoRoute),
        }
        // The parser saw at least an Ethernet header, so the frame holds 12 bytes.
        frame[0..6].copy_from_slice(&nh.mac);
        frame[6..12].copy_from_slice(&src);
        self.stats.routed += 1;
        pkt.meta_mut().egress_port = nh.port;
        Ok(())
    }

    /// Send a packet this switch generated in reply to one received on `meta.ingress_port` (a
    /// CNP, a pseudo-ACK, a Switch-INT, a NAK; built with [`Forwarding::reply_macs`]): on a wire
    /// port, back out of that port unchanged; on a routed port, routed like any received packet
    /// (parse, look up, rewrite). `false` (nothing to send) when it has no route.
    pub fn route_generated<P: BufPool>(&mut self, ctx: &mut Ctx<'_, P>, g: &mut P::Buf) -> bool {
        let p = parse(g.data(), &self.parse_opts);
        self.route_parsed(ctx, g, &p)
    }

    /// [`Forwarding::route_generated`] for a UDP frame a builder has just written (untagged,
    /// IPv4 without options (`v4`) or IPv6, see [`parse_built_udp`]): its parse result is read at
    /// the builder's offsets instead of walking and checking the headers again. The lookup and
    /// the rewrite are the same.
    #[inline]
    pub fn route_built_udp<P: BufPool>(
        &mut self,
        ctx: &mut Ctx<'_, P>,
        g: &mut P::Buf,
        v4: bool,
    ) -> bool {
        let p = parse_built_udp(g.data(), v4, &self.parse_opts);
        self.route_parsed(ctx, g, &p)
    }

    /// [`Forwarding::route_generated`] with the frame's parse result `p`.
    #[inline(always)]
    fn route_parsed<P: BufPool>(
        &mut self,
        ctx: &mut Ctx<'_, P>,
        g: &mut P::Buf,
        p: &Parsed,
    ) -> bool {
        p.apply_to_meta(g.meta_mut());
        let in_port = g.meta().ingress_port;
        if self.wire_peer(in_port).is_some() {
            g.meta_mut().egress_port = in_port;
            return true;
        }
        let Ok(routable) = self.policy(p) else {
            return false;
        };
        let Ok(e) = self.lookup_stage(ctx, g, p, routable) else {
            return false;
        };
        self.apply_stage(g, p, e).is_ok()
    }

    /// The whole baseline ingress for one packet: the skeleton ([`ingress::ingress`]) with no
    /// stage at its insertion points.
    #[inline]
    pub fn ingress<P: BufPool>(&mut self, ctx: &mut Ctx<'_, P>, pkt: &mut P::Buf) -> Action {
        ingress::ingress(self, ctx, pkt)
    }

    /// The baseline's counters by name (metrics, replay summary).
    pub fn counters(&self, out: &mut dyn FnMut(&'static str, u64)) {
        self.stats.for_each(out);
        if !self.ecmp_groups.is_empty() {
            self.ecmp.for_each(out);
            let widest = self.ecmp_groups.iter().map(|g| g.len).max().unwrap_or(0);
            for (i, name) in ECMP_MEMBER_NAMES.iter().enumerate().take(widest as usize) {
                let n = self.ecmp_groups.iter().filter_map(|g| g.packets().get(i));
                out(name, n.sum());
            }
        }
        self.neigh.counters(out);
        for r in DropReason::ALL {
            let v = self.anomalies.get(r);
            if v != 0 {
                out(anomaly_name(r), v);
            }
        }
    }

    /// Table counters by name: `l2`, `routes_v4`, `routes_v6`.
    pub fn tables(&self, out: &mut dyn FnMut(&'static str, TableCounters)) {
        let l2 = self.l2.stats();
        out(
            "l2",
            TableCounters {
                hits: l2.hits,
                misses: l2.misses,
                entries: self.l2.len() as u64,
                capacity: self.l2.capacity() as u64,
                full_events: l2.full_events,
            },
        );
        out("routes_v4", lpm_counters(&self.v4));
        out("routes_v6", lpm_counters(&self.v6));
        out("neighbors", self.neigh.table());
    }

    /// Static L2 entries (for listing).
    pub fn l2(&self) -> &ExactTable<u64, u16> {
        &self.l2
    }
}

/// The class of DSCP `dscp` under `trust` (the default class unless trusting DSCP).
fn class_of(trust: Trust, dscp_map: &[u8; 64], default_class: u8, dscp: u8) -> u8 {
    let c = match trust {
        Trust::Dscp => dscp_map[(dscp & 63) as usize],
        _ => default_class,
    };
    c.min(NUM_CLASSES as u8 - 1)
}

fn lpm_counters<A: longhaul_dataplane::asic::lpm::LpmAddr>(
    t: &Lpm<A, RouteEntry>,
) -> TableCounters {
    let s = t.stats();
    TableCounters {
        hits: s.hits,
        misses: s.misses,
        entries: t.len() as u64,
        capacity: t.capacity() as u64,
        full_events: s.full_events,
    }
}

/// `baseline.anomaly.<reason>`: a static name per reason, so counters never allocate.
fn anomaly_name(r: DropReason) -> &'static str {
    match r {
        DropReason::Truncated => "baseline.anomaly.truncated",
        DropReason::BadLength => "baseline.anomaly.bad_length",
        DropReason::UnknownEtherType => "baseline.anomaly.unknown_ethertype",
        DropReason::VlanStack => "baseline.anomaly.vlan_stack",
        DropReason::Ipv4Options => "baseline.anomaly.ipv4_options",
        DropReason::Ipv4Fragment => "baseline.anomaly.ipv4_fragment",
        DropReason::BadIpChecksum => "baseline.anomaly.bad_ip_checksum",
        DropReason::BadIpHeader => "baseline.anomaly.bad_ip_header",
        _ => "baseline.anomaly.other",
    }
}

/// Control commands of the baseline's tables (from the control plane: API, reload).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BaselineCommand {
    /// Insert or replace a static MAC entry.
    L2Insert {
        mac: [u8; 6],
        port: u16,
    },
    L2Delete {
        mac: [u8; 6],
    },
    /// Insert or replace a route with one next hop (replacing an ECMP group retires it; groups
    /// come only from the config: the management API refuses to insert one, a reload that
    /// changes one rebuilds the switch).
    RouteInsert {
        prefix: IpPrefix,
        next_hop: NextHop,
    },
    RouteDelete {
        prefix: IpPrefix,
    },
    /// Set a neighbour's MAC (learned: confirmed now; or static), or remove it (`mac: None`).
    NeighborSet {
        port: u16,
        /// IPv4-mapped for IPv4.
        ip: u128,
        mac: Option<[u8; 6]>,
        is_static: bool,
    },
}

impl Forwarding {
    /// Apply a table command. Refused: a table full, an unknown entry to delete, a prefix with
    /// host bits set, a port that does not exist.
    pub fn command(&mut self, now: u64, cmd: BaselineCommand) -> Result<(), &'static str> {
        let port_ok = |port: u16| {
            self.port_macs
                .get(port as usize)
                .is_some_and(|m| m.is_some())
        };
        match cmd {
            BaselineCommand::L2Insert { mac, port } => {
                if !port_ok(port) {
                    return Err("no such port");
                }
                let key = mac_key(&mac);
                let new = self.l2.peek(&key).is_none();
                self.l2
                    .insert(key, port, now)
                    .map_err(|_| "l2 table full")?;
                self.l2_port_macs += (new && self.port_mac_keys.contains(&key)) as u32;
                Ok(())
            }
            BaselineCommand::L2Delete { mac } => {
                let key = mac_key(&mac);
                self.l2.remove(&key).ok_or("no such l2 entry")?;
                self.l2_port_macs -= self.port_mac_keys.contains(&key) as u32;
                Ok(())
            }
            BaselineCommand::RouteInsert { prefix, next_hop } => {
                if !port_ok(next_hop.port) {
                    return Err("no such port");
                }
                let e = RouteEntry::One(next_hop);
                let r = match prefix {
                    IpPrefix::V4 { addr, len } => self.v4.insert(addr, len, e),
                    IpPrefix::V6 { addr, len } => self.v6.insert(addr, len, e),
                };
                let old = r.map_err(|_| "route refused (table full or bad prefix)")?;
                self.retire(old);
                Ok(())
            }
            BaselineCommand::RouteDelete { prefix } => {
                let r = match prefix {
                    IpPrefix::V4 { addr, len } => self.v4.remove(addr, len),
                    IpPrefix::V6 { addr, len } => self.v6.remove(addr, len),
                };
                let old = r.ok_or("no such route")?;
                self.retire(Some(old));
                Ok(())
            }
            BaselineCommand::NeighborSet {
                port,
                ip,
                mac,
                is_static,
            } => self.neigh.set(now, (port, ip), mac, is_static),
        }
    }
}

impl Forwarding {
    /// Mark the group a removed or replaced LPM entry pointed to as retired.
    fn retire(&mut self, old: Option<RouteEntry>) {
        if let Some(RouteEntry::Group(g)) = old {
            if let Some(g) = self.ecmp_groups.get_mut(g as usize) {
                g.retired = true;
            }
        }
    }
}

/// The baseline pipeline: [`Forwarding`] on ingress; on egress the INT stage when `[int]` is
/// configured ([`int::IntStage`]), nothing otherwise.
pub struct Baseline {
    pub fwd: Forwarding,
    pub int: Option<int::IntStage>,
}

impl Baseline {
    pub fn new(cfg: &Config) -> Self {
        Baseline {
            fwd: Forwarding::new(cfg),
            int: int::IntStage::from_config(cfg),
        }
    }
}

impl<P: BufPool> Pipeline<P> for Baseline {
    fn on_link(&mut self, port: u16, up: bool) {
        self.fwd.set_link(port, up);
    }

    type Command = BaselineCommand;
    // No ingress decision reads the traffic manager or holds packets: the engine may run the
    // whole burst through ingress before enqueueing it.
    const BURST_INGRESS: bool = true;

    fn command(&mut self, ctx: &mut Ctx<'_, P>, cmd: BaselineCommand) -> Result<(), &'static str> {
        self.fwd.command(ctx.now, cmd)
    }

    fn counters(&self, out: &mut dyn FnMut(&'static str, u64)) {
        self.fwd.counters(out);
        if let Some(i) = &self.int {
            i.counters(out);
        }
    }

    fn tables(&self, out: &mut dyn FnMut(&'static str, TableCounters)) {
        self.fwd.tables(out);
    }

    #[inline]
    fn ingress(&mut self, ctx: &mut Ctx<'_, P>, pkt: &mut P::Buf) -> Action {
        self.fwd.ingress(ctx, pkt)
    }

    #[inline]
    fn egress(&mut self, ctx: &mut Ctx<'_, P>, pkt: &mut P::Buf) -> Action {
        if let Some(i) = self.int.as_mut() {
            i.egress(ctx, pkt);
        }
        Action::Forward
    }

    /// Only INT has egress work.
    #[inline]
    fn egress_active(&self) -> bool {
        self.int.is_some()
    }
}
