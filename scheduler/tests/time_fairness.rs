//! Time-based fairness, end to end through the usage history: a queue that used the cluster
//! heavily a day ago gets less of today's spare capacity than an idle peer of the same weight.

use std::collections::BTreeMap;

use kai_policy_compiler::check::check;
use kai_policy_compiler::fairshare::usage::UsageHistory;
use kai_policy_compiler::model::Policy;
use kai_policy_compiler::source::{SourceFile, SourceSet};
use kai_scheduler::cluster::{Amounts, Node, Pod, Snapshot};
use kai_scheduler::cycle::{self, Cycle};
use kai_scheduler::decision::Decision;
use kai_scheduler::usage;

const DAY: u64 = 86_400;

fn policy() -> Policy {
    let text = r#"
        cluster "c" { fairness k=1.0 window="7d" half-life="24h" }
        priority-class "train" value=50 preemptible=#true
        queue "a" { gpu quota=0 weight=1; namespaces "a"; default-priority-class "train" }
        queue "b" { gpu quota=0 weight=1; namespaces "b"; default-priority-class "train" }
    "#;
    let checked = check(
        &SourceSet::new(vec![SourceFile::new("p.kdl", text)]),
        Vec::new(),
    );
    assert!(!checked.has_errors(), "{:#?}", checked.diagnostics);
    checked.policy.unwrap()
}

fn node(name: &str, gpus: i64) -> Node {
    Node {
        name: name.to_string(),
        labels: BTreeMap::new(),
        allocatable: Amounts {
            gpu: gpus * 1000,
            cpu: 256_000,
            memory: 1 << 40,
        },
        unschedulable: false,
        ..Node::default()
    }
}

fn pending(queue: &str, i: usize) -> Pod {
    Pod {
        namespace: queue.to_string(),
        name: format!("{queue}-{i:02}"),
        group: None,
        queue: Some(queue.to_string()),
        priority_class: None,
        request: Amounts {
            gpu: 1000,
            cpu: 1000,
            memory: 1 << 30,
        },
        fractional: false,
        node: None,
        created: 0,
        started: None,
        termination_grace_seconds: 30,
        terminating: false,
        deletion_deadline: None,
        legacy_mig: false,
        ..Pod::default()
    }
}

/// Today: 14 free GPUs (8 + 6), and 14 one-GPU pods pending in each queue.
fn today() -> Snapshot {
    Snapshot {
        topologies: Vec::new(),
        dra: Default::default(),
        numa_ignore: Default::default(),
        priority_classes: Default::default(),
        nodes: vec![node("n1", 8), node("n2", 6)],
        pods: (0..14)
            .flat_map(|i| [pending("a", i), pending("b", i)])
            .collect(),
        groups: Vec::new(),
    }
}

fn gpus_bound(decisions: &[Decision], queue: &str) -> usize {
    decisions
        .iter()
        .filter(
            |d| matches!(d, Decision::Bind { pod, .. } if pod.starts_with(&format!("{queue}/"))),
        )
        .count()
}

#[test]
fn a_queue_that_used_the_cluster_yesterday_gets_less_of_todays_spare_capacity() {
    let policy = policy();
    let now = 10 * DAY;

    // Yesterday, one cycle on a 10-GPU cluster: `a` had 6 GPUs, `b` nothing.
    let mut history = UsageHistory::new();
    let yesterday = Snapshot {
        nodes: vec![node("old", 10)],
        ..Snapshot::default()
    };
    let allocated = [
        Amounts {
            gpu: 6000,
            cpu: 0,
            memory: 0,
        },
        Amounts::default(),
    ];
    usage::record(&mut history, &yesterday, &policy, &allocated, now - DAY);

    // U = Σ 0.5^(age/half-life)·allocated / Σ 0.5^(age/half-life)·capacity: both terms are
    // halved (a day old, a day's half-life), so U_a = 6/10 = 0.6 and U_b = 0.
    let u = usage::of(&history, &policy, now).expect("the policy enables fairness");
    assert!((u[0].gpu - 0.6).abs() < 1e-12 && u[1].gpu == 0.0, "{u:?}");

    let snapshot = today();
    let with = cycle::run(&Cycle {
        snapshot: &snapshot,
        policy: &policy,
        now,
        usage: Some(&u),
    });
    let without = cycle::run(&Cycle {
        snapshot: &snapshot,
        policy: &policy,
        now,
        usage: None,
    });
    let share = |r: &cycle::CycleResult, q: usize| r.shares.queues[q].gpu.fair_share / 1000;

    // No history: equal weights split the 14 GPUs 7 and 7.
    assert_eq!((share(&without, 0), share(&without, 1)), (7, 7));
    // With it, each queue's pull is w + k·(w − U), w = 1/2 of the weight:
    //   a: 0.5 + (0.5 − 0.6) = 0.4,   b: 0.5 + (0.5 − 0) = 1.0;
    // 14 GPUs offered in proportion: a 14·0.4/1.4 = 4, b 14·1.0/1.4 = 10.
    assert_eq!((share(&with, 0), share(&with, 1)), (4, 10));
    // Allocation follows the shares: b places more of its pods than a, and nothing is left idle.
    let (a, b) = (
        gpus_bound(&with.decisions, "a"),
        gpus_bound(&with.decisions, "b"),
    );
    assert_eq!(a + b, 14, "{:?}", with.decisions);
    assert!(a < b, "a {a}, b {b}");
}
