//! The baseline's ingress as one skeleton with named insertion points, which every pipeline that
//! forwards like the baseline fills instead of sequencing the stages itself:
//!
//! ```text
//! before_parse -> parse -> neighbours, anomaly policy -> classify -> after_classify
//!              -> lookup -> after_lookup -> rewrite -> after_rewrite
//! ```
//!
//! Each point is a method of [`Ingress`] with a default that does nothing, so a mechanism writes
//! only its own stages: THEMIS's recirculated packets at `before_parse`, its daemon punts at
//! `after_classify`, its SYN cookies and PNP at `after_lookup`, TRP at `after_rewrite`. The
//! skeleton is generic over the implementation and always inlined: each pipeline's ingress is
//! monomorphized, with no call or branch for a point it leaves empty.
//!
//! Classify sets the packet's class and its queue to the class's ([`QUEUE_OF_CLASS`]); a stage
//! after it may pick another queue (Reflex's controlled queue).

use super::{Egress, Forwarding};
use longhaul_dataplane::engine::{Action, Ctx};
use longhaul_dataplane::packet::{BufPool, PacketBuf, QUEUE_OF_CLASS};
use longhaul_dataplane::wire::parse::Parsed;

/// A pipeline's stages at the insertion points of the baseline's ingress ([`ingress`]).
pub trait Ingress<P: BufPool> {
    /// What a packet's stages hand from `before_parse` to the later points (`()` for most).
    type State: Default;

    /// [`Forwarding::lookup_stage_with`]'s `PORT_MAC_ENDS`: for a pipeline whose frames commonly
    /// come to another of its ports' MACs.
    const PORT_MAC_ENDS: bool = false;

    /// The baseline's forwarding stages.
    fn fwd(&mut self) -> &mut Forwarding;

    /// Before the parse. `Err`: the packet's fate (the skeleton stops).
    #[inline(always)]
    fn before_parse(
        &mut self,
        _ctx: &mut Ctx<'_, P>,
        _pkt: &mut P::Buf,
    ) -> Result<Self::State, Action> {
        Ok(Self::State::default())
    }

    /// After classify (`meta.class` set), before the lookup. `Some`: the packet's fate.
    #[inline(always)]
    fn after_classify(
        &mut self,
        _ctx: &mut Ctx<'_, P>,
        _pkt: &mut P::Buf,
        _p: &Parsed,
        _st: &mut Self::State,
    ) -> Option<Action> {
        None
    }

    /// After the lookup, before the rewrite: `Ok` with the egress to rewrite for (the
    /// lookup's, or another), `Err` with the packet's fate.
    #[inline(always)]
    fn after_lookup(
        &mut self,
        _ctx: &mut Ctx<'_, P>,
        _pkt: &mut P::Buf,
        _p: &Parsed,
        e: Egress,
        _st: &mut Self::State,
    ) -> Result<Egress, Action> {
        Ok(e)
    }

    /// After the rewrite (`meta.egress_port` set): the packet's fate.
    #[inline(always)]
    fn after_rewrite(
        &mut self,
        _ctx: &mut Ctx<'_, P>,
        _pkt: &mut P::Buf,
        _p: &Parsed,
        _e: Egress,
        _st: Self::State,
    ) -> Action {
        Action::Forward
    }
}

/// The whole ingress of one packet through `x`'s insertion points.
#[inline(always)]
pub fn ingress<P: BufPool, I: Ingress<P>>(
    x: &mut I,
    ctx: &mut Ctx<'_, P>,
    pkt: &mut P::Buf,
) -> Action {
    let st = match x.before_parse(ctx, pkt) {
        Ok(s) => s,
        Err(a) => return a,
    };
    let p = x.fwd().parse_meta(pkt);
    ingress_parsed(x, ctx, pkt, &p, st)
}

/// [`ingress`] after the parse (`p`, recorded in the metadata): for a pipeline that parses a
/// burst's packets first (Reflex's burst ingress).
#[inline(always)]
pub fn ingress_parsed<P: BufPool, I: Ingress<P>>(
    x: &mut I,
    ctx: &mut Ctx<'_, P>,
    pkt: &mut P::Buf,
    p: &Parsed,
    mut st: I::State,
) -> Action {
    let fwd = x.fwd();
    let routable = match fwd.admit_stage(ctx, pkt, p) {
        Ok(r) => r,
        Err(a) => return a,
    };
    let class = fwd.classify(p);
    let m = pkt.meta_mut();
    m.class = class;
    m.queue = QUEUE_OF_CLASS;
    if let Some(a) = x.after_classify(ctx, pkt, p, &mut st) {
        return a;
    }
    let fwd = x.fwd();
    let looked = if I::PORT_MAC_ENDS {
        fwd.lookup_stage_with::<P, true>(ctx, pkt, p, routable)
    } else {
        fwd.lookup_stage_with::<P, false>(ctx, pkt, p, routable)
    };
    let egress = match looked {
        Ok(e) => e,
        Err(r) => return Action::Drop(r),
    };
    let egress = match x.after_lookup(ctx, pkt, p, egress, &mut st) {
        Ok(e) => e,
        Err(a) => return a,
    };
    if let Err(r) = x.fwd().apply_stage(pkt, p, egress) {
        return Action::Drop(r);
    }
    x.after_rewrite(ctx, pkt, p, egress, st)
}

/// The baseline itself: no stage at any point.
impl<P: BufPool> Ingress<P> for Forwarding {
    type State = ();

    #[inline(always)]
    fn fwd(&mut self) -> &mut Forwarding {
        self
    }
}
