//! A flow's path on the idle network, and its standalone FCT: the denominator of the papers'
//! normalized FCT (slowdown).
//!
//! As the HPCC simulator computes them (`scratch/third.cc`: `CalculateRoute`, a breadth-first
//! search from every host through the switches, never through another host; `qp_finish`):
//!
//! - the path: the fewest links from the source host to the destination host; among paths of
//!   as many links (ECMP), the one with the least propagation delay (our tie rule: the
//!   simulator takes the first its search meets, which depends on its node order);
//! - base RTT = 2 x the path's propagation delay + the time one full data frame takes to be
//!   serialized on every link of the path (store and forward at each switch);
//! - standalone FCT = base RTT + the flow's bytes on the wire (every packet's frame, headers
//!   included, telemetry a host agent adds excluded: the simulator leaves INT out) over the
//!   path's slowest link.
//!
//! Where we differ from the simulator, and why: it serializes `packet_payload_size` bytes per
//! hop and counts headers without preamble, IFG and FCS; we count the frame the hosts send with
//! the 24 bytes of preamble, IFG and FCS that every link here serializes ([`wire_time`]), so that
//! a flow alone on an idle network has a slowdown near 1 in our own units. Nothing is
//! emulated: the same value for every variant of a scenario (with or without a mechanism),
//! which is what makes the papers' normalized FCTs comparable across variants.

use crate::host::{data_frame_len, wire_time, WIRE_OVERHEAD};
use crate::scenario::{End, Scenario};
use longhaul_dataplane::time::Nanos;
use std::collections::VecDeque;

/// A host-to-host path on the idle network.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Path {
    /// Links from the source host to the destination host (switches + 1).
    pub links: u32,
    /// One-way propagation delay, the sum of the links' delays.
    pub prop_ns: Nanos,
    /// One full data frame's serialization on every link of the path, summed.
    pub tx_ns: Nanos,
    /// The slowest link's rate.
    pub bottleneck_bps: u64,
}

impl Path {
    /// The base RTT: both directions' propagation and one data frame's store and forward.
    pub fn base_rtt_ns(&self) -> Nanos {
        2 * self.prop_ns + self.tx_ns
    }

    /// The standalone FCT of a `size`-byte message cut into `mtu`-byte packets.
    pub fn standalone_fct_ns(&self, size: u64, mtu: u32) -> Nanos {
        let bits = message_wire_bytes(size, mtu) * 8;
        self.base_rtt_ns() + (bits * 1_000_000_000).div_ceil(self.bottleneck_bps.max(1))
    }
}

/// Bytes a `size`-byte RDMA WRITE takes on the wire: every packet's frame (the first with its
/// RETH) plus the preamble, IFG and FCS.
pub fn message_wire_bytes(size: u64, mtu: u32) -> u64 {
    let mtu = mtu.max(1) as u64;
    let n = size.div_ceil(mtu).max(1);
    let last = size - (n - 1) * mtu;
    let full = data_frame_len(mtu as usize, false) as u64 + WIRE_OVERHEAD;
    // Every packet but the last is full; the first also carries the RETH.
    let mut bytes = (n - 1) * full + data_frame_len(last as usize, false) as u64 + WIRE_OVERHEAD;
    bytes += (data_frame_len(0, true) - data_frame_len(0, false)) as u64;
    bytes
}

/// Every host pair's path: `paths[src][dst]` (`None`: not connected, or `src == dst`).
pub struct Paths {
    paths: Vec<Vec<Option<Path>>>,
}

impl Paths {
    /// Searches the scenario's topology from every host.
    pub fn of(s: &Scenario) -> Paths {
        let node = |e: End| match e {
            End::Host(h) => h,
            End::Switch(i, _) => s.hosts.len() + i,
        };
        let nodes = s.hosts.len() + s.switches.len();
        // Adjacency: (neighbour, delay, rate) per node.
        let mut adj: Vec<Vec<(usize, Nanos, u64)>> = vec![Vec::new(); nodes];
        for l in &s.links {
            let (a, b) = (node(l.a), node(l.b));
            adj[a].push((b, l.delay_ns, l.rate_bps));
            adj[b].push((a, l.delay_ns, l.rate_bps));
        }
        let full = data_frame_len(s.params.mtu as usize, false);
        let paths = (0..s.hosts.len())
            .map(|src| {
                // Breadth-first: per node its distance in links and the best (propagation,
                // serialization, bottleneck) among shortest paths.
                let mut best: Vec<Option<(u32, Nanos, Nanos, u64)>> = vec![None; nodes];
                best[src] = Some((0, 0, 0, u64::MAX));
                let mut q = VecDeque::from([src]);
                while let Some(n) = q.pop_front() {
                    let Some((d, prop, tx, bw)) = best[n] else {
                        continue;
                    };
                    // Only the source and switches forward (no path through another host).
                    if n != src && n < s.hosts.len() {
                        continue;
                    }
                    for &(m, delay, rate) in &adj[n] {
                        let cand = (
                            d + 1,
                            prop + delay,
                            tx + wire_time(full, rate),
                            bw.min(rate),
                        );
                        match best[m] {
                            None => {
                                best[m] = Some(cand);
                                q.push_back(m);
                            }
                            Some(b) if b.0 == cand.0 && (cand.1, cand.2) < (b.1, b.2) => {
                                best[m] = Some(cand);
                            }
                            _ => {}
                        }
                    }
                }
                (0..s.hosts.len())
                    .map(|dst| {
                        let (links, prop_ns, tx_ns, bottleneck_bps) = best[dst]?;
                        (dst != src).then_some(Path {
                            links,
                            prop_ns,
                            tx_ns,
                            bottleneck_bps,
                        })
                    })
                    .collect()
            })
            .collect();
        Paths { paths }
    }

    pub fn get(&self, src: usize, dst: usize) -> Option<Path> {
        self.paths.get(src)?.get(dst).copied().flatten()
    }

    /// The largest bandwidth-delay product of any host pair (base RTT x bottleneck), bytes:
    /// the window the HPCC simulator's window-based senders start with (`maxBdp`).
    pub fn max_bdp_bytes(&self) -> u64 {
        self.paths
            .iter()
            .flatten()
            .flatten()
            .map(|p| (p.base_rtt_ns() as u128 * p.bottleneck_bps as u128 / 8_000_000_000) as u64)
            .max()
            .unwrap_or(0)
    }
}
