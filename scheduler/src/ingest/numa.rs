//! NodeResourceTopology objects and what a pod asks of NUMA zones (KAI's
//! `node_info/numa_topology.go: BuildNumaTopology` and `plugins/numa/requests.go`).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, PodSpec, PodStatus};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use serde_json::Value;

use crate::numa::{self, PodNuma, Res, Topology, Zone};

/// The API version and kind of the objects read here.
pub const NRT_API_VERSION: &str = "topology.node.k8s.io/v1alpha2";
/// The NRT kind.
pub const NRT_KIND: &str = "NodeResourceTopology";

/// A NodeResourceTopology as the zones its node has, `Ok(None)` when it reports no zone of
/// type `Node` (KAI then sees no topology), or why it cannot be read.
pub fn read_topology(value: &Value) -> Result<Option<Topology>, String> {
    let attribute = |key: &str| {
        value["attributes"].as_array().and_then(|attrs| {
            attrs
                .iter()
                .rfind(|a| a["name"].as_str() == Some(key))
                .and_then(|a| a["value"].as_str())
        })
    };
    let legacy = value["topologyPolicies"]
        .as_array()
        .and_then(|p| p.first())
        .and_then(Value::as_str);
    let (policy, scope) = numa::policy_and_scope(
        attribute("topologyManagerPolicy"),
        attribute("topologyManagerScope"),
        legacy,
    );
    let mut zones = Vec::new();
    let mut names = BTreeMap::new();
    for (i, z) in value["zones"].as_array().into_iter().flatten().enumerate() {
        if z["type"].as_str() != Some("Node") {
            continue;
        }
        let name = z["name"]
            .as_str()
            .ok_or_else(|| format!("zones[{i}] has no name"))?
            .to_string();
        let mut zone = Zone {
            name,
            ..Zone::default()
        };
        for (j, r) in z["resources"].as_array().into_iter().flatten().enumerate() {
            let Some(resource) = r["name"].as_str() else {
                return Err(format!("zones[{i}].resources[{j}] has no name"));
            };
            let key = numa::normalize(resource);
            for (field, into) in [
                ("allocatable", &mut zone.allocatable),
                ("available", &mut zone.available),
            ] {
                let text = match &r[field] {
                    Value::String(s) => s.clone(),
                    Value::Number(n) => n.to_string(),
                    Value::Null => continue,
                    other => return Err(format!("zones[{i}].resources[{j}].{field}: {other}")),
                };
                let amount = numa::quantity(resource, &text).ok_or_else(|| {
                    format!("zones[{i}].resources[{j}].{field}: `{text}` is not a quantity")
                })?;
                into.insert(key.clone(), amount);
            }
            names.insert(key, resource.to_string());
        }
        zones.push(zone);
    }
    if zones.is_empty() {
        return Ok(None);
    }
    numa::sort_zones(&mut zones);
    Ok(Some(Topology {
        policy,
        scope,
        zones,
        names,
    }))
}

/// What a pod asks of NUMA zones, or `None` when nothing of it is ever aligned: a pod that is
/// not Guaranteed and asks only CPU and memory (KAI aligns CPU, memory and hugepages only for
/// Guaranteed pods). QoS is `status.qosClass` (what KAI reads), or, for a pod written without
/// a status, worked out from its containers as the API server would.
pub fn pod_numa(spec: &PodSpec, status: Option<&PodStatus>) -> Option<PodNuma> {
    let guaranteed = match status.and_then(|s| s.qos_class.as_deref()) {
        Some(class) => class == "Guaranteed",
        None => guaranteed(spec),
    };
    let request = |c: &Container| -> Res {
        let mut out = Res::new();
        for (name, q) in asked(c) {
            let Some(mut amount) = numa::quantity(name, &q.0) else {
                continue;
            };
            // The static CPU manager pins only whole CPUs of Guaranteed pods; the rest run in
            // the shared pool (`guaranteedCPUMilli`).
            if name == "cpu" && (!guaranteed || amount % 1000 != 0) {
                amount = 0;
            }
            *out.entry(numa::normalize(name)).or_default() += amount;
        }
        out
    };
    let asks_device = spec
        .containers
        .iter()
        .chain(spec.init_containers.iter().flatten())
        .flat_map(asked)
        .any(|(name, q)| !numa::qos_gated(name) && numa::quantity(name, &q.0).unwrap_or(0) > 0);
    if !guaranteed && !asks_device {
        return None;
    }
    let mut sidecars = Vec::new();
    let mut serial = Vec::new();
    // The pod's request as the kubelet sums it: the init peak beside the sidecars started
    // before it, or the running containers and every sidecar.
    let mut init_peak = Res::new();
    let mut sidecar_sum = Res::new();
    for c in spec.init_containers.iter().flatten() {
        let r = request(c);
        if c.restart_policy.as_deref() == Some("Always") {
            add(&mut sidecar_sum, &r);
            sidecars.push(r);
        } else {
            let mut alone = r.clone();
            add(&mut alone, &sidecar_sum);
            max(&mut init_peak, &alone);
            serial.push(r);
        }
    }
    let apps: Vec<Res> = spec.containers.iter().map(request).collect();
    let mut pod = sidecar_sum;
    for r in &apps {
        add(&mut pod, r);
    }
    max(&mut pod, &init_peak);
    // Pod-level requests, where set, replace the containers' memory and hugepages
    // (`resourcehelper.PodRequests`, component-helpers v0.35.4 as KAI vendors it; its CPU
    // gives way to the pinned CPUs counted above).
    for (name, q) in spec
        .resources
        .as_ref()
        .and_then(|r| r.requests.as_ref())
        .into_iter()
        .flatten()
        .filter(|(n, _)| *n == "memory" || n.starts_with("hugepages-"))
    {
        if let Some(amount) = numa::quantity(name, &q.0) {
            pod.insert(numa::normalize(name), amount);
        }
    }
    // The runtime's overhead adds to everything but the CPUs the static CPU manager pins
    // (KAI replaces the CPU of `PodRequests` with `podGuaranteedCPUMilli`, which has none).
    for (name, q) in spec.overhead.iter().flatten().filter(|(n, _)| *n != "cpu") {
        if let Some(amount) = numa::quantity(name, &q.0) {
            *pod.entry(numa::normalize(name)).or_default() += amount;
        }
    }
    Some(PodNuma::new(
        guaranteed,
        pod,
        sidecars.into_iter().chain(apps).collect(),
        serial,
    ))
}

/// A recorded placement from a pod's annotations: the exporter's observed one, else the
/// binder's predicted one (KAI's `resolvePlacementRecord`; a malformed one counts as none).
pub fn record(annotation: &dyn Fn(&str) -> Option<String>) -> Option<Vec<numa::ZoneAmount>> {
    [numa::OBSERVED_ANNOTATION, numa::PREDICTED_ANNOTATION]
        .iter()
        .find_map(|key| numa::parse_record(&annotation(key)?))
}

/// Kubernetes' Guaranteed QoS class: every container sets CPU and memory limits, and its
/// requests, where set, equal them.
fn guaranteed(spec: &PodSpec) -> bool {
    spec.containers
        .iter()
        .chain(spec.init_containers.iter().flatten())
        .all(|c| {
            let Some(r) = c.resources.as_ref() else {
                return false;
            };
            ["cpu", "memory"].iter().all(|key| {
                let limit = r.limits.as_ref().and_then(|l| l.get(*key));
                let request = r.requests.as_ref().and_then(|l| l.get(*key));
                match (limit, request) {
                    (Some(l), Some(q)) => {
                        numa::quantity(key, &l.0).is_some()
                            && numa::quantity(key, &l.0) == numa::quantity(key, &q.0)
                    }
                    (Some(_), None) => true,
                    _ => false,
                }
            })
        })
}

/// What a container asks: its requests, and its limits where it sets no request (the API
/// server's defaulting, which the rest of ingest follows too).
fn asked(c: &Container) -> Vec<(&String, &Quantity)> {
    let Some(r) = c.resources.as_ref() else {
        return Vec::new();
    };
    let requests = r.requests.as_ref();
    let mut out: Vec<(&String, &Quantity)> = requests.into_iter().flatten().collect();
    for (name, q) in r.limits.iter().flatten() {
        if requests.is_none_or(|req| !req.contains_key(name)) {
            out.push((name, q));
        }
    }
    out
}

fn add(into: &mut Res, r: &Res) {
    for (k, v) in r {
        *into.entry(k.clone()).or_default() += v;
    }
}

fn max(into: &mut Res, r: &Res) {
    for (k, v) in r {
        let e = into.entry(k.clone()).or_default();
        *e = (*e).max(*v);
    }
}
