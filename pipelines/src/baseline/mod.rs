//! The baseline: a plain lossless RoCE switch (no paper mechanism), and the stages every other
//! pipeline starts from.
//!
//! Ingress, in order:
//! 1. **parse** (`wire::parse`): offsets into the metadata, the first anomaly found;
//! 2. **anomaly policy**: each anomaly is counted by reason, then dropped or kept by the
//!    configured policy (`[parser.policy]`). Frames too short to switch (`truncated`) and IP
//!    headers that are not IP (`bad_ip_header`) are always dropped;
//! 3. **classify**: traffic class from DSCP or PCP (`[qos] trust`);
//! 4. **L2**: a destination MAC in the static L2 table is bridged unchanged to its port;
//! 5. **L3**: otherwise an IP packet is routed by longest-prefix match on its destination:
//!    TTL / hop limit decremented (IPv4 checksum updated incrementally; the RoCE ICRC masks the
//!    TTL so it stays valid), source MAC = egress port's MAC, destination MAC = the route's next
//!    hop. A TTL of 0 or 1 is dropped (`ttl_expired`), no match is dropped (`no_route`).
//!
//! A kept anomaly whose L3 header is still usable (IPv4 options, fragments, a bad IPv4 checksum)
//! is routed like any packet (a bad checksum stays bad: we do not repair what we did not break);
//! one whose L3 cannot be trusted (bad length, unknown EtherType, VLAN stack) is only bridged by
//! the L2 table, and dropped as `no_route` when its MAC is unknown.
//!
//! The traffic manager behind it does the rest: DSCP class queues, RED/ECN, PFC for the lossless
//! classes, shaping at port rate.

pub mod control;
pub mod int;
pub mod mechanism;

use longhaul_control::config::{Config, IpPrefix, ParserConfig, Policy, Trust};
use longhaul_dataplane::asic::lpm::Lpm;
use longhaul_dataplane::asic::table::{ExactTable, TableConfig, WhenFull};
use longhaul_dataplane::counters::{DropCounters, DropReason};
use longhaul_dataplane::engine::{Action, Ctx, Pipeline, TableCounters};
use longhaul_dataplane::packet::{BufPool, PacketBuf, NUM_CLASSES};
use longhaul_dataplane::wire::ipv4::Ipv4Packet;
use longhaul_dataplane::wire::ipv6::Ipv6Packet;
use longhaul_dataplane::wire::parse::{parse, L3Kind, ParseOptions, Parsed};

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
    pub mac: [u8; 6],
}

/// A forwarding decision.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Egress {
    /// The L2 table: out of this port, unchanged.
    Bridge(u16),
    /// A route: out of its port with TTL - 1 and the next hop's MAC.
    Route(NextHop),
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

/// The baseline's own counters (drops are counted by the engine, by reason).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BaselineStats {
    /// Anomalies seen by the parser, by reason, whether dropped or kept by policy.
    pub anomalies: DropCounters,
    /// Anomalous frames kept (forwarded) by policy.
    pub anomalies_forwarded: u64,
    /// Packets bridged by the L2 table.
    pub bridged: u64,
    /// Packets routed by the LPM tables.
    pub routed: u64,
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
    /// to its ingress port's own MAC (every routed frame) skips the L2 lookup, which would miss.
    l2_port_macs: u32,
    v4: Lpm<u32, NextHop>,
    v6: Lpm<u128, NextHop>,
    pub stats: BaselineStats,
}

impl Forwarding {
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
        let mut v4 = Lpm::new(n4 + TABLE_HEADROOM);
        let mut v6 = Lpm::new(n6 + TABLE_HEADROOM);
        for r in &cfg.routes {
            let nh = NextHop {
                port: r.port,
                mac: r.next_hop_mac,
            };
            // Cannot fail: validated prefixes, capacity covers every configured route.
            let _ = match r.prefix {
                IpPrefix::V4 { addr, len } => v4.insert(addr, len, nh),
                IpPrefix::V6 { addr, len } => v6.insert(addr, len, nh),
            };
        }
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
            v4,
            v6,
            stats: BaselineStats::default(),
        }
    }

    /// Parse the frame and apply the anomaly policy. `Err` is the drop decision. `Ok(routable)`:
    /// whether the L3 header may be used for routing.
    #[inline(always)]
    pub fn parse_stage<B: PacketBuf>(&mut self, pkt: &mut B) -> Result<(Parsed, bool), DropReason> {
        let p = parse(pkt.data(), &self.parse_opts);
        // meta.flow_hash is left 0 ("not computed"): no baseline stage reads it, and hashing
        // every packet cost ~8% of the forwarding rate (perf/README.md).
        p.apply_to_meta(pkt.meta_mut());
        let Some(a) = p.anomaly else {
            return Ok((p, p.is_ip()));
        };
        self.stats.anomalies.inc(a);
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
                Ok((p, l3_usable && p.is_ip()))
            }
        }
    }

    /// The class of a packet this switch generates with `dscp` (CNPs): the DSCP map when
    /// trusting DSCP, the default class otherwise.
    pub fn class_of_dscp(&self, dscp: u8) -> u8 {
        let c = match self.trust {
            Trust::Dscp => self.dscp_map[(dscp & 63) as usize],
            _ => self.default_class,
        };
        c.min(NUM_CLASSES as u8 - 1)
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

    /// The forwarding decision without touching the frame: L2 table by destination MAC, then
    /// (when `routable`) LPM on the destination IP.
    #[inline(always)]
    pub fn lookup_stage<B: PacketBuf>(
        &mut self,
        now: u64,
        pkt: &B,
        p: &Parsed,
        routable: bool,
    ) -> Result<Egress, DropReason> {
        let frame = pkt.data();
        if let Some(dst) = frame.first_chunk::<6>() {
            let key = mac_key(dst);
            let to_me = self.l2_port_macs == 0
                && self.port_mac_keys.get(pkt.meta().ingress_port as usize) == Some(&key);
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
        let nh = match p.l3 {
            L3Kind::V4 => {
                let ip = Ipv4Packet::new_checked(rest).map_err(|e| e.drop_reason())?;
                self.v4.lookup(u32::from(ip.dst_addr()))
            }
            L3Kind::V6 => {
                let ip = Ipv6Packet::new_checked(rest).map_err(|e| e.drop_reason())?;
                self.v6.lookup(ip.dst_u128())
            }
            _ => None,
        };
        nh.map(Egress::Route).ok_or(DropReason::NoRoute)
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
                let mut ip = Ipv4Packet::new_checked(rest).map_err(|e| e.drop_reason())?;
                ip.decrement_ttl().map_err(|e| e.drop_reason())?;
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

    /// L2 then L3 forwarding: sets `meta.egress_port`, rewrites the frame for routed packets.
    #[inline(always)]
    pub fn forward_stage<B: PacketBuf>(
        &mut self,
        now: u64,
        pkt: &mut B,
        p: &Parsed,
        routable: bool,
    ) -> Result<(), DropReason> {
        let e = self.lookup_stage(now, pkt, p, routable)?;
        self.apply_stage(pkt, p, e)
    }

    /// The stages every mechanism's ingress starts with: parse (anomaly policy), classify
    /// (`meta.class`, `meta.queue` = the class's), look up; the frame is not rewritten yet
    /// ([`Forwarding::apply_stage`] does that).
    #[inline(always)]
    pub fn classify_and_look_up<B: PacketBuf>(
        &mut self,
        now: u64,
        pkt: &mut B,
    ) -> Result<(Parsed, Egress), DropReason> {
        let (p, routable) = self.parse_stage(pkt)?;
        let class = self.classify(&p);
        let m = pkt.meta_mut();
        m.class = class;
        m.queue = longhaul_dataplane::packet::QUEUE_OF_CLASS;
        let e = self.lookup_stage(now, pkt, &p, routable)?;
        Ok((p, e))
    }

    /// Route a packet this switch generated (a CNP, a pseudo-ACK, a Switch-INT: built as if
    /// received on `meta.ingress_port`, addressed to that port's MAC) like any received packet:
    /// parse, look up, rewrite. `false` (nothing to send) when it has no route.
    pub fn route_generated<B: PacketBuf>(&mut self, now: u64, g: &mut B) -> bool {
        let Ok((p, routable)) = self.parse_stage(g) else {
            return false;
        };
        let Ok(e) = self.lookup_stage(now, g, &p, routable) else {
            return false;
        };
        self.apply_stage(g, &p, e).is_ok()
    }

    /// The whole baseline ingress for one packet.
    #[inline]
    pub fn ingress<B: PacketBuf>(&mut self, now: u64, pkt: &mut B) -> Action {
        let (p, routable) = match self.parse_stage(pkt) {
            Ok(x) => x,
            Err(r) => return Action::Drop(r),
        };
        pkt.meta_mut().class = self.classify(&p);
        match self.forward_stage(now, pkt, &p, routable) {
            Ok(()) => Action::Forward,
            Err(r) => Action::Drop(r),
        }
    }

    /// The baseline's counters by name (metrics, replay summary).
    pub fn counters(&self, out: &mut dyn FnMut(&'static str, u64)) {
        let s = &self.stats;
        out("baseline.routed", s.routed);
        out("baseline.bridged", s.bridged);
        out("baseline.anomalies_forwarded", s.anomalies_forwarded);
        for r in DropReason::ALL {
            let v = s.anomalies.get(r);
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
    }

    /// Static L2 entries (for listing).
    pub fn l2(&self) -> &ExactTable<u64, u16> {
        &self.l2
    }
}

fn lpm_counters<A: longhaul_dataplane::asic::lpm::LpmAddr>(t: &Lpm<A, NextHop>) -> TableCounters {
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
    /// Insert or replace a route.
    RouteInsert {
        prefix: IpPrefix,
        next_hop: NextHop,
    },
    RouteDelete {
        prefix: IpPrefix,
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
                let r = match prefix {
                    IpPrefix::V4 { addr, len } => self.v4.insert(addr, len, next_hop),
                    IpPrefix::V6 { addr, len } => self.v6.insert(addr, len, next_hop),
                };
                r.map(|_| ())
                    .map_err(|_| "route refused (table full or bad prefix)")
            }
            BaselineCommand::RouteDelete { prefix } => {
                let r = match prefix {
                    IpPrefix::V4 { addr, len } => self.v4.remove(addr, len),
                    IpPrefix::V6 { addr, len } => self.v6.remove(addr, len),
                };
                r.map(|_| ()).ok_or("no such route")
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
    type Command = BaselineCommand;

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
        self.fwd.ingress(ctx.now, pkt)
    }

    #[inline]
    fn egress(&mut self, ctx: &mut Ctx<'_, P>, pkt: &mut P::Buf) -> Action {
        if let Some(i) = self.int.as_mut() {
            i.egress(ctx, pkt);
        }
        Action::Forward
    }
}
