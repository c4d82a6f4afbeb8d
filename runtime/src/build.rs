//! From a validated [`Config`] to the dataplane's building blocks: the switch spec (ports and
//! their traffic managers, PFC, shared buffer, and what the registered mechanisms add to it).

use crate::mechanism::MechanismSet;
use longhaul_control::config::{Config, SchedulerKind};
use longhaul_dataplane::asic::pfc::{DynamicXoff, PfcParams};
use longhaul_dataplane::engine::{PortInfo, PortSpec, SwitchSpec};
use longhaul_dataplane::packet::NUM_CLASSES;
use longhaul_dataplane::tm::{RedParams, TmClassConfig, TmConfig, TmSched, IDENTITY_PRIORITIES};

/// Smallest frame a queue slot is sized for: a class of `limit_bytes` holds at most
/// `limit_bytes / MIN_FRAME` packets (bounded further by the pool size).
const MIN_FRAME: u64 = 64;

/// Packets the control FIFO of each port holds (PFC/PAUSE frames).
const CONTROL_QUEUE_PKTS: u32 = 64;

/// Most packets a stage may generate while one burst is processed.
pub const EMIT_CAPACITY: usize = 256;

/// The traffic manager of port `i` of `cfg`.
pub fn tm_config(cfg: &Config, i: usize) -> TmConfig {
    let port = &cfg.ports[i];
    let q = &cfg.qos;
    let mut classes = [TmClassConfig::default(); NUM_CLASSES];
    for (c, cc) in q.classes.iter().enumerate() {
        let pkts = (cc.limit_bytes / MIN_FRAME + 1).min(cfg.switch.pool_buffers as u64);
        classes[c] = TmClassConfig {
            limit_bytes: cc.limit_bytes,
            limit_pkts: pkts.min(u32::MAX as u64) as u32,
            lossless: cc.lossless,
            ecn: cc.ecn.map(|e| RedParams {
                kmin_bytes: e.kmin_bytes,
                kmax_bytes: e.kmax_bytes,
                pmax: e.pmax,
            }),
            ecn_at_dequeue: cc.ecn.is_some_and(|e| e.at_dequeue),
        };
    }
    let (strict_mask, sched) = match q.scheduler {
        SchedulerKind::Strict => (0xff, TmSched::Strict),
        SchedulerKind::Wrr => (
            strict_mask(&q.strict_classes),
            TmSched::Wrr { weights: q.weights },
        ),
        SchedulerKind::Drr => (
            strict_mask(&q.strict_classes),
            TmSched::Drr {
                quanta: q.weights.map(|w| w.saturating_mul(q.drr_quantum_bytes)),
            },
        ),
    };
    TmConfig {
        rate_bps: port.rate_bps,
        frame_overhead_bytes: port.frame_overhead as u32,
        classes,
        strict_mask,
        sched,
        control_queue_pkts: CONTROL_QUEUE_PKTS,
        // Each port's markers get their own stream, all derived from the one configured seed.
        seed: cfg.switch.seed.wrapping_add((port.id as u64) << 8),
        queue_priority: IDENTITY_PRIORITIES,
    }
}

fn strict_mask(classes: &[u8]) -> u8 {
    classes
        .iter()
        .filter(|&&c| (c as usize) < NUM_CLASSES)
        .fold(0u8, |m, &c| m | (1 << c))
}

/// The PFC generator's parameters, when PFC is enabled.
pub fn pfc_params(cfg: &Config) -> Option<PfcParams> {
    if !cfg.pfc.enabled {
        return None;
    }
    let enabled_classes = cfg
        .qos
        .classes
        .iter()
        .enumerate()
        .filter(|(_, c)| c.lossless)
        .fold(0u8, |m, (i, _)| m | (1 << i));
    // The shared buffer dynamic thresholds divide: what the headroom of every (port, lossless
    // class) leaves of the switch's buffer.
    let reserved =
        cfg.ports.len() as u64 * enabled_classes.count_ones() as u64 * cfg.pfc.headroom_bytes;
    Some(PfcParams {
        enabled_classes,
        xoff_bytes: cfg.pfc.xoff_bytes,
        xon_bytes: cfg.pfc.xon_bytes,
        headroom_bytes: cfg.pfc.headroom_bytes,
        pause_quanta: cfg.pfc.pause_quanta,
        refresh_ns: cfg.pfc.refresh_ns,
        dynamic: cfg.pfc.dynamic_alpha.map(|a| DynamicXoff {
            alpha_1024: (a * 1024.0).round().max(1.0) as u32,
            pool_bytes: cfg.switch.buffer_bytes.saturating_sub(reserved),
        }),
    })
}

/// The switch spec of `cfg`: the generic switch, then each registered mechanism's additions
/// ([`Mechanism::extend_spec`](crate::Mechanism::extend_spec): a recirculation port, a PFC
/// replacement, ...).
pub fn switch_spec(cfg: &Config, mechanisms: &dyn MechanismSet) -> SwitchSpec {
    let mut spec = SwitchSpec {
        ports: (0..cfg.ports.len())
            .map(|i| {
                let p = &cfg.ports[i];
                PortSpec {
                    info: PortInfo {
                        id: p.id,
                        name: p.name.clone(),
                        mac: p.mac,
                        rate_bps: p.rate_bps,
                        mtu: p.mtu,
                    },
                    tm: tm_config(cfg, i),
                }
            })
            .collect(),
        pfc: pfc_params(cfg),
        shared_buffer_bytes: cfg.switch.buffer_bytes,
        emit_capacity: EMIT_CAPACITY,
        command_ring: cfg.control.command_ring,
        punt_ring: cfg.control.punt_ring,
        ..SwitchSpec::default()
    };
    for m in mechanisms.mechanisms() {
        m.extend_spec(cfg, &mut spec);
    }
    spec
}

/// The switch spec of worker `worker` of `workers` (`[dpdk] workers`): each worker runs its own
/// switch; with `worker_rate = "split"` (the default) its traffic manager paces every port at
/// `rate / workers`, so the workers together never send faster than the link and queues build
/// where ECN and PFC act. RED streams differ per worker (seed + worker).
pub fn worker_switch_spec(
    cfg: &Config,
    mechanisms: &dyn MechanismSet,
    worker: usize,
    workers: usize,
) -> SwitchSpec {
    let mut spec = switch_spec(cfg, mechanisms);
    let split = cfg
        .dpdk
        .as_ref()
        .is_some_and(|d| d.worker_rate == longhaul_control::config::WorkerRate::Split);
    for p in spec.ports.iter_mut() {
        if workers > 1 && split {
            p.tm.rate_bps = (p.tm.rate_bps / workers as u64).max(1);
        }
        p.tm.seed = p.tm.seed.wrapping_add((worker as u64) << 32);
    }
    spec
}
