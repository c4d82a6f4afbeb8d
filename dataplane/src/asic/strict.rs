//! Strict priority: the highest-index eligible queue first.

use super::scheduler::{QueueView, Scheduler};

/// Strict priority: the highest-index eligible non-empty queue wins. Stateless; starves lower
/// queues by design.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StrictPriority;

impl Scheduler for StrictPriority {
    #[inline]
    fn pick<V: QueueView + ?Sized>(&mut self, view: &V) -> Option<usize> {
        (0..view.n()).rev().find(|&q| view.head_len(q).is_some())
    }
}
