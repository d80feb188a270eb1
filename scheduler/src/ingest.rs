//! Reading a cluster file (edge): what `kubectl get nodes,pods,podgroups.scheduling.run.ai -A
//! -o yaml` prints — a `v1` `List` with `items`, or a multi-document YAML stream of Nodes, Pods and
//! PodGroups — into a [`Snapshot`].
//!
//! Nodes and Pods are read with `k8s-openapi`'s types (YAML → `serde_json::Value` → the typed
//! object), PodGroups (`scheduling.run.ai/v2alpha2`) with a small struct of our own. Amounts are
//! converted to the compiler's stored units.
//!
//! **Time.** Kubernetes timestamps are instants; the scheduler's clock counts seconds. Every
//! timestamp is turned into seconds after an *origin*: the one given in [`Options::origin`], or
//! else the earliest creation or start time in the file. A timestamp before the origin counts as
//! 0. [`ClusterFile::taken`] is the latest creation or start time in the file on that clock: the
//! snapshot cannot have been taken earlier, so a simulation starts there.
//!
//! What a pod asks for follows Kubernetes: per container, a resource's request, or its limit when
//! only a limit is set (GPUs are usually given as limits); summed over containers and sidecars,
//! and raised to the largest init container's where that is more; pod-level requests win. Pods that have finished (phase `Succeeded` or
//! `Failed`) hold nothing and are skipped, as are pending pods that name another scheduler.

use std::collections::BTreeSet;
use std::fmt;
use std::path::Path;

use k8s_openapi::api::core::v1::{Container, Node as K8sNode, Pod as K8sPod};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::jiff::Timestamp;
use kai_policy_compiler::quantity::{ResourceKind, parse_quantity};
use serde::Deserialize;
use serde_json::Value;

use crate::cluster::{Amounts, Node, Pod, PodGroup, Snapshot, Time};

/// The annotation that makes a pod use a fraction of one GPU device (KAI's name).
pub const GPU_FRACTION_ANNOTATION: &str = "gpu-fraction";
/// The annotation that puts a pod into a pod group (KAI's name).
pub const POD_GROUP_ANNOTATION: &str = "pod-group-name";
/// The extended resource that counts whole GPU devices.
pub const GPU_RESOURCE: &str = "nvidia.com/gpu";
/// Kubernetes' default `terminationGracePeriodSeconds`.
pub const DEFAULT_GRACE_SECONDS: u64 = 30;

/// How to read a cluster file.
#[derive(Debug, Clone)]
pub struct Options {
    /// The pod label that names a pod's queue (the policy's `queue-label`).
    pub queue_label: String,
    /// The scheduler's name (the policy's `scheduler-name`): pending pods whose
    /// `spec.schedulerName` is another are not ours and are skipped. `None`: take every pod.
    pub scheduler_name: Option<String>,
    /// The instant that is second 0 on the scheduler's clock; `None`: the earliest creation or
    /// start time in the file.
    pub origin: Option<Timestamp>,
}

impl Options {
    /// Options for a checked policy: its queue label and scheduler name, origin from the file.
    pub fn for_policy(policy: &kai_policy_compiler::model::Policy) -> Self {
        Options {
            queue_label: policy.cluster.queue_label.clone(),
            scheduler_name: Some(policy.cluster.scheduler_name.clone()),
            origin: None,
        }
    }
}

/// A cluster file, read.
#[derive(Debug, Clone, PartialEq)]
pub struct ClusterFile {
    /// Nodes, pods and pod groups, in file order.
    pub snapshot: Snapshot,
    /// Objects skipped and why (other kinds, finished pods, other schedulers' pods).
    pub notes: Vec<String>,
    /// The instant that is second 0 (`None` when neither the options nor the file give one).
    pub origin: Option<Timestamp>,
    /// The latest creation or start time in the file, in seconds after the origin.
    pub taken: Time,
}

/// Why a cluster file cannot be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IngestError {
    /// The file.
    pub file: String,
    /// The object, as `Kind namespace/name` (or `Kind name`, or where it is in the file).
    pub object: Option<String>,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for IngestError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.object {
            Some(object) => write!(f, "{}: {object}: {}", self.file, self.message),
            None => write!(f, "{}: {}", self.file, self.message),
        }
    }
}

impl std::error::Error for IngestError {}

/// Reads and parses a cluster file.
pub fn read_cluster(path: &Path, options: &Options) -> Result<ClusterFile, IngestError> {
    let file = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| IngestError {
        file: file.clone(),
        object: None,
        message: format!("cannot read it: {e}"),
    })?;
    parse_cluster(&file, &text, options)
}

/// A PodGroup as far as the scheduler reads it.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct PodGroupObject {
    #[serde(default)]
    metadata: Metadata,
    #[serde(default)]
    spec: PodGroupSpec,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Metadata {
    name: Option<String>,
    namespace: Option<String>,
    creation_timestamp: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct PodGroupSpec {
    min_member: Option<i64>,
    queue: Option<String>,
    priority_class_name: Option<String>,
}

/// One object of the file, typed, with where it came from.
enum Object {
    Node(Box<K8sNode>),
    Pod(Box<K8sPod>),
    PodGroup(PodGroupObject, Option<Timestamp>),
    /// Not ours: why.
    Skipped(String),
}

/// Parses a cluster file's text; `file` names it in errors and notes.
pub fn parse_cluster(
    file: &str,
    text: &str,
    options: &Options,
) -> Result<ClusterFile, IngestError> {
    let documents: Vec<Value> = serde_saphyr::from_multiple(text).map_err(|e| IngestError {
        file: file.to_string(),
        object: None,
        message: format!("not valid YAML: {e}"),
    })?;
    let mut raw = Vec::new();
    for (d, document) in documents.into_iter().enumerate() {
        flatten(document, &format!("document {}", d + 1), &mut raw);
    }
    read_objects(file, raw, options)
}

/// Reads Kubernetes objects already parsed (each with where it came from, for errors) into a
/// snapshot: the part of [`parse_cluster`] after the YAML, which the Kubernetes backend calls
/// with the objects of its watch caches.
pub fn read_objects(
    file: &str,
    raw: Vec<(String, Value)>,
    options: &Options,
) -> Result<ClusterFile, IngestError> {
    let error = |object: Option<String>, message: String| IngestError {
        file: file.to_string(),
        object,
        message,
    };
    let mut notes = Vec::new();
    let mut objects = Vec::new();
    let mut seen = BTreeSet::new();
    for (at, value) in raw {
        let Value::Object(map) = &value else {
            return Err(error(
                Some(at),
                "is not a Kubernetes object (expected a mapping with apiVersion and kind)".into(),
            ));
        };
        let text = |key: &str| {
            map.get(key)
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        };
        let (api_version, kind) = (text("apiVersion"), text("kind"));
        let meta = map.get("metadata");
        let field = |key: &str| {
            meta.and_then(|m| m.get(key))
                .and_then(Value::as_str)
                .map(str::to_string)
        };
        let (name, namespace) = (field("name"), field("namespace"));
        let label = match (&name, &namespace) {
            _ if kind.is_empty() => at.clone(),
            (Some(n), Some(ns)) if kind != "Node" => format!("{kind} {ns}/{n}"),
            (Some(n), _) => format!("{kind} {n}"),
            (None, _) => format!("{kind} ({at})"),
        };
        let ours = matches!(
            (api_version.as_str(), kind.as_str()),
            ("v1", "Node") | ("v1", "Pod") | ("scheduling.run.ai/v2alpha2", "PodGroup")
        );
        if !ours {
            if kind.is_empty() {
                return Err(error(Some(label), "has no kind".into()));
            }
            objects.push((
                label,
                Object::Skipped(format!(
                    "{api_version} {kind} is not a Node, Pod or scheduling.run.ai/v2alpha2 PodGroup"
                )),
            ));
            continue;
        }
        if name.as_deref().is_none_or(str::is_empty) {
            return Err(error(Some(label), "has no metadata.name".into()));
        }
        let key = (
            kind.clone(),
            namespace.clone().unwrap_or_default(),
            name.clone().unwrap_or_default(),
        );
        if !seen.insert(key) {
            return Err(error(Some(label), "appears twice in the file".into()));
        }
        let invalid =
            |e: serde_json::Error| error(Some(label.clone()), format!("not a valid {kind}: {e}"));
        objects.push((
            label.clone(),
            match kind.as_str() {
                "Node" => Object::Node(Box::new(serde_json::from_value(value).map_err(invalid)?)),
                "Pod" => Object::Pod(Box::new(serde_json::from_value(value).map_err(invalid)?)),
                _ => {
                    let group: PodGroupObject = serde_json::from_value(value).map_err(invalid)?;
                    let created = match &group.metadata.creation_timestamp {
                        Some(t) => Some(t.parse::<Timestamp>().map_err(|e| {
                            error(
                                Some(label.clone()),
                                format!(
                                    "metadata.creationTimestamp `{t}` is not an RFC 3339 time: {e}"
                                ),
                            )
                        })?),
                        None => None,
                    };
                    Object::PodGroup(group, created)
                }
            },
        ));
    }

    // The clock: every creation and start time in the file.
    let mut instants = Vec::new();
    for (_, object) in &objects {
        match object {
            Object::Node(_) | Object::Skipped(_) => {}
            Object::Pod(pod) => {
                instants.extend(pod.metadata.creation_timestamp.iter().map(|t| t.0));
                instants.extend(
                    pod.status
                        .as_ref()
                        .and_then(|s| s.start_time.as_ref())
                        .map(|t| t.0),
                );
            }
            Object::PodGroup(_, created) => instants.extend(*created),
        }
    }
    let origin = options.origin.or_else(|| instants.iter().min().copied());
    let clock = |t: Timestamp| -> Time {
        origin.map_or(0, |o| {
            u64::try_from(t.as_second().saturating_sub(o.as_second())).unwrap_or(0)
        })
    };
    let taken = instants.iter().map(|&t| clock(t)).max().unwrap_or(0);

    let mut snapshot = Snapshot::default();
    for (label, object) in objects {
        let error = |message: String| error(Some(label.clone()), message);
        match object {
            Object::Skipped(why) => notes.push(format!("skipped {label}: {why}")),
            Object::Node(node) => snapshot.nodes.push(read_node(&node).map_err(error)?),
            Object::Pod(pod) => match read_pod(&pod, options, &clock).map_err(error)? {
                Ok(pod) => snapshot.pods.push(pod),
                Err(skip) => notes.push(format!("skipped {label}: {skip}")),
            },
            Object::PodGroup(group, created) => {
                let min_member = match group.spec.min_member {
                    None => 1,
                    Some(m) if (1..=i64::from(u32::MAX)).contains(&m) => m as u32,
                    Some(m) => {
                        return Err(error(format!(
                            "spec.minMember is {m}; it must be at least 1"
                        )));
                    }
                };
                snapshot.groups.push(PodGroup {
                    namespace: group.metadata.namespace.unwrap_or_else(|| "default".into()),
                    name: group.metadata.name.unwrap_or_default(),
                    min_member,
                    queue: group.spec.queue.filter(|q| !q.is_empty()),
                    priority_class: group.spec.priority_class_name.filter(|p| !p.is_empty()),
                    created: created.map_or(0, clock),
                });
            }
        }
    }
    Ok(ClusterFile {
        snapshot,
        notes,
        origin,
        taken,
    })
}

/// Appends the objects of one YAML value: a list's items (recursively), one object, or nothing
/// for an empty document.
fn flatten(value: Value, at: &str, out: &mut Vec<(String, Value)>) {
    match value {
        Value::Null => {}
        Value::Object(mut map)
            if map
                .get("kind")
                .and_then(Value::as_str)
                .is_some_and(|k| k == "List" || k.ends_with("List"))
                && map.get("items").is_some_and(Value::is_array) =>
        {
            if let Some(Value::Array(items)) = map.remove("items") {
                for (i, item) in items.into_iter().enumerate() {
                    flatten(item, &format!("{at}, item {}", i + 1), out);
                }
            }
        }
        other => out.push((at.to_string(), other)),
    }
}

fn read_node(node: &K8sNode) -> Result<Node, String> {
    let allocatable = node.status.as_ref().and_then(|s| s.allocatable.as_ref());
    let amount = |key: &str, kind: ResourceKind| -> Result<i64, String> {
        match allocatable.and_then(|a| a.get(key)) {
            Some(q) => quantity(q, kind).map_err(|e| format!("status.allocatable.{key}: {e}")),
            None => Ok(0),
        }
    };
    let gpu = amount(GPU_RESOURCE, ResourceKind::Gpu)?;
    if gpu % 1000 != 0 {
        return Err(format!(
            "status.allocatable.{GPU_RESOURCE} must count whole devices, not {}",
            kai_policy_compiler::quantity::format_thousandths(gpu)
        ));
    }
    Ok(Node {
        name: node.metadata.name.clone().unwrap_or_default(),
        labels: node.metadata.labels.clone().unwrap_or_default(),
        allocatable: Amounts {
            gpu,
            cpu: amount("cpu", ResourceKind::Cpu)?,
            memory: amount("memory", ResourceKind::Memory)?,
        },
        unschedulable: node
            .spec
            .as_ref()
            .and_then(|s| s.unschedulable)
            .unwrap_or(false),
    })
}

fn quantity(q: &Quantity, kind: ResourceKind) -> Result<i64, String> {
    parse_quantity(&q.0, kind).map_err(|e| e.to_string())
}

/// What one container asks for: its requests, or its limits where a request is not set.
fn container_request(c: &Container) -> Result<Amounts, String> {
    let resources = c.resources.as_ref();
    let requests = resources.and_then(|r| r.requests.as_ref());
    let limits = resources.and_then(|r| r.limits.as_ref());
    let amount = |key: &str, kind: ResourceKind| -> Result<i64, String> {
        let (field, q) = match (
            requests.and_then(|r| r.get(key)),
            limits.and_then(|l| l.get(key)),
        ) {
            (Some(q), _) => ("requests", q),
            (None, Some(q)) => ("limits", q),
            (None, None) => return Ok(0),
        };
        quantity(q, kind).map_err(|e| format!("container {}: resources.{field}.{key}: {e}", c.name))
    };
    let gpu = amount(GPU_RESOURCE, ResourceKind::Gpu)?;
    if gpu % 1000 != 0 {
        return Err(format!(
            "container {}: {GPU_RESOURCE} counts whole devices (for a fraction, use the {GPU_FRACTION_ANNOTATION} annotation)",
            c.name
        ));
    }
    Ok(Amounts {
        gpu,
        cpu: amount("cpu", ResourceKind::Cpu)?,
        memory: amount("memory", ResourceKind::Memory)?,
    })
}

fn add(a: Amounts, b: Amounts) -> Amounts {
    Amounts {
        gpu: a.gpu.saturating_add(b.gpu),
        cpu: a.cpu.saturating_add(b.cpu),
        memory: a.memory.saturating_add(b.memory),
    }
}

fn max(a: Amounts, b: Amounts) -> Amounts {
    Amounts {
        gpu: a.gpu.max(b.gpu),
        cpu: a.cpu.max(b.cpu),
        memory: a.memory.max(b.memory),
    }
}

/// What a pod asks for, as the kubelet counts it: app containers and sidecars (init containers
/// with `restartPolicy: Always`) add up; a regular init container runs alone beside the sidecars
/// started before it, so the pod needs the larger of the two. Pod-level `spec.resources`
/// requests, where set, replace the containers' sum for that resource.
fn pod_request(spec: &k8s_openapi::api::core::v1::PodSpec) -> Result<Amounts, String> {
    let mut running = Amounts::default();
    for c in &spec.containers {
        running = add(running, container_request(c)?);
    }
    let mut sidecars = Amounts::default();
    let mut init = Amounts::default();
    for c in spec.init_containers.iter().flatten() {
        let r = container_request(c)?;
        if c.restart_policy.as_deref() == Some("Always") {
            sidecars = add(sidecars, r);
        } else {
            init = max(init, add(r, sidecars));
        }
    }
    let mut request = max(add(running, sidecars), init);
    if let Some(pod_level) = spec.resources.as_ref().and_then(|r| r.requests.as_ref()) {
        for (key, kind) in [("cpu", ResourceKind::Cpu), ("memory", ResourceKind::Memory)] {
            if let Some(q) = pod_level.get(key) {
                *request.get_mut(kind) =
                    quantity(q, kind).map_err(|e| format!("spec.resources.requests.{key}: {e}"))?;
            }
        }
    }
    Ok(request)
}

/// A pod, `Ok(Err(why))` when it is skipped, `Err` when it cannot be read.
fn read_pod(
    pod: &K8sPod,
    options: &Options,
    clock: &dyn Fn(Timestamp) -> Time,
) -> Result<Result<Pod, String>, String> {
    let meta = &pod.metadata;
    let status = pod.status.as_ref();
    if let Some(phase) = status
        .and_then(|s| s.phase.as_deref())
        .filter(|p| matches!(*p, "Succeeded" | "Failed"))
    {
        return Ok(Err(format!("it has finished (phase {phase})")));
    }
    let spec = pod.spec.as_ref();
    let node = spec
        .and_then(|s| s.node_name.clone())
        .filter(|n| !n.is_empty());
    if let (None, Some(ours)) = (&node, &options.scheduler_name) {
        let theirs = spec
            .and_then(|s| s.scheduler_name.as_deref())
            .unwrap_or("default-scheduler");
        if theirs != ours {
            return Ok(Err(format!(
                "it is pending for another scheduler ({theirs}, not {ours})"
            )));
        }
    }
    let mut request = match spec {
        Some(spec) => pod_request(spec)?,
        None => Amounts::default(),
    };
    let annotations = meta.annotations.as_ref();
    let annotation = |key: &str| {
        annotations
            .and_then(|a| a.get(key))
            .map(|v| v.trim().to_string())
    };
    let mut fractional = false;
    if let Some(text) = annotation(GPU_FRACTION_ANNOTATION) {
        let fraction = parse_quantity(&text, ResourceKind::Gpu)
            .ok()
            .filter(|f| (1..=1000).contains(f))
            .ok_or_else(|| {
                format!(
                    "annotation {GPU_FRACTION_ANNOTATION}: `{text}` is not a fraction of one GPU in (0, 1], like \"0.5\""
                )
            })?;
        if request.gpu > 0 {
            return Err(format!(
                "it has the {GPU_FRACTION_ANNOTATION} annotation and also requests {GPU_RESOURCE}: use one or the other"
            ));
        }
        request.gpu = fraction;
        fractional = true;
    }
    let created = meta.creation_timestamp.as_ref().map_or(0, |t| clock(t.0));
    let started = node.as_ref().map(|_| {
        status
            .and_then(|s| s.start_time.as_ref())
            .map_or(created, |t| clock(t.0))
    });
    let grace = spec
        .and_then(|s| s.termination_grace_period_seconds)
        .map_or(DEFAULT_GRACE_SECONDS, |g| u64::try_from(g).unwrap_or(0));
    Ok(Ok(Pod {
        namespace: meta.namespace.clone().unwrap_or_else(|| "default".into()),
        name: meta.name.clone().unwrap_or_default(),
        group: annotation(POD_GROUP_ANNOTATION).filter(|g| !g.is_empty()),
        queue: meta
            .labels
            .as_ref()
            .and_then(|l| l.get(&options.queue_label))
            .filter(|q| !q.is_empty())
            .cloned(),
        priority_class: spec
            .and_then(|s| s.priority_class_name.clone())
            .filter(|p| !p.is_empty()),
        request,
        fractional,
        node,
        created,
        started,
        termination_grace_seconds: grace,
        terminating: meta.deletion_timestamp.is_some(),
    }))
}

#[cfg(test)]
mod tests;
