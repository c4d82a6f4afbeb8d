//! longhaul pipelines: one module per paper role.
pub mod replay;
