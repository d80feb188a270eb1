//! Every API permission the backend uses, in one list: the client names the permission of each
//! call it makes (a refusal, 403, says which one is missing), and a test compares the list with
//! the RBAC rules the Helm chart renders, so the chart grants exactly these verbs.

use std::fmt;

/// One permission: a verb on a resource of an API group.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Access {
    /// The API group (`""` for the core group).
    pub group: &'static str,
    /// The resource, with its subresource (`pods/binding`).
    pub resource: &'static str,
    /// The verb.
    pub verb: &'static str,
    /// Granted in the scheduler's own namespace only (a `Role`), not cluster-wide.
    pub namespaced: bool,
}

impl fmt::Display for Access {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let group = if self.group.is_empty() {
            "core"
        } else {
            self.group
        };
        write!(f, "{} {} ({group})", self.verb, self.resource)
    }
}

const fn cluster(group: &'static str, resource: &'static str, verb: &'static str) -> Access {
    Access {
        group,
        resource,
        verb,
        namespaced: false,
    }
}

/// List Nodes (the watch caches, `caches.rs`).
pub const NODES_LIST: Access = cluster("", "nodes", "list");
/// Watch Nodes.
pub const NODES_WATCH: Access = cluster("", "nodes", "watch");
/// List Pods.
pub const PODS_LIST: Access = cluster("", "pods", "list");
/// Watch Pods.
pub const PODS_WATCH: Access = cluster("", "pods", "watch");
/// List PodGroups.
pub const POD_GROUPS_LIST: Access = cluster("scheduling.run.ai", "podgroups", "list");
/// Watch PodGroups.
pub const POD_GROUPS_WATCH: Access = cluster("scheduling.run.ai", "podgroups", "watch");

/// List Queues (which Queue objects exist, for their status).
pub const QUEUES_LIST: Access = cluster("scheduling.run.ai", "queues", "list");
/// Watch Queues.
pub const QUEUES_WATCH: Access = cluster("scheduling.run.ai", "queues", "watch");
/// Bind a pod to a node (the calls of a cycle, `client.rs`).
pub const BIND: Access = cluster("", "pods/binding", "create");
/// Evict a pod through the Eviction API.
pub const EVICT: Access = cluster("", "pods/eviction", "create");
/// Set a pending pod's `PodScheduled` condition.
pub const POD_STATUS: Access = cluster("", "pods/status", "patch");
/// Tell users why a pod waits.
pub const EVENT: Access = cluster("", "events", "create");
/// Mark a PodGroup stale, or clear the mark (KAI's `kai.scheduler/stale-podgroup-timestamp`
/// annotation).
pub const POD_GROUP_ANNOTATE: Access = cluster("scheduling.run.ai", "podgroups", "patch");
/// Write a PodGroup's scheduling conditions.
pub const POD_GROUP_STATUS: Access = cluster("scheduling.run.ai", "podgroups/status", "patch");
/// Write a Queue's allocation and fair share.
pub const QUEUE_STATUS: Access = cluster("scheduling.run.ai", "queues/status", "patch");

/// Server-side apply a policy's Queue (`--apply-queues`, `apply.rs`).
pub const QUEUES_APPLY: Access = cluster("scheduling.run.ai", "queues", "patch");
/// The same, for a Queue that does not exist yet: the API server checks `create` when an apply
/// creates the object.
pub const QUEUES_CREATE: Access = cluster("scheduling.run.ai", "queues", "create");
/// Delete a Queue this scheduler applied that the policy no longer has.
pub const QUEUES_DELETE: Access = cluster("scheduling.run.ai", "queues", "delete");
/// List the PriorityClasses this scheduler applied (to prune them).
pub const PRIORITY_CLASSES_LIST: Access = cluster("scheduling.k8s.io", "priorityclasses", "list");
/// Server-side apply a policy's PriorityClass.
pub const PRIORITY_CLASSES_APPLY: Access = cluster("scheduling.k8s.io", "priorityclasses", "patch");
/// The same, for a PriorityClass that does not exist yet.
pub const PRIORITY_CLASSES_CREATE: Access =
    cluster("scheduling.k8s.io", "priorityclasses", "create");
/// Delete a PriorityClass this scheduler applied that the policy no longer has (or whose value
/// changed: a PriorityClass's value cannot be updated, only recreated).
pub const PRIORITY_CLASSES_DELETE: Access =
    cluster("scheduling.k8s.io", "priorityclasses", "delete");

const fn lease(verb: &'static str) -> Access {
    Access {
        group: "coordination.k8s.io",
        resource: "leases",
        verb,
        namespaced: true,
    }
}

/// Read the leader's Lease (leader election, `lease.rs`).
pub const LEASE_GET: Access = lease("get");
/// Create the Lease when there is none.
pub const LEASE_CREATE: Access = lease("create");
/// Take or renew the Lease (an update with the resourceVersion read, so two replicas cannot
/// both win).
pub const LEASE_UPDATE: Access = lease("update");

/// Every permission the backend uses; the Helm chart grants exactly these.
pub const ALL: &[Access] = &[
    NODES_LIST,
    NODES_WATCH,
    PODS_LIST,
    PODS_WATCH,
    POD_GROUPS_LIST,
    POD_GROUP_ANNOTATE,
    QUEUES_LIST,
    QUEUES_WATCH,
    POD_GROUPS_WATCH,
    BIND,
    EVICT,
    POD_STATUS,
    EVENT,
    POD_GROUP_STATUS,
    QUEUE_STATUS,
    LEASE_GET,
    LEASE_CREATE,
    LEASE_UPDATE,
];

/// What `--apply-queues` needs beyond [`ALL`]; the chart grants it only when `applyQueues` is on.
pub const APPLY: &[Access] = &[
    QUEUES_APPLY,
    QUEUES_CREATE,
    QUEUES_DELETE,
    PRIORITY_CLASSES_LIST,
    PRIORITY_CLASSES_APPLY,
    PRIORITY_CLASSES_CREATE,
    PRIORITY_CLASSES_DELETE,
];
