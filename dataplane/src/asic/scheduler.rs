//! The scheduler interface every scheduler implements ([`Scheduler`]) and what a scheduler sees of
//! its queues ([`QueueView`]).
//!
//! A scheduler sees its queues only through a [`QueueView`]: the number of queues and, per queue, the
//! length of the head packet, or `None` when the queue is empty *or not eligible* (e.g. paused by
//! PFC). [`Scheduler::pick`] returns the queue to serve, and the caller then dequeues exactly one
//! packet (the head whose length the view reported) from it: stateful schedulers (WRR, DRR) charge
//! the pick to that queue. Every scheduler here is work-conserving: `pick` returns `None` only when
//! no queue is eligible and non-empty.

/// What a scheduler sees of its queues.
pub trait QueueView {
    /// Number of queues (indices `0..n()`).
    fn n(&self) -> usize;
    /// Length in bytes of the head packet of queue `q`; `None` if the queue is empty, not
    /// eligible, or `q >= n()`.
    fn head_len(&self, q: usize) -> Option<u32>;
    /// Bit `q` set = `head_len(q)` is `Some` (queues `0..min(n(), 64)`). Views that keep this
    /// mask (the traffic manager's) override it; the default asks `head_len` for each queue.
    #[inline]
    fn eligible_mask(&self) -> u64 {
        (0..self.n().min(64))
            .filter(|&q| self.head_len(q).is_some())
            .fold(0, |m, q| m | 1 << q)
    }
}

/// A slice of head lengths is a view (handy for tests and small users).
impl QueueView for [Option<u32>] {
    #[inline]
    fn n(&self) -> usize {
        self.len()
    }
    #[inline]
    fn head_len(&self, q: usize) -> Option<u32> {
        self.get(q).copied().flatten()
    }
}

/// A view restricted to the queues whose bit is clear in `exclude` (queues >= 64 are never
/// excluded).
#[derive(Clone, Copy, Debug)]
pub struct Masked<'a, V: QueueView + ?Sized> {
    /// The underlying view.
    pub view: &'a V,
    /// Bit `q` set = queue `q` appears empty.
    pub exclude: u64,
}

impl<V: QueueView + ?Sized> QueueView for Masked<'_, V> {
    #[inline]
    fn n(&self) -> usize {
        self.view.n()
    }
    #[inline]
    fn head_len(&self, q: usize) -> Option<u32> {
        if q < 64 && self.exclude & (1u64 << q) != 0 {
            None
        } else {
            self.view.head_len(q)
        }
    }
    #[inline]
    fn eligible_mask(&self) -> u64 {
        self.view.eligible_mask() & !self.exclude
    }
}

/// A packet scheduler over a fixed set of queues.
pub trait Scheduler {
    /// The queue to serve next, or `None` when no queue is eligible and non-empty. The caller must
    /// dequeue the head of the returned queue (its length is what the view reported): the pick is
    /// charged to that queue.
    fn pick<V: QueueView + ?Sized>(&mut self, view: &V) -> Option<usize>;
}
