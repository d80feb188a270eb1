//! Cluster objects into the scheduler's [`Snapshot`] (pure), through the same reading as a
//! cluster file (`kai_scheduler::ingest::read_objects`), so the simulator and the cluster see
//! pods the same way.
//!
//! Two things differ from a file:
//! - **One bad object does not stop scheduling.** Each object is read on its own; one that
//!   cannot be read is left out and reported. A *bound* pod that cannot be read still holds
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
use k8s_openapi::jiff::Timestamp;
use kai_scheduler::cluster::{Snapshot, Time};
use kai_scheduler::ingest::{self, Options};
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
}

/// Seconds since the Unix epoch: the backend's clock.
pub fn clock(t: Timestamp) -> Time {
    u64::try_from(t.as_second()).unwrap_or(0)
}

/// Reads the cluster's objects. `options.origin` is replaced by the Unix epoch.
pub fn read(objects: &Objects, options: &Options) -> Read {
    let options = Options {
        origin: Some(Timestamp::UNIX_EPOCH),
        ..options.clone()
    };
    let mut out = Read::default();
    let mut blocked_nodes = BTreeSet::new();
    let mut one = |kind: &str, object: Value, bound_to: Option<String>| {
        let label = format!("{kind} {}", name_of(&object));
        match ingest::read_objects("cluster", vec![(label.clone(), object)], &options) {
            Ok(file) => {
                let s = file.snapshot;
                out.snapshot.nodes.extend(s.nodes);
                out.snapshot.pods.extend(s.pods);
                out.snapshot.groups.extend(s.groups);
                out.notes.extend(file.notes);
            }
            Err(e) => {
                let object = e.object.unwrap_or(label);
                match bound_to {
                    Some(node) => {
                        out.problems.push(format!(
                            "{object}: {}; node {node} takes no new pods until it is fixed",
                            e.message
                        ));
                        blocked_nodes.insert(node);
                    }
                    None => out.problems.push(format!("{object}: {}", e.message)),
                }
            }
        }
    };
    for node in &objects.nodes {
        one("Node", typed("v1", "Node", node.as_ref()), None);
    }
    for pod in &objects.pods {
        let node = pod.spec.as_ref().and_then(|s| s.node_name.clone());
        one(
            "Pod",
            typed("v1", "Pod", pod.as_ref()),
            node.filter(|n| !n.is_empty()),
        );
    }
    for group in &objects.groups {
        one(
            "PodGroup",
            typed("scheduling.run.ai/v2alpha2", "PodGroup", group.as_ref()),
            None,
        );
    }
    for node in &mut out.snapshot.nodes {
        if blocked_nodes.contains(&node.name) {
            node.unschedulable = true;
        }
    }
    out
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

fn name_of(object: &Value) -> String {
    let meta = &object["metadata"];
    match (meta["namespace"].as_str(), meta["name"].as_str()) {
        (Some(ns), Some(n)) => format!("{ns}/{n}"),
        (None, Some(n)) => n.to_string(),
        _ => "(no name)".into(),
    }
}

/// Binds and evictions the API server accepted that the caches may not show yet.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Assumed {
    /// Pod key → the node it was bound to.
    bound: BTreeMap<String, String>,
    /// Pods whose eviction was accepted.
    evicting: BTreeSet<String>,
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
                } => {
                    let node = binding.target.name.clone().unwrap_or_default();
                    self.bound.insert(format!("{namespace}/{pod}"), node);
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
        self.bound.retain(|key, node| {
            let Some(&i) = by_key.get(key) else {
                return false;
            };
            let pod = &mut snapshot.pods[i];
            if pod.node.is_some() {
                return false;
            }
            pod.node = Some(node.clone());
            pod.started = Some(now);
            true
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
