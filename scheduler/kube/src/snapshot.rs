//! Cluster objects into the scheduler's [`Snapshot`] (pure), through the same reading as a
//! cluster file (`kai_scheduler::ingest::read_objects`), so the simulator and the cluster see
//! pods the same way.
//!
//! Two things differ from a file:
//! - **One bad object does not stop scheduling.** One that cannot be read is left out and
//!   reported, and the rest are read without it. A *bound* pod that cannot be read still holds
//!   resources on its node, which the snapshot cannot count, so that node takes no new pods
//!   (it is marked unschedulable in the snapshot) until the pod is fixed or gone.
//! - **Calls in flight are assumed.** A bind or eviction the API server accepted may not be in
//!   the watch caches by the next cycle. [`Assumed`] keeps them and lays them over the next
//!   snapshots until the caches show them (or the pod is gone), so a pod is never bound twice
//!   and a node's capacity never counted twice. A call that failed is never assumed: the next
//!   snapshot shows the cluster as it is.
//!
//! The clock is Unix time: second 0 is 1970-01-01T00:00:00Z, so every replica and every cycle
//! agree on the time of every object.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::scheduling::v1::PriorityClass;
use k8s_openapi::jiff::Timestamp;
use kai_scheduler::cluster::{Snapshot, Time};
use kai_scheduler::ingest::{self, Options};
use kube::api::DynamicObject;
use serde::Serialize;
use serde_json::Value;

use crate::calls::Call;
use crate::client::{Outcome, Sent};
use crate::crd::PodGroup;

/// The cluster's objects as the watch caches hold them.
#[derive(Debug, Clone, Default)]
pub struct Objects {
    /// Nodes.
    pub nodes: Vec<Arc<Node>>,
    /// Pods.
    pub pods: Vec<Arc<Pod>>,
    /// PodGroups.
    pub groups: Vec<Arc<PodGroup>>,
    /// PriorityClasses (a class the policy does not declare takes its value from here).
    pub priority_classes: Vec<Arc<PriorityClass>>,
    /// KAI's Topology objects (`kai.scheduler/v1alpha1`), each with its type.
    pub topologies: Vec<Arc<DynamicObject>>,
    /// DRA's DeviceClasses, ResourceSlices and ResourceClaims (`resource.k8s.io/v1`), each
    /// with its type.
    pub dra: Vec<Arc<DynamicObject>>,
    /// NodeResourceTopology objects (`topology.node.k8s.io/v1alpha2`), with `--numa`.
    pub numa: Vec<Arc<DynamicObject>>,
    /// PodGroups our type cannot read: `(namespace, name, why)`. Their pending pods wait.
    pub unreadable_groups: Vec<(String, String, String)>,
    /// Objects that may own pods (ReplicaSets, Jobs, JobSets, …), each with its type.
    pub owners: Vec<Arc<DynamicObject>>,
    /// The owner kinds of which `owners` holds every object (their watches have listed): a
    /// pending pod whose owner of such a kind is missing waits for it (`ingest::Options`).
    pub complete_owner_kinds: Vec<String>,
}

/// A snapshot and what could not be read.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Read {
    /// The snapshot.
    pub snapshot: Snapshot,
    /// Objects left out and why, one sentence each (`Pod team-a/p: ...`).
    pub problems: Vec<String>,
    /// Objects skipped as not ours (finished pods, other schedulers' pending pods).
    pub notes: Vec<String>,
    /// PodGroup objects joined by pods through their top owner, with the group that owner gives
    /// now and the pods' queue (`ingest::ClusterFile::owner_groups`).
    pub owner_groups: Vec<(kai_scheduler::cluster::PodGroup, Option<String>)>,
}

/// Seconds since the Unix epoch: the backend's clock.
pub fn clock(t: Timestamp) -> Time {
    u64::try_from(t.as_second()).unwrap_or(0)
}

/// Reads the cluster's objects. `options.origin` is replaced by the Unix epoch.
///
/// All objects are read in one pass, as a cluster file is (pods are grouped by their owners
/// there). When the pass fails on one object, that object is left out, named in `problems`, and
/// the pass runs again without it.
pub fn read(objects: &Objects, options: &Options) -> Read {
    let options = Options {
        origin: Some(Timestamp::UNIX_EPOCH),
        complete_owner_kinds: objects.complete_owner_kinds.clone(),
        ..options.clone()
    };
    // Each object as JSON, its label as ingest names it, and the node of a bound pod.
    let mut all: Vec<(String, Value, Option<String>)> = Vec::new();
    for node in &objects.nodes {
        all.push(entry("Node", typed("v1", "Node", node.as_ref()), None));
    }
    for pod in &objects.pods {
        let node = pod.spec.as_ref().and_then(|s| s.node_name.clone());
        let value = typed("v1", "Pod", pod.as_ref());
        all.push(entry("Pod", value, node.filter(|n| !n.is_empty())));
    }
    for group in &objects.groups {
        let value = typed("scheduling.run.ai/v2alpha2", "PodGroup", group.as_ref());
        all.push(entry("PodGroup", value, None));
    }
    for class in &objects.priority_classes {
        let value = typed("scheduling.k8s.io/v1", "PriorityClass", class.as_ref());
        all.push(entry("PriorityClass", value, None));
    }
    for topology in &objects.topologies {
        let value = serde_json::to_value(topology.as_ref()).unwrap_or(Value::Null);
        all.push(entry("Topology", value, None));
    }
    for object in &objects.dra {
        let kind = object.types.as_ref().map_or("", |t| t.kind.as_str());
        let value = serde_json::to_value(object.as_ref()).unwrap_or(Value::Null);
        all.push(entry(kind, value, None));
    }
    for object in &objects.numa {
        let value = serde_json::to_value(object.as_ref()).unwrap_or(Value::Null);
        all.push(entry("NodeResourceTopology", value, None));
    }
    for owner in &objects.owners {
        let kind = owner.types.as_ref().map_or("", |t| t.kind.as_str());
        let value = serde_json::to_value(owner.as_ref()).unwrap_or(Value::Null);
        all.push(entry(kind, value, None));
    }
    let mut out = Read::default();
    // A gang whose PodGroup cannot be read is not scheduled pod by pod: its pending pods wait.
    for (namespace, name, why) in &objects.unreadable_groups {
        out.problems.push(format!(
            "PodGroup {namespace}/{name}: cannot be read ({why}); its pending pods wait until it is fixed"
        ));
        all.retain(|(_, pod, bound_to)| {
            bound_to.is_some()
                || pod["kind"] != "Pod"
                || pod["metadata"]["namespace"] != namespace.as_str()
                || pod["metadata"]["annotations"][ingest::POD_GROUP_ANNOTATION] != name.as_str()
        });
    }
    let mut blocked_nodes = BTreeSet::new();
    loop {
        let raw = all.iter().map(|(l, v, _)| (l.clone(), v.clone())).collect();
        let error = match ingest::read_objects("cluster", raw, &options) {
            Ok(file) => {
                out.snapshot = file.snapshot;
                out.notes = file.notes.iter().map(ToString::to_string).collect();
                out.owner_groups = file.owner_groups;
                break;
            }
            Err(e) => e,
        };
        let at = error
            .object
            .as_ref()
            .and_then(|o| all.iter().position(|(label, _, _)| label == o));
        let Some(at) = at else {
            // Not one object's fault: nothing can be read this cycle.
            out.problems.push(error.to_string());
            break;
        };
        let (label, _, bound_to) = all.remove(at);
        match bound_to {
            Some(node) => {
                out.problems.push(format!(
                    "{label}: {}; node {node} takes no new pods until it is fixed",
                    error.message
                ));
                blocked_nodes.insert(node);
            }
            None => out.problems.push(format!("{label}: {}", error.message)),
        }
    }
    for node in &mut out.snapshot.nodes {
        if blocked_nodes.contains(&node.name) {
            node.unschedulable = true;
        }
    }
    out
}

/// An object with the label ingest gives it in errors (`Kind namespace/name`, `Node name`).
fn entry(kind: &str, value: Value, bound_to: Option<String>) -> (String, Value, Option<String>) {
    let meta = &value["metadata"];
    let name = meta["name"].as_str().unwrap_or("");
    let label = match meta["namespace"].as_str() {
        Some(ns) if kind != "Node" => format!("{kind} {ns}/{name}"),
        _ => format!("{kind} {name}"),
    };
    (label, value, bound_to)
}

/// An object as JSON with its apiVersion and kind (the watch gives typed objects, whose
/// serialization already carries them; set here so a hand-built object reads the same).
fn typed(api_version: &str, kind: &str, object: &impl Serialize) -> Value {
    let mut value = serde_json::to_value(object).unwrap_or(Value::Null);
    if let Value::Object(map) = &mut value {
        map.insert("apiVersion".into(), api_version.into());
        map.insert("kind".into(), kind.into());
    }
    value
}

/// Binds and evictions the API server accepted that the caches may not show yet.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Assumed {
    /// Pod key → the node it was bound to, and the NUMA placement recorded on it.
    bound: BTreeMap<String, (String, Option<Vec<kai_scheduler::numa::ZoneAmount>>)>,
    /// Pods whose eviction was accepted.
    evicting: BTreeSet<String>,
    /// Claims written for bound pods: `(namespace, claim)`, the pod, and the allocation
    /// written (`None`: the claim had its own).
    claimed: Vec<(
        (String, String),
        String,
        Option<kai_scheduler::dra::Allocation>,
    )>,
}

impl Assumed {
    /// Remembers the calls that succeeded.
    pub fn record(&mut self, sent: &[Sent]) {
        for sent in sent {
            if sent.outcome != Outcome::Done {
                continue;
            }
            match &sent.call {
                Call::Bind {
                    namespace,
                    pod,
                    binding,
                    claims,
                    numa,
                } => {
                    let node = binding.target.name.clone().unwrap_or_default();
                    let zones = numa
                        .as_ref()
                        .and_then(|v| v.as_str())
                        .and_then(kai_scheduler::numa::parse_record);
                    self.bound
                        .insert(format!("{namespace}/{pod}"), (node, zones));
                    for c in claims {
                        self.claimed.push((
                            (namespace.clone(), c.name.clone()),
                            pod.clone(),
                            c.allocation.clone(),
                        ));
                    }
                }
                Call::Evict { namespace, pod, .. } => {
                    self.evicting.insert(format!("{namespace}/{pod}"));
                }
                _ => {}
            }
        }
    }

    /// Lays what is still in flight over `snapshot`, and forgets what the snapshot already shows
    /// (the pod bound, terminating, or gone).
    pub fn overlay(&mut self, snapshot: &mut Snapshot, now: Time) {
        let by_key: BTreeMap<String, usize> = snapshot
            .pods
            .iter()
            .enumerate()
            .map(|(i, p)| (p.key(), i))
            .collect();
        self.bound.retain(|key, (node, zones)| {
            let Some(&i) = by_key.get(key) else {
                return false;
            };
            let pod = &mut snapshot.pods[i];
            if pod.node.is_some() {
                return false;
            }
            pod.node = Some(node.clone());
            pod.started = Some(now);
            pod.numa_zones = zones.clone();
            true
        });
        // A claim written for a bound pod: reserved for it, allocated as written, until the
        // caches show it so.
        self.claimed.retain(|((namespace, name), pod, allocation)| {
            // A pod gone is the resource claim controller's to unreserve.
            if !by_key.contains_key(&format!("{namespace}/{pod}")) {
                return false;
            }
            let Some(claim) = snapshot.dra.claim_mut(namespace, name) else {
                return false;
            };
            let shown = claim.reserved_for.contains(pod)
                && (allocation.is_none() || claim.allocation.is_some());
            if !claim.reserved_for.contains(pod) {
                claim.reserved_for.push(pod.clone());
            }
            if claim.allocation.is_none() {
                claim.allocation = allocation.clone();
            }
            !shown
        });
        self.evicting.retain(|key| {
            let Some(&i) = by_key.get(key) else {
                return false;
            };
            let pod = &mut snapshot.pods[i];
            if pod.terminating {
                return false;
            }
            pod.terminating = true;
            true
        });
    }
}
