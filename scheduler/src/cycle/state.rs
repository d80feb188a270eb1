//! Free resources per node and per GPU device, kept in ordered indexes so that a pod finds its
//! node in logarithmic time, with an undo log so a gang that does not fit whole leaves no trace.

use std::collections::BTreeSet;

use kai_policy_compiler::model::Strategy;

use crate::cluster::{Amounts, Pod, Snapshot};

/// Thousandths of a GPU in one device.
pub const DEVICE: i64 = 1000;

/// Where one pod goes: its node and what it takes from each GPU device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Slot {
    /// Node index.
    pub node: usize,
    /// `(device, thousandths)` taken.
    pub devices: Vec<(usize, i64)>,
}

#[derive(Debug, Clone)]
struct NodeFree {
    free: Amounts,
    devices: Vec<i64>,
    whole: u32,
}

/// The cluster's free resources during one cycle.
#[derive(Debug, Clone)]
pub struct ClusterState {
    nodes: Vec<NodeFree>,
    schedulable: Vec<bool>,
    /// Schedulable nodes by (whole free devices, index): where whole-GPU pods look.
    by_gpu: BTreeSet<(u32, usize)>,
    /// Schedulable nodes by (free CPU, index): where CPU-only pods look.
    by_cpu: BTreeSet<(i64, usize)>,
    /// Schedulable nodes by (free GPU thousandths, index): where fractional pods look.
    by_free_gpu: BTreeSet<(i64, usize)>,
}

impl ClusterState {
    /// The free resources left by the bound pods of a snapshot (in pod order, so device
    /// assignment is deterministic). Returns the state and each bound pod's slot.
    pub fn new(snapshot: &Snapshot) -> (Self, Vec<Option<Slot>>) {
        let nodes: Vec<NodeFree> = snapshot
            .nodes
            .iter()
            .map(|n| NodeFree {
                free: n.allocatable,
                devices: vec![DEVICE; n.gpu_devices()],
                whole: n.gpu_devices() as u32,
            })
            .collect();
        let mut state = ClusterState {
            schedulable: snapshot.nodes.iter().map(|n| !n.unschedulable).collect(),
            nodes,
            by_gpu: BTreeSet::new(),
            by_cpu: BTreeSet::new(),
            by_free_gpu: BTreeSet::new(),
        };
        let index: std::collections::HashMap<&str, usize> = snapshot
            .nodes
            .iter()
            .enumerate()
            .map(|(i, n)| (n.name.as_str(), i))
            .collect();
        let mut slots = vec![None; snapshot.pods.len()];
        // Kubernetes does not say which device a pod holds, so rebuild it: whole-device pods
        // first (they need empty devices), then shared pods largest first onto partly used ones.
        let mut bound: Vec<(usize, usize)> = snapshot
            .pods
            .iter()
            .enumerate()
            .filter_map(|(p, pod)| {
                pod.node
                    .as_deref()
                    .and_then(|n| index.get(n))
                    .map(|&n| (p, n))
            })
            .collect();
        bound.sort_by_key(|&(p, _)| {
            let pod = &snapshot.pods[p];
            (pod.fractional, std::cmp::Reverse(pod.request.gpu), p)
        });
        for (p, node) in bound {
            let pod = &snapshot.pods[p];
            // A bound pod always takes its place; where the snapshot over-commits a node, it is
            // charged to the emptiest devices so that nothing else is placed there.
            let devices = state
                .devices_for(node, pod, Strategy::Binpack)
                .unwrap_or_else(|| state.overcommit(node, pod));
            let slot = Slot { node, devices };
            state.apply(&slot, pod, -1);
            slots[p] = Some(slot);
        }
        for i in 0..state.nodes.len() {
            state.index(i, true);
        }
        (state, slots)
    }

    fn index(&mut self, node: usize, insert: bool) {
        if !self.schedulable[node] {
            return;
        }
        let n = &self.nodes[node];
        let (g, c) = ((n.whole, node), (n.free.cpu, node));
        let f = (n.free.gpu, node);
        if insert {
            self.by_gpu.insert(g);
            self.by_cpu.insert(c);
            self.by_free_gpu.insert(f);
        } else {
            self.by_gpu.remove(&g);
            self.by_cpu.remove(&c);
            self.by_free_gpu.remove(&f);
        }
    }

    /// Free amounts of a node.
    pub fn free(&self, node: usize) -> Amounts {
        self.nodes[node].free
    }

    /// Whole free GPU devices of a node.
    pub fn whole_devices(&self, node: usize) -> u32 {
        self.nodes[node].whole
    }

    /// Number of nodes.
    #[allow(clippy::len_without_is_empty)]
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Whether new pods may go to this node.
    pub fn schedulable(&self, node: usize) -> bool {
        self.schedulable[node]
    }

    /// Takes (`sign = -1`) or gives back (`sign = 1`) what a pod holds.
    fn apply(&mut self, slot: &Slot, pod: &Pod, sign: i64) {
        let n = &mut self.nodes[slot.node];
        n.free.cpu += sign * pod.request.cpu;
        n.free.memory += sign * pod.request.memory;
        n.free.gpu += sign * pod.request.gpu;
        for &(d, amount) in &slot.devices {
            n.devices[d] += sign * amount;
        }
        n.whole = n.devices.iter().filter(|&&f| f == DEVICE).count() as u32;
    }

    /// Places a pod on a slot.
    pub fn take(&mut self, slot: &Slot, pod: &Pod) {
        self.index(slot.node, false);
        self.apply(slot, pod, -1);
        self.index(slot.node, true);
    }

    /// Frees what a pod held.
    pub fn release(&mut self, slot: &Slot, pod: &Pod) {
        self.index(slot.node, false);
        self.apply(slot, pod, 1);
        self.index(slot.node, true);
    }

    /// The devices a pod would take on a node, if it fits there (CPU, memory and GPU).
    pub fn devices_for(
        &self,
        node: usize,
        pod: &Pod,
        strategy: Strategy,
    ) -> Option<Vec<(usize, i64)>> {
        let n = &self.nodes[node];
        if n.free.cpu < pod.request.cpu || n.free.memory < pod.request.memory {
            return None;
        }
        if pod.request.gpu <= 0 {
            return Some(Vec::new());
        }
        if pod.fractional {
            // A shared device: binpack fills partly used devices first, spread the emptiest.
            let fits = n
                .devices
                .iter()
                .enumerate()
                .filter(|&(_, &f)| f >= pod.request.gpu);
            let chosen = match strategy {
                Strategy::Binpack => fits.min_by_key(|&(d, &f)| (f, d)),
                Strategy::Spread => fits.max_by_key(|&(d, &f)| (f, usize::MAX - d)),
            };
            return chosen.map(|(d, _)| vec![(d, pod.request.gpu)]);
        }
        let need = (pod.request.gpu + DEVICE - 1) / DEVICE;
        let free: Vec<usize> = n
            .devices
            .iter()
            .enumerate()
            .filter(|&(_, &f)| f == DEVICE)
            .map(|(d, _)| d)
            .take(need as usize)
            .collect();
        (free.len() as i64 == need).then(|| free.into_iter().map(|d| (d, DEVICE)).collect())
    }

    /// Devices for a bound pod that does not fit: its GPU amount, charged to the emptiest devices.
    fn overcommit(&self, node: usize, pod: &Pod) -> Vec<(usize, i64)> {
        let mut order: Vec<usize> = (0..self.nodes[node].devices.len()).collect();
        order.sort_by_key(|&d| (std::cmp::Reverse(self.nodes[node].devices[d]), d));
        let mut left = pod.request.gpu;
        let mut taken = Vec::new();
        for d in order {
            if left <= 0 {
                break;
            }
            let amount = if pod.fractional {
                left
            } else {
                left.min(DEVICE)
            };
            taken.push((d, amount));
            left -= amount;
        }
        taken
    }

    /// Candidate nodes for a pod in strategy order: binpack fullest first, spread emptiest
    /// first. Only schedulable nodes; the caller still checks fit.
    pub fn candidates(
        &self,
        pod: &Pod,
        strategy: Strategy,
    ) -> Box<dyn Iterator<Item = usize> + '_> {
        if pod.request.gpu > 0 && !pod.fractional {
            let need = ((pod.request.gpu + DEVICE - 1) / DEVICE) as u32;
            let range = self.by_gpu.range((need, 0)..);
            match strategy {
                Strategy::Binpack => Box::new(range.map(|&(_, n)| n)),
                Strategy::Spread => Box::new(range.rev().map(|&(_, n)| n)),
            }
        } else if pod.request.gpu > 0 {
            let need = pod.request.gpu;
            let fits = move |n: &usize| self.nodes[*n].devices.iter().any(|&f| f >= need);
            let range = self.by_free_gpu.range((need, 0)..);
            match strategy {
                Strategy::Binpack => Box::new(range.map(|&(_, n)| n).filter(fits)),
                Strategy::Spread => Box::new(range.rev().map(|&(_, n)| n).filter(fits)),
            }
        } else {
            let range = self.by_cpu.range((pod.request.cpu, 0)..);
            match strategy {
                Strategy::Binpack => Box::new(range.map(|&(_, n)| n)),
                Strategy::Spread => Box::new(range.rev().map(|&(_, n)| n)),
            }
        }
    }

    /// What a node lacks for a pod (zero where it has enough).
    pub fn lacking(&self, node: usize, pod: &Pod) -> Amounts {
        let n = &self.nodes[node];
        let gpu_free = if pod.fractional {
            n.devices.iter().copied().max().unwrap_or(0)
        } else {
            n.whole as i64 * DEVICE
        };
        Amounts {
            gpu: (pod.request.gpu - gpu_free).max(0),
            cpu: (pod.request.cpu - n.free.cpu).max(0),
            memory: (pod.request.memory - n.free.memory).max(0),
        }
    }
}
