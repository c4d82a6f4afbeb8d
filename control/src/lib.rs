//! longhaul control plane.
pub mod config;
