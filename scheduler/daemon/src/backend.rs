//! The cluster the daemon schedules, behind one small trait: the in-memory simulator here
//! ([`crate::sim::SimCluster`]), Kubernetes in its own crate. A backend is asked for a snapshot at
//! the start of every cycle and given that cycle's decisions at its end; between the two it is
//! not touched, so the cycle stays a pure function of what the backend returned.

use kai_scheduler::cluster::{Snapshot, Time};
use kai_scheduler::decision::Decision;

/// A cluster the daemon can schedule.
pub trait Backend: Send {
    /// The cluster as it is now, and the clock (seconds on the snapshot's timeline: the same
    /// clock as pods' `created` and `started`, and the usage history's samples).
    fn snapshot(&mut self) -> Result<(Snapshot, Time), String>;

    /// Carries out the decisions of the cycle that ran on the last snapshot at `now`: binds,
    /// evictions (consolidation moves included) and nominations. Pending decisions need no
    /// action; a backend may surface their reasons (Kubernetes: pod conditions and events).
    fn apply(&mut self, decisions: &[Decision], now: Time) -> Result<(), String>;
}
