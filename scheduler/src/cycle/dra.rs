//! Which devices a pod's DRA claims get, as KAI's `dynamicresources` plugin decides it with the
//! upstream structured allocator (`plugins/dynamicresources/dynamicresources.go`: `preFilter`,
//! `filter`, `allocateHandlerFn`, `deallocateHandlerFn`; docs/scheduler.md, "DRA"):
//!
//! - before any node, a claim must exist, have fewer than 256 consumers, and, when the pod names
//!   it (a shared claim) and it asks a GPU class, carry the job's queue in the queue label;
//! - an allocated claim holds its devices and may be used only on the node its allocation names;
//! - an unallocated one needs free devices its class and selectors accept on the node;
//! - placing a pod reserves its claims and allocates those without devices; taking it off
//!   unreserves them, and a claim no pod reserves gives its devices back.
//!
//! The GPUs these devices are counted as are in the pods' and nodes' amounts already
//! ([`crate::dra::count_gpus`]).

use std::collections::{BTreeSet, HashMap};

use super::state::DraShortage;
use crate::cluster::{NodeSelectorTerm, Pod, Snapshot};
use crate::dra::{Candidate, MAX_CONSUMERS, MAX_DEVICES_PER_REQUEST, Mode, ResourceClaim, selects};

/// A device, on one node or reachable from several.
#[derive(Debug, Clone)]
struct Dev<'s> {
    /// Its node; `None` for a device of a slice for all nodes or a node selector.
    node: Option<usize>,
    /// Its slice (in the snapshot), whose node selector ties a claim given it.
    slice: usize,
    /// The feature KAI's allocator runs without that it needs, if any
    /// ([`crate::dra::Device::unsupported`]).
    unsupported: Option<&'static str>,
    driver: &'s str,
    pool: &'s str,
    name: &'s str,
    /// How many claims hold it: more than one only while a cycle undoes a step (a victim put
    /// back on the devices its preemptor took), which `ClusterState::overdrawn` sees.
    holders: u32,
    /// Allocated to a claim in the snapshot: given to another claim only when no other device
    /// will do, so that a victim put back finds its devices.
    owned: bool,
}

/// A claim's devices (each with the request it was given for), and where they let its pods
/// run.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Held<'s> {
    tie: Tie,
    devices: Vec<(usize, &'s str)>,
}

/// Where a claim's devices let its pods run: its allocation's `nodeSelector`.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Tie {
    /// Anywhere (no selector).
    Anywhere,
    /// One node (`metadata.name In [node]`).
    Node(usize),
    /// The nodes matching any of `terms` (`reach`, by node).
    Nodes {
        terms: Vec<NodeSelectorTerm>,
        reach: Vec<bool>,
    },
}

impl Tie {
    /// The nodes matching any of `terms`, of `nodes`.
    fn nodes(terms: Vec<NodeSelectorTerm>, nodes: &[crate::cluster::Node]) -> Tie {
        let reach = matching(&terms, nodes);
        Tie::Nodes { terms, reach }
    }

    fn allows(&self, node: usize) -> bool {
        match self {
            Tie::Anywhere => true,
            Tie::Node(n) => *n == node,
            Tie::Nodes { reach, .. } => reach[node],
        }
    }
}

#[derive(Debug, Clone)]
struct Claim<'s> {
    claim: &'s ResourceClaim,
    /// Per request, the devices it accepts (sorted); or why no device can be given. Worked
    /// out only for claims without devices that pending pods use: the others never choose.
    accepts: Result<Vec<Vec<usize>>, String>,
    /// The devices its snapshot allocation names: it gets those again, and no others, when it
    /// is freed and taken again in the cycle (the API server keeps that allocation).
    pinned: Option<Held<'s>>,
    /// The pods its snapshot `reservedFor` names and those bound to it: a pending one of them
    /// keeps its reservation when a tentative placement of it is undone (the claim is really
    /// reserved for it, as after a bind whose claim was written and whose binding failed).
    initial: BTreeSet<String>,
    /// Why no pod may use it: allocated on a node the cluster does not have.
    away: Option<String>,
    held: Option<Held<'s>>,
    /// The devices it last held, given again first (KAI restores a claim's allocation when an
    /// eviction is undone).
    last: Option<Held<'s>>,
    /// The pods reserving it.
    reserved: BTreeSet<String>,
}

/// The claims and devices of one cycle.
#[derive(Debug, Clone)]
pub(super) struct DraState<'s> {
    snapshot: &'s Snapshot,
    devices: Vec<Dev<'s>>,
    /// The devices reachable from each node.
    on_node: Vec<Vec<usize>>,
    /// Those whose pool is complete and valid on the node ([`gather`]): the ones a claim may
    /// be given there, but for those needing a feature KAI's allocator runs without.
    offer: Vec<Vec<usize>>,
    /// Per node, why a request for all devices cannot be met there: a pool being updated or
    /// invalid ([`gather`]).
    unsettled: Vec<Option<String>>,
    claims: Vec<Claim<'s>>,
    by_name: HashMap<(&'s str, &'s str), usize>,
    /// Pods that may not be placed whatever the node, and why (the queue-label rule, which
    /// needs the job's queue: [`DraState::block`]).
    blocked: HashMap<(String, String), String>,
}

impl<'s> DraState<'s> {
    /// The DRA state of a snapshot; `None` when no pod uses a claim.
    pub fn new(snapshot: &'s Snapshot) -> Option<Self> {
        if !snapshot
            .pods
            .iter()
            .any(|p| !p.constraints.claims.is_empty())
        {
            return None;
        }
        let nodes = snapshot.node_index();
        let mut devices = Vec::new();
        let mut on_node = vec![Vec::new(); snapshot.nodes.len()];
        let mut offer = vec![Vec::new(); snapshot.nodes.len()];
        let mut by_key = HashMap::new();
        let mut device_of = Vec::new();
        let pools = gather(&snapshot.dra.slices, &nodes, &snapshot.nodes);
        // A device listed by a current slice and by an obsolete one elsewhere takes its
        // attributes (what selectors read) and its slice from the current one.
        let (current, stale): (Vec<_>, Vec<_>) = pools.slices.iter().partition(|e| e.2);
        let mut seen = std::collections::HashSet::new();
        for &(i, node, usable) in current.into_iter().chain(stale) {
            let s = &snapshot.dra.slices[i];
            for d in &s.devices {
                // A name twice in a pool (an invalid pool) is one device: none is given anyway.
                let key = (s.driver.as_str(), s.pool.as_str(), d.name.as_str());
                let at = *by_key.entry(key).or_insert_with(|| {
                    device_of.push(d);
                    devices.push(Dev {
                        node: s.node.is_some().then_some(node),
                        slice: i,
                        unsupported: d.unsupported,
                        driver: &s.driver,
                        pool: &s.pool,
                        name: &d.name,
                        holders: 0,
                        owned: false,
                    });
                    devices.len() - 1
                });
                // Each device once per node (one may be listed by several of its slices).
                if seen.insert((node, at)) {
                    on_node[node].push(at);
                    if usable {
                        offer[node].push(at);
                    }
                }
            }
        }
        // Claims pending pods use: only those may need devices chosen.
        let wanted: std::collections::HashSet<(&str, &str)> = snapshot
            .pods
            .iter()
            .filter(|p| p.node.is_none())
            .flat_map(|p| {
                p.constraints
                    .claims
                    .iter()
                    .filter_map(|c| Some((p.namespace.as_str(), c.claim.as_deref()?)))
            })
            .collect();
        let mut claims = Vec::new();
        let mut by_name = HashMap::new();
        for claim in &snapshot.dra.claims {
            let index = claims.len();
            let key = (claim.namespace.as_str(), claim.name.as_str());
            let accepts = if claim.allocation.is_none() && wanted.contains(&key) {
                accepted(snapshot, claim, &devices, &device_of)
            } else {
                Ok(Vec::new())
            };
            let away = claim
                .allocation
                .as_ref()
                .and_then(|a| a.node.as_deref())
                .filter(|n| !nodes.contains_key(n))
                .map(|n| {
                    format!(
                        "ResourceClaim {}/{} is allocated on node {n}, which the cluster does not have",
                        claim.namespace, claim.name
                    )
                });
            let held = claim.allocation.as_ref().map(|a| Held {
                tie: match (a.node.as_deref().and_then(|n| nodes.get(n)), &a.selector) {
                    (Some(&n), _) => Tie::Node(n),
                    (None, terms) if !terms.is_empty() => {
                        Tie::nodes(terms.clone(), &snapshot.nodes)
                    }
                    // A node the cluster does not have: `away` keeps its pods off every node.
                    _ => Tie::Anywhere,
                },
                devices: a
                    .devices
                    .iter()
                    .filter_map(|d| {
                        let at =
                            by_key.get(&(d.driver.as_str(), d.pool.as_str(), d.device.as_str()));
                        Some((*at?, d.request.as_str()))
                    })
                    .collect(),
            });
            for &(d, _) in held.iter().flat_map(|h| &h.devices) {
                devices[d].holders += 1;
                devices[d].owned = true;
            }
            by_name.insert(key, index);
            let reserved: BTreeSet<String> = claim.reserved_for.iter().cloned().collect();
            claims.push(Claim {
                claim,
                accepts,
                pinned: held.clone(),
                initial: reserved.clone(),
                away,
                held,
                last: None,
                reserved,
            });
        }
        // A bound pod uses its claims, whether or not their reservedFor says so.
        for pod in snapshot.pods.iter().filter(|p| p.node.is_some()) {
            for name in pod
                .constraints
                .claims
                .iter()
                .filter_map(|c| c.claim.as_deref())
            {
                if let Some(&c) = by_name.get(&(pod.namespace.as_str(), name)) {
                    let claim: &mut Claim = &mut claims[c];
                    claim.reserved.insert(pod.name.clone());
                    claim.initial.insert(pod.name.clone());
                }
            }
        }
        Some(DraState {
            snapshot,
            devices,
            on_node,
            offer,
            unsettled: pools.unsettled,
            claims,
            by_name,
            blocked: HashMap::new(),
        })
    }

    /// Keeps `pod` off every node for `why`.
    pub fn block(&mut self, pod: &Pod, why: String) {
        self.blocked
            .insert((pod.namespace.clone(), pod.name.clone()), why);
    }

    /// Whether a claim of the pod was allocated before the cycle: its devices stay held
    /// whether or not the pod is placed.
    pub fn allocated_before(&self, pod: &Pod) -> bool {
        self.claims_of(pod)
            .filter_map(Result::ok)
            .any(|c| self.claims[c].pinned.is_some())
    }

    fn claims_of<'a>(&'a self, pod: &'a Pod) -> impl Iterator<Item = Result<usize, String>> + 'a {
        pod.constraints.claims.iter().map(move |pc| {
            let Some(name) = pc.claim.as_deref() else {
                return Err(format!(
                    "the claim of its resourceClaims entry {} is not made yet (its \
                     ResourceClaimTemplate's claim is not in the pod's status)",
                    pc.name
                ));
            };
            self.by_name
                .get(&(pod.namespace.as_str(), name))
                .copied()
                .ok_or_else(|| {
                    format!(
                        "ResourceClaim {}/{name} does not exist (create it, or fix the pod's \
                         resourceClaims)",
                        pod.namespace
                    )
                })
        })
    }

    /// Why no node can take `pod` whatever is free: a claim missing, or one whose requests no
    /// device can meet, or the queue-label rule.
    pub fn misfit(&self, pod: &Pod) -> Option<String> {
        if pod.constraints.claims.is_empty() {
            return None;
        }
        if !self.blocked.is_empty()
            && let Some(why) = self.blocked.get(&(pod.namespace.clone(), pod.name.clone()))
        {
            return Some(why.clone());
        }
        for c in self.claims_of(pod) {
            let c = match c {
                Ok(c) => c,
                Err(why) => return Some(why),
            };
            let claim = &self.claims[c];
            if let Some(why) = &claim.away {
                return Some(why.clone());
            }
            if claim.held.is_none()
                && claim.pinned.is_none()
                && let Err(why) = &claim.accepts
            {
                return Some(why.clone());
            }
        }
        None
    }

    /// Why `pod`'s claims cannot be met on `node` as things stand: a claim with its most
    /// consumers, one tied to another node, or not enough free devices for the unallocated
    /// ones. `None`: they can.
    pub fn shortage(&self, node: usize, pod: &Pod) -> Option<DraShortage> {
        if pod.constraints.claims.is_empty() {
            return None;
        }
        let mut taken: Vec<usize> = Vec::new();
        for c in self.claims_of(pod) {
            let Ok(c) = c else { continue };
            let claim = &self.claims[c];
            let name = || format!("{}/{}", claim.claim.namespace, claim.claim.name);
            if claim.reserved.len() >= MAX_CONSUMERS && !claim.reserved.contains(&pod.name) {
                return Some(DraShortage::Consumers(name()));
            }
            match &claim.held {
                Some(held) => match &held.tie {
                    Tie::Node(n) if *n != node => {
                        return Some(DraShortage::OtherNode(
                            name(),
                            self.snapshot.nodes[*n].name.clone(),
                        ));
                    }
                    Tie::Nodes { reach, .. } if !reach[node] => {
                        return Some(DraShortage::Unreachable(name()));
                    }
                    _ => {}
                },
                None => match self.choose(c, node, &taken) {
                    Some(devices) => taken.extend(devices.into_iter().map(|(d, _)| d)),
                    None => {
                        return Some(match &self.unsettled[node] {
                            Some(why) if claim.claim.asks_all() && claim.pinned.is_none() => {
                                DraShortage::Pool(name(), why.clone())
                            }
                            _ => DraShortage::Devices(name()),
                        });
                    }
                },
            }
        }
        None
    }

    /// The free devices on `node` an unallocated claim would get, besides `taken`: for each
    /// request its count of accepted devices in the node's order, or every one for `All`; the
    /// devices it last held first.
    fn choose(&self, c: usize, node: usize, taken: &[usize]) -> Option<Vec<(usize, &'s str)>> {
        let claim = &self.claims[c];
        let free = |d: usize| {
            self.devices[d].holders == 0
                && self.devices[d].unsupported.is_none()
                && !taken.contains(&d)
        };
        if let Some(pinned) = &claim.pinned {
            // The API server keeps the snapshot's allocation: those devices or none.
            let here = pinned.tie.allows(node) && pinned.devices.iter().all(|&(d, _)| free(d));
            return here.then(|| pinned.devices.clone());
        }
        if claim.away.is_some() {
            return None;
        }
        let Ok(accepts) = &claim.accepts else {
            return None;
        };
        // What "all" is depends on the node: a claim asking all devices chooses afresh.
        if let Some(last) = claim.last.as_ref().filter(|l| {
            !claim.claim.asks_all()
                && l.devices
                    .iter()
                    .all(|&(d, _)| self.offer[node].contains(&d) && free(d))
                && !l.devices.is_empty()
        }) {
            return Some(last.devices.clone());
        }
        let mut chosen: Vec<(usize, &'s str)> = Vec::new();
        let used = |chosen: &[(usize, &str)], d: usize| chosen.iter().any(|&(c, _)| c == d);
        for (request, accepted) in claim.claim.requests.iter().zip(accepts) {
            let mut here: Vec<usize> = self.offer[node]
                .iter()
                .copied()
                .filter(|d| accepted.binary_search(d).is_ok())
                .collect();
            here.sort_by_key(|&d| self.devices[d].owned);
            match request.mode {
                Mode::All => {
                    // The allocator refuses "all" while a pool of the node is being updated
                    // or invalid: it cannot tell what all is. A device with binding
                    // conditions is no candidate (`isSelectable`); a partitionable one is, and
                    // then cannot be allocated (`allocateDevice`), so all cannot be had.
                    here.retain(|&d| self.devices[d].unsupported != Some("bindingConditions"));
                    if self.unsettled[node].is_some()
                        || here.is_empty()
                        || !here.iter().all(|&d| free(d) && !used(&chosen, d))
                    {
                        return None;
                    }
                    chosen.extend(here.into_iter().map(|d| (d, request.name.as_str())));
                }
                Mode::Exact(n) => {
                    let n = n.max(1) as usize;
                    let pick: Vec<usize> = here
                        .into_iter()
                        .filter(|&d| free(d) && !used(&chosen, d))
                        .take(n)
                        .collect();
                    if pick.len() < n {
                        return None;
                    }
                    chosen.extend(pick.into_iter().map(|d| (d, request.name.as_str())));
                }
                Mode::FirstAvailable => return None,
            }
        }
        // The API server takes at most 32 devices in one allocation.
        (chosen.len() <= MAX_DEVICES_PER_REQUEST as usize).then_some(chosen)
    }

    /// Reserves `pod`'s claims, placed on `node`, allocating those without devices.
    pub fn take(&mut self, node: usize, pod: &Pod) {
        if pod.constraints.claims.is_empty() {
            return;
        }
        let claims: Vec<usize> = self.claims_of(pod).filter_map(Result::ok).collect();
        for c in claims {
            self.claims[c].reserved.insert(pod.name.clone());
            if self.claims[c].held.is_some() {
                continue;
            }
            let held = match &self.claims[c].pinned {
                // Put back where its preemptor took its devices: it holds them again, as the
                // API server's allocation says (its node selector too), and the node is
                // overdrawn until the preemptor gives them up.
                Some(pinned) => pinned.clone(),
                None => match self.choose(c, node, &[]) {
                    Some(devices) => Held {
                        tie: self.tie(node, &devices),
                        devices,
                    },
                    None => continue,
                },
            };
            for &(d, _) in &held.devices {
                self.devices[d].holders += 1;
            }
            self.claims[c].held = Some(held);
        }
    }

    /// Unreserves `pod`'s claims; a claim no pod reserves gives its devices back.
    pub fn release(&mut self, pod: &Pod) {
        if pod.constraints.claims.is_empty() {
            return;
        }
        let claims: Vec<usize> = self.claims_of(pod).filter_map(Result::ok).collect();
        for c in claims {
            let claim = &mut self.claims[c];
            // A pending pod the claim is reserved for outside this cycle stays reserved.
            if pod.node.is_none() && claim.initial.contains(&pod.name) {
                continue;
            }
            claim.reserved.remove(&pod.name);
            if !claim.reserved.is_empty() {
                continue;
            }
            if let Some(held) = claim.held.take() {
                for &(d, _) in &held.devices {
                    self.devices[d].holders -= 1;
                }
                self.claims[c].last = Some(held);
            }
        }
    }

    /// Where `devices`, given on `node`, let a claim's pods run, as the upstream allocator
    /// writes it (`allocator_stable.go: createNodeSelector`): a device of a node's own slice
    /// ties the claim to that node; otherwise the requirements of the node selectors of the
    /// devices' slices all hold (merged into one term); a claim of devices for all nodes
    /// only, or of none, runs anywhere.
    fn tie(&self, node: usize, devices: &[(usize, &str)]) -> Tie {
        if devices.iter().any(|&(d, _)| self.devices[d].node.is_some()) {
            return Tie::Node(node);
        }
        let mut merged = NodeSelectorTerm::default();
        for &(d, _) in devices {
            let slice = &self.snapshot.dra.slices[self.devices[d].slice];
            for term in slice.node_selector.iter().take(1) {
                for r in &term.expressions {
                    if !merged.expressions.contains(r) {
                        merged.expressions.push(r.clone());
                    }
                }
                for r in &term.fields {
                    if !merged.fields.contains(r) {
                        merged.fields.push(r.clone());
                    }
                }
            }
        }
        if merged.expressions.is_empty() && merged.fields.is_empty() {
            return Tie::Anywhere;
        }
        Tie::nodes(vec![merged], &self.snapshot.nodes)
    }

    /// Whether some device on `node` is held by two claims at once (a victim put back on the
    /// devices its preemptor took).
    pub fn overdrawn(&self, node: usize) -> bool {
        self.on_node[node]
            .iter()
            .any(|&d| self.devices[d].holders > 1)
    }

    /// The status of every claim the cycle changed (allocated, freed, or reserved for other
    /// pods), in the snapshot's order: what a backend writes, and what KAI's test harness copies
    /// back between rounds.
    pub fn changed(&self) -> Vec<crate::dra::ClaimStatus> {
        let mut out = Vec::new();
        for claim in &self.claims {
            let allocation = claim.held.as_ref().map(|h| crate::dra::Allocation {
                node: match h.tie {
                    Tie::Node(n) => Some(self.snapshot.nodes[n].name.clone()),
                    _ => None,
                },
                selector: match &h.tie {
                    Tie::Nodes { terms, .. } => terms.clone(),
                    _ => Vec::new(),
                },
                devices: h
                    .devices
                    .iter()
                    .map(|&(d, request)| {
                        let d = &self.devices[d];
                        crate::dra::AllocatedDevice {
                            request: request.to_string(),
                            driver: d.driver.to_string(),
                            pool: d.pool.to_string(),
                            device: d.name.to_string(),
                        }
                    })
                    .collect(),
            });
            let reserved_for: Vec<String> = claim.reserved.iter().cloned().collect();
            let mut before = claim.claim.reserved_for.clone();
            before.sort();
            before.dedup();
            if allocation != claim.claim.allocation || reserved_for != before {
                out.push(crate::dra::ClaimStatus {
                    namespace: claim.claim.namespace.clone(),
                    name: claim.claim.name.clone(),
                    allocation,
                    reserved_for,
                });
            }
        }
        out
    }

    /// The queue-label rule (`validateSharedGpuClaimQueueLabel`): a claim the pod names (not
    /// one made from a template) that asks a GPU class must carry `label` = the job's queue.
    pub fn queue_label_problem(&self, pod: &Pod, label: &str, queue: &str) -> Option<String> {
        for (pc, c) in pod.constraints.claims.iter().zip(self.claims_of(pod)) {
            let Ok(c) = c else { continue };
            let claim = self.claims[c].claim;
            if pc.template || !claim.asks_gpu() {
                continue;
            }
            match claim.labels.get(label).filter(|v| !v.is_empty()) {
                None => {
                    return Some(format!(
                        "ResourceClaim {}/{} is a shared GPU claim without the queue label \
                         {label} (label it {label}={queue})",
                        claim.namespace, claim.name
                    ));
                }
                Some(v) if v != queue => {
                    return Some(format!(
                        "ResourceClaim {}/{} is a shared GPU claim of queue {v}, not of the \
                         job's queue {queue} (label {label})",
                        claim.namespace, claim.name
                    ));
                }
                Some(_) => {}
            }
        }
        None
    }
}

/// Keeps off every node the pending pods whose shared GPU claims do not carry their job's queue
/// in the policy's queue label (KAI checks it before any node, `preFilter`).
pub(super) fn block_by_queue_label(
    dra: &mut DraState<'_>,
    snapshot: &Snapshot,
    policy: &kai_policy_compiler::model::Policy,
    jobs: &[super::jobs::Job],
) {
    let label = &policy.cluster.queue_label;
    for job in jobs {
        let Ok(q) = job.queue else { continue };
        let queue = &policy.queues[q].name;
        for &p in &job.pods {
            let pod = &snapshot.pods[p];
            if pod.node.is_some() || pod.constraints.claims.is_empty() {
                continue;
            }
            if let Some(why) = dra.queue_label_problem(pod, label, queue) {
                dra.block(pod, why);
            }
        }
    }
}

/// Per node, whether it matches any of `terms` (a node selector's).
fn matching(terms: &[NodeSelectorTerm], nodes: &[crate::cluster::Node]) -> Vec<bool> {
    nodes
        .iter()
        .map(|n| terms.iter().any(|t| super::filters::term_matches(n, t)))
        .collect()
}

/// The slices the allocator reads on each node, as the upstream allocator KAI builds on
/// gathers them (`k8s.io/dynamic-resource-allocation` v0.35.4,
/// `structured/internal/stable/pools_stable.go: GatherPools`, `NodeMatches`, `addSlice`,
/// `checkSlicesInPool`, `poolIsInvalid`).
pub(super) struct Gathered {
    /// `(slice, node, usable)` for each slice of a pool's newest generation on each node it
    /// is for, in the snapshot's order. Devices of a pool being updated or invalid are not
    /// given to claims (`allocator_stable.go: allocateOne`), but claims the snapshot shows
    /// holding them keep them.
    pub(super) slices: Vec<(usize, usize, bool)>,
    /// Per node, the first pool (by driver, then name) that is being updated or invalid.
    pub(super) unsettled: Vec<Option<String>>,
}

/// Groups the slices by the nodes they are for (their node, every node, or the nodes their
/// selector matches) and pool: of each group only the newest generation counts; it is
/// incomplete when it has fewer slices than its `resourceSliceCount` (counting
/// the pool's slices of that generation on every node when the node's own are too few), and
/// ignored when some slice of the pool anywhere has a newer generation (the driver is
/// replacing it); it is invalid when a device name appears twice in it.
pub(super) fn gather(
    slices: &[crate::dra::ResourceSlice],
    nodes: &rustc_hash::FxHashMap<&str, usize>,
    all: &[crate::cluster::Node],
) -> Gathered {
    use std::collections::BTreeMap;
    let mut groups: BTreeMap<(usize, &str, &str), Vec<usize>> = BTreeMap::new();
    let mut newest: HashMap<(&str, &str), i64> = HashMap::new();
    let mut published: HashMap<(&str, &str, i64), i64> = HashMap::new();
    for (i, s) in slices.iter().enumerate() {
        let pool = (s.driver.as_str(), s.pool.as_str());
        let top = newest.entry(pool).or_insert(s.generation);
        *top = (*top).max(s.generation);
        *published.entry((pool.0, pool.1, s.generation)).or_default() += 1;
        // The nodes it is for (`NodeMatches`); a slice with more than one selector term,
        // which the API refuses, is for none.
        let reached: Vec<usize> = match (&s.node, s.all_nodes, s.node_selector.as_slice()) {
            (Some(n), _, _) => nodes.get(n.as_str()).copied().into_iter().collect(),
            (None, true, _) => (0..all.len()).collect(),
            (None, false, [_]) => matching(&s.node_selector, all)
                .into_iter()
                .enumerate()
                .filter_map(|(n, reached)| reached.then_some(n))
                .collect(),
            _ => Vec::new(),
        };
        for node in reached {
            groups.entry((node, pool.0, pool.1)).or_default().push(i);
        }
    }
    let mut out = Gathered {
        slices: Vec::new(),
        unsettled: vec![None; all.len()],
    };
    for ((node, driver, pool), members) in groups {
        let generation = members.iter().map(|&i| slices[i].generation).max();
        let current: Vec<usize> = members
            .into_iter()
            .filter(|&i| Some(slices[i].generation) == generation)
            .collect();
        let generation = generation.unwrap_or_default();
        let first = &slices[current[0]];
        let mut trouble = None;
        let mut usable = true;
        if let Some(count) = first.slice_count
            && current.len() as i64 != count
        {
            if newest[&(driver, pool)] > generation {
                // Obsolete here: the new generation has no slice for this node yet.
                out.slices.extend(current.iter().map(|&i| (i, node, false)));
                continue;
            }
            let published = published[&(driver, pool, generation)];
            if published != count {
                usable = false;
                trouble = Some(format!(
                    "resource pool {driver}/{pool} is being updated ({published} of its \
                     {count} slices of generation {generation} are published)"
                ));
            }
        }
        let mut names = std::collections::HashSet::new();
        if let Some(twice) = current
            .iter()
            .flat_map(|&i| &slices[i].devices)
            .find(|d| !names.insert(d.name.as_str()))
        {
            usable = false;
            trouble.get_or_insert_with(|| {
                format!(
                    "resource pool {driver}/{pool} is invalid (device {} is published twice)",
                    twice.name
                )
            });
        }
        if out.unsettled[node].is_none() {
            out.unsettled[node] = trouble;
        }
        out.slices
            .extend(current.iter().map(|&i| (i, node, usable)));
    }
    // Back to the snapshot's order: the order devices are offered in.
    out.slices.sort_unstable();
    out
}

/// Per request of a claim, the devices it accepts: its class's selectors and its own pass. Or
/// why it can take none: a class missing, a selector beyond what is read, `firstAvailable`, or
/// more devices than one request may get.
fn accepted(
    snapshot: &Snapshot,
    claim: &ResourceClaim,
    devices: &[Dev<'_>],
    device_of: &[&crate::dra::Device],
) -> Result<Vec<Vec<usize>>, String> {
    let what = format!("ResourceClaim {}/{}", claim.namespace, claim.name);
    if let Some(why) = &claim.unreadable {
        return Err(format!(
            "{what} cannot be read ({why}): no device is chosen for it until it is fixed"
        ));
    }
    if let Some(part) = &claim.unsupported {
        return Err(format!(
            "{what} uses {part}, which kai-policy does not evaluate: no device is chosen for it"
        ));
    }
    let mut out = Vec::new();
    for r in &claim.requests {
        if r.mode == Mode::FirstAvailable {
            return Err(format!(
                "{what} request {} lists firstAvailable devices, which KAI's allocator does not \
                 give (ask one device class with `exactly`)",
                r.name
            ));
        }
        if let Mode::Exact(n) = r.mode
            && n > MAX_DEVICES_PER_REQUEST
        {
            return Err(format!(
                "{what} request {} asks {n} devices; one request gets at most \
                 {MAX_DEVICES_PER_REQUEST}",
                r.name
            ));
        }
        let total: i64 = claim
            .requests
            .iter()
            .map(|r| match r.mode {
                Mode::Exact(n) => n.max(1),
                _ => 0,
            })
            .fold(0, i64::saturating_add);
        if total > MAX_DEVICES_PER_REQUEST {
            return Err(format!(
                "{what} asks {total} devices; one claim gets at most {MAX_DEVICES_PER_REQUEST}"
            ));
        }
        let class = snapshot.dra.class(&r.class).ok_or_else(|| {
            format!(
                "{what} request {}: device class {} does not exist",
                r.name, r.class
            )
        })?;
        let mut accepts = Vec::new();
        for (i, dev) in devices.iter().enumerate() {
            let candidate = Candidate {
                driver: dev.driver,
                device: device_of[i],
            };
            let mut ok = true;
            for expression in class.selectors.iter().chain(&r.selectors) {
                ok &= selects(expression, &candidate).map_err(|part| {
                    format!(
                        "{what} request {}: the selector `{expression}` uses {part}, beyond the \
                         CEL kai-policy reads (&& of == or != on device.driver and \
                         device.attributes)",
                        r.name
                    )
                })?;
            }
            if ok {
                accepts.push(i);
            }
        }
        out.push(accepts);
    }
    Ok(out)
}
