//! The edges of kai-scheduler: the daemon that follows a policy in Git and schedules a cluster
//! backend every period, its HTTP server and metrics, the in-memory simulated cluster, and the
//! Kubernetes backend behind the daemon's trait. The scheduling itself is the pure
//! `kai-scheduler` library.
#![forbid(unsafe_code)]

pub mod backend;
pub mod daemon;
pub mod follow;
pub mod http;
pub mod kubernetes;
pub mod metrics;
pub mod sim;
pub mod watch;
