//! Collective communication as a workload (`[[collectives]]`): the flows of one operation among
//! ranks (hosts), each started when the data it forwards has arrived, and the operation's
//! completion time (CCT), the metric of Themis's spraying evaluation (paper 002, section 6.2:
//! "the slowest group's collective completion time (tail CCT)").
//!
//! Each flow is one RDMA WRITE message on its own QP (the emulator's flow), from the flow's
//! start until every one of its packets has arrived at the receiver in order (the receiver's
//! completion, not the sender's last ACK: a rank goes on when it holds the data).
//!
//! - **Ring AllReduce** (`kind = "allreduce"`, NCCL's ring algorithm: a reduce-scatter then an
//!   all-gather): the buffer of `bytes` is cut into N chunks of `ceil(bytes / N)`; in each of
//!   the 2 (N - 1) steps every rank r sends one chunk to rank r + 1 (mod N, in the order the
//!   ranks are listed). Step 0 starts at the collective's start; rank r's step s starts when
//!   its step s - 1 input (rank r - 1's step s - 1 flow) has arrived. Each rank sends
//!   2 (N - 1) / N of the buffer, the ring's optimum.
//! - **AllToAll** (`kind = "alltoall"`): every rank sends `ceil(bytes / N)` to each of the
//!   other N - 1 ranks, all at the collective's start (a grouped send to every peer, as NCCL
//!   posts it); no step waits on another.
//!
//! Choices the paper does not state (docs/reproduce.md, "Themis spraying"):
//! - each step of the ring is its own QP (flow), so a QP's congestion-control state starts
//!   afresh at each step (a real ring keeps one QP per neighbour);
//! - a step waits only for its input, not for the rank's previous send to finish (a pipelined
//!   ring: the two may share the rank's NIC for a while).
//!
//! The flows are numbered after the scenario's `[[flows]]` and generated `[[traffic]]`, in
//! collective order, then as [`expand`] lists them; a generator that writes per-QP switch
//! tables (Themis-D's) numbers them the same way (the requester's QPN is 0x100 + the flow's
//! number, the responder's 0x800000 + it).

use crate::scenario::FlowSpec;
use longhaul_dataplane::time::Nanos;

/// Which collective.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CollectiveKind {
    /// Ring AllReduce (reduce-scatter, then all-gather): 2 (N - 1) steps of one chunk.
    AllReduce,
    /// Every rank to every other, at once.
    AllToAll,
}

impl CollectiveKind {
    /// The scenario's name for it.
    pub fn name(self) -> &'static str {
        match self {
            CollectiveKind::AllReduce => "allreduce",
            CollectiveKind::AllToAll => "alltoall",
        }
    }

    /// By the scenario's name.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "allreduce" => Some(CollectiveKind::AllReduce),
            "alltoall" => Some(CollectiveKind::AllToAll),
            _ => None,
        }
    }
}

/// `[[collectives]]`: one operation among `ranks` (host indices, in ring order).
#[derive(Clone, Debug, PartialEq)]
pub struct CollectiveSpec {
    pub name: String,
    pub kind: CollectiveKind,
    pub ranks: Vec<usize>,
    /// The buffer each rank holds (AllReduce: reduced; AllToAll: split among the ranks).
    pub bytes: u64,
    pub start_ns: Nanos,
}

impl CollectiveSpec {
    /// Bytes of each flow: one chunk, `ceil(bytes / N)`.
    pub fn chunk(&self) -> u64 {
        self.bytes.div_ceil(self.ranks.len().max(1) as u64).max(1)
    }

    /// How many flows [`expand`] makes.
    pub fn flow_count(&self) -> usize {
        let n = self.ranks.len();
        if n < 2 {
            return 0;
        }
        match self.kind {
            CollectiveKind::AllReduce => 2 * (n - 1) * n,
            CollectiveKind::AllToAll => n * (n - 1),
        }
    }
}

/// The flows of `c`, numbered from `first` (their index in the scenario's flows): each with
/// the flows it waits for (`FlowSpec::after`, by that numbering).
///
/// AllReduce: step s, rank r is flow `first + s N + r`, from rank r to rank r + 1. AllToAll:
/// rank r's flow to rank r + k (k = 1..N-1) is flow `first + r (N - 1) + k - 1`.
pub fn expand(c: &CollectiveSpec, first: usize) -> Vec<FlowSpec> {
    let n = c.ranks.len();
    let mut out = Vec::with_capacity(c.flow_count());
    if n < 2 {
        return out;
    }
    let flow = |src: usize, dst: usize, after: Vec<usize>| FlowSpec {
        src: c.ranks[src],
        dst: c.ranks[dst],
        size_bytes: c.chunk(),
        start_ns: c.start_ns,
        after,
    };
    match c.kind {
        CollectiveKind::AllReduce => {
            for s in 0..2 * (n - 1) {
                for r in 0..n {
                    let after = if s == 0 {
                        Vec::new()
                    } else {
                        vec![first + (s - 1) * n + (r + n - 1) % n]
                    };
                    out.push(flow(r, (r + 1) % n, after));
                }
            }
        }
        CollectiveKind::AllToAll => {
            for r in 0..n {
                for k in 1..n {
                    out.push(flow(r, (r + k) % n, Vec::new()));
                }
            }
        }
    }
    out
}

/// What one collective did in a run.
#[derive(Clone, Debug, PartialEq)]
pub struct CollectiveResult {
    pub name: String,
    pub kind: CollectiveKind,
    pub ranks: usize,
    pub bytes: u64,
    pub start_ns: Nanos,
    /// When its last flow's data had all arrived (`None`: not every flow did by the end).
    pub finish_ns: Option<Nanos>,
    /// Its flows: indices into the run's flows.
    pub flows: std::ops::Range<usize>,
}

impl CollectiveResult {
    /// The collective completion time.
    pub fn cct_ns(&self) -> Option<Nanos> {
        self.finish_ns.map(|f| f.saturating_sub(self.start_ns))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(kind: CollectiveKind, n: usize, bytes: u64) -> CollectiveSpec {
        CollectiveSpec {
            name: "g".into(),
            kind,
            ranks: (10..10 + n).collect(),
            bytes,
            start_ns: 5,
        }
    }

    /// A 4-rank ring by hand: 6 steps of 4 flows, each from rank r to r + 1, each step's flow
    /// waiting on the previous step's flow into its rank.
    #[test]
    fn ring_allreduce_steps_wait_for_their_input() {
        let c = spec(CollectiveKind::AllReduce, 4, 1000);
        let f = expand(&c, 7);
        assert_eq!(f.len(), 24);
        assert_eq!(c.flow_count(), 24);
        assert!(f.iter().all(|x| x.size_bytes == 250 && x.start_ns == 5));
        assert_eq!((f[0].src, f[0].dst), (10, 11));
        assert_eq!((f[3].src, f[3].dst), (13, 10));
        assert!(f[..4].iter().all(|x| x.after.is_empty()));
        // Step 1, rank 0 (flow 7 + 4) waits on step 0, rank 3 (flow 7 + 3): rank 3 -> rank 0.
        assert_eq!(f[4].after, vec![10]);
        assert_eq!((f[4].src, f[4].dst), (10, 11));
        // Step 5, rank 2 (flow 7 + 22) waits on step 4, rank 1 (flow 7 + 17).
        assert_eq!(f[22].after, vec![24]);
        // Every dependency is a flow into the waiting flow's source, one step earlier.
        for (i, x) in f.iter().enumerate().skip(4) {
            let d = &f[x.after[0] - 7];
            assert_eq!(d.dst, x.src, "flow {i}");
            assert_eq!((x.after[0] - 7) / 4 + 1, i / 4);
        }
        // Each rank sends 2 (N - 1) / N of the buffer.
        let sent: u64 = f.iter().filter(|x| x.src == 12).map(|x| x.size_bytes).sum();
        assert_eq!(sent, 2 * 3 * 1000 / 4);
    }

    #[test]
    fn alltoall_sends_a_chunk_to_every_other_rank_at_once() {
        let c = spec(CollectiveKind::AllToAll, 3, 900);
        let f = expand(&c, 0);
        assert_eq!(f.len(), 6);
        let pairs: Vec<(usize, usize)> = f.iter().map(|x| (x.src, x.dst)).collect();
        assert_eq!(
            pairs,
            vec![(10, 11), (10, 12), (11, 12), (11, 10), (12, 10), (12, 11)]
        );
        assert!(f.iter().all(|x| x.after.is_empty() && x.size_bytes == 300));
    }

    #[test]
    fn fewer_than_two_ranks_make_no_flows_and_names_round_trip() {
        assert!(expand(&spec(CollectiveKind::AllReduce, 1, 10), 0).is_empty());
        assert_eq!(spec(CollectiveKind::AllToAll, 3, 10).chunk(), 4);
        for k in [CollectiveKind::AllReduce, CollectiveKind::AllToAll] {
            assert_eq!(CollectiveKind::parse(k.name()), Some(k));
        }
        assert_eq!(CollectiveKind::parse("allgather"), None);
    }
}
