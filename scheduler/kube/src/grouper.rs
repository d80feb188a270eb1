//! PodGroup objects for workloads that have none (pure): what KAI's pod-grouper does in the
//! cluster (`pkg/podgrouper/pod_controller.go: Reconcile`, `podgroup/handler.go:
//! ApplyToCluster`), from the groups ingest builds from pods' top owners.
//!
//! A group built from a top owner the scheduler has read (a Job, a JobSet, a PyTorchJob, …) gets
//! a PodGroup object of the same name, owned by that owner (so it is garbage collected with the
//! workload), with the spec the group was built with. From then on the pods join the object by
//! that name, as they did the group: nothing changes for the cycle, and `kubectl get podgroups`
//! shows every gang with its status. When the owner changes later (a new size, new sub-groups),
//! the spec of a PodGroup this scheduler made is updated to match, as KAI's grouper updates its
//! own (`handler.go: ApplyToCluster`, which also keeps the queue and a topology the owner no
//! longer sets).
//!
//! Not made: a Deployment's per-pod groups and pods without an owner (groups of one, whose
//! status is on the pod), and groups whose owner was not read (their size is a guess from the
//! pods present). Pods are not annotated with `pod-group-name`: they find the object by its name.

use std::collections::{BTreeMap, BTreeSet};

use kai_scheduler::cluster::{PodGroup, Snapshot, SubGroup};
use kai_scheduler::ingest::KIND_PRIORITY_ANNOTATION;
use serde_json::{Map, Value, json};

use crate::calls::Call;

/// The calls that make the PodGroup objects `snapshot`'s owner-built groups lack. `exists`
/// holds `namespace/name` of the PodGroup objects in the cluster and of those made but not yet
/// in the caches.
pub fn plan(snapshot: &Snapshot, exists: &dyn Fn(&str) -> bool) -> Vec<Call> {
    // Owner-built groups are the ones whose object does not exist yet, so there are seldom any:
    // the pods are looked at only when there are.
    let wanted: Vec<&PodGroup> = snapshot
        .groups
        .iter()
        .filter(|g| g.owner.is_some() && !exists(&format!("{}/{}", g.namespace, g.name)))
        .collect();
    if wanted.is_empty() {
        return Vec::new();
    }
    // The queue each group's pods name (they all carry their top owner's label, or their own):
    // the first one found; a group none of our pods is in gets no object.
    let mut queues: BTreeMap<(&str, &str), Option<&str>> = wanted
        .iter()
        .map(|g| ((g.namespace.as_str(), g.name.as_str()), None))
        .collect();
    let mut with_pods = BTreeSet::new();
    for p in snapshot.pods.iter().filter(|p| !p.foreign) {
        let Some(group) = p.group.as_deref() else {
            continue;
        };
        let key = (p.namespace.as_str(), group);
        if let Some(queue) = queues.get_mut(&key) {
            *queue = queue.or(p.queue.as_deref());
            with_pods.insert(key);
        }
    }
    wanted
        .into_iter()
        .filter(|g| with_pods.contains(&(g.namespace.as_str(), g.name.as_str())))
        .map(|g| Call::CreatePodGroup {
            namespace: g.namespace.clone(),
            name: g.name.clone(),
            object: object(g, queues[&(g.namespace.as_str(), g.name.as_str())]),
        })
        .collect()
}

/// The label on the PodGroups this scheduler makes.
pub const MANAGED_BY: (&str, &str) = ("app.kubernetes.io/managed-by", "kai-scheduler");

/// The spec fields an update sets (KAI's grouper keeps the queue as it is).
const UPDATED: [&str; 5] = [
    "minMember",
    "minSubGroup",
    "subGroups",
    "topologyConstraint",
    "priorityClassName",
];

/// The calls that bring the PodGroups this scheduler made in line with what their owners give
/// now. `made` gives the spec (as JSON) of each PodGroup object with [`MANAGED_BY`], by
/// `namespace/name`; `owner_groups` is what ingest found (`ClusterFile::owner_groups`).
/// A field the owner no longer gives is removed (`null` in the merge patch), except a topology
/// constraint, which KAI's grouper keeps.
pub fn updates(
    owner_groups: &[(PodGroup, Option<String>)],
    made: &BTreeMap<String, Value>,
) -> Vec<Call> {
    let mut calls = Vec::new();
    for (group, queue) in owner_groups {
        let Some(have) = made.get(&format!("{}/{}", group.namespace, group.name)) else {
            continue;
        };
        let want = &object(group, queue.as_deref())["spec"];
        let mut patch = Map::new();
        for field in UPDATED {
            let (w, h) = (&want[field], &have[field]);
            if w != h && !(field == "topologyConstraint" && w.is_null()) {
                patch.insert(field.to_string(), w.clone());
            }
        }
        if !patch.is_empty() {
            calls.push(Call::PodGroupSpec {
                namespace: group.namespace.clone(),
                name: group.name.clone(),
                patch: json!({ "spec": patch }),
            });
        }
    }
    calls
}

/// The PodGroup object (`scheduling.run.ai/v2alpha2`) for an owner-built group, in the shape
/// KAI's pod-grouper writes (`handler.go: createPodGroupForMetadata`).
pub fn object(group: &PodGroup, queue: Option<&str>) -> Value {
    let mut metadata = json!({
        "name": group.name,
        "namespace": group.namespace,
        "labels": { MANAGED_BY.0: MANAGED_BY.1 },
    });
    if let Some(owner) = &group.owner {
        metadata["ownerReferences"] = json!([{
            "apiVersion": owner.api_version, "kind": owner.kind,
            "name": owner.name, "uid": owner.uid,
        }]);
    }
    if let Some(class) = &group.kind_priority {
        metadata["annotations"] = json!({ KIND_PRIORITY_ANNOTATION: class });
    }
    let mut spec = Map::new();
    if let Some(queue) = queue {
        spec.insert("queue".into(), queue.into());
    }
    if let Some(class) = &group.priority_class {
        spec.insert("priorityClassName".into(), class.clone().into());
    }
    if group.sub_groups.is_empty() {
        spec.insert("minMember".into(), group.min_member.into());
    } else if let Some(m) = group.min_sub_group {
        spec.insert("minSubGroup".into(), m.into());
    }
    if let Some(constraint) = topology(
        group.topology.as_deref(),
        group.topology_required.as_deref(),
        group.topology_preferred.as_deref(),
    ) {
        spec.insert("topologyConstraint".into(), constraint);
    }
    if !group.sub_groups.is_empty() {
        let subs: Vec<Value> = group
            .sub_groups
            .iter()
            .map(|s| sub_group(s, &group.sub_groups))
            .collect();
        spec.insert("subGroups".into(), subs.into());
    }
    json!({
        "apiVersion": "scheduling.run.ai/v2alpha2",
        "kind": "PodGroup",
        "metadata": metadata,
        "spec": spec,
    })
}

fn topology(name: Option<&str>, required: Option<&str>, preferred: Option<&str>) -> Option<Value> {
    let mut constraint = Map::new();
    if let Some(name) = name {
        constraint.insert("topology".into(), name.into());
    }
    if let Some(level) = required {
        constraint.insert("requiredTopologyLevel".into(), level.into());
    }
    if let Some(level) = preferred {
        constraint.insert("preferredTopologyLevel".into(), level.into());
    }
    (!constraint.is_empty()).then_some(Value::Object(constraint))
}

/// One `spec.subGroups` entry: a sub-group that others name as parent says how many of them
/// must run (`minSubGroup`, absent: all), one that holds pods how many pods (`minMember`).
fn sub_group(sub: &SubGroup, all: &[SubGroup]) -> Value {
    let mut out = Map::new();
    out.insert("name".into(), sub.name.clone().into());
    if let Some(parent) = &sub.parent {
        out.insert("parent".into(), parent.clone().into());
    }
    let is_parent = all.iter().any(|s| s.parent.as_ref() == Some(&sub.name));
    if is_parent {
        if let Some(m) = sub.min_sub_group {
            out.insert("minSubGroup".into(), m.into());
        }
    } else {
        out.insert("minMember".into(), sub.min_member.unwrap_or(0).into());
    }
    if let Some(constraint) = topology(
        sub.topology.as_deref(),
        sub.topology_required.as_deref(),
        sub.topology_preferred.as_deref(),
    ) {
        out.insert("topologyConstraint".into(), constraint);
    }
    Value::Object(out)
}
