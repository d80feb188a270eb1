//! The compiled scheduler config: one immutable JSON document holding everything the scheduler
//! needs, stamped with a digest of its content and the Git revision it came from.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::model::{self, Bound, Policy};
use crate::quantity::ResourceKind;

/// Version of the compiled config format; bumped on any incompatible change.
pub const CONFIG_API_VERSION: &str = "kai-policy.io/v1";

/// The compiled policy the scheduler loads. Amounts are integers in stored units: GPUs and CPUs
/// in thousandths (`gpu_milli`, `cpu_milli`), memory in bytes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CompiledPolicy {
    /// Format version, `kai-policy.io/v1`.
    pub api_version: String,
    /// `sha256:` digest of the canonical JSON of `content`: equal digests mean equal policies.
    pub digest: String,
    /// Where the policy came from.
    pub source: SourceInfo,
    /// The policy itself.
    pub content: CompiledContent,
}

/// Where a compiled policy came from.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SourceInfo {
    /// The Git commit (40 hex digits) when the policy folder is inside a Git repository.
    pub revision: Option<String>,
    /// True when policy files differ from that commit (uncommitted changes).
    pub dirty: bool,
}

/// Everything the digest covers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CompiledContent {
    /// Cluster-wide settings.
    pub cluster: ClusterConfig,
    /// Priority classes, in declaration order.
    pub priority_classes: Vec<PriorityClassConfig>,
    /// Named placements, in declaration order.
    pub placements: Vec<PlacementConfig>,
    /// Queues, parents before children.
    pub queues: Vec<QueueConfig>,
    /// Namespace → the leaf queue its queue-less pods land in.
    pub namespace_defaults: BTreeMap<String, String>,
}

/// Cluster-wide settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ClusterConfig {
    /// Cluster name, if declared.
    pub name: Option<String>,
    /// `spec.schedulerName` pods use to select this scheduler.
    pub scheduler_name: String,
    /// Pod (or owner) label naming the queue.
    pub queue_label: String,
    /// Declared capacity (`null` where not declared).
    pub capacity: Amounts,
    /// Default strategy for GPU work.
    pub gpu_placement: Strategy,
    /// Default strategy for CPU-only work.
    pub cpu_placement: Strategy,
    /// Time-based fair share, when enabled.
    pub fairness: Option<FairnessConfig>,
    /// Cluster default minimum runtimes.
    pub min_runtime: MinRuntimeConfig,
}

/// An optional amount per resource, in stored units.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Amounts {
    /// Thousandths of a GPU.
    pub gpu_milli: Option<i64>,
    /// Millicores.
    pub cpu_milli: Option<i64>,
    /// Bytes.
    pub memory_bytes: Option<i64>,
}

/// Binpack or spread.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Strategy {
    /// Fullest node that fits first.
    Binpack,
    /// Emptiest node first.
    Spread,
}

impl From<model::Strategy> for Strategy {
    fn from(s: model::Strategy) -> Self {
        match s {
            model::Strategy::Binpack => Strategy::Binpack,
            model::Strategy::Spread => Strategy::Spread,
        }
    }
}

/// Time-based fair share.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FairnessConfig {
    /// Weight of past usage.
    pub k: f64,
    /// How far back usage counts, in seconds.
    pub window_seconds: u64,
    /// Half-life of a usage sample, in seconds.
    pub half_life_seconds: u64,
}

/// Minimum runtimes in seconds (`null`: none).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MinRuntimeConfig {
    /// Before preemption inside the queue.
    pub preempt_seconds: Option<u64>,
    /// Before reclaim by another queue.
    pub reclaim_seconds: Option<u64>,
}

impl From<model::MinRuntime> for MinRuntimeConfig {
    fn from(m: model::MinRuntime) -> Self {
        MinRuntimeConfig {
            preempt_seconds: m.preempt.map(|d| d.0),
            reclaim_seconds: m.reclaim.map(|d| d.0),
        }
    }
}

/// A priority class.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PriorityClassConfig {
    /// Name.
    pub name: String,
    /// Value.
    pub value: i32,
    /// Whether its jobs may be preempted or reclaimed.
    pub preemptible: bool,
}

/// A named placement.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PlacementConfig {
    /// Name.
    pub name: String,
    /// Binpack or spread.
    pub strategy: Strategy,
    /// Per-node GPU cap for one workload.
    pub max_gpus_per_node: Option<u32>,
    /// Node label a gang must share.
    pub topology_required: Option<String>,
    /// Node label a gang should share.
    pub topology_preferred: Option<String>,
}

/// A queue with every number resolved.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct QueueConfig {
    /// Name.
    pub name: String,
    /// Human name.
    pub display_name: Option<String>,
    /// Parent's name.
    pub parent: Option<String>,
    /// Children's names, in declaration order.
    pub children: Vec<String>,
    /// Queue priority.
    pub priority: i32,
    /// Governed resources (`null`: not governed).
    pub gpu: Option<ResourceConfig>,
    /// See `gpu`.
    pub cpu: Option<ResourceConfig>,
    /// See `gpu`.
    pub memory: Option<ResourceConfig>,
    /// Namespaces whose queue-less pods land here.
    pub namespaces: Vec<String>,
    /// Whether any namespace may name this queue.
    pub open_to_all_namespaces: bool,
    /// Priority class for jobs that name none (inherited).
    pub default_priority_class: Option<String>,
    /// Named placement (inherited).
    pub placement: Option<String>,
    /// Minimum runtimes (inherited through ancestors and the cluster).
    pub min_runtime: MinRuntimeConfig,
}

/// How a queue governs one resource; amounts in stored units, `null` meaning unlimited.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ResourceConfig {
    /// Guaranteed amount.
    pub quota: Option<i64>,
    /// Cap.
    pub limit: Option<i64>,
    /// Over-quota weight.
    pub weight: f64,
}

fn resource(r: Option<model::ResourcePolicy>) -> Option<ResourceConfig> {
    r.map(|r| ResourceConfig {
        quota: r.quota.finite(),
        limit: match r.limit {
            Bound::Finite(v) => Some(v),
            Bound::Unlimited => None,
        },
        weight: r.weight,
    })
}

/// The content of the compiled config for a checked policy.
pub fn content(policy: &Policy) -> CompiledContent {
    let c = &policy.cluster;
    let mut namespace_defaults = BTreeMap::new();
    for q in &policy.queues {
        for ns in &q.namespaces.defaults {
            namespace_defaults.insert(ns.clone(), q.name.clone());
        }
    }
    CompiledContent {
        cluster: ClusterConfig {
            name: c.name.clone(),
            scheduler_name: c.scheduler_name.clone(),
            queue_label: c.queue_label.clone(),
            capacity: Amounts {
                gpu_milli: *c.capacity.get(ResourceKind::Gpu),
                cpu_milli: *c.capacity.get(ResourceKind::Cpu),
                memory_bytes: *c.capacity.get(ResourceKind::Memory),
            },
            gpu_placement: c.placement.gpu.into(),
            cpu_placement: c.placement.cpu.into(),
            fairness: c.fairness.map(|f| FairnessConfig {
                k: f.k,
                window_seconds: f.window.0,
                half_life_seconds: f.half_life.0,
            }),
            min_runtime: c.min_runtime.into(),
        },
        priority_classes: policy
            .priority_classes
            .iter()
            .map(|p| PriorityClassConfig {
                name: p.name.clone(),
                value: p.value,
                preemptible: p.preemptible,
            })
            .collect(),
        placements: policy
            .placements
            .iter()
            .map(|p| PlacementConfig {
                name: p.name.clone(),
                strategy: p.strategy.into(),
                max_gpus_per_node: p.max_gpus_per_node,
                topology_required: p.topology_required.clone(),
                topology_preferred: p.topology_preferred.clone(),
            })
            .collect(),
        queues: policy
            .queues
            .iter()
            .map(|q| QueueConfig {
                name: q.name.clone(),
                display_name: q.display_name.clone(),
                parent: q.parent.map(|p| policy.queues[p].name.clone()),
                children: q
                    .children
                    .iter()
                    .map(|&c| policy.queues[c].name.clone())
                    .collect(),
                priority: q.priority,
                gpu: resource(q.resources.gpu),
                cpu: resource(q.resources.cpu),
                memory: resource(q.resources.memory),
                namespaces: q.namespaces.defaults.clone(),
                open_to_all_namespaces: q.namespaces.open_to_all,
                default_priority_class: q.default_priority_class.clone(),
                placement: q.placement.clone(),
                min_runtime: q.min_runtime.into(),
            })
            .collect(),
        namespace_defaults,
    }
}

impl CompiledPolicy {
    /// Compiles a checked policy, stamping the digest of its content and where it came from.
    pub fn new(policy: &Policy, source: SourceInfo) -> Self {
        let content = content(policy);
        CompiledPolicy {
            api_version: CONFIG_API_VERSION.to_string(),
            digest: digest(&content),
            source,
            content,
        }
    }

    /// Whether the digest matches the content (a config edited by hand, or corrupted, does not).
    pub fn verify(&self) -> bool {
        self.digest == digest(&self.content)
    }

    /// The document as pretty JSON with a trailing newline.
    pub fn to_json(&self) -> String {
        let mut out = serde_json::to_string_pretty(self).unwrap_or_default();
        out.push('\n');
        out
    }
}

/// `sha256:<hex>` of the canonical (compact, fixed field order) JSON of the content.
pub fn digest(content: &CompiledContent) -> String {
    let bytes = serde_json::to_vec(content).unwrap_or_default();
    let hash = Sha256::digest(&bytes);
    let hex: String = hash.iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}
