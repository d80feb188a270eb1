//! Placing a gang: all of its pods or none, with the job's strategy, per-node GPU cap and
//! topology domain.

use std::collections::{BTreeMap, HashMap};

use kai_policy_compiler::model::{Policy, Strategy};

use super::state::{ClusterState, Slot};
use crate::cluster::Snapshot;
use crate::decision::Reason;

/// How one job is placed.
#[derive(Debug, Clone, Copy)]
pub struct Plan<'p> {
    /// Binpack or spread.
    pub strategy: Strategy,
    /// At most this many GPUs of the job on one node.
    pub max_gpus_per_node: Option<u32>,
    /// Node label whose value the whole gang must share.
    pub required: Option<&'p str>,
    /// Node label whose value the gang should share.
    pub preferred: Option<&'p str>,
}

impl<'p> Plan<'p> {
    /// The queue's named placement, or the cluster default for GPU or CPU-only work.
    pub fn for_queue(policy: &'p Policy, queue: usize, wants_gpu: bool) -> Self {
        let named = policy.queues[queue]
            .placement
            .as_deref()
            .and_then(|name| policy.placements.iter().find(|p| p.name == name));
        match named {
            Some(p) => Plan {
                strategy: p.strategy,
                max_gpus_per_node: p.max_gpus_per_node,
                required: p.topology_required.as_deref(),
                preferred: p.topology_preferred.as_deref(),
            },
            None => Plan {
                strategy: if wants_gpu {
                    policy.cluster.placement.gpu
                } else {
                    policy.cluster.placement.cpu
                },
                max_gpus_per_node: None,
                required: None,
                preferred: None,
            },
        }
    }
}

/// Places every pod of `pods` or none: the slots taken (already applied to `state`), or why not.
pub fn place_gang(
    state: &mut ClusterState,
    snapshot: &Snapshot,
    pods: &[usize],
    plan: &Plan,
) -> Result<Vec<(usize, Slot)>, Reason> {
    // Largest pods first: they are the hardest to fit.
    let mut order = pods.to_vec();
    order.sort_by_key(|&p| {
        (
            std::cmp::Reverse(snapshot.pods[p].request.gpu),
            std::cmp::Reverse(snapshot.pods[p].request.cpu),
            p,
        )
    });
    let Some(label) = plan.required.or(plan.preferred) else {
        return attempt(state, snapshot, &order, plan, None);
    };
    // Domains of the label, tried fullest first for binpack and emptiest first for spread.
    let mut domains: BTreeMap<&str, (i64, Vec<usize>)> = BTreeMap::new();
    for (i, node) in snapshot.nodes.iter().enumerate() {
        if let (Some(value), true) = (node.labels.get(label), state.schedulable(i)) {
            let entry = domains.entry(value.as_str()).or_default();
            entry.0 += state.whole_devices(i) as i64;
            entry.1.push(i);
        }
    }
    let mut ordered: Vec<(&str, i64)> = domains.iter().map(|(v, (free, _))| (*v, *free)).collect();
    match plan.strategy {
        Strategy::Binpack => ordered.sort_by_key(|&(v, free)| (free, v)),
        Strategy::Spread => ordered.sort_by_key(|&(v, free)| (std::cmp::Reverse(free), v)),
    }
    for (value, _) in ordered {
        let members: std::collections::HashSet<usize> = domains[value].1.iter().copied().collect();
        if let Ok(slots) = attempt(state, snapshot, &order, plan, Some(&members)) {
            return Ok(slots);
        }
    }
    if plan.required.is_some() {
        return Err(Reason::NoTopologyDomain {
            label: label.to_string(),
            pods: pods.len() as u32,
        });
    }
    attempt(state, snapshot, &order, plan, None)
}

/// One try, inside a domain or anywhere; on failure everything taken is given back, and the
/// reason names the node closest to fitting the pod that did not fit, as it was at that moment
/// (with the rest of the gang placed).
fn attempt(
    state: &mut ClusterState,
    snapshot: &Snapshot,
    order: &[usize],
    plan: &Plan,
    domain: Option<&std::collections::HashSet<usize>>,
) -> Result<Vec<(usize, Slot)>, Reason> {
    let mut placed: Vec<(usize, Slot)> = Vec::with_capacity(order.len());
    let mut gpus_on: HashMap<usize, i64> = HashMap::new();
    for &p in order {
        let pod = &snapshot.pods[p];
        let cap = plan.max_gpus_per_node.map(|c| c as i64 * 1000);
        let chosen = state
            .candidates(pod, plan.strategy)
            .filter(|n| domain.is_none_or(|d| d.contains(n)))
            .filter(|n| {
                cap.is_none_or(|c| gpus_on.get(n).copied().unwrap_or(0) + pod.request.gpu <= c)
            })
            .find_map(|n| {
                state
                    .devices_for(n, pod, plan.strategy)
                    .map(|devices| Slot { node: n, devices })
            });
        match chosen {
            Some(slot) => {
                state.take(&slot, pod);
                *gpus_on.entry(slot.node).or_default() += pod.request.gpu;
                placed.push((p, slot));
            }
            None => {
                let reason = no_fit(state, snapshot, p);
                for (q, slot) in placed.iter().rev() {
                    state.release(slot, &snapshot.pods[*q]);
                }
                return Err(reason);
            }
        }
    }
    Ok(placed)
}

/// "No node fits", naming the schedulable node that comes closest to fitting the pod.
fn no_fit(state: &ClusterState, snapshot: &Snapshot, pod: usize) -> Reason {
    let pod = &snapshot.pods[pod];
    let scale = |v: i64, total: i64| {
        if total > 0 {
            v as f64 / total as f64
        } else {
            0.0
        }
    };
    let closest = (0..state.len())
        .filter(|&n| state.schedulable(n))
        .map(|n| (n, state.lacking(n, pod)))
        .min_by(|(a, la), (b, lb)| {
            let score = |l: &crate::cluster::Amounts| {
                scale(l.gpu, pod.request.gpu.max(1))
                    + scale(l.cpu, pod.request.cpu.max(1))
                    + scale(l.memory, pod.request.memory.max(1))
            };
            score(la).total_cmp(&score(lb)).then(a.cmp(b))
        })
        .map(|(n, lacking)| (snapshot.nodes[n].name.clone(), lacking));
    Reason::NoNodeFits { closest }
}
