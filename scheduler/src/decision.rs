//! What a cycle decides: binds, evictions, nominations, and for every pending job one reason a
//! person can act on, with the numbers.

use std::fmt;

use kai_policy_compiler::quantity::ResourceKind;

/// One decision of a cycle.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    /// Bind a pending pod to a node.
    Bind {
        /// `namespace/name`.
        pod: String,
        /// Node name.
        node: String,
    },
    /// A pod placed onto resources its victims are still releasing: it stays pending with this
    /// node nominated, and binds in a later cycle (pipelining).
    Nominate {
        /// `namespace/name`.
        pod: String,
        /// Node name.
        node: String,
    },
    /// Evict a running pod.
    Evict {
        /// `namespace/name`.
        pod: String,
        /// The node it runs on.
        node: String,
        /// Why.
        reason: EvictReason,
    },
    /// A job that stays pending, and why.
    Pending {
        /// The job: `namespace/name` of its pod group, or of its single pod.
        job: String,
        /// Its pending pods.
        pods: Vec<String>,
        /// Why it did not start.
        reason: Reason,
    },
}

/// Why a pod is evicted.
#[derive(Debug, Clone, PartialEq)]
pub enum EvictReason {
    /// Another queue below its fair share takes back resources.
    Reclaim {
        /// The job that needs the room.
        for_job: String,
        /// Its queue.
        by_queue: String,
        /// The victim's queue.
        from_queue: String,
    },
    /// A job of strictly higher priority in the same queue needs the room.
    Preempt {
        /// The job that needs the room.
        for_job: String,
        /// The victim's priority and the preemptor's.
        priorities: (i32, i32),
    },
    /// Moved to another node to make room for a pending gang (it is re-placed at once).
    Consolidate {
        /// The job that needs the room.
        for_job: String,
        /// Where it goes.
        to_node: String,
    },
    /// Its gang has been below `minMember` for longer than the grace period.
    StaleGang {
        /// Pods still running.
        running: u32,
        /// The gang's minimum.
        min_member: u32,
        /// Seconds below the minimum.
        for_seconds: u64,
    },
}

/// Why a job stays pending.
#[derive(Debug, Clone, PartialEq)]
pub enum Reason {
    /// The pod names no queue and its namespace is no queue's default.
    NoQueue {
        /// The namespace.
        namespace: String,
    },
    /// The named queue does not exist.
    UnknownQueue {
        /// The name given.
        queue: String,
        /// A close existing name.
        suggestion: Option<String>,
    },
    /// The queue has children; only leaf queues take work.
    NotALeaf {
        /// The queue.
        queue: String,
    },
    /// A sub-group of the PodGroup has fewer pods than its `minMember`, or fewer sub-groups
    /// able to start than its `minSubGroup`.
    SubGroupIncomplete {
        /// The sub-group (empty: the PodGroup's own `minSubGroup`).
        subgroup: String,
        /// Pods that exist, or sub-groups that could start.
        have: u32,
        /// Its `minMember`, or `minSubGroup`.
        need: u32,
        /// Whether `have` and `need` count pods (else sub-groups).
        pods: bool,
    },
    /// The pods name a sub-group (`kai.scheduler/subgroup-name`) their PodGroup does not have.
    UnknownSubGroup {
        /// The name the pods give (`default` when they carry no label).
        subgroup: String,
        /// The PodGroup, `namespace/name`.
        group: String,
    },
    /// The queue does not list the job's namespace.
    NamespaceNotAllowed {
        /// The queue.
        queue: String,
        /// The namespace.
        namespace: String,
    },
    /// The queue (or an ancestor) would go above its limit.
    OverLimit {
        /// The queue whose limit blocks.
        queue: String,
        /// The resource.
        resource: ResourceKind,
        /// The limit.
        limit: i64,
        /// Allocated now.
        allocated: i64,
        /// What the job asks for.
        requested: i64,
    },
    /// A non-preemptible job would go above its queue's (or an ancestor's) quota.
    NonPreemptibleOverQuota {
        /// The queue whose quota blocks.
        queue: String,
        /// The resource.
        resource: ResourceKind,
        /// The quota.
        quota: i64,
        /// Non-preemptible work allocated now.
        allocated: i64,
        /// What the job asks for.
        requested: i64,
    },
    /// No node (or set of nodes) has room now; evicting or moving pods might make some.
    NoNodeFits {
        /// Nodes in the cluster.
        nodes: u32,
        /// What the filters found, one count per reason, most frequent first: "8 lack 4 GPU
        /// (most free: 3)", "1 is not ready".
        found: Vec<String>,
    },
    /// No node passes the pod's filters that free resources cannot change (readiness, taints,
    /// node selector and affinity): nothing will fit until the cluster or the pod changes.
    NoNodeMatches {
        /// Nodes in the cluster.
        nodes: u32,
        /// What the filters found, as in [`Reason::NoNodeFits`].
        found: Vec<String>,
    },
    /// A pod asks for more than any node it may use has, even empty.
    LargerThanAnyNode {
        /// What one pod needs, as people say it ("16 GPU").
        needs: String,
        /// The most any such node has ("8 GPU").
        largest: String,
    },
    /// A required topology domain with enough room for the whole gang does not exist.
    NoTopologyDomain {
        /// The node label.
        label: String,
        /// Pods of the gang.
        pods: u32,
        /// Schedulable nodes that carry the topology's labels: none means no domain exists at
        /// all, which a label on the nodes mends, not room.
        labelled_nodes: u32,
    },
    /// The gang has fewer pods than `minMember`.
    GangIncomplete {
        /// Pods that exist.
        pods: u32,
        /// The minimum.
        min_member: u32,
    },
    /// Jobs ahead of it in its queue took what was free.
    WaitingBehind {
        /// How many jobs of the same queue went first.
        jobs: usize,
        /// The queue.
        queue: String,
    },
    /// Evicting would make room, but the jobs that would have to go are inside their
    /// min-runtime.
    MinRuntime {
        /// `reclaim` or `preempt`.
        action: &'static str,
        /// The queue of the protected jobs.
        queue: String,
        /// Seconds until the last of them may go.
        remaining: u64,
    },
    /// The job's PodGroup `preemptionDelay` has not passed: it may not evict other workloads
    /// yet (it still takes free room).
    PreemptionDelay {
        /// Seconds until it may.
        remaining: u64,
    },
    /// The priority class is declared neither by the policy nor by a PriorityClass of the cluster.
    UnknownPriorityClass {
        /// The name given.
        name: String,
    },
    /// The job was placed earlier in this cycle, and a later action took that placement back
    /// for its preemptor before anything was bound (KAI evicts such pods).
    Withdrawn {
        /// What took it: reclaim or preempt, and for which job.
        reason: EvictReason,
    },
}

/// An amount as people say it: "4 GPU", "500m CPU", "16Gi memory".
pub fn amount(v: i64, kind: ResourceKind) -> String {
    let n = kai_policy_compiler::quantity::format_quantity(v, kind);
    match kind {
        ResourceKind::Gpu => format!("{n} GPU"),
        ResourceKind::Cpu => format!("{n} CPU"),
        ResourceKind::Memory => format!("{n} memory"),
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reason::NoQueue { namespace } => write!(
                f,
                "names no queue, and namespace {namespace} is no queue's default: set the queue label, or add the namespace to a queue's `namespaces`"
            ),
            Reason::UnknownQueue { queue, suggestion } => {
                write!(f, "queue {queue} does not exist")?;
                match suggestion {
                    Some(s) => write!(f, " (did you mean {s}?)"),
                    None => Ok(()),
                }
            }
            Reason::NotALeaf { queue } => write!(
                f,
                "queue {queue} has child queues; only leaf queues take work"
            ),
            Reason::NamespaceNotAllowed { queue, namespace } => write!(
                f,
                "queue {queue} does not list namespace {namespace}: add it to the queue's `namespaces` (or \"*\")"
            ),
            Reason::OverLimit {
                queue,
                resource,
                limit,
                allocated,
                requested,
            } => write!(
                f,
                "queue {queue} is at its {} limit: {} allocated + {} requested > limit {}",
                resource.name(),
                amount(*allocated, *resource),
                amount(*requested, *resource),
                amount(*limit, *resource)
            ),
            Reason::NonPreemptibleOverQuota {
                queue,
                resource,
                quota,
                allocated,
                requested,
            } => write!(
                f,
                "non-preemptible jobs only run within quota: queue {queue} has {} of non-preemptible work + {} requested > quota {}",
                amount(*allocated, *resource),
                amount(*requested, *resource),
                amount(*quota, *resource)
            ),
            Reason::NoNodeFits { nodes, found } if found.is_empty() => {
                write!(f, "0/{nodes} nodes fit")
            }
            Reason::NoNodeFits { nodes, found } => {
                write!(f, "0/{nodes} nodes fit: {}", found.join(", "))
            }
            Reason::NoNodeMatches { nodes, found } => write!(
                f,
                "0/{nodes} nodes match the pod: {}; change the pod's tolerations, nodeSelector or affinity, or the nodes",
                found.join(", ")
            ),
            Reason::LargerThanAnyNode { needs, largest } => write!(
                f,
                "needs {needs} on one node; the largest node it may use has {largest}"
            ),
            Reason::NoTopologyDomain {
                label,
                labelled_nodes: 0,
                ..
            } => write!(
                f,
                "no schedulable node carries the {label} label of the required topology, so it has no domain: label the nodes, or change the placement's topology"
            ),
            Reason::NoTopologyDomain { label, pods: 1, .. } => write!(
                f,
                "no single {label} domain has room for the pod (required topology)"
            ),
            Reason::NoTopologyDomain { label, pods, .. } => write!(
                f,
                "no single {label} domain has room for all {pods} pods of the gang (required topology)"
            ),
            Reason::GangIncomplete { pods, min_member } => write!(
                f,
                "gang incomplete: {pods} pod{} exist{}, minMember is {min_member}",
                if *pods == 1 { "" } else { "s" },
                if *pods == 1 { "s" } else { "" }
            ),
            Reason::SubGroupIncomplete {
                subgroup,
                have,
                need,
                pods: true,
            } => write!(
                f,
                "sub-group {subgroup} incomplete: {have} pod{} exist{}, its minMember is {need}",
                if *have == 1 { "" } else { "s" },
                if *have == 1 { "s" } else { "" }
            ),
            Reason::SubGroupIncomplete {
                subgroup,
                have,
                need,
                pods: false,
            } => {
                let whose = if subgroup.is_empty() {
                    "the PodGroup's".to_string()
                } else {
                    format!("sub-group {subgroup}'s")
                };
                write!(
                    f,
                    "only {have} of {whose} sub-groups have the pods their minimums need; its minSubGroup is {need}"
                )
            }
            Reason::UnknownSubGroup { subgroup, group } => write!(
                f,
                "the pod is in sub-group {subgroup} (label kai.scheduler/subgroup-name; `default` without it), which PodGroup {group} does not list in spec.subGroups; fix the label or add the sub-group"
            ),
            Reason::WaitingBehind { jobs, queue } => write!(
                f,
                "waiting behind {jobs} job{} of queue {queue} that went first",
                if *jobs == 1 { "" } else { "s" }
            ),
            Reason::MinRuntime {
                action,
                queue,
                remaining,
            } => write!(
                f,
                "{action} would make room from queue {queue}, but the jobs it needs are inside their {action} min-runtime for another {}",
                kai_policy_compiler::quantity::Duration(*remaining)
            ),
            Reason::PreemptionDelay { remaining } => write!(
                f,
                "no free room, and its PodGroup's preemptionDelay lets it evict other workloads only in another {}",
                kai_policy_compiler::quantity::Duration(*remaining)
            ),
            Reason::UnknownPriorityClass { name } => {
                write!(
                    f,
                    "priority class {name} is declared neither by the policy nor by a PriorityClass in the cluster"
                )
            }
            Reason::Withdrawn { reason } => write!(
                f,
                "placed earlier in this cycle, then given up before binding: {reason}"
            ),
        }
    }
}

impl fmt::Display for EvictReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EvictReason::Reclaim {
                for_job,
                by_queue,
                from_queue,
            } => write!(
                f,
                "reclaimed by queue {by_queue} (below its fair share) from queue {from_queue} for {for_job}"
            ),
            EvictReason::Preempt {
                for_job,
                priorities: (victim, preemptor),
            } => write!(
                f,
                "preempted by {for_job} (priority {preemptor} over {victim})"
            ),
            EvictReason::Consolidate { for_job, to_node } => {
                write!(f, "moved to {to_node} to make room for {for_job}")
            }
            EvictReason::StaleGang {
                running,
                min_member,
                for_seconds,
            } => write!(
                f,
                "gang below its minimum ({running} of {min_member} running) for {for_seconds}s"
            ),
        }
    }
}
