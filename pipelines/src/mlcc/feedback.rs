//! The sender-side DCI of MLCC (paper 001, section 3.2.1, the "DCI-switch near-source feedback
//! loop"): "when the DCI-switch receives a cross-datacenter data packet, it reads the INT
//! information and clears the INT information in the data packet. The DCI-switch encapsulates
//! the INT information into the Switch-INT packet through the CNP message and then sends it to
//! the sender."
//!
//! For DC -> WAN data carrying the MLCC INT: a Switch-INT (`wire::mlcc::build_switch_int`)
//! when the data's PSN is a multiple of `psn_stride` (stateless thinning; 1 = every packet, as
//! an HPCC sender expects one INT sample per ACK), routed back to the sender like any packet;
//! then the INT is stripped, so the data leaves with UDP port 4791 and its original ICRC.

use super::config::FeedbackConfig;
use crate::baseline::Forwarding;
use longhaul_dataplane::engine::Ctx;
use longhaul_dataplane::packet::{BufPool, PacketBuf};
use longhaul_dataplane::wire::mlcc::{self, MlccInt};
use longhaul_dataplane::wire::roce::Bth;

longhaul_dataplane::counters! {
    /// Counters of the sender-side role.
    #[derive(Copy)]
    pub struct FeedbackStats: "mlcc.feedback" {
        /// Switch-INT packets sent.
        pub switch_ints: u64,
        /// Switch-INT packets with no route to the sender (not sent).
        pub no_route: u64,
        /// Switch-INT packets not sent for want of a buffer.
        pub no_buffer: u64,
    }
}

/// The sender-side role.
pub struct Feedback {
    cfg: FeedbackConfig,
    /// The class Switch-INT packets go in (their DSCP through the QoS map).
    class: u8,
    scratch: [u8; 512],
    pub stats: FeedbackStats,
}

impl Feedback {
    pub fn new(cfg: &FeedbackConfig, fwd: &Forwarding) -> Self {
        Feedback {
            cfg: cfg.clone(),
            class: fwd.class_of_dscp(cfg.dscp),
            scratch: [0; 512],
            stats: FeedbackStats::default(),
        }
    }

    /// DC -> WAN data `frame` (IP header at `l3`, its MLCC INT located as `m`, read before the
    /// caller strips it) that arrived on `in_port`: the Switch-INT when due.
    pub fn on_data<P: BufPool>(
        &mut self,
        ctx: &mut Ctx<'_, P>,
        fwd: &mut Forwarding,
        frame: &[u8],
        l3: usize,
        m: &MlccInt,
        in_port: u16,
    ) {
        let Some(psn) = frame
            .get(m.bth_off..)
            .and_then(|b| Bth::new_checked(b).ok())
            .map(|b| b.psn())
        else {
            return;
        };
        if psn % self.cfg.psn_stride != 0 {
            return;
        }
        // Built as if it arrived on the data's ingress port, then sent to the sender
        // (`Forwarding::route_generated`: routed, or back out of a wire port).
        let Some((src, dst)) = fwd.reply_macs(in_port, frame) else {
            return;
        };
        let Ok(n) =
            mlcc::build_switch_int(frame, l3, m, self.cfg.dscp, src, dst, &mut self.scratch)
        else {
            return;
        };
        let Some(mut g) = ctx.pool().alloc_from(&self.scratch[..n]) else {
            self.stats.no_buffer += 1;
            return;
        };
        g.meta_mut().ingress_port = in_port;
        if !fwd.route_generated(ctx, &mut g) {
            self.stats.no_route += 1;
            ctx.pool().free(g);
            return;
        }
        g.meta_mut().class = self.class;
        self.stats.switch_ints += 1;
        ctx.emit(g);
    }

    /// Counters by name.
    pub fn counters(&self, out: &mut dyn FnMut(&'static str, u64)) {
        self.stats.for_each(out);
    }
}
