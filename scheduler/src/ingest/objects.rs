//! One Node, Pod or PodGroup, typed, into the cluster model. Each reader returns the object or
//! what is wrong with it (with the field path); the caller skips the object with a note.

use std::collections::BTreeMap;

use super::{
    DEFAULT_GRACE_SECONDS, GPU_FRACTION_ANNOTATION, GPU_RESOURCE, Options, POD_GROUP_ANNOTATION,
};
use crate::cluster::{
    Amounts, Constraints, HostPort, LabelSelector, Node, NodeSelectorTerm, Operator, Pod,
    PodAffinityTerm, Requirement, Taint, TaintEffect, Time, Toleration, is_gpu_reservation,
};
use k8s_openapi::api::core::v1::{
    Affinity, Container, Node as K8sNode, NodeSelectorRequirement, NodeSelectorTerm as K8sTerm,
    Pod as K8sPod, PodAffinityTerm as K8sPodTerm, PodSpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;
use k8s_openapi::jiff::Timestamp;
use kai_policy_compiler::quantity::{ResourceKind, Round, parse_rounded};

/// KAI's annotation for a shared pod's GPU memory in MiB.
pub const GPU_MEMORY_ANNOTATION: &str = "gpu-memory";
/// KAI's annotation for how many devices a shared pod spreads over.
pub const GPU_DEVICES_ANNOTATION: &str = "gpu-fraction-num-devices";
/// KAI's pod label that sets a priority class (its documented way).
pub const PRIORITY_LABEL: &str = "priorityClassName";
/// KAI's label that overrides preemptibility.
pub const PREEMPTIBILITY_LABEL: &str = "kai.scheduler/preemptibility";

/// A quantity in stored units of `kind` (GPU thousandths, millicores, bytes). The policy compiler
/// refuses an amount finer than it stores (`cpu: 1u`); Kubernetes accepted it and a cluster file
/// cannot be fixed by its reader, so here it is rounded: requests up, allocatable down.
fn stored(text: &str, kind: ResourceKind, round: Round) -> Result<i64, String> {
    parse_rounded(text, kind.scale(), round).map_err(|e| e.to_string())
}

/// A quantity in whole units (`scale` 1) or thousandths (`scale` 1000) of a resource, rounded
/// as asked: `ephemeral-storage`, `hugepages-*` and extended resources.
fn units(text: &str, scale: i128, round: Round) -> Result<i64, String> {
    parse_rounded(text, scale, round).map_err(|e| e.to_string())
}

/// The node conditions that keep new pods off unless their status is `False` (KAI's
/// `scheduler_util.CheckNodeConditionPredicate`; `Ready` is read apart).
const PRESSURE_CONDITIONS: [&str; 4] = [
    "MemoryPressure",
    "DiskPressure",
    "PIDPressure",
    "NetworkUnavailable",
];

/// Resources that are not "extended": counted in [`Amounts`] or as the pod slot count.
const BASE_RESOURCES: [&str; 4] = ["cpu", "memory", GPU_RESOURCE, "pods"];

/// A node.
pub fn read_node(node: &K8sNode) -> Result<Node, String> {
    let status = node.status.as_ref();
    let allocatable = status.and_then(|s| s.allocatable.as_ref());
    let amount = |key: &str, kind: ResourceKind| -> Result<i64, String> {
        match allocatable.and_then(|a| a.get(key)) {
            Some(q) => stored(&q.0, kind, Round::Down)
                .map_err(|e| format!("status.allocatable.{key}: {e}")),
            None => Ok(0),
        }
    };
    let gpu = amount(GPU_RESOURCE, ResourceKind::Gpu)? / 1000 * 1000;
    let mut extended = BTreeMap::new();
    let mut max_pods = None;
    for (key, q) in allocatable.into_iter().flatten() {
        if key == "pods" {
            let n =
                units(&q.0, 1, Round::Down).map_err(|e| format!("status.allocatable.pods: {e}"))?;
            max_pods = Some(u32::try_from(n).unwrap_or(u32::MAX));
        } else if !BASE_RESOURCES.contains(&key.as_str()) {
            let n = units(&q.0, 1, Round::Down)
                .map_err(|e| format!("status.allocatable.{key}: {e}"))?;
            extended.insert(key.clone(), n);
        }
    }
    let spec = node.spec.as_ref();
    // A node that reports conditions is ready only when `Ready` is `True`; a hand-written node
    // without conditions is taken as ready.
    let not_ready = status
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| !cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
    let pressure = status
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .filter(|c| PRESSURE_CONDITIONS.contains(&c.type_.as_str()) && c.status != "False")
        .map(|c| c.type_.clone())
        .collect();
    let mut taints = Vec::new();
    for (i, t) in spec
        .and_then(|s| s.taints.as_ref())
        .into_iter()
        .flatten()
        .enumerate()
    {
        taints.push(Taint {
            key: t.key.clone(),
            value: t.value.clone().unwrap_or_default(),
            effect: effect(&t.effect).ok_or_else(|| {
                format!(
                    "spec.taints[{i}].effect: `{}` is not NoSchedule, PreferNoSchedule or NoExecute",
                    t.effect
                )
            })?,
        });
    }
    Ok(Node {
        name: node.metadata.name.clone().unwrap_or_default(),
        labels: node.metadata.labels.clone().unwrap_or_default(),
        allocatable: Amounts {
            gpu,
            cpu: amount("cpu", ResourceKind::Cpu)?,
            memory: amount("memory", ResourceKind::Memory)?,
        },
        unschedulable: spec.and_then(|s| s.unschedulable).unwrap_or(false),
        not_ready,
        pressure,
        taints,
        extended,
        max_pods,
        dra_gpus: 0,
        numa: None,
    })
}

fn effect(text: &str) -> Option<TaintEffect> {
    match text {
        "NoSchedule" => Some(TaintEffect::NoSchedule),
        "PreferNoSchedule" => Some(TaintEffect::PreferNoSchedule),
        "NoExecute" => Some(TaintEffect::NoExecute),
        _ => None,
    }
}

/// What one container asks for: its requests, or its limits where a request is not set.
fn container_request(
    c: &Container,
    at: &str,
    extended: &mut BTreeMap<String, i64>,
) -> Result<Amounts, String> {
    let resources = c.resources.as_ref();
    let requests = resources.and_then(|r| r.requests.as_ref());
    let limits = resources.and_then(|r| r.limits.as_ref());
    let mut keys: Vec<&String> = requests.into_iter().flatten().map(|(k, _)| k).collect();
    keys.extend(limits.into_iter().flatten().map(|(k, _)| k));
    keys.sort();
    keys.dedup();
    let mut amounts = Amounts::default();
    for key in keys {
        let (field, q) = match (
            requests.and_then(|r| r.get(key)),
            limits.and_then(|l| l.get(key)),
        ) {
            (Some(q), _) => ("requests", q),
            (None, Some(q)) => ("limits", q),
            (None, None) => continue,
        };
        let context = |e: String| format!("{at}: resources.{field}.{key}: {e}");
        match key.as_str() {
            "cpu" => amounts.cpu = stored(&q.0, ResourceKind::Cpu, Round::Up).map_err(context)?,
            "memory" => {
                amounts.memory = stored(&q.0, ResourceKind::Memory, Round::Up).map_err(context)?;
            }
            GPU_RESOURCE => {
                amounts.gpu = stored(&q.0, ResourceKind::Gpu, Round::Up).map_err(context)?;
                if amounts.gpu % 1000 != 0 {
                    return Err(format!(
                        "{at}.resources.{field}.{GPU_RESOURCE}: counts whole devices (for a fraction, use the {GPU_FRACTION_ANNOTATION} annotation)"
                    ));
                }
            }
            _ => {
                let n = units(&q.0, 1, Round::Up).map_err(context)?;
                *extended.entry(key.clone()).or_default() += n;
            }
        }
    }
    Ok(amounts)
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
/// requests, where set, replace the containers' sum for that resource; `spec.overhead` (the
/// runtime class's cost) is added. Extended resources add up the same way, simplified to the
/// sum over every container.
fn pod_request(spec: &PodSpec) -> Result<(Amounts, BTreeMap<String, i64>), String> {
    let mut extended = BTreeMap::new();
    let mut running = Amounts::default();
    for c in &spec.containers {
        running = add(
            running,
            container_request(c, &format!("container {}", c.name), &mut extended)?,
        );
    }
    let mut sidecars = Amounts::default();
    let mut init = Amounts::default();
    let mut init_extended = BTreeMap::new();
    for c in spec.init_containers.iter().flatten() {
        let r = container_request(c, &format!("init container {}", c.name), &mut init_extended)?;
        if c.restart_policy.as_deref() == Some("Always") {
            sidecars = add(sidecars, r);
        } else {
            init = max(init, add(r, sidecars));
        }
    }
    for (k, v) in init_extended {
        let e = extended.entry(k).or_default();
        *e = (*e).max(v);
    }
    let mut request = max(add(running, sidecars), init);
    if let Some(pod_level) = spec.resources.as_ref().and_then(|r| r.requests.as_ref()) {
        for (key, kind) in [("cpu", ResourceKind::Cpu), ("memory", ResourceKind::Memory)] {
            if let Some(q) = pod_level.get(key) {
                *request.get_mut(kind) = stored(&q.0, kind, Round::Up)
                    .map_err(|e| format!("spec.resources.requests.{key}: {e}"))?;
            }
        }
    }
    for (key, q) in spec.overhead.iter().flatten() {
        let context = |e: String| format!("spec.overhead.{key}: {e}");
        match key.as_str() {
            "cpu" => request.cpu += stored(&q.0, ResourceKind::Cpu, Round::Up).map_err(context)?,
            "memory" => {
                request.memory += stored(&q.0, ResourceKind::Memory, Round::Up).map_err(context)?;
            }
            _ => {
                *extended.entry(key.clone()).or_default() +=
                    units(&q.0, 1, Round::Up).map_err(context)?
            }
        }
    }
    Ok((request, extended))
}

/// What a pod read from the file becomes.
pub enum PodRead {
    /// A pod the cycle sees (ours, or another scheduler's bound pod).
    Pod(Box<Pod>),
    /// Finished with phase `Succeeded`: counted for its group (its `pod-group-name` annotation,
    /// as written), nothing held.
    Succeeded(Option<String>),
    /// Not the scheduler's business, and why.
    Skipped(String),
}

/// When a pod was created and started, kept as instants: the file's clock is known only once
/// every object is read, and pods are read before that (in the reader threads).
#[derive(Debug, Clone, Copy, Default)]
pub struct PodTimes {
    created: Option<Timestamp>,
    started: Option<Timestamp>,
    deleted: Option<Timestamp>,
}

impl PodTimes {
    /// The pod's `metadata.creationTimestamp`, `status.startTime` and
    /// `metadata.deletionTimestamp`.
    pub fn of(pod: &K8sPod) -> PodTimes {
        PodTimes {
            created: pod.metadata.creation_timestamp.as_ref().map(|t| t.0),
            started: pod
                .status
                .as_ref()
                .and_then(|s| s.start_time.as_ref())
                .map(|t| t.0),
            deleted: pod.metadata.deletion_timestamp.as_ref().map(|t| t.0),
        }
    }

    /// The instants the file's clock is set from.
    pub fn instants(&self) -> impl Iterator<Item = Timestamp> {
        // The deletion time is a deadline, not an event the snapshot has seen.
        self.created.into_iter().chain(self.started)
    }

    /// Sets the pod's times on the file's clock: no creation time counts as the origin, and a
    /// bound pod with no start time started when it was created.
    pub fn apply(&self, pod: &mut Pod, clock: &dyn Fn(Timestamp) -> Time) {
        pod.created = self.created.map_or(0, clock);
        if pod.node.is_some() {
            pod.started = Some(self.started.map_or(pod.created, clock));
        }
        pod.deletion_deadline = self.deleted.map(clock);
    }
}

/// The prefix of MIG instance resources (KAI's `IsMigResource`).
const MIG_PREFIX: &str = "nvidia.com/mig-";

/// A pod, with any notes about how it was read. Its times are left at 0: [`PodTimes::apply`]
/// sets them once the file's clock is known.
pub fn read_pod(
    pod: &K8sPod,
    options: &Options,
    notes: &mut Vec<String>,
) -> Result<PodRead, String> {
    let meta = &pod.metadata;
    let status = pod.status.as_ref();
    match status.and_then(|s| s.phase.as_deref()) {
        Some("Succeeded") => {
            let group = meta
                .annotations
                .as_ref()
                .and_then(|a| a.get(POD_GROUP_ANNOTATION))
                .cloned();
            return Ok(PodRead::Succeeded(group));
        }
        Some("Failed") => return Ok(PodRead::Skipped("it has finished (phase Failed)".into())),
        _ => {}
    }
    let spec = pod.spec.as_ref();
    let node = spec
        .and_then(|s| s.node_name.clone())
        .filter(|n| !n.is_empty());
    let theirs = spec
        .and_then(|s| s.scheduler_name.as_deref())
        .unwrap_or("default-scheduler");
    // KAI's binder makes one reservation pod per shared GPU device, bound at once, to hold the
    // device for the shared pods on it: never a job of ours, and its GPU is counted by those
    // pods' shares, not a second time (`node_info.go: addTaskResources`).
    let reservation = meta.labels.as_ref().is_some_and(is_gpu_reservation);
    if reservation && node.is_none() {
        return Ok(PodRead::Skipped(
            "it is a GPU reservation pod of KAI's binder, which places it".into(),
        ));
    }
    let foreign = reservation
        || options
            .scheduler_name
            .as_deref()
            .is_some_and(|ours| ours != theirs);
    if let (None, true) = (&node, foreign) {
        let ours = options.scheduler_name.as_deref().unwrap_or_default();
        return Ok(PodRead::Skipped(format!(
            "it is pending for another scheduler ({theirs}, not {ours})"
        )));
    }
    let (mut request, mut extended) = match spec {
        Some(spec) => pod_request(spec)?,
        None => Default::default(),
    };
    let annotations = meta.annotations.as_ref();
    let annotation = |key: &str| {
        annotations
            .and_then(|a| a.get(key))
            .map(|v| v.trim().to_string())
    };
    let labels = meta.labels.clone().unwrap_or_default();
    let mut share_notes = Vec::new();
    let share = gpu_share(&annotation, request.gpu, &mut share_notes)?;
    let key = format!(
        "{}/{}",
        meta.namespace.as_deref().unwrap_or("default"),
        meta.name.as_deref().unwrap_or_default()
    );
    notes.extend(share_notes.into_iter().map(|n| format!("Pod {key}: {n}")));
    if reservation {
        request.gpu = 0;
    }
    let (mut fractional, mut shared_devices, mut gpu_memory) = (false, 0, None);
    if let Some(share) = share {
        request.gpu = share.total;
        (fractional, shared_devices, gpu_memory) = (true, share.devices, share.memory_mib);
    }
    // A legacy MIG pod asks its instances in annotations, and they replace whatever its
    // containers ask of GPUs (`pod_info.go: updateLegacyMigResourceRequestFromAnnotations`).
    let legacy: Vec<(String, i64)> = annotations
        .into_iter()
        .flatten()
        .filter(|(k, _)| k.starts_with(MIG_PREFIX))
        .filter_map(|(k, v)| v.trim().parse::<i64>().ok().map(|n| (k.clone(), n)))
        .collect();
    let legacy_mig = !legacy.is_empty();
    if legacy_mig {
        request.gpu = 0;
        (fractional, shared_devices, gpu_memory) = (false, 0, None);
        extended.retain(|k, _| !k.starts_with(MIG_PREFIX));
        extended.extend(legacy);
    }
    let grace = spec
        .and_then(|s| s.termination_grace_period_seconds)
        .map_or(DEFAULT_GRACE_SECONDS, |g| u64::try_from(g).unwrap_or(0));
    let preemptibility = match labels.get(PREEMPTIBILITY_LABEL).map(String::as_str) {
        None => None,
        Some("preemptible") => Some(true),
        Some("non-preemptible") => Some(false),
        Some(other) => {
            return Err(format!(
                "metadata.labels.{PREEMPTIBILITY_LABEL}: `{other}` is not preemptible or non-preemptible"
            ));
        }
    };
    Ok(PodRead::Pod(Box::new(Pod {
        namespace: meta.namespace.clone().unwrap_or_else(|| "default".into()),
        name: meta.name.clone().unwrap_or_default(),
        group: annotation(POD_GROUP_ANNOTATION).filter(|g| !g.is_empty()),
        queue: labels
            .get(&options.queue_label)
            .filter(|q| !q.is_empty())
            .cloned(),
        priority_class: spec
            .and_then(|s| s.priority_class_name.clone())
            .filter(|p| !p.is_empty()),
        priority_label: labels
            .get(PRIORITY_LABEL)
            .filter(|p| !p.is_empty())
            .cloned(),
        preemptibility,
        request,
        extended,
        fractional,
        shared_devices,
        dra_gpus: 0,
        gpu_memory,
        foreign,
        constraints: Box::new({
            let mut c = spec.map(constraints).transpose()?.unwrap_or_default();
            c.claims = pod_claims(spec, status);
            c.numa = spec
                .and_then(|s| super::numa::pod_numa(s, status))
                .map(Box::new);
            c
        }),
        labels,
        started: node.as_ref().map(|_| 0),
        node,
        created: 0,
        termination_grace_seconds: grace,
        terminating: meta.deletion_timestamp.is_some(),
        deletion_deadline: None,
        legacy_mig,
        numa_zones: super::numa::record(&annotation),
    })))
}

/// `spec.resourceClaims`, each with the ResourceClaim it names: `resourceClaimName`, or the
/// claim made from `resourceClaimTemplateName` as `status.resourceClaimStatuses` reports it
/// (KAI's `resources.GetResourceClaimName`).
fn pod_claims(
    spec: Option<&PodSpec>,
    status: Option<&k8s_openapi::api::core::v1::PodStatus>,
) -> Vec<crate::dra::PodClaim> {
    let made = |name: &str| {
        status
            .and_then(|s| s.resource_claim_statuses.as_ref())
            .and_then(|l| l.iter().find(|c| c.name == name))
            .and_then(|c| c.resource_claim_name.clone())
    };
    spec.and_then(|s| s.resource_claims.as_ref())
        .into_iter()
        .flatten()
        .map(|c| {
            let template =
                c.resource_claim_name.is_none() && c.resource_claim_template_name.is_some();
            crate::dra::PodClaim {
                name: c.name.clone(),
                claim: if template {
                    made(&c.name)
                } else {
                    c.resource_claim_name.clone()
                },
                template,
            }
        })
        .collect()
}

/// A shared-GPU request read from KAI's annotations.
struct Share {
    /// Thousandths of a device over all its devices.
    total: i64,
    /// Devices (`gpu-fraction-num-devices`; 1 without it).
    devices: u32,
    /// `gpu-memory` in MiB.
    memory_mib: Option<i64>,
}

/// KAI's GPU sharing (`pkg/scheduler/api/pod_info/pod_info.go: updatePodAdditionalFields`):
/// `gpu-fraction` in (0, 1], or `gpu-memory` in MiB, times `gpu-fraction-num-devices`. A
/// fraction finer than a thousandth is rounded up (with a note). A `gpu-memory` pod's share of
/// one device depends on the device; it is counted as one whole device per requested device
/// until it is placed (see docs/scheduler.md).
fn gpu_share(
    annotation: &dyn Fn(&str) -> Option<String>,
    whole_gpus: i64,
    notes: &mut Vec<String>,
) -> Result<Option<Share>, String> {
    let fraction = annotation(GPU_FRACTION_ANNOTATION);
    let memory = annotation(GPU_MEMORY_ANNOTATION);
    if fraction.is_none() && memory.is_none() {
        return Ok(None);
    }
    if whole_gpus > 0 {
        return Err(format!(
            "it has a GPU-sharing annotation ({GPU_FRACTION_ANNOTATION} or {GPU_MEMORY_ANNOTATION}) and also requests {GPU_RESOURCE}: use one or the other"
        ));
    }
    let devices = match annotation(GPU_DEVICES_ANNOTATION) {
        None => 1,
        Some(text) => text
            .parse::<u32>()
            .ok()
            .filter(|&n| (1..=64).contains(&n))
            .ok_or_else(|| {
                format!(
                    "metadata.annotations.{GPU_DEVICES_ANNOTATION}: `{text}` is not a number of devices from 1 to 64"
                )
            })?,
    };
    let (per_device, memory_mib) = match (fraction, memory) {
        (Some(text), _) => {
            let value: f64 = text.parse().ok().filter(|v: &f64| *v > 0.0 && *v <= 1.0).ok_or_else(|| {
                format!(
                    "annotation {GPU_FRACTION_ANNOTATION}: `{text}` is not a fraction of one GPU in (0, 1], like \"0.5\""
                )
            })?;
            let thousandths = (value * 1000.0 - 1e-9).ceil().max(1.0) as i64;
            if (thousandths as f64 - value * 1000.0).abs() > 1e-6 {
                notes.push(format!(
                    "annotation {GPU_FRACTION_ANNOTATION}: `{text}` is finer than a thousandth of a GPU; counted as {}",
                    kai_policy_compiler::quantity::format_thousandths(thousandths)
                ));
            }
            (thousandths, None)
        }
        (None, Some(text)) => {
            let mib = text.parse::<i64>().ok().filter(|&m| m > 0).ok_or_else(|| {
                format!(
                    "annotation {GPU_MEMORY_ANNOTATION}: `{text}` is not a whole number of MiB, like \"20000\""
                )
            })?;
            (1000, Some(mib))
        }
        (None, None) => return Ok(None),
    };
    Ok(Some(Share {
        total: per_device * i64::from(devices),
        devices,
        memory_mib,
    }))
}

fn requirement(
    key: &str,
    operator: &str,
    values: Option<&Vec<String>>,
    at: &str,
) -> Result<Requirement, String> {
    let operator = match Operator::NAMED.iter().find(|(n, _)| *n == operator) {
        Some(&(_, o)) => o,
        None => {
            return Err(format!(
                "{at}.operator: `{operator}` is not In, NotIn, Exists, DoesNotExist, Gt or Lt"
            ));
        }
    };
    Ok(Requirement {
        key: key.to_string(),
        operator,
        values: values.cloned().unwrap_or_default(),
    })
}

fn node_requirements(
    list: Option<&Vec<NodeSelectorRequirement>>,
    at: &str,
) -> Result<Vec<Requirement>, String> {
    list.into_iter()
        .flatten()
        .enumerate()
        .map(|(i, r)| {
            requirement(
                &r.key,
                &r.operator,
                r.values.as_ref(),
                &format!("{at}[{i}]"),
            )
        })
        .collect()
}

pub(super) fn term(t: &K8sTerm, at: &str) -> Result<NodeSelectorTerm, String> {
    Ok(NodeSelectorTerm {
        expressions: node_requirements(
            t.match_expressions.as_ref(),
            &format!("{at}.matchExpressions"),
        )?,
        fields: node_requirements(t.match_fields.as_ref(), &format!("{at}.matchFields"))?,
    })
}

fn pod_term(t: &K8sPodTerm, at: &str) -> Result<PodAffinityTerm, String> {
    let selector = t.label_selector.as_ref();
    let expressions = selector
        .and_then(|s| s.match_expressions.as_ref())
        .into_iter()
        .flatten()
        .enumerate()
        .map(|(i, r): (usize, &LabelSelectorRequirement)| {
            requirement(
                &r.key,
                &r.operator,
                r.values.as_ref(),
                &format!("{at}.labelSelector.matchExpressions[{i}]"),
            )
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(PodAffinityTerm {
        selector: LabelSelector {
            labels: selector
                .and_then(|s| s.match_labels.clone())
                .unwrap_or_default(),
            expressions,
        },
        namespaces: t.namespaces.clone().unwrap_or_default(),
        topology_key: t.topology_key.clone(),
    })
}

/// Tolerations, node selector, affinity and host ports.
fn constraints(spec: &PodSpec) -> Result<Constraints, String> {
    let mut c = Constraints {
        node_selector: spec.node_selector.clone().unwrap_or_default(),
        ..Default::default()
    };
    for (i, t) in spec.tolerations.iter().flatten().enumerate() {
        let at = format!("spec.tolerations[{i}]");
        let exists = match t.operator.as_deref() {
            None | Some("Equal") => false,
            Some("Exists") => true,
            Some(other) => return Err(format!("{at}.operator: `{other}` is not Equal or Exists")),
        };
        let effect = match t.effect.as_deref() {
            None | Some("") => None,
            Some(e) => Some(effect(e).ok_or_else(|| {
                format!("{at}.effect: `{e}` is not NoSchedule, PreferNoSchedule or NoExecute")
            })?),
        };
        c.tolerations.push(Toleration {
            key: t.key.clone().unwrap_or_default(),
            exists,
            value: t.value.clone().unwrap_or_default(),
            effect,
        });
    }
    let affinity: Option<&Affinity> = spec.affinity.as_ref();
    if let Some(node) = affinity.and_then(|a| a.node_affinity.as_ref()) {
        let at = "spec.affinity.nodeAffinity";
        if let Some(required) = &node.required_during_scheduling_ignored_during_execution {
            for (i, t) in required.node_selector_terms.iter().enumerate() {
                c.required_terms.push(term(
                    t,
                    &format!(
                        "{at}.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[{i}]"
                    ),
                )?);
            }
        }
        for (i, p) in node
            .preferred_during_scheduling_ignored_during_execution
            .iter()
            .flatten()
            .enumerate()
        {
            let at =
                format!("{at}.preferredDuringSchedulingIgnoredDuringExecution[{i}].preference");
            c.preferred_terms
                .push((p.weight, term(&p.preference, &at)?));
        }
    }
    let pod_terms =
        |list: Option<&Vec<K8sPodTerm>>, at: &str| -> Result<Vec<PodAffinityTerm>, String> {
            list.into_iter()
                .flatten()
                .enumerate()
                .map(|(i, t)| {
                    pod_term(
                        t,
                        &format!("{at}.requiredDuringSchedulingIgnoredDuringExecution[{i}]"),
                    )
                })
                .collect()
        };
    if let Some(a) = affinity.and_then(|a| a.pod_affinity.as_ref()) {
        c.pod_affinity = pod_terms(
            a.required_during_scheduling_ignored_during_execution
                .as_ref(),
            "spec.affinity.podAffinity",
        )?;
    }
    if let Some(a) = affinity.and_then(|a| a.pod_anti_affinity.as_ref()) {
        c.pod_anti_affinity = pod_terms(
            a.required_during_scheduling_ignored_during_execution
                .as_ref(),
            "spec.affinity.podAntiAffinity",
        )?;
    }
    for container in spec
        .containers
        .iter()
        .chain(spec.init_containers.iter().flatten())
    {
        for port in container.ports.iter().flatten() {
            if let Some(host_port) = port.host_port.filter(|&p| p > 0) {
                c.host_ports.push(HostPort {
                    protocol: port.protocol.clone().unwrap_or_else(|| "TCP".into()),
                    ip: port.host_ip.clone().unwrap_or_default(),
                    port: host_port,
                });
            }
        }
    }
    Ok(c)
}
