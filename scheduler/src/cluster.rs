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
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    /// Object name.
    pub name: String,
    /// Labels (topology domains are read from them).
    pub labels: BTreeMap<String, String>,
    /// `status.allocatable`: GPU from `nvidia.com/gpu` (whole devices × 1000), CPU, memory.
    pub allocatable: Amounts,
    /// `spec.unschedulable` (cordoned): running pods stay, new pods do not come.
    pub unschedulable: bool,
}

impl Node {
    /// Number of whole GPU devices.
    pub fn gpu_devices(&self) -> usize {
        (self.allocatable.gpu / 1000).max(0) as usize
    }
}

/// A pod, bound (`node` set) or pending.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pod {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// Pod group name from the `pod-group-name` annotation; `None`: a group of one.
    pub group: Option<String>,
    /// Queue named by the policy's queue label, if the pod names one.
    pub queue: Option<String>,
    /// `spec.priorityClassName`.
    pub priority_class: Option<String>,
    /// Requests summed over containers. GPU: whole devices × 1000, or for a fractional pod
    /// its fraction of one device (`gpu-fraction: 0.5` is 500).
    pub request: Amounts,
    /// Whether the GPU request is a fraction of one shared device (`gpu-fraction` annotation).
    pub fractional: bool,
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
}

impl Pod {
    /// `namespace/name`, how decisions name pods.
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }
}

/// A KAI `PodGroup` (`scheduling.run.ai/v2alpha2`): a gang of pods placed all or none.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodGroup {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// `spec.minMember`: how many pods must run for the job to run at all.
    pub min_member: u32,
    /// `spec.queue`.
    pub queue: Option<String>,
    /// `spec.priorityClassName`.
    pub priority_class: Option<String>,
    /// Creation time (orders jobs of equal priority).
    pub created: Time,
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
}
