//! Mirror / clone sessions, as PSA's clone sessions (`clone_session_id`).
//!
//! A stage clones a packet into a session; the copy (optionally truncated) comes from the buffer
//! pool with the original's metadata, `FLAG_CLONE` set, and the session's egress port and class.
//! The stage then rewrites the copy into a new packet (THEMIS CNP, Themis-D NACK, Reflex pseudo-ACK,
//! MLCC Switch-INT) and forwards it. The session table is allocated once in
//! [`MirrorSessions::new`]; cloning allocates only from the caller's preallocated pool.

use crate::packet::{BufPool, PacketBuf, NUM_CLASSES};

/// Where a clone goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MirrorSession {
    /// Egress port written into the clone's metadata. [`crate::packet::PORT_NONE`] is allowed:
    /// a later stage forwards the clone.
    pub egress_port: u16,
    /// Traffic class written into the clone's metadata; must be `< NUM_CLASSES`.
    pub class: u8,
    /// Copy at most this many bytes of the frame (`None`: the whole frame).
    pub truncate: Option<usize>,
}

/// Why a session could not be configured.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MirrorError {
    /// Session id `>=` the number of sessions created in `new`.
    BadSession,
    /// Class `>= NUM_CLASSES`.
    BadClass,
}

impl core::fmt::Display for MirrorError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            MirrorError::BadSession => f.write_str("mirror session id out of range"),
            MirrorError::BadClass => f.write_str("mirror session class out of range"),
        }
    }
}

impl std::error::Error for MirrorError {}

/// Counters of [`MirrorSessions`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MirrorStats {
    /// Clones made.
    pub clones: u64,
    /// Clones whose frame was cut by the session's `truncate`.
    pub truncated: u64,
    /// Clone requests for a session id out of range or not configured (no clone made).
    pub unknown_session: u64,
    /// Clone requests refused by the pool (exhausted, or the frame does not fit a buffer).
    pub alloc_failures: u64,
    /// `configure` calls refused (bad id or class).
    pub config_refused: u64,
}

/// A fixed set of clone sessions, ids `0..num_sessions`.
#[derive(Clone, Debug)]
pub struct MirrorSessions {
    sessions: Box<[Option<MirrorSession>]>,
    per_session: Box<[u64]>,
    stats: MirrorStats,
}

impl MirrorSessions {
    /// `num_sessions` unconfigured sessions (ids above `u16::MAX` are unreachable, so at most
    /// 65536 are created).
    pub fn new(num_sessions: usize) -> Self {
        let n = num_sessions.min(u16::MAX as usize + 1);
        MirrorSessions {
            sessions: vec![None; n].into_boxed_slice(),
            per_session: vec![0; n].into_boxed_slice(),
            stats: MirrorStats::default(),
        }
    }

    /// Number of session ids.
    #[inline]
    pub fn num_sessions(&self) -> usize {
        self.sessions.len()
    }

    /// Configure (or reconfigure) session `id`. Refused (and counted in `config_refused`) when
    /// `id` is out of range or `session.class >= NUM_CLASSES`; the old configuration then stays.
    pub fn configure(&mut self, id: u16, session: MirrorSession) -> Result<(), MirrorError> {
        if session.class as usize >= NUM_CLASSES {
            self.stats.config_refused += 1;
            return Err(MirrorError::BadClass);
        }
        match self.sessions.get_mut(id as usize) {
            Some(s) => {
                *s = Some(session);
                Ok(())
            }
            None => {
                self.stats.config_refused += 1;
                Err(MirrorError::BadSession)
            }
        }
    }

    /// Unconfigure session `id`; returns its old configuration (`None` when it had none or `id`
    /// is out of range).
    pub fn remove(&mut self, id: u16) -> Option<MirrorSession> {
        self.sessions.get_mut(id as usize)?.take()
    }

    /// The configuration of session `id`.
    #[inline]
    pub fn get(&self, id: u16) -> Option<MirrorSession> {
        self.sessions.get(id as usize).copied().flatten()
    }

    /// Clone `pkt` into session `id`: a new buffer from `pool` with the frame (cut to the
    /// session's `truncate`), the original metadata with `FLAG_CLONE` set, and `egress_port` and
    /// `class` from the session. `None` when the session is unknown (counted in
    /// `unknown_session`) or the pool cannot supply a buffer (counted in `alloc_failures`); the
    /// original packet is never touched.
    pub fn clone_packet<P: BufPool>(
        &mut self,
        pool: &mut P,
        id: u16,
        pkt: &P::Buf,
    ) -> Option<P::Buf> {
        let Some(session) = self.get(id) else {
            self.stats.unknown_session += 1;
            return None;
        };
        let max_len = session.truncate.unwrap_or(usize::MAX);
        let Some(mut c) = pool.clone_pkt(pkt, max_len) else {
            self.stats.alloc_failures += 1;
            return None;
        };
        let m = c.meta_mut();
        m.egress_port = session.egress_port;
        m.class = session.class;
        self.stats.clones += 1;
        if pkt.len() > max_len {
            self.stats.truncated += 1;
        }
        if let Some(n) = self.per_session.get_mut(id as usize) {
            *n += 1;
        }
        Some(c)
    }

    /// Clones made through session `id` (`None` when `id` is out of range).
    #[inline]
    pub fn session_clones(&self, id: u16) -> Option<u64> {
        self.per_session.get(id as usize).copied()
    }

    /// Counters.
    #[inline]
    pub fn stats(&self) -> MirrorStats {
        self.stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::{HeapPool, FLAG_CLONE, PORT_NONE};

    fn session(port: u16, class: u8, truncate: Option<usize>) -> MirrorSession {
        MirrorSession {
            egress_port: port,
            class,
            truncate,
        }
    }

    #[test]
    fn clone_sets_session_meta_and_truncates() {
        let mut pool = HeapPool::new(4, 256);
        let mut m = MirrorSessions::new(4);
        m.configure(1, session(7, 3, Some(4))).unwrap();
        m.configure(2, session(9, 6, None)).unwrap();
        let mut orig = pool.alloc_from(&[1, 2, 3, 4, 5, 6]).unwrap();
        orig.meta_mut().ingress_port = 2;
        orig.meta_mut().egress_port = 5;
        orig.meta_mut().flow_hash = 0xabcd;

        let c = m.clone_packet(&mut pool, 1, &orig).unwrap();
        assert_eq!(c.data(), &[1, 2, 3, 4]);
        assert_eq!(c.meta().egress_port, 7);
        assert_eq!(c.meta().class, 3);
        assert_eq!(c.meta().ingress_port, 2);
        assert_eq!(c.meta().flow_hash, 0xabcd);
        assert_ne!(c.meta().flags & FLAG_CLONE, 0);
        // The original is untouched.
        assert_eq!(orig.meta().egress_port, 5);
        assert_eq!(orig.meta().flags & FLAG_CLONE, 0);
        assert_eq!(orig.data(), &[1, 2, 3, 4, 5, 6]);

        let c2 = m.clone_packet(&mut pool, 2, &orig).unwrap();
        assert_eq!(c2.data(), orig.data());
        assert_eq!(c2.meta().egress_port, 9);
        let s = m.stats();
        assert_eq!((s.clones, s.truncated), (2, 1));
        assert_eq!(m.session_clones(1), Some(1));
        assert_eq!(m.session_clones(2), Some(1));
        assert_eq!(m.session_clones(4), None);
    }

    #[test]
    fn failures_counted() {
        let mut pool = HeapPool::new(2, 64);
        let mut m = MirrorSessions::new(2);
        assert_eq!(
            m.configure(2, session(1, 0, None)),
            Err(MirrorError::BadSession)
        );
        assert_eq!(
            m.configure(0, session(1, NUM_CLASSES as u8, None)),
            Err(MirrorError::BadClass)
        );
        assert_eq!(m.stats().config_refused, 2);
        assert_eq!(m.get(0), None);
        m.configure(0, session(PORT_NONE, 0, None)).unwrap();

        let orig = pool.alloc_from(&[0u8; 10]).unwrap();
        // Unconfigured and out-of-range sessions.
        assert!(m.clone_packet(&mut pool, 1, &orig).is_none());
        assert!(m.clone_packet(&mut pool, 500, &orig).is_none());
        assert_eq!(m.stats().unknown_session, 2);
        // One buffer left, then the pool is empty.
        let c = m.clone_packet(&mut pool, 0, &orig).unwrap();
        assert_eq!(c.meta().egress_port, PORT_NONE);
        assert!(m.clone_packet(&mut pool, 0, &orig).is_none());
        assert_eq!(m.stats().alloc_failures, 1);
        assert_eq!(m.stats().clones, 1);
        // Removing a session makes it unknown again.
        assert!(m.remove(0).is_some());
        assert!(m.remove(0).is_none());
        assert!(m.remove(9).is_none());
        pool.free(c);
        assert!(m.clone_packet(&mut pool, 0, &orig).is_none());
        assert_eq!(m.stats().unknown_session, 3);
    }

    #[test]
    fn session_count_capped_at_id_space() {
        let m = MirrorSessions::new(1 << 20);
        assert_eq!(m.num_sessions(), 65536);
        assert_eq!(MirrorSessions::new(0).num_sessions(), 0);
    }
}
