//! Topology domains as KAI's topology plugin orders them (`plugins/topology/`): a tree of the
//! topology's levels over the nodes that carry every level's label, each level's domains ranked
//! by how full the gang would leave them, the gang's candidate domains taken from the lowest
//! level it names up to its required one, and, under a preferred level, the nodes of each
//! preferred domain scored by its place in that ranking.

use std::collections::{HashMap, HashSet};

use super::jobs::request_of;
use super::state::ClusterState;
use crate::cluster::{Amounts, Snapshot};

/// A topology constraint with the levels it is read against.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Constraint<'a> {
    /// Node labels of the levels, the top level first.
    pub levels: Vec<&'a str>,
    /// The level whose domain must hold every pod.
    pub required: Option<&'a str>,
    /// The level whose domain should hold them.
    pub preferred: Option<&'a str>,
}

impl<'a> Constraint<'a> {
    /// The constraint of a gang or sub-group: the levels of the `Topology` it names, or, when
    /// the snapshot has no such topology or it lacks a level the constraint names, the levels
    /// the constraint itself names (the required one above the preferred one). `None` without
    /// a level.
    pub fn new(
        snapshot: &'a Snapshot,
        topology: Option<&str>,
        required: Option<&'a str>,
        preferred: Option<&'a str>,
    ) -> Option<Self> {
        if required.is_none() && preferred.is_none() {
            return None;
        }
        let named = topology
            .and_then(|name| snapshot.topologies.iter().find(|t| t.name == name))
            .map(|t| t.levels.iter().map(String::as_str).collect::<Vec<_>>())
            .filter(|levels| {
                [required, preferred]
                    .into_iter()
                    .flatten()
                    .all(|l| levels.contains(&l))
            });
        let levels = named.unwrap_or_else(|| {
            let mut implied: Vec<&str> = required.into_iter().collect();
            implied.extend(preferred.filter(|p| Some(*p) != required));
            implied
        });
        Some(Constraint {
            levels,
            required,
            preferred,
        })
    }
}

/// Where a gang goes under a constraint: the node sets to try, in order, and the score of each
/// node under the preferred level (higher first).
#[derive(Debug, Default)]
pub struct Domains {
    /// The candidate domains' nodes, in the order they are tried.
    pub tries: Vec<Vec<usize>>,
    /// Each node's preferred-level score, when the constraint has a preferred level.
    pub scores: Option<HashMap<usize, u32>>,
    /// How many schedulable nodes (of those allowed) carry every level's label.
    pub labelled: usize,
}

/// One domain of the tree.
#[derive(Debug, Default)]
struct Domain {
    id: String,
    nodes: Vec<usize>,
    children: Vec<usize>,
    /// Free (idle or releasing) GPU, CPU and memory.
    free: Amounts,
    /// Pods of the gang's largest shape its nodes can take (KAI's `AllocatablePods`).
    pods: i64,
}

/// KAI's domains for `pods` under `constraint`, among the schedulable nodes (of `within`, when
/// given) that carry every level's label (`topology_plugin.go: addNodeDataToTopology`,
/// `common.go: isNodePartOfTopology`).
///
/// - Each level's domains are ranked by the ratio of the gang's total request to their free
///   room, highest (fullest after the gang) first, then by id, the labels' values from the top
///   level down joined by dots (`job_filtering.go: sortTree`, `getJobRatioToFreeResources`;
///   `topology_structs.go: calcDomainId`).
/// - The candidates are the domains of the levels from the lowest one the constraint names up
///   to the required one (or up to the whole topology, without one) that can hold the gang:
///   when every pod asks GPUs or none does, as many pods of its largest shape as it has
///   (`calcNodeAccommodation`), otherwise its total request (`checkJobDomainFit`,
///   `calculateRelevantDomainLevels`, `useRepresentorPodsAccounting`).
/// - They are tried the lowest level first, each level in the ranked tree's order
///   (`sortDomainInfos`, `topology_utils.go: reverseLevelOrder`). With `held` (the ids of the
///   required level's domains where the job already runs pods, [`held_domains`]), only
///   candidates inside those (`getRelevantDomainsWithAllocatedPods`).
/// - Under a preferred level, the i-th of its n ranked domains scores ⌊10·(i+1)/n⌋ for each of
///   its nodes (`node_scoring.go: calculateNodeScores`), a score that outweighs every other
///   node preference.
pub fn domains(
    state: &ClusterState,
    snapshot: &Snapshot,
    constraint: &Constraint,
    pods: &[usize],
    within: Option<&HashSet<usize>>,
    held: Option<&HashSet<String>>,
) -> Domains {
    let levels = &constraint.levels;
    let position = |label: Option<&str>| label.and_then(|l| levels.iter().position(|x| *x == l));
    let valid: Vec<usize> = (0..state.len())
        .filter(|&n| within.is_none_or(|w| w.contains(&n)) && state.schedulable(n))
        .filter(|&n| {
            let labels = &snapshot.nodes[n].labels;
            levels.iter().all(|l| labels.contains_key(*l))
        })
        .collect();
    let request = request_of(snapshot, pods);
    let largest = pods.iter().fold(Amounts::default(), |mut max, &p| {
        let r = snapshot.pods[p].request;
        max.gpu = max.gpu.max(r.gpu);
        max.cpu = max.cpu.max(r.cpu);
        max.memory = max.memory.max(r.memory);
        max
    });
    let gpu_pods = pods
        .iter()
        .filter(|&&p| snapshot.pods[p].request.gpu > 0)
        .count();
    let by_shape = gpu_pods == 0 || gpu_pods == pods.len();
    let fractional = largest.gpu > 0 && largest.gpu < 1000;

    // The tree: domain 0 is the whole topology; a domain's index by (level, id).
    let mut tree: Vec<Domain> = vec![Domain {
        id: String::new(),
        ..Domain::default()
    }];
    let mut level_of: Vec<Option<usize>> = vec![None];
    let required = position(constraint.required);
    // Each domain's ancestor at the required level (itself there), for `held`.
    let mut in_required: Vec<Option<usize>> = vec![None];
    let mut index: HashMap<(usize, String), usize> = HashMap::new();
    for &n in &valid {
        let labels = &snapshot.nodes[n].labels;
        let free = state.free(n);
        // KAI counts whole free GPUs, and the free share of used devices for a gang of
        // fractional pods only when it asks how many pods fit.
        let whole = i64::from(state.whole_devices(n)) * 1000;
        let room = Amounts {
            gpu: whole,
            cpu: free.cpu,
            memory: free.memory,
        };
        let fit_room = Amounts {
            gpu: if fractional { free.gpu } else { whole },
            ..room
        };
        let node_pods = accommodation(&largest, &fit_room, pods.len());
        let mut parent = 0;
        let mut at_required = None;
        let mut id = String::new();
        add(&mut tree[0], n, &room, node_pods);
        for (k, level) in levels.iter().enumerate() {
            if k > 0 {
                id.push('.');
            }
            id.push_str(&labels[*level]);
            let at = *index.entry((k, id.clone())).or_insert_with(|| {
                tree.push(Domain {
                    id: id.clone(),
                    ..Domain::default()
                });
                level_of.push(Some(k));
                in_required.push(None);
                tree.len() - 1
            });
            if required == Some(k) {
                at_required = Some(at);
            }
            in_required[at] = at_required;
            if !tree[parent].children.contains(&at) {
                tree[parent].children.push(at);
            }
            add(&mut tree[at], n, &room, node_pods);
            parent = at;
        }
    }

    let ratio = |d: &Domain| -> f64 {
        [
            (request.gpu, d.free.gpu),
            (request.cpu, d.free.cpu),
            (request.memory, d.free.memory),
        ]
        .into_iter()
        .filter(|&(want, _)| want > 0)
        .map(|(want, free)| {
            if free <= 0 {
                1000.0
            } else {
                want as f64 / free as f64
            }
        })
        .fold(0.0, f64::max)
    };
    let preferred = position(constraint.preferred);
    let deepest = preferred.or(required).unwrap_or(0);
    // Rank each level's children down to the deepest level the constraint names.
    let ratios: Vec<f64> = tree.iter().map(ratio).collect();
    let mut stack = vec![0];
    while let Some(d) = stack.pop() {
        let mut children = std::mem::take(&mut tree[d].children);
        children.sort_by(|&a, &b| {
            ratios[b]
                .total_cmp(&ratios[a])
                .then_with(|| tree[a].id.cmp(&tree[b].id))
        });
        if level_of[d].is_none_or(|k| k < deepest) {
            stack.extend(children.iter().copied());
        }
        tree[d].children = children;
    }
    // The ranked tree level by level, the whole topology last.
    let mut by_level: Vec<Vec<usize>> = vec![Vec::new(); levels.len()];
    let mut frontier = vec![0];
    for row in by_level.iter_mut() {
        *row = frontier
            .iter()
            .flat_map(|&d| tree[d].children.iter().copied())
            .collect();
        frontier = row.clone();
    }
    let fits = |d: usize| {
        let holds_job =
            held.is_none_or(|h| in_required[d].is_some_and(|a| h.contains(&tree[a].id)));
        holds_job
            && if by_shape {
                tree[d].pods >= pods.len() as i64
            } else {
                ratios[d] <= 1.0
            }
    };
    let lowest = preferred.max(required).unwrap_or(0);
    let mut tries = Vec::new();
    for k in (0..levels.len()).rev() {
        if k > lowest || required.is_some_and(|r| k < r) {
            continue;
        }
        for &d in &by_level[k] {
            if fits(d) {
                tries.push(tree[d].nodes.clone());
            }
        }
    }
    if required.is_none() && fits(0) {
        tries.push(tree[0].nodes.clone());
    }
    let scores = preferred.map(|k| {
        let ranked = &by_level[k];
        let count = ranked.len() as u32;
        let mut scores = HashMap::new();
        for (i, &d) in ranked.iter().enumerate() {
            for &n in &tree[d].nodes {
                // As KAI computes it, in floating point.
                let score = ((i + 1) as f64 / f64::from(count) * 10.0).floor();
                scores.insert(n, score as u32);
            }
        }
        scores
    });
    Domains {
        tries,
        scores,
        labelled: valid.len(),
    }
}

fn add(domain: &mut Domain, node: usize, room: &Amounts, pods: i64) {
    domain.nodes.push(node);
    domain.free.gpu += room.gpu;
    domain.free.cpu += room.cpu;
    domain.free.memory += room.memory;
    domain.pods += pods;
}

/// How many pods shaped `largest` a node with `room` free takes (KAI's `calcNodeAccommodation`):
/// every one of the gang's `count` for a shape asking nothing.
fn accommodation(largest: &Amounts, room: &Amounts, count: usize) -> i64 {
    let pairs = [
        (largest.gpu, room.gpu),
        (largest.cpu, room.cpu),
        (largest.memory, room.memory),
    ];
    if pairs.iter().all(|&(want, _)| want <= 0) {
        return count as i64;
    }
    if pairs.iter().any(|&(want, free)| want > free) {
        return 0;
    }
    pairs
        .iter()
        .filter(|&&(want, _)| want > 0)
        .map(|&(want, free)| free / want)
        .min()
        .unwrap_or(count as i64)
}

/// The id of the domain of the constraint's required level that holds `node` (`None` without a
/// required level, or for a node outside the topology).
fn required_id(snapshot: &Snapshot, constraint: &Constraint, node: usize) -> Option<String> {
    let required = constraint.required?;
    let upto = constraint.levels.iter().position(|l| *l == required)?;
    let labels = &snapshot.nodes[node].labels;
    let values: Option<Vec<&str>> = constraint.levels[..=upto]
        .iter()
        .map(|l| labels.get(*l).map(String::as_str))
        .collect();
    Some(values?.join("."))
}

/// Under a required level, the ids of its domains where the job already runs pods (other than
/// `placing`), when it runs any: new pods go only there. Terminating pods do not count.
pub fn held_domains(
    snapshot: &Snapshot,
    constraint: &Constraint,
    job_pods: &[usize],
    placing: &[usize],
) -> Option<HashSet<String>> {
    constraint.required?;
    let running: HashSet<&str> = job_pods
        .iter()
        .filter(|p| !placing.contains(p))
        .map(|&p| &snapshot.pods[p])
        .filter(|p| !p.terminating)
        .filter_map(|p| p.node.as_deref())
        .collect();
    if running.is_empty() {
        return None;
    }
    let held = snapshot
        .nodes
        .iter()
        .enumerate()
        .filter(|(_, n)| running.contains(&n.name.as_str()))
        .filter_map(|(i, _)| required_id(snapshot, constraint, i))
        .collect();
    Some(held)
}
