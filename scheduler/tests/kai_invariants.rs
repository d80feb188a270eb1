//! KAI's guarantees over random policies as well as random clusters: queue trees up to three
//! levels with random quotas, limits, weights, priorities and min-runtimes, and clusters of
//! running and pending gangs. One cycle each; what must hold:
//!
//! - **min-runtime is never broken**: no job evicted by reclaim or preempt had run less than the
//!   min-runtime that protects it (reclaim: the victim side's value one step below the lowest
//!   common ancestor; preempt: the victim queue's), unless it stays at or above its minimum;
//! - **reclaim takes a queue at most one victim below its share**: for every side (the queue
//!   where the reclaimer's and victim's paths split) that lost jobs to reclaim, what it still
//!   holds plus its last victim was above its allocatable share or above its quota — KAI checks
//!   each victim against what its side still holds before it goes (`FitsReclaimStrategy`), so
//!   only the last can take it below. (Random clusters rarely reach a case where only that
//!   check stops a second victim — the victim filter and the reclaimer's fair-share bound
//!   usually stop it first — so `reclaim_never_takes_a_queue_more_than_one_victim_below_its_share`
//!   in `cycle/reclaim_tests.rs` pins it on the review's traced example;)
//! - no cycle takes a queue (or an ancestor) above its limit;
//! - a reclaim attempt that replays an earlier attempt's victims decides as one that ranks the
//!   queues afresh.
//!
//! `PROPTEST_CASES` raises the number of cases (CI keeps the default).

use std::collections::BTreeMap;

use kai_policy_compiler::check::check;
use kai_policy_compiler::model::{Bound, Policy};
use kai_policy_compiler::source::{SourceFile, SourceSet};
use kai_scheduler::bench::{Shape, steady_cluster};
use kai_scheduler::cluster::{Amounts, Node, Pod, PodGroup, Snapshot, Time};
use kai_scheduler::cycle::{self, Cycle};
use kai_scheduler::decision::{Decision, EvictReason, Reason};
use proptest::prelude::*;

const NOW: Time = 7_200;

/// A queue tree: top-level queues, each a leaf or a parent of leaves or of parents of leaves.
#[derive(Debug, Clone)]
struct Tree {
    tops: Vec<QueueSpec>,
    cluster_reclaim_min: u64,
}

#[derive(Debug, Clone)]
struct QueueSpec {
    quota: u32,
    limit: Option<u32>,
    weight: u32,
    priority: i32,
    reclaim_min: Option<u64>,
    children: Vec<QueueSpec>,
}

fn queue_spec(depth: u32) -> BoxedStrategy<QueueSpec> {
    let leaf = (
        0u32..6,
        prop::option::of(0u32..8),
        0u32..3,
        prop::sample::select(vec![50, 100, 200]),
        prop::option::of(prop::sample::select(vec![0u64, 600, 3_600])),
    )
        .prop_map(|(quota, extra, weight, priority, reclaim_min)| QueueSpec {
            quota,
            limit: extra.map(|e| quota + e),
            // A queue with neither quota nor weight can never run anything (KP0019).
            weight: if quota == 0 { weight.max(1) } else { weight },
            priority,
            reclaim_min,
            children: Vec::new(),
        });
    if depth == 0 {
        return leaf.boxed();
    }
    (leaf, prop::collection::vec(queue_spec(depth - 1), 0..3))
        .prop_map(|(mut q, children)| {
            q.children = children;
            q
        })
        .boxed()
}

fn tree() -> impl Strategy<Value = Tree> {
    (
        prop::collection::vec(queue_spec(2), 1..4),
        prop::sample::select(vec![0u64, 600, 3_600]),
    )
        .prop_map(|(tops, cluster_reclaim_min)| Tree {
            tops,
            cluster_reclaim_min,
        })
}

/// The policy's KDL and its leaf queues' names.
fn kdl(tree: &Tree) -> (String, Vec<String>) {
    fn write(q: &QueueSpec, name: String, out: &mut String, leaves: &mut Vec<String>) {
        out.push_str(&format!("queue \"{name}\" priority={} {{\n", q.priority));
        let limit = q.limit.map_or(String::new(), |l| format!(" limit={l}"));
        out.push_str(&format!(
            "gpu quota={}{limit} weight={}\n",
            q.quota, q.weight
        ));
        if let Some(m) = q.reclaim_min {
            out.push_str(&format!("min-runtime reclaim=\"{m}s\"\n"));
        }
        if q.children.is_empty() {
            out.push_str(&format!("namespaces \"{name}\"\n"));
            leaves.push(name.clone());
        }
        for (i, c) in q.children.iter().enumerate() {
            write(c, format!("{name}-{i}"), out, leaves);
        }
        out.push_str("}\n");
    }
    let mut out = format!(
        "cluster \"c\" {{\n oversubscription \"allow\"\n min-runtime reclaim=\"{}s\" preempt=\"600s\"\n}}\n\
         priority-class \"low\" value=50\npriority-class \"high\" value=80\n",
        tree.cluster_reclaim_min
    );
    let mut leaves = Vec::new();
    for (i, q) in tree.tops.iter().enumerate() {
        write(q, format!("q{i}"), &mut out, &mut leaves);
    }
    (out, leaves)
}

/// A job: its leaf (index into the leaves), pods and GPUs per pod, priority, and if it runs,
/// when it started.
type JobSpec = (usize, usize, i64, bool, Option<Time>);

fn jobs() -> impl Strategy<Value = Vec<JobSpec>> {
    prop::collection::vec(
        (
            0usize..16,
            1usize..3,
            prop::sample::select(vec![1i64, 1, 1, 2, 4, 8]),
            any::<bool>(),
            prop::option::of(0..NOW),
        ),
        1..24,
    )
}

fn snapshot(leaves: &[String], specs: &[JobSpec]) -> Snapshot {
    let mut s = Snapshot {
        nodes: (0..3)
            .map(|i| Node {
                name: format!("n{i}"),
                allocatable: Amounts {
                    gpu: 8_000,
                    cpu: 64_000,
                    memory: 512 << 30,
                },
                ..Node::default()
            })
            .collect(),
        ..Snapshot::default()
    };
    let mut free = [8_000i64; 3];
    for (j, &(leaf, pods, gpus, high, started)) in specs.iter().enumerate() {
        let ns = &leaves[leaf % leaves.len()];
        let name = format!("j{j}");
        // A running job is placed whole (first fit) or becomes a pending one.
        let mut nodes = Vec::new();
        if started.is_some() {
            let mut f = free;
            for _ in 0..pods {
                match f.iter().position(|&x| x >= gpus * 1000) {
                    Some(n) => {
                        f[n] -= gpus * 1000;
                        nodes.push(n);
                    }
                    None => break,
                }
            }
            if nodes.len() == pods {
                free = f;
            } else {
                nodes.clear();
            }
        }
        for p in 0..pods {
            s.pods.push(Pod {
                namespace: ns.clone(),
                name: format!("{name}-{p}"),
                group: Some(name.clone()),
                priority_class: Some(if high { "high" } else { "low" }.into()),
                request: Amounts {
                    gpu: gpus * 1000,
                    cpu: 1000,
                    memory: 1 << 30,
                },
                node: nodes.get(p).map(|n| format!("n{n}")),
                created: started.unwrap_or(NOW - 1),
                started: nodes.get(p).and(started),
                termination_grace_seconds: 30,
                ..Pod::default()
            });
        }
        s.groups.push(PodGroup {
            namespace: ns.clone(),
            name,
            min_member: pods as u32,
            created: started.unwrap_or(NOW - 1),
            ..PodGroup::default()
        });
    }
    s
}

fn compile(text: &str) -> Policy {
    let checked = check(
        &SourceSet::new(vec![SourceFile::new("p.kdl", text)]),
        Vec::new(),
    );
    match checked.policy {
        Some(p) if !checked.has_errors() => p,
        _ => panic!(
            "generated policy does not check:\n{text}\n{:#?}",
            checked.diagnostics
        ),
    }
}

/// Queue indexes from the top of the tree down to `q`.
fn path(policy: &Policy, q: usize) -> Vec<usize> {
    let mut p = vec![q];
    while let Some(parent) = policy.queues[*p.last().unwrap()].parent {
        p.push(parent);
    }
    p.reverse();
    p
}

/// The two queues where the paths of `a` and `b` split.
fn leveled(policy: &Policy, a: usize, b: usize) -> (usize, usize) {
    let (pa, pb) = (path(policy, a), path(policy, b));
    let mut pair = (pa[0], pb[0]);
    for (&x, &y) in pa.iter().zip(&pb) {
        pair = (x, y);
        if x != y {
            break;
        }
    }
    pair
}

/// One cycle's decisions, with reclaim's victim replay on or off.
fn decisions(cycle: &Cycle, replay: bool) -> Vec<Decision> {
    cycle::set_victim_replay(replay);
    let result = cycle::run(cycle);
    cycle::set_victim_replay(true);
    result.decisions
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(
        std::env::var("PROPTEST_CASES").ok().and_then(|c| c.parse().ok()).unwrap_or(64)
    ))]

    /// A reclaim attempt takes its victim units from an earlier failed attempt with the same
    /// candidates (`reclaim.rs: Sequence`) only where ranking the queues again would offer the
    /// very same units: the cycle decides the same, in the same order, either way.
    #[test]
    fn victims_replayed_from_an_earlier_attempt_decide_as_ranked_afresh(
        tree in tree(), specs in jobs(),
    ) {
        let (text, leaves) = kdl(&tree);
        let policy = compile(&text);
        let snapshot = snapshot(&leaves, &specs);
        let cycle = Cycle { snapshot: &snapshot, policy: &policy, now: NOW, usage: None };
        prop_assert_eq!(decisions(&cycle, true), decisions(&cycle, false), "{}", text);
    }

    /// The same on busy clusters (`bench --scenario steady`), where hundreds of attempts fail
    /// between two that commit and most of them replay another's victims.
    #[test]
    fn victims_replayed_on_a_busy_cluster_decide_as_ranked_afresh(
        nodes in 8usize..48, queues in 3usize..40, seed in any::<u64>(),
    ) {
        let shape = Shape { nodes, pods: nodes * 35, queues, seed };
        let steady = steady_cluster(&shape).expect("a valid shape");
        let cycle = Cycle {
            snapshot: &steady.snapshot,
            policy: &steady.policy,
            now: steady.now,
            usage: None,
        };
        prop_assert_eq!(decisions(&cycle, true), decisions(&cycle, false), "{:?}", shape);
    }

    #[test]
    fn reclaim_and_preempt_keep_kai_guarantees(tree in tree(), specs in jobs()) {
        let (text, leaves) = kdl(&tree);
        let policy = compile(&text);
        let snapshot = snapshot(&leaves, &specs);
        let result = cycle::run(&Cycle { snapshot: &snapshot, policy: &policy, now: NOW, usage: None });
        let queue_of = |name: &str| policy.queues.iter().position(|q| q.name == name).unwrap();
        let pod_of: BTreeMap<String, &Pod> = snapshot.pods.iter().map(|p| (p.key(), p)).collect();
        // The job's start: its earliest running pod.
        let start_of = |pod: &Pod| {
            snapshot.pods.iter()
                .filter(|p| p.namespace == pod.namespace && p.group == pod.group)
                .filter_map(|p| p.started)
                .min()
                .unwrap_or(0)
        };
        // Reclaim victims in decision order: (side, victim leaf, group, GPUs).
        let mut taken: Vec<(usize, usize, String, i64)> = Vec::new();
        for d in &result.decisions {
            let Decision::Evict { pod, reason, .. } = d else { continue };
            let victim = pod_of[pod.as_str()];
            let ran = NOW - start_of(victim);
            match reason {
                EvictReason::Reclaim { by_queue, from_queue, .. } => {
                    let (mine, theirs) = leveled(&policy, queue_of(by_queue), queue_of(from_queue));
                    let min = policy.queues[theirs].min_runtime.reclaim.map_or(0, |d| d.0);
                    prop_assert!(ran >= min, "{pod} reclaimed after {ran}s, min-runtime {min}s\n{text}");
                    let _ = mine;
                    let group = victim.group.clone().unwrap_or_default();
                    let leaf = queue_of(from_queue);
                    match taken.last_mut() {
                        Some((s, l, g, gpus)) if *s == theirs && *l == leaf && *g == group => {
                            *gpus += victim.request.gpu;
                        }
                        _ => taken.push((theirs, leaf, group, victim.request.gpu)),
                    }
                }
                EvictReason::Preempt { .. } => {
                    let q = queue_of(victim.namespace.as_str());
                    let min = policy.queues[q].min_runtime.preempt.map_or(0, |d| d.0);
                    prop_assert!(ran >= min, "{pod} preempted after {ran}s, min-runtime {min}s");
                }
                _ => {}
            }
        }
        // Pods allocate placed in this cycle that reclaim took back leave no Evict, only their
        // job's pending reason, so when they went among the Evicts is not known: they count
        // as taken after every Evict (what a side held before an Evict may then be counted
        // high, never low) and are not judged themselves. (victim leaf, GPUs)
        let mut withdrawn: Vec<(usize, i64)> = Vec::new();
        for d in &result.decisions {
            let Decision::Pending {
                pods,
                reason: Reason::Withdrawn { reason: EvictReason::Reclaim { from_queue, .. } },
                ..
            } = d else { continue };
            let gpus = pods.iter().map(|p| pod_of[p.as_str()].request.gpu).sum();
            withdrawn.push((queue_of(from_queue), gpus));
        }
        // Preempt runs after reclaim and may lower a side's holding further; those sides are
        // judged by the min-runtime check only.
        let preempted_under = |side: usize| result.decisions.iter().any(|d| matches!(d,
            Decision::Evict { pod, reason: EvictReason::Preempt { .. }, .. }
                if path(&policy, queue_of(pod_of[pod.as_str()].namespace.as_str())).contains(&side)));
        for (i, &(side, _, _, _)) in taken.iter().enumerate() {
            if preempted_under(side) {
                continue;
            }
            // What the side held just before this victim went: what it holds at the end plus
            // this victim and every later one taken from under it (by any reclaimer).
            let later: i64 = taken[i..].iter()
                .filter(|(_, leaf, _, _)| path(&policy, *leaf).contains(&side))
                .map(|(.., gpus)| gpus)
                .sum::<i64>()
                + withdrawn.iter()
                    .filter(|(leaf, _)| path(&policy, *leaf).contains(&side))
                    .map(|(_, gpus)| gpus)
                    .sum::<i64>();
            let held = result.allocated[side].gpu + later;
            let fair = result.shares.queues[side].gpu.fair_share;
            let terms = policy.queues[side].resources.gpu.unwrap();
            let quota = terms.quota.finite().unwrap_or(i64::MAX);
            let mut allocatable = quota.max(fair);
            if let Bound::Finite(limit) = terms.limit {
                allocatable = allocatable.min(limit);
            }
            prop_assert!(
                held > allocatable.min(quota),
                "queue {} held {held} before a victim went, allocatable {allocatable}, quota {quota}\n{text}\n{:#?}",
                policy.queues[side].name, result.decisions
            );
        }
        // The snapshot may already hold a queue above its limit (nothing evicts for that); a
        // cycle never adds to it.
        for (q, queue) in policy.queues.iter().enumerate() {
            if let Some(Bound::Finite(limit)) = queue.resources.gpu.map(|r| r.limit) {
                let before: i64 = snapshot.pods.iter()
                    .filter(|p| p.node.is_some() && path(&policy, queue_of(p.namespace.as_str())).contains(&q))
                    .map(|p| p.request.gpu)
                    .sum();
                prop_assert!(
                    result.allocated[q].gpu <= limit.max(before),
                    "{} above its limit", queue.name
                );
            }
        }
    }
}
