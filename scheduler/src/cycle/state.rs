//! Free resources per node and per GPU device, kept in ordered indexes so that a pod finds its
//! node in logarithmic time; what a gang that does not fit whole took is given back pod by pod
//! ([`ClusterState::release`]), so it leaves no trace.

use std::collections::{BTreeMap, BTreeSet};

use kai_policy_compiler::model::Strategy;

use super::filters;
use crate::cluster::{Amounts, HostPort, Node, Pod, PodAffinityTerm, Snapshot};

/// `a + sign * b`, per resource.
fn add(a: Amounts, b: Amounts, sign: i64) -> Amounts {
    Amounts {
        gpu: a.gpu + sign * b.gpu,
        cpu: a.cpu + sign * b.cpu,
        memory: a.memory + sign * b.memory,
    }
}

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

/// Room that pods taken off a node would free there (see [`ClusterState::most_pods`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Freed {
    /// What the pods ask.
    pub amounts: Amounts,
    /// What they hold of each GPU device, by device (empty: none).
    pub devices: Vec<i64>,
    /// How many pods.
    pub pods: i64,
}

/// A node's free room as [`ClusterState::most_pods`] reads it, kept to compare with later.
#[derive(Debug, Clone)]
pub(crate) struct NodeRoom {
    free: Amounts,
    devices: Vec<i64>,
    pod_slots: i64,
}

impl Freed {
    /// Adds a pod on `slot` of a node with `devices` GPU devices.
    pub fn add(&mut self, slot: &Slot, pod: &Pod, devices: usize) {
        self.amounts = add(self.amounts, pod.request, 1);
        self.pods += 1;
        if !slot.devices.is_empty() && self.devices.is_empty() {
            self.devices = vec![0; devices];
        }
        for &(d, amount) in &slot.devices {
            self.devices[d] += amount;
        }
    }
}

#[derive(Debug, Clone)]
struct NodeFree {
    free: Amounts,
    devices: Vec<i64>,
    whole: u32,
    /// What pods being deleted since before the cycle still hold here.
    held: Held,
    /// Free amounts of every other resource the node reports.
    extended: BTreeMap<String, i64>,
    /// Pods that may still come (`i64::MAX` when the node does not report a limit).
    pod_slots: i64,
    /// Host ports taken.
    ports: Vec<HostPort>,
}

/// What pods being deleted since before the cycle still hold on a node ([`ClusterState::hold`]):
/// not free here until they are gone, but free in KAI's ranking of nodes, which counts idle
/// and releasing room alike (`nodeplacement/pack.go`, `spread.go`: `NonAllocatedResource`).
#[derive(Debug, Clone, Default)]
struct Held {
    /// Per device, the thousandths held (empty while nothing is).
    devices: Vec<i64>,
    gpu: i64,
    cpu: i64,
    /// Devices that would be whole if those pods were gone, and are not now.
    whole: u32,
}

/// A limit's nodes ([`ClusterState::limit_to`]) and their CPU index entries, in order.
type LimitIndex = (Vec<bool>, Vec<(i64, usize)>);

/// Whether a node's changes are not yet in the indexes ([`ClusterState::settle`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Unsettled {
    No,
    /// Free amounts changed, no GPU device among them.
    Amounts,
    /// GPU devices changed too.
    Devices,
}

/// A node's keys in the indexes: what ranks it, counting what pods being deleted hold there.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
struct Keys {
    whole: u32,
    cpu: i64,
    packed: Packed,
    shared_room: bool,
}

/// Whether a pod placed at `to` is where it was (`from`): on the same node and, for a shared
/// pod whose devices KAI's binder named, on the same devices; placed on another device it
/// moves, as KAI pipelines it to another GPU group. Other pods' devices are this state's own
/// bookkeeping, which Kubernetes does not see.
pub fn same_place(pod: &Pod, from: &Slot, to: &Slot) -> bool {
    from.node == to.node && (from.devices == to.devices || pod.gpu_groups().is_empty())
}

/// Which device each GPU group (KAI's name for a shared device) of a node was given while the
/// state is rebuilt.
#[derive(Debug, Default)]
struct NamedDevices<'p> {
    /// Per node, each group seen there and its device.
    by_node: std::collections::HashMap<usize, Vec<(&'p str, usize)>>,
}

impl<'p> NamedDevices<'p> {
    /// The devices a shared pod with named groups takes on `node` (its free room per device
    /// `free`): each group's device, given on first sight the emptiest device no other group
    /// has (lowest index among equals), or the emptiest of all when every device has one.
    fn of(&mut self, free: &[i64], node: usize, pod: &'p Pod) -> Vec<(usize, i64)> {
        let share = pod.share_per_device();
        let groups = self.by_node.entry(node).or_default();
        let mut devices: Vec<(usize, i64)> = Vec::new();
        for group in pod.gpu_groups() {
            if let Some(&(_, d)) = groups.iter().find(|(g, _)| *g == group) {
                devices.push((d, share));
                continue;
            }
            let emptiest = |free_only: bool| {
                (0..free.len())
                    .filter(|d| !free_only || !groups.iter().any(|(_, e)| e == d))
                    .filter(|d| !devices.iter().any(|(e, _)| e == d))
                    .max_by_key(|&d| (free[d], std::cmp::Reverse(d)))
            };
            let Some(d) = emptiest(true).or_else(|| emptiest(false)) else {
                continue;
            };
            groups.push((group, d));
            devices.push((d, share));
        }
        devices
    }
}

/// A pod on a node, as inter-pod (anti-)affinity sees it.
#[derive(Debug, Clone)]
struct Resident {
    key: (String, String),
    labels: BTreeMap<String, String>,
    anti: Vec<PodAffinityTerm>,
}

/// The cluster's free resources during one cycle.
#[derive(Debug, Clone)]
pub struct ClusterState<'s> {
    nodes: Vec<NodeFree>,
    /// The nodes themselves: the filters read their labels, taints and conditions.
    meta: &'s [Node],
    /// Each node's MIG rule, read once from its labels and resources.
    mig: Vec<filters::Mig>,
    /// Nodes running a legacy MIG pod ([`crate::cluster::Pod::legacy_mig`]).
    legacy_mig: Vec<bool>,
    /// Pods per node, kept only when some pod has inter-pod (anti-)affinity terms.
    residents: Option<Vec<Vec<Resident>>>,
    soft_taints: bool,
    schedulable: Vec<bool>,
    /// Schedulable nodes by (whole free devices, index): where whole-GPU pods look.
    by_gpu: BTreeSet<(u32, usize)>,
    /// Schedulable nodes by (free CPU, index): where CPU-only pods look.
    by_cpu: BTreeSet<(i64, usize)>,
    /// Per node: it has no GPU (none allocatable, no MIG; KAI's `NodeInfo.IsCPUOnlyNode`).
    cpu_only: Vec<bool>,
    /// The schedulable nodes without GPUs by (free CPU, index): where CPU-only pods look first.
    by_cpu_plain: BTreeSet<(i64, usize)>,
    /// The schedulable nodes with a shared device partly used and not full, by ([`Packed`],
    /// index): where shared pods look first under binpack.
    by_shared_room: BTreeSet<(Packed, usize)>,
    /// Schedulable nodes by ([`Packed`], index): where fractional pods look.
    by_free_gpu: BTreeSet<(Packed, usize)>,
    /// The most devices of a node: the last whole-device count [`Packed`] keys can have, and
    /// the largest share's denominator.
    most_whole: u32,
    /// Whether spread ranks GPU nodes, and CPU, by a share of the node kept in its own index
    /// ([`Self::index_shares`]); otherwise every node has as much of it as the others, and the
    /// amounts' indexes give the same order.
    gpu_shares: bool,
    cpu_shares: bool,
    /// Schedulable nodes with GPUs by ([`share_key`] of their free GPU, index): where GPU pods
    /// look under spread when nodes have different numbers of devices.
    by_gpu_share: BTreeSet<(i64, usize)>,
    /// Schedulable nodes by ([`share_key`] of their free CPU, index), and those without GPUs:
    /// where CPU-only pods look under spread when nodes have different CPU.
    by_cpu_share: BTreeSet<(i64, usize)>,
    by_cpu_plain_share: BTreeSet<(i64, usize)>,
    /// The most allocatable CPU of a schedulable node: no node whose free share is below
    /// `need / most_cpu` can hold `need` (and likewise [`Self::most_whole`] for devices).
    most_cpu: i64,
    /// What is free on all schedulable nodes together.
    free_total: Amounts,
    /// Which state the free amounts are in: a new number at every change, or an earlier one
    /// when [`Self::rewind`] says every change since was undone.
    version: u64,
    /// The last number handed out.
    versions: u64,
    /// Per node, the number handed out at its last change: what changed since a given number.
    changed_at: Vec<u64>,
    /// The pods bound to its nodes that are being deleted, in pod order: noted as the pods are
    /// read to bind them, so that no later pass reads every pod again.
    deleting: Vec<usize>,
    /// The nodes of the latest changes, in order: the one numbered `log_from + 1 + i` at `i`.
    /// A few changes since a number are read here rather than from every node's `changed_at`.
    change_log: Vec<u32>,
    /// The number before the first change `change_log` holds.
    log_from: u64,
    /// Why pods did not fit, kept per pod shape and brought up to date from `changed_at`.
    pub(super) why_not: super::placement::WhyNot,
    /// Per node, what the pods bound there and released in this cycle (evicted or moved away)
    /// leave: free in this state, but releasing, not idle, in KAI's (`NodeInfo.Releasing`).
    releasing: Vec<Amounts>,
    /// How many nodes have releasing room.
    releasing_nodes: usize,
    /// Whether placements are pipelines now (the actions that evict: KAI's eviction solvers
    /// pipeline every task they place, `AllocateJob(.., isPipelineOnly)`).
    pipelining: bool,
    /// Per node, what pods pipelined there (placed off their own node while pipelining) take:
    /// KAI takes it from the node's releasing room and leaves its idle room as it was
    /// (`NodeInfo.addTaskResources`, a pipelined task).
    pipelined: Vec<Amounts>,
    /// Per node, the pod slots of `releasing` and of `pipelined`: a pod bound now needs a slot
    /// no pod being released still holds (KAI's idle vector counts pods too).
    releasing_pods: Vec<i64>,
    pipelined_pods: Vec<i64>,
    /// The nodes an eviction solver's attempt may place on (`None`: every node), KAI's
    /// feasible nodes for the preemptor with its victims' nodes added.
    scenario: Option<Vec<bool>>,
    /// While placements are limited, the schedulable nodes among those allowed by (free CPU,
    /// index): `by_cpu` less the nodes outside the limit, so that a walk by free CPU does not
    /// step over the thousands of nodes outside an attempt's few hundred ([`Self::cpu_index`]).
    scenario_cpu: BTreeSet<(i64, usize)>,
    /// While placements are limited, the nodes that `by_cpu` (read by no walk then) still holds
    /// under the key they had when the limit was set, with that key, and per node whether it is
    /// among them: [`Self::unlimit`] moves those whose key changed. A failed attempt gives back
    /// all it took, so most end where they began and are never moved in `by_cpu`.
    by_cpu_behind: Vec<(usize, i64)>,
    by_cpu_lags: Vec<bool>,
    /// The nodes of the last limit ([`Self::limit_to`]) and their CPU index entries, in order:
    /// the next attempt's solver's nodes are mostly the same nodes under the same keys (a
    /// failed attempt gives back all it took), and are then not sorted again.
    last_limit: Option<LimitIndex>,
    /// Per schedulable node, the [`Keys`] the indexes hold it under. Changes move a node in
    /// the indexes only when they are next read ([`Self::settle`]): an eviction attempt frees
    /// and takes back hundreds of victims' room between two searches, most of it given back
    /// before any search, and a node whose keys end where they began is not moved at all.
    indexed: Vec<Keys>,
    /// Nodes changed since the indexes were last brought up to date, and per node whether a
    /// change was not yet settled: [`Unsettled::Devices`] when it touched GPU devices (the
    /// shared-room index is then looked at too).
    unsettled: Vec<usize>,
    unsettled_by_node: Vec<Unsettled>,
    /// Whether a node has MIG instances (their free count is read only there).
    has_mig: Vec<bool>,
    /// Per node, whether it has GPUs free ([`Self::nodes_with_free_gpus`]), kept as pods come
    /// and go: each eviction attempt asks it of every node.
    free_gpus: Vec<bool>,
    /// The stamp at [`Self::note_changes`], while noting: the nodes changed since are read
    /// from the change log.
    noting_from: Option<u64>,
    /// The DRA claims and devices, when some pod uses a claim.
    pub(super) dra: Option<super::dra::DraState<'s>>,
    /// The nodes' NUMA zones, when some node has them.
    pub(super) numa: Option<super::numa::NumaState<'s>>,
}

impl<'s> ClusterState<'s> {
    /// The free resources left by the bound pods of a snapshot (in pod order, so device
    /// assignment is deterministic). Returns the state and each bound pod's slot.
    pub fn new(snapshot: &'s Snapshot) -> (Self, Vec<Option<Slot>>) {
        let nodes: Vec<NodeFree> = snapshot
            .nodes
            .iter()
            .map(|n| NodeFree {
                free: n.allocatable,
                devices: vec![DEVICE; n.gpu_devices()],
                whole: n.gpu_devices() as u32,
                held: Held::default(),
                extended: n.extended.clone(),
                pod_slots: n.max_pods.map_or(i64::MAX, i64::from),
                ports: Vec::new(),
            })
            .collect();
        let tracked = snapshot.pods.iter().any(|p| p.constraints.has_pod_terms());
        let mut state = ClusterState {
            schedulable: snapshot
                .nodes
                .iter()
                .map(crate::cluster::Node::takes_pods)
                .collect(),
            residents: tracked.then(|| vec![Vec::new(); snapshot.nodes.len()]),
            soft_taints: snapshot.nodes.iter().any(|n| {
                n.taints
                    .iter()
                    .any(|t| t.effect == crate::cluster::TaintEffect::PreferNoSchedule)
            }),
            meta: &snapshot.nodes,
            mig: snapshot.nodes.iter().map(filters::mig).collect(),
            legacy_mig: {
                let legacy: std::collections::HashSet<&str> = snapshot
                    .pods
                    .iter()
                    .filter(|p| p.legacy_mig)
                    .filter_map(|p| p.node.as_deref())
                    .collect();
                snapshot
                    .nodes
                    .iter()
                    .map(|n| legacy.contains(n.name.as_str()))
                    .collect()
            },
            nodes,
            by_gpu: BTreeSet::new(),
            by_cpu: BTreeSet::new(),
            cpu_only: snapshot
                .nodes
                .iter()
                .map(|n| n.allocatable.gpu <= 0 && !filters::mig_enabled(n))
                .collect(),
            by_cpu_plain: BTreeSet::new(),
            by_shared_room: BTreeSet::new(),
            by_free_gpu: BTreeSet::new(),
            most_whole: snapshot
                .nodes
                .iter()
                .map(|n| n.gpu_devices() as u32)
                .max()
                .unwrap_or(0),
            gpu_shares: false,
            cpu_shares: false,
            by_gpu_share: BTreeSet::new(),
            by_cpu_share: BTreeSet::new(),
            by_cpu_plain_share: BTreeSet::new(),
            most_cpu: 0,
            free_total: Amounts::default(),
            version: 0,
            versions: 0,
            changed_at: vec![0; snapshot.nodes.len()],
            deleting: Vec::new(),
            change_log: Vec::new(),
            log_from: 0,
            why_not: Default::default(),
            releasing: vec![Amounts::default(); snapshot.nodes.len()],
            releasing_nodes: 0,
            pipelining: false,
            pipelined: vec![Amounts::default(); snapshot.nodes.len()],
            releasing_pods: vec![0; snapshot.nodes.len()],
            pipelined_pods: vec![0; snapshot.nodes.len()],
            scenario: None,
            scenario_cpu: BTreeSet::new(),
            by_cpu_behind: Vec::new(),
            by_cpu_lags: vec![false; snapshot.nodes.len()],
            last_limit: None,
            indexed: vec![Keys::default(); snapshot.nodes.len()],
            unsettled: Vec::new(),
            unsettled_by_node: vec![Unsettled::No; snapshot.nodes.len()],
            has_mig: snapshot
                .nodes
                .iter()
                .map(|n| crate::cluster::mig_gpus(&n.extended) > 0)
                .collect(),
            free_gpus: Vec::new(),
            noting_from: None,
            dra: super::dra::DraState::new(snapshot),
            numa: super::numa::NumaState::new(snapshot),
        };
        for (n, node) in snapshot.nodes.iter().enumerate() {
            if state.schedulable[n] {
                state.free_total = add(state.free_total, node.allocatable, 1);
            }
        }
        state.free_gpus = (0..state.nodes.len())
            .map(|n| state.gpus_free_on(n))
            .collect();
        let index = snapshot.node_index();
        let mut slots = vec![None; snapshot.pods.len()];
        // Kubernetes does not say which device a pod holds, so rebuild it: whole-device pods
        // first (they need empty devices), then shared pods whose devices KAI's binder named
        // (each named device one of the node's), then the other shared pods largest first onto
        // partly used ones.
        // Each pod's place in that order is worked out as it is read: the sort then compares
        // numbers, not pods scattered over memory.
        type Order = (bool, bool, std::cmp::Reverse<i64>, usize);
        let mut deleting = Vec::new();
        let mut bound: Vec<(Order, usize)> = snapshot
            .pods
            .iter()
            .enumerate()
            .filter_map(|(p, pod)| {
                let &n = index.get(pod.node.as_deref()?)?;
                if pod.terminating {
                    deleting.push(p);
                }
                let named = pod.gpu_groups().len() == pod.shared_devices.max(1) as usize;
                let order = (
                    pod.fractional,
                    !named,
                    std::cmp::Reverse(pod.request.gpu),
                    p,
                );
                Some((order, n))
            })
            .collect();
        state.deleting = deleting;
        // The pod's index ends each key: no two are equal.
        bound.sort_unstable();
        let mut named_devices = NamedDevices::default();
        for ((_, unnamed, _, p), node) in bound {
            let named = !unnamed;
            let pod = &snapshot.pods[p];
            // A bound pod always takes its place; where the snapshot over-commits a node, it is
            // charged to the emptiest devices so that nothing else is placed there.
            let devices = match named {
                true => named_devices.of(&state.nodes[node].devices, node, pod),
                false => state
                    .resources_fit(node, pod, Strategy::Binpack)
                    .unwrap_or_else(|| state.overcommit(node, pod)),
            };
            let slot = Slot { node, devices };
            state.apply(&slot, pod, -1);
            slots[p] = Some(slot);
        }
        for i in 0..state.nodes.len() {
            state.index(i);
        }
        (state, slots)
    }

    /// Puts a schedulable node into the indexes.
    fn index(&mut self, node: usize) {
        if !self.schedulable[node] {
            return;
        }
        let k = self.keys(node, true);
        self.indexed[node] = k;
        self.by_gpu.insert((k.whole, node));
        self.by_cpu.insert((k.cpu, node));
        self.by_free_gpu.insert((k.packed, node));
        if self.cpu_only[node] {
            self.by_cpu_plain.insert((k.cpu, node));
        }
        if k.shared_room {
            self.by_shared_room.insert((k.packed, node));
        }
    }

    /// A node's [`Keys`] (with `shared`, whether it has room on a used shared device; else
    /// `false`, unread).
    fn keys(&self, node: usize, shared: bool) -> Keys {
        let n = &self.nodes[node];
        let whole = n.whole + n.held.whole;
        Keys {
            whole,
            cpu: n.free.cpu + n.held.cpu,
            packed: (whole, n.free.gpu + n.held.gpu),
            shared_room: shared && shared_room(&n.devices) > 0,
        }
    }

    /// Counts what a pod being deleted since before the cycle holds on its slot (`sign` 1) or
    /// no longer holds there (-1) as free for ranking the node ([`Held`]); the node moves in
    /// the indexes at the next [`Self::settle`].
    pub fn hold(&mut self, slot: &Slot, pod: &Pod, sign: i64) {
        let n = &mut self.nodes[slot.node];
        let held = &mut n.held;
        if held.devices.is_empty() {
            held.devices = vec![0; n.devices.len()];
        }
        for &(d, amount) in &slot.devices {
            held.devices[d] += sign * amount;
        }
        held.gpu += sign * pod.request.gpu;
        held.cpu += sign * pod.request.cpu;
        n.held.whole = releasing_whole(&n.devices, &n.held.devices);
        self.unsettle(slot.node, Unsettled::Devices);
    }

    /// Lets spread rank nodes by the share of them that is free, as KAI's does
    /// (`nodeplacement/spread.go: nodeResourceSpread`, `nonAllocated / resourceCount`): for GPU
    /// pods when `gpu`, for pods asking no GPU when `cpu` (the strategies the policy uses).
    /// Where the schedulable nodes all have the same number of devices (or the same CPU), the
    /// shares rank them as the amounts do and nothing more is kept.
    pub fn index_shares(&mut self, gpu: bool, cpu: bool) {
        self.settle();
        let nodes = (0..self.nodes.len()).filter(|&n| self.schedulable[n]);
        let devices: BTreeSet<usize> = nodes
            .clone()
            .map(|n| self.nodes[n].devices.len())
            .filter(|&d| d > 0)
            .collect();
        let cores: BTreeSet<i64> = nodes
            .clone()
            .map(|n| self.meta[n].allocatable.cpu)
            .collect();
        self.gpu_shares = gpu && devices.len() > 1;
        self.cpu_shares = cpu && cores.len() > 1;
        self.most_cpu = cores.last().copied().unwrap_or(0);
        for node in nodes {
            if self.gpu_shares && !self.nodes[node].devices.is_empty() {
                self.by_gpu_share.insert((self.gpu_share(node), node));
            }
            if self.cpu_shares {
                let share = self.cpu_share(node);
                self.by_cpu_share.insert((share, node));
                if self.cpu_only[node] {
                    self.by_cpu_plain_share.insert((share, node));
                }
            }
        }
    }

    /// A node's whole free devices as a share of its devices (KAI's GPU spread score,
    /// `nodeplacement/spread.go: nodeResourceSpread`: idle and releasing GPUs over the node's
    /// GPU count, where a device a shared pod uses is no longer idle,
    /// `gpu_sharing_node_info.go`; its `nodespread_test.go`: "based on free whole gpus").
    fn gpu_share(&self, node: usize) -> i64 {
        share_key(
            i64::from(self.keys(node, false).whole),
            self.nodes[node].devices.len() as i64,
        )
    }

    /// A node's free CPU as a share of its allocatable CPU (KAI's CPU spread score).
    fn cpu_share(&self, node: usize) -> i64 {
        share_key(self.keys(node, false).cpu, self.meta[node].allocatable.cpu)
    }

    /// Applies a pod to its slot's node (`sign` as [`Self::apply`]); the node moves in the
    /// indexes at the next [`Self::settle`] (a CPU-only pod leaves the GPU indexes as they are).
    fn apply_indexed(&mut self, slot: &Slot, pod: &Pod, sign: i64) {
        self.apply(slot, pod, sign);
        let devices = match slot.devices.is_empty() {
            true => Unsettled::Amounts,
            false => Unsettled::Devices,
        };
        self.unsettle(slot.node, devices);
    }

    /// Notes that a node changed since the indexes were last brought up to date.
    fn unsettle(&mut self, node: usize, how: Unsettled) {
        let was = self.unsettled_by_node[node];
        if was == Unsettled::No {
            self.unsettled.push(node);
        }
        self.unsettled_by_node[node] = was.max(how);
    }

    /// Brings the indexes up to date with every change since they were last: before any walk
    /// of them ([`Self::candidates`], [`Self::on_used_shared_devices`]).
    pub fn settle(&mut self) {
        for node in std::mem::take(&mut self.unsettled) {
            let how = std::mem::replace(&mut self.unsettled_by_node[node], Unsettled::No);
            self.reindex(node, how == Unsettled::Devices);
        }
    }

    /// Moves a node in the indexes whose keys changed from those they hold it under (its room
    /// on used shared devices looked at only when `devices` changed).
    fn reindex(&mut self, node: usize, devices: bool) {
        if !self.schedulable[node] {
            return;
        }
        let before = self.indexed[node];
        let mut after = self.keys(node, devices);
        if !devices {
            after.shared_room = before.shared_room;
        }
        self.indexed[node] = after;
        if after.whole != before.whole {
            self.by_gpu.remove(&(before.whole, node));
            self.by_gpu.insert((after.whole, node));
            let count = self.nodes[node].devices.len() as i64;
            if self.gpu_shares && count > 0 {
                let key = |whole: u32| (share_key(i64::from(whole), count), node);
                self.by_gpu_share.remove(&key(before.whole));
                self.by_gpu_share.insert(key(after.whole));
            }
        }
        if after.cpu != before.cpu {
            match &self.scenario {
                Some(nodes) => {
                    if nodes[node] {
                        self.scenario_cpu.remove(&(before.cpu, node));
                        self.scenario_cpu.insert((after.cpu, node));
                    }
                    if !self.by_cpu_lags[node] {
                        self.by_cpu_lags[node] = true;
                        self.by_cpu_behind.push((node, before.cpu));
                    }
                }
                None => {
                    self.by_cpu.remove(&(before.cpu, node));
                    self.by_cpu.insert((after.cpu, node));
                }
            }
            if self.cpu_only[node] {
                self.by_cpu_plain.remove(&(before.cpu, node));
                self.by_cpu_plain.insert((after.cpu, node));
            }
            if self.cpu_shares {
                let total = self.meta[node].allocatable.cpu;
                let (was, now) = (share_key(before.cpu, total), share_key(after.cpu, total));
                self.by_cpu_share.remove(&(was, node));
                self.by_cpu_share.insert((now, node));
                if self.cpu_only[node] {
                    self.by_cpu_plain_share.remove(&(was, node));
                    self.by_cpu_plain_share.insert((now, node));
                }
            }
        }
        if after.packed != before.packed {
            self.by_free_gpu.remove(&(before.packed, node));
            self.by_free_gpu.insert((after.packed, node));
        }
        if devices && (before.shared_room, before.packed) != (after.shared_room, after.packed) {
            if before.shared_room {
                self.by_shared_room.remove(&(before.packed, node));
            }
            if after.shared_room {
                self.by_shared_room.insert((after.packed, node));
            }
        }
        debug_assert!(
            {
                let k = self.keys(node, true);
                self.by_gpu.contains(&(k.whole, node))
                    && (self.by_cpu_lags[node] || self.by_cpu.contains(&(k.cpu, node)))
                    && self.by_free_gpu.contains(&(k.packed, node))
                    && (!self.cpu_only[node] || self.by_cpu_plain.contains(&(k.cpu, node)))
                    && (self.scenario.as_ref().is_none_or(|nodes| !nodes[node])
                        || self.scenario_cpu.contains(&(k.cpu, node)))
                    && k.shared_room == self.by_shared_room.contains(&(k.packed, node))
                    && (!self.gpu_shares
                        || self.nodes[node].devices.is_empty()
                        || self.by_gpu_share.contains(&(self.gpu_share(node), node)))
                    && (!self.cpu_shares
                        || self.by_cpu_share.contains(&(self.cpu_share(node), node))
                            && (!self.cpu_only[node]
                                || self
                                    .by_cpu_plain_share
                                    .contains(&(self.cpu_share(node), node))))
            },
            "node {node} is out of its indexes"
        );
    }

    /// The state's version: equal versions mean equal free amounts everywhere.
    pub fn version(&self) -> u64 {
        self.version
    }

    /// The pods bound to its nodes when the cycle began that are being deleted, in pod order.
    pub fn deleting(&self) -> &[usize] {
        &self.deleting
    }

    /// A number that grows at every change, undone ones too (unlike [`Self::version`]).
    pub fn stamp(&self) -> u64 {
        self.versions
    }

    /// The nodes changed since [`Self::stamp`] was `stamp`, in node order.
    pub fn changed_since(&self, stamp: u64) -> Vec<usize> {
        let changes = self.versions.saturating_sub(stamp) as usize;
        // Sorting a few changes beats reading every node; many, or ones the log no longer
        // holds, are read from the nodes.
        let logged = (self.log_from..=self.versions).contains(&stamp);
        let nodes = if !logged || changes > self.changed_at.len() / 8 {
            self.stamped_since(stamp)
        } else {
            let from = (stamp - self.log_from) as usize;
            let mut nodes: Vec<usize> = self.change_log[from..]
                .iter()
                .map(|&n| n as usize)
                .collect();
            nodes.sort_unstable();
            nodes.dedup();
            nodes
        };
        debug_assert_eq!(
            nodes,
            self.stamped_since(stamp),
            "the change log disagrees with the nodes"
        );
        nodes
    }

    /// [`Self::changed_since`] read from every node's stamp.
    fn stamped_since(&self, stamp: u64) -> Vec<usize> {
        (0..self.changed_at.len())
            .filter(|&n| self.changed_at[n] > stamp)
            .collect()
    }

    /// Says the state is again as it was at `version`: every change since has been undone.
    pub fn rewind(&mut self, version: u64) {
        self.version = version;
    }

    /// Counts a pod bound on `node` as released from it in this cycle (`sign` 1), or back
    /// (`sign` -1).
    fn mark_releasing(&mut self, node: usize, pod: &Pod, sign: i64) {
        let was = self.releases(node);
        self.releasing[node] = add(self.releasing[node], pod.request, sign);
        self.releasing_pods[node] += sign;
        match (was, self.releases(node)) {
            (false, true) => self.releasing_nodes += 1,
            (true, false) => self.releasing_nodes -= 1,
            _ => {}
        }
    }

    /// Whether room (or a pod slot) is being released on a node.
    fn releases(&self, node: usize) -> bool {
        self.releasing[node] != Amounts::default() || self.releasing_pods[node] != 0
    }

    /// The room released in this cycle on a node (see [`Self::track`]).
    pub fn releasing(&self, node: usize) -> Amounts {
        self.releasing[node]
    }

    /// Whether some node has room released in this cycle.
    pub fn any_releasing(&self) -> bool {
        self.releasing_nodes > 0
    }

    /// A node's idle room (KAI's idle vector): its free room less what is being released there
    /// beyond what pods pipelined there took (they take releasing room first), and its idle pod
    /// slots (`i64::MAX` without a limit). `None` while nothing is being released there: all
    /// its free room is idle.
    fn idle(&self, node: usize) -> Option<(Amounts, i64)> {
        if !self.releases(node) {
            return None;
        }
        let n = &self.nodes[node];
        let room = add(
            add(n.free, self.releasing[node], -1),
            self.pipelined[node],
            1,
        );
        let slots = match n.pod_slots {
            i64::MAX => i64::MAX,
            free => free - self.releasing_pods[node] + self.pipelined_pods[node],
        };
        Some((room, slots))
    }

    /// Whether a pod placed on a node took idle room only: the room being released there (less
    /// what pipelined pods took) is still free in what the pod asks and in pod slots. A pod
    /// that took some of it binds only once that room is gone: it is nominated.
    pub fn took_idle_only(&self, node: usize, pod: &Pod) -> bool {
        let Some((room, slots)) = self.idle(node) else {
            return true;
        };
        let kept = |asks: i64, idle: i64| asks == 0 || idle >= 0;
        slots >= 0
            && kept(pod.request.gpu, room.gpu)
            && kept(pod.request.cpu, room.cpu)
            && kept(pod.request.memory, room.memory)
    }

    /// Whether a pod fits a node's idle room (KAI's `NodeInfo.IsTaskAllocatable` on the idle
    /// vector, [`Self::idle`]).
    pub fn fits_idle(&self, node: usize, pod: &Pod) -> bool {
        let Some((room, slots)) = self.idle(node) else {
            return true;
        };
        slots >= 1
            && room.gpu >= pod.request.gpu
            && room.cpu >= pod.request.cpu
            && room.memory >= pod.request.memory
    }

    /// What is free on all schedulable nodes together.
    pub fn free_total(&self) -> Amounts {
        self.free_total
    }

    /// Free thousandths of each GPU device of a node.
    pub fn device_free(&self, node: usize) -> &[i64] {
        &self.nodes[node].devices
    }

    /// Free amounts of a node.
    pub fn free(&self, node: usize) -> Amounts {
        self.nodes[node].free
    }

    /// At most how many copies of `pod` fit a node's free room with `freed` added, counting
    /// only CPU, memory, GPU devices and pod slots, each of which every placement needs: a bound
    /// from above on what placement can find there, to prove a gang cannot fit.
    pub fn most_pods(&self, node: usize, pod: &Pod, freed: Option<&Freed>) -> u64 {
        let n = &self.nodes[node];
        let none = Freed::default();
        let freed = freed.unwrap_or(&none);
        let slots = match n.pod_slots {
            i64::MAX => i64::MAX,
            left => left + freed.pods,
        };
        self.copies(node, pod, add(n.free, freed.amounts, 1), slots, |d| {
            n.devices[d] + freed.devices.get(d).copied().unwrap_or(0)
        })
    }

    /// [`Self::most_pods`] with the node's free room `room` (its room at some other time).
    pub(crate) fn most_pods_in(&self, node: usize, pod: &Pod, room: &NodeRoom) -> u64 {
        self.copies(node, pod, room.free, room.pod_slots, |d| room.devices[d])
    }

    /// How many copies of `pod` fit a node with `free` amounts, `slots` pod slots left
    /// (`i64::MAX`: no limit) and `device(d)` free on each GPU device.
    fn copies(
        &self,
        node: usize,
        pod: &Pod,
        free: Amounts,
        slots: i64,
        device: impl Fn(usize) -> i64,
    ) -> u64 {
        if !self.schedulable[node] {
            return 0;
        }
        let copies = |free: i64, asks: i64| match asks {
            ..=0 => u64::MAX,
            _ => (free.max(0) / asks) as u64,
        };
        let slots = match slots {
            i64::MAX => u64::MAX,
            left => left.max(0) as u64,
        };
        let mut most = slots
            .min(copies(free.cpu, pod.request.cpu))
            .min(copies(free.memory, pod.request.memory));
        if pod.request.gpu > 0 {
            let devices = 0..self.nodes[node].devices.len();
            most = most.min(if pod.fractional {
                let share = pod.share_per_device();
                let shares =
                    devices.fold(0u64, |all, d| all.saturating_add(copies(device(d), share)));
                shares / u64::from(pod.shared_devices.max(1))
            } else {
                let whole = devices.filter(|&d| device(d) == DEVICE).count() as u64;
                whole / ((pod.request.gpu + DEVICE - 1) / DEVICE) as u64
            });
        }
        most
    }

    /// Starts noting the nodes whose free room changes, forgetting those noted so far.
    pub(crate) fn note_changes(&mut self) {
        self.noting_from = Some(self.versions);
    }

    /// Stops noting; the nodes noted, each once, in order.
    pub(crate) fn take_noted(&mut self) -> Vec<usize> {
        self.noting_from
            .take()
            .map_or_else(Vec::new, |stamp| self.changed_since(stamp))
    }

    /// A node's free room now.
    pub(crate) fn node_room(&self, node: usize) -> NodeRoom {
        let n = &self.nodes[node];
        NodeRoom {
            free: n.free,
            devices: n.devices.clone(),
            pod_slots: n.pod_slots,
        }
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

    /// Whether new pods may go to this node (Ready and not cordoned).
    pub fn schedulable(&self, node: usize) -> bool {
        self.schedulable[node]
    }

    /// The node itself.
    pub fn node(&self, node: usize) -> &Node {
        &self.meta[node]
    }

    /// Whether some schedulable node has a `PreferNoSchedule` taint (pods then weigh nodes).
    pub fn soft_taints(&self) -> bool {
        self.soft_taints
    }

    /// Whether the cycle follows inter-pod terms (some pod has affinity or anti-affinity
    /// terms): then a pod leaving one node can open others in its topology domain.
    pub fn tracks_inter_pod_terms(&self) -> bool {
        self.residents.is_some()
    }

    /// Whether a node's answer to a pod may change when another node changes: with inter-pod
    /// terms, and with DRA claims (a claim freed on one node may be allocated on any).
    pub fn answers_depend_on_other_nodes(&self) -> bool {
        self.residents.is_some() || self.dra.is_some()
    }

    /// Whether a pod could go on a node as it is now: schedulable, passing every filter, with
    /// room (the gang's own placement rules aside).
    pub fn fits_now(&self, node: usize, pod: &Pod, strategy: Strategy) -> bool {
        self.schedulable(node)
            && self.admits(node, pod)
            && self.devices_on_candidate(node, pod, strategy).is_some()
    }

    /// Whether [`Self::fits_now`] answers the same for pods `a` and `b` on every node: they ask
    /// the same and may go to the same places, neither has claims (a claim is its pod's own),
    /// and, where inter-pod terms are tracked, they have the same namespace and labels. A
    /// gang's pods mostly are alike, and checking one of them answers for all.
    pub fn fit_alike(&self, a: &Pod, b: &Pod) -> bool {
        a.constraints.claims.is_empty()
            && a.dra_gpus == b.dra_gpus
            && a.numa_zones == b.numa_zones
            && super::placement::same_needs(a, b, self.tracks_inter_pod_terms())
    }

    /// Whether a pod passes every filter that does not depend on what is free on the node.
    pub fn admits(&self, node: usize, pod: &Pod) -> bool {
        self.misfit(node, pod).is_none()
    }

    /// The first filter a node fails for a pod whatever is free on it ([`filters::misfit`],
    /// then the node's MIG rule).
    pub fn misfit(&self, node: usize, pod: &Pod) -> Option<filters::Misfit> {
        if pod.legacy_mig {
            return Some(filters::Misfit::LegacyMig);
        }
        filters::misfit(&self.meta[node], pod)
            .or_else(|| filters::mig_misfit(self.mig[node], pod))
            .or_else(|| {
                (self.legacy_mig[node] && filters::asks_mig(pod))
                    .then_some(filters::Misfit::LegacyMigNode)
            })
            .or_else(|| self.dra.as_ref()?.misfit(pod).map(filters::Misfit::Dra))
    }

    /// Takes (`sign = -1`) or gives back (`sign = 1`) what a pod holds.
    fn apply(&mut self, slot: &Slot, pod: &Pod, sign: i64) {
        self.versions += 1;
        self.version = self.versions;
        self.changed_at[slot.node] = self.versions;
        // Only the latest changes are read from the log: it keeps between one and two nodes'
        // worth of them.
        if self.change_log.len() >= 2 * self.changed_at.len().max(64) {
            let drop = self.change_log.len() / 2;
            self.change_log.drain(..drop);
            self.log_from += drop as u64;
        }
        self.change_log.push(slot.node as u32);
        if self.schedulable[slot.node] {
            self.free_total = add(self.free_total, pod.request, sign);
        }
        let n = &mut self.nodes[slot.node];
        n.free.cpu += sign * pod.request.cpu;
        n.free.memory += sign * pod.request.memory;
        n.free.gpu += sign * pod.request.gpu;
        for &(d, amount) in &slot.devices {
            n.devices[d] += sign * amount;
        }
        n.whole = n.devices.iter().filter(|&&f| f == DEVICE).count() as u32;
        if !n.held.devices.is_empty() {
            n.held.whole = releasing_whole(&n.devices, &n.held.devices);
        }
        for (name, amount) in &pod.extended {
            *n.extended.entry(name.clone()).or_default() += sign * amount;
        }
        if n.pod_slots != i64::MAX {
            n.pod_slots += sign;
        }
        let ports = &pod.constraints.host_ports;
        if sign < 0 {
            n.ports.extend(ports.iter().cloned());
        } else {
            for port in ports {
                if let Some(i) = n.ports.iter().position(|p| p == port) {
                    n.ports.swap_remove(i);
                }
            }
        }
        if let Some(residents) = &mut self.residents {
            let key = (pod.namespace.clone(), pod.name.clone());
            let on = &mut residents[slot.node];
            if sign < 0 {
                on.push(Resident {
                    key,
                    labels: pod.labels.clone(),
                    anti: pod.constraints.pod_anti_affinity.clone(),
                });
            } else if let Some(i) = on.iter().position(|r| r.key == key) {
                on.swap_remove(i);
            }
        }
        self.free_gpus[slot.node] = self.gpus_free_on(slot.node);
    }

    /// Whether a node has given more than it has in some resource, device, pod slot or host
    /// port; `None` in a cycle whose pods use inter-pod terms, which this cannot judge (callers
    /// then place again instead).
    pub fn overdrawn(&self, node: usize) -> Option<bool> {
        if self.residents.is_some() {
            return None;
        }
        let n = &self.nodes[node];
        let ports_collide = n
            .ports
            .iter()
            .enumerate()
            .any(|(i, a)| n.ports[i + 1..].iter().any(|b| ports_collide(a, b)));
        Some(
            n.free.cpu < 0
                || n.free.memory < 0
                || n.free.gpu < 0
                || n.pod_slots < 0
                || n.devices.iter().any(|&d| d < 0)
                || n.extended.values().any(|&v| v < 0)
                || ports_collide
                || self.dra.as_ref().is_some_and(|d| d.overdrawn(node))
                || self.numa.as_ref().is_some_and(|z| z.overdrawn(node)),
        )
    }

    /// Places a pod on a slot.
    pub fn take(&mut self, slot: &Slot, pod: &Pod) {
        self.apply_indexed(slot, pod, -1);
        self.track(slot, pod, 1);
        if let Some(dra) = &mut self.dra {
            dra.take(slot.node, pod);
        }
        if let Some(numa) = &mut self.numa {
            numa.take(slot.node, pod);
        }
    }

    /// Frees what a pod held.
    pub fn release(&mut self, slot: &Slot, pod: &Pod) {
        self.apply_indexed(slot, pod, 1);
        self.track(slot, pod, -1);
        if let Some(dra) = &mut self.dra {
            dra.release(pod);
        }
        if let Some(numa) = &mut self.numa {
            numa.release(pod);
        }
    }

    /// Places a pod on a slot without counting it as pipelined there: a pod allocate bound in
    /// this cycle, taken as a victim and put back (see [`Self::release_unpipelined`]).
    pub fn take_unpipelined(&mut self, slot: &Slot, pod: &Pod) {
        let pipelining = std::mem::replace(&mut self.pipelining, false);
        self.take(slot, pod);
        self.pipelining = pipelining;
    }

    /// Frees what a pod allocate bound in this cycle held: its room was idle room, never
    /// counted as pipelined, so freeing it takes nothing off what pipelined pods hold.
    pub fn release_unpipelined(&mut self, slot: &Slot, pod: &Pod) {
        let pipelining = std::mem::replace(&mut self.pipelining, false);
        self.release(slot, pod);
        self.pipelining = pipelining;
    }

    /// Counts a pod allocate nominates onto room being released as pipelined there, as the
    /// actions after it count theirs (see [`Self::track`]): a pod bound beside it then takes
    /// idle room only where the pipelined pods left the releasing room theirs.
    pub fn count_nominated(&mut self, node: usize, pod: &Pod) {
        if !self.pipelining {
            self.pipelined[node] = add(self.pipelined[node], pod.request, 1);
            self.pipelined_pods[node] += 1;
        }
    }

    /// Whether placements off a pod's own node are pipelines now (see [`Self::track`]).
    pub fn is_pipelining(&self) -> bool {
        self.pipelining
    }

    /// From now on, placements off a pod's own node are pipelines (see [`Self::track`]).
    pub fn start_pipelining(&mut self) {
        self.pipelining = true;
    }

    /// Keeps the releasing and pipelined room as a pod is placed (`sign` 1) or taken off
    /// (-1). On the node it is bound to, leaving makes its room releasing (KAI's
    /// `NodeInfo.Releasing`) and coming back undoes that (KAI's `Unevict`); elsewhere, while
    /// pipelining, it is pipelined there.
    fn track(&mut self, slot: &Slot, pod: &Pod, sign: i64) {
        if pod.node.as_deref() == Some(self.meta[slot.node].name.as_str()) {
            self.mark_releasing(slot.node, pod, -sign);
        } else if self.pipelining {
            self.pipelined[slot.node] = add(self.pipelined[slot.node], pod.request, sign);
            self.pipelined_pods[slot.node] += sign;
        }
    }

    /// The devices a pod would take on a node [`Self::candidates`] gave for it (schedulable,
    /// passing the pod's node filters), if every filter that depends on what is free passes:
    /// its resources of every kind, pod slots, host ports and inter-pod terms.
    pub fn devices_on_candidate(
        &self,
        node: usize,
        pod: &Pod,
        strategy: Strategy,
    ) -> Option<Vec<(usize, i64)>> {
        if self.room(node, pod).is_some() {
            return None;
        }
        self.resources_fit(node, pod, strategy)
    }

    /// What besides CPU, memory and GPU stops a pod on a node now: a resource it lacks, no pod
    /// slot left, a host port taken, or an inter-pod term broken.
    pub fn room(&self, node: usize, pod: &Pod) -> Option<Shortage> {
        let n = &self.nodes[node];
        if n.pod_slots < 1 {
            return Some(Shortage::PodSlots);
        }
        for (name, &need) in &pod.extended {
            let free = n.extended.get(name).copied().unwrap_or(0);
            if free < need {
                return Some(Shortage::Extended(name.clone(), need, free));
            }
        }
        for port in &pod.constraints.host_ports {
            if n.ports.iter().any(|p| ports_collide(p, port)) {
                return Some(Shortage::HostPort(port.port));
            }
        }
        if self.residents.is_some() && !self.pod_terms_hold(node, pod) {
            return Some(Shortage::PodAffinity);
        }
        if let Some(why) = self.dra.as_ref().and_then(|d| d.shortage(node, pod)) {
            return Some(Shortage::Dra(why));
        }
        if let Some(policy) = self.numa.as_ref().and_then(|z| z.shortage(node, pod)) {
            return Some(Shortage::Numa(policy));
        }
        None
    }

    /// Kubernetes' `InterPodAffinity` filter: every affinity term finds a matching pod in the
    /// node's domain (or no pod anywhere matches and the pod matches its own term: the first of
    /// a group), no anti-affinity term does, and no resident's anti-affinity selects this pod.
    fn pod_terms_hold(&self, node: usize, pod: &Pod) -> bool {
        let Some(residents) = &self.residents else {
            return true;
        };
        let labels = &self.meta[node].labels;
        let same_domain = |other: usize, key: &str| {
            labels
                .get(key)
                .is_some_and(|v| self.meta[other].labels.get(key) == Some(v))
        };
        // The nodes running a pod the term selects.
        let matching = |term: &PodAffinityTerm| -> Vec<usize> {
            (0..residents.len())
                .filter(|&m| {
                    residents[m]
                        .iter()
                        .any(|r| filters::term_selects(term, &pod.namespace, &r.key.0, &r.labels))
                })
                .collect()
        };
        for term in &pod.constraints.pod_affinity {
            let anywhere = matching(term);
            if anywhere.is_empty() {
                if !filters::term_selects(term, &pod.namespace, &pod.namespace, &pod.labels)
                    || !labels.contains_key(&term.topology_key)
                {
                    return false;
                }
                continue;
            }
            if !anywhere
                .into_iter()
                .any(|m| same_domain(m, &term.topology_key))
            {
                return false;
            }
        }
        for term in &pod.constraints.pod_anti_affinity {
            if matching(term)
                .into_iter()
                .any(|m| same_domain(m, &term.topology_key))
            {
                return false;
            }
        }
        residents.iter().enumerate().all(|(m, on)| {
            on.iter().all(|r| {
                r.anti.iter().all(|term| {
                    !same_domain(m, &term.topology_key)
                        || !filters::term_selects(term, &r.key.0, &pod.namespace, &pod.labels)
                })
            })
        })
    }

    /// The devices a pod would take on a node counting only CPU, memory and GPU.
    fn resources_fit(
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
            // Shared devices: binpack fills partly used devices first, spread the emptiest.
            let share = pod.share_per_device();
            let mut fits: Vec<(usize, i64)> = n
                .devices
                .iter()
                .copied()
                .enumerate()
                .filter(|&(_, f)| f >= share)
                .collect();
            match strategy {
                Strategy::Binpack => fits.sort_by_key(|&(d, f)| (f, d)),
                Strategy::Spread => fits.sort_by_key(|&(d, f)| (std::cmp::Reverse(f), d)),
            }
            let count = pod.shared_devices.max(1) as usize;
            if fits.len() < count {
                return None;
            }
            return Some(
                fits.into_iter()
                    .take(count)
                    .map(|(d, _)| (d, share))
                    .collect(),
            );
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
                left.min(pod.share_per_device())
            } else {
                left.min(DEVICE)
            };
            taken.push((d, amount));
            left -= amount;
        }
        taken
    }

    /// Candidate nodes for a pod in strategy order: binpack fullest first, spread emptiest
    /// first. Only schedulable nodes that pass the pod's node filters; the caller still checks
    /// fit, and has settled the indexes ([`Self::settle`]) since the last change.
    pub fn candidates<'c>(
        &'c self,
        pod: &'c Pod,
        strategy: Strategy,
    ) -> Box<dyn Iterator<Item = usize> + 'c> {
        self.candidates_where(pod, strategy, false)
    }

    /// [`Self::candidates`], with `idle_only` only the nodes where the pod fits in idle room
    /// ([`Self::fits_idle`]).
    pub fn candidates_where<'c>(
        &'c self,
        pod: &'c Pod,
        strategy: Strategy,
        idle_only: bool,
    ) -> Box<dyn Iterator<Item = usize> + 'c> {
        Box::new(
            self.by_strategy(pod, strategy)
                .filter(move |&n| !idle_only || self.fits_idle(n, pod))
                .filter(move |&n| self.admits(n, pod)),
        )
    }

    /// Per node, whether it has GPUs idle or being released in this cycle, whole or part of a
    /// shared device, MIG instances among them (KAI's `GetSumOfIdleGPUs` +
    /// `GetSumOfReleasingGPUs` above 0; pods terminating before the cycle aside, which hold
    /// their room here).
    pub fn nodes_with_free_gpus(&self) -> Vec<bool> {
        debug_assert!(
            (0..self.len()).all(|n| self.free_gpus[n] == self.gpus_free_on(n)),
            "the nodes' free GPUs are not kept"
        );
        self.free_gpus.clone()
    }

    /// Whether a node has GPUs free ([`Self::nodes_with_free_gpus`]), worked out from its room.
    fn gpus_free_on(&self, node: usize) -> bool {
        let n = &self.nodes[node];
        n.free.gpu > 0 || (self.has_mig[node] && crate::cluster::mig_gpus(&n.extended) > 0)
    }

    /// Limits placements to `nodes` until [`Self::unlimit`]: an eviction solver's attempt
    /// places the preemptor and its victims again only on the preemptor's feasible nodes and
    /// the victims' nodes (KAI's `FeasibleNodesForJob`, `byPodSolver.updateFeasibleNodes`).
    pub fn limit_to(&mut self, nodes: Vec<bool>) {
        debug_assert!(
            self.scenario.is_none() && self.by_cpu_behind.is_empty(),
            "a limit is set within another"
        );
        let kept = self.last_limit.as_ref().filter(|(was, entries)| {
            *was == nodes && entries.iter().all(|&(k, n)| self.indexed[n].cpu == k)
        });
        let allowed = match kept {
            Some((_, entries)) => entries.clone(),
            None => {
                // `by_cpu` holds every schedulable node under its indexed key: the subset is
                // read from those keys (walking the whole tree costs more than sorting the few
                // allowed).
                let mut allowed: Vec<(i64, usize)> = (0..nodes.len())
                    .filter(|&n| nodes[n] && self.schedulable[n])
                    .map(|n| (self.indexed[n].cpu, n))
                    .collect();
                allowed.sort_unstable();
                self.last_limit = Some((nodes.clone(), allowed.clone()));
                allowed
            }
        };
        self.scenario_cpu = allowed.into_iter().collect();
        debug_assert!(
            self.scenario_cpu
                .iter()
                .eq(self.by_cpu.iter().filter(|&&(_, n)| nodes[n])),
            "the limited CPU index is not the CPU index's subset"
        );
        self.scenario = Some(nodes);
    }

    /// Adds a node to the limit [`Self::limit_to`] set, if any: a victim's node.
    pub fn allow(&mut self, node: usize) {
        if let Some(nodes) = self.scenario.as_mut()
            && !nodes[node]
        {
            nodes[node] = true;
            if self.schedulable[node] {
                self.scenario_cpu.insert((self.indexed[node].cpu, node));
            }
        }
    }

    /// Lifts the limit [`Self::limit_to`] set.
    pub fn unlimit(&mut self) {
        self.scenario = None;
        self.scenario_cpu.clear();
        for (node, was) in std::mem::take(&mut self.by_cpu_behind) {
            self.by_cpu_lags[node] = false;
            let now = self.indexed[node].cpu;
            if now != was {
                self.by_cpu.remove(&(was, node));
                self.by_cpu.insert((now, node));
            }
        }
    }

    /// Whether placements may use a node now (see [`Self::limit_to`]).
    fn in_scenario(&self, node: usize) -> bool {
        self.scenario.as_ref().is_none_or(|nodes| nodes[node])
    }

    /// Among the nodes [`Self::candidates_where`] gives for a shared pod (a superset: the
    /// caller checks the devices), those with a device some other shared pod uses with the
    /// pod's share free, in binpack order: KAI's `gpusharingorder` plugin (on under GPU
    /// binpack) scores them 10,000, above idle room's 1,000 and any strategy's 9
    /// (`NodeInfo.IsTaskFitOnGpuGroup`).
    pub fn on_used_shared_devices<'c>(
        &'c self,
        pod: &'c Pod,
        idle_only: bool,
    ) -> Box<dyn Iterator<Item = usize> + 'c> {
        debug_assert!(self.unsettled.is_empty(), "the indexes are read unsettled");
        let share = pod.share_per_device();
        Box::new(
            packed_from(&self.by_shared_room, pod.request.gpu, self.most_whole)
                .map(|(_, n)| n)
                .filter(move |&n| {
                    let node = &self.nodes[n];
                    // The CPU first: on a busy cluster it is what most nodes lack, and it
                    // costs one comparison where the devices' room is a scan.
                    node.free.cpu >= pod.request.cpu && shared_room(&node.devices) >= share
                })
                .filter(move |&n| self.in_scenario(n))
                .filter(move |&n| !idle_only || self.fits_idle(n, pod))
                .filter(move |&n| self.admits(n, pod)),
        )
    }

    /// What orders candidates under a strategy: nodes with the same key are equal to it. For
    /// a pod asking no GPU, a node without GPUs is never equal to one with them (see
    /// [`Self::by_strategy`]). Binpack ranks what is free; spread ranks it as a share of the
    /// node's (KAI's `nodeplacement`: pack scores the free amount between the fitting nodes'
    /// least and most, spread `nonAllocated / resourceCount`).
    pub fn strategy_key(&self, node: usize, pod: &Pod, strategy: Strategy) -> i64 {
        let k = self.keys(node, false);
        let spread = strategy == Strategy::Spread;
        if pod.request.gpu > 0 && spread && self.gpu_shares {
            self.gpu_share(node)
        } else if pod.request.gpu > 0 && (!pod.fractional || spread) {
            i64::from(k.whole)
        } else if pod.request.gpu > 0 {
            packed_key(k.packed)
        } else if !pod.asks_gpu() {
            let free = if spread && self.cpu_shares {
                self.cpu_share(node)
            } else {
                k.cpu
            };
            free * 2 + i64::from(!self.cpu_only[node])
        } else {
            k.cpu
        }
    }

    /// The schedulable nodes by free CPU that placements may use now: limited to an attempt's
    /// nodes ([`Self::limit_to`]), the index of those alone, which gives the same nodes in the
    /// same order as the whole cluster's with the others left out, without stepping over them.
    fn cpu_index(&self) -> &BTreeSet<(i64, usize)> {
        match self.scenario {
            Some(_) => &self.scenario_cpu,
            None => &self.by_cpu,
        }
    }

    /// The nodes that may have room for a pod, in the strategy's order, within an eviction
    /// solver's nodes ([`Self::limit_to`]). The limit is kept inside each walk rather than by the
    /// caller: a walk meets every node of an index, and under a solver's limit most are outside
    /// it (CPU-only victims placed again during reclaim met 7 million such nodes a cycle at
    /// 4,000 nodes).
    fn by_strategy<'c>(
        &'c self,
        pod: &'c Pod,
        strategy: Strategy,
    ) -> Box<dyn Iterator<Item = usize> + 'c> {
        debug_assert!(self.unsettled.is_empty(), "the indexes are read unsettled");
        if pod.request.gpu > 0 && !pod.fractional {
            let need = ((pod.request.gpu + DEVICE - 1) / DEVICE) as u32;
            let gpu_ok = move |n: usize| self.nodes[n].whole >= need && self.in_scenario(n);
            match strategy {
                Strategy::Binpack => {
                    let range = self.by_gpu.range((need, 0)..);
                    let keyed = move |&(k, n): &(u32, usize)| (i64::from(k), n);
                    self.with_cpu(pod, range.map(keyed), gpu_ok, strategy)
                }
                Strategy::Spread => {
                    let range = self.spread_by_gpu(need);
                    self.with_cpu(pod, range, gpu_ok, strategy)
                }
            }
        } else if pod.request.gpu > 0 {
            let need = pod.request.gpu;
            let (share, count) = (pod.share_per_device(), pod.shared_devices.max(1) as usize);
            let gpu_ok = move |n: usize| {
                let node = &self.nodes[n];
                node.free.gpu >= need
                    && node.devices.iter().filter(|&&f| f >= share).count() >= count
                    && self.in_scenario(n)
            };
            match strategy {
                Strategy::Binpack => {
                    let range = packed_from(&self.by_free_gpu, need, self.most_whole);
                    self.with_cpu(pod, range, gpu_ok, strategy)
                }
                Strategy::Spread => {
                    // A device with room for a share need not be whole: every node.
                    let range = self.spread_by_gpu(0);
                    self.with_cpu(pod, range, gpu_ok, strategy)
                }
            }
        } else if pod.asks_gpu() {
            // MIG instances only: the CPU order, every node alike.
            let range = self.cpu_index().range((pod.request.cpu, 0)..);
            let node = |&(_, n): &(i64, usize)| n;
            match strategy {
                Strategy::Binpack => Box::new(range.map(node)),
                Strategy::Spread => Box::new(range.rev().map(node)),
            }
        } else {
            // KAI's `resourcetype` plugin scores a node without GPUs 10 for a pod asking none,
            // above any strategy's score (`nodeplacement`: 0 to 9): those nodes first, then the
            // GPU nodes, each in the strategy's order.
            let cpu = pod.request.cpu;
            let plain_nodes = move |&&(_, n): &&(i64, usize)| self.in_scenario(n);
            // The share index below covers every node, so the limit is kept here too.
            let gpu_nodes =
                move |&&(_, n): &&(i64, usize)| !self.cpu_only[n] && self.in_scenario(n);
            let node = |&(_, n): &(i64, usize)| n;
            let by_cpu = self.cpu_index();
            match strategy {
                Strategy::Binpack => {
                    let from = (cpu, 0);
                    let (plain, all) = (self.by_cpu_plain.range(from..), by_cpu.range(from..));
                    Box::new(
                        plain
                            .filter(plain_nodes)
                            .chain(all.filter(gpu_nodes))
                            .map(node),
                    )
                }
                Strategy::Spread if !self.cpu_shares => {
                    let from = (cpu, 0);
                    let (plain, all) = (self.by_cpu_plain.range(from..), by_cpu.range(from..));
                    Box::new(
                        plain
                            .rev()
                            .filter(plain_nodes)
                            .chain(all.rev().filter(gpu_nodes))
                            .map(node),
                    )
                }
                Strategy::Spread => {
                    // No node whose free share is below `cpu / most_cpu` has `cpu` free.
                    let least = share_key(cpu, self.most_cpu);
                    let enough = move |&&(k, _): &&(i64, usize)| k >= least;
                    let (plain, all) = (
                        self.by_cpu_plain_share.iter().rev().take_while(enough),
                        self.by_cpu_share.iter().rev().take_while(enough),
                    );
                    Box::new(
                        plain
                            .filter(plain_nodes)
                            .chain(all.filter(gpu_nodes))
                            .map(node)
                            .filter(move |&n| self.nodes[n].free.cpu >= cpu),
                    )
                }
            }
        }
    }

    /// The nodes by the share of their devices free whole, the largest first (with their
    /// [`Self::strategy_key`]), as far as one could have `need` whole devices free: by the count
    /// where every node has as many devices, else by the share, down to `need / most_whole`,
    /// below which none can.
    fn spread_by_gpu(&self, need: u32) -> Box<dyn Iterator<Item = (i64, usize)> + '_> {
        if !self.gpu_shares {
            let keyed = |&(k, n): &(u32, usize)| (i64::from(k), n);
            return Box::new(self.by_gpu.range((need, 0)..).rev().map(keyed));
        }
        let least = share_key(i64::from(need), i64::from(self.most_whole));
        Box::new(
            self.by_gpu_share
                .iter()
                .rev()
                .take_while(move |&&(k, _)| k >= least)
                .copied(),
        )
    }

    /// The nodes of a GPU index range (`(key, node)` in strategy order) that pass `gpu_ok` (the
    /// pod's GPU room, within the solver's nodes) and have the pod's CPU free, in the same order. On a cluster whose CPU is nearly all taken,
    /// most nodes with GPUs free have too little CPU: the CPU index (the nodes with the pod's
    /// CPU free) is walked one step for each node of the range short of CPU, and when it runs
    /// out first, its nodes are all that can follow, sorted into the range's order.
    fn with_cpu<'c>(
        &'c self,
        pod: &'c Pod,
        range: impl Iterator<Item = (i64, usize)> + 'c,
        gpu_ok: impl Fn(usize) -> bool + 'c,
        strategy: Strategy,
    ) -> Box<dyn Iterator<Item = usize> + 'c> {
        let cpu = pod.request.cpu;
        if cpu <= 0 {
            // Every node is in the CPU index's range: nothing to walk beside.
            return Box::new(
                range
                    .map(|(_, n)| n)
                    .filter(move |&n| self.nodes[n].free.cpu >= cpu && gpu_ok(n)),
            );
        }
        Box::new(WithCpu {
            range,
            by_cpu: self.cpu_index(),
            cpu,
            cpu_side: None,
            cpu_side_done: false,
            seen: Vec::new(),
            rest: None,
            has_cpu: move |n: usize| self.nodes[n].free.cpu >= cpu,
            gpu_ok,
            key: move |n: usize| self.strategy_key(n, pod, strategy),
            ascending: strategy == Strategy::Binpack,
        })
    }

    /// What a node lacks for a pod (zero where it has enough).
    pub fn lacking(&self, node: usize, pod: &Pod) -> Amounts {
        let n = &self.nodes[node];
        let count = pod.shared_devices.max(1) as usize;
        let gpu_free = if pod.fractional && count == 1 {
            n.devices.iter().copied().max().unwrap_or(0)
        } else if pod.fractional {
            // The share the emptiest devices could hold, as the pod's total.
            let mut devices = n.devices.clone();
            devices.sort_unstable_by(|a, b| b.cmp(a));
            devices.get(count - 1).copied().unwrap_or(0) * count as i64
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

/// What stops a pod on a node besides CPU, memory and GPU.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Shortage {
    /// No pod slot left (`status.allocatable.pods`).
    PodSlots,
    /// A resource: its name, what the pod needs, what is free.
    Extended(String, i64, i64),
    /// A host port already taken.
    HostPort(i32),
    /// An inter-pod affinity or anti-affinity term does not hold.
    PodAffinity,
    /// The pod's DRA claims cannot be met there.
    Dra(DraShortage),
    /// The node's NUMA zones cannot hold the pod the way its Topology Manager policy (named)
    /// admits pods.
    Numa(&'static str),
}

/// Why a pod's DRA claims cannot be met on a node (each names the claim, `namespace/name`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum DraShortage {
    /// Too few free devices its class and selectors accept.
    Devices(String),
    /// It is allocated on another node (named).
    OtherNode(String, String),
    /// Its devices are not reachable from the node (its allocation's node selector).
    Unreachable(String),
    /// It asks all devices of a class, and a pool of the node is being updated or invalid
    /// (why).
    Pool(String, String),
    /// It has as many consumers as a claim may have.
    Consumers(String),
}

/// Kubernetes' host-port rule: same protocol and port, and the same address or either one the
/// wildcard.
fn ports_collide(a: &HostPort, b: &HostPort) -> bool {
    let wildcard = |ip: &str| ip.is_empty() || ip == "0.0.0.0";
    a.port == b.port
        && a.protocol == b.protocol
        && (wildcard(&a.ip) || wildcard(&b.ip) || a.ip == b.ip)
}

/// The most free on a device some shared pod uses (partly used: neither empty nor full); 0
/// when there is none.
fn shared_room(devices: &[i64]) -> i64 {
    devices
        .iter()
        .copied()
        .filter(|&f| f > 0 && f < DEVICE)
        .max()
        .unwrap_or(0)
}

/// How many devices would be whole if what pods being deleted hold (`held`) were free, and are
/// not now (`free`).
fn releasing_whole(free: &[i64], held: &[i64]) -> u32 {
    free.iter()
        .zip(held)
        .filter(|&(&f, &h)| f < DEVICE && h > 0 && f + h >= DEVICE)
        .count() as u32
}

/// `free / total` as an integer that orders shares exactly: the share in units of 2^-50 (two
/// shares of totals up to 2^24 differ by at least 2^-48, so distinct shares never meet, and
/// equal ones are equal). No share (total 0, or nothing free) is 0.
fn share_key(free: i64, total: i64) -> i64 {
    if total <= 0 || free <= 0 {
        return 0;
    }
    let share = (i128::from(free.min(total)) << 50) / i128::from(total);
    i64::try_from(share).unwrap_or(i64::MAX)
}

/// A node's whole free devices, then its free GPU thousandths: how binpack ranks nodes for a
/// shared pod (ascending). KAI's scores count idle
/// GPUs, which are whole devices (a device a shared pod uses is not idle,
/// `gpu_sharing_node_info.go`); the thousandths only break the ties KAI leaves.
type Packed = (u32, i64);

/// A [`Packed`] key as one integer in the same order.
fn packed_key((whole, gpu): Packed) -> i64 {
    (i64::from(whole) << 40) + gpu.clamp(-(1 << 39), (1 << 39) - 1)
}

/// The nodes of a [`Packed`] index with at least `need` GPU thousandths free, in binpack
/// order, whole-device count by count (up to `most`), with their [`packed_key`].
fn packed_from(
    index: &BTreeSet<(Packed, usize)>,
    need: i64,
    most: u32,
) -> impl Iterator<Item = (i64, usize)> + '_ {
    (0..=most).flat_map(move |w| {
        index
            .range(((w, need), 0)..=((w, i64::MAX), usize::MAX))
            .map(|&(k, n)| (packed_key(k), n))
    })
}

/// See [`ClusterState::with_cpu`].
struct WithCpu<'c, R, H, F, K> {
    /// The GPU index range, in strategy order.
    range: R,
    /// The CPU index, and the pod's CPU.
    by_cpu: &'c BTreeSet<(i64, usize)>,
    cpu: i64,
    /// The nodes with the pod's CPU free, walked from the first node short of CPU on.
    cpu_side: Option<std::collections::btree_set::Range<'c, (i64, usize)>>,
    /// Whether `cpu_side` has run out.
    cpu_side_done: bool,
    /// The nodes `cpu_side` gave so far.
    seen: Vec<usize>,
    /// Once `cpu_side` ran out: the nodes left, in strategy order.
    rest: Option<std::vec::IntoIter<usize>>,
    /// Whether a node has the pod's CPU free.
    has_cpu: H,
    /// Whether a node has the pod's GPU room (the range's key alone does not say it) and may be
    /// used at all.
    gpu_ok: F,
    /// A node's key in the range ([`ClusterState::strategy_key`]).
    key: K,
    /// Binpack (keys ascending) or spread (descending).
    ascending: bool,
}

impl<R, H, F, K> Iterator for WithCpu<'_, R, H, F, K>
where
    R: Iterator<Item = (i64, usize)>,
    H: Fn(usize) -> bool,
    F: Fn(usize) -> bool,
    K: Fn(usize) -> i64,
{
    type Item = usize;

    fn next(&mut self) -> Option<usize> {
        loop {
            if let Some(rest) = &mut self.rest {
                return rest.next();
            }
            let (key, n) = self.range.next()?;
            if (self.has_cpu)(n) {
                if (self.gpu_ok)(n) {
                    return Some(n);
                }
                continue;
            }
            // A node short of CPU: one step of the CPU side, so that the walk costs no more
            // than twice the smaller of the two.
            if self.cpu_side_done {
                continue;
            }
            let (by_cpu, cpu) = (self.by_cpu, self.cpu);
            let side = self
                .cpu_side
                .get_or_insert_with(|| by_cpu.range((cpu, 0)..));
            if let Some(&(_, m)) = side.next() {
                self.seen.push(m);
                continue;
            }
            self.cpu_side_done = true;
            let (ascending, at) = (self.ascending, (key, n));
            let mut rest: Vec<(i64, usize)> = std::mem::take(&mut self.seen)
                .into_iter()
                .filter(|&m| (self.gpu_ok)(m))
                .map(|m| ((self.key)(m), m))
                .filter(|&k| if ascending { k > at } else { k < at })
                .collect();
            rest.sort_unstable();
            if !ascending {
                rest.reverse();
            }
            let rest: Vec<usize> = rest.into_iter().map(|(_, m)| m).collect();
            self.rest = Some(rest.into_iter());
        }
    }
}

#[cfg(test)]
#[path = "state_tests.rs"]
mod tests;
