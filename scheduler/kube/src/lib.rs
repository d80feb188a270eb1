//! The kai-scheduler's Kubernetes backend (edge): KAI's custom resources as Rust types, cluster
//! objects into the scheduler's `Snapshot`, and the scheduler's decisions into API calls.
#![forbid(unsafe_code)]

pub mod access;
pub mod apply;
pub mod backend;
pub mod caches;
pub mod calls;
pub mod client;
pub mod crd;
pub mod grouper;
pub mod lease;
pub mod snapshot;
