//! The scenario file of `explain` and `diff`: cluster totals, per-queue demand and historical
//! usage, in the shape `cli.md` documents.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A what-if for fair share: what the cluster has and what each leaf queue asks for.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// Cluster totals; defaults to the policy's declared `capacity`.
    #[serde(default)]
    pub capacity: Option<ResourceAmounts>,
    /// Per leaf queue: requested by running and pending work. A leaf left out asks for nothing.
    #[serde(default)]
    pub demand: BTreeMap<String, ResourceAmounts>,
    /// Per queue: normalised historical usage in [0, 1].
    #[serde(default)]
    pub usage: BTreeMap<String, Usage>,
    /// Overrides the policy's fairness `k`.
    #[serde(default)]
    pub k: Option<f64>,
}

/// Amounts per resource, each a number or a Kubernetes quantity string (`4000Gi`, `500m`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ResourceAmounts {
    /// GPU devices.
    #[serde(default)]
    pub gpu: Option<QuantityValue>,
    /// CPU cores.
    #[serde(default)]
    pub cpu: Option<QuantityValue>,
    /// Memory.
    #[serde(default)]
    pub memory: Option<QuantityValue>,
}

/// A quantity as YAML gives it: a number, or a Kubernetes quantity string.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum QuantityValue {
    /// A plain number of devices, cores or bytes.
    Number(f64),
    /// A Kubernetes quantity string.
    Text(String),
}

/// Normalised historical usage per resource, each in [0, 1].
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Usage {
    /// GPU.
    #[serde(default)]
    pub gpu: Option<f64>,
    /// CPU.
    #[serde(default)]
    pub cpu: Option<f64>,
    /// Memory.
    #[serde(default)]
    pub memory: Option<f64>,
}
