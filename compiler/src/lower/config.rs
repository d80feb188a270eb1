//! The compiled scheduler config: one immutable JSON document holding everything the scheduler
//! needs, stamped with a digest of its content and the Git revision it came from.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::model::{self, Bound, Policy};
use crate::quantity::{Duration, ResourceKind};

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
    /// Labels of its Kubernetes object (such as KAI's `kai.scheduler/node-pool`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Annotations of its Kubernetes object.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
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
                labels: q.labels.clone(),
                annotations: q.annotations.clone(),
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

/// Why a compiled config cannot be loaded. Every message names the file and says how to fix it.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The file cannot be read.
    #[error("cannot read the compiled config {path}: {message}")]
    Read {
        /// The file.
        path: String,
        /// The system's reason.
        message: String,
    },
    /// Not JSON, or not the shape of a compiled config.
    #[error(
        "{path}:{line}:{column}: not a valid compiled config: {message}; rebuild it with `kai-policy build`"
    )]
    Json {
        /// The file.
        path: String,
        /// 1-based line of the problem.
        line: usize,
        /// 1-based column of the problem.
        column: usize,
        /// What serde found.
        message: String,
    },
    /// A format version this scheduler does not know.
    #[error(
        "{path}: api_version is {found}, but this scheduler reads {CONFIG_API_VERSION}; rebuild it with a matching `kai-policy build`"
    )]
    Version {
        /// The file.
        path: String,
        /// The version it declares (quoted), or `missing`.
        found: String,
    },
    /// The digest does not match the content: the file was edited or corrupted after `build`.
    #[error(
        "{path}: the digest {recorded} does not match the content (sha256 of the content is {computed}); the file was edited or damaged after `kai-policy build`: rebuild it rather than editing it"
    )]
    Digest {
        /// The file.
        path: String,
        /// The digest written in the file.
        recorded: String,
        /// The digest of the content as found.
        computed: String,
    },
    /// The content contradicts itself (a queue naming a parent that does not exist, …).
    #[error("{path}: {message}; rebuild it with `kai-policy build`")]
    Invalid {
        /// The file.
        path: String,
        /// What is inconsistent.
        message: String,
    },
}

/// Reads and verifies a compiled config file (see [`parse`]).
pub fn load(path: &std::path::Path) -> Result<(CompiledPolicy, Policy), LoadError> {
    let label = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| LoadError::Read {
        path: label.clone(),
        message: e.to_string(),
    })?;
    parse(&label, &text)
}

/// Parses a compiled config, checks its format version and digest, and rebuilds the checked
/// policy the scheduling cycle takes. `path` only labels errors.
pub fn parse(path: &str, text: &str) -> Result<(CompiledPolicy, Policy), LoadError> {
    let json_error = |e: serde_json::Error| LoadError::Json {
        path: path.to_string(),
        line: e.line(),
        column: e.column(),
        message: e
            .to_string()
            .split(" at line ")
            .next()
            .unwrap_or("")
            .to_string(),
    };
    // The version is read on its own first: a config of another version may have other fields,
    // and "unknown version" is the error that tells the user what to do.
    #[derive(Deserialize)]
    struct Head {
        api_version: Option<serde_json::Value>,
    }
    let head: Head = serde_json::from_str(text).map_err(json_error)?;
    match &head.api_version {
        Some(serde_json::Value::String(v)) if v == CONFIG_API_VERSION => {}
        other => {
            return Err(LoadError::Version {
                path: path.to_string(),
                found: other
                    .as_ref()
                    .map_or("missing".to_string(), |v| v.to_string()),
            });
        }
    }
    let config: CompiledPolicy = serde_json::from_str(text).map_err(json_error)?;
    let computed = digest(&config.content);
    if computed != config.digest {
        return Err(LoadError::Digest {
            path: path.to_string(),
            recorded: config.digest,
            computed,
        });
    }
    let policy = config.to_policy().map_err(|message| LoadError::Invalid {
        path: path.to_string(),
        message,
    })?;
    Ok((config, policy))
}

impl CompiledPolicy {
    /// The checked policy this config was compiled from, as far as scheduling reads it: what the
    /// config does not carry (descriptions, where priority classes and placements were declared,
    /// the oversubscription setting the checker enforces) is left empty or at its default.
    /// Fails when the content contradicts itself (names that do not resolve, a parent declared
    /// after its child), so the cycle never sees a dangling index.
    pub fn to_policy(&self) -> Result<Policy, String> {
        let c = &self.content;
        let nowhere = || model::Origin {
            file: String::new(),
            line: 0,
        };
        let mut index: BTreeMap<&str, usize> = BTreeMap::new();
        let mut queues: Vec<model::Queue> = Vec::with_capacity(c.queues.len());
        for (i, q) in c.queues.iter().enumerate() {
            if index.insert(&q.name, i).is_some() {
                return Err(format!("queue {:?} is declared twice", q.name));
            }
            let parent = match &q.parent {
                None => None,
                Some(p) => Some(*index.get(p.as_str()).ok_or_else(|| {
                    format!(
                        "queue {:?} names parent {p:?}, which is not declared before it",
                        q.name
                    )
                })?),
            };
            for (what, name, known) in [
                (
                    "priority class",
                    &q.default_priority_class,
                    c.priority_classes
                        .iter()
                        .any(|p| Some(&p.name) == q.default_priority_class.as_ref()),
                ),
                (
                    "placement",
                    &q.placement,
                    c.placements
                        .iter()
                        .any(|p| Some(&p.name) == q.placement.as_ref()),
                ),
            ] {
                if let (Some(name), false) = (name, known) {
                    return Err(format!(
                        "queue {:?} names {what} {name:?}, which is not declared",
                        q.name
                    ));
                }
            }
            queues.push(model::Queue {
                name: q.name.clone(),
                display_name: q.display_name.clone(),
                priority: q.priority,
                parent,
                children: Vec::new(),
                depth: parent.map_or(0, |p| queues[p].depth + 1),
                resources: model::PerResource {
                    gpu: q.gpu.map(ResourceConfig::to_model),
                    cpu: q.cpu.map(ResourceConfig::to_model),
                    memory: q.memory.map(ResourceConfig::to_model),
                },
                namespaces: model::Namespaces {
                    defaults: q.namespaces.clone(),
                    open_to_all: q.open_to_all_namespaces,
                },
                default_priority_class: q.default_priority_class.clone(),
                placement: q.placement.clone(),
                min_runtime: q.min_runtime.to_model(),
                labels: q.labels.clone(),
                annotations: q.annotations.clone(),
                origin: nowhere(),
            });
        }
        for (i, q) in c.queues.iter().enumerate() {
            for child in &q.children {
                let &ci = index.get(child.as_str()).ok_or_else(|| {
                    format!(
                        "queue {:?} names child {child:?}, which is not declared",
                        q.name
                    )
                })?;
                if queues[ci].parent != Some(i) {
                    return Err(format!(
                        "queue {:?} lists child {child:?}, whose parent is another queue",
                        q.name
                    ));
                }
                queues[i].children.push(ci);
            }
        }
        if let Some(q) = queues.iter().find(|q| {
            q.parent.is_some_and(|p| {
                !queues[p]
                    .children
                    .iter()
                    .any(|&ci| queues[ci].name == q.name)
            })
        }) {
            return Err(format!(
                "queue {:?} is missing from its parent's children",
                q.name
            ));
        }
        let cl = &c.cluster;
        Ok(Policy {
            cluster: model::Cluster {
                name: cl.name.clone(),
                scheduler_name: cl.scheduler_name.clone(),
                queue_label: cl.queue_label.clone(),
                capacity: model::PerResource {
                    gpu: cl.capacity.gpu_milli,
                    cpu: cl.capacity.cpu_milli,
                    memory: cl.capacity.memory_bytes,
                },
                placement: model::DefaultPlacement {
                    gpu: cl.gpu_placement.into(),
                    cpu: cl.cpu_placement.into(),
                },
                fairness: cl.fairness.map(|f| model::Fairness {
                    k: f.k,
                    window: Duration(f.window_seconds),
                    half_life: Duration(f.half_life_seconds),
                }),
                min_runtime: cl.min_runtime.to_model(),
                oversubscription: model::Oversubscription::default(),
            },
            priority_classes: c
                .priority_classes
                .iter()
                .map(|p| model::PriorityClass {
                    name: p.name.clone(),
                    value: p.value,
                    preemptible: p.preemptible,
                    description: None,
                    origin: nowhere(),
                })
                .collect(),
            placements: c
                .placements
                .iter()
                .map(|p| model::Placement {
                    name: p.name.clone(),
                    strategy: p.strategy.into(),
                    max_gpus_per_node: p.max_gpus_per_node,
                    topology_required: p.topology_required.clone(),
                    topology_preferred: p.topology_preferred.clone(),
                    origin: nowhere(),
                })
                .collect(),
            queues,
        })
    }
}

impl From<Strategy> for model::Strategy {
    fn from(s: Strategy) -> Self {
        match s {
            Strategy::Binpack => model::Strategy::Binpack,
            Strategy::Spread => model::Strategy::Spread,
        }
    }
}

impl MinRuntimeConfig {
    fn to_model(self) -> model::MinRuntime {
        model::MinRuntime {
            preempt: self.preempt_seconds.map(Duration),
            reclaim: self.reclaim_seconds.map(Duration),
        }
    }
}

impl ResourceConfig {
    fn to_model(self) -> model::ResourcePolicy {
        let bound = |v: Option<i64>| v.map_or(model::Bound::Unlimited, model::Bound::Finite);
        model::ResourcePolicy {
            quota: bound(self.quota),
            limit: bound(self.limit),
            weight: self.weight,
        }
    }
}
