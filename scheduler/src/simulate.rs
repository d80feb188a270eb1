//! The simulator (pure): scheduling cycles run in memory over a snapshot, each cycle's decisions
//! applied to it before the next, as `kai-scheduler simulate` prints them.
//!
//! How the simulated world moves, between one cycle and the next:
//! - a **bind** puts the pod on its node; it starts running at the cycle's time;
//! - an **eviction** removes the pod (evicted pods are gone by the next cycle; the output remembers
//!   them as `evicted`); a pod *moved* by consolidation is re-placed at once on its new node;
//! - a **nomination** leaves the pod pending and remembers the node until the next cycle (which
//!   binds it, nominates it again, or gives another reason);
//! - pods that were already terminating in the cluster file are gone after the first cycle;
//! - the clock advances [`CYCLE_SECONDS`] per cycle.
//!
//! The simulation stops after the number of cycles asked for, or earlier when a cycle changes
//! nothing (no bind, eviction or nomination). Before stopping, when pods are still pending and
//! the clock alone may still change a decision — a running pod's min-runtime ends, or a gang
//! below its minimum reaches the stale-gang grace period — the clock skips ahead to the next
//! such moment and one more cycle runs: what only time delays is shown, not hidden.
//!
//! Time-based fairness: the cluster file holds no usage history, so it starts empty; when the
//! policy enables `fairness`, each cycle's allocation is recorded ([`crate::usage`]) and the
//! following cycles are given the usage measured over the simulated minutes so far.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use kai_policy_compiler::fairshare::FairShares;
use kai_policy_compiler::fairshare::usage::UsageHistory;
use kai_policy_compiler::model::Policy;
use kai_policy_compiler::quantity::{ResourceKind, format_quantity};
use serde_json::{Value, json};

use crate::cluster::{Amounts, PodGroup, Snapshot, Time};
use crate::cycle::{self, Cycle};
use crate::decision::{Decision, EvictReason};
use crate::usage;

/// Seconds the clock advances per cycle (KAI's default cycle period is one second; a minute per
/// step makes min-runtimes and grace periods visible in a few cycles).
pub const CYCLE_SECONDS: Time = 60;

/// Cycles run when the user does not say.
pub const DEFAULT_CYCLES: u32 = 10;

/// How to run a simulation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Options {
    /// At most this many cycles (at least one runs).
    pub cycles: usize,
    /// The clock at the first cycle (seconds on the snapshot's clock).
    pub start: Time,
    /// Seconds between cycles.
    pub step: Time,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            cycles: DEFAULT_CYCLES as usize,
            start: 0,
            step: CYCLE_SECONDS,
        }
    }
}

/// One cycle of a simulation.
#[derive(Debug, Clone, PartialEq)]
pub struct CycleRecord {
    /// The clock when it ran.
    pub at: Time,
    /// What it decided.
    pub decisions: Vec<Decision>,
}

/// Where a pod ended up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// Running on a node.
    Bound,
    /// Not running.
    Pending,
    /// Evicted during the simulation.
    Evicted,
}

impl Status {
    /// The word used in the JSON output.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Bound => "bound",
            Status::Pending => "pending",
            Status::Evicted => "evicted",
        }
    }
}

/// A pod's state after the last cycle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodState {
    /// The node it runs on (bound pods only).
    pub node: Option<String>,
    /// Bound, pending or evicted.
    pub status: Status,
    /// A pending pod's nominated node (pipelined onto resources being released).
    pub nominated: Option<String>,
}

/// The outcome of a simulation.
#[derive(Debug, Clone)]
pub struct Simulation {
    /// Every cycle that ran.
    pub cycles: Vec<CycleRecord>,
    /// Every pod of the cluster file (finished ones aside), by `namespace/name`.
    pub pods: BTreeMap<String, PodState>,
    /// Fair shares of the last cycle.
    pub shares: FairShares,
    /// Allocation per queue after the last cycle (parents include their children).
    pub allocated: Vec<Amounts>,
    /// The snapshot after the last cycle.
    pub snapshot: Snapshot,
    /// Seconds between cycles when something changed (a longer gap is a skip ahead).
    pub step: Time,
}

/// Runs cycles over `snapshot` until nothing changes or `options.cycles` have run.
pub fn simulate(mut snapshot: Snapshot, policy: &Policy, options: &Options) -> Simulation {
    let mut cycles = Vec::new();
    let mut evicted: BTreeSet<String> = BTreeSet::new();
    let mut nominated: BTreeMap<String, String> = BTreeMap::new();
    let mut now = options.start;
    let mut history = UsageHistory::new();
    loop {
        let usage = usage::of(&history, policy, now);
        let result = cycle::run(&Cycle {
            snapshot: &snapshot,
            policy,
            now,
            usage: usage.as_deref(),
        });
        usage::record(&mut history, &snapshot, policy, &result.allocated, now);
        // The marks are kept on the pod groups, as KAI keeps them in annotations.
        keep_marks(&mut snapshot.groups, &result, now);
        let mut changed = apply(
            &mut snapshot,
            (&result.decisions, &result.claims, &result.numa_zones),
            now,
            &mut evicted,
            &mut nominated,
        );
        if !snapshot.dra.is_empty() {
            crate::dra::recount_gpus(&mut snapshot);
        }
        // Pods that were being deleted when the file was written are gone by now.
        if cycles.is_empty() && snapshot.pods.iter().any(|p| p.terminating) {
            snapshot.pods.retain(|p| !p.terminating);
            changed = true;
        }
        cycles.push(CycleRecord {
            at: now,
            decisions: result.decisions,
        });
        let done = cycles.len() >= options.cycles.max(1);
        let next = if changed {
            Some(now + options.step)
        } else {
            next_deadline(&snapshot, policy, now).map(|t| t.max(now + options.step))
        };
        match next {
            Some(t) if !done => now = t,
            _ => {
                let pods = states(&snapshot, &evicted, &nominated);
                return Simulation {
                    cycles,
                    pods,
                    shares: result.shares,
                    allocated: result.allocated,
                    snapshot,
                    step: options.step,
                };
            }
        }
    }
}

/// Applies one cycle's decisions; returns whether anything changed.
fn apply(
    snapshot: &mut Snapshot,
    (decisions, claims, numa_zones): (
        &[Decision],
        &[crate::dra::ClaimStatus],
        &[crate::numa::PodZones],
    ),
    now: Time,
    evicted: &mut BTreeSet<String>,
    nominated: &mut BTreeMap<String, String>,
) -> bool {
    let mut changed = false;
    // A nomination holds for one cycle: the next one binds the pod, nominates it again, or
    // leaves it pending for another reason.
    nominated.clear();
    let index: BTreeMap<String, usize> = snapshot
        .pods
        .iter()
        .enumerate()
        .map(|(i, p)| (p.key(), i))
        .collect();
    let mut gone = BTreeSet::new();
    let zones = crate::numa::by_pod(numa_zones);
    for decision in decisions {
        match decision {
            Decision::Evict { pod, reason, .. } => {
                let Some(&i) = index.get(pod) else { continue };
                changed = true;
                crate::dra::release(&mut snapshot.dra, &snapshot.pods[i]);
                match reason {
                    EvictReason::Consolidate { to_node, .. } => {
                        snapshot.pods[i].move_to(to_node, now);
                        snapshot.pods[i].numa_zones = zones.get(pod.as_str()).map(|z| (*z).clone());
                        crate::dra::bind(&mut snapshot.dra, &snapshot.pods[i], claims);
                    }
                    _ => {
                        gone.insert(i);
                        evicted.insert(pod.clone());
                    }
                }
            }
            Decision::Bind { pod, node } => {
                let Some(&i) = index.get(pod) else { continue };
                changed = true;
                let p = &mut snapshot.pods[i];
                p.node = Some(node.clone());
                p.started = Some(now);
                // The binder's record of the predicted NUMA placement.
                p.numa_zones = zones.get(pod.as_str()).map(|z| (*z).clone());
                nominated.remove(pod);
                crate::dra::bind(&mut snapshot.dra, &snapshot.pods[i], claims);
            }
            Decision::Nominate { pod, node } => {
                if index.contains_key(pod) {
                    changed = true;
                    nominated.insert(pod.clone(), node.clone());
                }
            }
            Decision::Pending { .. } => {}
        }
    }
    let mut i = 0;
    snapshot.pods.retain(|_| {
        i += 1;
        !gone.contains(&(i - 1))
    });
    changed
}

/// The earliest moment after `now` at which something the clock alone changes may let a cycle
/// decide differently: a running pod's min-runtime (preempt or reclaim) ends while some pod is
/// still pending, a waiting gang's preemption delay ends, or a gang marked stale reaches its
/// grace period.
fn next_deadline(snapshot: &Snapshot, policy: &Policy, now: Time) -> Option<Time> {
    // Min-runtimes only matter while some pod waits for room.
    let waiting = snapshot.pods.iter().any(|p| p.node.is_none());
    // A gang marked stale is evicted once its grace period has passed since the mark.
    let stale = snapshot.groups.iter().filter_map(|g| {
        let grace = g
            .staleness_grace
            .unwrap_or(crate::cycle::STALE_GANG_GRACE_SECONDS as i64);
        let since = g.stale_since?;
        u64::try_from(grace)
            .ok()
            .map(|grace| since.saturating_add(grace))
    });
    // A waiting gang may start to evict once its preemption delay has passed.
    let delayed = snapshot
        .groups
        .iter()
        .filter(|_| waiting)
        .filter_map(PodGroup::evicts_from);
    let groups: BTreeMap<(&str, &str), Option<&str>> = snapshot
        .groups
        .iter()
        .map(|g| ((g.namespace.as_str(), g.name.as_str()), g.queue.as_deref()))
        .collect();
    let cluster = policy.cluster.min_runtime;
    snapshot
        .pods
        .iter()
        .filter(|_| waiting)
        .filter_map(|p| Some((p, p.started?)))
        .flat_map(|(p, started)| {
            let named = p
                .group
                .as_deref()
                .and_then(|g| groups.get(&(p.namespace.as_str(), g)).copied().flatten())
                .or(p.queue.as_deref());
            let queue = match named {
                Some(name) => policy.queue(name),
                None => policy
                    .queues
                    .iter()
                    .find(|q| q.namespaces.defaults.contains(&p.namespace)),
            };
            let runtime = queue.map_or(cluster, |q| q.min_runtime);
            [
                runtime.preempt.or(cluster.preempt),
                runtime.reclaim.or(cluster.reclaim),
            ]
            .into_iter()
            .flatten()
            .map(move |d| started.saturating_add(d.0))
        })
        .chain(stale)
        .chain(delayed)
        .filter(|&end| end > now)
        .min()
}

fn states(
    snapshot: &Snapshot,
    evicted: &BTreeSet<String>,
    nominated: &BTreeMap<String, String>,
) -> BTreeMap<String, PodState> {
    let mut pods: BTreeMap<String, PodState> = evicted
        .iter()
        .map(|k| {
            (
                k.clone(),
                PodState {
                    node: None,
                    status: Status::Evicted,
                    nominated: None,
                },
            )
        })
        .collect();
    for p in &snapshot.pods {
        let key = p.key();
        let state = match &p.node {
            Some(node) => PodState {
                node: Some(node.clone()),
                status: Status::Bound,
                nominated: None,
            },
            None => PodState {
                node: None,
                status: Status::Pending,
                nominated: nominated.get(&key).cloned(),
            },
        };
        pods.insert(key, state);
    }
    pods
}

/// `90` → `1m30s`, `0` → `0s`: Go's duration syntax, as the policy writes min-runtimes.
pub fn format_seconds(seconds: Time) -> String {
    kai_policy_compiler::quantity::Duration(seconds).to_string()
}

const NOMINATED: &str = "nominated: waits for evicted pods to release the node";

/// One row of the JSON `decisions` list per pod.
fn decision_rows(decisions: &[Decision]) -> Vec<Value> {
    let nominated: BTreeSet<&str> = decisions
        .iter()
        .filter_map(|d| match d {
            Decision::Nominate { pod, .. } => Some(pod.as_str()),
            _ => None,
        })
        .collect();
    let mut rows = Vec::new();
    for d in decisions {
        match d {
            Decision::Bind { pod, node } => rows
                .push(json!({"action": "bind", "pod": pod, "node": node, "reason": Value::Null})),
            Decision::Nominate { pod, node } => rows
                .push(json!({"action": "pending", "pod": pod, "node": node, "reason": NOMINATED})),
            Decision::Evict { pod, node, reason } => rows.push(
                json!({"action": "evict", "pod": pod, "node": node, "reason": reason.to_string()}),
            ),
            Decision::Pending { pods, reason, .. } => {
                let reason = reason.to_string();
                for pod in pods.iter().filter(|p| !nominated.contains(p.as_str())) {
                    rows.push(json!({"action": "pending", "pod": pod, "node": Value::Null, "reason": reason}));
                }
            }
        }
    }
    rows
}

fn json_amount(v: i64, kind: ResourceKind) -> Value {
    match kind {
        ResourceKind::Gpu if v % 1000 == 0 => json!(v / 1000),
        ResourceKind::Gpu => json!(v as f64 / 1000.0),
        _ => json!(v),
    }
}

fn per_resource(get: impl Fn(ResourceKind) -> i64) -> Value {
    let mut map = serde_json::Map::new();
    for kind in ResourceKind::ALL {
        map.insert(kind.name().into(), json_amount(get(kind), kind));
    }
    Value::Object(map)
}

/// The JSON document of `cli.md`: every cycle's decisions, every pod's final state, and every
/// queue's fair share and allocation (GPU in devices, CPU in millicores, memory in bytes).
pub fn render_json(sim: &Simulation, policy: &Policy) -> String {
    let cycles: Vec<Value> = sim
        .cycles
        .iter()
        .map(|c| json!({"decisions": decision_rows(&c.decisions)}))
        .collect();
    let mut pods = serde_json::Map::new();
    for (key, state) in &sim.pods {
        let mut entry = json!({"node": state.node, "status": state.status.as_str()});
        if let Some(n) = &state.nominated {
            entry["nominated"] = json!(n);
        }
        pods.insert(key.clone(), entry);
    }
    let mut queues = serde_json::Map::new();
    for (q, queue) in policy.queues.iter().enumerate() {
        let share = &sim.shares.queues[q];
        let allocated = sim.allocated.get(q).copied().unwrap_or_default();
        queues.insert(
            queue.name.clone(),
            json!({
                "fair_share": per_resource(|k| share.get(k).fair_share),
                "allocated": per_resource(|k| *allocated.get(k)),
            }),
        );
    }
    let doc = json!({"cycles": cycles, "pods": pods, "queues": queues});
    let mut out = serde_json::to_string_pretty(&doc).unwrap_or_default();
    out.push('\n');
    out
}

/// The human report: every decision per cycle, the pods' final states, and the queue table.
pub fn render_human(sim: &Simulation, policy: &Policy) -> String {
    let mut out = String::new();
    let start = sim.cycles.first().map_or(0, |c| c.at);
    let mut previous = None;
    for (i, c) in sim.cycles.iter().enumerate() {
        let skipped = previous.is_some_and(|p: Time| c.at - p > sim.step);
        let _ = writeln!(
            out,
            "cycle {} at +{}{}",
            i + 1,
            format_seconds(c.at - start),
            if skipped {
                " (skipped ahead: nothing changes until a min-runtime, preemption delay or grace period ends)"
            } else {
                ""
            }
        );
        previous = Some(c.at);
        if c.decisions.is_empty() {
            out.push_str("  nothing to do\n");
        }
        let nominated: BTreeSet<&str> = c
            .decisions
            .iter()
            .filter_map(|d| match d {
                Decision::Nominate { pod, .. } => Some(pod.as_str()),
                _ => None,
            })
            .collect();
        for d in &c.decisions {
            match d {
                Decision::Bind { pod, node } => {
                    let _ = writeln!(out, "  bind      {pod} → {node}");
                }
                Decision::Nominate { pod, node } => {
                    let _ = writeln!(
                        out,
                        "  nominate  {pod} → {node} (waits for evicted pods to release it)"
                    );
                }
                Decision::Evict { pod, node, reason } => {
                    let _ = writeln!(out, "  evict     {pod} on {node}: {reason}");
                }
                Decision::Pending { job, pods, reason } => {
                    let waiting: Vec<&String> = pods
                        .iter()
                        .filter(|p| !nominated.contains(p.as_str()))
                        .collect();
                    let what = match waiting.as_slice() {
                        [] => continue,
                        [one] if *one == job => job.clone(),
                        [one] => format!("{job} ({one})"),
                        many => format!("{job} ({} pods)", many.len()),
                    };
                    let _ = writeln!(out, "  pending   {what}: {reason}");
                }
            }
        }
    }
    let count = |s: Status| sim.pods.values().filter(|p| p.status == s).count();
    let nominated = sim.pods.values().filter(|p| p.nominated.is_some()).count();
    let moves = sim
        .cycles
        .iter()
        .flat_map(|c| &c.decisions)
        .filter(|d| {
            matches!(
                d,
                Decision::Evict {
                    reason: EvictReason::Consolidate { .. },
                    ..
                }
            )
        })
        .count();
    let _ = writeln!(
        out,
        "\nafter {} cycle{}: {} bound, {} pending{}, {} evicted{}",
        sim.cycles.len(),
        if sim.cycles.len() == 1 { "" } else { "s" },
        count(Status::Bound),
        count(Status::Pending),
        if nominated > 0 {
            format!(" ({nominated} nominated)")
        } else {
            String::new()
        },
        count(Status::Evicted),
        match moves {
            0 => String::new(),
            1 => ", 1 move".to_string(),
            n => format!(", {n} moves"),
        }
    );
    out.push('\n');
    out.push_str(&queue_table(sim, policy));
    out
}

/// Fair share vs allocated per resource, one row per queue, children indented under parents.
fn queue_table(sim: &Simulation, policy: &Policy) -> String {
    let mut rows: Vec<Vec<String>> = vec![
        [
            "queue",
            "gpu fair",
            "gpu alloc",
            "cpu fair",
            "cpu alloc",
            "memory fair",
            "memory alloc",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect(),
    ];
    let mut order = Vec::new();
    fn walk(policy: &Policy, q: usize, order: &mut Vec<usize>) {
        order.push(q);
        for &c in &policy.queues[q].children {
            walk(policy, c, order);
        }
    }
    for (q, queue) in policy.queues.iter().enumerate() {
        if queue.parent.is_none() {
            walk(policy, q, &mut order);
        }
    }
    for q in order {
        let queue = &policy.queues[q];
        let share = &sim.shares.queues[q];
        let allocated = sim.allocated.get(q).copied().unwrap_or_default();
        let mut row = vec![format!("{}{}", "  ".repeat(queue.depth), queue.name)];
        for kind in ResourceKind::ALL {
            row.push(format_quantity(share.get(kind).fair_share, kind));
            row.push(format_quantity(*allocated.get(kind), kind));
        }
        rows.push(row);
    }
    let widths: Vec<usize> = (0..rows[0].len())
        .map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for row in &rows {
        let mut line = String::new();
        for (c, cell) in row.iter().enumerate() {
            let pad = widths[c] - cell.chars().count();
            if c == 0 {
                let _ = write!(line, "{cell}{}", " ".repeat(pad));
            } else {
                let _ = write!(line, "  {}{cell}", " ".repeat(pad));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests;

/// Keeps a cycle's marks on its pod groups, as KAI keeps them in annotations: the stale mark,
/// when a group was started and when a pod of it was last evicted.
pub fn keep_marks(groups: &mut [PodGroup], result: &cycle::CycleResult, now: Time) {
    let at = |groups: &[PodGroup], key: &str| {
        groups
            .iter()
            .position(|g| key.split_once('/') == Some((g.namespace.as_str(), g.name.as_str())))
    };
    for (key, since) in &result.stale_marks {
        if let Some(i) = at(groups, key) {
            groups[i].stale_since = *since;
        }
    }
    for key in &result.started {
        if let Some(i) = at(groups, key) {
            groups[i].last_start = Some(now);
        }
    }
    for key in &result.evicted {
        if let Some(i) = at(groups, key) {
            groups[i].last_evicted = Some(now);
        }
    }
}
