//! Declarations as read from the files, with the spans the whole-policy rules point at.

use crate::diagnostics::Label;
use crate::model::{
    Bound, DefaultPlacement, Fairness, MinRuntime, Oversubscription, PerResource, ResourcePolicy,
    Strategy,
};
use crate::quantity::{Duration, ResourceKind};

/// `fairness` with no properties: KAI's defaults (k = 1, a one-week window, a one-day half-life).
pub(super) const FAIRNESS_DEFAULT: Fairness = Fairness {
    k: 1.0,
    window: Duration(7 * 86_400),
    half_life: Duration(86_400),
};

/// A string value and where it was written.
#[derive(Debug, Clone)]
pub(super) struct Named {
    pub value: String,
    pub at: Label,
}

/// Everything read from all files, in file order then position.
#[derive(Debug, Default)]
pub(super) struct Decls {
    pub clusters: Vec<ClusterDecl>,
    pub priority_classes: Vec<PriorityClassDecl>,
    pub placements: Vec<PlacementDecl>,
    pub queues: Vec<QueueDecl>,
    /// Names of priority classes whose declaration had an error and was left out: references
    /// to them are not reported again as unknown.
    pub half_read: Vec<String>,
}

#[derive(Debug)]
pub(super) struct ClusterDecl {
    pub name: Option<String>,
    pub at: Label,
    pub scheduler_name: Option<String>,
    pub queue_label: Option<String>,
    pub capacity: PerResource<Option<i64>>,
    pub capacity_at: PerResource<Option<Label>>,
    pub placement: DefaultPlacement,
    pub fairness: Option<Fairness>,
    pub min_runtime: MinRuntime,
    pub oversubscription: Oversubscription,
}

#[derive(Debug)]
pub(super) struct PriorityClassDecl {
    pub name: Named,
    pub value: i32,
    pub preemptible: bool,
    pub description: Option<String>,
    pub at: Label,
}

#[derive(Debug)]
pub(super) struct PlacementDecl {
    pub name: Named,
    pub strategy: Strategy,
    pub max_gpus_per_node: Option<u32>,
    pub topology_required: Option<String>,
    pub topology_preferred: Option<String>,
    pub at: Label,
}

#[derive(Debug)]
pub(super) struct QueueDecl {
    pub name: Named,
    pub display_name: Option<String>,
    pub priority: i32,
    pub parent: Option<Named>,
    /// `parent=` is written but could not be read (a number, say): the queue's place in the
    /// tree is unknown.
    pub parent_unreadable: bool,
    /// The declaration this one is written inside, if nested.
    pub nested_in: Option<usize>,
    /// Indexed by `ResourceKind as usize`.
    pub resources: [Option<ResourceDecl>; 3],
    pub namespaces: Vec<Named>,
    pub default_priority_class: Option<Named>,
    pub placement: Option<Named>,
    pub min_runtime: MinRuntime,
    /// `labels` and `annotations` of its Kubernetes object.
    pub labels: std::collections::BTreeMap<String, String>,
    pub annotations: std::collections::BTreeMap<String, String>,
    /// Reading it found an error (or cut off queues nested in it): the rules that judge a
    /// queue by what it lacks (no namespaces, no children) stay quiet about it.
    pub incomplete: bool,
}

impl QueueDecl {
    pub fn resource(&self, kind: ResourceKind) -> Option<&ResourceDecl> {
        self.resources[kind as usize].as_ref()
    }
}

#[derive(Debug)]
pub(super) struct ResourceDecl {
    pub policy: ResourcePolicy,
    pub at: Label,
    pub quota_at: Option<Label>,
    pub limit_at: Option<Label>,
    pub weight_at: Option<Label>,
}

impl ResourceDecl {
    /// Where to point when talking about the quota: the `quota=` entry, or the node if implicit.
    pub fn quota_label(&self) -> Label {
        self.quota_at.clone().unwrap_or_else(|| self.at.clone())
    }

    pub fn quota(&self) -> Bound {
        self.policy.quota
    }
}
