//! Wire headers: bounds-checked zero-copy views and builders (DESIGN.md section 5).
pub mod checksum;
pub mod ecn;
pub mod ethernet;
pub mod icrc;
pub mod int;
pub mod ipv4;
pub mod ipv6;
pub mod parse;
pub mod pfc;
pub mod roce;
pub mod tcp;
pub mod udp;
