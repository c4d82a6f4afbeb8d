//! The discrete-event loop: hosts, links and switches on one virtual clock.
//!
//! Each step takes the earliest thing due: a frame arriving at the end of a link, a host's
//! timer or free NIC, or a switch's own next event (a queue that can transmit, a PFC refresh, a
//! pipeline timer). Frames reaching a switch are put on its port at their arrival time, and the
//! switch (the real engine and pipeline of its config) is advanced to that instant; what it
//! transmits travels the link to the next node. A link delivers a frame `wire_time + delay`
//! after its transmission starts (last bit in), and may lose it (seeded). Nothing reads the wall
//! clock, and ties are broken by insertion order, so a scenario and a seed give the same run.

use crate::collective::CollectiveResult;
use crate::host::rnic::NOT_STARTED;
use crate::host::{wire_time, FlowState, FramePool, Host, HostStats};
use crate::pause::{PauseLog, PauseMeter};
use crate::scenario::{End, Scenario};
use crate::traffic::Rng;
use longhaul_dataplane::engine::SwitchSnapshot;
use longhaul_dataplane::time::Nanos;
use longhaul_dataplane::wire::ethernet::is_mac_control;
use longhaul_runtime::{EmulatedSwitch, MechanismSet, Registry};
use std::cmp::Reverse;
use std::collections::binary_heap::PeekMut;
use std::collections::{BinaryHeap, HashMap, VecDeque};

enum Ev {
    Deliver {
        to: End,
        frame: Vec<u8>,
    },
    Wake(usize),
    /// Link `link` fails (`up` false) or comes back (`[[link_failures]]`): the switches at its
    /// ends hear of it.
    Link {
        link: usize,
        up: bool,
    },
}

/// An event's place in the heap: (time, tie-break, sequence, where the event waits). The
/// sequence is unique, so the order is the (time, tie-break, sequence) order alone; the heap
/// sifts these 32-byte keys, not the events. Where: `LANE | lane` for the first frame of a
/// [`Lane`] (the frame waits there), otherwise a slot of `Emulation::events`.
type Key = (Nanos, u64, u64, u32);

/// The bit of a key's last field that says "the first frame of lane `field & !LANE`".
const LANE: u32 = 1 << 31;

/// The frames in flight in one direction of a link. A link delivers them in the order they were
/// sent (each starts after the previous one's last bit), so only the first needs to be in the
/// heap: the heap holds a few keys per link instead of every frame in flight (thousands on a
/// long link), and its sifts get shorter. The order of the events is the same: the keys are
/// the same, and the heap always holds the smallest of each lane. The frames wait here with
/// their keys, in sending order, so that taking the next one reads memory in order (a slab
/// slot per frame, reused last-in first-out, was a cache miss per hop on large scenarios).
struct Lane {
    /// The frames in flight and their keys, in increasing key order; the first key is in the
    /// heap.
    q: VecDeque<(Key, Vec<u8>)>,
    /// Where they arrive.
    to: End,
}

/// A flow of the run: its hosts, size and start, its number on the hosts (the index in the
/// scenario's flows; for the runs alone, the flow's there), and its sender's index in the
/// source host's `senders` (looked up on every step of the runs alone: a search of the host's
/// senders was the loop's largest line on a large scenario).
struct FlowRun {
    src: usize,
    dst: usize,
    size: u64,
    start: Nanos,
    id: usize,
    sender: usize,
    /// When its data had all arrived at the receiver.
    delivered: Option<Nanos>,
    /// Flows (`after`) whose data has still to arrive before it starts.
    waiting: usize,
}

/// A switch at one sampling instant.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SwitchSample {
    /// Per port: bytes queued (all classes), PFC frames sent so far.
    pub ports: Vec<(u64, u64)>,
    pub drops: u64,
    /// Bytes the pipeline holds in its own queues (MLCC's per-flow queues).
    pub held_bytes: u64,
}

/// One flow's result.
#[derive(Clone, Debug, PartialEq)]
pub struct FlowResult {
    pub id: usize,
    pub src: String,
    pub dst: String,
    /// Whether it crosses datacenters (both hosts have a `dc`), `None` when unknown.
    pub inter_dc: Option<bool>,
    pub size_bytes: u64,
    pub start_ns: Nanos,
    /// When the ACK of its last packet reached the sender; `None`: not done by the end.
    pub finish_ns: Option<Nanos>,
    /// When its last packet reached the receiver, every one before it there too (what a
    /// collective's next step waits for); `None`: not by the end.
    pub delivered_ns: Option<Nanos>,
    pub retransmitted: u64,
    pub naks: u64,
    pub timeouts: u64,
    pub cnps: u64,
    /// Bytes the receiver acknowledged by the end.
    pub acked_bytes: u64,
    /// Why it is not done at the end (`None`: done).
    pub state: Option<FlowState>,
}

impl FlowResult {
    pub fn fct_ns(&self) -> Option<Nanos> {
        self.finish_ns.map(|f| f - self.start_ns)
    }
}

/// What a run did.
#[derive(Debug)]
pub struct Outcome {
    pub flows: Vec<FlowResult>,
    /// Virtual time of the last event handled.
    pub end_ns: Nanos,
    /// Events handled (frames delivered, host wakes), and frame hops (link traversals).
    pub events: u64,
    pub hops: u64,
    /// Frames lost on lossy links.
    pub link_drops: u64,
    /// Frames lost on failed links (`[[link_failures]]`).
    pub link_down_drops: u64,
    pub hosts: Vec<(String, HostStats)>,
    /// Every `sample_ns` (when set): the time and each flow's acknowledged bytes.
    pub samples: Vec<(Nanos, Vec<u64>)>,
    /// At the same times: per switch, per port (queued bytes, PFC frames sent so far), and the
    /// switch's drops so far.
    pub switch_samples: Vec<Vec<SwitchSample>>,
    /// Port names per switch (for the series' names).
    pub port_names: Vec<Vec<String>>,
    /// Each switch's name and counters at the end.
    pub switches: Vec<(String, SwitchSnapshot)>,
    /// The PFC pauses every end received ([`crate::pause`]).
    pub pauses: PauseLog,
    /// The collectives' completion ([`crate::collective`]), in the scenario's order.
    pub collectives: Vec<CollectiveResult>,
}

struct Link {
    ends: [End; 2],
    rate_bps: u64,
    delay_ns: Nanos,
    loss: f64,
    /// When it loses every frame (`[[link_failures]]`): [from, until) intervals.
    down: Vec<(Nanos, Nanos)>,
}

pub struct Emulation {
    hosts: Vec<Host>,
    host_wake: Vec<Option<Nanos>>,
    switches: Vec<Box<dyn EmulatedSwitch>>,
    switch_names: Vec<String>,
    links: Vec<Link>,
    /// The link at each end: per host, and per switch per port (`None`: not connected). Looked
    /// up on every hop, so indexed, not hashed.
    host_link: Vec<Option<usize>>,
    port_link: Vec<Vec<Option<usize>>>,
    /// (time, tie-break, seq): events at the same instant are taken in a seeded random order,
    /// so that no host is always first (or last) into a queue because of the order it was
    /// declared in (a phase effect a real network does not have).
    heap: BinaryHeap<Reverse<Key>>,
    /// The events of the heap's keys that are not in a [`Lane`] (host wakes, a frame that
    /// would overtake), by slot; `free` lists the empty slots.
    events: Vec<Option<Ev>>,
    /// Per link direction (`2 * link + (0: from ends[0], 1: from ends[1])`).
    lanes: Vec<Lane>,
    free: Vec<u32>,
    /// Each switch's next event, kept up to date after every put and advance (asking a switch
    /// costs; most are idle most of the time); [`NEVER`]: none. Plain times, not `Option`s: the
    /// loop takes their minimum on every step (a vectorized scan of 8 bytes a switch; as
    /// `Option`s, 16 bytes and a branch each, it was the largest line of the loop on 18
    /// switches).
    sw_next: Vec<Nanos>,
    seq: u64,
    rng: Rng,
    duration_ns: Nanos,
    flows: Vec<FlowRun>,
    stats: (u64, u64, u64, u64),
    sample_ns: Option<Nanos>,
    next_sample: Nanos,
    samples: Vec<(Nanos, Vec<u64>)>,
    switch_samples: Vec<Vec<SwitchSample>>,
    /// One flow at a time (the runs alone): the flow running, and when it is given up.
    sequential: Option<(usize, Nanos)>,
    /// The hosts' frame buffers, recycled (see [`FramePool`]).
    frames: FramePool,
    /// Whether a switch takes its quiet steps in one call ([`Emulation::set_quiet_steps`]).
    quiet_steps: bool,
    /// `--until-done`: past the duration, the run goes on until every flow is done or this
    /// virtual time (the bound) is reached; `None`: it stops at the duration.
    until_done: Option<Nanos>,
    /// Flows done, as last counted (past the duration, with `until_done`).
    all_done: bool,
    /// PFC pause time, read off the frames delivered.
    pauses: PauseMeter,
    /// Per flow (by index in `flows`), the flows that wait for its data (`FlowSpec::after`);
    /// empty one at a time (the runs alone ignore what a flow waits for).
    dependents: Vec<Vec<usize>>,
    /// Flows delivered at a host, as it reported them (reused).
    delivered: Vec<(usize, Nanos)>,
    /// The collectives: name, kind, ranks, bytes, start, their flows' indices.
    collectives: Vec<(crate::collective::CollectiveSpec, std::ops::Range<usize>)>,
}

/// The seed a switch runs with (its ECN coin flips, its random choices): its config's `seed`
/// at the emulation's seed 1, and another one per emulation seed, so that `emulate --seed N`
/// varies the switches as it varies the hosts and the ties (the HPCC simulator's `RngRun`
/// changes its switches' ECN coin flips the same way).
pub fn switch_seed(config_seed: u64, emulation_seed: u64) -> u64 {
    config_seed.wrapping_add(
        emulation_seed
            .wrapping_sub(1)
            .wrapping_mul(0x9e37_79b9_7f4a_7c15),
    )
}

/// "No next event" in `Emulation::sw_next` (no event is ever scheduled that late).
const NEVER: Nanos = Nanos::MAX;

/// Gap between two flows run one after the other.
const SEQUENTIAL_GAP_NS: Nanos = 1_000;

impl Emulation {
    /// Builds the network of `s`: every switch from its config through the registry.
    pub fn new(s: &Scenario, registry: &Registry) -> Result<Self, String> {
        let all = s.all_flows().into_iter().enumerate();
        Self::build(s, registry, all.map(|(id, f)| (f, id)).collect(), false)
    }

    /// The same network running `flows` one at a time, each started (whatever its start time)
    /// when the one before completed, or gave up after the scenario's duration: every flow
    /// alone on the empty network, in one run. Each comes with the flow number it has in the
    /// scenario's run (`Scenario::all_flows`' index), which its QPs and UDP source port are made
    /// from, so that it takes the same path (ECMP hashes the UDP source port); the numbers must
    /// differ. `Outcome::flows` are in the order given, `FlowResult::id` the number.
    pub fn one_at_a_time(
        s: &Scenario,
        registry: &Registry,
        flows: Vec<(crate::scenario::FlowSpec, usize)>,
    ) -> Result<Self, String> {
        Self::build(s, registry, flows, true)
    }

    fn build(
        s: &Scenario,
        registry: &Registry,
        all: Vec<(crate::scenario::FlowSpec, usize)>,
        sequential: bool,
    ) -> Result<Self, String> {
        let mut switches: Vec<Box<dyn EmulatedSwitch>> = Vec::new();
        for sw in &s.switches {
            let p = registry
                .find_pipeline(&sw.config.switch.pipeline)
                .map_err(|e| format!("switch '{}': {e}", sw.name))?;
            let mut cfg = sw.config.clone();
            cfg.switch.seed = switch_seed(cfg.switch.seed, s.params.seed);
            switches.push(p.emulated(registry as &dyn MechanismSet, &cfg));
        }
        let mut attach = HashMap::new();
        let mut links = Vec::new();
        for (i, l) in s.links.iter().enumerate() {
            attach.insert(l.a, i);
            attach.insert(l.b, i);
            links.push(Link {
                ends: [l.a, l.b],
                rate_bps: l.rate_bps,
                delay_ns: l.delay_ns,
                loss: l.loss,
                // The runs alone are on the idle network: no failures.
                down: s
                    .link_failures
                    .iter()
                    .filter(|f| f.link == i && !sequential)
                    .map(|f| (f.from_ns, f.until_ns.unwrap_or(Nanos::MAX)))
                    .collect(),
            });
        }
        let mac_of = |e: End| match e {
            End::Host(h) => s.hosts[h].mac,
            End::Switch(i, p) => switches[i].ports()[p].mac,
        };
        let mut hosts: Vec<Host> = Vec::new();
        for (i, h) in s.hosts.iter().enumerate() {
            let l = &links[attach[&End::Host(i)]];
            let other = if l.ends[0] == End::Host(i) {
                l.ends[1]
            } else {
                l.ends[0]
            };
            let mut params = s.params.clone();
            if sequential {
                // The runs alone: FCTs count from the first data packet either way, so the
                // flows run alone without their connection setup.
                params.connect = crate::scenario::Connect::None;
            }
            let mut host = Host::new(h.clone(), mac_of(other), params);
            for a in &s.params.host_agents {
                let agent = registry
                    .get(&a.name)
                    .and_then(|m| m.host_agent_with(a.params.as_deref()))
                    .ok_or_else(|| format!("no host agent '{}' in this build", a.name))?;
                host.add_agent(agent);
            }
            hosts.push(host);
        }
        let paths = crate::path::Paths::of(s);
        let max_bdp = paths.max_bdp_bytes();
        let mut flows = Vec::new();
        for (k, (f, id)) in all.iter().enumerate() {
            let id = *id;
            let (src_ip, dst_ip) = (s.hosts[f.src].ip, s.hosts[f.dst].ip);
            let remote = match (&s.hosts[f.src].dc, &s.hosts[f.dst].dc) {
                (Some(a), Some(b)) => a != b,
                _ => false,
            };
            let waits = !sequential && !f.after.is_empty();
            let start = match (sequential, k) {
                (false, _) if waits => NOT_STARTED,
                (false, _) => f.start_ns,
                (true, 0) => 0,
                (true, _) => NOT_STARTED,
            };
            let sender = hosts[f.src].add_sender(id, dst_ip, f.size_bytes, start, remote);
            if let Some(p) = paths.get(f.src, f.dst) {
                let (hops, prop) = (p.links.saturating_sub(1), 2 * p.prop_ns);
                hosts[f.src].set_path(sender, hops, prop, p.base_rtt_ns(), max_bdp);
            }
            hosts[f.dst].add_receiver(id, src_ip, f.size_bytes, start, remote);
            flows.push(FlowRun {
                src: f.src,
                dst: f.dst,
                size: f.size_bytes,
                start,
                id,
                sender,
                delivered: None,
                waiting: if waits { f.after.len() } else { 0 },
            });
        }
        let mut dependents = vec![Vec::new(); if sequential { 0 } else { all.len() }];
        for (k, (f, _)) in all.iter().enumerate().filter(|_| !sequential) {
            for &d in &f.after {
                match dependents.get_mut(d) {
                    Some(v) if d != k => v.push(k),
                    _ => {
                        return Err(format!(
                            "flow {k} waits for flow {d}, which is not another flow of the run"
                        ))
                    }
                }
            }
        }
        let collectives = if sequential {
            Vec::new()
        } else {
            s.collectives
                .iter()
                .cloned()
                .zip(s.collective_ranges())
                .collect()
        };
        let n = hosts.len();
        let port_link = (0..switches.len())
            .map(|i| {
                (0..switches[i].ports().len())
                    .map(|p| attach.get(&End::Switch(i, p)).copied())
                    .collect()
            })
            .collect();
        // Lane 2 * link + 0 carries what ends[0] sends, to ends[1]; + 1 the other way.
        let lanes = links
            .iter()
            .flat_map(|l| [l.ends[1], l.ends[0]])
            .map(|to| Lane {
                q: VecDeque::new(),
                to,
            })
            .collect();
        let mut e = Emulation {
            hosts,
            host_wake: vec![None; n],
            switches,
            switch_names: s.switches.iter().map(|s| s.name.clone()).collect(),
            links,
            host_link: (0..n).map(|h| attach.get(&End::Host(h)).copied()).collect(),
            port_link,
            heap: BinaryHeap::new(),
            events: Vec::new(),
            lanes,
            free: Vec::new(),
            sw_next: Vec::new(),
            seq: 0,
            rng: Rng::new(s.params.seed),
            duration_ns: s.params.duration_ns,
            flows,
            stats: (0, 0, 0, 0),
            sample_ns: None,
            next_sample: 0,
            samples: Vec::new(),
            switch_samples: Vec::new(),
            sequential: (sequential && !all.is_empty()).then_some((0, s.params.duration_ns)),
            frames: FramePool::default(),
            quiet_steps: true,
            until_done: None,
            all_done: false,
            pauses: PauseMeter::default(),
            dependents,
            delivered: Vec::new(),
            collectives,
        };
        if let Some(ns) = s.params.sample_ns {
            e.sample_every(ns);
        }
        for f in s.link_failures.iter().filter(|_| !sequential) {
            e.push(
                f.from_ns,
                Ev::Link {
                    link: f.link,
                    up: false,
                },
            );
            if let Some(t) = f.until_ns {
                e.push(
                    t,
                    Ev::Link {
                        link: f.link,
                        up: true,
                    },
                );
            }
        }
        for h in 0..n {
            e.reschedule(h);
        }
        Ok(e)
    }

    /// Run past the duration until every flow is done, or until virtual time `max_ns` at the
    /// latest (`--until-done`, `--max-duration`). One at a time (the runs alone), each flow
    /// then has up to `max_ns` to finish instead of the duration.
    pub fn until_done(&mut self, max_ns: Nanos) {
        let max_ns = max_ns.max(self.duration_ns);
        self.until_done = Some(max_ns);
        if let Some((k, _)) = self.sequential {
            self.sequential = Some((k, max_ns));
        }
    }

    /// The virtual time the run may not pass: the duration, or the bound of `until_done`.
    fn end_bound(&self) -> Nanos {
        self.until_done.unwrap_or(self.duration_ns)
    }

    /// Whether every flow is done (counted past the duration with `until_done`, every 1024
    /// events: the last flow's ACK and up to 1023 more events are taken before the run stops).
    fn past_end(&mut self, t: Nanos) -> bool {
        if t <= self.duration_ns {
            return false;
        }
        let Some(max_ns) = self.until_done else {
            return true;
        };
        if t > max_ns {
            return true;
        }
        if self.stats.0 & 1023 == 0 || self.all_done {
            self.all_done = self.flows.iter().all(|f| self.sender(f).qp.done.is_some());
        }
        self.all_done
    }

    /// Whether a switch whose step sent nothing takes its next steps in the same call while
    /// nothing else is due before them (on by default; see `quiet_until`). Off, the loop
    /// takes one step per iteration: the same run, more slowly (the tests compare the two).
    pub fn set_quiet_steps(&mut self, on: bool) {
        self.quiet_steps = on;
    }

    /// Whether the switches take a step in which only their recirculation loop is due
    /// without the driver's step around it (on by default; `Harness::set_loop_steps`). Off:
    /// the same run, more slowly (the tests compare the two).
    pub fn set_loop_steps(&mut self, on: bool) {
        for s in &mut self.switches {
            s.set_loop_steps(on);
        }
    }

    /// Record every flow's acknowledged bytes every `ns` of virtual time (`Outcome::samples`).
    pub fn sample_every(&mut self, ns: Nanos) {
        self.sample_ns = Some(ns.max(1));
        self.next_sample = 0;
    }

    fn sample(&mut self) {
        let v = self.acked_bytes();
        self.samples.push((self.next_sample, v));
        let sw: Vec<SwitchSample> = self
            .switches
            .iter()
            .map(|s| {
                let snap = s.snapshot();
                SwitchSample {
                    ports: snap
                        .ports
                        .iter()
                        .map(|p| {
                            let q: u64 = p.classes.iter().map(|c| c.depth_bytes).sum();
                            (q, p.stats.pfc_tx)
                        })
                        .collect(),
                    drops: snap.stats.drops.iter().map(|(_, v)| v).sum(),
                    held_bytes: snap.held_bytes,
                }
            })
            .collect();
        self.switch_samples.push(sw);
        self.next_sample += self.sample_ns.unwrap_or(Nanos::MAX);
    }

    fn acked_bytes(&self) -> Vec<u64> {
        self.flows.iter().map(|f| self.acked(f)).collect()
    }

    /// Bytes of flow `f` the receiver acknowledged.
    fn acked(&self, f: &FlowRun) -> u64 {
        (self.sender(f).qp.snd_una as u64 * self.mtu() as u64).min(f.size)
    }

    fn mtu(&self) -> u32 {
        self.hosts.first().map_or(1024, |h| h.mtu())
    }

    fn sender(&self, f: &FlowRun) -> &crate::host::Sender {
        &self.hosts[f.src].senders[f.sender]
    }

    /// The tie-break and sequence number of the next event scheduled.
    fn next_order(&mut self) -> (u64, u64) {
        let tie = self.rng.next_u64();
        let seq = self.seq;
        self.seq += 1;
        (tie, seq)
    }

    /// Schedules `ev` at `t` in the heap by itself.
    fn push(&mut self, t: Nanos, ev: Ev) {
        let (tie, seq) = self.next_order();
        self.push_ordered(t, tie, seq, ev);
    }

    fn push_ordered(&mut self, t: Nanos, tie: u64, seq: u64, ev: Ev) {
        let slot = match self.free.pop() {
            Some(i) => i,
            None => {
                self.events.push(None);
                (self.events.len() - 1) as u32
            }
        };
        self.heap.push(Reverse((t, tie, seq, slot)));
        self.events[slot as usize] = Some(ev);
    }

    /// Schedules `frame`'s arrival at `t` at the end of `lane`: behind its last frame, or
    /// (the first) in the heap.
    fn push_frame(&mut self, t: Nanos, lane: usize, frame: Vec<u8>) {
        let (tie, seq) = self.next_order();
        let key = (t, tie, seq, LANE | lane as u32);
        let Some(l) = self.lanes.get_mut(lane) else {
            return; // not a lane of this network (never: `send` computes it from a link)
        };
        match l.q.back() {
            None => {
                l.q.push_back((key, frame));
                self.heap.push(Reverse(key));
            }
            Some(&(last, _)) if key > last => l.q.push_back((key, frame)),
            // Overtaking (not seen in practice: a port serializes its frames): on its own.
            Some(_) => {
                let to = l.to;
                self.push_ordered(t, tie, seq, Ev::Deliver { to, frame });
            }
        }
    }

    /// The rate of link `li` (0 for none).
    fn link_rate(&self, li: Option<usize>) -> u64 {
        li.and_then(|i| self.links.get(i)).map_or(0, |l| l.rate_bps)
    }

    fn reschedule(&mut self, h: usize) {
        let next = self.hosts[h].next_wake();
        if next != self.host_wake[h] {
            self.host_wake[h] = next;
            if let Some(t) = next {
                self.push(t, Ev::Wake(h));
            }
        }
    }

    /// `frame` starts leaving `from` at `t`.
    fn send(&mut self, from: End, t: Nanos, frame: Vec<u8>) {
        let link = match from {
            End::Host(h) => self.host_link.get(h),
            End::Switch(i, p) => self.port_link.get(i).and_then(|v| v.get(p)),
        };
        let Some(&Some(li)) = link else {
            // An unconnected switch port: the frame goes nowhere.
            self.frames.put(frame);
            return;
        };
        let l = &self.links[li];
        let dir = if l.ends[0] == from { 0 } else { 1 };
        let arrive = t + wire_time(frame.len(), l.rate_bps) + l.delay_ns;
        let loss = l.loss;
        self.stats.1 += 1;
        if !l.down.is_empty() && l.down.iter().any(|&(a, b)| a <= t && t < b) {
            self.stats.3 += 1;
            self.frames.put(frame);
            return;
        }
        if loss > 0.0 && self.rng.uniform() < loss {
            self.stats.2 += 1;
            self.frames.put(frame);
            return;
        }
        self.push_frame(arrive, 2 * li + dir, frame);
    }

    /// Runs to the end (`duration`, or earlier when nothing is left to do).
    pub fn run(self) -> Outcome {
        self.run_with_progress(&mut |_, _| {})
    }

    /// Like [`Emulation::run`], calling `progress(virtual now, duration)` every 65536 events
    /// (for a progress line: it must not touch the emulation, which stays deterministic).
    pub fn run_with_progress(mut self, progress: &mut dyn FnMut(Nanos, Nanos)) -> Outcome {
        let mut now = 0;
        let mut woken: Vec<usize> = Vec::new();
        let mut emitted = Vec::new();
        self.sw_next = self
            .switches
            .iter()
            .map(|s| s.next_event().unwrap_or(NEVER))
            .collect();
        loop {
            if self.stats.0 & 0xffff == 0 {
                progress(now, self.duration_ns);
            }
            let t_heap = self.heap.peek().map(|Reverse(k)| k.0);
            let t_sw = self.sw_next.iter().copied().min().filter(|&n| n != NEVER);
            let t = match (t_heap, t_sw) {
                (Some(a), Some(b)) => a.min(b),
                (a, b) => match a.or(b) {
                    Some(t) => t,
                    None => break,
                },
            };
            if self.sequential.is_none() && self.past_end(t) {
                break;
            }
            while self.sample_ns.is_some() && self.next_sample <= t {
                self.sample();
            }
            now = t;
            woken.clear();
            // The top is looked at before it is taken: a `PeekMut` guard costs a call to drop
            // even when nothing changed (the last look of every step).
            while self.heap.peek().is_some_and(|Reverse(k)| k.0 <= t) {
                let Some(mut top) = self.heap.peek_mut() else {
                    break;
                };
                let Reverse((te, _, seq, slot)) = *top;
                let ev = if slot & LANE != 0 {
                    // The first frame of a lane: the next one takes its place at the top (one
                    // sift down instead of a pop and a push).
                    let Some(l) = self.lanes.get_mut((slot & !LANE) as usize) else {
                        PeekMut::pop(top);
                        continue;
                    };
                    let first = l.q.pop_front();
                    match l.q.front() {
                        Some((k, next)) => {
                            // The lane's next frame arrives next on this link: its first
                            // line is asked for now (written by its sender up to a long
                            // link's delay ago, it is cold; the receiver's first read of it
                            // was a miss per hop).
                            longhaul_dataplane::packet::prefetch(next.as_ptr());
                            let k = *k;
                            // So is the entry after it (its key and frame pointer, read at
                            // the lane's next turn: the load of the entry above was the
                            // loop's largest stall once the frames were prefetched).
                            if let Some(after) = l.q.get(1) {
                                longhaul_dataplane::packet::prefetch_lines(after);
                            }
                            *top = Reverse(k);
                            drop(top); // sifts it down now
                        }
                        None => {
                            PeekMut::pop(top);
                        }
                    }
                    let Some((key, frame)) = first else {
                        continue;
                    };
                    debug_assert_eq!(key.2, seq);
                    Ev::Deliver { to: l.to, frame }
                } else {
                    PeekMut::pop(top);
                    let Some(ev) = self.events.get_mut(slot as usize).and_then(Option::take) else {
                        continue;
                    };
                    self.free.push(slot);
                    ev
                };
                self.stats.0 += 1;
                match ev {
                    Ev::Deliver {
                        to: End::Switch(i, p),
                        frame,
                    } => {
                        if is_mac_control(&frame) {
                            let rate = self.link_rate(self.port_link[i][p]);
                            self.pauses
                                .on_frame(End::Switch(i, p), &frame, t, rate, false);
                        }
                        self.switches[i].put(p, t, frame);
                        self.sw_next[i] = self.sw_next[i].min(t);
                    }
                    Ev::Deliver {
                        to: End::Host(h),
                        frame,
                    } => {
                        if is_mac_control(&frame) {
                            let rate = self.link_rate(self.host_link[h]);
                            let hold = self.hosts[h].pause_until_resume();
                            self.pauses.on_frame(End::Host(h), &frame, t, rate, hold);
                        }
                        self.hosts[h].receive(t, frame, &mut self.frames);
                        if self.hosts[h].has_delivered() {
                            self.on_delivered(h, t);
                        }
                        woken.push(h);
                    }
                    Ev::Wake(h) if self.host_wake[h] == Some(te) => {
                        self.host_wake[h] = None;
                        woken.push(h);
                    }
                    Ev::Wake(_) => {}
                    Ev::Link { link, up } => {
                        for end in self.links[link].ends {
                            if let End::Switch(i, p) = end {
                                self.switches[i].set_link(p, up);
                            }
                        }
                    }
                }
            }
            for i in 0..self.switches.len() {
                if self.sw_next[i] <= t {
                    let mut next = self.switches[i].advance_to(t, &mut self.frames);
                    self.switches[i].take_into(&mut emitted);
                    // A step that sent nothing (a recirculation pass, a frame queued behind
                    // others), with no host to run at `t`: the loop's next iterations would be
                    // this switch's alone while its next event comes before anything else, so
                    // it takes them now, in one call, up to the first that sends a frame.
                    if let Some(n) = next.filter(|_| emitted.is_empty() && woken.is_empty()) {
                        let limit = self.quiet_until(i, t);
                        if n < limit {
                            let (n, last) =
                                self.switches[i].advance_quiet(next, limit, &mut self.frames);
                            self.switches[i].take_into(&mut emitted);
                            next = n;
                            now = last;
                        }
                    }
                    for e in emitted.drain(..) {
                        self.send(End::Switch(i, e.port_idx), e.ts, e.data);
                    }
                    self.sw_next[i] = next.unwrap_or(NEVER);
                }
            }
            woken.sort_unstable();
            woken.dedup();
            for &h in &woken {
                self.hosts[h].on_time(t);
                while let Some(f) = self.hosts[h].transmit(t, &mut self.frames) {
                    self.send(End::Host(h), t, f);
                }
                self.reschedule(h);
            }
            self.next_in_sequence(t);
        }
        // Nothing changes between the last event and the end: sample up to the duration (or,
        // with `until_done`, the last event).
        let last = if self.until_done.is_some() {
            now.max(self.duration_ns)
        } else {
            self.duration_ns
        };
        while self.sample_ns.is_some() && self.next_sample <= last {
            self.sample();
        }
        self.outcome(now)
    }

    /// Until when (exclusive) switch `i`, just advanced to `t`, may take its own next events
    /// without the loop: the loop would take the next event of any other switch, the next
    /// event of the heap, the next sample, the end of the run, the sequence's next flow
    /// (`next_in_sequence` acts at its deadline, or now if its flow is done) and the progress
    /// call first. `t` or less: not at all.
    fn quiet_until(&self, i: usize, t: Nanos) -> Nanos {
        let mut limit = self.heap.peek().map_or(Nanos::MAX, |Reverse(k)| k.0);
        if limit <= t || self.stats.0 & 0xffff == 0 || !self.quiet_steps {
            return t;
        }
        for (j, &n) in self.sw_next.iter().enumerate() {
            if j != i {
                limit = limit.min(n);
            }
        }
        if self.sample_ns.is_some() {
            limit = limit.min(self.next_sample);
        }
        match self.sequential {
            None => limit.min(self.end_bound().saturating_add(1)),
            Some((k, deadline)) => {
                if self.sender(&self.flows[k]).qp.done.is_some() {
                    t
                } else {
                    limit.min(deadline)
                }
            }
        }
    }

    /// Host `h` took a frame at `t`: the flows whose data has now all arrived there start those
    /// waiting for them and nothing else.
    fn on_delivered(&mut self, h: usize, t: Nanos) {
        let mut done = std::mem::take(&mut self.delivered);
        self.hosts[h].take_delivered(&mut done);
        for &(id, at) in &done {
            // One at a time, a flow's number is not its index, and nothing waits.
            if self.sequential.is_some() {
                break;
            }
            let Some(f) = self.flows.get_mut(id) else {
                continue;
            };
            f.delivered = Some(at);
            for k in 0..self.dependents.get(id).map_or(0, Vec::len) {
                let d = self.dependents[id][k];
                let g = &mut self.flows[d];
                g.waiting -= 1;
                if g.waiting == 0 {
                    g.start = t;
                    let (src, sender) = (g.src, g.sender);
                    self.hosts[src].start_sender(sender, t);
                    self.reschedule(src);
                }
            }
        }
        done.clear();
        self.delivered = done;
    }

    /// One at a time: when the running flow is done (or its time is up), start the next.
    fn next_in_sequence(&mut self, t: Nanos) {
        let Some((k, deadline)) = self.sequential else {
            return;
        };
        if self.sender(&self.flows[k]).qp.done.is_none() && t < deadline {
            return;
        }
        if k + 1 == self.flows.len() {
            self.sequential = None;
            self.duration_ns = t; // the last one is done: stop
            return;
        }
        let start = t + SEQUENTIAL_GAP_NS;
        let next = &mut self.flows[k + 1];
        next.start = start;
        let (src, sender) = (next.src, next.sender);
        self.hosts[src].start_sender(sender, start);
        self.reschedule(src);
        self.sequential = Some((k + 1, start + self.end_bound()));
    }

    fn outcome(self, end_ns: Nanos) -> Outcome {
        let mut flows = Vec::new();
        for f in &self.flows {
            let (src, dst, size, start, id) = (f.src, f.dst, f.size, f.start, f.id);
            let q = &self.sender(f).qp;
            flows.push(FlowResult {
                id,
                src: self.hosts[src].spec.name.clone(),
                dst: self.hosts[dst].spec.name.clone(),
                inter_dc: match (&self.hosts[src].spec.dc, &self.hosts[dst].spec.dc) {
                    (Some(a), Some(b)) => Some(a != b),
                    _ => None,
                },
                size_bytes: size,
                // With `connect = "tcp"` the QP starts once connected: the FCT counts from
                // there (the first data packet), as the papers' FCTs do.
                start_ns: if q.start != crate::host::rnic::NOT_STARTED {
                    q.start
                } else {
                    start
                },
                finish_ns: q.done,
                delivered_ns: f.delivered,
                retransmitted: q.retransmitted,
                naks: q.naks,
                timeouts: q.timeouts,
                cnps: q.cnps,
                acked_bytes: self.acked(f),
                state: self.hosts[src].flow_state(f.sender, end_ns),
            });
        }
        Outcome {
            flows,
            end_ns,
            events: self.stats.0,
            hops: self.stats.1,
            link_drops: self.stats.2,
            link_down_drops: self.stats.3,
            samples: self.samples,
            switch_samples: self.switch_samples,
            port_names: self
                .switches
                .iter()
                .map(|s| s.ports().iter().map(|p| p.name.clone()).collect())
                .collect(),
            hosts: self
                .hosts
                .iter()
                .map(|h| (h.spec.name.clone(), h.stats))
                .collect(),
            switches: self
                .switch_names
                .iter()
                .cloned()
                .zip(self.switches.iter().map(|s| s.snapshot()))
                .collect(),
            pauses: self.pauses.finish(end_ns),
            collectives: self
                .collectives
                .iter()
                .map(|(c, r)| CollectiveResult {
                    name: c.name.clone(),
                    kind: c.kind,
                    ranks: c.ranks.len(),
                    bytes: c.bytes,
                    start_ns: c.start_ns,
                    finish_ns: self.flows[r.clone()]
                        .iter()
                        .map(|f| f.delivered)
                        .collect::<Option<Vec<_>>>()
                        .and_then(|v| v.into_iter().max()),
                    flows: r.clone(),
                })
                .collect(),
        }
    }
}
