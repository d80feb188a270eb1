//! kai-scheduler: KAI Scheduler's semantics as a pure function of (cluster snapshot, compiled
//! policy, clock, usage history) → decisions. Kubernetes, files and the simulator live at the edges.
// One module asks the processor for memory ahead (`prefetch`); nothing else is unsafe.
#![deny(unsafe_code)]

pub mod bench;
pub mod cluster;
pub mod cycle;
pub mod decision;
pub mod dra;
pub mod ingest;
pub mod numa;
mod prefetch;
pub mod simulate;
pub mod usage;
