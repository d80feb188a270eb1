//! NUMA alignment, as KAI's `numa` plugin predicts the kubelet's Topology Manager
//! (`pkg/scheduler/plugins/numa/`, `api/node_info/numa_topology.go`): a node's NUMA zones come
//! from its `NodeResourceTopology` object (`topology.node.k8s.io/v1alpha2`); under the
//! `single-numa-node` and `restricted` policies a pod whose aligned requests the zones cannot
//! hold the way the kubelet would admit them is kept off the node, and every placement on a
//! node with zones is charged to the zones it would take.
//!
//! Amounts are keyed by resource name, `cpu` in millicores, everything else in whole units
//! (bytes for memory and hugepages); a name that ends in `gpu` counts as `gpu`
//! (`normalizeResourceName`).

use std::collections::{BTreeMap, BTreeSet};

/// Resource amounts by (normalised) name.
pub type Res = BTreeMap<String, i64>;

/// The kubelet's `topologyManagerPolicy`, as the node's NRT object reports it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Policy {
    /// `none`, or a value KAI does not know: no alignment.
    #[default]
    None,
    /// `best-effort`: the kubelet admits every pod; placements are preferred and charged.
    BestEffort,
    /// `restricted`: the smallest span every aligned resource agrees on.
    Restricted,
    /// `single-numa-node`: every aligned request in one zone.
    SingleNumaNode,
}

impl Policy {
    /// Whether a node under this policy keeps pods off (KAI's `shouldFilter`).
    pub fn filters(self) -> bool {
        matches!(self, Policy::Restricted | Policy::SingleNumaNode)
    }

    /// Whether placements on it are charged to zones and scored (KAI's `isScoredPolicy`).
    pub fn charges(self) -> bool {
        self != Policy::None
    }

    /// The policy's name, as the kubelet spells it.
    pub fn name(self) -> &'static str {
        match self {
            Policy::None => "none",
            Policy::BestEffort => "best-effort",
            Policy::Restricted => "restricted",
            Policy::SingleNumaNode => "single-numa-node",
        }
    }
}

/// The kubelet's `topologyManagerScope`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Scope {
    /// Each container aligned on its own (the kubelet's default).
    #[default]
    Container,
    /// The pod's containers aligned together.
    Pod,
}

/// One NUMA zone of a node (an NRT zone of type `Node`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Zone {
    /// The zone's name (`node-0`): what recorded placements name.
    pub name: String,
    /// `resources[].allocatable`.
    pub allocatable: Res,
    /// `resources[].available`: what the exporter says is free (KAI works it out instead, from
    /// `allocatable` and the pods' recorded placements).
    pub available: Res,
}

/// A node's NUMA topology, zones in KAI's index order (`sortZones`: by the number their name
/// ends in, then by name).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Topology {
    /// The Topology Manager policy.
    pub policy: Policy,
    /// The Topology Manager scope.
    pub scope: Scope,
    /// The zones, in index order.
    pub zones: Vec<Zone>,
    /// The name each normalised resource has in the NRT object (what a placement is written
    /// under: `nvidia.com/gpu` rather than `gpu`).
    pub names: BTreeMap<String, String>,
}

/// What a pod asks of a node's zones (KAI's `buildNumaRequests`), read from its spec.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodNuma {
    /// `status.qosClass` is `Guaranteed`: CPU, memory and hugepages are aligned too.
    pub guaranteed: bool,
    /// Pod scope: the pod's request (the larger of its init peak and its running containers),
    /// CPU counted only for containers with whole CPUs (the static CPU manager's pool).
    pub pod: Asks,
    /// Container scope: native sidecars, then app containers, each aligned in turn.
    pub concurrent: Vec<Asks>,
    /// Container scope: ordinary init containers, each checked alone and never charged.
    pub serial: Vec<Asks>,
}

/// Requests that alignment can use, by resource name in order: amounts above zero only. Every
/// GPU pod keeps some (GPUs are aligned whatever the pod's QoS), so they are a short list, not
/// a map: a map's smallest node is about 370 bytes (the read of 50,000 pods peaked 37 MB
/// higher with maps of every request).
pub type Asks = Box<[(String, i64)]>;

impl PodNuma {
    /// A pod's asks from its requests (pod scope, then container scope), keeping what
    /// alignment uses: amounts above zero, and CPU, memory and hugepages only when Guaranteed
    /// (KAI's `alignedAware` leaves them out otherwise).
    pub fn new(guaranteed: bool, pod: Res, concurrent: Vec<Res>, serial: Vec<Res>) -> Self {
        let asks = |r: Res| -> Asks {
            r.into_iter()
                .filter(|(name, v)| *v > 0 && (guaranteed || !qos_gated(name)))
                .collect()
        };
        PodNuma {
            guaranteed,
            pod: asks(pod),
            concurrent: concurrent.into_iter().map(asks).collect(),
            serial: serial.into_iter().map(asks).collect(),
        }
    }

    /// How much of `name` the pod asks at pod scope (0: none).
    pub fn asked(&self, name: &str) -> i64 {
        amount(&self.pod, name)
    }
}

/// How much of `name` `asks` holds (0: none).
pub fn amount(asks: &[(String, i64)], name: &str) -> i64 {
    asks.binary_search_by(|(k, _)| k.as_str().cmp(name))
        .map_or(0, |i| asks[i].1)
}

/// Where a pod's aligned requests go on a node: zone index and amount, by zone index, zones
/// with nothing left out.
pub type Placement = Vec<(usize, Res)>;

/// A placement by zone name, as recorded on a pod (`kai.scheduler/numa-placement-*`
/// annotations, KAI's `NUMAZonePlacement`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ZoneAmount {
    /// The zone's name.
    pub zone: String,
    /// Amounts, by resource name as the NRT object names it.
    pub amount: Res,
}

/// A pod (`namespace/name`) and where on its node's zones it is predicted to go.
pub type PodZones = (String, Vec<ZoneAmount>);

/// Each pod's predicted zones by pod, for the simulators that record them as they bind.
pub fn by_pod(zones: &[PodZones]) -> std::collections::HashMap<&str, &Vec<ZoneAmount>> {
    zones.iter().map(|(p, z)| (p.as_str(), z)).collect()
}

/// The annotation KAI's NUMA placement exporter writes: where the kubelet put the pod.
pub const OBSERVED_ANNOTATION: &str = "kai.scheduler/numa-placement-observed";
/// The annotation the binder writes: where the scheduler predicted the kubelet would put it.
pub const PREDICTED_ANNOTATION: &str = "kai.scheduler/numa-placement-predicted";

/// The resource name KAI's vectors use (`normalizeResourceName`): GPU variants are one.
pub fn normalize(name: &str) -> String {
    if name.ends_with("gpu") {
        "gpu".to_string()
    } else {
        name.to_string()
    }
}

/// CPU, memory and hugepages: aligned only for Guaranteed pods (KAI's `isQoSGatedResource`).
pub fn qos_gated(name: &str) -> bool {
    name == "cpu" || name == "memory" || name.starts_with("hugepages-")
}

/// The policy and scope from an NRT object's attributes, or from its deprecated
/// `topologyPolicies[0]` when the attributes name no policy (KAI's `parsePolicyAndScope`).
pub fn policy_and_scope(
    policy: Option<&str>,
    scope: Option<&str>,
    legacy: Option<&str>,
) -> (Policy, Scope) {
    let scope_of = |s: Option<&str>| match s {
        Some("pod") => Scope::Pod,
        _ => Scope::Container,
    };
    match policy.filter(|p| !p.is_empty()) {
        Some(p) => {
            let policy = match p {
                "single-numa-node" => Policy::SingleNumaNode,
                "restricted" => Policy::Restricted,
                "best-effort" => Policy::BestEffort,
                _ => Policy::None,
            };
            (policy, scope_of(scope))
        }
        None => match legacy.unwrap_or("") {
            "SingleNUMANodePodLevel" => (Policy::SingleNumaNode, Scope::Pod),
            "SingleNUMANodeContainerLevel" => (Policy::SingleNumaNode, Scope::Container),
            "RestrictedPodLevel" => (Policy::Restricted, Scope::Pod),
            "Restricted" | "RestrictedContainerLevel" => (Policy::Restricted, Scope::Container),
            "BestEffortPodLevel" => (Policy::BestEffort, Scope::Pod),
            "BestEffort" | "BestEffortContainerLevel" => (Policy::BestEffort, Scope::Container),
            _ => (Policy::None, Scope::Container),
        },
    }
}

/// Zones in KAI's index order: by the number a name ends in (numbered before unnumbered),
/// then by name (`sortZones`, `numaNodeID`).
pub fn sort_zones(zones: &mut [Zone]) {
    let number = |name: &str| -> Option<u64> {
        let digits = name.len() - name.trim_end_matches(|c: char| c.is_ascii_digit()).len();
        name[name.len() - digits..].parse().ok()
    };
    zones.sort_by(|a, b| {
        let (na, nb) = (number(&a.name), number(&b.name));
        match (na, nb) {
            (Some(x), Some(y)) => x.cmp(&y).then_with(|| a.name.cmp(&b.name)),
            (Some(_), None) => std::cmp::Ordering::Less,
            (None, Some(_)) => std::cmp::Ordering::Greater,
            (None, None) => a.name.cmp(&b.name),
        }
    });
}

impl Topology {
    /// The normalised resources some zone reports (KAI's `AwareIndices`).
    pub fn aware(&self) -> BTreeSet<&str> {
        self.zones
            .iter()
            .flat_map(|z| z.allocatable.keys().chain(z.available.keys()))
            .map(String::as_str)
            .collect()
    }

    /// The resources aligned for a pod: those the zones report, less `ignore`, less CPU,
    /// memory and hugepages for a pod that is not Guaranteed (KAI's `alignedAware`).
    pub fn aligned<'t>(&'t self, pod: &PodNuma, ignore: &BTreeSet<String>) -> BTreeSet<&'t str> {
        self.aware()
            .into_iter()
            .filter(|r| !ignore.contains(*r))
            .filter(|r| pod.guaranteed || !qos_gated(r))
            .collect()
    }

    /// Whether a pod asks for a device the zones report (KAI's `requestsAlignedDevice`).
    pub fn asks_aligned_device(&self, pod: &PodNuma, ignore: &BTreeSet<String>) -> bool {
        self.aware()
            .into_iter()
            .filter(|r| !qos_gated(r) && !ignore.contains(*r))
            .any(|r| pod.asked(r) > 0)
    }

    /// Whether the node's policy keeps this pod off when its zones cannot hold it.
    pub fn filters(&self, pod: &PodNuma, ignore: &BTreeSet<String>) -> bool {
        self.policy.filters() && (pod.guaranteed || self.asks_aligned_device(pod, ignore))
    }

    /// Whether a placement of this pod here is charged to zones and scored.
    pub fn charges(&self, pod: &PodNuma, ignore: &BTreeSet<String>) -> bool {
        self.policy.charges() && (pod.guaranteed || self.asks_aligned_device(pod, ignore))
    }

    /// Where the kubelet would put the pod's aligned requests given what each zone has free
    /// (`available`, one per zone), `None` when it would not admit the pod (KAI's `solve`). Under
    /// `best-effort`, `None` means no placement covers the requests (the pod is admitted anyway
    /// and charged nothing).
    pub fn solve(
        &self,
        available: &[Res],
        pod: &PodNuma,
        ignore: &BTreeSet<String>,
    ) -> Option<Placement> {
        let aligned = self.aligned(pod, ignore);
        let (concurrent, serial): (Vec<&Asks>, Vec<&Asks>) = match self.scope {
            Scope::Pod => (vec![&pod.pod], Vec::new()),
            Scope::Container => (pod.concurrent.iter().collect(), pod.serial.iter().collect()),
        };
        let needs = |r: &Asks| -> Vec<(String, i64)> {
            r.iter()
                .filter(|(k, v)| *v > 0 && aligned.contains(k.as_str()))
                .cloned()
                .collect()
        };
        let mut free: Vec<Res> = available.to_vec();
        let mut taken: BTreeMap<usize, Res> = BTreeMap::new();
        for request in concurrent {
            let need = needs(request);
            let mask = self.mask(&free, &need)?;
            // Drawn greedily in the mask's order (KAI's `drawAcrossMask`).
            for (name, amount) in &need {
                let mut left = *amount;
                for &z in &mask {
                    if left <= 0 {
                        break;
                    }
                    let have = free[z].get(name).copied().unwrap_or(0).max(0);
                    let draw = left.min(have);
                    if draw > 0 {
                        *free[z].entry(name.clone()).or_default() -= draw;
                        *taken.entry(z).or_default().entry(name.clone()).or_default() += draw;
                        left -= draw;
                    }
                }
            }
        }
        for request in serial {
            self.mask(available, &needs(request))?;
        }
        Some(taken.into_iter().collect())
    }

    /// The zones one request goes to under the node's policy, `None` when none will do.
    fn mask(&self, free: &[Res], need: &[(String, i64)]) -> Option<Vec<usize>> {
        if need.is_empty() {
            return Some(Vec::new());
        }
        let has = |z: usize, name: &str| free[z].get(name).copied().unwrap_or(0);
        let holds = |zones: &[usize]| {
            need.iter()
                .all(|(name, amount)| zones.iter().map(|&z| has(z, name)).sum::<i64>() >= *amount)
        };
        let lowest_single = || {
            (0..self.zones.len())
                .find(|&z| holds(&[z]))
                .map(|z| vec![z])
        };
        match self.policy {
            Policy::SingleNumaNode => lowest_single(),
            Policy::Restricted | Policy::None => {
                // Every resource's preferred width (the fewest zones whose allocatable holds
                // it, largest first) must agree; then the first mask of that width, in
                // lexicographic order, whose free room holds the request.
                let mut width = None;
                for (name, amount) in need {
                    let mut sizes: Vec<i64> = self
                        .zones
                        .iter()
                        .map(|z| z.allocatable.get(name).copied().unwrap_or(0))
                        .collect();
                    sizes.sort_unstable_by(|a, b| b.cmp(a));
                    let mut sum = 0;
                    let k = sizes.iter().position(|s| {
                        sum += s;
                        sum >= *amount
                    })? + 1;
                    if width.is_some_and(|w| w != k) {
                        return None;
                    }
                    width = Some(k);
                }
                let width = width?;
                if width == 1 {
                    return lowest_single();
                }
                combinations(self.zones.len(), width).find(|mask| holds(mask))
            }
            Policy::BestEffort => {
                // Greedy cover: the zone covering most of what is left, lowest index on a tie.
                let mut left: Vec<(String, i64)> = need.to_vec();
                let mut mask = Vec::new();
                while left.iter().any(|(_, v)| *v > 0) {
                    let cover = |z: usize| -> i64 {
                        left.iter()
                            .filter(|(_, v)| *v > 0)
                            .map(|(name, v)| (*v).min(has(z, name).max(0)))
                            .sum()
                    };
                    let best = (0..self.zones.len())
                        .filter(|z| !mask.contains(z))
                        .map(|z| (cover(z), z))
                        .filter(|&(c, _)| c > 0)
                        .max_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)))?;
                    mask.push(best.1);
                    for (name, v) in &mut left {
                        *v -= has(best.1, name).max(0);
                    }
                }
                Some(mask)
            }
        }
    }

    /// A placement by zone name, under the NRT's resource names (what is recorded).
    pub fn named(&self, placement: &Placement) -> Vec<ZoneAmount> {
        placement
            .iter()
            .filter_map(|(z, amount)| {
                Some(ZoneAmount {
                    zone: self.zones.get(*z)?.name.clone(),
                    amount: amount
                        .iter()
                        .map(|(k, v)| (self.names.get(k).cloned().unwrap_or(k.clone()), *v))
                        .collect(),
                })
            })
            .collect()
    }

    /// A recorded placement by zone index, `None` when it names a zone the node does not have
    /// (KAI drops such a record whole: part of it would credit too little).
    pub fn indexed(&self, record: &[ZoneAmount]) -> Option<Placement> {
        // Only what the zones report is charged (KAI projects a record onto the resources the
        // topology is aware of).
        let aware = self.aware();
        let mut out: Placement = record
            .iter()
            .map(|za| {
                let z = self.zones.iter().position(|z| z.name == za.zone)?;
                let amount = za
                    .amount
                    .iter()
                    .map(|(k, v)| (normalize(k), (*v).max(0)))
                    .filter(|(k, _)| aware.contains(k.as_str()))
                    .collect();
                Some((z, amount))
            })
            .collect::<Option<_>>()?;
        out.sort_by_key(|(z, _)| *z);
        Some(out)
    }
}

/// Every `k`-element subset of `0..n`, in lexicographic order.
fn combinations(n: usize, k: usize) -> impl Iterator<Item = Vec<usize>> {
    let mut next = (k <= n).then(|| (0..k).collect::<Vec<usize>>());
    std::iter::from_fn(move || {
        let current = next.take()?;
        let mut c = current.clone();
        let mut i = k;
        while i > 0 {
            i -= 1;
            if c[i] < n - k + i {
                c[i] += 1;
                for j in i + 1..k {
                    c[j] = c[j - 1] + 1;
                }
                next = Some(c);
                break;
            }
        }
        Some(current)
    })
}

/// A recorded placement's JSON (`[{"zone":"node-0","amount":{"cpu":"3"}}]`), `None` when it
/// is malformed or empty (KAI then reads the next record, or none).
pub fn parse_record(text: &str) -> Option<Vec<ZoneAmount>> {
    let value: serde_json::Value = serde_json::from_str(text).ok()?;
    let items = value.as_array().filter(|a| !a.is_empty())?;
    items
        .iter()
        .map(|item| {
            let zone = item.get("zone")?.as_str()?.to_string();
            let empty = serde_json::Map::new();
            let amount = match item.get("amount") {
                None | Some(serde_json::Value::Null) => &empty,
                Some(a) => a.as_object()?,
            };
            let amount = amount
                .iter()
                .map(|(name, q)| {
                    let text = match q {
                        serde_json::Value::String(s) => s.clone(),
                        serde_json::Value::Number(n) => n.to_string(),
                        _ => return None,
                    };
                    Some((name.clone(), quantity(name, &text)?.max(0)))
                })
                .collect::<Option<Res>>()?;
            Some(ZoneAmount { zone, amount })
        })
        .collect()
}

/// A placement as the record's JSON: CPU as a millicore quantity, the rest whole.
pub fn record_json(placement: &[ZoneAmount]) -> String {
    let items: Vec<serde_json::Value> = placement
        .iter()
        .map(|za| {
            let amount: serde_json::Map<String, serde_json::Value> = za
                .amount
                .iter()
                .map(|(name, v)| {
                    let q = if normalize(name) == "cpu" {
                        if v % 1000 == 0 {
                            (v / 1000).to_string()
                        } else {
                            format!("{v}m")
                        }
                    } else {
                        v.to_string()
                    };
                    (name.clone(), serde_json::Value::String(q))
                })
                .collect();
            serde_json::json!({"zone": za.zone, "amount": amount})
        })
        .collect();
    serde_json::Value::Array(items).to_string()
}

/// A quantity in the unit the vectors use: CPU in millicores, the rest whole (rounded up, as
/// the kubelet's `MilliValue` and `Value` round).
pub fn quantity(name: &str, text: &str) -> Option<i64> {
    use kai_policy_compiler::quantity::{Round, parse_rounded};
    let scale = if normalize(name) == "cpu" { 1000 } else { 1 };
    parse_rounded(text, scale, Round::Up).ok()
}

#[cfg(test)]
mod tests;
