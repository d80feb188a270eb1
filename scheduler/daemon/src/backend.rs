//! The cluster the daemon schedules, behind one small trait: the in-memory simulator here
//! ([`crate::sim::SimCluster`]) and Kubernetes ([`crate::kubernetes::KubeCluster`]). A backend is
//! asked for a snapshot at the start of every cycle and given that cycle's decisions at its end;
//! between the two it is not touched, so the cycle stays a pure function of what the backend
//! returned.
//!
//! The trait is synchronous: the loop calls it from the blocking thread the cycle runs on. A
//! backend that needs async I/O (Kubernetes) keeps its own runtime and blocks on it there.

use kai_policy_compiler::fairshare::FairShares;
use kai_policy_compiler::model::Policy;
use kai_scheduler::cluster::{Amounts, Snapshot, Time};
use kai_scheduler::decision::Decision;

/// What one cycle decided, for the backend to carry out.
pub struct Applied<'a> {
    /// The policy the cycle ran with.
    pub policy: &'a Policy,
    /// The commit it comes from and the digest of its compiled config: a policy is new when
    /// either changes.
    pub source: (&'a str, &'a str),
    /// Its decisions.
    pub decisions: &'a [Decision],
    /// The fair shares it computed (per queue, in the policy's order).
    pub shares: &'a FairShares,
    /// Allocation per queue after its decisions (parents include their children).
    pub allocated: &'a [Amounts],
    /// Its clock.
    pub now: Time,
    /// Pod groups whose stale mark changed: `(namespace/name, since)`, `None` cleared
    /// (`CycleResult::stale_marks`).
    pub stale_marks: &'a [(String, Option<Time>)],
    /// Pod groups it started, at `now` (`CycleResult::started`).
    pub started: &'a [String],
    /// Pod groups it evicted pods of, at `now` (`CycleResult::evicted`).
    pub evicted: &'a [String],
    /// DRA claims whose status it changed (`CycleResult::claims`): a bind writes its pod's.
    pub claims: &'a [kai_scheduler::dra::ClaimStatus],
    /// Where on NUMA zones the pods it binds go (`CycleResult::numa_zones`).
    pub numa_zones: &'a [kai_scheduler::numa::PodZones],
}

/// One API call a backend made, for the metrics: what it was and what came of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CallOutcome {
    /// `bind`, `evict`, `pod-condition`, `podgroup-status`, `podgroup-annotation`, `queue-status`,
    /// `event`, `apply`, `prune`.
    pub call: &'static str,
    /// `done`, `refused`, `gone`, `conflict`, `forbidden`, `failed`, `skipped`.
    pub outcome: &'static str,
}

/// A cluster the daemon can schedule.
pub trait Backend: Send {
    /// The cluster as it is now, read for `policy` (its queue label and scheduler name), and
    /// the clock (seconds on the snapshot's timeline: the same clock as pods' `created` and
    /// `started`, and the usage history's samples).
    fn snapshot(&mut self, policy: &Policy) -> Result<(Snapshot, Time), String>;

    /// Carries out the decisions of the cycle that ran on the last snapshot: binds, evictions
    /// (consolidation moves included) and nominations. Pending decisions need no action; a
    /// backend may surface their reasons (Kubernetes: pod conditions and events) and the
    /// queues' numbers (Kubernetes: Queue status). Returns the API calls it made.
    fn apply(&mut self, cycle: &Applied<'_>) -> Result<Vec<CallOutcome>, String>;

    /// Whether [`Backend::apply`] acts now (Kubernetes: whether this replica holds the Lease).
    /// A cycle of a replica that does not act is logged at debug level only.
    fn acts(&self) -> bool {
        true
    }

    /// The daemon is stopping: give up what this replica holds (Kubernetes: the Lease, so
    /// another replica leads at once). Called once, from a blocking thread, after the last cycle.
    fn stop(&mut self) {}
}
