//! Time-based fairness at the cycle's edge: what one cycle records in a usage history, and the
//! normalised usage the next cycle is given. Shared by the simulator and the daemon so both
//! measure usage the same way.

use kai_policy_compiler::fairshare::usage::{Sample, UsageHistory};
use kai_policy_compiler::model::{PerResource, Policy};
use kai_policy_compiler::quantity::ResourceKind;

use crate::cluster::{Amounts, Snapshot, Time};

/// The sample of one cycle: the capacity of the schedulable nodes and each queue's allocation
/// after the cycle (`allocated` indexed like `policy.queues`, as `CycleResult::allocated`).
pub fn sample(snapshot: &Snapshot, policy: &Policy, allocated: &[Amounts], now: Time) -> Sample {
    let mut capacity = Amounts::default();
    for node in snapshot.nodes.iter().filter(|n| !n.unschedulable) {
        for kind in ResourceKind::ALL {
            *capacity.get_mut(kind) += node.allocatable.get(kind);
        }
    }
    Sample {
        at: now,
        capacity,
        allocated: policy
            .queues
            .iter()
            .zip(allocated)
            .filter(|(_, a)| ResourceKind::ALL.iter().any(|&k| *a.get(k) != 0))
            .map(|(q, a)| (q.name.clone(), *a))
            .collect(),
    }
}

/// Records one cycle's allocation, when the policy enables time-based fairness.
pub fn record(
    history: &mut UsageHistory,
    snapshot: &Snapshot,
    policy: &Policy,
    allocated: &[Amounts],
    now: Time,
) {
    if let Some(fairness) = &policy.cluster.fairness {
        history.record(sample(snapshot, policy, allocated, now), fairness);
    }
}

/// The usage to give a cycle at `now`: each of the policy's queues' normalised past usage, or
/// `None` when the policy does not enable time-based fairness.
pub fn of(history: &UsageHistory, policy: &Policy, now: Time) -> Option<Vec<PerResource<f64>>> {
    let fairness = policy.cluster.fairness.as_ref()?;
    let names: Vec<&str> = policy.queues.iter().map(|q| q.name.as_str()).collect();
    Some(history.usage(&names, now, fairness))
}
