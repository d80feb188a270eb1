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
/// List KAI's Topology objects (the levels a topology constraint names).
pub const TOPOLOGIES_LIST: Access = cluster("kai.scheduler", "topologies", "list");
/// Watch Topologies.
pub const TOPOLOGIES_WATCH: Access = cluster("kai.scheduler", "topologies", "watch");
/// List DRA DeviceClasses, ResourceSlices and ResourceClaims (`resource.k8s.io`).
pub const DEVICE_CLASSES_LIST: Access = cluster("resource.k8s.io", "deviceclasses", "list");
/// Watch DeviceClasses.
pub const DEVICE_CLASSES_WATCH: Access = cluster("resource.k8s.io", "deviceclasses", "watch");
/// List ResourceSlices.
pub const RESOURCE_SLICES_LIST: Access = cluster("resource.k8s.io", "resourceslices", "list");
/// Watch ResourceSlices.
pub const RESOURCE_SLICES_WATCH: Access = cluster("resource.k8s.io", "resourceslices", "watch");
/// List ResourceClaims.
pub const RESOURCE_CLAIMS_LIST: Access = cluster("resource.k8s.io", "resourceclaims", "list");
/// Watch ResourceClaims.
pub const RESOURCE_CLAIMS_WATCH: Access = cluster("resource.k8s.io", "resourceclaims", "watch");
/// Write a claim's allocation and consumers before its pod is bound (what KAI's binder does).
pub const RESOURCE_CLAIM_STATUS: Access =
    cluster("resource.k8s.io", "resourceclaims/status", "patch");
/// List NodeResourceTopology objects (NUMA zones, with `--numa`).
pub const NRT_LIST: Access = cluster("topology.node.k8s.io", "noderesourcetopologies", "list");
/// Watch NodeResourceTopology objects.
pub const NRT_WATCH: Access = cluster("topology.node.k8s.io", "noderesourcetopologies", "watch");
/// Record a pod's predicted NUMA placement on it before binding it (with `--numa`).
pub const POD_ANNOTATE: Access = cluster("", "pods", "patch");
/// Bind a pod to a node (the calls of a cycle, `client.rs`).
pub const BIND: Access = cluster("", "pods/binding", "create");
/// Evict a pod through the Eviction API.
pub const EVICT: Access = cluster("", "pods/eviction", "create");
/// Set a pending pod's `PodScheduled` condition.
pub const POD_STATUS: Access = cluster("", "pods/status", "patch");
/// Tell users why a pod waits.
pub const EVENT: Access = cluster("", "events", "create");
/// Patch a PodGroup: mark it stale, or clear the mark (KAI's
/// `kai.scheduler/stale-podgroup-timestamp` annotation), or update the spec of one this
/// scheduler made (`grouper.rs`).
pub const POD_GROUP_ANNOTATE: Access = cluster("scheduling.run.ai", "podgroups", "patch");
/// Make the PodGroup of a workload that has none (`grouper.rs`).
pub const POD_GROUP_CREATE: Access = cluster("scheduling.run.ai", "podgroups", "create");
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
/// List PriorityClasses: the watch cache (a class the policy does not declare takes the
/// cluster's value), and, with `--apply-queues`, the ones this scheduler applied (to prune them).
pub const PRIORITY_CLASSES_LIST: Access = cluster("scheduling.k8s.io", "priorityclasses", "list");
/// Watch PriorityClasses.
pub const PRIORITY_CLASSES_WATCH: Access = cluster("scheduling.k8s.io", "priorityclasses", "watch");
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

/// A kind of object that may own pods, which the backend follows (list and watch) so that
/// grouping sees a pod's whole chain of owners and its top owner's size, queue and priority, as
/// KAI's pod-grouper does (its plugins, `pkg/podgrouper/podgrouper/hub/hub.go`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OwnerKind {
    /// The API group.
    pub group: &'static str,
    /// The version followed.
    pub version: &'static str,
    /// The kind.
    pub kind: &'static str,
    /// The resource (plural) name.
    pub plural: &'static str,
    /// Whether grouping reads its `spec` (a gang's size); built-in kinds give only metadata.
    pub spec: bool,
}

const fn owner(
    group: &'static str,
    version: &'static str,
    kind: &'static str,
    plural: &'static str,
    spec: bool,
) -> OwnerKind {
    OwnerKind {
        group,
        version,
        kind,
        plural,
        spec,
    }
}

/// The owner kinds grouping has rules for (`kai_scheduler::ingest::owners`), and the kinds
/// between them and their pods (a Deployment's ReplicaSets, a JobSet's or CronJob's Jobs). A
/// kind whose CRD is not installed is left alone: its watch waits for it quietly.
pub const OWNER_KINDS: &[OwnerKind] = &[
    owner("apps", "v1", "ReplicaSet", "replicasets", false),
    owner("apps", "v1", "Deployment", "deployments", false),
    owner("apps", "v1", "StatefulSet", "statefulsets", false),
    owner("batch", "v1", "Job", "jobs", false),
    owner("batch", "v1", "CronJob", "cronjobs", false),
    owner("kubeflow.org", "v1", "PyTorchJob", "pytorchjobs", true),
    owner("kubeflow.org", "v1", "TFJob", "tfjobs", true),
    owner("kubeflow.org", "v1", "MPIJob", "mpijobs", true),
    owner("kubeflow.org", "v2beta1", "MPIJob", "mpijobs", true),
    owner("kubeflow.org", "v1", "XGBoostJob", "xgboostjobs", true),
    owner("kubeflow.org", "v1", "JAXJob", "jaxjobs", true),
    owner("jobset.x-k8s.io", "v1alpha2", "JobSet", "jobsets", true),
    owner("ray.io", "v1", "RayCluster", "rayclusters", true),
    owner("ray.io", "v1", "RayJob", "rayjobs", true),
    owner(
        "leaderworkerset.x-k8s.io",
        "v1",
        "LeaderWorkerSet",
        "leaderworkersets",
        true,
    ),
];

/// Every permission the backend uses: [`BASE`] and list and watch of every owner kind. The
/// Helm chart grants exactly these.
pub fn all() -> Vec<Access> {
    let mut all = BASE.to_vec();
    for kind in OWNER_KINDS {
        for verb in ["list", "watch"] {
            let access = cluster(kind.group, kind.plural, verb);
            if !all.contains(&access) {
                all.push(access);
            }
        }
    }
    all
}

/// The permissions of the fixed calls and caches (everything but the owner kinds').
pub const BASE: &[Access] = &[
    NODES_LIST,
    NODES_WATCH,
    PODS_LIST,
    PODS_WATCH,
    POD_GROUPS_LIST,
    POD_GROUP_ANNOTATE,
    POD_GROUP_CREATE,
    QUEUES_LIST,
    QUEUES_WATCH,
    TOPOLOGIES_LIST,
    TOPOLOGIES_WATCH,
    DEVICE_CLASSES_LIST,
    DEVICE_CLASSES_WATCH,
    RESOURCE_SLICES_LIST,
    RESOURCE_SLICES_WATCH,
    RESOURCE_CLAIMS_LIST,
    RESOURCE_CLAIMS_WATCH,
    RESOURCE_CLAIM_STATUS,
    PRIORITY_CLASSES_LIST,
    PRIORITY_CLASSES_WATCH,
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

/// What `--numa` needs beyond [`all`]; the chart grants it only when `numa.enabled` is on.
pub const NUMA: &[Access] = &[NRT_LIST, NRT_WATCH, POD_ANNOTATE];

/// What `--apply-queues` needs beyond [`all`]; the chart grants it only when `applyQueues` is on.
pub const APPLY: &[Access] = &[
    QUEUES_APPLY,
    QUEUES_CREATE,
    QUEUES_DELETE,
    PRIORITY_CLASSES_APPLY,
    PRIORITY_CLASSES_CREATE,
    PRIORITY_CLASSES_DELETE,
];
