//! The edges of kai-scheduler: the daemon that follows a policy in Git and schedules a cluster
//! backend every period, its HTTP server and metrics, and the in-memory simulated cluster. The
//! scheduling itself is the pure `kai-scheduler` library.
#![forbid(unsafe_code)]

pub mod backend;
pub mod daemon;
pub mod follow;
pub mod http;
pub mod metrics;
pub mod sim;
