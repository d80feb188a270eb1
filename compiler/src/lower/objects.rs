//! The Kubernetes objects a policy lowers to: KAI `Queue`s (`scheduling.run.ai/v2`) and
//! `PriorityClass`es, as serde types shaped exactly like the API's.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::model::{Bound, Policy, ResourcePolicy};
use crate::quantity::ResourceKind;

/// Label that marks objects kai-policy owns, so `kubectl apply --prune` and audits can find them.
pub const MANAGED_BY: (&str, &str) = ("app.kubernetes.io/managed-by", "kai-policy");
/// KAI's label for a workload's preemptibility (it separates preemptibility from priority).
pub const PREEMPTIBILITY_LABEL: &str = "kai.scheduler/preemptibility";

/// Object metadata: the fields we set.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Metadata {
    /// Object name.
    pub name: String,
    /// Labels.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Annotations.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

/// A KAI Queue object.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct QueueObject {
    /// `scheduling.run.ai/v2`.
    pub api_version: String,
    /// `Queue`.
    pub kind: String,
    /// Name, labels, annotations.
    pub metadata: Metadata,
    /// The queue's settings.
    pub spec: QueueSpec,
}

/// `spec` of a KAI Queue.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct QueueSpec {
    /// Human name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display_name: Option<String>,
    /// Parent queue name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_queue: Option<String>,
    /// Queue priority.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<i64>,
    /// Minimum runtime before preemption, as a Go duration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preempt_min_runtime: Option<String>,
    /// Minimum runtime before reclaim, as a Go duration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reclaim_min_runtime: Option<String>,
    /// Per-resource quota, limit and weight, in KAI's units.
    #[serde(default)]
    pub resources: QueueResources,
}

/// `spec.resources` of a KAI Queue.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct QueueResources {
    /// GPU devices (fractions allowed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu: Option<QueueResource>,
    /// CPU millicores.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<QueueResource>,
    /// Memory megabytes (10^6 bytes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<QueueResource>,
}

impl QueueResources {
    /// The entry for one kind.
    pub fn get(&self, kind: ResourceKind) -> Option<&QueueResource> {
        match kind {
            ResourceKind::Gpu => self.gpu.as_ref(),
            ResourceKind::Cpu => self.cpu.as_ref(),
            ResourceKind::Memory => self.memory.as_ref(),
        }
    }
}

/// One resource of a KAI Queue; `-1` means unlimited.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct QueueResource {
    /// Guaranteed amount.
    #[serde(default)]
    pub quota: Number,
    /// Cap.
    #[serde(default)]
    pub limit: Number,
    /// Over-quota weight.
    #[serde(default)]
    pub over_quota_weight: Number,
}

/// A JSON number written as an integer when it is whole (`30`, not `30.0`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Deserialize)]
#[serde(transparent)]
pub struct Number(pub f64);

impl Serialize for Number {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if self.0.fract() == 0.0 && self.0.abs() < 9.0e15 {
            s.serialize_i64(self.0 as i64)
        } else {
            s.serialize_f64(self.0)
        }
    }
}

/// A `scheduling.k8s.io/v1` PriorityClass.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PriorityClassObject {
    /// `scheduling.k8s.io/v1`.
    pub api_version: String,
    /// `PriorityClass`.
    pub kind: String,
    /// Name and labels.
    pub metadata: Metadata,
    /// Priority value.
    pub value: i64,
    /// Never the cluster default: pods opt in by name.
    pub global_default: bool,
    /// Free text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

/// A stored amount in KAI's unit for the kind: GPU devices, CPU millicores, memory megabytes.
pub fn kai_units(value: i64, kind: ResourceKind) -> f64 {
    match kind {
        ResourceKind::Gpu => value as f64 / 1000.0,
        ResourceKind::Cpu => value as f64,
        ResourceKind::Memory => value as f64 / 1_000_000.0,
    }
}

fn bound(b: Bound, kind: ResourceKind) -> Number {
    match b {
        Bound::Finite(v) => Number(kai_units(v, kind)),
        Bound::Unlimited => Number(-1.0),
    }
}

fn resource(policy: Option<ResourcePolicy>, kind: ResourceKind) -> QueueResource {
    match policy {
        Some(r) => QueueResource {
            quota: bound(r.quota, kind),
            limit: bound(r.limit, kind),
            over_quota_weight: Number(r.weight),
        },
        // Not governed: KAI must see it as unlimited both ways, or it would block the resource.
        None => QueueResource {
            quota: Number(-1.0),
            limit: Number(-1.0),
            over_quota_weight: Number(1.0),
        },
    }
}

// No annotation names the file or line an object came from: the objects are the policy's
// meaning, so the same policy built from `policies` or `$PWD/policies`, reformatted, or with a
// queue moved to another file, gives the same bytes (and `diff` sees no change).
fn metadata(name: &str) -> Metadata {
    Metadata {
        name: name.to_string(),
        labels: BTreeMap::from([(MANAGED_BY.0.to_string(), MANAGED_BY.1.to_string())]),
        annotations: BTreeMap::new(),
    }
}

/// One Queue object per queue, parents before children.
pub fn queue_objects(policy: &Policy) -> Vec<QueueObject> {
    policy
        .queues
        .iter()
        .map(|q| QueueObject {
            api_version: "scheduling.run.ai/v2".to_string(),
            kind: "Queue".to_string(),
            metadata: {
                let mut m = metadata(&q.name);
                m.labels.extend(q.labels.clone());
                m.annotations.extend(q.annotations.clone());
                m
            },
            spec: QueueSpec {
                display_name: q.display_name.clone(),
                parent_queue: q.parent.map(|p| policy.queues[p].name.clone()),
                priority: Some(q.priority as i64),
                preempt_min_runtime: q.min_runtime.preempt.map(|d| d.to_string()),
                reclaim_min_runtime: q.min_runtime.reclaim.map(|d| d.to_string()),
                resources: QueueResources {
                    gpu: Some(resource(q.resources.gpu, ResourceKind::Gpu)),
                    cpu: Some(resource(q.resources.cpu, ResourceKind::Cpu)),
                    memory: Some(resource(q.resources.memory, ResourceKind::Memory)),
                },
            },
        })
        .collect()
}

/// One PriorityClass object per declared class.
pub fn priority_class_objects(policy: &Policy) -> Vec<PriorityClassObject> {
    policy
        .priority_classes
        .iter()
        .map(|p| {
            let mut metadata = metadata(&p.name);
            let preemptibility = if p.preemptible {
                "preemptible"
            } else {
                "non-preemptible"
            };
            metadata
                .labels
                .insert(PREEMPTIBILITY_LABEL.to_string(), preemptibility.to_string());
            PriorityClassObject {
                api_version: "scheduling.k8s.io/v1".to_string(),
                kind: "PriorityClass".to_string(),
                metadata,
                value: p.value as i64,
                global_default: false,
                description: p.description.clone(),
            }
        })
        .collect()
}
