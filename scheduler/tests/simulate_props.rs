//! The simulator's invariants over random clusters and workloads, cycle after cycle: whatever the
//! cycle decides and the simulator applies, no node goes over capacity, a gang never runs below
//! its minimum because of a bind, no queue goes above its limit, a non-preemptible job is never
//! evicted, and no pod is evicted and bound in the same cycle.

use std::collections::{BTreeMap, BTreeSet};

use kai_policy_compiler::check::check;
use kai_policy_compiler::generate::Rng;
use kai_policy_compiler::model::{Bound, Policy};
use kai_policy_compiler::quantity::ResourceKind;
use kai_policy_compiler::source::{SourceFile, SourceSet};
use kai_scheduler::cluster::{Amounts, Node, Pod, PodGroup, Snapshot};
use kai_scheduler::decision::Decision;
use kai_scheduler::simulate::{self, Options};
use proptest::prelude::*;

const POLICY: &str = r#"
cluster "props" {
    min-runtime preempt="2m" reclaim="3m"
}
priority-class "low" value=10 preemptible=#true
priority-class "mid" value=100 preemptible=#true
priority-class "high" value=500 preemptible=#true
priority-class "pinned" value=1000 preemptible=#false
placement "rack-pack" strategy=binpack {
    topology required="rack"
}
placement "spread-two" strategy=spread {
    max-gpus-per-node 2
}
queue "dept-a" {
    gpu quota=12 limit=20
    queue "a1" {
        gpu quota=6 limit=10
        namespaces "a1"
    }
    queue "a2" {
        gpu quota=6
        namespaces "a2"
        placement "rack-pack"
    }
}
queue "dept-b" priority=150 {
    gpu quota=8
    queue "b1" {
        gpu quota=8 limit=12
        namespaces "b1"
        placement "spread-two"
    }
}
"#;

fn policy() -> Policy {
    let checked = check(
        &SourceSet::new(vec![SourceFile::new("props.kdl", POLICY)]),
        Vec::new(),
    );
    checked
        .policy
        .unwrap_or_else(|| panic!("{:#?}", checked.diagnostics))
}

/// GPU limit of each leaf and its ancestors, by namespace (= leaf name).
fn limits_of(policy: &Policy, leaf: &str) -> Vec<(usize, i64)> {
    let mut out = Vec::new();
    let mut at = policy.queues.iter().position(|q| q.name == leaf);
    while let Some(q) = at {
        if let Some(Bound::Finite(l)) = policy.queues[q].resources.gpu.map(|r| r.limit) {
            out.push((q, l));
        }
        at = policy.queues[q].parent;
    }
    out
}

/// A random cluster whose running pods fit their nodes and their queues' limits.
fn cluster(seed: u64, policy: &Policy) -> Snapshot {
    // The generator's own sequence, salted apart from the policy generator's; proptest picks the seed.
    let mut rng = Rng::salted(seed, 0x7369_6d2d_7072_6f70);
    let mut snapshot = Snapshot::default();
    for i in 0..1 + rng.below(6) {
        let mut labels = BTreeMap::new();
        labels.insert("rack".to_string(), format!("r{}", i % 2));
        snapshot.nodes.push(Node {
            name: format!("n{i}"),
            labels,
            allocatable: Amounts {
                gpu: rng.pick(&[0, 2, 4, 8, 8]) * 1000,
                cpu: rng.pick(&[16, 32, 64]) * 1000,
                memory: rng.pick(&[64i64, 128, 256]) << 30,
            },
            unschedulable: rng.below(10) == 0,
            ..Default::default()
        });
    }
    let mut free: Vec<Amounts> = snapshot.nodes.iter().map(|n| n.allocatable).collect();
    let mut queue_gpu = vec![0i64; policy.queues.len()];
    for j in 0..rng.below(12) {
        let namespace = rng.pick(&["a1", "a2", "b1"]).to_string();
        let class = rng
            .pick(&[None, Some("low"), Some("mid"), Some("high"), Some("pinned")])
            .map(str::to_string);
        let size = if rng.below(3) == 0 {
            1 + rng.below(4)
        } else {
            1
        };
        let min_member = 1 + rng.below(size) as u32;
        let (gpu, fractional) = match rng.below(6) {
            0 => (0, false),
            1 => (rng.pick(&[250, 500]), true),
            _ => (rng.pick(&[1, 2, 4, 8]) * 1000, false),
        };
        let request = Amounts {
            gpu,
            cpu: rng.pick(&[500, 1000, 4000]),
            memory: rng.pick(&[1i64, 8, 32]) << 30,
        };
        let name = format!("job{j}");
        let group = (size > 1).then(|| name.clone());
        if let Some(g) = &group {
            snapshot.groups.push(PodGroup {
                namespace: namespace.clone(),
                name: g.clone(),
                min_member,
                queue: None,
                priority_class: class.clone(),
                created: rng.below(60) as u64,
                ..Default::default()
            });
        }
        // Either the whole job runs (placed first-fit within capacity and limits) or none of it.
        let run = rng.below(2) == 0 && !fractional;
        let limits = limits_of(policy, &namespace);
        let mut placed: Vec<Option<usize>> = vec![None; size];
        if run {
            let mut trial = free.clone();
            let total = gpu * size as i64;
            let within = limits.iter().all(|&(q, l)| queue_gpu[q] + total <= l);
            let mut ok = within;
            for slot in placed.iter_mut() {
                let n = (0..trial.len()).find(|&n| {
                    !snapshot.nodes[n].unschedulable
                        && ResourceKind::ALL
                            .into_iter()
                            .all(|k| trial[n].get(k) >= request.get(k))
                });
                match n {
                    Some(n) if ok => {
                        for k in ResourceKind::ALL {
                            *trial[n].get_mut(k) -= request.get(k);
                        }
                        *slot = Some(n);
                    }
                    _ => ok = false,
                }
            }
            if ok {
                free = trial;
                for &(q, _) in &limits {
                    queue_gpu[q] += total;
                }
            } else {
                placed = vec![None; size];
            }
        }
        for (i, slot) in placed.into_iter().enumerate() {
            let node = slot.map(|n| snapshot.nodes[n].name.clone());
            snapshot.pods.push(Pod {
                namespace: namespace.clone(),
                name: if size > 1 {
                    format!("{name}-{i}")
                } else {
                    name.clone()
                },
                group: group.clone(),
                queue: None,
                priority_class: class.clone(),
                request,
                fractional,
                started: node.as_ref().map(|_| rng.below(600) as u64),
                node,
                created: rng.below(600) as u64,
                termination_grace_seconds: 30,
                terminating: false,
                deletion_deadline: None,
                legacy_mig: false,
                ..Default::default()
            });
        }
    }
    snapshot
}

fn preemptible(policy: &Policy, snapshot: &Snapshot, pod: &Pod) -> bool {
    let class = pod
        .group
        .as_ref()
        .and_then(|g| {
            snapshot
                .groups
                .iter()
                .find(|x| x.namespace == pod.namespace && &x.name == g)
        })
        .and_then(|g| g.priority_class.clone())
        .or_else(|| pod.priority_class.clone());
    class
        .and_then(|c| policy.priority_class(&c).map(|p| p.preemptible))
        .unwrap_or(true)
}

/// Checks one cycle: `before` is the snapshot it saw, `after` the snapshot with its decisions
/// applied.
fn check_cycle(
    policy: &Policy,
    before: &Snapshot,
    after: &Snapshot,
    decisions: &[Decision],
) -> Result<(), String> {
    let evicted: BTreeSet<&str> = decisions
        .iter()
        .filter_map(|d| match d {
            Decision::Evict { pod, .. } => Some(pod.as_str()),
            _ => None,
        })
        .collect();
    let by_key: BTreeMap<String, &Pod> = before.pods.iter().map(|p| (p.key(), p)).collect();
    for d in decisions {
        if let Decision::Bind { pod, .. } = d
            && evicted.contains(pod.as_str())
        {
            return Err(format!("{pod} evicted and bound in one cycle"));
        }
        if let Decision::Evict { pod, .. } = d {
            let p = by_key
                .get(pod)
                .ok_or_else(|| format!("evicted unknown {pod}"))?;
            if !preemptible(policy, before, p) {
                return Err(format!("non-preemptible {pod} evicted"));
            }
        }
    }
    // No node over capacity.
    for node in &after.nodes {
        let mut used = Amounts::default();
        for p in after
            .pods
            .iter()
            .filter(|p| p.node.as_deref() == Some(&node.name))
        {
            for k in ResourceKind::ALL {
                *used.get_mut(k) += p.request.get(k);
            }
        }
        for k in ResourceKind::ALL {
            if used.get(k) > node.allocatable.get(k) {
                return Err(format!(
                    "node {} over its {} capacity: {} > {}",
                    node.name,
                    k.name(),
                    used.get(k),
                    node.allocatable.get(k)
                ));
            }
        }
    }
    // A gang that had nothing running is now either still not running or at its minimum.
    for g in &after.groups {
        let members = |s: &Snapshot| -> (usize, usize) {
            let pods: Vec<&Pod> = s
                .pods
                .iter()
                .filter(|p| p.namespace == g.namespace && p.group.as_deref() == Some(&g.name))
                .collect();
            (pods.iter().filter(|p| p.node.is_some()).count(), pods.len())
        };
        let (was, _) = members(before);
        let (now, _) = members(after);
        if was == 0 && now > 0 && (now as u32) < g.min_member {
            return Err(format!(
                "gang {}/{} partly bound: {now} of minMember {}",
                g.namespace, g.name, g.min_member
            ));
        }
    }
    // No queue above its limit.
    for q in policy.queues.iter().map(|q| q.name.as_str()) {
        for (qi, limit) in limits_of(policy, q) {
            let leaf_names: Vec<&str> = policy
                .queues
                .iter()
                .filter(|x| x.is_leaf() && limits_of(policy, &x.name).iter().any(|&(a, _)| a == qi))
                .map(|x| x.name.as_str())
                .collect();
            let used: i64 = after
                .pods
                .iter()
                .filter(|p| p.node.is_some() && leaf_names.contains(&p.namespace.as_str()))
                .map(|p| p.request.gpu)
                .sum();
            if used > limit {
                return Err(format!(
                    "queue {} above its limit: {used} > {limit}",
                    policy.queues[qi].name
                ));
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: ProptestConfig::default().cases.max(200), ..ProptestConfig::default() })]

    #[test]
    fn cycles_keep_the_invariants(seed in any::<u64>()) {
        let policy = policy();
        let mut snapshot = cluster(seed, &policy);
        let mut now = 600;
        for _ in 0..4 {
            let options = Options { cycles: 1, start: now, ..Options::default() };
            let sim = simulate::simulate(snapshot.clone(), &policy, &options);
            let decisions = &sim.cycles[0].decisions;
            if let Err(e) = check_cycle(&policy, &snapshot, &sim.snapshot, decisions) {
                prop_assert!(false, "{e}\nseed {seed}\ndecisions: {decisions:#?}\nbefore: {snapshot:#?}");
            }
            snapshot = sim.snapshot;
            now += 60;
        }
    }
}

/// The generator exercises every kind of decision, so the invariants above are not vacuous.
#[test]
fn random_clusters_exercise_every_decision() {
    let policy = policy();
    let mut seen = BTreeMap::<&str, usize>::new();
    for seed in 1..300u64 {
        let options = Options {
            cycles: 4,
            start: 600,
            ..Options::default()
        };
        let sim = simulate::simulate(cluster(seed * 7919, &policy), &policy, &options);
        for d in sim.cycles.iter().flat_map(|c| &c.decisions) {
            let kind = match d {
                Decision::Bind { .. } => "bind",
                Decision::Nominate { .. } => "nominate",
                Decision::Evict { reason, .. } => match reason {
                    kai_scheduler::decision::EvictReason::Reclaim { .. } => "reclaim",
                    kai_scheduler::decision::EvictReason::Preempt { .. } => "preempt",
                    kai_scheduler::decision::EvictReason::Consolidate { .. } => "consolidate",
                    kai_scheduler::decision::EvictReason::StaleGang { .. } => "stale",
                },
                Decision::Pending { .. } => "pending",
            };
            *seen.entry(kind).or_default() += 1;
        }
    }
    eprintln!("{seen:?}");
    for kind in ["bind", "nominate", "reclaim", "preempt", "pending"] {
        assert!(
            seen.get(kind).copied().unwrap_or(0) > 0,
            "no {kind} in {seen:?}"
        );
    }
}
