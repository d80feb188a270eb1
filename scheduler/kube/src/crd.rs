//! KAI's custom resources as Rust types: `Queue` (`scheduling.run.ai/v2`) and `PodGroup`
//! (`scheduling.run.ai/v2alpha2`), with the fields the backend reads and writes.
//!
//! The field names, types and units follow KAI's Go types (`pkg/apis/scheduling/v2/queue_types.go`,
//! `resources.go`, `status.go` and `pkg/apis/scheduling/v2alpha2/podgroup_types.go`). The
//! generated CRDs ([`crd_yaml`]) are meant to sit in a cluster *instead of* KAI's: so that no
//! object KAI writes loses a field when our CRD is the one installed, every `spec` and `status`
//! keeps the fields we do not model (`x-kubernetes-preserve-unknown-fields`), and amounts and
//! times carry KAI's schemas (int-or-string quantities, date-time strings).

use std::collections::BTreeMap;

use kube::CustomResource;
use kube::CustomResourceExt;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// `v1.ResourceList`: resource name → quantity.
pub type ResourceList = BTreeMap<String, Quantity>;

/// A Kubernetes quantity as a CRD stores it: the schema allows an integer or a string, and an
/// object written with `cpu: 4` keeps the integer, so this reads either (and a number written
/// as a float) and always writes a string.
#[derive(Serialize, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Quantity(pub String);

impl<'de> Deserialize<'de> for Quantity {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Text(String),
            Whole(i64),
            Number(f64),
        }
        Ok(Quantity(match Raw::deserialize(d)? {
            Raw::Text(s) => s,
            Raw::Whole(n) => n.to_string(),
            Raw::Number(x) => x.to_string(),
        }))
    }
}

/// What a KAI Queue says: its place in the tree, its resources, priority and min-runtimes.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "scheduling.run.ai",
    version = "v2",
    kind = "Queue",
    doc = "A KAI Queue: a node of the queue tree with its quotas, limits and over-quota weights",
    status = "QueueStatus",
    derive = "Default",
    derive = "PartialEq",
    printcolumn = r#"{"name":"Priority","type":"string","jsonPath":".spec.priority"}"#,
    printcolumn = r#"{"name":"Parent","type":"string","jsonPath":".spec.parentQueue"}"#,
    printcolumn = r#"{"name":"Children","type":"string","jsonPath":".status.childQueues"}"#,
    printcolumn = r#"{"name":"DisplayName","type":"string","jsonPath":".spec.displayName"}"#
)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-preserve-unknown-fields" = true))]
pub struct QueueSpec {
    /// A name for people.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display_name: Option<String>,
    /// The parent queue's name; none for a top-level queue.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_queue: Option<String>,
    /// Quota, over-quota weight and limit per resource.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<QueueResources>,
    /// Over-quota resources go first to higher priorities (KAI's default is 100).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<i64>,
    /// How long a job runs before it may be preempted, as a Go duration (`"90s"`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "duration_schema")]
    pub preempt_min_runtime: Option<String>,
    /// How long a job runs before it may be reclaimed, as a Go duration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "duration_schema")]
    pub reclaim_min_runtime: Option<String>,
}

/// A queue's terms per resource, in KAI's units (GPU in devices, CPU in millicores, memory in
/// megabytes of 10^6 bytes; `-1` is unlimited).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct QueueResources {
    /// GPUs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu: Option<QueueResource>,
    /// CPUs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<QueueResource>,
    /// Memory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<QueueResource>,
}

/// One resource's terms.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct QueueResource {
    /// Guaranteed amount.
    #[serde(default)]
    pub quota: f64,
    /// Share of what is left over, relative to siblings.
    #[serde(default)]
    pub over_quota_weight: f64,
    /// Never more than this.
    #[serde(default)]
    pub limit: f64,
}

/// What the scheduler reports on a Queue.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-preserve-unknown-fields" = true))]
pub struct QueueStatus {
    /// Conditions (KAI's types: `Orphan`, `OverQuota`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<QueueCondition>,
    /// Queues that name this one as parent.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub child_queues: Vec<String>,
    /// What running jobs of this queue and its children hold.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "resource_list_schema")]
    pub allocated: Option<ResourceList>,
    /// What running non-preemptible jobs hold.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "resource_list_schema")]
    pub allocated_non_preemptible: Option<ResourceList>,
    /// What running and pending jobs ask for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "resource_list_schema")]
    pub requested: Option<ResourceList>,
}

/// A condition of a Queue.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct QueueCondition {
    /// The condition's type.
    #[serde(rename = "type")]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    /// When it was last checked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "time_schema")]
    pub last_probe_time: Option<String>,
    /// When its status last changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "time_schema")]
    pub last_transition_time: Option<String>,
    /// One CamelCase word.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// A sentence for people.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// What a KAI PodGroup says: the gang's minimum, its queue and priority class.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "scheduling.run.ai",
    version = "v2alpha2",
    kind = "PodGroup",
    doc = "A KAI PodGroup: pods scheduled together, all or none",
    namespaced,
    shortname = "pg",
    status = "PodGroupStatus",
    derive = "Default",
    derive = "PartialEq"
)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-preserve-unknown-fields" = true))]
pub struct PodGroupSpec {
    /// How many pods must run for the job to run at all (0: no gang requirement).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub min_member: Option<i32>,
    /// The queue the job's resources come from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue: Option<String>,
    /// The job's priority class.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority_class_name: Option<String>,
    /// `preemptible` or `non-preemptible`; unset: decided by the priority class's value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preemptibility: Option<String>,
    /// Every other field as written (`subGroups`, `minSubGroup`, `topologyConstraint`,
    /// `stalenessGracePeriod`, …): the scheduler reads them through ingest, which takes the
    /// object as JSON, so they must survive the watch cache.
    #[serde(flatten)]
    #[schemars(skip)]
    pub rest: std::collections::BTreeMap<String, serde_json::Value>,
}

/// What the scheduler reports on a PodGroup.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-preserve-unknown-fields" = true))]
pub struct PodGroupStatus {
    /// Why the group is not scheduled, one condition per node pool.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scheduling_conditions: Vec<SchedulingCondition>,
}

/// KAI's scheduling condition: why a PodGroup is not scheduled on a node pool.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SchedulingCondition {
    /// `UnschedulableOnNodePool`.
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub type_: Option<String>,
    /// The node pool (empty: the whole cluster).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_pool: Option<String>,
    /// `Unschedulable` (KAI keeps it beside `reasons` for older readers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The reason as one sentence.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Each reason with its message and numbers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reasons: Vec<UnschedulableExplanation>,
    /// When the condition last changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "time_schema")]
    pub last_transition_time: Option<String>,
    /// `True` while it holds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    /// Counts the condition's changes (KAI increments it on every new condition).
    #[serde(
        rename = "transitionID",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub transition_id: Option<String>,
}

/// One reason a PodGroup is not scheduled.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UnschedulableExplanation {
    /// One CamelCase word (KAI's: `OverLimit`, `NonPreemptibleOverQuota`, `QueueDoesNotExist`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The sentence.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The numbers, for the queue reasons.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<ExplanationDetails>,
}

/// Structured numbers behind an explanation.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ExplanationDetails {
    /// The queue whose terms block the group.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue_details: Option<QuotaDetails>,
}

/// A queue's numbers when a PodGroup was refused for its terms.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct QuotaDetails {
    /// The queue.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// What the queue's jobs ask for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "resource_list_schema")]
    pub queue_requested_resources: Option<ResourceList>,
    /// The queue's quota.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "resource_list_schema")]
    pub queue_deserved_resources: Option<ResourceList>,
    /// What the queue's non-preemptible jobs hold.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "resource_list_schema")]
    pub queue_allocated_non_preemptible_resources: Option<ResourceList>,
    /// What the PodGroup's minimum asks for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "resource_list_schema")]
    pub pod_group_requested_resources: Option<ResourceList>,
    /// What the PodGroup's minimum asks for, non-preemptible.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "resource_list_schema")]
    pub pod_group_requested_non_preemptible_resources: Option<ResourceList>,
    /// What the queue's jobs hold.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "resource_list_schema")]
    pub queue_allocated_resources: Option<ResourceList>,
    /// The queue's limits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "resource_list_schema")]
    pub queue_resource_limits: Option<ResourceList>,
}

/// Kubernetes' quantity syntax (the same expression apimachinery publishes for
/// `resource.Quantity`).
const QUANTITY_PATTERN: &str = r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$";

/// A `v1.ResourceList` as the API server validates it: names to int-or-string quantities.
fn resource_list_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "object",
        "additionalProperties": {
            "anyOf": [{ "type": "integer" }, { "type": "string" }],
            "pattern": QUANTITY_PATTERN,
            "x-kubernetes-int-or-string": true
        }
    })
}

/// A `metav1.Time`: an RFC 3339 instant.
fn time_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({ "type": "string", "format": "date-time" })
}

/// A `metav1.Duration`: Go's duration syntax (`"1h30m"`).
fn duration_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({ "type": "string" })
}

type Crd =
    k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;

/// kube's derive makes `spec` required; KAI's CRDs do not, so neither do ours (an object without
/// a spec is accepted by the API server either way).
fn spec_optional(mut crd: Crd) -> Crd {
    for version in &mut crd.spec.versions {
        let schema = version
            .schema
            .as_mut()
            .and_then(|s| s.open_api_v3_schema.as_mut());
        if let Some(schema) = schema
            && let Some(required) = schema.required.as_mut()
        {
            required.retain(|r| r != "spec");
            if required.is_empty() {
                schema.required = None;
            }
        }
    }
    crd
}

/// The Queue CRD we install.
pub fn queue_crd() -> Crd {
    spec_optional(Queue::crd())
}

/// The PodGroup CRD we install.
pub fn pod_group_crd() -> Crd {
    spec_optional(PodGroup::crd())
}

/// The generated CRDs, as the files committed under `charts/kai-scheduler/crds/`: file name and
/// YAML text.
pub fn crd_yaml() -> Vec<(&'static str, String)> {
    let header = "# Generated from the Rust types in scheduler/kube/src/crd.rs; do not edit.\n\
                  # Regenerate: KAI_UPDATE_CRDS=1 cargo test -p kai-scheduler-kube --test crds\n";
    let render = |crd: Crd| {
        let body = serde_saphyr::to_string(&crd).expect("a CRD always serializes");
        format!("{header}{body}")
    };
    vec![
        ("scheduling.run.ai_queues.yaml", render(queue_crd())),
        ("scheduling.run.ai_podgroups.yaml", render(pod_group_crd())),
    ]
}
