//! Decisions into API calls (pure): what the backend sends for each decision of a cycle, as
//! typed request bodies. Nothing here talks to a server; [`crate::client`] sends the calls.
//!
//! What each decision becomes follows what KAI's scheduler makes visible
//! (`pkg/scheduler/cache/status_updater/default_status_updater.go`), with the two differences
//! the issue asks for (see `docs/kubernetes.md`):
//!
//! | decision | calls |
//! |---|---|
//! | `Bind` | `pods/binding` create; a `Scheduled` event on the pod; the pod group's scheduling condition cleared |
//! | `Nominate` | a `Pipelined` event on the pod, once per node |
//! | `Evict` | `pods/eviction` create (`policy/v1`, the pod's grace period); an `Evict` event on its pod group (or the pod) |
//! | `Pending` | when the reason changes: an `Unschedulable` warning event and a `PodScheduled=False` condition on each pod, and the pod group's `schedulingConditions` |
//!
//! Events and conditions are written when a pod's reason *changes* (the [`Reported`] memory), so
//! a job pending for an hour makes one event, not one per cycle; and at most
//! [`EVENTS_PER_CYCLE`] are sent in one cycle (the rest go in the next ones).

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{Binding, Event, EventSource, ObjectReference};
use k8s_openapi::api::policy::v1::Eviction;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{DeleteOptions, MicroTime, ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;
use kai_policy_compiler::quantity::ResourceKind;
use kai_scheduler::cluster::{Amounts, Snapshot};
use kai_scheduler::decision::{Decision, Reason};
use kai_scheduler::dra::{Allocation, ClaimStatus};
use serde_json::{Value, json};

use crate::crd::{
    ExplanationDetails, PodGroupStatus, Quantity, QuotaDetails, ResourceList, SchedulingCondition,
    UnschedulableExplanation,
};

/// At most this many events (and pod conditions) are sent per cycle; the others wait for the
/// next cycle, so a burst of new pending pods cannot flood the API server.
pub const EVENTS_PER_CYCLE: usize = 200;

/// KAI's scheduling condition type for a group that cannot be scheduled.
pub const UNSCHEDULABLE_ON_NODE_POOL: &str = "UnschedulableOnNodePool";

/// One API call, with its body.
#[derive(Debug, Clone, PartialEq)]
pub enum Call {
    /// `POST /api/v1/namespaces/{ns}/pods/{pod}/binding`, after its DRA claims' status is
    /// written (`claims`, in order) and its predicted NUMA placement recorded on it (`numa`);
    /// a failed one stops the bind, as in KAI's binder.
    Bind {
        /// The pod's namespace.
        namespace: String,
        /// The pod.
        pod: String,
        /// The body.
        binding: Binding,
        /// Its claims' status patches.
        claims: Vec<ClaimWrite>,
        /// Its predicted NUMA placement, as the `kai.scheduler/numa-placement-predicted`
        /// annotation's value (a JSON string; `null`: remove a stale one).
        numa: Option<Value>,
    },
    /// `POST /api/v1/namespaces/{ns}/pods/{pod}/eviction`.
    Evict {
        /// The pod's namespace.
        namespace: String,
        /// The pod.
        pod: String,
        /// The body.
        eviction: Eviction,
    },
    /// `PATCH /api/v1/namespaces/{ns}/pods/{pod}/status` (strategic merge: the condition is
    /// merged by type).
    PodCondition {
        /// The pod's namespace.
        namespace: String,
        /// The pod.
        pod: String,
        /// The patch.
        patch: Value,
    },
    /// `PATCH .../podgroups/{name}/status` (JSON merge patch).
    PodGroupStatus {
        /// The group's namespace.
        namespace: String,
        /// The group.
        name: String,
        /// The patch.
        patch: Value,
    },
    /// `PATCH .../podgroups/{name}` (JSON merge patch of `metadata.annotations`): the stale
    /// mark KAI keeps on the group, so a restart or a new leader keeps counting from it.
    PodGroupAnnotation {
        /// The group's namespace.
        namespace: String,
        /// The group.
        name: String,
        /// The patch.
        patch: Value,
    },
    /// `POST .../namespaces/{ns}/podgroups`: the PodGroup of a workload that has none
    /// ([`crate::grouper`]).
    CreatePodGroup {
        /// The group's namespace.
        namespace: String,
        /// The group.
        name: String,
        /// The whole object.
        object: Value,
    },
    /// `PATCH .../podgroups/{name}` (JSON merge patch of `spec`): a PodGroup this scheduler
    /// made, brought in line with its owner ([`crate::grouper::updates`]).
    PodGroupSpec {
        /// The group's namespace.
        namespace: String,
        /// The group.
        name: String,
        /// The patch.
        patch: Value,
    },
    /// `PATCH /apis/scheduling.run.ai/v2/queues/{name}/status` (JSON merge patch).
    QueueStatus {
        /// The queue.
        name: String,
        /// The patch.
        patch: Value,
    },
    /// `POST /api/v1/namespaces/{ns}/events`.
    Event {
        /// The namespace of the object the event is about.
        namespace: String,
        /// The body.
        event: Box<Event>,
    },
    /// `PATCH` with `application/apply-patch+yaml`, field manager [`crate::apply::FIELD_MANAGER`],
    /// conflicts forced: a policy object, server-side applied (`--apply-queues`).
    Apply {
        /// Which kind.
        kind: Managed,
        /// The object's name.
        name: String,
        /// The whole object as the policy lowers it.
        object: Value,
    },
    /// `DELETE` of a policy object this scheduler applied that the policy no longer has.
    Prune {
        /// Which kind.
        kind: Managed,
        /// The object's name.
        name: String,
    },
}

/// `PATCH .../resourceclaims/{name}/status` (JSON merge patch, on the resourceVersion the
/// caches show): the pod added to `reservedFor`, and the cycle's devices as `allocation` when
/// the claim had none.
#[derive(Debug, Clone, PartialEq)]
pub struct ClaimWrite {
    /// The claim.
    pub name: String,
    /// The patch.
    pub patch: Value,
    /// The allocation it writes (`None`: the claim keeps its own).
    pub allocation: Option<Allocation>,
}

/// The status patches that give a pod's claims to it before it is bound, as KAI's binder writes
/// them (`binder/plugins/k8s-plugins/dynamicresources/dra.go: Bind`): the pod added to
/// `reservedFor` (`resource: pods`, its name and uid), and, for a claim without an
/// allocation, the devices the cycle gave it (`changed`) with the configuration of their
/// classes and of the claim (`source: FromClass` per request, then `FromClaim`) and the node
/// they tie it to (`matchFields metadata.name In [node]`), as the structured allocator writes
/// it. `claims` and `classes` are the objects as the caches hold them. `users` holds, per
/// claim, the pods this cycle binds to it (name, uid) in the order of their binds: the first
/// one's patch reserves the claim for all of them (patches of one claim on one
/// resourceVersion would conflict), and the others write nothing for it. An `Err` says why the
/// pod cannot be bound now.
pub fn claim_writes(
    pod: &kai_scheduler::cluster::Pod,
    users: &BTreeMap<(String, String), Vec<(String, String)>>,
    changed: &[ClaimStatus],
    claims: &BTreeMap<(String, String), Value>,
    classes: &BTreeMap<String, Value>,
) -> Result<Vec<ClaimWrite>, String> {
    let mut out = Vec::new();
    for pc in &pod.constraints.claims {
        let name = pc.claim.as_deref().ok_or_else(|| {
            format!(
                "the claim of its resourceClaims entry {} is not made yet",
                pc.name
            )
        })?;
        let what = format!("ResourceClaim {}/{name}", pod.namespace);
        let object = claims
            .get(&(pod.namespace.clone(), name.to_string()))
            .ok_or_else(|| format!("{what} is not in the caches"))?;
        let key = (pod.namespace.clone(), name.to_string());
        let all = users.get(&key).map(Vec::as_slice).unwrap_or_default();
        match all.first() {
            Some((first, _)) if *first == pod.name => {}
            Some(_) => continue,
            None => return Err(format!("{what} has no pod bound to it in this cycle")),
        }
        let mut reserved: Vec<Value> = object["status"]["reservedFor"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        // KAI's `UpsertReservedFor`: a pod is there when its uid is (a pod made again under the
        // same name is another pod).
        for (name, uid) in all {
            if !reserved
                .iter()
                .any(|r| r["resource"] == "pods" && r["uid"] == uid.as_str())
            {
                reserved.push(json!({ "resource": "pods", "name": name, "uid": uid }));
            }
        }
        let mut status = json!({ "reservedFor": reserved });
        let mut allocation = None;
        if object["status"]["allocation"].is_null() {
            let given = changed
                .iter()
                .find(|c| c.namespace == pod.namespace && c.name == name)
                .and_then(|c| c.allocation.clone())
                .ok_or_else(|| format!("the cycle gave {what} no devices"))?;
            status["allocation"] = allocation_json(object, &given, classes);
            allocation = Some(given);
        }
        out.push(ClaimWrite {
            name: name.to_string(),
            patch: json!({
                "metadata": { "resourceVersion": object["metadata"]["resourceVersion"] },
                "status": status,
            }),
            allocation,
        });
    }
    Ok(out)
}

/// `status.allocation` as the structured allocator writes it.
fn allocation_json(claim: &Value, given: &Allocation, classes: &BTreeMap<String, Value>) -> Value {
    let results: Vec<Value> = given
        .devices
        .iter()
        .map(|d| {
            json!({ "request": d.request, "driver": d.driver, "pool": d.pool, "device": d.device })
        })
        .collect();
    let mut config = Vec::new();
    for request in claim["spec"]["devices"]["requests"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let name = request["name"].as_str().unwrap_or("");
        if !given.devices.iter().any(|d| d.request == name) {
            continue;
        }
        let class = request["exactly"]["deviceClassName"]
            .as_str()
            .or_else(|| request["deviceClassName"].as_str())
            .unwrap_or("");
        for c in classes
            .get(class)
            .and_then(|c| c["spec"]["config"].as_array())
            .into_iter()
            .flatten()
        {
            let mut entry = c.clone();
            entry["source"] = json!("FromClass");
            entry["requests"] = json!([name]);
            config.push(entry);
        }
    }
    for c in claim["spec"]["devices"]["config"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let mut entry = c.clone();
        entry["source"] = json!("FromClaim");
        config.push(entry);
    }
    let mut devices = json!({ "results": results });
    if !config.is_empty() {
        devices["config"] = json!(config);
    }
    let mut out = json!({ "devices": devices });
    if let Some(node) = &given.node {
        out["nodeSelector"] = json!({ "nodeSelectorTerms": [{ "matchFields": [
            { "key": "metadata.name", "operator": "In", "values": [node] }
        ]}]});
    } else if !given.selector.is_empty() {
        let terms: Vec<Value> = given.selector.iter().map(term_json).collect();
        out["nodeSelector"] = json!({ "nodeSelectorTerms": terms });
    }
    out
}

/// A node selector term as the API writes it.
fn term_json(term: &kai_scheduler::cluster::NodeSelectorTerm) -> Value {
    let requirements = |list: &[kai_scheduler::cluster::Requirement]| -> Vec<Value> {
        list.iter()
            .map(|r| {
                let mut out = json!({ "key": r.key, "operator": r.operator.name() });
                if !r.values.is_empty() {
                    out["values"] = json!(r.values);
                }
                out
            })
            .collect()
    };
    let mut out = json!({});
    if !term.expressions.is_empty() {
        out["matchExpressions"] = json!(requirements(&term.expressions));
    }
    if !term.fields.is_empty() {
        out["matchFields"] = json!(requirements(&term.fields));
    }
    out
}

/// The kinds `--apply-queues` writes (both cluster-scoped).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Managed {
    /// KAI's `scheduling.run.ai/v2` Queue.
    Queue,
    /// `scheduling.k8s.io/v1` PriorityClass.
    PriorityClass,
}

impl Managed {
    /// The kind's API resource, for a dynamic client.
    pub fn api_resource(self) -> kube::api::ApiResource {
        let (group, version, kind, plural) = match self {
            Managed::Queue => ("scheduling.run.ai", "v2", "Queue", "queues"),
            Managed::PriorityClass => (
                "scheduling.k8s.io",
                "v1",
                "PriorityClass",
                "priorityclasses",
            ),
        };
        kube::api::ApiResource::from_gvk_with_plural(
            &kube::api::GroupVersionKind::gvk(group, version, kind),
            plural,
        )
    }

    /// The kind's name.
    pub fn kind(self) -> &'static str {
        match self {
            Managed::Queue => "Queue",
            Managed::PriorityClass => "PriorityClass",
        }
    }
}

/// What the backend already told users about pending pods: pod key → the reason's sentence.
/// Kept between cycles so that only changes make events.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Reported {
    pending: BTreeMap<String, String>,
    nominated: BTreeMap<String, String>,
    queues: BTreeMap<String, Value>,
}

impl Reported {
    /// Forgets what a failed call was to tell, so the next cycle tells it again.
    pub fn forget_failed(&mut self, sent: &[crate::client::Sent]) {
        for s in sent {
            if s.outcome == crate::client::Outcome::Done {
                continue;
            }
            match &s.call {
                Call::PodCondition { namespace, pod, .. } => {
                    self.pending.remove(&format!("{namespace}/{pod}"));
                }
                Call::Event { namespace, event }
                    if event.involved_object.kind.as_deref() == Some("Pod") =>
                {
                    let pod = event.involved_object.name.as_deref().unwrap_or("");
                    let key = format!("{namespace}/{pod}");
                    self.pending.remove(&key);
                    self.nominated.remove(&key);
                }
                Call::QueueStatus { name, .. } => {
                    self.queues.remove(name);
                }
                _ => {}
            }
        }
    }
}

/// What a cycle's calls need to know besides the decisions.
#[derive(Debug, Clone, Copy)]
pub struct Context<'a> {
    /// The snapshot the cycle ran on (grace periods, pod groups of pods).
    pub snapshot: &'a Snapshot,
    /// The current status of each PodGroup, by `namespace/name`.
    pub group_status: &'a BTreeMap<String, PodGroupStatus>,
    /// The scheduler's name (the events' source).
    pub scheduler_name: &'a str,
    /// This replica's name (the events' reporting instance).
    pub instance: &'a str,
    /// The wall clock.
    pub now: Timestamp,
}

/// A mark a cycle sets on a PodGroup: its `namespace/name`, the annotation KAI keeps it in, and
/// the time (seconds since the epoch, on the backend's clock), `None` to remove it.
pub type Mark = ((String, &'static str), Option<u64>);

/// The calls that keep a cycle's marks on the PodGroups, one per mark: the annotation set to
/// the time in RFC 3339, as KAI writes it (`kai.scheduler/stale-podgroup-timestamp` when the
/// group went stale, `kai.scheduler/last-start-timestamp` when it was started,
/// `kai.scheduler/last-eviction-timestamp` when a pod of it was last evicted), or removed
/// (`null` in a merge patch).
pub fn mark_calls(marks: &[Mark]) -> Vec<Call> {
    marks
        .iter()
        .map(|((key, annotation), since)| {
            let (namespace, name) = split(key);
            let value = match since
                .and_then(|s| i64::try_from(s).ok())
                .and_then(|s| Timestamp::from_second(s).ok())
            {
                Some(t) => Value::String(rfc3339(t)),
                None => Value::Null,
            };
            let mut annotations = serde_json::Map::new();
            annotations.insert(annotation.to_string(), value);
            Call::PodGroupAnnotation {
                namespace: namespace.to_string(),
                name: name.to_string(),
                patch: json!({ "metadata": { "annotations": annotations } }),
            }
        })
        .collect()
}

/// Splits `namespace/name`.
fn split(key: &str) -> (&str, &str) {
    key.split_once('/').unwrap_or(("default", key))
}

/// The calls for one cycle's decisions. `reported` is updated with what the calls tell users.
pub fn plan(decisions: &[Decision], cx: &Context, reported: &mut Reported) -> Vec<Call> {
    let pods: BTreeMap<String, &kai_scheduler::cluster::Pod> =
        cx.snapshot.pods.iter().map(|p| (p.key(), p)).collect();
    let group_of = |pod: &str| -> Option<String> {
        let p = pods.get(pod)?;
        p.group.as_ref().map(|g| format!("{}/{g}", p.namespace))
    };
    let mut calls = Vec::new();
    let mut events = Vec::new();
    let mut cleared = BTreeSet::new();
    let mut still_pending = BTreeSet::new();
    for decision in decisions {
        match decision {
            Decision::Bind { pod, node } => {
                calls.push(bind(pod, node));
                if events.len() < EVENTS_PER_CYCLE {
                    events.push(Note::pod(
                        pod,
                        "Normal",
                        "Scheduled",
                        format!("Successfully assigned {pod} to {node}"),
                    ));
                }
                if let Some(group) = group_of(pod)
                    && cleared.insert(group.clone())
                    && cx
                        .group_status
                        .get(&group)
                        .is_some_and(|s| !s.scheduling_conditions.is_empty())
                {
                    let (namespace, name) = split(&group);
                    calls.push(Call::PodGroupStatus {
                        namespace: namespace.into(),
                        name: name.into(),
                        patch: json!({ "status": { "schedulingConditions": null } }),
                    });
                }
            }
            Decision::Nominate { pod, node } => {
                still_pending.insert(pod.clone());
                if reported.nominated.get(pod) != Some(node) && events.len() < EVENTS_PER_CYCLE {
                    reported.nominated.insert(pod.clone(), node.clone());
                    events.push(Note::pod(
                        pod,
                        "Normal",
                        "Pipelined",
                        format!("Waits for pods being evicted from {node}, then binds there"),
                    ));
                }
            }
            Decision::Evict { pod, node, reason } => {
                let grace = pods
                    .get(pod.as_str())
                    .map_or(kai_scheduler::ingest::DEFAULT_GRACE_SECONDS, |p| {
                        p.termination_grace_seconds
                    });
                calls.push(evict(pod, grace));
                let message = format!("Evicted {pod} from {node}: {reason}");
                if events.len() < EVENTS_PER_CYCLE {
                    events.push(match group_of(pod) {
                        Some(group) => Note::group(&group, "Normal", "Evict", message),
                        None => Note::pod(pod, "Normal", "Evict", message),
                    });
                }
            }
            Decision::Pending { job, pods, reason } => {
                still_pending.extend(pods.iter().cloned());
                tell_pending(pods, reason, reported, &mut calls, &mut events);
                if let Some(status) = cx.group_status.get(job)
                    && let Some(patch) = group_condition_patch(status, reason, cx.now)
                {
                    let (namespace, name) = split(job);
                    calls.push(Call::PodGroupStatus {
                        namespace: namespace.into(),
                        name: name.into(),
                        patch,
                    });
                }
            }
        }
    }
    // A pod that is no longer pending (bound, gone) is forgotten, so if it waits again its
    // reason is told again.
    reported.pending.retain(|p, _| still_pending.contains(p));
    reported.nominated.retain(|p, _| still_pending.contains(p));
    calls.extend(
        events
            .into_iter()
            .enumerate()
            .map(|(i, note)| note.into_call(cx, i)),
    );
    calls
}

/// For each pod whose reason changed (while the cycle's events have room): an `Unschedulable`
/// event and the `PodScheduled=False` condition.
fn tell_pending(
    pods: &[String],
    reason: &Reason,
    reported: &mut Reported,
    calls: &mut Vec<Call>,
    events: &mut Vec<Note>,
) {
    let message = reason.to_string();
    for pod in pods {
        if reported.pending.get(pod) == Some(&message) {
            continue;
        }
        if events.len() >= EVENTS_PER_CYCLE {
            break;
        }
        reported.pending.insert(pod.clone(), message.clone());
        events.push(Note::pod(pod, "Warning", "Unschedulable", message.clone()));
        let (namespace, name) = split(pod);
        calls.push(Call::PodCondition {
            namespace: namespace.into(),
            pod: name.into(),
            patch: pod_scheduled_false(&message),
        });
    }
}

/// The `pods/binding` call.
pub fn bind(pod: &str, node: &str) -> Call {
    let (namespace, name) = split(pod);
    Call::Bind {
        namespace: namespace.into(),
        pod: name.into(),
        binding: Binding {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some(namespace.into()),
                ..ObjectMeta::default()
            },
            target: ObjectReference {
                api_version: Some("v1".into()),
                kind: Some("Node".into()),
                name: Some(node.into()),
                ..ObjectReference::default()
            },
        },
        claims: Vec::new(),
        numa: None,
    }
}

/// The `pods/eviction` call: the API server checks PodDisruptionBudgets and refuses (429)
/// when one would be broken; the pod gets `grace_seconds` to stop.
pub fn evict(pod: &str, grace_seconds: u64) -> Call {
    let (namespace, name) = split(pod);
    Call::Evict {
        namespace: namespace.into(),
        pod: name.into(),
        eviction: Eviction {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some(namespace.into()),
                ..ObjectMeta::default()
            },
            delete_options: Some(DeleteOptions {
                grace_period_seconds: Some(i64::try_from(grace_seconds).unwrap_or(i64::MAX)),
                ..DeleteOptions::default()
            }),
        },
    }
}

/// `PodScheduled=False, reason Unschedulable`: what kube-scheduler and KAI set on a pod that
/// waits (`kubectl describe pod` shows it; the cluster autoscaler reads it).
fn pod_scheduled_false(message: &str) -> Value {
    json!({ "status": { "conditions": [{
        "type": "PodScheduled",
        "status": "False",
        "reason": "Unschedulable",
        "message": message,
    }]}})
}

/// KAI's word for a reason (its own where it has one: `OverLimit`, `NonPreemptibleOverQuota`,
/// `QueueDoesNotExist` from `podgroup_types.go`), and the queue's numbers where there are some.
pub fn explanation(reason: &Reason) -> UnschedulableExplanation {
    let word = match reason {
        Reason::NoQueue { .. } => "NoQueue",
        Reason::UnknownQueue { .. } => "QueueDoesNotExist",
        Reason::NotALeaf { .. } => "QueueIsNotLeaf",
        Reason::NamespaceNotAllowed { .. } => "NamespaceNotAllowed",
        Reason::OverLimit { .. } => "OverLimit",
        Reason::NonPreemptibleOverQuota { .. } => "NonPreemptibleOverQuota",
        Reason::NoNodeFits { .. } => "NoNodeFits",
        Reason::NoNodeMatches { .. } => "NoNodeMatches",
        Reason::LargerThanAnyNode { .. } => "LargerThanAnyNode",
        Reason::MinRuntime { .. } => "MinRuntime",
        Reason::NoTopologyDomain { .. } => "NoTopologyDomain",
        Reason::GangIncomplete { .. } | Reason::SubGroupIncomplete { .. } => "GangIncomplete",
        Reason::UnknownSubGroup { .. } => "SubGroupNotFound",
        Reason::WaitingBehind { .. } => "WaitingBehind",
        Reason::PreemptionDelay { .. } => "PreemptionDelayNotElapsed",
        Reason::UnknownPriorityClass { .. } => "PriorityClassDoesNotExist",
        Reason::Withdrawn { .. } => "PlacementWithdrawn",
    };
    let one = |kind: ResourceKind, v: i64| {
        let mut a = Amounts::default();
        *a.get_mut(kind) = v;
        Some(resource_list(&a, Some(kind)))
    };
    let details = match reason {
        Reason::OverLimit {
            queue,
            resource,
            limit,
            allocated,
            requested,
        } => Some(QuotaDetails {
            name: Some(queue.clone()),
            queue_resource_limits: one(*resource, *limit),
            queue_allocated_resources: one(*resource, *allocated),
            pod_group_requested_resources: one(*resource, *requested),
            ..QuotaDetails::default()
        }),
        Reason::NonPreemptibleOverQuota {
            queue,
            resource,
            quota,
            allocated,
            requested,
        } => Some(QuotaDetails {
            name: Some(queue.clone()),
            queue_deserved_resources: one(*resource, *quota),
            queue_allocated_non_preemptible_resources: one(*resource, *allocated),
            pod_group_requested_non_preemptible_resources: one(*resource, *requested),
            ..QuotaDetails::default()
        }),
        _ => None,
    };
    UnschedulableExplanation {
        reason: Some(word.into()),
        message: Some(reason.to_string()),
        details: details.map(|q| ExplanationDetails {
            queue_details: Some(q),
        }),
    }
}

/// The status patch that records `reason` on a PodGroup, or `None` when its last condition
/// already says the same (KAI's `equalSchedulingConditions`: type, node pool, reason, message,
/// status). The new condition's `transitionID` is the last one's plus one, as KAI counts.
pub fn group_condition_patch(
    status: &PodGroupStatus,
    reason: &Reason,
    now: Timestamp,
) -> Option<Value> {
    let message = reason.to_string();
    let last = status.scheduling_conditions.last();
    let same = last.is_some_and(|c| {
        c.type_.as_deref() == Some(UNSCHEDULABLE_ON_NODE_POOL)
            && c.node_pool.as_deref().unwrap_or("").is_empty()
            && c.reason.as_deref() == Some("Unschedulable")
            && c.message.as_deref() == Some(message.as_str())
            && c.status.as_deref() == Some("True")
    });
    if same {
        return None;
    }
    let last_id = last
        .and_then(|c| c.transition_id.as_deref())
        .and_then(|id| id.parse::<u32>().ok())
        .unwrap_or(0);
    let condition = SchedulingCondition {
        type_: Some(UNSCHEDULABLE_ON_NODE_POOL.into()),
        node_pool: Some(String::new()),
        reason: Some("Unschedulable".into()),
        message: Some(message),
        reasons: vec![explanation(reason)],
        last_transition_time: Some(rfc3339(now)),
        status: Some("True".into()),
        transition_id: Some(last_id.saturating_add(1).to_string()),
    };
    // Conditions of other node pools stay; ours goes last, where KAI's readers look.
    let mut conditions: Vec<SchedulingCondition> = status
        .scheduling_conditions
        .iter()
        .filter(|c| !c.node_pool.as_deref().unwrap_or("").is_empty())
        .cloned()
        .collect();
    conditions.push(condition);
    Some(json!({ "status": { "schedulingConditions": conditions } }))
}

/// A queue's numbers for its status: what it holds, what its jobs ask for, and its fair share.
#[derive(Debug, Clone, PartialEq)]
pub struct QueueNumbers {
    /// The queue's name.
    pub name: String,
    /// What running jobs of the queue and its children hold.
    pub allocated: Amounts,
    /// What running and pending jobs ask for.
    pub requested: Amounts,
    /// The fair share the cycle computed.
    pub fair_share: Amounts,
}

/// The Queue status patches for the queues whose numbers changed since they were last written.
pub fn queue_calls(queues: &[QueueNumbers], reported: &mut Reported) -> Vec<Call> {
    let mut calls = Vec::new();
    for q in queues {
        let call = queue_status_patch(q);
        if let Call::QueueStatus { name, patch } = &call {
            if reported.queues.get(name) == Some(patch) {
                continue;
            }
            reported.queues.insert(name.clone(), patch.clone());
        }
        calls.push(call);
    }
    calls
}

/// The Queue status patch: `allocated` and `requested` (KAI's fields) and an `OverQuota`
/// condition (KAI's condition type) whose message carries the fair share, since KAI's Queue
/// status has no field for it.
pub fn queue_status_patch(q: &QueueNumbers) -> Call {
    let over: Vec<ResourceKind> = ResourceKind::ALL
        .into_iter()
        .filter(|&k| q.allocated.get(k) > q.fair_share.get(k))
        .collect();
    let fair = ResourceKind::ALL
        .into_iter()
        .map(|k| {
            format!(
                "{} {}",
                kai_policy_compiler::quantity::format_quantity(*q.fair_share.get(k), k),
                k.name()
            )
        })
        .collect::<Vec<_>>()
        .join(", ");
    let (status, reason, message) = if over.is_empty() {
        ("False", "WithinFairShare", format!("fair share: {fair}"))
    } else {
        let names: Vec<&str> = over.iter().map(|k| k.name()).collect();
        (
            "True",
            "AboveFairShare",
            format!(
                "allocated above fair share in {}; fair share: {fair}",
                names.join(", ")
            ),
        )
    };
    Call::QueueStatus {
        name: q.name.clone(),
        patch: json!({ "status": {
            "allocated": resource_list(&q.allocated, None),
            "requested": resource_list(&q.requested, None),
            "conditions": [{
                "type": "OverQuota",
                "status": status,
                "reason": reason,
                "message": message,
            }],
        }}),
    }
}

/// Amounts as a Kubernetes resource list (`nvidia.com/gpu`, `cpu`, `memory`, each in the
/// compiler's shortest exact spelling, which is a valid Kubernetes quantity), every resource or
/// only `only`.
pub fn resource_list(a: &Amounts, only: Option<ResourceKind>) -> ResourceList {
    ResourceKind::ALL
        .into_iter()
        .filter(|k| only.is_none_or(|o| o == *k))
        .map(|k| {
            let name = match k {
                ResourceKind::Gpu => kai_scheduler::ingest::GPU_RESOURCE,
                ResourceKind::Cpu => "cpu",
                ResourceKind::Memory => "memory",
            };
            let text = kai_policy_compiler::quantity::format_quantity(*a.get(k), k);
            (name.to_string(), Quantity(text))
        })
        .collect()
}

/// An instant as Kubernetes writes `metav1.Time`: RFC 3339 in UTC, whole seconds.
pub fn rfc3339(t: Timestamp) -> String {
    t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// An event to send: the object it is about and what it says.
struct Note {
    object: ObjectReference,
    type_: &'static str,
    reason: &'static str,
    message: String,
}

impl Note {
    fn pod(pod: &str, type_: &'static str, reason: &'static str, message: String) -> Note {
        Note::about("v1", "Pod", pod, type_, reason, message)
    }

    fn group(group: &str, type_: &'static str, reason: &'static str, message: String) -> Note {
        let api_version = "scheduling.run.ai/v2alpha2";
        Note::about(api_version, "PodGroup", group, type_, reason, message)
    }

    fn about(
        api_version: &str,
        kind: &str,
        key: &str,
        type_: &'static str,
        reason: &'static str,
        message: String,
    ) -> Note {
        let (namespace, name) = split(key);
        Note {
            object: ObjectReference {
                api_version: Some(api_version.into()),
                kind: Some(kind.into()),
                namespace: Some(namespace.into()),
                name: Some(name.into()),
                ..ObjectReference::default()
            },
            type_,
            reason,
            message,
        }
    }

    /// A core/v1 Event, named as client-go's recorder names them: the object's name, a dot, a
    /// suffix unique to this replica (the cycle's time in nanoseconds and the event's place in
    /// the cycle).
    fn into_call(self, cx: &Context, index: usize) -> Call {
        let namespace = self.object.namespace.clone().unwrap_or_default();
        let name = format!(
            "{}.{:x}{index:04x}",
            self.object.name.as_deref().unwrap_or(""),
            cx.now.as_nanosecond(),
        );
        let action = if self.reason == "Evict" {
            "Evict"
        } else {
            "Scheduling"
        };
        Call::Event {
            namespace: namespace.clone(),
            event: Box::new(Event {
                metadata: ObjectMeta {
                    name: Some(name),
                    namespace: Some(namespace),
                    ..ObjectMeta::default()
                },
                involved_object: self.object,
                type_: Some(self.type_.into()),
                reason: Some(self.reason.into()),
                message: Some(self.message),
                count: Some(1),
                first_timestamp: Some(Time(cx.now)),
                last_timestamp: Some(Time(cx.now)),
                event_time: Some(MicroTime(cx.now)),
                action: Some(action.into()),
                reporting_component: Some(cx.scheduler_name.into()),
                reporting_instance: Some(cx.instance.into()),
                source: Some(EventSource {
                    component: Some(cx.scheduler_name.into()),
                    host: None,
                }),
                ..Event::default()
            }),
        }
    }
}
