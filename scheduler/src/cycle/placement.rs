//! Placing a gang: all of its pods or none, with the job's strategy, per-node GPU cap and
//! topology domain.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::rc::Rc;

use kai_policy_compiler::model::{Policy, Strategy};
use kai_policy_compiler::quantity::ResourceKind;

use super::filters;
use super::gang::{Gang, Part};
use super::jobs::Job;
use super::state::{ClusterState, DraShortage, Shortage, Slot};
use super::topology::{self, Constraint};
use crate::cluster::{Pod, Snapshot};
use crate::decision::{Reason, amount};

/// How one job is placed.
#[derive(Debug, Clone, Copy)]
pub struct Plan<'p> {
    /// Binpack or spread.
    pub strategy: Strategy,
    /// At most this many GPUs of the job on one node.
    pub max_gpus_per_node: Option<u32>,
    /// The KAI `Topology` whose levels `required` and `preferred` name (`None`: the labels
    /// alone, the required one above the preferred one).
    pub topology: Option<&'p str>,
    /// Node label whose value the whole gang must share.
    pub required: Option<&'p str>,
    /// Node label whose value the gang should share.
    pub preferred: Option<&'p str>,
    /// The job's sub-groups, whose own topology constraints hold their pods together inside
    /// the gang's domain.
    pub gang: Option<&'p Gang>,
    /// Every pod of the job (none for a queue's plan): under a required topology, pods it
    /// already runs keep new ones in their domain.
    pub job_pods: &'p [usize],
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
                topology: None,
                required: p.topology_required.as_deref(),
                preferred: p.topology_preferred.as_deref(),
                gang: None,
                job_pods: &[],
            },
            None => Plan {
                strategy: if wants_gpu {
                    policy.cluster.placement.gpu
                } else {
                    policy.cluster.placement.cpu
                },
                max_gpus_per_node: None,
                topology: None,
                required: None,
                preferred: None,
                gang: None,
                job_pods: &[],
            },
        }
    }
}

impl<'p> Plan<'p> {
    /// The job's plan: its queue's, with the job's own topology constraint (from its PodGroup
    /// or top owner) in place of the placement's where it sets one.
    pub fn for_job(policy: &'p Policy, queue: usize, job: &'p Job, wants_gpu: bool) -> Self {
        let mut plan = Plan::for_queue(policy, queue, wants_gpu);
        if let Some(t) = job.topology.as_deref()
            && (t.required.is_some() || t.preferred.is_some())
        {
            plan.topology = t.topology.as_deref();
            plan.required = t.required.as_deref();
            plan.preferred = t.preferred.as_deref();
        }
        plan.gang = job.gang.as_deref();
        plan.job_pods = &job.pods;
        plan
    }
}

/// Places every pod of `pods` or none: the slots taken (already applied to `state`), or why not.
pub fn place_gang(
    state: &mut ClusterState,
    snapshot: &Snapshot,
    pods: &[usize],
    plan: &Plan,
) -> Result<Vec<(usize, Slot)>, Reason> {
    place(state, snapshot, pods, plan, true)
}

/// [`place_gang`] for callers that only ask whether the gang fits: a failure is not explained
/// (working out why scans every node).
pub fn try_place_gang(
    state: &mut ClusterState,
    snapshot: &Snapshot,
    pods: &[usize],
    plan: &Plan,
) -> Option<Vec<(usize, Slot)>> {
    place(state, snapshot, pods, plan, false).ok()
}

fn place(
    state: &mut ClusterState,
    snapshot: &Snapshot,
    pods: &[usize],
    plan: &Plan,
    explain: bool,
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
    let parts = plan.gang.and_then(|g| g.parts(pods));
    let parts = parts.as_deref();
    let Some(constraint) = Constraint::new(snapshot, plan.topology, plan.required, plan.preferred)
    else {
        return attempt_parts(
            state,
            snapshot,
            &order,
            parts,
            plan,
            Where::default(),
            explain,
        );
    };
    let held = topology::held_domains(snapshot, &constraint, plan.job_pods, pods);
    let found = topology::domains(state, snapshot, &constraint, pods, None, held.as_ref());
    let scores = found.scores.as_ref();
    let labelled_nodes = found.labelled as u32;
    let mut last = None;
    for nodes in found.tries {
        let members: HashSet<usize> = nodes.into_iter().collect();
        let at = Where {
            nodes: Some(&members),
            scores,
        };
        match attempt_parts(state, snapshot, &order, parts, plan, at, explain) {
            Ok(slots) => return Ok(slots),
            Err(reason) => last = Some(reason),
        }
    }
    Err(match (plan.required, last) {
        (None, Some(reason)) => reason,
        (required, _) => Reason::NoTopologyDomain {
            label: required.or(plan.preferred).unwrap_or_default().to_string(),
            pods: pods.len() as u32,
            labelled_nodes,
        },
    })
}

/// How many sub-group placements one try of a gang may make while it searches for domains that
/// hold every sub-group: enough for a few sub-groups over a few domains each, and a bound on
/// the time a gang that cannot fit takes.
const PART_SEARCH_BUDGET: usize = 64;

/// Where a try may place pods: inside a domain's nodes (`None`: anywhere), and, under a
/// preferred topology level, by the nodes' scores, best first.
#[derive(Debug, Clone, Copy, Default)]
struct Where<'a> {
    nodes: Option<&'a HashSet<usize>>,
    scores: Option<&'a HashMap<usize, u32>>,
}

/// One try of the whole gang `at` a domain: at once, or, when sub-groups have their own
/// topology constraints, part by part, each part in a domain of its own (inside `at`'s).
/// The parts' domains are searched together: when a later part finds no domain, an earlier part
/// tries its next domain (depth first, domains in KAI's order, at most
/// [`PART_SEARCH_BUDGET`] part placements), so two sub-groups that fit only in each other's
/// second choice are placed. On failure everything taken is given back.
fn attempt_parts(
    state: &mut ClusterState,
    snapshot: &Snapshot,
    order: &[usize],
    parts: Option<&[Part]>,
    plan: &Plan,
    at: Where,
    explain: bool,
) -> Result<Vec<(usize, Slot)>, Reason> {
    let Some(parts) = parts else {
        return attempt(state, snapshot, order, plan, at, explain, &[]);
    };
    let in_order = |pods: &[usize]| -> Vec<usize> {
        order.iter().copied().filter(|p| pods.contains(p)).collect()
    };
    let orders: Vec<Vec<usize>> = parts.iter().map(|part| in_order(&part.pods)).collect();
    let subtrees: Vec<Vec<usize>> = parts.iter().map(|part| in_order(&part.subtree)).collect();
    let mut search = PartSearch {
        snapshot,
        parts,
        orders: &orders,
        subtrees: &subtrees,
        plan,
        outer: at.nodes,
        scores: at.scores,
        explain,
        budget: PART_SEARCH_BUDGET,
        placed: Vec::with_capacity(order.len()),
        chosen: vec![None; parts.len()],
    };
    search.from(state, 0)?;
    Ok(search.placed)
}

/// The depth-first search of [`attempt_parts`].
struct PartSearch<'a> {
    snapshot: &'a Snapshot,
    parts: &'a [Part<'a>],
    /// Each part's own pods, largest first.
    orders: &'a [Vec<usize>],
    /// Each part's pods and those of the parts below it, largest first.
    subtrees: &'a [Vec<usize>],
    plan: &'a Plan<'a>,
    outer: Option<&'a HashSet<usize>>,
    /// The gang's preferred-level node scores, for parts that prefer no level of their own.
    scores: Option<&'a HashMap<usize, u32>>,
    explain: bool,
    budget: usize,
    /// What the parts before the current one took.
    placed: Vec<(usize, Slot)>,
    /// The domain each part placed so far is in (`None`: no narrower than its parent's).
    chosen: Vec<Option<Rc<HashSet<usize>>>>,
}

impl PartSearch<'_> {
    /// Places parts `i..`, given what the parts before took; on failure `placed` is as it was.
    fn from(&mut self, state: &mut ClusterState, i: usize) -> Result<(), Reason> {
        let Some(part) = self.parts.get(i) else {
            return Ok(());
        };
        let order = &self.orders[i];
        // Inside the domain of the part above, or the gang's.
        let outer: Option<Rc<HashSet<usize>>> = part.parent.and_then(|up| self.chosen[up].clone());
        let outer = outer.as_deref().or(self.outer);
        // The part's own domains (KAI's, inside the outer one), or the outer domain as it is.
        let (tries, own_scores, labelled) =
            match Constraint::new(self.snapshot, part.topology, part.required, part.preferred) {
                Some(c) => {
                    let found =
                        topology::domains(state, self.snapshot, &c, &self.subtrees[i], outer, None);
                    let labelled = found.labelled;
                    (
                        found.tries.into_iter().map(Some).collect(),
                        found.scores,
                        labelled,
                    )
                }
                None => (vec![None], None, state.len()),
            };
        let scores = own_scores.as_ref().or(self.scores);
        let mut own_failure = None;
        let mut later_failure = None;
        for nodes in tries {
            if self.budget == 0 {
                break;
            }
            self.budget -= 1;
            let members: Option<Rc<HashSet<usize>>> =
                nodes.map(|n| Rc::new(n.into_iter().collect()));
            let within = members.as_deref().or(outer);
            let at = Where {
                nodes: within,
                scores,
            };
            match attempt(
                state,
                self.snapshot,
                order,
                self.plan,
                at,
                self.explain,
                &self.placed,
            ) {
                Ok(slots) => {
                    let before = self.placed.len();
                    self.placed.extend(slots);
                    self.chosen[i] = members.clone();
                    match self.from(state, i + 1) {
                        Ok(()) => return Ok(()),
                        Err(reason) => {
                            for (q, slot) in self.placed.drain(before..).rev() {
                                state.release(&slot, &self.snapshot.pods[q]);
                            }
                            later_failure = Some(reason);
                        }
                    }
                }
                Err(reason) => own_failure = Some(reason),
            }
        }
        // Why: a later part's reason when this part found room somewhere, else this part's.
        Err(later_failure
            .or(match (part.required, own_failure) {
                (Some(label), _) => Some(Reason::NoTopologyDomain {
                    label: label.to_string(),
                    pods: order.len() as u32,
                    labelled_nodes: labelled as u32,
                }),
                (None, reason) => reason,
            })
            .unwrap_or(Reason::NoNodeFits {
                nodes: state.len() as u32,
                found: Vec::new(),
            }))
    }
}

/// One try, inside a domain or anywhere; on failure everything taken is given back, and the
/// reason says what the filters found for the pod that did not fit, as things were at that
/// moment (with the rest of the gang placed).
fn attempt(
    state: &mut ClusterState,
    snapshot: &Snapshot,
    order: &[usize],
    plan: &Plan,
    at: Where,
    explain: bool,
    before: &[(usize, Slot)],
) -> Result<Vec<(usize, Slot)>, Reason> {
    let version = state.version();
    let mut placed: Vec<(usize, Slot)> = Vec::with_capacity(order.len());
    // The gang's GPUs on each node so far (`max-gpus-per-node` counts the whole gang).
    let mut gpus_on: HashMap<usize, i64> = HashMap::new();
    for (q, slot) in before {
        *gpus_on.entry(slot.node).or_default() += snapshot.pods[*q].request.gpu;
    }
    for &p in order {
        let pod = &snapshot.pods[p];
        let domain = at.nodes;
        state.settle();
        let chosen = match at.scores {
            None => choose(state, pod, plan, domain, &gpus_on, None),
            // KAI's topology score outweighs every other preference: the best-scored nodes
            // where the pod fits, then the next.
            Some(scores) => {
                let mut tiers: Vec<u32> = scores.values().copied().collect();
                tiers.sort_unstable_by(|a, b| b.cmp(a));
                tiers.dedup();
                tiers.into_iter().find_map(|tier| {
                    let only = |n: usize| scores.get(&n) == Some(&tier);
                    choose(state, pod, plan, domain, &gpus_on, Some(&only))
                })
            }
        };
        match chosen {
            Some(slot) => {
                state.take(&slot, pod);
                *gpus_on.entry(slot.node).or_default() += pod.request.gpu;
                placed.push((p, slot));
            }
            None => {
                let reason = if explain {
                    explain_no_fit(state, snapshot, p)
                } else {
                    Reason::NoNodeFits {
                        nodes: state.len() as u32,
                        found: Vec::new(),
                    }
                };
                for (q, slot) in placed.iter().rev() {
                    state.release(slot, &snapshot.pods[*q]);
                }
                state.rewind(version);
                return Err(reason);
            }
        }
    }
    Ok(placed)
}

/// The node a pod goes to: the first in strategy order that passes every filter and the gang's
/// placement; preferences come after the strategy (among the nodes it ranks first, the one the
/// pod prefers, the first of those on a tie).
fn choose<'c>(
    state: &'c ClusterState,
    pod: &'c Pod,
    plan: &Plan,
    domain: Option<&HashSet<usize>>,
    gpus_on: &HashMap<usize, i64>,
    only: Option<&dyn Fn(usize) -> bool>,
) -> Option<Slot> {
    let cap = plan.max_gpus_per_node.map(|c| c as i64 * 1000);
    let feasible = |nodes: Box<dyn Iterator<Item = usize> + 'c>| {
        nodes
            .filter(|n| domain.is_none_or(|d| d.contains(n)))
            .filter(|&n| only.is_none_or(|only| only(n)))
            .filter(|n| {
                cap.is_none_or(|c| gpus_on.get(n).copied().unwrap_or(0) + pod.request.gpu <= c)
            })
            .filter_map(|n| {
                state
                    .devices_on_candidate(n, pod, plan.strategy)
                    .map(|devices| Slot { node: n, devices })
            })
    };
    let numa = state.numa.as_ref().filter(|numa| numa.ranks(pod));
    let prefers = filters::has_preferences(pod) || state.soft_taints();
    let pick = |first: Slot, rest: &mut dyn Iterator<Item = Slot>| {
        let Some(numa) = numa else {
            return match prefers {
                true => preferred(state, pod, plan.strategy, first, rest),
                false => first,
            };
        };
        // KAI adds the NUMA score (100 / the zones taken) to the strategy's (at most 10):
        // here the nodes taking the fewest zones go first, in the strategy's order, and the
        // pod's preferences choose among those as they do without NUMA. A node holding the pod
        // in one zone ends the walk.
        let score = |s: &Slot| numa.score(s.node, pod, state.node(s.node).numa.as_deref());
        let mut top = score(&first);
        let mut best = vec![first];
        if top < super::numa::BEST || prefers {
            for slot in rest {
                let sc = score(&slot);
                if sc > top {
                    (top, best) = (sc, vec![slot]);
                    if top == super::numa::BEST && !prefers {
                        break;
                    }
                } else if sc == top {
                    best.push(slot);
                }
            }
        }
        let mut best = best.into_iter();
        let first = best.next().expect("the first slot is always there");
        match prefers {
            true => preferred(state, pod, plan.strategy, first, &mut best),
            false => first,
        }
    };
    // KAI's node order puts first, under GPU binpack, the nodes where a shared pod fits on a
    // device other shared pods use (`plugins/gpusharingorder`: 10,000 points); then the nodes
    // where the pod fits in idle room (`plugins/nodeavailability`: 1,000 points, far above
    // any strategy's score), then the others, where it would take room still being released.
    let releasing = state.any_releasing();
    let sharing = pod.fractional && plan.strategy == Strategy::Binpack;
    // Each pass: only nodes with a used shared device?, only idle room? In their points order.
    for (shared, idle_only) in [(true, true), (true, false), (false, true), (false, false)] {
        if (shared && !sharing) || (idle_only && !releasing) {
            continue;
        }
        let nodes = if shared {
            state.on_used_shared_devices(pod, idle_only)
        } else {
            state.candidates_where(pod, plan.strategy, idle_only)
        };
        let mut found = feasible(nodes);
        if let Some(first) = found.next() {
            return Some(pick(first, &mut found));
        }
    }
    None
}

/// Among `first` and the slots after it that the strategy ranks equal to it, the one the pod
/// prefers (node affinity preferences, tolerated soft taints); the first of those on a tie.
fn preferred(
    state: &ClusterState,
    pod: &Pod,
    strategy: Strategy,
    first: Slot,
    rest: &mut dyn Iterator<Item = Slot>,
) -> Slot {
    let key = state.strategy_key(first.node, pod, strategy);
    std::iter::once(first)
        .chain(rest.take_while(|s| state.strategy_key(s.node, pod, strategy) == key))
        .enumerate()
        .max_by_key(|(i, s)| {
            (
                filters::preference(state.node(s.node), pod),
                std::cmp::Reverse(*i),
            )
        })
        .map(|(_, s)| s)
        .expect("the first slot is always there")
}

/// The reasons found for pods that did not fit. A cluster too full for a queue's backlog sees
/// the same few pod shapes fail one after another, each after a few pods were placed: each
/// shape keeps what every node said about it, and only the nodes changed since are asked
/// again.
#[derive(Debug, Clone, Default)]
pub(crate) struct WhyNot {
    shapes: Vec<Shape>,
}

/// What the nodes said about a pod of one shape.
#[derive(Debug, Clone)]
struct Shape {
    /// A pod of the shape.
    pod: usize,
    /// Per node, as of `synced`.
    seen: Vec<Seen>,
    tally: Tally,
    /// The state's stamp when `seen` was last brought up to date.
    synced: u64,
    /// The reason, and the state's version it holds for.
    reason: Option<(u64, Reason)>,
}

/// The most shapes remembered, the most recently tried first.
const WHY_NOT_SHAPES: usize = 32;

/// Why no node takes pod `p`, in kube-scheduler's style: how many nodes fail each filter, with
/// the numbers; when every node fails a filter that freeing resources cannot change, or the pod
/// is larger than any node it may use even empty, that instead. Worked out from what the nodes
/// said about a pod with the same needs, asking again only the nodes changed since. A node's
/// answer depends on the node alone, unless pods have inter-pod terms (a pod placed on one node
/// then changes its whole topology domain): then every node is asked again once the state has
/// changed.
fn explain_no_fit(state: &mut ClusterState, snapshot: &Snapshot, p: usize) -> Reason {
    let pod = &snapshot.pods[p];
    let terms = state.answers_depend_on_other_nodes();
    let (version, stamp) = (state.version(), state.stamp());
    let at = state
        .why_not
        .shapes
        .iter()
        .position(|s| same_needs(&snapshot.pods[s.pod], pod, terms));
    let Some(at) = at else {
        let seen: Vec<Seen> = (0..state.len()).map(|n| seen(state, n, pod)).collect();
        let mut tally = Tally::default();
        for s in &seen {
            tally.count(s, 1);
        }
        let reason = tally.reason(state, pod);
        // The shape tried longest ago makes way.
        state.why_not.shapes.truncate(WHY_NOT_SHAPES - 1);
        state.why_not.shapes.insert(
            0,
            Shape {
                pod: p,
                seen,
                tally,
                synced: stamp,
                reason: Some((version, reason.clone())),
            },
        );
        return reason;
    };
    let mut shape = state.why_not.shapes.remove(at);
    let reason = match &shape.reason {
        Some((v, reason)) if *v == version => reason.clone(),
        _ => {
            let changed: Vec<usize> = match terms {
                true => (0..state.len()).collect(),
                false => state.changed_since(shape.synced),
            };
            for n in changed {
                let now = seen(state, n, pod);
                if now != shape.seen[n] {
                    shape.tally.count(&shape.seen[n], -1);
                    shape.tally.count(&now, 1);
                    shape.seen[n] = now;
                }
            }
            shape.synced = stamp;
            let reason = shape.tally.reason(state, pod);
            shape.reason = Some((version, reason.clone()));
            reason
        }
    };
    state.why_not.shapes.insert(0, shape);
    reason
}

/// Whether two pods ask the same of a node: everything the filters and the reasons read. Their
/// namespaces and labels matter only to inter-pod terms (`terms`: some pod has them).
pub(super) fn same_needs(a: &Pod, b: &Pod, terms: bool) -> bool {
    a.request == b.request
        && a.fractional == b.fractional
        && a.shared_devices == b.shared_devices
        && a.gpu_memory == b.gpu_memory
        && a.extended == b.extended
        && a.legacy_mig == b.legacy_mig
        && a.constraints == b.constraints
        && (!terms || (a.namespace == b.namespace && a.labels == b.labels))
}

/// What one node says about a pod: the finding it is counted under, the free amount it shows
/// there (the most of them is reported), whether the node admits the pod at all, and whether
/// the pod would fit it empty.
#[derive(Debug, Clone, PartialEq)]
struct Seen {
    what: Found,
    free: i64,
    admitted: bool,
    holds: bool,
}

/// What node `n` says about `pod` as the state stands.
fn seen(state: &ClusterState, n: usize, pod: &Pod) -> Seen {
    if let Some(m) = state.misfit(n, pod) {
        return Seen {
            what: Found::Misfit(m),
            free: 0,
            admitted: false,
            holds: false,
        };
    }
    let lacking = state.lacking(n, pod);
    let (what, free) = if let Some(kind) =
        ResourceKind::ALL.into_iter().find(|&k| *lacking.get(k) > 0)
    {
        let most = match kind {
            ResourceKind::Gpu => pod.request.gpu - lacking.gpu,
            _ => *state.free(n).get(kind),
        };
        (Found::Lacks(kind), most)
    } else {
        match state.room(n, pod) {
            Some(Shortage::Extended(name, need, free)) => (Found::LacksExtended(name, need), free),
            Some(shortage) => (Found::Room(shortage), 0),
            None => (Found::Excluded, 0),
        }
    };
    Seen {
        what,
        free,
        admitted: true,
        holds: holds_when_empty(state, n, pod),
    }
}

/// The nodes' answers counted: per finding, how many nodes and the free amounts they show.
#[derive(Debug, Clone, Default)]
struct Tally {
    found: BTreeMap<Found, (u32, BTreeMap<i64, u32>)>,
    admitted: usize,
    holds: usize,
}

impl Tally {
    /// Counts a node's answer in (`sign` 1) or out (`sign` -1).
    fn count(&mut self, seen: &Seen, sign: i32) {
        let up = sign > 0;
        let step = |n: &mut usize| *n = if up { *n + 1 } else { *n - 1 };
        if seen.admitted {
            step(&mut self.admitted);
        }
        if seen.holds {
            step(&mut self.holds);
        }
        let (nodes, frees) = self.found.entry(seen.what.clone()).or_default();
        let free = frees.entry(seen.free).or_default();
        if up {
            *nodes += 1;
            *free += 1;
            return;
        }
        *nodes -= 1;
        *free -= 1;
        if *free == 0 {
            frees.remove(&seen.free);
        }
        if *nodes == 0 {
            self.found.remove(&seen.what);
        }
    }

    /// The reason the answers give.
    fn reason(&self, state: &ClusterState, pod: &Pod) -> Reason {
        let found: BTreeMap<Found, (u32, i64)> = self
            .found
            .iter()
            .map(|(what, (nodes, frees))| {
                let most = frees.last_key_value().map_or(i64::MIN, |(&f, _)| f);
                (what.clone(), (*nodes, most))
            })
            .collect();
        let nodes = state.len() as u32;
        if self.admitted == 0 && nodes > 0 {
            return Reason::NoNodeMatches {
                nodes,
                found: summary(found, pod),
            };
        }
        if self.holds == 0
            && let Some(reason) = larger_than_any(state, pod)
        {
            return reason;
        }
        Reason::NoNodeFits {
            nodes,
            found: summary(found, pod),
        }
    }
}

/// One kind of finding about a node.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Found {
    Misfit(filters::Misfit),
    Lacks(ResourceKind),
    LacksExtended(String, i64),
    Room(Shortage),
    /// Fits, but not where the gang's placement allows (topology domain, GPUs per node).
    Excluded,
}

/// The verb agreeing with a count of nodes.
fn lack(count: u32) -> &'static str {
    if count == 1 { "lacks" } else { "lack" }
}

fn summary(found: BTreeMap<Found, (u32, i64)>, pod: &Pod) -> Vec<String> {
    let mut rows: Vec<(Found, (u32, i64))> = found.into_iter().collect();
    rows.sort_by_key(|(what, (count, _))| (std::cmp::Reverse(*count), what.clone()));
    rows.into_iter()
        .map(|(what, (count, most))| match what {
            Found::Misfit(m) => m.describe(count),
            Found::Lacks(kind) => {
                let need = amount(*pod.request.get(kind), kind);
                let on = if kind == ResourceKind::Gpu && pod.fractional {
                    " on shared devices"
                } else {
                    ""
                };
                let most = kai_policy_compiler::quantity::format_quantity(most.max(0), kind);
                format!("{count} {} {need}{on} (most free: {most})", lack(count))
            }
            Found::LacksExtended(name, need) => {
                format!(
                    "{count} {} {need} {name} (most free: {})",
                    lack(count),
                    most.max(0)
                )
            }
            Found::Room(Shortage::PodSlots) => format!(
                "{count} {} no pod slot left (status.allocatable.pods)",
                if count == 1 { "has" } else { "have" }
            ),
            Found::Room(Shortage::HostPort(port)) => format!(
                "{count} {} host port {port} in use",
                if count == 1 { "has" } else { "have" }
            ),
            Found::Room(Shortage::Dra(short)) => {
                let is = if count == 1 { "is" } else { "are" };
                match short {
                    DraShortage::Devices(claim) => {
                        format!(
                            "{count} {} free devices for ResourceClaim {claim}",
                            lack(count)
                        )
                    }
                    DraShortage::OtherNode(claim, node) => format!(
                        "{count} {is} not node {node}, where ResourceClaim {claim} is allocated"
                    ),
                    DraShortage::Unreachable(claim) => format!(
                        "{count} {is} not among the nodes the devices of ResourceClaim {claim} \
                         are reachable from (its allocation's nodeSelector)"
                    ),
                    DraShortage::Pool(claim, why) => format!(
                        "{count} cannot give ResourceClaim {claim} all the devices it asks: {why}"
                    ),
                    DraShortage::Consumers(claim) => format!(
                        "{count} cannot add a consumer to ResourceClaim {claim}, which has the \
                         most a claim may have ({} pods)",
                        crate::dra::MAX_CONSUMERS
                    ),
                }
            }
            Found::Room(Shortage::Numa(policy)) => match policy {
                "single-numa-node" => format!(
                    "{count} {} no NUMA zone with room for all of the pod's aligned requests \
                     (Topology Manager policy single-numa-node)",
                    if count == 1 { "has" } else { "have" }
                ),
                _ => format!(
                    "{count} cannot hold the pod's aligned requests on the fewest NUMA zones \
                     the kubelet would accept (Topology Manager policy {policy})"
                ),
            },
            Found::Room(_) => {
                format!("{count} would break the pod's inter-pod affinity or anti-affinity")
            }
            Found::Excluded => format!(
                "{count} {} outside the gang's placement (topology domain or GPUs per node)",
                if count == 1 { "is" } else { "are" }
            ),
        })
        .collect()
}

/// What a node could give a pod with nothing else running: its allocatable, with a shared pod's
/// GPU counted as its request when the node has enough devices for it.
fn empty_capacity(state: &ClusterState, n: usize, pod: &Pod) -> crate::cluster::Amounts {
    let node = state.node(n);
    let mut all = node.allocatable;
    if pod.fractional {
        let enough = node.gpu_devices() >= pod.shared_devices.max(1) as usize;
        all.gpu = if enough { pod.request.gpu } else { 0 };
    }
    all
}

/// Whether the pod fits on the node when it is empty.
fn holds_when_empty(state: &ClusterState, n: usize, pod: &Pod) -> bool {
    let all = empty_capacity(state, n, pod);
    ResourceKind::ALL
        .into_iter()
        .all(|k| all.get(k) >= pod.request.get(k))
        && pod
            .extended
            .iter()
            .all(|(name, &need)| state.node(n).extended.get(name).copied().unwrap_or(0) >= need)
}

/// "Needs 16 GPU on one node; the largest node it may use has 8 GPU", for a pod no node it may
/// use could hold even with nothing else running: the first resource it needs more of than any
/// such node has.
fn larger_than_any(state: &ClusterState, pod: &Pod) -> Option<Reason> {
    let admitted: Vec<usize> = (0..state.len())
        .filter(|&n| state.misfit(n, pod).is_none())
        .collect();
    for kind in ResourceKind::ALL {
        let largest = admitted
            .iter()
            .map(|&n| *empty_capacity(state, n, pod).get(kind))
            .max()?;
        if largest < *pod.request.get(kind) {
            return Some(Reason::LargerThanAnyNode {
                needs: amount(*pod.request.get(kind), kind),
                largest: amount(largest, kind),
            });
        }
    }
    for (name, &need) in &pod.extended {
        let largest = admitted
            .iter()
            .map(|&n| state.node(n).extended.get(name).copied().unwrap_or(0))
            .max()?;
        if largest < need {
            return Some(Reason::LargerThanAnyNode {
                needs: format!("{need} {name}"),
                largest: format!("{largest} {name}"),
            });
        }
    }
    None
}

#[cfg(test)]
impl Plan<'_> {
    /// GPU binpack with no other rule: what the placement tests place by.
    fn binpack() -> Self {
        Plan {
            strategy: Strategy::Binpack,
            max_gpus_per_node: None,
            topology: None,
            required: None,
            preferred: None,
            gang: None,
            job_pods: &[],
        }
    }
}

#[cfg(test)]
mod why_not_tests {
    use super::*;
    use crate::cycle::tests::{node, pod, running};

    /// Pods that fail one after another are each told why for their own needs, with the
    /// cluster as it stands when they are tried: a reason found once is given again only for
    /// the same needs in the same state.
    ///
    /// n1 (4 GPUs) and n2 (3 GPUs) each run a 3-GPU pod: 1 GPU free, on n1. Gang `g` (two
    /// 1-GPU pods) places one on n1 and its second finds both nodes full; `big` (2 GPU) is
    /// tried with the gang given back, n1's GPU free again; `pinned` (1 GPU, a node selector no
    /// node has) matches no node; `big2` (as `big`) gets `big`'s reason; then `one` (1 GPU)
    /// takes n1's GPU, and `big2` tried again finds none free anywhere.
    #[test]
    fn a_reason_is_given_again_only_for_the_same_needs_in_the_same_state() {
        let mut pinned = pod("a", "pinned", 1);
        pinned.constraints.node_selector = BTreeMap::from([("pool".into(), "x".into())]);
        let snapshot = Snapshot {
            nodes: vec![node("n1", 4), node("n2", 3)],
            pods: vec![
                running(pod("b", "r1", 3), "n1", 0),
                running(pod("b", "r2", 3), "n2", 0),
                pod("a", "g-0", 1),
                pod("a", "g-1", 1),
                pod("a", "big", 2),
                pinned,
                pod("a", "big2", 2),
                pod("a", "one", 1),
            ],
            ..Default::default()
        };
        let (mut state, _) = ClusterState::new(&snapshot);
        let plan = Plan::binpack();
        let why = |state: &mut ClusterState, pods: &[usize]| {
            place_gang(state, &snapshot, pods, &plan)
                .expect_err("does not fit")
                .to_string()
        };
        assert_eq!(
            why(&mut state, &[2, 3]),
            "0/2 nodes fit: 2 lack 1 GPU (most free: 0)"
        );
        let big = why(&mut state, &[4]);
        assert_eq!(big, "0/2 nodes fit: 2 lack 2 GPU (most free: 1)");
        assert!(
            why(&mut state, &[5]).starts_with("0/2 nodes match the pod"),
            "the node selector, not the room"
        );
        assert_eq!(why(&mut state, &[6]), big);
        place_gang(&mut state, &snapshot, &[7], &plan).expect("one GPU is free on n1");
        assert_eq!(
            why(&mut state, &[6]),
            "0/2 nodes fit: 2 lack 2 GPU (most free: 0)"
        );
    }
}

#[cfg(test)]
mod why_not_props {
    use proptest::prelude::{ProptestConfig, any, prop, prop_assert_eq, prop_compose, proptest};

    use super::*;
    use crate::cluster::{Amounts, LabelSelector, Node, PodAffinityTerm};

    fn pod(i: usize, gpu: i64, cpu: i64, fractional: bool, pinned: bool) -> Pod {
        let mut pod = Pod {
            namespace: "ns".into(),
            name: format!("p{i}"),
            request: Amounts {
                gpu,
                cpu,
                memory: 1 << 30,
            },
            fractional,
            shared_devices: u32::from(fractional),
            ..Default::default()
        };
        if pinned {
            pod.constraints.node_selector = BTreeMap::from([("pool".into(), "a".into())]);
        }
        pod
    }

    prop_compose! {
        /// Up to 12 nodes (some cordoned, some in pool `a`, in three zones) and 60 pods of a
        /// few shapes to place and take away in turn; with `terms`, the pods of one shape keep
        /// apart by zone (inter-pod anti-affinity).
        fn cluster()(
            nodes in prop::collection::vec((0i64..=4, 1i64..=8, 0u8..6), 1..12),
            pods in prop::collection::vec((0u8..5, 0i64..4, any::<bool>()), 1..60),
            terms in any::<bool>(),
        ) -> Snapshot {
            let nodes = nodes
                .iter()
                .enumerate()
                .map(|(i, &(gpus, cores, kind))| Node {
                    name: format!("n{i}"),
                    labels: match kind {
                        0 | 1 => BTreeMap::from([("pool".to_string(), "a".to_string())]),
                        _ => BTreeMap::new(),
                    }
                    .into_iter()
                    .chain([("zone".to_string(), format!("z{}", i % 3))])
                    .collect(),
                    allocatable: Amounts {
                        gpu: gpus * 1000,
                        cpu: cores * 1000,
                        memory: 1 << 40,
                    },
                    unschedulable: kind == 5,
                    ..Default::default()
                })
                .collect();
            let pods = pods
                .iter()
                .enumerate()
                .map(|(i, &(shape, size, pinned))| match shape {
                    0 => pod(i, 1000 * (size + 1), 1000, false, pinned),
                    1 => pod(i, 250 * (size + 1), 500, true, pinned),
                    2 => pod(i, 0, 2000 * (size + 1), false, pinned),
                    3 if terms => {
                        let mut pod = pod(i, 1000, 1000, false, false);
                        let app = BTreeMap::from([("app".to_string(), "apart".to_string())]);
                        pod.constraints.pod_anti_affinity = vec![PodAffinityTerm {
                            selector: LabelSelector {
                                labels: app.clone(),
                                expressions: Vec::new(),
                            },
                            namespaces: Vec::new(),
                            topology_key: "zone".into(),
                        }];
                        pod.labels = app;
                        pod
                    }
                    3 => pod(i, 1000, 1000, false, false),
                    _ => pod(i, 500, 100, true, false),
                })
                .collect();
            Snapshot { nodes, pods, ..Default::default() }
        }
    }

    /// The reason every node gives as the state stands.
    fn afresh(state: &ClusterState, pod: &Pod) -> Reason {
        let mut tally = Tally::default();
        for n in 0..state.len() {
            tally.count(&seen(state, n, pod), 1);
        }
        tally.reason(state, pod)
    }

    proptest! {
        #![proptest_config(ProptestConfig {
            cases: ProptestConfig::default().cases.max(300),
            ..ProptestConfig::default()
        })]

        /// The reason kept up to date node by node is the reason every node gives afresh,
        /// whatever was placed and taken away since a pod of the same needs was last told.
        #[test]
        fn a_kept_reason_is_the_reason_worked_out_afresh(
            snapshot in cluster(),
            steps in prop::collection::vec((0usize..60, any::<bool>()), 1..150),
        ) {
            let (mut state, _) = ClusterState::new(&snapshot);
            let plan = Plan::binpack();
            let mut placed: Vec<(usize, Slot)> = Vec::new();
            for (i, (pick, take_away)) in steps.into_iter().enumerate() {
                if take_away && !placed.is_empty() {
                    let (p, slot) = placed.swap_remove(pick % placed.len());
                    state.release(&slot, &snapshot.pods[p]);
                    continue;
                }
                let p = (pick + i) % snapshot.pods.len();
                if placed.iter().any(|(q, _)| *q == p) {
                    continue;
                }
                match place_gang(&mut state, &snapshot, &[p], &plan) {
                    Ok(slots) => placed.extend(slots),
                    Err(kept) => prop_assert_eq!(kept, afresh(&state, &snapshot.pods[p])),
                }
            }
        }
    }
}
