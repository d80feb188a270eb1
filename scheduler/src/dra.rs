//! Dynamic Resource Allocation (`resource.k8s.io`): the ResourceClaims pods use, the devices
//! ResourceSlices publish and the DeviceClasses that select them, as KAI's scheduler reads them
//! (`plugins/dynamicresources/`, `common/resources/dra.go`, `api/resource_info/
//! dra_resource_utils.go`; docs/scheduler.md, "DRA").
//!
//! KAI counts DRA GPUs in the GPU slot of its resource vectors: a node's GPUs include the
//! devices of its GPU slices, a pod's GPU request the devices its GPU claims ask. [`count_gpus`]
//! folds them into the snapshot the same way, so quotas, fair share, reclaim and node fit see
//! them as GPUs; which devices a claim gets is the cycle's (`cycle::dra`).

use std::collections::{BTreeMap, HashMap, HashSet};

use crate::cluster::{Pod, Snapshot};

/// KAI's test for a GPU device class, slice driver or allocation driver
/// (`resources.IsGPUDeviceClass`): its name holds `gpu`, in any case.
pub fn is_gpu(name: &str) -> bool {
    name.to_ascii_lowercase().contains("gpu")
}

/// Most pods a claim may be reserved for (`ResourceClaimReservedForMaxSize`).
pub const MAX_CONSUMERS: usize = 256;

/// Most devices one request may be given (`AllocationResultsMaxSize`).
pub const MAX_DEVICES_PER_REQUEST: i64 = 32;

/// A pod's DRA GPUs are capped here (KAI saturates at `MaxInt64`, `math.SaturatingAdd`): far
/// beyond any cluster, and small enough that a queue's sum of such requests cannot overflow.
pub const MAX_GPUS: i64 = 1 << 30;

/// The DRA objects of a snapshot.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Dra {
    /// DeviceClasses.
    pub classes: Vec<DeviceClass>,
    /// ResourceSlices.
    pub slices: Vec<ResourceSlice>,
    /// ResourceClaims.
    pub claims: Vec<ResourceClaim>,
}

impl Dra {
    /// Whether there is nothing here (most clusters): the cycle then keeps no DRA state.
    pub fn is_empty(&self) -> bool {
        self.classes.is_empty() && self.slices.is_empty() && self.claims.is_empty()
    }

    /// The claim named `name` in `namespace`.
    pub fn claim(&self, namespace: &str, name: &str) -> Option<&ResourceClaim> {
        self.claims
            .iter()
            .find(|c| c.namespace == namespace && c.name == name)
    }

    /// The claim named `name` in `namespace`, to change its status.
    pub fn claim_mut(&mut self, namespace: &str, name: &str) -> Option<&mut ResourceClaim> {
        self.claims
            .iter_mut()
            .find(|c| c.namespace == namespace && c.name == name)
    }

    /// The class named `name`.
    pub fn class(&self, name: &str) -> Option<&DeviceClass> {
        self.classes.iter().find(|c| c.name == name)
    }
}

/// A DeviceClass: the devices its selectors accept (all, without selectors).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeviceClass {
    /// Name.
    pub name: String,
    /// `spec.selectors[].cel.expression`, all of which a device must pass.
    pub selectors: Vec<String>,
}

/// A ResourceSlice: devices one driver publishes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResourceSlice {
    /// Name.
    pub name: String,
    /// `spec.nodeName`: the node whose devices these are. `None` for slices of `allNodes` or a
    /// `nodeSelector`, which KAI counts on no node (`cluster_info.go: populateDRAGPUs`).
    pub node: Option<String>,
    /// `spec.allNodes`: its devices are reachable from every node.
    pub all_nodes: bool,
    /// `spec.nodeSelector`'s terms (the API allows one): the nodes its devices are reachable
    /// from.
    pub node_selector: Vec<crate::cluster::NodeSelectorTerm>,
    /// `spec.driver`.
    pub driver: String,
    /// `spec.pool.name`.
    pub pool: String,
    /// `spec.pool.generation`: a driver republishing a pool raises it, and the slices of older
    /// generations are stale.
    pub generation: i64,
    /// `spec.pool.resourceSliceCount`: how many slices the pool's generation has in all.
    /// `None` when the object leaves it out (the API requires it): not checked then.
    pub slice_count: Option<i64>,
    /// `spec.devices`.
    pub devices: Vec<Device>,
}

/// One device of a slice.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Device {
    /// Name, unique in its pool.
    pub name: String,
    /// Attributes by qualified name (`gpu.nvidia.com/type`; a bare name is the driver's).
    pub attributes: BTreeMap<String, Attribute>,
    /// What keeps KAI's allocator from ever giving it, if anything: `consumesCounters` (a
    /// partitionable device) or `bindingConditions`, whose features KAI's allocator runs
    /// without (`dynamicresources.go` passes `structured.Features{}`).
    pub unsupported: Option<&'static str>,
}

/// A device attribute's value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Attribute {
    /// `string`.
    Str(String),
    /// `int`.
    Int(i64),
    /// `bool`.
    Bool(bool),
    /// `version` (semantic version text).
    Version(String),
}

/// A ResourceClaim.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResourceClaim {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// Labels (the queue label of a shared GPU claim).
    pub labels: BTreeMap<String, String>,
    /// Made for a pod's DRA-backed extended resources (annotation
    /// `resource.kubernetes.io/extended-resource-claim: "true"`): its GPUs are in the pod's
    /// container requests already.
    pub extended: bool,
    /// `spec.devices.requests`.
    pub requests: Vec<DeviceRequest>,
    /// `status.allocation`, when allocated.
    pub allocation: Option<Allocation>,
    /// `status.reservedFor`: names of the pods using it.
    pub reserved_for: Vec<String>,
    /// What it asks that kai-policy does not evaluate (`matchAttribute` constraints, admin
    /// access): no device is chosen for it, and its pods wait saying why.
    pub unsupported: Option<String>,
    /// Why its requests (or its allocation's node selector) cannot be read. It is kept for
    /// the devices its allocation holds; no device is chosen for it, and its pods wait.
    pub unreadable: Option<String>,
}

impl ResourceClaim {
    /// The GPUs it asks for, as KAI counts them (`countGPUDevicesFromClaim`): every `exactly`
    /// request of a GPU class, its count (1 when not above 0), or 1 for `All`; saturating.
    pub fn gpus(&self) -> i64 {
        if self.extended {
            return 0;
        }
        self.requests
            .iter()
            .filter(|r| is_gpu(&r.class))
            .map(|r| match r.mode {
                Mode::Exact(n) => n.max(1),
                Mode::All => 1,
                Mode::FirstAvailable => 0,
            })
            .fold(0i64, i64::saturating_add)
    }

    /// Whether some `exactly` request asks a GPU class (`IsGpuResourceClaim`).
    pub fn asks_gpu(&self) -> bool {
        self.requests
            .iter()
            .any(|r| r.mode != Mode::FirstAvailable && is_gpu(&r.class))
    }

    /// Whether some request asks all the devices its selectors accept (`allocationMode: All`).
    pub fn asks_all(&self) -> bool {
        self.requests.iter().any(|r| r.mode == Mode::All)
    }
}

/// One request of a claim.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeviceRequest {
    /// Name.
    pub name: String,
    /// `exactly.deviceClassName` (empty for `firstAvailable`).
    pub class: String,
    /// How many devices.
    pub mode: Mode,
    /// `exactly.selectors[].cel.expression`.
    pub selectors: Vec<String>,
}

/// How many devices a request asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// `allocationMode: ExactCount` with its `count`.
    Exact(i64),
    /// `allocationMode: All`: every matching device the node has.
    All,
    /// `firstAvailable` sub-requests, which KAI's allocator refuses (its prioritized-list
    /// feature is off).
    FirstAvailable,
}

impl Default for Mode {
    fn default() -> Self {
        Mode::Exact(1)
    }
}

/// `status.allocation`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Allocation {
    /// The node its `nodeSelector` names, when it names one (`metadata.name In [node]`).
    pub node: Option<String>,
    /// Otherwise the `nodeSelector`'s terms (a node matching any may use the claim), as an
    /// allocation of devices reachable from several nodes has them; none with no `node`:
    /// usable anywhere.
    pub selector: Vec<crate::cluster::NodeSelectorTerm>,
    /// `devices.results`.
    pub devices: Vec<AllocatedDevice>,
}

/// One device given to a claim.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct AllocatedDevice {
    /// The request it was given for.
    pub request: String,
    /// Driver.
    pub driver: String,
    /// Pool.
    pub pool: String,
    /// Device name.
    pub device: String,
}

/// A claim's status as a cycle leaves it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimStatus {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// `status.allocation` (`None`: no devices).
    pub allocation: Option<Allocation>,
    /// `status.reservedFor`: the pods using it, by name.
    pub reserved_for: Vec<String>,
}

/// One entry of a pod's `spec.resourceClaims`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct PodClaim {
    /// The entry's name in the pod.
    pub name: String,
    /// The ResourceClaim it names: `resourceClaimName`, or for a template the claim
    /// `status.resourceClaimStatuses` says was made from it (`None` until it is made).
    pub claim: Option<String>,
    /// Made from `resourceClaimTemplateName`: the pod's own claim, not a shared one.
    pub template: bool,
}

/// Folds DRA GPUs into the snapshot as KAI's vectors hold them: each node's GPUs gain the
/// devices of the GPU slices naming it (`populateDRAGPUs`), each pod's GPU request the GPUs its
/// claims ask (`ExtractDRAGPUResourcesFromClaims`). A device a claim shares between pods counts
/// once on its node: a pod after the first on a claim whose GPU devices are allocated adds none
/// for it (`dra_shared_device_info.go: dedupSharedDRAGpus`). Call once per snapshot, or use
/// [`recount_gpus`] after the claims changed.
pub fn count_gpus(snapshot: &mut Snapshot) {
    if snapshot.dra.is_empty() {
        return;
    }
    let mut node_gpus: HashMap<&str, i64> = HashMap::new();
    for s in &snapshot.dra.slices {
        if let Some(node) = s.node.as_deref().filter(|_| is_gpu(&s.driver)) {
            *node_gpus.entry(node).or_default() += s.devices.len() as i64;
        }
    }
    for n in &mut snapshot.nodes {
        let gpus = node_gpus.get(n.name.as_str()).copied().unwrap_or(0);
        n.dra_gpus = gpus as u32;
        n.allocatable.gpu = n.allocatable.gpu.saturating_add(gpus * 1000);
    }
    let claims: HashMap<(&str, &str), &ResourceClaim> = snapshot
        .dra
        .claims
        .iter()
        .map(|c| ((c.namespace.as_str(), c.name.as_str()), c))
        .collect();
    // Bound pods first, in snapshot order, then pending ones: GPU devices already counted.
    let mut counted: HashSet<&AllocatedDevice> = HashSet::new();
    let order: Vec<usize> = (0..snapshot.pods.len())
        .filter(|&p| snapshot.pods[p].node.is_some())
        .chain((0..snapshot.pods.len()).filter(|&p| snapshot.pods[p].node.is_none()))
        .collect();
    let mut extra = vec![0i64; snapshot.pods.len()];
    for p in order {
        let pod = &snapshot.pods[p];
        let mut gpus = 0i64;
        for pc in &pod.constraints.claims {
            let Some(claim) = pc
                .claim
                .as_deref()
                .and_then(|c| claims.get(&(pod.namespace.as_str(), c)))
            else {
                continue;
            };
            let mut n = claim.gpus();
            if let Some(a) = &claim.allocation
                && n > 0
            {
                for d in a.devices.iter().filter(|d| is_gpu(&d.driver)) {
                    if !counted.insert(d) {
                        n = (n - 1).max(0);
                    }
                }
            }
            gpus = gpus.saturating_add(n);
        }
        extra[p] = gpus.min(MAX_GPUS);
    }
    for (pod, gpus) in snapshot.pods.iter_mut().zip(extra) {
        pod.dra_gpus = gpus as u32;
        pod.request.gpu = pod.request.gpu.saturating_add(gpus * 1000);
    }
}

/// What the API server holds once `pod` is bound with the cycle's `changed` claims: each of
/// its claims reserved for it, and given the cycle's devices when it had none (KAI's binder,
/// `binder/plugins/k8s-plugins/dynamicresources: Bind`). Simulators call it.
pub fn bind(dra: &mut Dra, pod: &Pod, changed: &[ClaimStatus]) {
    for name in pod
        .constraints
        .claims
        .iter()
        .filter_map(|c| c.claim.as_deref())
    {
        let Some(claim) = dra.claim_mut(&pod.namespace, name) else {
            continue;
        };
        if claim.allocation.is_none() {
            claim.allocation = changed
                .iter()
                .find(|s| s.namespace == claim.namespace && s.name == claim.name)
                .and_then(|s| s.allocation.clone());
        }
        if !claim.reserved_for.contains(&pod.name) {
            claim.reserved_for.push(pod.name.clone());
        }
    }
}

/// What the API server holds once `pod` is gone: its claims no longer reserved for it, and a
/// claim no pod reserves deallocated (Kubernetes' resource claim controller). Simulators call
/// it.
pub fn release(dra: &mut Dra, pod: &Pod) {
    for name in pod
        .constraints
        .claims
        .iter()
        .filter_map(|c| c.claim.as_deref())
    {
        if let Some(claim) = dra.claim_mut(&pod.namespace, name) {
            claim.reserved_for.retain(|p| *p != pod.name);
            if claim.reserved_for.is_empty() {
                claim.allocation = None;
            }
        }
    }
}

/// Folds DRA GPUs again into a snapshot [`count_gpus`] folded before, after its claims
/// changed (a simulator's binds, a backend's writes not yet in its caches): the counts a
/// claim now allocated and shared gives are KAI's as of now.
pub fn recount_gpus(snapshot: &mut Snapshot) {
    for n in &mut snapshot.nodes {
        n.allocatable.gpu -= i64::from(n.dra_gpus) * 1000;
        n.dra_gpus = 0;
    }
    for p in &mut snapshot.pods {
        p.request.gpu -= i64::from(p.dra_gpus) * 1000;
        p.dra_gpus = 0;
    }
    count_gpus(snapshot);
}

/// A device as selectors see it.
pub struct Candidate<'d> {
    /// Its slice's driver.
    pub driver: &'d str,
    /// The device.
    pub device: &'d Device,
}

/// Whether `device` passes a CEL selector; `Err` with why for an expression beyond the part of
/// CEL read here: `&&` of comparisons (`==`, `!=`) between `device.driver` or
/// `device.attributes["domain"].name` and a string, integer or boolean literal, or such an
/// attribute alone (a boolean).
pub fn selects(expression: &str, device: &Candidate<'_>) -> Result<bool, String> {
    let mut all = true;
    for part in split_and(expression)? {
        all &= term(part.trim(), device)?;
    }
    Ok(all)
}

fn split_and(expression: &str) -> Result<Vec<&str>, String> {
    let mut parts = Vec::new();
    let (mut start, mut quote, mut depth) = (0, None, 0i32);
    let bytes = expression.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) if c == b'\\' => i += 1,
            Some(_) => {}
            None => match c {
                b'"' | b'\'' => quote = Some(c),
                b'(' | b'[' => depth += 1,
                b')' | b']' => depth -= 1,
                b'|' if bytes.get(i + 1) == Some(&b'|') => {
                    return Err(format!("`||` in `{expression}`"));
                }
                b'&' if depth == 0 && bytes.get(i + 1) == Some(&b'&') => {
                    parts.push(&expression[start..i]);
                    start = i + 2;
                    i += 1;
                }
                _ => {}
            },
        }
        i += 1;
    }
    parts.push(&expression[start..]);
    Ok(parts)
}

fn term(text: &str, device: &Candidate<'_>) -> Result<bool, String> {
    let text = text
        .strip_prefix('(')
        .and_then(|t| t.strip_suffix(')'))
        .unwrap_or(text)
        .trim();
    let (left, op, right) = match (text.find("=="), text.find("!=")) {
        (Some(i), _) => (&text[..i], "==", &text[i + 2..]),
        (None, Some(i)) => (&text[..i], "!=", &text[i + 2..]),
        (None, None) => (text, "==", "true"),
    };
    let value = field(left.trim(), device)?;
    let literal = literal(right.trim())?;
    let equal = match (&value, &literal) {
        (Some(Attribute::Version(a)), Attribute::Str(b)) => a == b,
        (Some(a), b) => a == b,
        (None, _) => false,
    };
    Ok(if op == "==" {
        equal
    } else {
        !equal && value.is_some()
    })
}

fn field(text: &str, device: &Candidate<'_>) -> Result<Option<Attribute>, String> {
    if text == "device.driver" {
        return Ok(Some(Attribute::Str(device.driver.to_string())));
    }
    let rest = text
        .strip_prefix("device.attributes[")
        .ok_or_else(|| format!("`{text}`"))?;
    let close = rest.find(']').ok_or_else(|| format!("`{text}`"))?;
    let Attribute::Str(domain) = literal(rest[..close].trim())? else {
        return Err(format!("`{text}`"));
    };
    let name = rest[close + 1..]
        .strip_prefix('.')
        .filter(|n| n.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
        .ok_or_else(|| format!("`{text}`"))?;
    let qualified = format!("{domain}/{name}");
    Ok(device
        .device
        .attributes
        .get(&qualified)
        .or_else(|| {
            (domain == device.driver)
                .then(|| device.device.attributes.get(name))
                .flatten()
        })
        .cloned())
}

fn literal(text: &str) -> Result<Attribute, String> {
    let quoted = |q: char| {
        text.strip_prefix(q)
            .and_then(|t| t.strip_suffix(q))
            .filter(|t| !t.contains(q))
    };
    if let Some(s) = quoted('"').or_else(|| quoted('\'')) {
        return Ok(Attribute::Str(s.to_string()));
    }
    match text {
        "true" => Ok(Attribute::Bool(true)),
        "false" => Ok(Attribute::Bool(false)),
        _ => text
            .parse()
            .map(Attribute::Int)
            .map_err(|_| format!("`{text}`")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gpu(kind: &str) -> Device {
        Device {
            name: "gpu-0".into(),
            attributes: BTreeMap::from([
                ("type".into(), Attribute::Str(kind.into())),
                ("gpu.nvidia.com/index".into(), Attribute::Int(0)),
            ]),
            unsupported: None,
        }
    }

    #[test]
    fn nvidia_device_class_selectors_tell_gpus_from_mig_devices() {
        // The selectors of the NVIDIA DRA driver's DeviceClasses gpu.nvidia.com and
        // mig.nvidia.com (k8s-dra-driver-gpu, deployments/helm: deviceclass-*.yaml).
        let gpu_class = "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'";
        let mig_class = "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'mig'";
        let (g, m) = (gpu("gpu"), gpu("mig"));
        let on = |d| Candidate {
            driver: "gpu.nvidia.com",
            device: d,
        };
        assert_eq!(selects(gpu_class, &on(&g)), Ok(true));
        assert_eq!(selects(gpu_class, &on(&m)), Ok(false));
        assert_eq!(selects(mig_class, &on(&m)), Ok(true));
        let other = Candidate {
            driver: "compute-domain.nvidia.com",
            device: &g,
        };
        assert_eq!(selects(gpu_class, &other), Ok(false));
        assert_eq!(
            selects("device.attributes[\"gpu.nvidia.com\"].index != 1", &on(&g)),
            Ok(true)
        );
    }

    #[test]
    fn selectors_beyond_the_subset_say_what_they_could_not_read() {
        let d = gpu("gpu");
        let on = Candidate {
            driver: "gpu.nvidia.com",
            device: &d,
        };
        let e = selects(
            "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('40Gi')) >= 0",
            &on,
        )
        .unwrap_err();
        assert!(e.contains("device.capacity"), "{e}");
        assert!(selects("device.driver == 'a' || device.driver == 'b'", &on).is_err());
    }

    #[test]
    fn a_claims_gpus_are_its_gpu_class_requests() {
        let request = |class: &str, mode| DeviceRequest {
            name: "r".into(),
            class: class.into(),
            mode,
            selectors: Vec::new(),
        };
        let claim = ResourceClaim {
            requests: vec![
                request("gpu.nvidia.com", Mode::Exact(2)),
                request("gpu.nvidia.com", Mode::All),
                request("mig.nvidia.com", Mode::Exact(3)),
                request("gpu.nvidia.com", Mode::FirstAvailable),
            ],
            ..ResourceClaim::default()
        };
        assert_eq!(claim.gpus(), 3);
        let huge = ResourceClaim {
            requests: vec![
                request("nvidia.com/gpu", Mode::Exact(i64::MAX)),
                request("nvidia.com/gpu", Mode::Exact(i64::MAX)),
            ],
            ..ResourceClaim::default()
        };
        assert_eq!(huge.gpus(), i64::MAX, "saturates, never wraps");
    }
}
