//! NUMA zones through a cycle, as KAI's `numa` plugin keeps them (`plugins/numa/numa.go`,
//! `reconstruct.go`, `seed_placements.go`, and `framework/statement.go`'s undo): each zone's
//! free room is its allocatable less the recorded placements of the pods that hold resources
//! there (terminating pods excluded, as KAI's `IsActiveAllocatedStatus` excludes releasing
//! ones); a pod placed on a node with zones takes the zones the kubelet would give it, and
//! gives them back when it is taken off.

use std::collections::{BTreeSet, HashMap};

use crate::cluster::{Pod, Snapshot};
use crate::numa::{Placement, Res, Topology, ZoneAmount};

/// The zones' free room, and where each pod placed on them is.
#[derive(Debug, Clone)]
pub(crate) struct NumaState<'s> {
    nodes: &'s [crate::cluster::Node],
    /// Per node, its topology when placements there are charged (a policy other than `none`).
    charged: Vec<Option<&'s Topology>>,
    /// Per node, the free room of each zone.
    free: Vec<Vec<Res>>,
    /// Pods holding zones they give back when taken off (`namespace/name`): node and
    /// placement.
    held: HashMap<String, (usize, Placement)>,
    /// The zones each bound pod NUMA concerns held when the cycle began (its record): what it
    /// holds again when it is put back on its node (KAI's undo restores the placement saved).
    home: HashMap<String, Placement>,
    ignore: &'s BTreeSet<String>,
    /// The most zones a node has (KAI's `maxZones`): the span assumed on a node without zones.
    max_zones: usize,
    /// Devices some charged node's zones report (KAI's `awareDeviceIndices`).
    devices: BTreeSet<&'s str>,
}

/// A NUMA score: the higher the better, 0 where the pod cannot be aligned (KAI's
/// `scores.Numa / span`, in units that keep spans apart).
pub(crate) type Score = u32;

/// The score of a node that holds the pod in one zone: none is better.
pub(crate) const BEST: Score = 720_720;

impl<'s> NumaState<'s> {
    /// The zones of a snapshot's nodes, with what its pods' records take; `None` when no node
    /// has zones.
    pub fn new(snapshot: &'s Snapshot) -> Option<Self> {
        if snapshot.nodes.iter().all(|n| n.numa.is_none()) {
            return None;
        }
        let charged: Vec<Option<&Topology>> = snapshot
            .nodes
            .iter()
            .map(|n| n.numa.as_deref().filter(|t| t.policy.charges()))
            .collect();
        let free = charged
            .iter()
            .map(|t| {
                t.map_or_else(Vec::new, |t| {
                    t.zones.iter().map(|z| z.allocatable.clone()).collect()
                })
            })
            .collect();
        let devices = charged
            .iter()
            .flatten()
            .flat_map(|t| t.aware())
            .filter(|r| !crate::numa::qos_gated(r) && !snapshot.numa_ignore.contains(*r))
            .collect();
        let mut state = NumaState {
            nodes: &snapshot.nodes,
            charged,
            free,
            held: HashMap::new(),
            home: HashMap::new(),
            ignore: &snapshot.numa_ignore,
            max_zones: snapshot
                .nodes
                .iter()
                .filter_map(|n| n.numa.as_ref().map(|t| t.zones.len()))
                .max()
                .unwrap_or(0),
            devices,
        };
        let index = snapshot.node_index();
        for pod in snapshot.pods.iter().filter(|p| !p.terminating) {
            let (Some(&node), Some(record)) = (
                pod.node.as_deref().and_then(|n| index.get(n)),
                pod.numa_zones.as_deref(),
            ) else {
                continue;
            };
            let Some(topology) = state.charged[node] else {
                continue;
            };
            let Some(placement) = topology.indexed(record) else {
                continue;
            };
            // Every record is charged (`reconstructNodeAvailable`), but only a pod NUMA
            // concerns gives its zones back when taken off (`seedPlacements` seeds only those).
            state.charge(node, &placement, -1);
            let concerned = pod
                .constraints
                .numa
                .as_deref()
                .is_some_and(|n| topology.charges(n, &snapshot.numa_ignore));
            if concerned {
                state.home.insert(pod.key(), placement.clone());
                state.held.insert(pod.key(), (node, placement));
            }
        }
        Some(state)
    }

    fn charge(&mut self, node: usize, placement: &Placement, sign: i64) {
        let zones = &mut self.free[node];
        for (z, amount) in placement {
            if let Some(zone) = zones.get_mut(*z) {
                for (name, v) in amount {
                    let free = zone.entry(name.clone()).or_default();
                    *free = free.saturating_add(v.saturating_mul(sign));
                }
            }
        }
    }

    /// The node's zone choice for the pod now (`None`: it cannot be aligned), or `Some(None)`
    /// where the pod's placement there is not NUMA's concern.
    fn solve(&self, node: usize, pod: &Pod) -> Option<Option<Placement>> {
        let topology = self.charged[node]?;
        let numa = pod.constraints.numa.as_deref()?;
        if !topology.charges(numa, self.ignore) {
            return None;
        }
        Some(topology.solve(&self.free[node], numa, self.ignore))
    }

    /// The policy that keeps the pod off the node now, if one does (KAI's NUMA predicate).
    pub fn shortage(&self, node: usize, pod: &Pod) -> Option<&'static str> {
        let topology = self.charged[node]?;
        let numa = pod.constraints.numa.as_deref()?;
        if !topology.filters(numa, self.ignore) {
            return None;
        }
        match topology.solve(&self.free[node], numa, self.ignore) {
            Some(_) => None,
            None => Some(topology.policy.name()),
        }
    }

    /// Places the pod's aligned requests on the node's zones: the zones the kubelet would give
    /// it now (KAI stamps every placement afresh), nothing when they do not concern it or when
    /// a `best-effort` node's zones cannot cover them (KAI charges nothing then). A bound pod
    /// put back on its own node holds what it held when the cycle began (KAI's undo restores
    /// the saved placement; nothing, for a pod that held none): its recorded zones when they
    /// are free, else the zones the kubelet would give it now (a victim whose zone its
    /// preemptor took, placed again), else, when no zone will do (an undo made before the pod
    /// that took its zones gives them back), its recorded zones, overdrawn until that pod
    /// leaves.
    pub fn take(&mut self, node: usize, pod: &Pod) {
        if pod.constraints.numa.is_none() {
            return;
        }
        let key = pod.key();
        let placement = if pod.node.as_deref() == Some(self.nodes[node].name.as_str()) {
            let Some(home) = self.home.get(&key) else {
                return;
            };
            if self.holds(node, home) {
                home.clone()
            } else {
                let fresh = self.solve(node, pod).flatten();
                fresh.unwrap_or_else(|| self.home[&key].clone())
            }
        } else {
            let Some(fresh) = self.solve(node, pod) else {
                return;
            };
            fresh.unwrap_or_default()
        };
        self.charge(node, &placement, -1);
        self.held.insert(key, (node, placement));
    }

    /// Whether the node's zones have the room of a placement free.
    fn holds(&self, node: usize, placement: &Placement) -> bool {
        placement.iter().all(|(z, amount)| {
            amount.iter().all(|(name, v)| {
                self.free[node]
                    .get(*z)
                    .is_some_and(|zone| zone.get(name).copied().unwrap_or(0) >= *v)
            })
        })
    }

    /// Gives back the zones the pod took.
    pub fn release(&mut self, pod: &Pod) {
        if self.held.is_empty() || pod.constraints.numa.is_none() {
            return;
        }
        if let Some((node, placement)) = self.held.remove(&pod.key()) {
            self.charge(node, &placement, 1);
        }
    }

    /// Whether some zone of the node has given more than it has.
    pub fn overdrawn(&self, node: usize) -> bool {
        self.free[node]
            .iter()
            .any(|zone| zone.values().any(|&v| v < 0))
    }

    /// Whether node order ranks nodes by NUMA for the pod: some node has zones and the pod is
    /// Guaranteed or asks a device zones report (KAI's `wantsNuma`).
    pub fn ranks(&self, pod: &Pod) -> bool {
        self.max_zones > 0
            && pod
                .constraints
                .numa
                .as_deref()
                .is_some_and(|n| n.guaranteed || self.devices.iter().any(|d| n.asked(d) > 0))
    }

    /// How well the node aligns the pod: the fewer zones it takes, the better (KAI's
    /// `nodeScore`: 100 / span; a node without zones is assumed to take `maxZones`, one whose
    /// policy does not align it all of its zones).
    pub fn score(&self, node: usize, pod: &Pod, topology: Option<&Topology>) -> Score {
        let span = match (topology, self.solve(node, pod)) {
            (None, _) => self.max_zones,
            (Some(t), None) => t.zones.len(),
            (Some(_), Some(None)) => return 0,
            (Some(_), Some(Some(p))) => p.len().max(1),
        };
        // 720720 is divisible by every span up to 16, so equal ratios compare equal.
        BEST / span.max(1) as Score
    }

    /// Each zone's free room now, by node and zone name (nodes whose zones are charged).
    pub fn free(&self) -> Vec<(String, Vec<(String, Res)>)> {
        self.charged
            .iter()
            .enumerate()
            .filter_map(|(n, t)| {
                let t = (*t)?;
                let zones = t.zones.iter().map(|z| z.name.clone());
                Some((
                    self.nodes[n].name.clone(),
                    zones.zip(self.free[n].iter().cloned()).collect(),
                ))
            })
            .collect()
    }

    /// Where a pod placed this cycle went, by zone name (`None`: it holds no zones).
    pub fn placement(&self, pod: &str) -> Option<Vec<ZoneAmount>> {
        let (node, placement) = self.held.get(pod)?;
        let topology = self.charged[*node]?;
        Some(topology.named(placement)).filter(|p| !p.is_empty())
    }
}
