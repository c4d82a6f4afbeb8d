//! longhaul pipelines: one module per paper role.
