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
//! and raised to the largest init container's where that is more; pod-level requests win;
//! `spec.overhead` is added. Pods that have finished hold nothing (a `Succeeded` one is counted
//! for its group); pending pods that name another scheduler are skipped; bound ones are kept as
//! used capacity ([`crate::cluster::Pod::foreign`]).
//!
//! **One odd object never rejects the file.** An object that cannot be read is skipped with a
//! note naming it and the field; quantities Kubernetes accepts but we store more coarsely
//! (`cpu: 1u`) are rounded (requests up, allocatable down). Only text that is not YAML or JSON
//! at all, or that breaches the reader's budgets, rejects the file.
//!
//! **Groups.** Pods join PodGroups through the `pod-group-name` annotation, or else through
//! their top owner as KAI's pod-grouper does (`owners`).

mod dra;
mod fast;
mod numa;
mod objects;
mod owners;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;
use std::path::Path;

use k8s_openapi::api::core::v1::{Node as K8sNode, Pod as K8sPod};
use k8s_openapi::jiff::Timestamp;
use serde::Deserialize;
use serde_json::Value;

use crate::cluster::{PodGroup, SUBGROUP_LABEL, Snapshot, SubGroup, Time, Topology};
use fast::At;
use kai_policy_compiler::yaml::{Located, Node as YamlNode};
use objects::PodRead;

pub use numa::pod_numa;

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
    /// Owner kinds of which the objects read hold every one (the Kubernetes backend's listed
    /// watch caches; empty for a file). A pending pod whose owners lead to a missing object of
    /// one of these kinds is newer than the caches: it is skipped until its owner is read,
    /// rather than grouped without it (a gang's pods taken one by one).
    pub complete_owner_kinds: Vec<String>,
}

impl Options {
    /// Options for a checked policy: its queue label and scheduler name, origin from the file.
    pub fn for_policy(policy: &kai_policy_compiler::model::Policy) -> Self {
        Options {
            queue_label: policy.cluster.queue_label.clone(),
            scheduler_name: Some(policy.cluster.scheduler_name.clone()),
            origin: None,
            complete_owner_kinds: Vec::new(),
        }
    }
}

/// A cluster file, read.
#[derive(Debug, Clone, PartialEq)]
pub struct ClusterFile {
    /// Nodes, pods and pod groups, in file order.
    pub snapshot: Snapshot,
    /// Objects skipped and why (other kinds, finished pods, other schedulers' pods).
    pub notes: Vec<Note>,
    /// The instant that is second 0 (`None` when neither the options nor the file give one).
    pub origin: Option<Timestamp>,
    /// The latest creation or start time in the file, in seconds after the origin.
    pub taken: Time,
    /// For each PodGroup object that pods without a `pod-group-name` annotation joined by their
    /// top owner's group name: the group their owner gives now, with the queue they name (the
    /// Kubernetes backend updates a PodGroup it made when its owner changed).
    pub owner_groups: Vec<(PodGroup, Option<String>)>,
}

/// Something the reader passed over or read its own way, and where in the file it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Note {
    /// The line and column (1-based) of the object it is about, when the reader knows them.
    pub line_column: Option<(usize, usize)>,
    /// What it says.
    pub text: String,
}

impl Note {
    /// The note as a line about `file`: `file:line:column: text`, or `file: text`.
    pub fn in_file(&self, file: &str) -> String {
        match self.line_column {
            Some((line, column)) => format!("{file}:{line}:{column}: {}", self.text),
            None => format!("{file}: {}", self.text),
        }
    }
}

impl fmt::Display for Note {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
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
    #[serde(default)]
    annotations: BTreeMap<String, String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct PodGroupSpec {
    min_member: Option<i64>,
    queue: Option<String>,
    priority_class_name: Option<String>,
    preemptibility: Option<String>,
    preemption_delay: Option<String>,
    staleness_grace_period: Option<String>,
    topology_constraint: Option<TopologyConstraint>,
    min_sub_group: Option<i64>,
    #[serde(default)]
    sub_groups: Vec<SubGroupSpec>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct SubGroupSpec {
    name: String,
    parent: Option<String>,
    min_member: Option<i64>,
    min_sub_group: Option<i64>,
    topology_constraint: Option<TopologyConstraint>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct TopologyConstraint {
    topology: Option<String>,
    required_topology_level: Option<String>,
    preferred_topology_level: Option<String>,
}

/// KAI's annotation that records when a PodGroup went stale
/// (`pkg/scheduler/api/podgroup_info/job_info.go`).
pub const STALE_ANNOTATION: &str = "kai.scheduler/stale-podgroup-timestamp";

/// KAI's annotation that records when a PodGroup's pods were last evicted
/// (`pkg/common/constants/constants.go: LastEvictionTimeStamp`); a preemption delay counts from it.
pub const LAST_EVICTION_ANNOTATION: &str = "kai.scheduler/last-eviction-timestamp";

/// KAI's annotation that records when the scheduler last started a PodGroup's job
/// (`constants.go: LastStartTimeStamp`, written from `allocate.go: setLastStartTimestamp`);
/// min-runtime counts from it.
pub const LAST_START_ANNOTATION: &str = "kai.scheduler/last-start-timestamp";

/// On a PodGroup the Kubernetes backend made for a workload from its top owner: the priority
/// class its kind gives by default (`train`), used, as for the group before it was made, only
/// where the policy declares that class. KAI's pod-grouper writes the class into
/// `spec.priorityClassName` instead, which would make it explicit.
pub const KIND_PRIORITY_ANNOTATION: &str = "kai-policy/kind-priority-class";

/// One object of the file, typed, with where it came from. Nodes and pods are read into the
/// cluster model as soon as they are typed (in the reader threads), so that the large typed
/// objects are never all held at once.
enum Object {
    /// The node, or why it cannot be used.
    Node(Result<crate::cluster::Node, String>),
    Pod(Box<ReadPod>),
    PodGroup(Box<PodGroupObject>, Option<Timestamp>),
}

/// A pod read as far as it can be without the others: all but its times on the file's clock.
struct ReadPod {
    read: Result<PodRead, String>,
    /// The notes reading it gave, kept until it is known not to be a duplicate.
    notes: Vec<String>,
    times: objects::PodTimes,
    owner: Option<owners::OwnerRef>,
}

/// The reader's budgets for a file of `len` bytes: they grow with the file, so that a real
/// `kubectl get -A -o yaml` of any size is read, and only documents that expand far beyond
/// their text (alias bombs) or nest absurdly deep are refused.
fn yaml_options(len: usize) -> serde_saphyr::Options {
    let mut budget = serde_saphyr::Budget::default();
    budget.max_reader_input_bytes = None;
    budget.max_events = budget.max_events.max(len.saturating_mul(2));
    budget.max_nodes = budget.max_nodes.max(len);
    budget.max_total_scalar_bytes = budget.max_total_scalar_bytes.max(len.saturating_mul(2));
    budget.max_documents = budget.max_documents.max(len / 16);
    budget.max_depth = 128;
    let mut options = serde_saphyr::Options::default();
    options.budget = Some(budget);
    options
}

/// The documents of a file: JSON (`kubectl get -o json`, one object or a stream) straight
/// through serde_json, anything else as a YAML stream.
fn documents(text: &str) -> Result<Vec<Value>, String> {
    if text.trim_start().starts_with('{') {
        let stream = serde_json::Deserializer::from_str(text).into_iter::<Value>();
        if let Ok(values) = stream.collect::<Result<Vec<Value>, _>>() {
            return Ok(values);
        }
        // Not JSON after all (YAML flow style also starts with `{`): read it as YAML.
    }
    serde_saphyr::from_multiple_with_options(text, yaml_options(text.len())).map_err(|e| {
        let message = e.to_string();
        if message.contains("budget") {
            format!(
                "not read: {message}. The YAML reader's limits grow with the file's size and stop documents that expand far beyond their text (aliases) or nest deeper than 128 levels; kubectl never writes such files. If this one is real, write it as JSON (`kubectl get … -o json`), which has no such limits"
            )
        } else {
            format!("not valid YAML: {message}")
        }
    })
}

/// Numbers and booleans where Kubernetes wants strings (an unquoted label value, `cpu: 1`)
/// become strings, as kubectl would have quoted them.
fn quote_scalars(value: &mut Value) {
    const STRING_MAPS: [&str; 9] = [
        "labels",
        "annotations",
        "nodeSelector",
        "matchLabels",
        "requests",
        "limits",
        "allocatable",
        "capacity",
        "overhead",
    ];
    match value {
        Value::Object(map) => {
            for (key, child) in map.iter_mut() {
                if STRING_MAPS.contains(&key.as_str())
                    && let Value::Object(inner) = child
                {
                    for v in inner.values_mut() {
                        if let Value::Number(_) | Value::Bool(_) = v {
                            *v = Value::String(v.to_string());
                        }
                    }
                }
                quote_scalars(child);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(quote_scalars),
        _ => {}
    }
}

/// Reads a typed object, or says which field is wrong.
fn typed<T: serde::de::DeserializeOwned>(value: Value) -> Result<T, String> {
    serde_path_to_error::deserialize(value).map_err(|e| {
        let at = e.path().to_string();
        if at == "." {
            e.into_inner().to_string()
        } else {
            format!("{at}: {}", e.into_inner())
        }
    })
}

/// A Go duration (`"90s"`, `"1h30m"`, `"-1s"`) in whole seconds, rounded down.
fn go_duration(text: &str) -> Option<i64> {
    let (negative, mut rest) = match text.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, text.strip_prefix('+').unwrap_or(text)),
    };
    if rest == "0" {
        return Some(0);
    }
    let mut nanos: f64 = 0.0;
    while !rest.is_empty() {
        let end = rest.find(|c: char| !(c.is_ascii_digit() || c == '.'))?;
        let number: f64 = rest[..end].parse().ok()?;
        rest = &rest[end..];
        let unit_end = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let scale = match &rest[..unit_end] {
            "ns" => 1.0,
            "us" | "µs" => 1e3,
            "ms" => 1e6,
            "s" => 1e9,
            "m" => 60e9,
            "h" => 3600e9,
            _ => return None,
        };
        nanos += number * scale;
        rest = &rest[unit_end..];
    }
    let seconds = (nanos / 1e9).floor() as i64;
    Some(if negative { -seconds } else { seconds })
}

/// Parses a cluster file's text; `file` names it in errors and notes.
///
/// The file is read object by object by the fast readers (`fast`); a file they cannot read with
/// certainty is read whole by serde-saphyr, with the same result.
pub fn parse_cluster(
    file: &str,
    text: &str,
    options: &Options,
) -> Result<ClusterFile, IngestError> {
    let read = |work: fast::Work<'_>| -> Result<Vec<Prepared>, fast::GiveUp> {
        let (at, value) = work.into_value()?;
        let mut raw = Vec::new();
        flatten(value, at, None, &mut raw);
        Ok(raw
            .into_iter()
            .map(|(at, v)| prepare(at, v, options))
            .collect())
    };
    let fast = if text.trim_start().starts_with('{') {
        fast::pipeline(|send| fast::json(text, send), read)
            .or_else(|_| fast::pipeline(|send| fast::yaml(text, send), read))
    } else {
        fast::pipeline(|send| fast::yaml(text, send), read)
    };
    match fast {
        Ok(prepared) => Ok(assemble(prepared, options)),
        Err(fast::GiveUp) => parse_whole(file, text, options),
    }
}

/// Reads the file as one tree with serde-saphyr (or serde_json), with the reader's budgets.
fn parse_whole(file: &str, text: &str, options: &Options) -> Result<ClusterFile, IngestError> {
    let documents = documents(text).map_err(|message| IngestError {
        file: file.to_string(),
        object: None,
        message,
    })?;
    // The places of the objects, read a second time: this reader is the rare one (anchors,
    // tags, odd keys), and its tree has no places. JSON is read as the YAML it also is; text
    // that YAML refuses keeps its notes without places.
    let located =
        kai_policy_compiler::yaml::locate_all(text, yaml_options(text.len())).unwrap_or_default();
    let mut raw = Vec::new();
    for (d, document) in documents.into_iter().enumerate() {
        let at = at_place(format!("document {}", d + 1), located.get(d));
        flatten(document, at, located.get(d), &mut raw);
    }
    Ok(read_placed(raw, options))
}

/// Where a node the whole-file reader located is: `label`, at its line and column.
fn at_place(label: String, located: Option<&Located>) -> At {
    At {
        label,
        line_column: located.map(|l| (l.place.line, l.place.column)),
    }
}

/// One object of the file, read as far as it can be without the others.
enum Prepared {
    /// Not a mapping.
    NotObject(At),
    /// A mapping.
    Object(Box<Head>, Body),
}

/// What every object is named by.
struct Head {
    at: At,
    api_version: String,
    kind: String,
    name: Option<String>,
    namespace: Option<String>,
    created: Option<Timestamp>,
}

/// The typed object, why it is not one, or an owner of another kind.
enum Body {
    Typed(Result<Object, String>),
    /// A PriorityClass's value, or why it has none.
    PriorityClass(Result<i32, String>),
    /// A KAI Topology's levels (node labels, top level first), or why it cannot be read.
    Topology(Result<Vec<String>, String>),
    /// A DeviceClass, ResourceSlice or ResourceClaim, or why it cannot be read.
    Dra(Result<dra::DraObject, String>),
    /// A NodeResourceTopology's zones (`None`: it has none), or why it cannot be read.
    Numa(Result<Option<crate::numa::Topology>, String>),
    Other(Box<owners::Owner>),
}

/// Fields of Nodes and Pods the scheduler never reads and that make up most of a real object:
/// dropped before the object is typed, so they are neither built nor checked.
const UNREAD: [(&str, &[&str]); 3] = [
    (
        "metadata",
        &[
            "managedFields",
            "uid",
            "resourceVersion",
            "generateName",
            "generation",
            "selfLink",
            "finalizers",
        ],
    ),
    (
        "status",
        &[
            "containerStatuses",
            "initContainerStatuses",
            "ephemeralContainerStatuses",
            "images",
            "nodeInfo",
            "addresses",
            "volumesAttached",
            "volumesInUse",
            "daemonEndpoints",
            "config",
            "features",
            "runtimeHandlers",
            "podIP",
            "podIPs",
            "hostIP",
            "hostIPs",
        ],
    ),
    (
        "spec",
        &[
            "volumes",
            "ephemeralContainers",
            "readinessGates",
            "podCIDR",
            "podCIDRs",
            "providerID",
            "dnsPolicy",
            "dnsConfig",
            "securityContext",
            "serviceAccountName",
            "serviceAccount",
            "imagePullSecrets",
            "enableServiceLinks",
            "restartPolicy",
        ],
    ),
];

/// Container fields the scheduler never reads.
const UNREAD_CONTAINER: [&str; 16] = [
    "imagePullPolicy",
    "terminationMessagePolicy",
    "args",
    "command",
    "env",
    "envFrom",
    "volumeMounts",
    "volumeDevices",
    "livenessProbe",
    "readinessProbe",
    "startupProbe",
    "lifecycle",
    "securityContext",
    "image",
    "terminationMessagePath",
    "workingDir",
];

fn drop_unread(value: &mut Value) {
    let Value::Object(map) = value else { return };
    for (section, keys) in UNREAD {
        if let Some(Value::Object(inner)) = map.get_mut(section) {
            for key in keys {
                inner.remove(*key);
            }
        }
    }
    if let Some(Value::Object(spec)) = map.get_mut("spec") {
        for list in ["containers", "initContainers"] {
            if let Some(Value::Array(containers)) = spec.get_mut(list) {
                for c in containers {
                    if let Value::Object(c) = c {
                        for key in UNREAD_CONTAINER {
                            c.remove(key);
                        }
                    }
                }
            }
        }
    }
}

/// Reads one object as far as it can be read alone.
fn prepare(at: At, mut value: Value, options: &Options) -> Prepared {
    let Value::Object(map) = &value else {
        return Prepared::NotObject(at);
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
    let created_text = field("creationTimestamp");
    let owner_ref = owners::controller(meta);
    let created = created_text
        .as_ref()
        .and_then(|t| t.parse::<Timestamp>().ok());
    let body = match (api_version.as_str(), kind.as_str()) {
        ("v1", "Node") => {
            drop_unread(&mut value);
            quote_scalars(&mut value);
            Body::Typed(typed::<K8sNode>(value).map(|n| Object::Node(objects::read_node(&n))))
        }
        ("v1", "Pod") => {
            drop_unread(&mut value);
            if let Some(Value::Object(status)) = value.get_mut("status") {
                status.remove("conditions");
            }
            quote_scalars(&mut value);
            Body::Typed(typed::<K8sPod>(value).map(|pod| {
                let mut notes = Vec::new();
                let read = objects::read_pod(&pod, options, &mut notes);
                Object::Pod(Box::new(ReadPod {
                    read,
                    notes,
                    times: objects::PodTimes::of(&pod),
                    owner: owner_ref,
                }))
            }))
        }
        ("scheduling.k8s.io/v1", "PriorityClass") => {
            Body::PriorityClass(match value.get("value").and_then(Value::as_i64) {
                Some(v) => i32::try_from(v).map_err(|_| format!("value {v} is out of range")),
                None => Err("it has no integer `value`".to_string()),
            })
        }
        ("kai.scheduler/v1alpha1", "Topology") => Body::Topology(topology_levels(&value)),
        (version, kind) if dra::is_dra_version(version) && dra::is_dra_kind(kind) => {
            let name = name.as_deref().unwrap_or_default();
            let namespace = namespace.as_deref().unwrap_or("default");
            Body::Dra(dra::read(kind, name, namespace, &value))
        }
        (numa::NRT_API_VERSION, numa::NRT_KIND) => Body::Numa(numa::read_topology(&value)),
        ("scheduling.run.ai/v2alpha2", "PodGroup") => {
            quote_scalars(&mut value);
            Body::Typed(match created_text.map(|t| t.parse::<Timestamp>()) {
                Some(Err(e)) => Err(format!(
                    "metadata.creationTimestamp: not an RFC 3339 time: {e}"
                )),
                _ => typed(value).map(|g| Object::PodGroup(Box::new(g), created)),
            })
        }
        _ => {
            quote_scalars(&mut value);
            Body::Other(Box::new(owners::owner(&kind, &value)))
        }
    };
    Prepared::Object(
        Box::new(Head {
            at,
            api_version,
            kind,
            name,
            namespace,
            created,
        }),
        body,
    )
}

/// Reads Kubernetes objects already parsed (each with where it came from, for errors) into a
/// snapshot: the part of [`parse_cluster`] after the YAML, which the Kubernetes backend calls
/// with the objects of its watch caches.
pub fn read_objects(
    _file: &str,
    raw: Vec<(String, Value)>,
    options: &Options,
) -> Result<ClusterFile, IngestError> {
    let raw = raw
        .into_iter()
        .map(|(label, v)| (At::counted(label), v))
        .collect();
    Ok(read_placed(raw, options))
}

/// Reads objects, each with where it is, into a snapshot.
fn read_placed(raw: Vec<(At, Value)>, options: &Options) -> ClusterFile {
    let prepared = raw
        .into_iter()
        .map(|(at, v)| prepare(at, v, options))
        .collect();
    assemble(prepared, options)
}

/// The objects, read alone, into a snapshot: names checked once, owners linked, the clock set.
fn assemble(prepared: Vec<Prepared>, options: &Options) -> ClusterFile {
    let mut notes: Vec<Note> = Vec::new();
    // Each object with its label and place for notes, and its namespace and name.
    let mut objects: Vec<(At, String, String, Object)> = Vec::new();
    let mut owners = owners::Owners::complete(&options.complete_owner_kinds);
    let mut priority_classes = BTreeMap::new();
    let mut topologies: Vec<Topology> = Vec::new();
    let mut dra_objects = crate::dra::Dra::default();
    let mut numa_topologies: HashMap<String, crate::numa::Topology> = HashMap::new();
    // Objects of other kinds, in file order, with the note they get if they own no pod.
    let mut other_kinds: Vec<((String, String, String), Note)> = Vec::new();
    let mut seen = HashSet::new();
    let mut instants = Vec::new();
    for item in prepared {
        let (head, body) = match item {
            Prepared::NotObject(at) => {
                notes.push(Note {
                    line_column: at.line_column,
                    text: format!(
                        "skipped {}: it is not a Kubernetes object (expected a mapping with apiVersion and kind)",
                        at.label
                    ),
                });
                continue;
            }
            Prepared::Object(head, body) => (*head, body),
        };
        let Head {
            at,
            api_version,
            kind,
            name,
            namespace,
            created,
        } = head;
        let label = match (&name, &namespace) {
            _ if kind.is_empty() => at.label.clone(),
            (Some(n), Some(ns)) if kind != "Node" => format!("{kind} {ns}/{n}"),
            (Some(n), _) => format!("{kind} {n}"),
            (None, _) => format!("{kind} ({})", at.label),
        };
        let place = at.line_column;
        let skip = |why: &str| Note {
            line_column: place,
            text: format!("skipped {label}: {why}"),
        };
        if kind.is_empty() {
            notes.push(skip("it has no kind"));
            continue;
        }
        let Some(name) = name.filter(|n| !n.is_empty()) else {
            notes.push(skip("it has no metadata.name"));
            continue;
        };
        let namespace = namespace.unwrap_or_else(|| "default".into());
        if !seen.insert((kind.clone(), namespace.clone(), name.clone())) {
            notes.push(skip("it appears twice in the file (the first is used)"));
            continue;
        }
        match body {
            Body::Typed(Ok(object)) => {
                let at = At {
                    label: label.clone(),
                    line_column: place,
                };
                objects.push((at, namespace, name, object));
            }
            Body::PriorityClass(Ok(value)) => {
                priority_classes.insert(name, value);
            }
            Body::Dra(Ok(object)) => match object {
                dra::DraObject::Class(c) => dra_objects.classes.push(c),
                dra::DraObject::Slice(s) => dra_objects.slices.push(*s),
                dra::DraObject::Claim(c) => {
                    if let Some(why) = &c.unreadable {
                        notes.push(Note {
                            line_column: place,
                            text: format!(
                                "{label}: {why}; kept for the devices its allocation holds, and its pods wait until it is fixed"
                            ),
                        });
                    }
                    dra_objects.claims.push(*c);
                }
            },
            Body::Numa(Ok(topology)) => {
                numa_topologies.extend(topology.map(|t| (name, t)));
            }
            Body::PriorityClass(Err(why))
            | Body::Topology(Err(why))
            | Body::Dra(Err(why))
            | Body::Numa(Err(why)) => notes.push(skip(&why)),
            Body::Topology(Ok(levels)) => topologies.push(Topology { name, levels }),
            Body::Typed(Err(why)) => notes.push(skip(&format!("not a valid {kind}: {why}"))),
            Body::Other(owner) => {
                other_kinds.push((
                    (namespace.clone(), kind.clone(), name.clone()),
                    skip(&format!(
                        "{api_version} {kind} is not a Node, Pod or scheduling.run.ai/v2alpha2 PodGroup"
                    )),
                ));
                instants.extend(created);
                owners.add(&namespace, &name, *owner);
            }
        }
    }

    // The clock: every creation and start time in the file.
    for (.., object) in &objects {
        match object {
            Object::Node(_) => {}
            Object::Pod(pod) => instants.extend(pod.times.instants()),
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

    topologies.sort_by(|a, b| a.name.cmp(&b.name));
    let mut snapshot = Snapshot {
        priority_classes,
        topologies,
        dra: dra_objects,
        ..Snapshot::default()
    };
    let mut pod_owners = Vec::new();
    // Where each pod of `snapshot.pods` starts in the file, for the notes made about it later.
    let mut pod_at: Vec<Option<(usize, usize)>> = Vec::new();
    let mut succeeded: Vec<(String, Option<String>, Option<owners::OwnerRef>, String)> = Vec::new();
    for (at, namespace, name, object) in objects {
        let note = |text: String| Note {
            line_column: at.line_column,
            text,
        };
        let skip = |why: String| note(format!("skipped {}: {why}", at.label));
        match object {
            Object::Node(Ok(mut node)) => {
                node.numa = numa_topologies.remove(&node.name).map(Box::new);
                snapshot.nodes.push(node);
            }
            Object::Node(Err(why)) => notes.push(skip(why)),
            Object::Pod(pod) => {
                let ReadPod {
                    read,
                    notes: read_notes,
                    times,
                    owner,
                } = *pod;
                notes.extend(read_notes.into_iter().map(note));
                match read {
                    Ok(PodRead::Pod(mut p)) => {
                        times.apply(&mut p, &clock);
                        snapshot.pods.push(*p);
                        pod_at.push(at.line_column);
                        pod_owners.push(owner);
                    }
                    Ok(PodRead::Succeeded(annotation)) => {
                        succeeded.push((namespace, annotation, owner, name));
                        notes.push(skip("it has finished (phase Succeeded)".into()));
                    }
                    Ok(PodRead::Skipped(why)) | Err(why) => notes.push(skip(why)),
                }
            }
            Object::PodGroup(group, created) => {
                let mut read_notes = Vec::new();
                let read = read_group(*group, created.map(clock), &clock, &mut read_notes);
                notes.extend(read_notes.into_iter().map(note));
                match read {
                    Ok(g) => snapshot.groups.push(g),
                    Err(why) => notes.push(skip(why)),
                }
            }
        }
    }
    let owner_groups = group_by_owner(
        &mut snapshot,
        pod_owners,
        &mut pod_at,
        &mut owners,
        &succeeded,
        options,
        &mut notes,
    );
    let unused: HashSet<&(String, String, String)> = owners.unused().collect();
    notes.extend(
        other_kinds
            .iter()
            .filter(|(key, _)| unused.contains(key))
            .map(|(_, note)| note.clone()),
    );
    size_gpu_memory(&mut snapshot, &pod_at, &mut notes);
    crate::dra::count_gpus(&mut snapshot);
    let nodes: HashSet<&str> = snapshot.nodes.iter().map(|n| n.name.as_str()).collect();
    for (p, &line_column) in snapshot.pods.iter().zip(&pod_at) {
        if let Some(node) = p
            .node
            .as_deref()
            .filter(|n| !nodes.contains(n) && !p.foreign)
        {
            notes.push(Note {
                line_column,
                text: format!(
                    "Pod {}: runs on node {node}, which is not in the file: what it holds stays charged to its queue, and it is not placed again",
                    p.key()
                ),
            });
        }
    }
    ClusterFile {
        snapshot,
        notes,
        origin,
        taken,
        owner_groups,
    }
}

/// A KAI `Topology`'s levels, as its CRD requires them: at least one, each naming a node label,
/// no label twice.
fn topology_levels(value: &Value) -> Result<Vec<String>, String> {
    let levels = value["spec"]["levels"]
        .as_array()
        .filter(|l| !l.is_empty())
        .ok_or("spec.levels must list at least one level")?;
    let mut out: Vec<String> = Vec::with_capacity(levels.len());
    for (i, level) in levels.iter().enumerate() {
        let label = level["nodeLabel"]
            .as_str()
            .filter(|l| !l.is_empty())
            .ok_or_else(|| format!("spec.levels[{i}] has no nodeLabel"))?;
        if out.iter().any(|l| l == label) {
            return Err(format!(
                "spec.levels[{i}]: node label {label} names two levels; each level needs its own"
            ));
        }
        out.push(label.to_string());
    }
    Ok(out)
}

fn read_group(
    group: PodGroupObject,
    created: Option<Time>,
    clock: &dyn Fn(Timestamp) -> Time,
    notes: &mut Vec<String>,
) -> Result<PodGroup, String> {
    let mut spec = group.spec;
    let label = format!(
        "PodGroup {}/{}",
        group.metadata.namespace.as_deref().unwrap_or("default"),
        group.metadata.name.as_deref().unwrap_or_default()
    );
    let (sub_groups, min_sub_group) = sub_groups(&mut spec, &label, notes)?;
    let min_member = match spec.min_member {
        // With sub-groups KAI reads no `minMember` (`job_info.go: setSubGroups`); 0, as for a
        // group ingest builds with sub-groups.
        None if !sub_groups.is_empty() => 0,
        None => 1,
        Some(m) if (0..=i64::from(u32::MAX)).contains(&m) => m as u32,
        Some(m) => return Err(format!("spec.minMember is {m}; it must be 0 or more")),
    };
    let preemptible = match spec.preemptibility.as_deref() {
        None | Some("") => None,
        Some("preemptible") => Some(true),
        Some("non-preemptible") => Some(false),
        Some(other) => {
            return Err(format!(
                "spec.preemptibility: `{other}` is not preemptible or non-preemptible"
            ));
        }
    };
    let duration = |field: &str, text: Option<String>| -> Result<Option<i64>, String> {
        text.map(|t| {
            go_duration(&t)
                .ok_or_else(|| format!("spec.{field}: `{t}` is not a duration like \"5m\""))
        })
        .transpose()
    };
    // KAI's time annotations, in RFC 3339.
    let time = |key: &str| -> Result<Option<Time>, String> {
        group
            .metadata
            .annotations
            .get(key)
            .map(|t| {
                t.parse::<Timestamp>().map(&clock).map_err(|e| {
                    format!("metadata.annotations.{key}: `{t}` is not an RFC 3339 time: {e}")
                })
            })
            .transpose()
    };
    let stale_since = time(STALE_ANNOTATION)?;
    let last_evicted = time(LAST_EVICTION_ANNOTATION)?;
    let last_start = time(LAST_START_ANNOTATION)?;
    let topology = spec.topology_constraint.unwrap_or_default();
    Ok(PodGroup {
        namespace: group.metadata.namespace.unwrap_or_else(|| "default".into()),
        name: group.metadata.name.unwrap_or_default(),
        min_member,
        queue: spec.queue.filter(|q| !q.is_empty()),
        priority_class: spec.priority_class_name.filter(|p| !p.is_empty()),
        created: created.unwrap_or(0),
        preemptible,
        staleness_grace: duration("stalenessGracePeriod", spec.staleness_grace_period)?,
        stale_since,
        preemption_delay: duration("preemptionDelay", spec.preemption_delay)?
            .map(|s| u64::try_from(s).unwrap_or(0)),
        last_evicted,
        last_start,
        succeeded: 0,
        topology: topology.topology.filter(|t| !t.is_empty()),
        topology_required: topology.required_topology_level.filter(|t| !t.is_empty()),
        topology_preferred: topology.preferred_topology_level.filter(|t| !t.is_empty()),
        kind_priority: group
            .metadata
            .annotations
            .get(KIND_PRIORITY_ANNOTATION)
            .filter(|c| !c.is_empty())
            .cloned(),
        sub_groups,
        min_sub_group,
        owner: None,
    })
}

/// A PodGroup's `spec.subGroups` and `spec.minSubGroup`, checked as KAI's admission webhook
/// checks them (`podgroup_webhook.go: validatePodGroupSpec`): what it refuses (a duplicate
/// name, an unknown parent, a cycle, `minMember` with `minSubGroup`) is an error; what it only
/// warns about is a note, and the group is read as KAI's scheduler reads it (a pod-holding
/// sub-group without `minMember` needs 0 pods; `minSubGroup` on one, or `minMember` on a
/// grouping one, is ignored).
fn sub_groups(
    spec: &mut PodGroupSpec,
    label: &str,
    notes: &mut Vec<String>,
) -> Result<(Vec<SubGroup>, Option<u32>), String> {
    let count = |field: &str, v: Option<i64>| -> Result<Option<u32>, String> {
        v.map(|v| u32::try_from(v).map_err(|_| format!("{field} is {v}; it must be 0 or more")))
            .transpose()
    };
    let min_sub_group = count("spec.minSubGroup", spec.min_sub_group)?;
    if spec.sub_groups.is_empty() {
        return Ok((Vec::new(), None));
    }
    if let (Some(m), Some(_)) = (spec.min_member, min_sub_group) {
        return Err(format!(
            "spec.minMember ({m}) and spec.minSubGroup are both set; they exclude each other: keep minSubGroup to count sub-groups, or remove spec.subGroups"
        ));
    }
    let mut out: Vec<SubGroup> = Vec::with_capacity(spec.sub_groups.len());
    for (i, s) in std::mem::take(&mut spec.sub_groups).into_iter().enumerate() {
        let at = format!("spec.subGroups[{i}]");
        if s.name.is_empty() {
            return Err(format!("{at} has no name"));
        }
        if out.iter().any(|o| o.name == s.name) {
            return Err(format!(
                "{at}: the name {} is used twice; sub-group names must be unique",
                s.name
            ));
        }
        let topology = s.topology_constraint.unwrap_or_default();
        out.push(SubGroup {
            min_member: count(&format!("{at}.minMember"), s.min_member)?,
            min_sub_group: count(&format!("{at}.minSubGroup"), s.min_sub_group)?,
            name: s.name,
            parent: s.parent.filter(|p| !p.is_empty()),
            topology: topology.topology.filter(|t| !t.is_empty()),
            topology_required: topology.required_topology_level.filter(|t| !t.is_empty()),
            topology_preferred: topology.preferred_topology_level.filter(|t| !t.is_empty()),
        });
    }
    for s in &out {
        if let Some(parent) = &s.parent
            && !out.iter().any(|o| &o.name == parent)
        {
            return Err(format!(
                "sub-group {} names parent {parent}, which is not in spec.subGroups",
                s.name
            ));
        }
        // Follow the parents up: more steps than there are sub-groups is a cycle.
        let mut at = s.parent.as_deref();
        for _ in 0..=out.len() {
            at = match at {
                Some(p) => out
                    .iter()
                    .find(|o| o.name == p)
                    .and_then(|o| o.parent.as_deref()),
                None => break,
            };
        }
        if at.is_some() {
            return Err(format!(
                "sub-group {} is its own ancestor (a cycle of parents)",
                s.name
            ));
        }
        if s.min_member.is_some() && s.min_sub_group.is_some() {
            return Err(format!(
                "sub-group {}: minMember and minSubGroup exclude each other",
                s.name
            ));
        }
    }
    let children = |name: Option<&str>| out.iter().filter(|o| o.parent.as_deref() == name).count();
    let mut warn = |what: String| {
        notes.push(format!(
            "{label}: {what} (KAI's admission webhook warns the same)"
        ))
    };
    if let Some(m) = min_sub_group
        && m as usize > children(None)
    {
        warn(format!(
            "spec.minSubGroup ({m}) is more than its {} top-level sub-groups: the group can never start",
            children(None)
        ));
    }
    for s in &out {
        let kids = children(Some(&s.name));
        if kids == 0 {
            if s.min_sub_group.is_some() {
                warn(format!(
                    "sub-group {} has minSubGroup but no sub-groups under it: ignored",
                    s.name
                ));
            }
            if s.min_member.is_none() {
                warn(format!(
                    "sub-group {} has no minMember: its pods run as they fit, none required",
                    s.name
                ));
            }
        } else {
            if s.min_member.is_some() {
                warn(format!(
                    "sub-group {} has sub-groups under it, so its minMember is ignored; use minSubGroup",
                    s.name
                ));
            }
            if let Some(m) = s.min_sub_group
                && m as usize > kids
            {
                warn(format!(
                    "sub-group {}: minSubGroup ({m}) is more than its {kids} sub-groups: the group can never start",
                    s.name
                ));
            }
        }
    }
    Ok((out, min_sub_group))
}

/// Puts every pod without a `pod-group-name` annotation into its top owner's group, creating
/// the groups KAI's pod-grouper would create; counts succeeded pods for their groups. A pod
/// left out leaves `pod_at` too; a note about a group is at the first of its pods to meet it.
fn group_by_owner(
    snapshot: &mut Snapshot,
    pod_owners: Vec<Option<owners::OwnerRef>>,
    pod_at: &mut Vec<Option<(usize, usize)>>,
    owners: &mut owners::Owners,
    succeeded: &[(String, Option<String>, Option<owners::OwnerRef>, String)],
    options: &Options,
    notes: &mut Vec<Note>,
) -> Vec<(PodGroup, Option<String>)> {
    let mut index: HashMap<(String, String), usize> = snapshot
        .groups
        .iter()
        .enumerate()
        .map(|(i, g)| ((g.namespace.clone(), g.name.clone()), i))
        .collect();
    let mut counted: HashMap<usize, u32> = HashMap::new();
    let mut noted = HashSet::new();
    let mut waiting = HashSet::new();
    let objects = snapshot.groups.len();
    let mut owner_groups: Vec<(PodGroup, Option<String>)> = Vec::new();
    let mut recorded = HashSet::new();
    for (p, owner) in pod_owners.into_iter().enumerate() {
        let pod = &mut snapshot.pods[p];
        if pod.group.is_some() || pod.foreign {
            continue;
        }
        let Some(owner) = owner else { continue };
        let g = owners.group_of(
            &pod.namespace,
            &owner,
            &pod.name,
            &pod.labels,
            &options.queue_label,
        );
        if let Some(missing) = &g.missing_owner
            && pod.node.is_none()
        {
            notes.push(Note {
                line_column: pod_at[p],
                text: format!(
                    "skipped Pod {}: its owner {missing} is not read yet, so its group is not known; it waits until the owner is read",
                    pod.key()
                ),
            });
            waiting.insert(p);
            continue;
        }
        pod.queue = g.queue.clone().or(pod.queue.take());
        pod.priority_label = g.priority_label.clone().or(pod.priority_label.take());
        pod.preemptibility = g.preemptibility.or(pod.preemptibility);
        pod.group = Some(g.name.clone());
        // KAI's pod-grouper labels the pod with the sub-group it found for it, over any label
        // the pod had (`pod_controller.go: assignPodToGroupAndSubGroup`).
        if let Some(subgroup) = &g.subgroup {
            pod.labels
                .insert(SUBGROUP_LABEL.to_string(), subgroup.clone());
        }
        let key = (pod.namespace.clone(), g.name.clone());
        let at = *index.entry(key.clone()).or_insert_with(|| {
            snapshot.groups.push(g.group.clone());
            snapshot.groups.len() - 1
        });
        if at < objects && g.group.owner.is_some() && recorded.insert(key.clone()) {
            owner_groups.push((g.group.clone(), pod.queue.clone()));
        }
        if g.count_pods {
            *counted.entry(at).or_default() += 1;
        }
        if let Some(text) = g.note
            && noted.insert(key)
        {
            notes.push(Note {
                line_column: pod_at[p],
                text,
            });
        }
    }
    for (at, pods) in counted {
        snapshot.groups[at].min_member = pods;
    }
    if !waiting.is_empty() {
        drop_at(&mut snapshot.pods, &waiting);
        drop_at(pod_at, &waiting);
    }
    for (namespace, annotation, owner, name) in succeeded {
        let group = match (annotation, owner) {
            (Some(g), _) => Some(g.clone()),
            (None, Some(o)) => Some(
                owners
                    .group_of(namespace, o, name, &BTreeMap::new(), &options.queue_label)
                    .name,
            ),
            (None, None) => None,
        };
        if let Some(&at) = group.and_then(|g| index.get(&(namespace.clone(), g))) {
            snapshot.groups[at].succeeded += 1;
        }
    }
    owner_groups
}

/// Removes the items at the indexes in `gone`, keeping the others in order.
fn drop_at<T>(items: &mut Vec<T>, gone: &HashSet<usize>) {
    let mut at = 0;
    items.retain(|_| {
        at += 1;
        !gone.contains(&(at - 1))
    });
}

/// A `gpu-memory` pod's share of a device: its MiB over the device's (`nvidia.com/gpu.memory`
/// label, MiB), rounded up to a thousandth. A bound pod uses its node's devices; a pending one
/// the smallest devices that still hold it (the largest share it could take, so a queue's
/// limit is never broken by where it lands). Without any labelled node, one whole device.
fn size_gpu_memory(
    snapshot: &mut Snapshot,
    pod_at: &[Option<(usize, usize)>],
    notes: &mut Vec<Note>,
) {
    let device_mib = |labels: &BTreeMap<String, String>| {
        labels
            .get(crate::cycle::GPU_MEMORY_LABEL)
            .and_then(|v| v.trim().parse::<i64>().ok())
            .filter(|&m| m > 0)
    };
    let by_node: HashMap<&str, i64> = snapshot
        .nodes
        .iter()
        .filter_map(|n| Some((n.name.as_str(), device_mib(&n.labels)?)))
        .collect();
    for (pod, &line_column) in snapshot.pods.iter_mut().zip(pod_at) {
        let Some(mib) = pod.gpu_memory else { continue };
        let device = match pod.node.as_deref() {
            Some(node) => by_node.get(node).copied(),
            None => by_node.values().copied().filter(|&d| d >= mib).min(),
        };
        let per_device = match device {
            Some(d) => ((mib * 1000 + d - 1) / d).clamp(1, 1000),
            None => {
                notes.push(Note {
                    line_column,
                    text: format!(
                        "Pod {}: no node labels its GPU memory ({}), so its gpu-memory of {mib} MiB counts as a whole device",
                        pod.key(),
                        crate::cycle::GPU_MEMORY_LABEL
                    ),
                });
                1000
            }
        };
        pod.request.gpu = per_device * i64::from(pod.shared_devices.max(1));
    }
}

/// Appends the objects of one YAML value: a list's items (recursively), one object, or nothing
/// for an empty document.
fn flatten(value: Value, at: At, located: Option<&Located>, out: &mut Vec<(At, Value)>) {
    match value {
        Value::Null => {}
        Value::Object(mut map)
            if map
                .get("kind")
                .and_then(Value::as_str)
                .is_some_and(|k| k == "List" || k.ends_with("List"))
                && map.get("items").is_some_and(Value::is_array) =>
        {
            let places = match located.and_then(|l| l.get("items")) {
                Some((
                    _,
                    Located {
                        node: YamlNode::List(items),
                        ..
                    },
                )) => items.as_slice(),
                _ => &[],
            };
            if let Some(Value::Array(items)) = map.remove("items") {
                for (i, item) in items.into_iter().enumerate() {
                    let place = places.get(i);
                    let item_at = at_place(format!("{}, item {}", at.label, i + 1), place);
                    flatten(item, item_at, place, out);
                }
            }
        }
        other => out.push((at, other)),
    }
}

#[cfg(test)]
mod tests;
