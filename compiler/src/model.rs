//! The checked policy: plain Rust types, resolved and validated, that every later stage reads.
//! Nothing here parses or serializes; a `Policy` only exists when the checker found no error.

use crate::quantity::{Duration, ResourceKind};

/// A whole checked policy.
#[derive(Debug, Clone, PartialEq)]
pub struct Policy {
    /// Cluster-wide settings (defaults when the policy has no `cluster` node).
    pub cluster: Cluster,
    /// Priority classes, in declaration order.
    pub priority_classes: Vec<PriorityClass>,
    /// Named placements, in declaration order.
    pub placements: Vec<Placement>,
    /// Every queue, parents before children; siblings in declaration order.
    pub queues: Vec<Queue>,
}

impl Policy {
    /// The queue with this name.
    pub fn queue(&self, name: &str) -> Option<&Queue> {
        self.queues.iter().find(|q| q.name == name)
    }

    /// The priority class with this name.
    pub fn priority_class(&self, name: &str) -> Option<&PriorityClass> {
        self.priority_classes.iter().find(|p| p.name == name)
    }
}

/// Cluster-wide settings from the `cluster` node.
#[derive(Debug, Clone, PartialEq)]
pub struct Cluster {
    /// The cluster's name (`cluster NAME`), if the policy has a `cluster` node.
    pub name: Option<String>,
    /// `spec.schedulerName` that pods use to select our scheduler.
    pub scheduler_name: String,
    /// The pod (or owner) label that names a pod's queue.
    pub queue_label: String,
    /// Declared cluster totals per resource, in stored units; `None` where not declared.
    pub capacity: PerResource<Option<i64>>,
    /// Default node placement for GPU work and for CPU-only work.
    pub placement: DefaultPlacement,
    /// Time-based fair share, when enabled.
    pub fairness: Option<Fairness>,
    /// Minimum runtimes before a job may be preempted or reclaimed.
    pub min_runtime: MinRuntime,
    /// What to do when children's quotas add up to more than their parent's.
    pub oversubscription: Oversubscription,
}

impl Default for Cluster {
    fn default() -> Self {
        Cluster {
            name: None,
            scheduler_name: "kai-scheduler".to_string(),
            queue_label: "kai.scheduler/queue".to_string(),
            capacity: PerResource::default(),
            placement: DefaultPlacement::default(),
            fairness: None,
            min_runtime: MinRuntime::default(),
            oversubscription: Oversubscription::Error,
        }
    }
}

/// One value per resource kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct PerResource<T> {
    /// GPU.
    pub gpu: T,
    /// CPU.
    pub cpu: T,
    /// Memory.
    pub memory: T,
}

impl<T> PerResource<T> {
    /// The value for one kind.
    pub fn get(&self, kind: ResourceKind) -> &T {
        match kind {
            ResourceKind::Gpu => &self.gpu,
            ResourceKind::Cpu => &self.cpu,
            ResourceKind::Memory => &self.memory,
        }
    }

    /// The value for one kind, to change it.
    pub fn get_mut(&mut self, kind: ResourceKind) -> &mut T {
        match kind {
            ResourceKind::Gpu => &mut self.gpu,
            ResourceKind::Cpu => &mut self.cpu,
            ResourceKind::Memory => &mut self.memory,
        }
    }
}

/// How nodes are chosen for a workload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Strategy {
    /// Fill the fullest node that fits (KAI's default).
    #[default]
    Binpack,
    /// Use the emptiest node first.
    Spread,
}

impl Strategy {
    /// The word used in the policy language and the compiled config.
    pub fn as_str(self) -> &'static str {
        match self {
            Strategy::Binpack => "binpack",
            Strategy::Spread => "spread",
        }
    }
}

/// The cluster's default placement per resource kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DefaultPlacement {
    /// For workloads that ask for GPUs.
    pub gpu: Strategy,
    /// For CPU-only workloads.
    pub cpu: Strategy,
}

/// Time-based fair share settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Fairness {
    /// How strongly past usage pulls a queue's share down (`k`, ≥ 0).
    pub k: f64,
    /// How far back usage counts.
    pub window: Duration,
    /// After this long, a usage sample counts half.
    pub half_life: Duration,
}

/// Minimum runtimes; `None` means "inherit" (from the parent queue, then the cluster; 0 at the end).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MinRuntime {
    /// Before a job may be preempted inside its queue.
    pub preempt: Option<Duration>,
    /// Before a job may be reclaimed by another queue.
    pub reclaim: Option<Duration>,
}

/// What to do when children's quotas add up to more than their parent's quota.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Oversubscription {
    /// Reject the policy.
    #[default]
    Error,
    /// Accept it with a warning.
    Warn,
    /// Accept it silently (KAI's own behaviour).
    Allow,
}

/// A Kubernetes priority class declared by the policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PriorityClass {
    /// Object name.
    pub name: String,
    /// Priority value; higher runs first.
    pub value: i32,
    /// Whether jobs of this class may be preempted or reclaimed.
    pub preemptible: bool,
    /// Free text for `kubectl describe`.
    pub description: Option<String>,
    /// Where it is declared.
    pub origin: Origin,
}

/// A named placement that queues and workloads can use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    /// Its name.
    pub name: String,
    /// Binpack or spread.
    pub strategy: Strategy,
    /// At most this many GPUs of one workload on one node.
    pub max_gpus_per_node: Option<u32>,
    /// Node label whose value a gang must share.
    pub topology_required: Option<String>,
    /// Node label whose value a gang should share.
    pub topology_preferred: Option<String>,
    /// Where it is declared.
    pub origin: Origin,
}

/// A quota or limit: an amount in stored units, or unlimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Bound {
    /// A finite amount (GPU milli-devices, millicores, bytes).
    Finite(i64),
    /// No bound.
    Unlimited,
}

impl Bound {
    /// The finite amount, if any.
    pub fn finite(self) -> Option<i64> {
        match self {
            Bound::Finite(v) => Some(v),
            Bound::Unlimited => None,
        }
    }
}

/// How a queue governs one resource.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ResourcePolicy {
    /// Guaranteed amount.
    pub quota: Bound,
    /// Hard cap.
    pub limit: Bound,
    /// Share of what is left over after quotas.
    pub weight: f64,
}

/// Who may send work to a leaf queue.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Namespaces {
    /// Namespaces whose queue-less pods land here (and who may name it).
    pub defaults: Vec<String>,
    /// `namespaces "*"`: every namespace may name this queue.
    pub open_to_all: bool,
}

/// A queue, resolved: its parent and children are indexes into [`Policy::queues`].
#[derive(Debug, Clone, PartialEq)]
pub struct Queue {
    /// Kubernetes object name, unique in the policy.
    pub name: String,
    /// Human name.
    pub display_name: Option<String>,
    /// Queue priority (default 100): higher is served first and reclaimed last.
    pub priority: i32,
    /// The parent's index.
    pub parent: Option<usize>,
    /// The children's indexes, in declaration order.
    pub children: Vec<usize>,
    /// How deep in the tree (top level is 0).
    pub depth: usize,
    /// Per resource; `None` where the queue does not govern it.
    pub resources: PerResource<Option<ResourcePolicy>>,
    /// Namespace rules (leaf queues only).
    pub namespaces: Namespaces,
    /// Priority class for jobs that name none (inherited from the nearest ancestor that sets one).
    pub default_priority_class: Option<String>,
    /// Named placement (inherited from the nearest ancestor that sets one).
    pub placement: Option<String>,
    /// Minimum runtimes, resolved through ancestors and the cluster.
    pub min_runtime: MinRuntime,
    /// Labels of its Kubernetes object (such as KAI's `kai.scheduler/node-pool`); not inherited.
    pub labels: std::collections::BTreeMap<String, String>,
    /// Annotations of its Kubernetes object; not inherited.
    pub annotations: std::collections::BTreeMap<String, String>,
    /// Where it is declared.
    pub origin: Origin,
}

impl Queue {
    /// Whether the queue accepts workloads (it has no children).
    pub fn is_leaf(&self) -> bool {
        self.children.is_empty()
    }
}

/// Where a declaration lives: the file's display path and the 1-based line.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Origin {
    /// File path as shown to users.
    pub file: String,
    /// Line of the node.
    pub line: usize,
}
