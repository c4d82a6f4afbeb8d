//! `[bifrost]`: Bifrost on the downstream end of long-haul links (paper 004, sections IV and V):
//! the raw section as the file has it, its validation, and the validated [`BifrostConfig`] the
//! engine's generator is built from. Keys and defaults: docs/config.md (keep the two in step).

use longhaul_control::config::{
    span, Config, PortConfig, PortRef, TypedSection, Validator, MAX_RATE_GBPS, MIN_RATE_GBPS, S,
};
use serde::Deserialize;

/// The section's table.
pub const NAME: &str = "bifrost";

// Defaults (docs/config.md): T = 10 us as in the paper (section V); k is not given by the paper
// ("not sensitive", section IV-D): 8.
const DEFAULT_SLOT_NS: i64 = 10_000;
const DEFAULT_K: i64 = 8;
const MAX_NS: i64 = 10_000_000_000;
/// Frames per slot are built in one fixed action buffer (asic::pfc::ACTION_BUF_CAP).
const MAX_PORTS: usize = 16;

/// The `[bifrost]` section.
pub const SECTION: TypedSection<RawBifrost, BifrostConfig> = TypedSection::new(NAME, validate);

// ---- validated ----------------------------------------------------------------------------

/// Bifrost on the downstream end of long-haul links (paper 004, sections IV and V): every slot T,
/// Algorithm 1 per governed (port, priority) instead of classic XOFF/XON.
#[derive(Clone, Debug, PartialEq)]
pub struct BifrostConfig {
    /// Governed ingress ports (ids).
    pub ports: Vec<u16>,
    /// Governed priorities (lossless classes).
    pub priorities: Vec<u8>,
    /// T, ns.
    pub slot_ns: u64,
    /// D, the one-way delay of the link, ns.
    pub one_way_delay_ns: u64,
    /// Rs, the link rate, b/s.
    pub rate_bps: u64,
    /// Δ = Rs * 2D, bytes (derived).
    pub bdp_bytes: u64,
    /// Rs * T, bytes (derived).
    pub slot_bytes: u64,
    /// H: the buffer reserved per (port, priority), >= Δ + 2*Rs*T.
    pub buffer_bytes: u64,
    /// The leak check runs every k slots.
    pub k: u32,
    /// Headroom above H for leaked bytes (section IV-D: k * MTU).
    pub leak_headroom_bytes: u64,
    /// The largest frame on a governed port on the wire (MTU + frame overhead), bytes (derived):
    /// what a pause frame arriving during a transmission can let through (section IV-D).
    pub frame_bytes: u64,
}

// ---- as in the file ------------------------------------------------------------------------

/// `[bifrost]` (paper 004).
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct RawBifrost {
    pub ports: Option<S<Vec<S<PortRef>>>>,
    pub priorities: Option<S<Vec<S<i64>>>>,
    pub slot_ns: Option<S<i64>>,
    pub one_way_delay_ns: Option<S<i64>>,
    pub rate_gbps: Option<S<f64>>,
    pub buffer_bytes: Option<S<i64>>,
    pub k: Option<S<i64>>,
    pub leak_headroom_bytes: Option<S<i64>>,
}

// ---- validation ---------------------------------------------------------------------------

/// Validates `[bifrost]` (`b`, as read from the file) against the generic config.
fn validate(cx: &mut Validator<'_>, b: Option<&RawBifrost>, cfg: &Config) -> Option<BifrostConfig> {
    let (sw, ports, qos) = (&cfg.switch, &cfg.ports, &cfg.qos);
    let b = b?;
    let k = |s: &str| format!("bifrost.{s}");
    // Ports.
    let mut ids: Vec<u16> = Vec::new();
    match &b.ports {
        None => cx.err(k("ports"), None, "missing (this key is required)"),
        Some(list) => {
            if list.get_ref().is_empty() {
                cx.err(k("ports"), span(list), "must name at least one port");
            }
            if list.get_ref().len() > MAX_PORTS {
                cx.err(
                    k("ports"),
                    span(list),
                    format!("at most {MAX_PORTS} ports can be governed"),
                );
            }
            for (i, r) in list.get_ref().iter().enumerate() {
                let key = format!("bifrost.ports[{i}]");
                if let Some(id) = cx.port_ref(&key, r) {
                    if ids.contains(&id) {
                        cx.err(key, span(r), "port listed twice");
                    } else {
                        ids.push(id);
                    }
                }
            }
        }
    }
    // Priorities: lossless classes only (PFC's priority queues, section V).
    let mut priorities: Vec<u8> = Vec::new();
    match &b.priorities {
        None => cx.err(k("priorities"), None, "missing (this key is required)"),
        Some(list) => {
            if list.get_ref().is_empty() {
                cx.err(
                    k("priorities"),
                    span(list),
                    "must name at least one priority",
                );
            }
            for (i, p) in list.get_ref().iter().enumerate() {
                let key = format!("bifrost.priorities[{i}]");
                let Some(c) = cx.int(&key, p, 0, 7) else {
                    continue;
                };
                let c = c as u8;
                if priorities.contains(&c) {
                    cx.err(key, span(p), "priority listed twice");
                } else if !qos.classes[c as usize].lossless {
                    cx.err(
                            key,
                            span(p),
                            format!("class {c} is not lossless (qos.classes: lossless = true): Bifrost governs lossless priorities only"),
                        );
                } else {
                    priorities.push(c);
                }
            }
        }
    }
    let governed: Vec<&PortConfig> = ports.iter().filter(|p| ids.contains(&p.id)).collect();
    // Rate: the link rate Rs (default: the first governed port's).
    let port_rate = governed.first().map_or(100_000_000_000, |p| p.rate_bps);
    let rate_bps = match &b.rate_gbps {
        None => port_rate,
        Some(r) => {
            let g = *r.get_ref();
            if (MIN_RATE_GBPS..=MAX_RATE_GBPS).contains(&g) {
                (g * 1e9).round() as u64
            } else {
                cx.err(
                    k("rate_gbps"),
                    span(r),
                    format!("{g} is out of range: must be {MIN_RATE_GBPS} to {MAX_RATE_GBPS}"),
                );
                port_rate
            }
        }
    };
    let slot_ns = cx.int_or(&k("slot_ns"), &b.slot_ns, DEFAULT_SLOT_NS, 100, MAX_NS) as u64;
    let d_ns = match cx.need(&k("one_way_delay_ns"), &b.one_way_delay_ns) {
        Some(v) => cx.int(&k("one_way_delay_ns"), v, 1, MAX_NS).unwrap_or(1) as u64,
        None => 1,
    };
    let kk = cx.int_or(&k("k"), &b.k, DEFAULT_K, 1, 1_000_000) as u32;
    let slot_bytes = bytes_at(rate_bps, slot_ns);
    let bdp_bytes = bytes_at(rate_bps, 2 * d_ns);
    if b.one_way_delay_ns.is_some() && slot_ns >= d_ns {
        cx.err(
                k("slot_ns"),
                b.slot_ns.as_ref().and_then(span),
                format!("T = {slot_ns} ns must be less than the one-way delay ({d_ns} ns), or the pause frames cannot react in time (section V)"),
            );
    }
    if slot_bytes.div_ceil(64) > u16::MAX as u64 {
        cx.err(
                k("slot_ns"),
                b.slot_ns.as_ref().and_then(span),
                format!("Rs*T = {slot_bytes} bytes is {} pause quanta: a pause frame carries at most 65535 (section V: Rs*T < 4 MB)", slot_bytes.div_ceil(64)),
            );
    }
    let largest_frame = governed
        .iter()
        .map(|p| u64::from(p.mtu) + u64::from(p.frame_overhead))
        .max()
        .unwrap_or(0);
    if slot_bytes < largest_frame {
        // Grants are whole frames: a slot shorter than the largest frame grants none, the
        // upstream stays paused for good and nothing drains.
        let min_ns = (largest_frame as u128 * 8_000_000_000).div_ceil(rate_bps.max(1) as u128);
        cx.err(
            k("slot_ns"),
            b.slot_ns.as_ref().and_then(span),
            format!(
                "T = {slot_ns} ns carries {slot_bytes} bytes at {} Gb/s, less than the largest \
                 frame of the governed ports ({largest_frame} bytes: mtu + frame_overhead): \
                 a slot must grant at least one whole frame (T >= {min_ns} ns)",
                rate_bps as f64 / 1e9
            ),
        );
    }
    let bound = bdp_bytes + 2 * slot_bytes;
    let h = match cx.need(&k("buffer_bytes"), &b.buffer_bytes) {
        Some(v) => {
            let h = cx.int(&k("buffer_bytes"), v, 1, 1 << 40).unwrap_or(0) as u64;
            if h != 0 && h < bound {
                cx.err(
                        k("buffer_bytes"),
                        span(v),
                        format!(
                            "H = {h} bytes is less than BDP + 2*Rs*T = {bdp_bytes} + 2*{slot_bytes} = {bound} bytes \
                             (Theorem 1 needs H >= BDP + 2*Rs*T; BDP = Rs * 2 * one_way_delay at {} Gb/s)",
                            rate_bps as f64 / 1e9
                        ),
                    );
            }
            h
        }
        None => 0,
    };
    let leak_headroom_bytes = cx.int_or(
        &k("leak_headroom_bytes"),
        &b.leak_headroom_bytes,
        (kk as u64 * largest_frame).min(1 << 40) as i64,
        0,
        1 << 40,
    ) as u64;
    let limit = h + leak_headroom_bytes;
    for &c in &priorities {
        let cl = qos.classes[c as usize].limit_bytes;
        if h != 0 && cl < limit {
            cx.err(
                    k("buffer_bytes"),
                    b.buffer_bytes.as_ref().and_then(span),
                    format!("class {c}'s queue limit ({cl} bytes) is less than bifrost.buffer_bytes + leak_headroom_bytes ({h} + {leak_headroom_bytes} = {limit}): it would tail-drop before Bifrost pauses"),
                );
        }
    }
    if h != 0 && sw.buffer_bytes < limit {
        cx.err(
                k("buffer_bytes"),
                b.buffer_bytes.as_ref().and_then(span),
                format!("switch.buffer_bytes ({}) is less than bifrost.buffer_bytes + leak_headroom_bytes ({limit})", sw.buffer_bytes),
            );
    }
    Some(BifrostConfig {
        ports: ids,
        priorities,
        slot_ns,
        one_way_delay_ns: d_ns,
        rate_bps,
        bdp_bytes,
        slot_bytes,
        buffer_bytes: h,
        k: kk,
        leak_headroom_bytes,
        frame_bytes: largest_frame,
    })
}

/// Bytes a link of `rate_bps` carries in `ns` (rounded down).
fn bytes_at(rate_bps: u64, ns: u64) -> u64 {
    (rate_bps as u128 * ns as u128 / 8_000_000_000) as u64
}
