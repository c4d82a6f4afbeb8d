//! The engine on virtual time: serialization at port rate, PFC generation and honoring,
//! recirculation, generated packets, determinism. Each test drives a whole switch through the
//! `Harness` with a tiny pipeline, so only the engine's behaviour is under test.

use longhaul_dataplane::asic::pfc::PfcParams;
use longhaul_dataplane::asic::recirc::RecircConfig;
use longhaul_dataplane::control::{Command, Punt, PuntHandler};
use longhaul_dataplane::counters::DropReason;
use longhaul_dataplane::engine::{Action, Ctx, Pipeline, PortInfo, PortSpec, Switch, SwitchSpec};
use longhaul_dataplane::packet::{BufPool, HeapPool, PacketBuf, FLAG_CONTROL};
use longhaul_dataplane::replay::{Emitted, Harness};
use longhaul_dataplane::time::{quanta_to_ns, serialization_ns};
use longhaul_dataplane::tm::{TmClassConfig, TmConfig};
use longhaul_dataplane::wire::pfc::{self as wpfc, MacControl};

const GBPS: u64 = 1_000_000_000;

/// Frame byte 0 = egress port id, byte 1 = class, byte 2 = loops wanted; the rest is padding.
/// Byte 3 != 0 asks the pipeline to emit a 64-byte copy to port byte 3 - 1.
/// Byte 4 != 0 punts the packet. Byte 5 == [`FOREIGN_INGRESS`] sends the packet round the loop
/// as if it had come in on a port the switch does not have. The command `port` redirects every
/// later packet to `port`.
#[derive(Default)]
struct Test {
    redirect: Option<u8>,
}

impl<P: BufPool> Pipeline<P> for Test {
    type Command = u8;

    fn command(&mut self, _ctx: &mut Ctx<'_, P>, port: u8) -> Result<(), &'static str> {
        self.redirect = Some(port);
        Ok(())
    }
    fn ingress(&mut self, ctx: &mut Ctx<'_, P>, pkt: &mut P::Buf) -> Action {
        let d = pkt.data();
        if d.len() < 14 {
            return Action::Drop(longhaul_dataplane::counters::DropReason::Truncated);
        }
        let (port, class, loops, gen, punt) = (d[0], d[1], d[2], d[3], d[4]);
        let foreign = d[5] == FOREIGN_INGRESS;
        let port = self.redirect.unwrap_or(port);
        if punt != 0 {
            ctx.punt_packet(7, pkt);
        }
        if pkt.meta().loop_count < loops {
            if foreign {
                pkt.meta_mut().ingress_port = 99;
            }
            return Action::Recirculate;
        }
        if gen != 0 {
            if let Some(mut g) = ctx.pool().alloc_from(&[0xee; 64]) {
                g.meta_mut().egress_port = (gen - 1) as u16;
                g.meta_mut().class = 6;
                ctx.emit(g);
            }
        }
        let m = pkt.meta_mut();
        m.egress_port = port as u16;
        m.class = class;
        Action::Forward
    }
}

/// Byte 5's value that makes [`Test`] recirculate a packet with ingress port 99.
const FOREIGN_INGRESS: u8 = 0x5a;

fn frame(port: u8, class: u8, loops: u8, len: usize) -> Vec<u8> {
    let mut f = vec![0u8; len];
    f[0] = port;
    f[1] = class;
    f[2] = loops;
    // A unicast, non-MAC-control EtherType.
    f[12] = 0x88;
    f[13] = 0xb5;
    f
}

fn port(id: u16, rate_bps: u64, lossless: u8) -> PortSpec {
    let mut tm = TmConfig {
        rate_bps,
        ..TmConfig::default()
    };
    for (c, cl) in tm.classes.iter_mut().enumerate() {
        *cl = TmClassConfig {
            limit_bytes: 1 << 20,
            limit_pkts: 4096,
            lossless: lossless & (1 << c) != 0,
            ..TmClassConfig::default()
        };
    }
    tm.strict_mask = 0xff;
    PortSpec {
        info: PortInfo {
            id,
            name: format!("p{id}"),
            mac: [2, 0, 0, 0, 0, id as u8],
            rate_bps,
            mtu: 9000,
        },
        tm,
    }
}

fn switch(
    ports: Vec<PortSpec>,
    pfc: Option<PfcParams>,
    recirc: Option<RecircConfig>,
) -> Harness<HeapPool, Test> {
    let spec = SwitchSpec {
        ports,
        pfc,
        admission: Default::default(),
        shared_buffer_bytes: 64 << 20,
        recirc,
        emit_capacity: 64,
        command_ring: 16,
        punt_ring: 16,
    };
    Harness::new(Switch::new(
        spec,
        HeapPool::new(8192, 2048),
        Test::default(),
    ))
}

fn on(out: &[Emitted], idx: usize) -> Vec<&Emitted> {
    out.iter().filter(|e| e.port_idx == idx).collect()
}

#[test]
fn egress_serializes_at_port_rate() {
    let mut h = switch(
        vec![port(0, 10 * GBPS, 0), port(1, 10 * GBPS, 0)],
        None,
        None,
    );
    let t0 = 1_000_000;
    for _ in 0..3 {
        h.put(0, t0, &frame(1, 0, 0, 1000));
    }
    h.run_to_idle();
    let out = h.take();
    let ts: Vec<u64> = on(&out, 1).iter().map(|e| e.ts).collect();
    // 1000 B + 24 B overhead at 10 Gb/s = 819.2 ns -> 820 ns per frame.
    let ser = serialization_ns(1024, 10 * GBPS);
    assert_eq!(ser, 820);
    assert_eq!(ts, vec![t0, t0 + ser, t0 + 2 * ser]);
    let st = h.sw.port_stats(1).unwrap();
    assert_eq!((st.tx_pkts, st.tx_bytes), (3, 3000));
}

#[test]
fn an_idle_port_sends_the_first_frame_of_an_instant_at_once() {
    // Every class strict (highest first). Class 0 then class 7 reach idle port 1 at one instant:
    // class 0 found the link idle and is on the wire (empty-queue bypass, docs/engine.md), so
    // class 7 follows it instead of overtaking it. Later, with class 0 queued behind a busy
    // link, class 7 does overtake.
    let mut h = switch(
        vec![port(0, 10 * GBPS, 0), port(1, 10 * GBPS, 0)],
        None,
        None,
    );
    let t0 = 1_000_000;
    h.put(0, t0, &frame(1, 0, 0, 1000));
    h.put(0, t0, &frame(1, 7, 0, 1000));
    h.put(0, t0, &frame(1, 0, 0, 1000));
    h.put(0, t0, &frame(1, 7, 0, 1000));
    h.run_to_idle();
    let out = h.take();
    let got: Vec<(u64, u8)> = on(&out, 1).iter().map(|e| (e.ts, e.data[1])).collect();
    let ser = serialization_ns(1024, 10 * GBPS);
    assert_eq!(
        got,
        vec![(t0, 0), (t0 + ser, 7), (t0 + 2 * ser, 7), (t0 + 3 * ser, 0)]
    );
    let st = h.sw.port_stats(1).unwrap();
    assert_eq!((st.tx_pkts, st.tx_bypassed), (4, 1));
    // Held in the shared buffer until handed out, then released: nothing left.
    assert_eq!(h.sw.stats().buffer_bytes, 0);
    assert_eq!(h.sw.stats().buffer_max_bytes, 4000);
    let c0 = h.sw.tm(1).unwrap().class_stats(0);
    assert_eq!((c0.enq_pkts, c0.deq_pkts, c0.depth_pkts), (2, 2, 0));
}

#[test]
fn pfc_xoff_then_xon_and_no_lossless_drops() {
    // Two 10G ingress ports at line rate into one 10G egress, class 3 lossless.
    let pfc = PfcParams {
        enabled_classes: 1 << 3,
        xoff_bytes: 20_000,
        xon_bytes: 10_000,
        headroom_bytes: 40_000,
        pause_quanta: 1000,
        refresh_ns: 0,
        dynamic: None,
    };
    let ports = vec![
        port(0, 10 * GBPS, 1 << 3),
        port(1, 10 * GBPS, 1 << 3),
        port(2, 10 * GBPS, 1 << 3),
    ];
    let mut h = switch(ports, Some(pfc), None);
    let ser = serialization_ns(1024, 10 * GBPS);
    let n = 40u64;
    for k in 0..n {
        h.put(0, k * ser, &frame(2, 3, 0, 1000));
        h.put(1, k * ser, &frame(2, 3, 0, 1000));
    }
    h.run_to_idle();
    let out = h.take();
    assert_eq!(
        on(&out, 2).len() as u64,
        2 * n,
        "every lossless packet delivered"
    );
    assert_eq!(h.sw.stats().drops.total(), 0);
    for ingress in [0usize, 1] {
        let frames: Vec<(u64, MacControl)> = on(&out, ingress)
            .iter()
            .map(|e| {
                assert_ne!(e.meta.flags & FLAG_CONTROL, 0);
                assert_eq!(e.data.len(), 60);
                (e.ts, wpfc::parse(&e.data).expect("valid PFC"))
            })
            .collect();
        assert_eq!(
            frames.len(),
            2,
            "one XOFF, one XON on port {ingress}: {frames:?}"
        );
        let mut xoff_times = [0u16; 8];
        xoff_times[3] = 1000;
        assert_eq!(
            frames[0].1,
            MacControl::Pfc {
                enable: 1 << 3,
                times: xoff_times
            }
        );
        assert_eq!(
            frames[1].1,
            MacControl::Pfc {
                enable: 1 << 3,
                times: [0; 8]
            }
        );
        // XOFF once 20 kB from this port are buffered: the egress drains one of the two ports'
        // packets per slot, so this port's backlog grows by ~0.5 frame per slot; XON comes
        // after the inputs stop.
        assert!(frames[0].0 > 0 && frames[0].0 < n * ser, "{frames:?}");
        assert!(frames[1].0 > n * ser, "{frames:?}");
    }
    let s = h.sw.pfc().unwrap().stats();
    assert_eq!((s.xoff_sent[3], s.xon_sent[3]), (2, 2));
}

/// A live link clock (slack) lets bursts of frames bypass an idle port's queues at one instant;
/// frames of two ingress ports then leave in one transmit burst and are released to PFC as runs
/// of one (ingress port, class). [`BurstTest`] (burst admission through bypass runs, bypassed
/// frames sent as a burst) must send the same frames at the same times as [`Test`] (one frame
/// at a time) and leave every counter the same; every accounted byte comes back.
#[test]
fn bypassed_frames_of_two_ingress_ports_release_their_pfc_bytes() {
    /// Frames sent (port, time, bytes) and every counter, printed.
    type Run = (Vec<(usize, u64, Vec<u8>)>, Vec<String>);
    fn run<L: Pipeline<HeapPool> + Default>() -> Run {
        let pfc = PfcParams {
            enabled_classes: 1 << 3,
            xoff_bytes: 3_000,
            xon_bytes: 1_500,
            headroom_bytes: 40_000,
            pause_quanta: 1000,
            refresh_ns: 0,
            dynamic: None,
        };
        let spec = SwitchSpec {
            ports: vec![
                port(0, 10 * GBPS, 1 << 3),
                port(1, 10 * GBPS, 1 << 3),
                port(2, 10 * GBPS, 1 << 3),
            ],
            pfc: Some(pfc),
            admission: Default::default(),
            shared_buffer_bytes: 64 << 20,
            recirc: None,
            emit_capacity: 64,
            command_ring: 16,
            punt_ring: 16,
        };
        let mut h = Harness::new(Switch::new(spec, HeapPool::new(8192, 2048), L::default()));
        // Slack: the link clock may run up to 5 us behind `now`, so at one instant several
        // frames find the link free, until its clock catches up and frames queue (and PFC
        // pauses a port once 3 kB of its frames are buffered, bypassed ones included).
        h.sw.set_tx_slack(5_000);
        for k in 0..60u64 {
            let t = 1_000_000 + k * 2_000;
            for i in 0..3 {
                h.put(0, t, &frame(2, [3, 3, 0][i], 0, 500 + i));
                h.put(1, t, &frame(2, 3, 0, 700 + i));
            }
            // Hairpin: port 2's own PFC frames go on the queue its bypass run is open on.
            for i in 0..4 {
                h.put(2, t, &frame(2, 3, 0, 900 + i));
            }
        }
        h.run_to_idle();
        let sw = &h.sw;
        let mut counters = Vec::new();
        for idx in 0..3 {
            counters.push(format!("{:?}", sw.port_stats(idx).unwrap()));
            let tm = sw.tm(idx).unwrap();
            counters.push(format!("{:?}", tm.port_stats()));
            for c in 0..8 {
                counters.push(format!("{:?}", tm.class_stats(c)));
            }
        }
        let pfc = sw.pfc().unwrap();
        counters.push(format!("{:?}", pfc.stats()));
        for ingress in [0u16, 1] {
            assert_eq!(
                pfc.counter(ingress, 3),
                0,
                "port {ingress}'s bytes released"
            );
            assert!(pfc.max_counter(ingress, 3) > 0);
        }
        assert_eq!(pfc.stats().underflows, 0);
        assert_eq!(sw.stats().buffer_bytes, 0);
        // The hairpin's sender does not stop for PFC here (no closed loop), so some of its
        // frames overrun the headroom and are dropped: the same ones either way (compared).
        let drops = sw.stats().drops.total();
        counters.push(format!("{:?}", sw.stats()));
        let st = sw.port_stats(2).unwrap();
        assert_eq!(st.tx_pkts - st.pfc_tx + drops, 600);
        assert!(st.tx_bypassed > 0, "the slack lets frames bypass: {st:?}");
        let out = h
            .take()
            .into_iter()
            .map(|e| (e.port_idx, e.ts, e.data))
            .collect();
        (out, counters)
    }
    let (one, c1) = run::<Test>();
    let (burst, c2) = run::<BurstTest>();
    assert!(
        one == burst,
        "burst admission or transmit changed the output"
    );
    assert_eq!(c1, c2);
    assert!(
        one.iter().any(|e| e.0 != 2),
        "PFC frames were sent (XOFF and XON)"
    );
}

#[test]
fn received_pfc_pauses_only_its_priority_for_its_quanta() {
    let mut h = switch(
        vec![port(0, 10 * GBPS, 0), port(1, 10 * GBPS, 0)],
        None,
        None,
    );
    let t0 = 10_000;
    // The downstream neighbour on port 1 pauses priority 3 for 100 quanta.
    let mut pfc = [0u8; 60];
    let mut times = [0u16; 8];
    times[3] = 100;
    wpfc::build_pfc(&mut pfc, [2, 0, 0, 0, 0, 9], 1 << 3, times).unwrap();
    h.put(1, t0, &pfc);
    h.put(0, t0 + 1, &frame(1, 3, 0, 500));
    h.put(0, t0 + 1, &frame(1, 0, 0, 500));
    h.run_to_idle();
    let out = h.take();
    let tx = on(&out, 1);
    assert_eq!(tx.len(), 2);
    assert_eq!(tx[0].data[1], 0, "class 0 is not paused");
    assert_eq!(tx[0].ts, t0 + 1);
    assert_eq!(tx[1].data[1], 3);
    assert_eq!(
        tx[1].ts,
        t0 + quanta_to_ns(100, 10 * GBPS),
        "class 3 waits out the pause"
    );
    assert_eq!(h.sw.port_stats(1).unwrap().pfc_rx[3], 1);
    assert_eq!(
        on(&out, 0).len(),
        0,
        "PFC frames are consumed, never forwarded"
    );
}

#[test]
fn recirculation_delays_by_loops_and_counts() {
    let rc = RecircConfig {
        rate_bps: 100 * GBPS,
        loop_delay_ns: 1_000,
        capacity_pkts: 16,
        capacity_bytes: 1 << 20,
    };
    let mut h = switch(
        vec![port(0, 100 * GBPS, 0), port(1, 100 * GBPS, 0)],
        None,
        Some(rc),
    );
    h.put(0, 0, &frame(1, 0, 3, 1000));
    h.put(0, 0, &frame(1, 0, 0, 1000));
    h.run_to_idle();
    let out = h.take();
    let tx = on(&out, 1);
    assert_eq!(tx.len(), 2);
    assert_eq!(
        tx[0].data[2], 0,
        "the packet that does not loop leaves first"
    );
    assert_eq!(tx[0].ts, 0);
    // Three loops, each: serialization of 1000 B at 100G (80 ns) + 1000 ns delay.
    let per_loop = serialization_ns(1000, 100 * GBPS) + 1_000;
    assert_eq!(tx[1].ts, 3 * per_loop);
    assert_eq!(tx[1].meta.loop_count, 3);
    assert_eq!(h.sw.stats().recirculated, 3);
}

/// A packet back from the recirculation loop whose ingress port the switch does not have is
/// dropped and counted as `bad_port` (it was sent on as if it had come in on port 0), on both
/// ways a packet comes back: `Switch::recirc_pass` and `Switch::poll`.
#[test]
fn recirculated_packet_of_an_unknown_port_is_dropped_and_counted() {
    let rc = RecircConfig {
        rate_bps: 100 * GBPS,
        loop_delay_ns: 1_000,
        capacity_pkts: 16,
        capacity_bytes: 1 << 20,
    };
    let back = serialization_ns(1000, 100 * GBPS) + 1_000;
    for via_poll in [false, true] {
        let mut h = switch(
            vec![port(0, 100 * GBPS, 0), port(1, 100 * GBPS, 0)],
            None,
            Some(rc),
        );
        let mut f = frame(1, 0, 1, 1000);
        f[5] = FOREIGN_INGRESS;
        h.put(0, 0, &f);
        h.advance_to(0);
        assert_eq!(h.sw.recirc_next(), Some(back), "in the loop");
        if via_poll {
            h.sw.poll(back);
        } else {
            assert_eq!(h.sw.recirc_pass(back), Some(false));
        }
        h.run_to_idle();
        assert!(h.take().is_empty(), "via_poll {via_poll}: nothing sent");
        let s = h.sw.stats();
        assert_eq!((s.recirculated, s.drops.get(DropReason::BadPort)), (1, 1));
        let l = h.sw.ledger();
        assert_eq!(l.check(), Ok(()), "{l}");
    }
}

#[test]
fn generated_packets_are_enqueued_and_counted() {
    let mut h = switch(
        vec![port(0, 10 * GBPS, 0), port(1, 10 * GBPS, 0)],
        None,
        None,
    );
    let mut f = frame(1, 0, 0, 100);
    f[3] = 1; // emit a copy to port 0
    h.put(0, 500, &f);
    h.run_to_idle();
    let out = h.take();
    assert_eq!(on(&out, 0).len(), 1);
    assert_eq!(on(&out, 0)[0].data, vec![0xee; 64]);
    assert_eq!(on(&out, 1).len(), 1);
    assert_eq!(h.sw.stats().generated, 1);
}

#[test]
fn unknown_egress_and_oversize_are_dropped_by_reason() {
    let mut h = switch(
        vec![port(0, 10 * GBPS, 0), port(1, 10 * GBPS, 0)],
        None,
        None,
    );
    h.put(0, 0, &frame(7, 0, 0, 100));
    h.put(0, 0, &[0u8; 10]);
    h.run_to_idle();
    assert!(h.take().is_empty());
    assert_eq!(h.sw.stats().drops.get(DropReason::BadPort), 1);
    assert_eq!(h.sw.stats().drops.get(DropReason::Truncated), 1);
}

#[test]
fn same_input_same_output() {
    let run = || {
        let pfc = PfcParams {
            enabled_classes: 1 << 3,
            xoff_bytes: 3_000,
            xon_bytes: 1_500,
            headroom_bytes: 40_000,
            pause_quanta: 500,
            refresh_ns: 2_000,
            dynamic: None,
        };
        let ports = vec![
            port(0, 10 * GBPS, 1 << 3),
            port(1, 25 * GBPS, 1 << 3),
            port(2, 10 * GBPS, 1 << 3),
        ];
        let mut h = switch(ports, Some(pfc), None);
        for k in 0..200u64 {
            let len = 64 + (k as usize * 37) % 1400;
            h.put(
                (k % 2) as usize,
                k * 300,
                &frame(2, (k % 4) as u8 + 1, 0, len),
            );
        }
        h.run_to_idle();
        h.take()
    };
    let a = run();
    let b = run();
    let pfc_frames = a
        .iter()
        .filter(|e| e.meta.flags & FLAG_CONTROL != 0)
        .count();
    assert_eq!(a.len(), 200 + pfc_frames);
    assert!(
        pfc_frames >= 4,
        "the run exercises PFC: {pfc_frames} frames"
    );
    assert_eq!(a, b);
}

#[test]
fn full_punt_ring_is_counted_and_never_stalls() {
    let mut h = switch(
        vec![port(0, 10 * GBPS, 0), port(1, 10 * GBPS, 0)],
        None,
        None,
    );
    let mut f = frame(1, 0, 0, 100);
    f[4] = 1;
    for k in 0..40 {
        h.put(0, k * 100, &f);
    }
    h.run_to_idle();
    assert_eq!(h.take().len(), 40, "every packet forwarded");
    let c = h.sw.control_stats();
    assert_eq!(
        (c.punts, c.punt_drops),
        (16, 24),
        "ring of 16, nobody draining"
    );
    assert_eq!(h.sw.channel().punts.len(), 16);
}

/// Replay's inline control: a punt at t makes the handler's command take effect at t + latency.
struct RedirectOnPunt;

impl PuntHandler<u8> for RedirectOnPunt {
    fn on_punt(&mut self, p: &Punt, issue: &mut dyn FnMut(Command<u8>)) {
        assert_eq!(p.reason, 7);
        issue(Command::Pipeline(p.bytes()[4] - 1));
    }
}

#[test]
fn inline_control_applies_commands_after_the_control_latency() {
    let mut h = switch(
        vec![
            port(0, 100 * GBPS, 0),
            port(1, 100 * GBPS, 0),
            port(2, 100 * GBPS, 0),
        ],
        None,
        None,
    );
    h.sw.set_inline_control(Box::new(RedirectOnPunt), 1_000);
    let mut trigger = frame(1, 0, 0, 100);
    trigger[4] = 3; // punt; the handler redirects everything to port 2
    h.put(0, 5_000, &trigger);
    for k in 1..=20u64 {
        h.put(0, 5_000 + k * 100, &frame(1, 0, 0, 100));
    }
    h.run_to_idle();
    let out = h.take();
    let to1: Vec<u64> = on(&out, 1).iter().map(|e| e.ts).collect();
    let to2: Vec<u64> = on(&out, 2).iter().map(|e| e.ts).collect();
    // Up to and excluding t = 6000 the old behaviour, from t = 6000 on the new one.
    assert_eq!(to1, (0..10u64).map(|k| 5_000 + k * 100).collect::<Vec<_>>());
    assert_eq!(
        to2,
        (10..=20u64).map(|k| 5_000 + k * 100).collect::<Vec<_>>()
    );
    let c = h.sw.control_stats();
    assert_eq!((c.applied, c.punts), (1, 1));
    assert_eq!(c.latency_hist.max_ns, 1_000);
}

/// Takes every packet into its "own queue" and forgets it: a silent loss.
struct Leaky;

impl<P: BufPool> Pipeline<P> for Leaky {
    type Command = u8;
    fn ingress(&mut self, _ctx: &mut Ctx<'_, P>, _pkt: &mut P::Buf) -> Action {
        Action::Hold
    }
    fn hold(&mut self, _ctx: &mut Ctx<'_, P>, pkt: P::Buf) -> Result<(), P::Buf> {
        drop(pkt);
        Ok(())
    }
}

#[test]
fn ledger_accounts_for_sent_dropped_generated_recirculated_and_queued() {
    let mut h = switch(
        vec![port(0, 10 * GBPS, 0), port(1, GBPS, 0)],
        None,
        Some(RecircConfig {
            rate_bps: 100 * GBPS,
            loop_delay_ns: 1_000,
            capacity_pkts: 16,
            capacity_bytes: 1 << 20,
        }),
    );
    let t0 = 1_000;
    h.put(0, t0, &frame(1, 0, 2, 1000)); // recirculated twice, then sent
    let mut g = frame(1, 0, 0, 1000);
    g[3] = 1; // plus a generated copy to port 0
    h.put(0, t0, &g);
    h.put(0, t0, &[0u8; 10]); // truncated: dropped
    h.put(0, t0, &frame(9, 0, 0, 100)); // no such port: dropped
    for _ in 0..4 {
        h.put(0, t0, &frame(1, 0, 0, 1000));
    }
    // Part way: some frames still queued on the 1 Gb/s port.
    h.advance_to(t0 + 100);
    let l = h.sw.ledger();
    assert_eq!(l.check(), Ok(()), "{l}");
    assert!(l.queued > 0, "{l}");
    h.run_to_idle();
    let l = h.sw.ledger();
    assert_eq!(l.check(), Ok(()), "{l}");
    assert_eq!((l.received, l.generated), (8, 1), "{l}");
    assert_eq!((l.sent, l.dropped, l.queued), (7, 2, 0), "{l}");
}

#[test]
#[should_panic(expected = "packet conservation violated, 1 frames unaccounted for")]
fn a_frame_lost_without_a_counter_fails_the_harness() {
    let spec = SwitchSpec {
        ports: vec![port(0, GBPS, 0)],
        pfc: None,
        admission: Default::default(),
        shared_buffer_bytes: 1 << 20,
        recirc: None,
        emit_capacity: 8,
        command_ring: 4,
        punt_ring: 4,
    };
    let mut h = Harness::new(Switch::new(spec, HeapPool::new(16, 2048), Leaky));
    h.put(0, 1_000, &frame(0, 0, 0, 100));
    h.run_to_idle();
}

/// [`Test`], run through the engine's burst ingress ([`Pipeline::BURST_INGRESS`]).
#[derive(Default)]
struct BurstTest(Test);

impl<P: BufPool> Pipeline<P> for BurstTest {
    type Command = u8;
    const BURST_INGRESS: bool = true;

    fn ingress(&mut self, ctx: &mut Ctx<'_, P>, pkt: &mut P::Buf) -> Action {
        self.0.ingress(ctx, pkt)
    }

    /// No egress stage: the engine sends bypassed frames as one burst
    /// (`Switch::transmit_bypassed`), where [`Test`] takes them one at a time.
    fn egress_active(&self) -> bool {
        false
    }
}

/// A switch whose port 0 (100 Gb/s) feeds port 1 (1 Gb/s, so its queues build), for the
/// burst-against-one-at-a-time tests.
fn into_slow_port<L: Pipeline<HeapPool> + Default>() -> Harness<HeapPool, L> {
    let spec = SwitchSpec {
        ports: vec![port(0, 100 * GBPS, 0), port(1, GBPS, 0)],
        pfc: None,
        admission: Default::default(),
        shared_buffer_bytes: 64 << 20,
        recirc: None,
        emit_capacity: 64,
        command_ring: 16,
        punt_ring: 16,
    };
    Harness::new(Switch::new(spec, HeapPool::new(8192, 2048), L::default()))
}

#[test]
fn burst_ingress_sends_what_one_packet_at_a_time_sends() {
    // Bursts of frames at one instant into a 1 Gb/s port (queues build), a third of them
    // emitting a copy onto the same port, classes mixed so that strict priority orders what is
    // queued: a generated packet must be enqueued right after the packet that made it, as one
    // packet at a time does, or the order on the wire differs.
    fn run<L: Pipeline<HeapPool> + Default>() -> Vec<(usize, u64, Vec<u8>)> {
        let mut h = into_slow_port::<L>();
        for i in 0..200u64 {
            let mut f = frame(1, [0, 6, 3][(i % 3) as usize], 0, 100 + i as usize);
            if i % 3 == 1 {
                f[3] = 2; // a copy to port 1
            }
            h.put(0, 1_000 + (i / 40) * 50_000, &f);
        }
        h.run_to_idle();
        let st = h.sw.port_stats(0).unwrap();
        assert_eq!(st.rx_pkts, 200);
        h.take()
            .into_iter()
            .map(|e| (e.port_idx, e.ts, e.data))
            .collect()
    }
    let one = run::<Test>();
    let burst = run::<BurstTest>();
    assert_eq!(one.len(), 200 + 67);
    assert!(one == burst, "burst ingress changed the output");
}

/// [`Test`], but a frame whose byte 5 is not 0 reads its egress queue's depth at ingress and is
/// dropped when the queue holds more than byte 5 packets: a decision that depends on the
/// admission of the frames before it.
#[derive(Default)]
struct DepthTest(Test);

impl DepthTest {
    fn ingress_with_depth<P: BufPool>(&mut self, ctx: &mut Ctx<'_, P>, pkt: &mut P::Buf) -> Action {
        let a = self.0.ingress(ctx, pkt);
        let limit = pkt.data().get(5).copied().unwrap_or(0);
        if a != Action::Forward || limit == 0 {
            return a;
        }
        let m = pkt.meta();
        match ctx.queue_depth(m.egress_port, m.egress_queue()) {
            Some((_, n)) if n > limit as usize => Action::Drop(DropReason::QueueFull),
            _ => a,
        }
    }
}

impl<P: BufPool> Pipeline<P> for DepthTest {
    type Command = u8;

    fn ingress(&mut self, ctx: &mut Ctx<'_, P>, pkt: &mut P::Buf) -> Action {
        self.ingress_with_depth(ctx, pkt)
    }
}

/// [`DepthTest`] through the engine's burst ingress, the burst cut before each frame that reads
/// a depth (`CUT`) as [`Pipeline::ingress_burst`] allows, or not cut (wrong: the depth is read
/// before the earlier frames are admitted).
#[derive(Default)]
struct DepthBurst<const CUT: bool>(DepthTest);

impl<P: BufPool, const CUT: bool> Pipeline<P> for DepthBurst<CUT> {
    type Command = u8;
    const BURST_INGRESS: bool = true;

    fn ingress(&mut self, ctx: &mut Ctx<'_, P>, pkt: &mut P::Buf) -> Action {
        self.0.ingress_with_depth(ctx, pkt)
    }

    fn ingress_burst(
        &mut self,
        ctx: &mut Ctx<'_, P>,
        pkts: &mut [P::Buf],
        actions: &mut [Action],
    ) -> usize {
        for i in 0..pkts.len() {
            if CUT && i > 0 && pkts[i].data().get(5).is_some_and(|&l| l != 0) {
                return i;
            }
            ctx.at_packet(i);
            actions[i] = self.0.ingress_with_depth(ctx, &mut pkts[i]);
        }
        pkts.len()
    }
}

#[test]
fn a_burst_cut_before_a_frame_that_reads_a_depth_sends_what_one_at_a_time_sends() {
    // Bursts of 40 frames at one instant into a 1 Gb/s port (its queues build), every fifth
    // reading its queue's depth (and dropped above 4 to 12 packets), a third emitting a copy
    // onto the same port.
    fn run<L: Pipeline<HeapPool> + Default>() -> (Vec<(usize, u64, Vec<u8>)>, u64) {
        let mut h = into_slow_port::<L>();
        for i in 0..400u64 {
            let mut f = frame(1, [0, 6, 3][(i % 3) as usize], 0, 100 + i as usize);
            if i % 3 == 1 {
                f[3] = 2; // a copy to port 1
            }
            if i % 5 == 2 {
                f[5] = 4 + (i % 9) as u8;
            }
            h.put(0, 1_000 + (i / 40) * 20_000, &f);
        }
        h.run_to_idle();
        let dropped = h.sw.stats().drops.get(DropReason::QueueFull);
        let out = h
            .take()
            .into_iter()
            .map(|e| (e.port_idx, e.ts, e.data))
            .collect();
        (out, dropped)
    }
    let one = run::<DepthTest>();
    assert!(
        one.1 > 0,
        "no frame was dropped by its depth: the test would not see a change"
    );
    assert!(
        run::<DepthBurst<true>>() == one,
        "the cut burst changed the output"
    );
    // The same bursts not cut read the depths too early: the test tells.
    assert!(run::<DepthBurst<false>>() != one);
}

#[test]
fn burst_ingress_over_several_ports_sends_what_one_packet_at_a_time_sends() {
    // A spraying ToR's bursts: each burst's frames go to four egress ports in turn, so the engine
    // keeps a bypass run open on each port at once. A live link clock (slack) lets several
    // frames of a burst bypass one port; ports of different rates (some idle, some with
    // queues), classes mixed on each port, every sixteenth frame emitting a copy to some port,
    // and PFC with a small XOFF threshold: the pause frames for the ingress port go on its own
    // control queue (it is also an egress port, hairpin) while its run is open. The frames on
    // the wire, their times, and every counter (the ports' `tx_bypassed`, the traffic
    // managers') must be those of one packet at a time. Run twice: the four ports at indices
    // 0-3, then at 62-65 behind idle ports (the engine marks open runs of ports below index 64
    // in a bit mask and lists the others).
    type Run = (Vec<(usize, u64, Vec<u8>)>, Vec<String>, Vec<u64>);
    fn run<L: Pipeline<HeapPool> + Default>(base: usize) -> Run {
        let pfc = PfcParams {
            enabled_classes: 1 << 3,
            xoff_bytes: 6_000,
            xon_bytes: 3_000,
            headroom_bytes: 40_000,
            pause_quanta: 500,
            refresh_ns: 0,
            dynamic: None,
        };
        let mut ports: Vec<PortSpec> = (0..base).map(|i| port(100 + i as u16, GBPS, 0)).collect();
        ports.extend([
            port(0, 100 * GBPS, 1 << 3),
            port(1, 100 * GBPS, 1 << 3),
            port(2, 10 * GBPS, 1 << 3),
            port(3, GBPS, 1 << 3),
        ]);
        let spec = SwitchSpec {
            ports,
            pfc: Some(pfc),
            admission: Default::default(),
            shared_buffer_bytes: 64 << 20,
            recirc: None,
            emit_capacity: 64,
            command_ring: 16,
            punt_ring: 16,
        };
        let mut h = Harness::new(Switch::new(spec, HeapPool::new(8192, 2048), L::default()));
        h.sw.set_tx_slack(5_000);
        for i in 0..800u64 {
            let out = (i % 4) as u8;
            let class = [3, 3, 0, 6, 3, 0][(i % 6) as usize];
            let mut f = frame(out, class, 0, 100 + (i % 7) as usize * 50);
            if i % 16 == 6 {
                f[3] = 1 + ((i / 16) % 4) as u8; // a copy to port (i / 16) % 4
            }
            // Bursts of 32 frames, some arriving while the slow ports still have queues.
            h.put(
                base,
                1_000 + (i / 32) * [3_000, 40_000][((i / 128) % 2) as usize],
                &f,
            );
        }
        h.run_to_idle();
        let out = h
            .take()
            .into_iter()
            .map(|e| (e.port_idx, e.ts, e.data))
            .collect();
        let sw = &h.sw;
        let mut counters = Vec::new();
        let mut bypassed = Vec::new();
        for idx in base..base + 4 {
            counters.push(format!("{:?}", sw.port_stats(idx).unwrap()));
            bypassed.push(sw.port_stats(idx).unwrap().tx_bypassed);
            let tm = sw.tm(idx).unwrap();
            counters.push(format!("{:?}", tm.port_stats()));
            for c in 0..8 {
                counters.push(format!("{:?}", tm.class_stats(c)));
            }
        }
        let pfc = sw.pfc().unwrap().stats();
        assert!(pfc.xoff_sent[3] > 0, "PFC pauses: {pfc:?}");
        counters.push(format!("{pfc:?}"));
        (out, counters, bypassed)
    }
    for base in [0, 62] {
        let one = run::<Test>(base);
        let burst = run::<BurstTest>(base);
        assert!(one.0.len() > 800);
        assert!(
            burst.2.iter().all(|&b| b > 0),
            "every port bypasses: {:?}",
            burst.2
        );
        assert!(one.0 == burst.0, "burst ingress changed the output");
        assert_eq!(one.1, burst.1);
        assert_eq!(one.2, burst.2);
    }
}

#[test]
fn frames_put_come_back_in_their_own_allocations() {
    let mut h = switch(
        vec![port(0, 10 * GBPS, 0), port(1, 10 * GBPS, 0)],
        None,
        None,
    );
    let mut ptrs = Vec::new();
    for k in 0..3u8 {
        let mut f = frame(1, 0, 0, 200 + k as usize);
        f[20] = k;
        ptrs.push((f.as_ptr() as usize, f.capacity()));
        h.put_owned(0, 1_000, f);
    }
    // One with a generated copy: the copy is a pool buffer, copied out.
    let mut g = frame(1, 0, 0, 100);
    g[3] = 2;
    h.put_owned(0, 2_000, g);
    h.run_to_idle();
    let out = h.take();
    let mine: Vec<&Emitted> = on(&out, 1)
        .into_iter()
        .filter(|e| e.data.len() > 100)
        .collect();
    assert_eq!(mine.len(), 3);
    for (k, e) in mine.iter().enumerate() {
        assert_eq!(e.data, {
            let mut f = frame(1, 0, 0, 200 + k);
            f[20] = k as u8;
            f
        });
        assert_eq!((e.data.as_ptr() as usize, e.data.capacity()), ptrs[k]);
    }
    assert_eq!(
        on(&out, 1).iter().filter(|e| e.data.len() == 100).count(),
        1
    );
    assert_eq!(
        on(&out, 1).iter().filter(|e| e.data == [0xee; 64]).count(),
        1
    );
    assert_eq!(h.sw.pool().available(), 8192);
}

/// [`Test`]'s forwarding, but every frame is held ([`Action::Hold`]) and handed back to the
/// traffic manager ([`Ctx::inject`]) by the next poll, all at once: a per-flow queue's release
/// (MLCC's PFQs), which the engine flushes a poll's worth at a time, consecutive frames to one
/// idle port sharing a bypass run.
#[derive(Default)]
struct HoldTest {
    test: Test,
    held: Vec<Vec<u8>>,
    pending: Option<(u16, u8)>,
    held_meta: Vec<(u16, u8)>,
    at: Option<u64>,
}

impl Pipeline<HeapPool> for HoldTest {
    type Command = u8;

    fn ingress(
        &mut self,
        ctx: &mut Ctx<'_, HeapPool>,
        pkt: &mut <HeapPool as BufPool>::Buf,
    ) -> Action {
        match self.test.ingress(ctx, pkt) {
            Action::Forward => {
                self.pending = Some((pkt.meta().egress_port, pkt.meta().class));
                Action::Hold
            }
            a => a,
        }
    }

    fn hold(
        &mut self,
        ctx: &mut Ctx<'_, HeapPool>,
        pkt: <HeapPool as BufPool>::Buf,
    ) -> Result<(), <HeapPool as BufPool>::Buf> {
        let Some(m) = self.pending.take() else {
            return Err(pkt);
        };
        self.held.push(pkt.data().to_vec());
        self.held_meta.push(m);
        self.at = Some(ctx.now);
        ctx.pool().free(pkt);
        Ok(())
    }

    fn on_time(&mut self, ctx: &mut Ctx<'_, HeapPool>) {
        for (f, (port, class)) in self.held.drain(..).zip(self.held_meta.drain(..)) {
            let mut b = ctx.pool().alloc_from(&f).expect("a buffer");
            let m = b.meta_mut();
            m.egress_port = port;
            m.class = class;
            assert!(ctx.inject(b));
        }
        self.at = None;
    }

    fn next_deadline(&self) -> Option<u64> {
        self.at
    }

    fn held_packets(&self) -> u64 {
        self.held.len() as u64
    }
}

#[test]
fn released_frames_share_bypass_runs_as_forwarded_ones_go_alone() {
    // Frames of several ports and classes at each instant, a link clock with slack (several
    // frames find the link free at one `now`, then it catches up and they queue): released by
    // the pipeline a poll's worth at a time (one flush, shared bypass runs), they must leave as
    // the same frames forwarded one at a time at ingress do, with every counter the same.
    // (Without PFC: a released frame is not accounted to its ingress port.)
    type Run = (Vec<(usize, u64, Vec<u8>)>, Vec<String>);
    fn run<L: Pipeline<HeapPool> + Default>() -> Run {
        let spec = SwitchSpec {
            ports: vec![
                port(0, 10 * GBPS, 0),
                port(1, 10 * GBPS, 0),
                port(2, 10 * GBPS, 0),
            ],
            pfc: None,
            admission: Default::default(),
            shared_buffer_bytes: 64 << 20,
            recirc: None,
            emit_capacity: 64,
            command_ring: 16,
            punt_ring: 16,
        };
        let mut h = Harness::new(Switch::new(spec, HeapPool::new(8192, 2048), L::default()));
        h.sw.set_tx_slack(5_000);
        for k in 0..60u64 {
            let t = 1_000_000 + k * 1_500;
            for i in 0..6usize {
                let out = [2, 2, 1, 2, 1, 1][i];
                let class = [3, 3, 0, 6, 0, 3][(i + k as usize) % 6];
                h.put(0, t, &frame(out, class, 0, 300 + 100 * i));
            }
        }
        h.run_to_idle();
        let sw = &h.sw;
        let mut counters = Vec::new();
        for idx in 0..3 {
            counters.push(format!("{:?}", sw.port_stats(idx).unwrap()));
            let tm = sw.tm(idx).unwrap();
            counters.push(format!("{:?}", tm.port_stats()));
            for c in 0..8 {
                counters.push(format!("{:?}", tm.class_stats(c)));
            }
        }
        let s = sw.stats();
        counters.push(format!(
            "{} {} {:?}",
            s.buffer_bytes,
            s.buffer_max_bytes,
            s.drops.total()
        ));
        let st = sw.port_stats(1).unwrap();
        assert!(st.tx_bypassed > 0, "the slack lets frames bypass: {st:?}");
        let out = h
            .take()
            .into_iter()
            .map(|e| (e.port_idx, e.ts, e.data))
            .collect();
        (out, counters)
    }
    let (one, c1) = run::<Test>();
    let (held, c2) = run::<HoldTest>();
    assert_eq!(one.len(), 360);
    assert!(one == held, "releasing held frames changed the output");
    assert_eq!(c1, c2);
}

/// [`Test`] one packet at a time (no burst ingress), and a frame whose byte 5 is not 0 holds
/// its egress queue for byte 5 x 100 ns at ingress ([`Ctx::hold_queue`]), byte 6 not 0 releases
/// it ([`Ctx::release_queue`]). `ALONE`: every port's bypass run is closed before each frame's
/// ingress (by releasing a queue that does not exist), as when each frame was admitted alone;
/// otherwise the engine keeps the runs open over the burst.
#[derive(Default)]
struct QueueHoldTest<const ALONE: bool>(Test);

impl<P: BufPool, const ALONE: bool> Pipeline<P> for QueueHoldTest<ALONE> {
    type Command = u8;

    fn ingress(&mut self, ctx: &mut Ctx<'_, P>, pkt: &mut P::Buf) -> Action {
        if ALONE {
            for id in 0..4 {
                assert!(!ctx.release_queue(id, 200));
            }
        }
        let a = self.0.ingress(ctx, pkt);
        let d = pkt.data();
        let (hold, release) = (d[5], d[6]);
        let (port, queue) = (pkt.meta().egress_port, pkt.meta().egress_queue());
        if a == Action::Forward && hold != 0 {
            ctx.hold_queue(port, queue, ctx.now + hold as u64 * 100);
        }
        if a == Action::Forward && release != 0 {
            ctx.release_queue(port, queue);
        }
        a
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(128))]
    /// One packet at a time, the frames of a burst to an idle port share its bypass run across
    /// the burst (and what their ingress emitted joins it); against each frame admitted alone:
    /// the same frames at the same times, every counter the same. Four ports of different rates
    /// with a live link clock (several frames bypass at one `now`), classes mixed, copies
    /// emitted, PFC with a small XOFF, and stages holding and releasing queues at ingress
    /// (which must close the port's open run: it checked the queue was not held).
    #[test]
    fn one_at_a_time_runs_send_what_frames_alone_send(
        frames in proptest::collection::vec(
            (0u8..4, 0usize..3, 0usize..8, 0u8..12, 0u8..10, 0u8..10, 0u8..4),
            1..200,
        )
    ) {
        type Run = (Vec<(usize, u64, Vec<u8>)>, Vec<String>);
        fn run<L: Pipeline<HeapPool> + Default>(
            frames: &[(u8, usize, usize, u8, u8, u8, u8)],
        ) -> Run {
            let pfc = PfcParams {
                enabled_classes: 1 << 3,
                xoff_bytes: 6_000,
                xon_bytes: 3_000,
                headroom_bytes: 40_000,
                pause_quanta: 500,
                refresh_ns: 0,
                dynamic: None,
            };
            let spec = SwitchSpec {
                ports: vec![
                    port(0, 100 * GBPS, 1 << 3),
                    port(1, 100 * GBPS, 1 << 3),
                    port(2, 10 * GBPS, 1 << 3),
                    port(3, GBPS, 1 << 3),
                ],
                pfc: Some(pfc),
                admission: Default::default(),
                shared_buffer_bytes: 64 << 20,
                recirc: None,
                emit_capacity: 64,
                command_ring: 16,
                punt_ring: 16,
            };
            let mut h = Harness::new(Switch::new(spec, HeapPool::new(8192, 2048), L::default()));
            h.sw.set_tx_slack(5_000);
            let mut t = 1_000u64;
            for &(out, class, len, gen, hold, release, gap) in frames {
                t += [0, 0, 300, 5_000][gap as usize];
                let mut f = frame(out, [0, 3, 6][class], 0, 64 + len * 100);
                if gen >= 9 {
                    f[3] = gen - 8; // a copy to port gen - 9
                }
                if hold >= 8 {
                    f[5] = 1 + hold * 3;
                }
                if release >= 8 {
                    f[6] = 1;
                }
                h.put(0, t, &f);
            }
            h.run_to_idle();
            let out = h
                .take()
                .into_iter()
                .map(|e| (e.port_idx, e.ts, e.data))
                .collect();
            let sw = &h.sw;
            let mut counters = Vec::new();
            for idx in 0..4 {
                counters.push(format!("{:?}", sw.port_stats(idx).unwrap()));
                let tm = sw.tm(idx).unwrap();
                counters.push(format!("{:?}", tm.port_stats()));
                for c in 0..8 {
                    counters.push(format!("{:?}", tm.class_stats(c)));
                }
            }
            counters.push(format!("{:?}", sw.pfc().unwrap().stats()));
            counters.push(format!("{:?}", sw.stats()));
            (out, counters)
        }
        let alone = run::<QueueHoldTest<true>>(&frames);
        let runs = run::<QueueHoldTest<false>>(&frames);
        proptest::prop_assert!(alone.0 == runs.0, "the frames differ");
        proptest::prop_assert_eq!(alone.1, runs.1);
    }
}

/// [`Test`]'s forwarding; at every ingress and egress, [`Ctx::int_port_state`] of every port id
/// (two beyond the switch's) and queue (one beyond the eight) against the three accessors it
/// stands for.
#[derive(Default)]
struct IntStateTest {
    fwd: Test,
    checked: u64,
    /// Checks that saw a non-zero depth, tx byte count and rate.
    busy: u64,
    wrong: u64,
}

impl IntStateTest {
    fn check<P: BufPool>(&mut self, ctx: &mut Ctx<'_, P>) {
        for id in 0..4u16 {
            for q in 0..9u8 {
                let depth = ctx.queue_depth(id, q).map_or(0, |(b, _)| b);
                let want = (
                    depth,
                    ctx.port_tx_bytes(id),
                    ctx.port(id).map_or(0, |p| p.rate_bps),
                );
                let got = ctx.int_port_state(id, q);
                self.checked += 1;
                self.busy += (want.0 > 0 && want.1 > 0 && want.2 > 0) as u64;
                self.wrong += (got != want) as u64;
            }
        }
    }
}

impl<P: BufPool> Pipeline<P> for IntStateTest {
    type Command = u8;

    fn ingress(&mut self, ctx: &mut Ctx<'_, P>, pkt: &mut P::Buf) -> Action {
        self.check(ctx);
        self.fwd.ingress(ctx, pkt)
    }

    fn egress(&mut self, ctx: &mut Ctx<'_, P>, _pkt: &mut P::Buf) -> Action {
        self.check(ctx);
        Action::Forward
    }
}

#[test]
fn int_port_state_is_the_depth_tx_bytes_and_rate() {
    // Bursts into a 1 Gb/s port, classes mixed: its queues build and it sends, so the checks
    // see non-zero depths and byte counts on both ports of different rates.
    let mut h = into_slow_port::<IntStateTest>();
    for i in 0..120u64 {
        let f = frame(
            (i % 2) as u8,
            [0, 6, 3][(i % 3) as usize],
            0,
            100 + i as usize,
        );
        h.put(0, 1_000 + (i / 30) * 20_000, &f);
    }
    h.run_to_idle();
    let t = h.sw.pipeline();
    assert!(
        t.checked > 1_000 && t.busy > 0,
        "{} checks, {} busy",
        t.checked,
        t.busy
    );
    assert_eq!(t.wrong, 0);
}

/// `Switch::new` runs classic PFC only: a spec carrying another admission stage's parameters
/// (Bifrost's) is refused in debug builds, not built without that stage.
#[test]
#[cfg(debug_assertions)]
#[should_panic(expected = "classic PFC only")]
fn switch_new_refuses_a_stage_it_would_drop() {
    #[derive(Clone, Debug, PartialEq)]
    struct OtherStage(u64);
    let mut spec = SwitchSpec {
        ports: vec![port(0, 100_000_000_000, 0)],
        ..SwitchSpec::default()
    };
    spec.admission.insert(OtherStage(1));
    let _ = Switch::new(spec, HeapPool::new(8, 2048), Test::default());
}
