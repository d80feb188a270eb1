//! The cluster as one cycle sees it: nodes, pods and pod groups, with every amount in the
//! compiler's stored units (GPUs and CPUs in thousandths, memory in bytes). Plain data, no I/O:
//! the Kubernetes adapter, the simulator and the benchmark all build a `Snapshot`.

use std::collections::BTreeMap;

use kai_policy_compiler::model::PerResource;

/// Amounts per resource: GPU in thousandths of a device, CPU in millicores, memory in bytes.
pub type Amounts = PerResource<i64>;

/// Seconds on the scheduler's clock (the simulator's starts at 0).
pub type Time = u64;

/// A node that pods can run on.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Node {
    /// Object name.
    pub name: String,
    /// Labels (topology domains are read from them).
    pub labels: BTreeMap<String, String>,
    /// `status.allocatable`: GPU from `nvidia.com/gpu` (whole devices × 1000), CPU, memory.
    pub allocatable: Amounts,
    /// `spec.unschedulable` (cordoned): running pods stay, new pods do not come.
    pub unschedulable: bool,
    /// The `Ready` condition is not `True` (or is missing from a node that reports conditions).
    pub not_ready: bool,
    /// The conditions that keep new pods off besides `Ready`: `MemoryPressure`,
    /// `DiskPressure`, `PIDPressure` or `NetworkUnavailable` with a status other than `False`
    /// (KAI's `scheduler_util.CheckNodeConditionPredicate`), by type, in the node's order.
    pub pressure: Vec<String>,
    /// `spec.taints`.
    pub taints: Vec<Taint>,
    /// Every other allocatable resource (`ephemeral-storage`, `hugepages-*`, `nvidia.com/mig-*`,
    /// `rdma/*`, …) in whole units (bytes for storage and hugepages), rounded down.
    pub extended: BTreeMap<String, i64>,
    /// `status.allocatable.pods`: how many pods may run on it; `None`: not reported.
    pub max_pods: Option<u32>,
    /// GPUs its ResourceSlices publish (Dynamic Resource Allocation), counted in `allocatable`
    /// too ([`crate::dra::count_gpus`]).
    pub dra_gpus: u32,
    /// Its NUMA zones and the kubelet's Topology Manager policy, from its NodeResourceTopology
    /// object (`None`: no such object, or one without zones).
    pub numa: Option<Box<crate::numa::Topology>>,
}

impl Node {
    /// Whether new pods may go there and its resources count in fair share: not cordoned,
    /// Ready, under no pressure condition (KAI's `scheduler_util.ValidateIsNodeReady`).
    pub fn takes_pods(&self) -> bool {
        !self.unschedulable && !self.not_ready && self.pressure.is_empty()
    }
}

/// What a taint does to pods that do not tolerate it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum TaintEffect {
    /// New pods are not placed there.
    #[default]
    NoSchedule,
    /// New pods avoid it when another node will do.
    PreferNoSchedule,
    /// New pods are not placed there, and running ones are evicted (by Kubernetes, not us).
    NoExecute,
}

impl TaintEffect {
    /// The effect as Kubernetes spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            TaintEffect::NoSchedule => "NoSchedule",
            TaintEffect::PreferNoSchedule => "PreferNoSchedule",
            TaintEffect::NoExecute => "NoExecute",
        }
    }
}

/// A node taint.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Taint {
    /// Key.
    pub key: String,
    /// Value (may be empty).
    pub value: String,
    /// Effect.
    pub effect: TaintEffect,
}

/// A pod toleration.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Toleration {
    /// Key; empty with `exists` tolerates every taint.
    pub key: String,
    /// `operator: Exists` (any value); otherwise `Equal`.
    pub exists: bool,
    /// Value compared with `Equal`.
    pub value: String,
    /// The effect tolerated; `None`: every effect.
    pub effect: Option<TaintEffect>,
}

/// How a label requirement compares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operator {
    /// The value is one of `values`.
    In,
    /// The label is missing or its value is none of `values`.
    NotIn,
    /// The label is set.
    Exists,
    /// The label is not set.
    DoesNotExist,
    /// The value, as an integer, is greater than the one value given.
    Gt,
    /// The value, as an integer, is less than the one value given.
    Lt,
}

impl Operator {
    /// Every operator, by the name the API spells it with.
    pub const NAMED: [(&'static str, Operator); 6] = [
        ("In", Operator::In),
        ("NotIn", Operator::NotIn),
        ("Exists", Operator::Exists),
        ("DoesNotExist", Operator::DoesNotExist),
        ("Gt", Operator::Gt),
        ("Lt", Operator::Lt),
    ];

    /// The name the API spells it with.
    pub fn name(self) -> &'static str {
        Operator::NAMED
            .iter()
            .find(|(_, o)| *o == self)
            .map(|(n, _)| *n)
            .expect("every operator is in NAMED")
    }
}

/// One requirement on a label (or, in `matchFields`, on `metadata.name`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Requirement {
    /// Label key (or field path).
    pub key: String,
    /// Operator.
    pub operator: Operator,
    /// Values.
    pub values: Vec<String>,
}

/// One `nodeSelectorTerm`: every requirement must hold.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeSelectorTerm {
    /// `matchExpressions` on node labels.
    pub expressions: Vec<Requirement>,
    /// `matchFields` (only `metadata.name` exists).
    pub fields: Vec<Requirement>,
}

/// A label selector over pods (`matchLabels` and `matchExpressions` together).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabelSelector {
    /// `matchLabels`.
    pub labels: BTreeMap<String, String>,
    /// `matchExpressions` (`In`, `NotIn`, `Exists`, `DoesNotExist`).
    pub expressions: Vec<Requirement>,
}

/// A required inter-pod (anti-)affinity term.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodAffinityTerm {
    /// Which pods it is about.
    pub selector: LabelSelector,
    /// The namespaces those pods are in; empty: the pod's own namespace.
    pub namespaces: Vec<String>,
    /// The node label that defines "together" (hostname, zone, …).
    pub topology_key: String,
}

/// A host port a container binds on its node.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct HostPort {
    /// `TCP`, `UDP` or `SCTP`.
    pub protocol: String,
    /// `hostIP`; empty (or `0.0.0.0`) means every address.
    pub ip: String,
    /// The port.
    pub port: i32,
}

/// Where a pod may go, beyond its resources: what the node filters read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Constraints {
    /// `spec.tolerations`.
    pub tolerations: Vec<Toleration>,
    /// `spec.nodeSelector`.
    pub node_selector: BTreeMap<String, String>,
    /// Required node affinity: terms ORed; empty: none.
    pub required_terms: Vec<NodeSelectorTerm>,
    /// Preferred node affinity: `(weight, term)`.
    pub preferred_terms: Vec<(i32, NodeSelectorTerm)>,
    /// Required inter-pod affinity terms.
    pub pod_affinity: Vec<PodAffinityTerm>,
    /// Required inter-pod anti-affinity terms.
    pub pod_anti_affinity: Vec<PodAffinityTerm>,
    /// Host ports of its containers.
    pub host_ports: Vec<HostPort>,
    /// `spec.resourceClaims`: the DRA claims it uses.
    pub claims: Vec<crate::dra::PodClaim>,
    /// What the pod asks of NUMA zones (`None`: nothing of it is aligned).
    pub numa: Option<Box<crate::numa::PodNuma>>,
}

impl Constraints {
    /// Whether any inter-pod (anti-)affinity term is set.
    pub fn has_pod_terms(&self) -> bool {
        !self.pod_affinity.is_empty() || !self.pod_anti_affinity.is_empty()
    }
}

/// GPUs (thousandths) that MIG instances among `resources` count as in queues' quotas and fair
/// shares: each `nvidia.com/mig-<g>g.<m>gb` instance as `g` GPUs, its compute slices (KAI's
/// `GetGpusQuota` with `ExtractGpuAndMemoryFromMigResourceName`). Other names count nothing.
pub fn mig_gpus(resources: &BTreeMap<String, i64>) -> i64 {
    resources
        .iter()
        .filter_map(|(name, &count)| {
            let profile = name.strip_prefix("nvidia.com/mig-")?;
            let (slices, memory) = profile.split_once("g.")?;
            let memory = memory.strip_suffix("gb")?;
            let digits = |t: &str| !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit());
            if !digits(slices) || !digits(memory) {
                return None;
            }
            Some(slices.parse::<i64>().ok()?.saturating_mul(count.max(0)) * 1000)
        })
        .sum()
}

impl Node {
    /// Number of whole GPU devices.
    pub fn gpu_devices(&self) -> usize {
        (self.allocatable.gpu / 1000).max(0) as usize
    }
}

/// A pod, bound (`node` set) or pending.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Pod {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// Pod group name from the `pod-group-name` annotation; `None`: a group of one.
    pub group: Option<String>,
    /// Queue named by the policy's queue label (on its top owner, else on the pod).
    pub queue: Option<String>,
    /// `spec.priorityClassName`.
    pub priority_class: Option<String>,
    /// The `priorityClassName` label (on its top owner, else on the pod): KAI's documented way
    /// to set a priority; used only when the policy declares the class.
    pub priority_label: Option<String>,
    /// The `kai.scheduler/preemptibility` label: `Some(true)` preemptible, `Some(false)` not.
    pub preemptibility: Option<bool>,
    /// Labels (inter-pod affinity selects on them).
    pub labels: BTreeMap<String, String>,
    /// Requests summed over containers, plus `spec.overhead`. GPU: whole devices × 1000, or for
    /// a shared pod its share of all its devices (`gpu-fraction: 0.5` on 2 devices is 1000).
    pub request: Amounts,
    /// Every other requested resource (`ephemeral-storage`, `hugepages-*`, `nvidia.com/mig-*`,
    /// `rdma/*`, …) in whole units, rounded up.
    pub extended: BTreeMap<String, i64>,
    /// Whether the GPU request is shared devices (`gpu-fraction` or `gpu-memory` annotation).
    pub fractional: bool,
    /// How many devices a shared pod spreads its request over (`gpu-fraction-num-devices`); 0
    /// or 1: one.
    pub shared_devices: u32,
    /// GPUs its DRA claims ask, counted in `request` too ([`crate::dra::count_gpus`]).
    pub dra_gpus: u32,
    /// `gpu-memory` in MiB: a shared pod only goes where one device has at least this much.
    pub gpu_memory: Option<i64>,
    /// Scheduled by another scheduler (`spec.schedulerName`): never a job, never moved or
    /// evicted; what it holds is used on its node.
    pub foreign: bool,
    /// Where it may go beyond its resources (boxed: most pods have none, and a small `Pod`
    /// keeps the cycle's passes over all pods in cache).
    pub constraints: Box<Constraints>,
    /// `spec.nodeName`.
    pub node: Option<String>,
    /// Creation time.
    pub created: Time,
    /// When it started running (for min-runtime); `None` while pending.
    pub started: Option<Time>,
    /// `spec.terminationGracePeriodSeconds` (Kubernetes' default is 30).
    pub termination_grace_seconds: u64,
    /// Being deleted (`metadata.deletionTimestamp` set): its resources are being released.
    pub terminating: bool,
    /// `metadata.deletionTimestamp`, on the scheduler's clock, when known: the end of its grace
    /// period. A pod still running well after it is stuck, not releasing (KAI's
    /// `StuckInReleasing`).
    pub deletion_deadline: Option<Time>,
    /// Asks MIG instances through annotations (`nvidia.com/mig-…: "1"`), the old way: KAI never
    /// places such a pod, and keeps other MIG pods off a node running one (its legacy MIG
    /// tasks, `pod_info.go: updateLegacyMigResourceRequestFromAnnotations`).
    pub legacy_mig: bool,
    /// Where on its node's NUMA zones the pod is, as recorded in its annotations (observed by
    /// KAI's placement exporter, else predicted at bind).
    pub numa_zones: Option<Vec<crate::numa::ZoneAmount>>,
}

impl Pod {
    /// Whether it is one of KAI's binder's GPU reservation pods ([`is_gpu_reservation`]).
    pub fn is_gpu_reservation(&self) -> bool {
        is_gpu_reservation(&self.labels)
    }

    /// `namespace/name`, how decisions name pods.
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    /// Whether the pod asks for a GPU of any kind: whole, shared, by memory or a MIG instance
    /// (KAI's `PodInfo.IsRequireAnyKindOfGPU`).
    pub fn asks_gpu(&self) -> bool {
        self.request.gpu > 0 || self.gpu_memory.is_some() || mig_gpus(&self.extended) > 0
    }

    /// GPU thousandths taken on each device of a shared pod.
    pub fn share_per_device(&self) -> i64 {
        self.request.gpu / i64::from(self.shared_devices.max(1))
    }

    /// Puts the pod on `node` as a move leaves it: the new pod its controller makes runs there
    /// from `now`, on whatever device KAI's binder gives it (its old GPU group labels go).
    pub fn move_to(&mut self, node: &str, now: Time) {
        self.node = Some(node.to_string());
        self.started = Some(now);
        self.labels.retain(|k, _| !is_gpu_group_label(k));
    }

    /// The devices a bound shared pod shares, as KAI's binder named them (its GPU groups):
    /// the `runai-gpu-group` label, and a `runai-gpu-group/<group>` label per device of a pod
    /// on several devices (`pkg/common/resources/gpu_sharing.go: GetGpuGroups`;
    /// `resource_reservation.go: updatePodGPUGroup`). Pods of one group on a node share one
    /// device. Sorted, each once; empty when the pod is not shared or names none.
    pub fn gpu_groups(&self) -> Vec<&str> {
        if !self.fractional {
            return Vec::new();
        }
        let mut groups: Vec<&str> = self
            .labels
            .iter()
            .filter(|(k, v)| !v.is_empty() && is_gpu_group_label(k))
            .map(|(_, v)| v.as_str())
            .collect();
        groups.sort_unstable();
        groups.dedup();
        groups
    }
}

/// The label KAI's binder sets on a shared pod to name the GPU device it shares (its GPU
/// group); pods on several devices carry `runai-gpu-group/<group>` labels instead.
pub const GPU_GROUP_LABEL: &str = "runai-gpu-group";

/// Whether a label names a shared pod's device (see [`Pod::gpu_groups`]).
pub fn is_gpu_group_label(key: &str) -> bool {
    key.strip_prefix(GPU_GROUP_LABEL)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
}

/// The `app` label value of KAI's GPU reservation pods (`pkg/scheduler/conf/global_config.go`,
/// `ResourceReservationAppLabelValue`): one per shared device, holding it for the shared pods.
pub const RESERVATION_APP: &str = "kai-resource-reservation";

/// Whether a pod with these labels is one of KAI's binder's GPU reservation pods (label `app`
/// is [`RESERVATION_APP`]).
pub fn is_gpu_reservation(labels: &BTreeMap<String, String>) -> bool {
    labels.get("app").is_some_and(|a| a == RESERVATION_APP)
}

/// A KAI `PodGroup` (`scheduling.run.ai/v2alpha2`), or the group KAI's pod-grouper would
/// make for pods of one top owner: a gang of pods placed all or none.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodGroup {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// `spec.minMember`: how many pods must run for the job to run at all (0: no gang rule).
    pub min_member: u32,
    /// `spec.queue`.
    pub queue: Option<String>,
    /// `spec.priorityClassName`.
    pub priority_class: Option<String>,
    /// Creation time (orders jobs of equal priority).
    pub created: Time,
    /// `spec.preemptibility`: overrides the priority class's rule when set.
    pub preemptible: Option<bool>,
    /// `spec.stalenessGracePeriod` in seconds (negative: never stale).
    pub staleness_grace: Option<i64>,
    /// The `kai.scheduler/stale-podgroup-timestamp` annotation, on the scheduler's clock.
    pub stale_since: Option<Time>,
    /// `spec.preemptionDelay` in seconds.
    pub preemption_delay: Option<u64>,
    /// KAI's `kai.scheduler/last-eviction-timestamp` annotation, on the scheduler's clock: the
    /// preemption delay counts from it when it is later than the creation time.
    pub last_evicted: Option<Time>,
    /// KAI's `kai.scheduler/last-start-timestamp` annotation, on the scheduler's clock: when
    /// the scheduler last bound the job with none of its pods allocated. Min-runtime counts
    /// from it.
    pub last_start: Option<Time>,
    /// Pods of the group that finished with phase `Succeeded`.
    pub succeeded: u32,
    /// `spec.topologyConstraint.topology` (or the owner's annotation): the [`Topology`] whose
    /// levels the constraint names.
    pub topology: Option<String>,
    /// `spec.topologyConstraint` (or the owner's annotations): node label the gang must share.
    pub topology_required: Option<String>,
    /// Node label the gang should share.
    pub topology_preferred: Option<String>,
    /// For a group built from a top owner: KAI's default priority class for its kind
    /// (`inference` for Deployments); `None` for PodGroup objects.
    pub kind_priority: Option<String>,
    /// `spec.subGroups`: smaller gangs inside the group, in the order written (empty: the group
    /// is one gang of `min_member`).
    pub sub_groups: Vec<SubGroup>,
    /// `spec.minSubGroup`: how many top-level sub-groups must be able to run (`None`: all).
    pub min_sub_group: Option<u32>,
    /// For a group built from a top owner: that owner, which the PodGroup object the Kubernetes
    /// backend makes for the group belongs to (boxed: most groups have none).
    pub owner: Option<Box<ObjectRef>>,
}

/// A reference to a Kubernetes object, as an `ownerReferences` entry holds it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct ObjectRef {
    /// `apiVersion`.
    pub api_version: String,
    /// `kind`.
    pub kind: String,
    /// `metadata.name`.
    pub name: String,
    /// `metadata.uid`.
    pub uid: String,
}

/// One entry of a PodGroup's `spec.subGroups` (KAI's `v2alpha2.SubGroup`). A sub-group that is
/// some other's `parent` groups sub-groups; one that is not holds the pods whose
/// `kai.scheduler/subgroup-name` label names it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SubGroup {
    /// `name`, unique in the group.
    pub name: String,
    /// `parent`: the sub-group it belongs to (`None`: the group itself).
    pub parent: Option<String>,
    /// `minMember`: pods of a pod-holding sub-group that must run together (`None`: 0).
    pub min_member: Option<u32>,
    /// `minSubGroup`: child sub-groups of a grouping sub-group that must run (`None`: all).
    pub min_sub_group: Option<u32>,
    /// `topologyConstraint.topology`.
    pub topology: Option<String>,
    /// `topologyConstraint.requiredTopologyLevel`.
    pub topology_required: Option<String>,
    /// `topologyConstraint.preferredTopologyLevel`.
    pub topology_preferred: Option<String>,
}

/// The pod label naming the sub-group a pod belongs to (KAI's `constants.SubGroupLabelKey`).
pub const SUBGROUP_LABEL: &str = "kai.scheduler/subgroup-name";

impl PodGroup {
    /// When the group may first trigger evictions (KAI's `PreemptionDelayEnd`): its
    /// `preemptionDelay` after the later of its creation and its last eviction; `None` without
    /// a delay.
    pub fn evicts_from(&self) -> Option<Time> {
        let delay = self.preemption_delay.filter(|&d| d > 0)?;
        Some(
            self.created
                .max(self.last_evicted.unwrap_or(0))
                .saturating_add(delay),
        )
    }
}

/// Everything one cycle looks at.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Snapshot {
    /// Nodes.
    pub nodes: Vec<Node>,
    /// Pods, bound and pending.
    pub pods: Vec<Pod>,
    /// Pod groups.
    pub groups: Vec<PodGroup>,
    /// The cluster's PriorityClass objects, name → value: a class the policy does not declare
    /// takes its value from here, as KAI takes every class's (`cluster_info.go:
    /// getPodGroupPriority`).
    pub priority_classes: BTreeMap<String, i32>,
    /// The cluster's KAI `Topology` objects, which a topology constraint names.
    pub topologies: Vec<Topology>,
    /// DeviceClasses, ResourceSlices and ResourceClaims (Dynamic Resource Allocation).
    pub dra: crate::dra::Dra,
    /// Resources NUMA alignment leaves out (KAI's `numa` plugin's `ignoreList`: `memory`
    /// without the Memory Manager, `cpu` without the static CPU manager).
    pub numa_ignore: std::collections::BTreeSet<String>,
}

impl Snapshot {
    /// Each node's index, by name.
    pub fn node_index(&self) -> rustc_hash::FxHashMap<&str, usize> {
        self.nodes
            .iter()
            .enumerate()
            .map(|(i, n)| (n.name.as_str(), i))
            .collect()
    }
}

/// KAI's `Topology` object (`kai.scheduler/v1alpha1`): the node labels of its levels, the top
/// level first (`zone`, then `rack`). A domain of a level is the nodes that share that label's
/// value and every higher level's.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Topology {
    /// `metadata.name`.
    pub name: String,
    /// `spec.levels[].nodeLabel`, top level first.
    pub levels: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mig_instance_counts_as_its_compute_slices_in_gpus() {
        let resources: BTreeMap<String, i64> = [
            ("nvidia.com/mig-1g.10gb", 2),
            ("nvidia.com/mig-3g.40gb", 1),
            ("nvidia.com/mig-7g.80gb", 1),
            // Not KAI's `<g>g.<m>gb` pattern, or not MIG at all: nothing.
            ("nvidia.com/mig-1c.3g.40gb", 4),
            ("nvidia.com/mig-g.10gb", 1),
            ("nvidia.com/gpu", 8),
            ("rdma/ib", 1),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        assert_eq!(mig_gpus(&resources), (2 + 3 + 7) * 1000);
    }
}
