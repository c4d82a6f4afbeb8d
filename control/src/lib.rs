//! longhaul control plane: configuration (`config`), the control thread (`plane`), the
//! management API (`api`) and its CLI client (`client`), Prometheus metrics (`metrics`), the HTTP
//! server both endpoints use (`http`: axum on hyper with tower limits), and the one trait through
//! which these generic layers know the mechanisms (`mechanisms`).
pub mod api;
pub mod client;
pub mod config;
pub mod ctl;
pub mod http;
pub mod logs;
pub mod mechanisms;
pub mod metrics;
pub mod plane;
