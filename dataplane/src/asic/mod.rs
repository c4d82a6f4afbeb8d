//! Switch primitives, one per file (DESIGN.md section 1). Each is allocation-free after
//! construction, bounded, and counts what it refuses.
pub mod drr;
pub mod ecmp;
pub mod flat;
pub mod hierarchical;
pub mod lpm;
pub mod mirror;
pub mod pfc;
pub mod pfq;
pub mod queue;
pub mod recirc;
pub mod red;
pub mod register;
pub mod ring;
pub mod rng;
pub mod scheduler;
pub mod shaper;
pub mod strict;
pub mod table;
pub mod timer;
pub mod wrr;
