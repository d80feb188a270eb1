//! Jobs: pods grouped into gangs, each resolved to its leaf queue and its priority.

use std::collections::BTreeMap;

use kai_policy_compiler::model::Policy;

use crate::cluster::{Amounts, Snapshot, Time};
use crate::decision::Reason;

/// A gang: the pods of one pod group (or one pod without a group), placed all or none.
#[derive(Debug, Clone)]
pub struct Job {
    /// `namespace/name` of the pod group, or of the single pod.
    pub key: String,
    /// Namespace.
    pub namespace: String,
    /// Indexes into `Snapshot::pods`.
    pub pods: Vec<usize>,
    /// Pods that must run together (`minMember`; 1 for a lone pod).
    pub min_member: u32,
    /// The leaf queue (index into `Policy::queues`), or why it has none.
    pub queue: Result<usize, Reason>,
    /// Priority value (0 without a priority class).
    pub priority: i32,
    /// Whether it may be preempted or reclaimed.
    pub preemptible: bool,
    /// A priority class the policy does not declare.
    pub unknown_priority_class: Option<String>,
    /// Creation time: the pod group's, or the earliest pod's.
    pub created: Time,
}

/// Groups the snapshot's pods into jobs, in a stable order (namespace, then name).
pub fn jobs(snapshot: &Snapshot, policy: &Policy) -> Vec<Job> {
    let mut by_key: BTreeMap<(String, String, bool), Vec<usize>> = BTreeMap::new();
    for (i, pod) in snapshot.pods.iter().enumerate() {
        let key = match &pod.group {
            Some(g) => (pod.namespace.clone(), g.clone(), true),
            None => (pod.namespace.clone(), pod.name.clone(), false),
        };
        by_key.entry(key).or_default().push(i);
    }
    let groups: BTreeMap<(&str, &str), usize> = snapshot
        .groups
        .iter()
        .enumerate()
        .map(|(i, g)| ((g.namespace.as_str(), g.name.as_str()), i))
        .collect();
    by_key
        .into_iter()
        .map(|((namespace, name, grouped), pods)| {
            let group = grouped
                .then(|| groups.get(&(namespace.as_str(), name.as_str())))
                .flatten()
                .map(|&g| &snapshot.groups[g]);
            let first = &snapshot.pods[pods[0]];
            let named_queue = group
                .and_then(|g| g.queue.clone())
                .or_else(|| first.queue.clone());
            let queue = resolve_queue(policy, &namespace, named_queue.as_deref());
            let class = group
                .and_then(|g| g.priority_class.clone())
                .or_else(|| first.priority_class.clone())
                .or_else(|| {
                    queue
                        .as_ref()
                        .ok()
                        .and_then(|&q| policy.queues[q].default_priority_class.clone())
                });
            let declared = class.as_deref().and_then(|c| policy.priority_class(c));
            let priority = declared.map_or(0, |c| c.value);
            let created = group.map_or_else(
                || {
                    pods.iter()
                        .map(|&p| snapshot.pods[p].created)
                        .min()
                        .unwrap_or(0)
                },
                |g| g.created,
            );
            Job {
                key: format!("{namespace}/{name}"),
                min_member: group.map_or(1, |g| g.min_member.max(1)),
                queue,
                priority,
                // KAI's rule where the class is not declared: below 100 is preemptible.
                preemptible: declared.map_or(priority < 100, |c| c.preemptible),
                unknown_priority_class: class.filter(|_| declared.is_none()),
                created,
                namespace,
                pods,
            }
        })
        .collect()
}

/// The leaf queue a job lands in: the queue it names, or its namespace's default.
fn resolve_queue(policy: &Policy, namespace: &str, named: Option<&str>) -> Result<usize, Reason> {
    let index = match named {
        Some(name) => policy
            .queues
            .iter()
            .position(|q| q.name == name)
            .ok_or_else(|| Reason::UnknownQueue {
                queue: name.to_string(),
                suggestion: closest(policy, name),
            })?,
        None => policy
            .queues
            .iter()
            .position(|q| q.namespaces.defaults.iter().any(|n| n == namespace))
            .ok_or_else(|| Reason::NoQueue {
                namespace: namespace.to_string(),
            })?,
    };
    let queue = &policy.queues[index];
    if !queue.is_leaf() {
        return Err(Reason::NotALeaf {
            queue: queue.name.clone(),
        });
    }
    if !queue.namespaces.open_to_all && !queue.namespaces.defaults.iter().any(|n| n == namespace) {
        return Err(Reason::NamespaceNotAllowed {
            queue: queue.name.clone(),
            namespace: namespace.to_string(),
        });
    }
    Ok(index)
}

fn closest(policy: &Policy, name: &str) -> Option<String> {
    let leaves = policy
        .queues
        .iter()
        .filter(|q| q.is_leaf())
        .map(|q| q.name.as_str());
    kai_policy_compiler::check::did_you_mean(name, leaves).map(str::to_string)
}

/// Sum of requests of some pods.
pub fn request_of(snapshot: &Snapshot, pods: &[usize]) -> Amounts {
    sum_requests(snapshot, pods.iter().copied())
}

/// Sum of requests of the pods an iterator yields (no vector needed on hot paths).
pub fn sum_requests(snapshot: &Snapshot, pods: impl Iterator<Item = usize>) -> Amounts {
    let mut total = Amounts::default();
    for p in pods {
        let r = &snapshot.pods[p].request;
        total.gpu += r.gpu;
        total.cpu += r.cpu;
        total.memory += r.memory;
    }
    total
}
