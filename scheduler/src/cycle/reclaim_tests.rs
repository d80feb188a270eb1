//! Reclaim as KAI does it, one small cluster per rule. Each case is an example from the KAI
//! fidelity review (`kai-fidelity.md`, section 3), traced by hand through KAI's code
//! (`plugins/proportion/reclaimable/`, `actions/reclaim/reclaim.go`); the fair shares each case
//! relies on are worked out in its comment.

use super::tests::{
    binds, cycle, evicted, gang, gpu_fair_shares, node, nominated, pending_reason, pod, policy,
    running,
};
use super::*;
use crate::cluster::{Pod, PodGroup};
use crate::decision::{Decision, EvictReason, Reason};

fn created(p: Pod, at: Time) -> Pod {
    Pod { created: at, ..p }
}

fn victims(r: &CycleResult) -> Vec<String> {
    evicted(r).into_iter().map(|(pod, _)| pod).collect()
}

/// The pods evicted for a reclaim (moves aside).
fn reclaimed(r: &CycleResult) -> Vec<String> {
    evicted(r)
        .into_iter()
        .filter(|(_, why)| matches!(why, EvictReason::Reclaim { .. }))
        .map(|(pod, _)| pod)
        .collect()
}

/// The pods moved, with the node each moves to.
fn moved(r: &CycleResult) -> Vec<(String, String)> {
    evicted(r)
        .into_iter()
        .filter_map(|(pod, why)| match why {
            EvictReason::Consolidate { to_node, .. } => Some((pod, to_node)),
            _ => None,
        })
        .collect()
}

/// R3: KAI checks each victim against what its queue still holds before that victim goes, so a
/// queue is never taken more than one victim below its fair share.
///
/// Two 4-GPU nodes. A (weight 2) wants one 4-GPU pod; B (weight 1) runs three 1-GPU jobs (b1 on
/// n1, b2 and b3 on n2); C (weight 1) runs 3 GPUs on n1 inside its reclaim min-runtime. All
/// quotas 0; requests A 4, B 3, C 3 of 8 GPUs, weights 2:1:1: fair shares A 4, B 2, C 2.
/// Freeing n2 needs b3 and b2; before b3, B holds 3 > 2 (fine); before b2, B holds 2, not above
/// its share of 2, and A is not within its quota of 0: the scenario is refused, nothing goes.
#[test]
fn reclaim_never_takes_a_queue_more_than_one_victim_below_its_share() {
    let p = policy(
        r#"
        cluster "c" { min-runtime reclaim="1h" }
        queue "a" { gpu weight=2; namespaces "a"; min-runtime reclaim="0s" }
        queue "b" { gpu; namespaces "b"; min-runtime reclaim="0s" }
        queue "c" { gpu; namespaces "c" }
        "#,
    );
    let s = Snapshot {
        topologies: Vec::new(),
        dra: Default::default(),
        numa_ignore: Default::default(),
        priority_classes: Default::default(),
        nodes: vec![node("n1", 4), node("n2", 4)],
        pods: vec![
            pod("a", "a1", 4),
            running(created(pod("b", "b1", 1), 0), "n1", 0),
            running(created(pod("b", "b2", 1), 1), "n2", 1),
            running(created(pod("b", "b3", 1), 2), "n2", 2),
            running(created(pod("c", "c1", 3), 3), "n1", 3000),
        ],
        groups: vec![],
    };
    let r = cycle(&p, &s, 3600);
    assert_eq!(r.shares.queues[0].gpu.fair_share, 4000);
    assert_eq!(r.shares.queues[1].gpu.fair_share, 2000);
    assert_eq!(victims(&r), Vec::<String>::new(), "{:#?}", r.decisions);
    assert!(matches!(
        pending_reason(&r, "a/a1"),
        Reason::NoNodeFits { .. }
    ));
}

/// R6: the saturation boundary applies only to a reclaimer that would end above its fair share.
///
/// 10 GPUs, full. A (quota 4) holds 2 and wants 2 more; B (quota 2, weight 3) runs five 1-GPU
/// jobs; C (quota 0) holds 3 inside its min-runtime. Deserved A 4, B 2, C 0; the 4 left go by
/// weight to B (3) and C (1): fair shares A 4, B 5, C 1. A is within its quota with the job
/// (2 + 2 <= 4) and B above its own (5 > 2), so B's two newest jobs go (each checked: B holds 5,
/// then 4, both above 2), and A with the job is at exactly its fair share (ratio 1, not above).
#[test]
fn a_reclaimer_within_quota_takes_from_a_queue_above_its_quota() {
    let p = policy(
        r#"
        cluster "c" { min-runtime reclaim="1h" }
        queue "a" { gpu quota=4; namespaces "a"; min-runtime reclaim="0s" }
        queue "b" { gpu quota=2 weight=3; namespaces "b"; min-runtime reclaim="0s" }
        queue "c" { gpu; namespaces "c" }
        "#,
    );
    let mut pods = vec![
        running(created(pod("a", "a1", 1), 0), "n1", 0),
        running(created(pod("a", "a2", 1), 0), "n1", 0),
        created(pod("a", "a3", 2), 100),
    ];
    for (i, n) in ["n1", "n1", "n2", "n2", "n2"].into_iter().enumerate() {
        pods.push(running(
            created(pod("b", &format!("b{}", i + 1), 1), i as Time),
            n,
            i as Time,
        ));
    }
    pods.push(running(created(pod("c", "c1", 1), 0), "n2", 3000));
    pods.push(running(created(pod("c", "c2", 2), 0), "n3", 3000));
    let s = Snapshot {
        topologies: Vec::new(),
        dra: Default::default(),
        numa_ignore: Default::default(),
        priority_classes: Default::default(),
        nodes: vec![node("n1", 4), node("n2", 4), node("n3", 2)],
        pods,
        groups: vec![],
    };
    let r = cycle(&p, &s, 3600);
    assert_eq!(gpu_fair_shares(&r), vec![4000, 5000, 1000]);
    assert_eq!(victims(&r), vec!["b/b5", "b/b4"], "{:#?}", r.decisions);
    assert_eq!(nominated(&r), vec![("a/a3".to_string(), "n2".to_string())]);
}

/// R4: across departments, victims are judged at the level where the paths split.
///
/// 12 GPUs, full. D1 (quota 4) holds L1 (2 used, wants 2 more); D2 (quota 4) holds L2a (quota
/// 2, 3 used) and L2b (quota 2, wants 2); D3 (quota 4) holds L3 (7 used) inside D3's reclaim
/// min-runtime. Fair shares: every department 4 (quotas, nothing left over), L2a 2, L2b 2.
/// For L1: D1 is within its quota with the job, so D2 must be over its own quota to give; it
/// holds 3 < 4: not a victim (leaf against leaf, L2a's 3 > 2 would have been). For L2b: L2a
/// gives one job (3 > 2), but the second would find L2a at 2, not above: refused. Nothing goes.
#[test]
fn reclaim_compares_queues_where_their_paths_split() {
    let p = policy(
        r#"
        cluster "c" { min-runtime reclaim="0s" }
        queue "d1" { gpu quota=4; queue "l1" { gpu quota=4; namespaces "l1" } }
        queue "d2" {
            gpu quota=4
            queue "l2a" { gpu quota=2; namespaces "l2a" }
            queue "l2b" { gpu quota=2; namespaces "l2b" }
        }
        queue "d3" { gpu quota=4; min-runtime reclaim="1h"; queue "l3" { gpu; namespaces "l3" } }
        "#,
    );
    let at = |p: Pod, n: &str, t: Time| running(created(p, t), n, t);
    let mut pods = vec![
        at(pod("l1", "l1-1", 1), "n1", 0),
        at(pod("l1", "l1-2", 1), "n1", 0),
        at(pod("l2a", "l2a-1", 1), "n1", 1),
        at(pod("l2a", "l2a-2", 1), "n1", 2),
        at(pod("l2a", "l2a-3", 1), "n2", 3),
        created(pod("l1", "l1-new", 2), 100),
        created(pod("l2b", "l2b-new", 2), 100),
    ];
    for i in 0..7 {
        let n = if i < 3 { "n2" } else { "n3" };
        pods.push(at(pod("l3", &format!("l3-{i}"), 1), n, 3000));
    }
    let s = Snapshot {
        topologies: Vec::new(),
        dra: Default::default(),
        numa_ignore: Default::default(),
        priority_classes: Default::default(),
        nodes: vec![node("n1", 4), node("n2", 4), node("n3", 4)],
        pods,
        groups: vec![],
    };
    let r = cycle(&p, &s, 3600);
    let fair = |name: &str| {
        let q = p.queues.iter().position(|q| q.name == name).unwrap();
        r.shares.queues[q].gpu.fair_share
    };
    assert_eq!(
        [fair("d1"), fair("d2"), fair("d3"), fair("l2a"), fair("l2b")],
        [4000, 4000, 4000, 2000, 2000]
    );
    assert_eq!(victims(&r), Vec::<String>::new(), "{:#?}", r.decisions);
}

/// R1: a job reclaims for its gang minimum (or one more pod once it runs), not for every pod it
/// has: an elastic job of 3 pods with minMember 1 takes one GPU back per cycle.
///
/// 4 GPUs, full of B's four 1-GPU jobs. A's elastic job E wants 3. Quotas 0, equal weights,
/// requests A 3, B 4: fair shares 2 and 2. E's minimum (1 pod) keeps A within its share (0 + 1
/// <= 2); B holds 4 > 2, so one B job goes and one E pod is nominated.
#[test]
fn reclaim_asks_for_the_gang_minimum() {
    let p = policy(TWO_OPEN_TEAMS);
    let (e, g) = gang("a", "e", 3, 1, 1);
    let mut pods: Vec<Pod> = e.into_iter().map(|p| created(p, 100)).collect();
    for i in 0..4 {
        pods.push(running(created(pod("b", &format!("b{i}"), 1), i), "n1", i));
    }
    let s = Snapshot {
        topologies: Vec::new(),
        dra: Default::default(),
        numa_ignore: Default::default(),
        priority_classes: Default::default(),
        nodes: vec![node("n1", 4)],
        pods,
        groups: vec![PodGroup { created: 100, ..g }],
    };
    let r = cycle(&p, &s, 3600);
    assert_eq!(victims(&r), vec!["b/b3"], "{:#?}", r.decisions);
    assert_eq!(nominated(&r).len(), 1);
}

/// R8: an elastic victim gives up one surplus pod at a time, not the whole job.
///
/// 4 GPUs, full of B's elastic job F (minMember 1, four 1-GPU pods). A wants one GPU. Fair
/// shares A 1, B 3. One pod of F goes (its newest); F keeps running above its minimum.
#[test]
fn an_elastic_victim_loses_only_surplus_pods() {
    let p = policy(TWO_OPEN_TEAMS);
    let (f, g) = gang("b", "f", 4, 1, 1);
    let mut pods: Vec<Pod> = f
        .into_iter()
        .enumerate()
        .map(|(i, p)| running(p, "n1", i as Time))
        .collect();
    pods.push(created(pod("a", "a1", 1), 100));
    let s = Snapshot {
        topologies: Vec::new(),
        dra: Default::default(),
        numa_ignore: Default::default(),
        priority_classes: Default::default(),
        nodes: vec![node("n1", 4)],
        pods,
        groups: vec![g],
    };
    let r = cycle(&p, &s, 3600);
    assert_eq!(victims(&r), vec!["b/f-3"], "{:#?}", r.decisions);
    assert!(matches!(
        &evicted(&r)[0].1,
        EvictReason::Reclaim { from_queue, .. } if from_queue == "b"
    ));
}

const TWO_OPEN_TEAMS: &str = r#"
queue "a" { gpu; namespaces "a" }
queue "b" { gpu; namespaces "b" }
"#;

/// A victim that fits elsewhere is moved, not evicted (KAI's by-pod solver places the victims
/// again after the preemptor), and a job moved once is nobody's victim for the rest of the cycle.
///
/// Two 2-GPU nodes, one GPU free on each. A (quota 0) runs v (n1, the newer) and w (n2); B and C
/// (quota 2 each, B first by priority) each want one 2-GPU pod, not preemptible (so
/// consolidation, which runs first, leaves them to reclaim). Quotas take all 4 GPUs: fair shares
/// A 0, B 2, C 2; A holds 2, above its share; both reclaimers stay within their quotas.
/// For b1, v goes first (newest): n1 is free, b1 takes it, and v fits again in n2's free GPU,
/// so it moves there, keeping A's allocation at 2.
/// For c1, v, now pipelined on n2, is a victim again, as in KAI, whose moved pods are
/// `Pipelined` and so among the active allocated pods its victims come from
/// (`reclaim.go: getOrderedVictimsQueue` with `FilterNonActiveAllocated`). v goes first again
/// (newest): n2 then has 1 GPU free, not 2; A, at 1 above its share of 0, still comes after C
/// in the queue order, so v is not placed again before c1. w goes next: n2 is empty, c1 takes
/// it, and neither v nor w finds room after it (n1 holds b1, n2 c1): both are evicted for c1.
/// v's one Evict, from n1 where it runs, now names c1's reclaim; w's is from n2. (Before moved
/// victims could be taken again, c1 waited and only v moved.)
#[test]
fn a_victim_moved_for_one_reclaimer_may_be_taken_by_the_next() {
    let p = policy(
        r#"
        priority-class "prod" value=1000 preemptible=#false
        queue "a" { gpu quota=0; namespaces "a" }
        queue "b" priority=200 { gpu quota=2; namespaces "b" }
        queue "c" priority=1 { gpu quota=2; namespaces "c" }
        "#,
    );
    let b1 = Pod {
        priority_class: Some("prod".into()),
        ..created(pod("b", "b1", 2), 10)
    };
    let c1 = Pod {
        priority_class: Some("prod".into()),
        ..created(pod("c", "c1", 2), 10)
    };
    let s = Snapshot {
        topologies: Vec::new(),
        dra: Default::default(),
        numa_ignore: Default::default(),
        priority_classes: Default::default(),
        nodes: vec![node("n1", 2), node("n2", 2)],
        pods: vec![
            running(created(pod("a", "w", 1), 0), "n2", 0),
            running(created(pod("a", "v", 1), 1), "n1", 1),
            b1,
            c1,
        ],
        groups: vec![],
    };
    let r = cycle(&p, &s, 3600);
    assert_eq!(gpu_fair_shares(&r), vec![0, 2000, 2000]);
    let reclaim_for_c1 = EvictReason::Reclaim {
        for_job: "c/c1".into(),
        by_queue: "c".into(),
        from_queue: "a".into(),
    };
    let evictions: Vec<(String, String, EvictReason)> = r
        .decisions
        .iter()
        .filter_map(|d| match d {
            Decision::Evict { pod, node, reason } => {
                Some((pod.clone(), node.clone(), reason.clone()))
            }
            _ => None,
        })
        .collect();
    assert_eq!(
        evictions,
        vec![
            ("a/v".into(), "n1".into(), reclaim_for_c1.clone()),
            ("a/w".into(), "n2".into(), reclaim_for_c1),
        ],
        "{:#?}",
        r.decisions
    );
    assert_eq!(
        nominated(&r),
        vec![
            ("b/b1".to_string(), "n1".to_string()),
            ("c/c1".to_string(), "n2".to_string())
        ]
    );
}

/// A victim moved for one reclaimer and taken again by the next may move again: its one Evict,
/// from the node it runs on, then names where it goes now and for whom.
///
/// Three 2-GPU nodes: n1 and n2 in pool a, n3 in pool c. A (quota 0, weight 0: fair share 0)
/// runs x (n2) and v (n1, the newer). B and C (quota 2 each, B first by priority) each want one
/// 2-GPU pod for pool a, not preemptible (consolidation leaves them to reclaim); pool a has one
/// GPU free on each node, so allocate places neither.
/// For b1: v goes first (newest); n1 is empty, b1 takes it; v fits again on n2 (fuller than
/// n3, GPU binpack) and moves there, keeping A's allocation at 2.
/// For c1: v, pipelined on n2, goes first again; n2 then has one GPU free. x goes next; n2 is
/// empty and c1 takes it. Both are needed (they ran on c1's node) and A stays after C in the
/// queue order, so both are placed again after c1, in job order, x (older) first: n3 holds
/// both. Nothing is evicted: x moves n2 → n3, and v's Evict from n1 now says n3, for c1.
#[test]
fn a_victim_moved_for_one_reclaimer_may_move_again_for_the_next() {
    let p = policy(
        r#"
        priority-class "prod" value=1000 preemptible=#false
        queue "a" { gpu quota=0 weight=0; namespaces "a" }
        queue "b" priority=200 { gpu quota=2; namespaces "b" }
        queue "c" priority=1 { gpu quota=2; namespaces "c" }
        "#,
    );
    let pool = |name: &str, value: &str| {
        let mut n = node(name, 2);
        n.labels.insert("pool".into(), value.into());
        n
    };
    let for_pool_a = |p: Pod| {
        let mut p = Pod {
            priority_class: Some("prod".into()),
            ..created(p, 10)
        };
        p.constraints
            .node_selector
            .insert("pool".into(), "a".into());
        p
    };
    let s = Snapshot {
        topologies: Vec::new(),
        dra: Default::default(),
        numa_ignore: Default::default(),
        priority_classes: Default::default(),
        nodes: vec![pool("n1", "a"), pool("n2", "a"), pool("n3", "c")],
        pods: vec![
            running(created(pod("a", "x", 1), 0), "n2", 0),
            running(created(pod("a", "v", 1), 1), "n1", 1),
            for_pool_a(pod("b", "b1", 2)),
            for_pool_a(pod("c", "c1", 2)),
        ],
        groups: vec![],
    };
    let r = cycle(&p, &s, 3600);
    let moves: Vec<(String, String, String, String)> = r
        .decisions
        .iter()
        .filter_map(|d| match d {
            Decision::Evict {
                pod,
                node,
                reason: EvictReason::Consolidate { for_job, to_node },
            } => Some((pod.clone(), node.clone(), to_node.clone(), for_job.clone())),
            _ => None,
        })
        .collect();
    let m = |pod: &str, from: &str, to: &str| (pod.into(), from.into(), to.into(), "c/c1".into());
    // In the order c1's attempt made them: x, then v, whose Evict from n1 moves there from
    // where b1's attempt first put it (until 2026-11-28 it stayed there, before x's, and the
    // decisions were not in the order they were made).
    assert_eq!(
        moves,
        vec![m("a/x", "n2", "n3"), m("a/v", "n1", "n3")],
        "{:#?}",
        r.decisions
    );
    assert!(reclaimed(&r).is_empty(), "{:#?}", r.decisions);
    assert_eq!(
        nominated(&r),
        vec![
            ("b/b1".to_string(), "n1".to_string()),
            ("c/c1".to_string(), "n2".to_string())
        ]
    );
}

/// A victim from a queue reclaim may not take from may still be moved (KAI's consolidating
/// reclaim), but never evicted: when it fits nowhere else, nothing happens.
///
/// Two 4-GPU nodes. A (quota 2) runs v (2 GPUs, n1); B (quota 3) runs y (3 GPUs, n2); R (quota
/// 3) wants one 3-GPU pod. Quotas 2 + 3 + 3 take all 8 GPUs: fair shares equal quotas, A and B
/// each hold exactly theirs, so neither may lose anything to R. The 3 free GPUs (2 on n1, 1 on
/// n2) could hold the gang, so a victim may be taken off to be moved: either frees a node the
/// gang fits on, but then v (2 GPUs) or y (3) finds no room left elsewhere (1 GPU and 1 or 2).
/// It cannot move, so it is not evicted either: r1 waits.
#[test]
fn a_victim_that_may_only_move_stays_when_it_fits_nowhere_else() {
    let p = policy(
        r#"
        priority-class "prod" value=1000 preemptible=#false
        queue "a" priority=2 { gpu quota=2; namespaces "a" }
        queue "b" { gpu quota=3; namespaces "b" }
        queue "r" { gpu quota=3; namespaces "r" }
        "#,
    );
    let s = Snapshot {
        topologies: Vec::new(),
        dra: Default::default(),
        numa_ignore: Default::default(),
        priority_classes: Default::default(),
        nodes: vec![node("n1", 4), node("n2", 4)],
        pods: vec![
            running(created(pod("a", "v", 2), 0), "n1", 0),
            running(created(pod("b", "y", 3), 0), "n2", 0),
            created(pod("r", "r1", 3), 10),
        ],
        groups: vec![],
    };
    let r = cycle(&p, &s, 3600);
    assert_eq!(gpu_fair_shares(&r), vec![2000, 3000, 3000]);
    assert!(
        !r.decisions
            .iter()
            .any(|d| matches!(d, Decision::Evict { .. } | Decision::Nominate { .. })),
        "{:#?}",
        r.decisions
    );
    assert!(matches!(
        pending_reason(&r, "r/r1"),
        Reason::NoNodeFits { .. }
    ));
}

/// A job is passed by only when it is no easier than one that already failed in its queue, and
/// MIG instances count in that comparison as every resource does in KAI's resource vectors
/// (`MinimalJobRepresentatives.IsEasierToSchedule`).
///
/// One MIG node with two 1g instances, both held by A (quota 0): v, not preemptible, and w. R
/// (quota 2) wants one pod of two instances (r1) and, later, one of one instance (r2). The
/// instances count as 2 GPUs; R asks 3, so its fair share is its quota, 2; A's is 0 and it
/// holds 2. r1 fails (only w can go, which frees one instance); r2 asks for less of the same
/// resource, so it is tried, and takes w. (Were MIG left out of the comparison, r2 would look
/// the same as r1 and wait.)
#[test]
fn a_job_asking_fewer_mig_instances_than_one_that_failed_is_still_tried() {
    let p = policy(
        r#"
        priority-class "prod" value=1000 preemptible=#false
        queue "a" { gpu quota=0; namespaces "a" }
        queue "r" { gpu quota=2; namespaces "r" }
        "#,
    );
    let mig = |p: Pod, n: i64| Pod {
        extended: [("nvidia.com/mig-1g.10gb".to_string(), n)].into(),
        ..p
    };
    let mut m = node("m", 0);
    m.extended = [("nvidia.com/mig-1g.10gb".to_string(), 2)].into();
    let v = Pod {
        priority_class: Some("prod".into()),
        ..running(created(mig(pod("a", "v", 0), 1), 0), "m", 0)
    };
    let s = Snapshot {
        topologies: Vec::new(),
        dra: Default::default(),
        numa_ignore: Default::default(),
        priority_classes: Default::default(),
        nodes: vec![m],
        pods: vec![
            v,
            running(created(mig(pod("a", "w", 0), 1), 1), "m", 1),
            created(mig(pod("r", "r1", 0), 2), 10),
            created(mig(pod("r", "r2", 0), 1), 20),
        ],
        groups: vec![],
    };
    let r = cycle(&p, &s, 3600);
    assert_eq!(gpu_fair_shares(&r), vec![0, 2000]);
    assert_eq!(victims(&r), vec!["a/w"], "{:#?}", r.decisions);
    assert_eq!(nominated(&r), vec![("r/r2".to_string(), "m".to_string())]);
}

/// A victim taken on condition that it moves is evicted all the same when the others' moves
/// leave its side enough to give it up: KAI checks the strategy over the victims it evicts,
/// with moved ones still held (`reclaimResourcesFromReclaimees` over `getResources`).
///
/// n1 (2 GPUs) runs A's x (older, pinned to n1 by its node selector) and y; n2 (1 GPU) is free.
/// R (quota 2, priority 101) wants one 2-GPU pod; A's quota is 1. R's priority puts it before A
/// in KAI's solver order (both within quota with their job), so A's victims are placed again
/// after the gang. Capacity 3: fair shares A 1, R 2. y goes
/// first (newest): A holds 2, above its share. Then A holds 1, not above its share or its
/// quota, so x may only move; the room free (n1's 1 and n2's 1) can still hold the gang. With
/// both gone r1 fits on n1; x fits nowhere else, y moves to n2, so A still holds y: before x
/// goes it holds 2, above its quota of 1, with R within its own. x is evicted, y moved.
#[test]
fn a_victim_that_had_to_move_is_evicted_when_the_others_moves_allow_it() {
    let p = policy(
        r#"
        queue "a" { gpu quota=1; namespaces "a" }
        queue "r" priority=101 { gpu quota=2; namespaces "r" }
        "#,
    );
    let mut n1 = node("n1", 2);
    n1.labels
        .insert("kubernetes.io/hostname".into(), "n1".into());
    let mut x = running(created(pod("a", "x", 1), 0), "n1", 0);
    x.constraints
        .node_selector
        .insert("kubernetes.io/hostname".into(), "n1".into());
    let s = Snapshot {
        topologies: Vec::new(),
        dra: Default::default(),
        numa_ignore: Default::default(),
        priority_classes: Default::default(),
        nodes: vec![n1, node("n2", 1)],
        pods: vec![
            x,
            running(created(pod("a", "y", 1), 1), "n1", 1),
            created(pod("r", "r1", 2), 10),
        ],
        groups: vec![],
    };
    let r = cycle(&p, &s, 3600);
    assert_eq!(gpu_fair_shares(&r), vec![1000, 2000]);
    assert_eq!(reclaimed(&r), vec!["a/x"], "{:#?}", r.decisions);
    assert_eq!(moved(&r), vec![("a/y".to_string(), "n2".to_string())]);
    assert_eq!(nominated(&r), vec![("r/r1".to_string(), "n1".to_string())]);
}

/// KAI's solver places the victims' jobs again together with the preemptor, in queue order
/// (`common/action.go: TryToVirtuallyAllocatePreemptorAndGetVictims`): a victim whose queue
/// comes first takes its room back before the preemptor is tried.
///
/// One 4-GPU node runs A's a1, a2, a3 (1 GPU each); R wants r1, one 2-GPU pod. Quotas 1 each;
/// A's weight is 0, so its priority does not change the division (KAI's
/// `reclaim_test.go` integration #9 has the same shape): fair shares A 1, R 1 + the 1 over
/// quota R asks for = 2 (1 GPU stays undivided). A holds 3, above its share: a3 (newest) may
/// go, then a2. With a3 released, A holds 2 and would hold 3 with it, R would hold 2: both
/// above their quota of 1, so queue priority decides. At priority 100 each the smaller dominant
/// share with the job goes first: R's 2/2 = 1 before A's 3/1 = 3, so r1 takes the 2 free GPUs
/// and a3 is evicted. With A at priority 101, A goes first: a3 takes its GPU back, and so do a2
/// and a3 after a2 is taken too, so R never fits and nothing is evicted.
#[test]
fn a_victim_whose_queue_goes_first_takes_its_room_back_before_the_reclaimer() {
    let run = |a_priority: i32| {
        let p = policy(&format!(
            r#"
            queue "a" priority={a_priority} {{ gpu quota=1 weight=0; namespaces "a" }}
            queue "r" {{ gpu quota=1; namespaces "r" }}
            "#
        ));
        let s = Snapshot {
            topologies: Vec::new(),
            dra: Default::default(),
            numa_ignore: Default::default(),
            priority_classes: Default::default(),
            nodes: vec![node("n", 4)],
            pods: vec![
                running(created(pod("a", "a1", 1), 0), "n", 0),
                running(created(pod("a", "a2", 1), 1), "n", 1),
                running(created(pod("a", "a3", 1), 2), "n", 2),
                created(pod("r", "r1", 2), 10),
            ],
            groups: vec![],
        };
        let r = cycle(&p, &s, 3600);
        assert_eq!(gpu_fair_shares(&r), vec![1000, 2000]);
        r
    };
    let r = run(100);
    assert_eq!(victims(&r), vec!["a/a3"], "{:#?}", r.decisions);
    assert_eq!(nominated(&r), vec![("r/r1".to_string(), "n".to_string())]);
    let r = run(101);
    assert_eq!(victims(&r), Vec::<String>::new(), "{:#?}", r.decisions);
    assert!(nominated(&r).is_empty(), "{:#?}", r.decisions);
}

/// KAI's solver allocates a victim job once per set of victims, with all the pods the set
/// holds of it: a job whose pod went back before the reclaimer may still give another.
///
/// The case above with A's pods one elastic job (minimum 1): n (4 GPUs) runs a1, a2, a3 (1 GPU
/// each, created in that order), A has priority 101, quota 1, weight 0; R (quota 1) wants r1
/// (2 GPUs). Fair shares A 1, R 2. With a3 taken, A goes first (its priority) and its job,
/// holding a1 and a2, at its minimum or above, asks for one pod back: a3 takes its GPU again,
/// and r1 finds 1 GPU free. KAI's next set is {a3, a2}: A, allocated once with a1 alone
/// running, asks one pod back, the older of the two (`Session.TaskOrderFn`): a2 goes back, a3
/// stays evicted, and r1 takes a3's GPU and the idle one (A holds 3 before a3 goes, above its
/// share of 1; R ends at 2 of 2, A at 2 of 1: R is no more saturated than A).
#[test]
fn a_job_that_took_its_room_back_may_give_another_pod_to_the_same_reclaimer() {
    let p = policy(
        r#"
        queue "a" priority=101 { gpu quota=1 weight=0; namespaces "a" }
        queue "r" { gpu quota=1; namespaces "r" }
        "#,
    );
    let elastic = |name: &str, at: Time| Pod {
        group: Some("a".into()),
        ..running(created(pod("a", name, 1), at), "n", at)
    };
    let s = Snapshot {
        topologies: Vec::new(),
        dra: Default::default(),
        numa_ignore: Default::default(),
        priority_classes: Default::default(),
        nodes: vec![node("n", 4)],
        pods: vec![
            // Listed out of age order: the order KAI places pods back in is their age.
            elastic("a1", 0),
            elastic("a3", 2),
            elastic("a2", 1),
            created(pod("r", "r1", 2), 10),
        ],
        groups: vec![PodGroup {
            namespace: "a".into(),
            name: "a".into(),
            min_member: 1,
            created: 0,
            ..Default::default()
        }],
    };
    let r = cycle(&p, &s, 3600);
    assert_eq!(gpu_fair_shares(&r), vec![1000, 2000]);
    assert_eq!(reclaimed(&r), vec!["a/a3"], "{:#?}", r.decisions);
    assert_eq!(moved(&r), Vec::<(String, String)>::new());
    assert_eq!(nominated(&r), vec![("r/r1".to_string(), "n".to_string())]);
}

/// In KAI's solver a queue competes with its jobs one after another: a waiting job that comes
/// first is passed over, and the queue then competes again with its next job.
///
/// The reclaimer's side: n (4 GPUs) runs A's a1, a2, a3 (1 GPU each); A has priority 101, quota
/// 1, weight 0. R (quota 2) has p (2 GPUs, older, held back by a long preemption delay) and r1
/// (3 GPUs). Fair shares A 1, R 1 + 2 over quota = 3. For r1, with a3 taken: R with p (0 + 2
/// within its quota of 2) goes before A with a3 (2 + 1 above its quota of 1), so p is passed
/// over; then R with r1 (3, above quota) against A with a3: both above quota, A's priority
/// wins, and a3 goes back before r1. So does a2; a1 may not go (A would be at its share), so r1
/// never fits and nothing is evicted. Judging A against p alone would have evicted a3 and a2.
#[test]
fn the_reclaimers_queue_competes_with_each_waiting_job_in_turn() {
    let p = policy(
        r#"
        queue "a" priority=101 { gpu quota=1 weight=0; namespaces "a" }
        queue "r" { gpu quota=2; namespaces "r" }
        "#,
    );
    let s = Snapshot {
        topologies: Vec::new(),
        dra: Default::default(),
        numa_ignore: Default::default(),
        priority_classes: Default::default(),
        nodes: vec![node("n", 4)],
        pods: vec![
            running(created(pod("a", "a1", 1), 0), "n", 0),
            running(created(pod("a", "a2", 1), 1), "n", 1),
            running(created(pod("a", "a3", 1), 2), "n", 2),
            Pod {
                group: Some("p".into()),
                ..created(pod("r", "p", 2), 5)
            },
            created(pod("r", "r1", 3), 10),
        ],
        groups: vec![PodGroup {
            namespace: "r".into(),
            name: "p".into(),
            min_member: 1,
            created: 5,
            preemption_delay: Some(100_000),
            ..Default::default()
        }],
    };
    let r = cycle(&p, &s, 3600);
    assert_eq!(gpu_fair_shares(&r), vec![1000, 3000]);
    assert_eq!(victims(&r), Vec::<String>::new(), "{:#?}", r.decisions);
}

/// The victim's side of the same rule: n (4 GPUs, full) runs A's a_old (1 GPU) and v (3 GPUs,
/// newest); A (quota 2, weight 0) also has p_a waiting (1 GPU, between them in job order). R
/// (quota 1) wants r1 (2 GPUs). Fair shares A 2, R 1 + 1 over quota = 2. With v taken, A with
/// p_a (1 + 1, within its quota) goes before R with r1 (2, above its quota of 1), so p_a is
/// passed over; then A with v (4 of an allocatable 2, share 2) against R with r1 (2 of 2,
/// share 1): R goes first and r1 takes v's room, so v is evicted. Judging R against p_a alone
/// would have put v straight back and evicted nothing.
///
/// Then p_a's own attempt (A holds 1 with v gone: 1 + 1 within its fair share) has r1 among
/// its candidates, as KAI gathers each attempt's victims afresh (R holds 2, above its quota of
/// 1, while A is within its own with p_a). r1 goes back before p_a, onto the room it holds, and
/// p_a fits on the GPU v's release leaves: it is nominated too, with no victim. (This test used
/// to expect r1 alone: the victims were gathered once for the action, so p_a's attempt had no
/// candidate and never ran, where KAI's solver runs and places it.)
#[test]
fn the_victims_queue_competes_with_each_waiting_job_in_turn() {
    let p = policy(
        r#"
        queue "a" { gpu quota=2 weight=0; namespaces "a" }
        queue "r" { gpu quota=1; namespaces "r" }
        "#,
    );
    let s = Snapshot {
        topologies: Vec::new(),
        dra: Default::default(),
        numa_ignore: Default::default(),
        priority_classes: Default::default(),
        nodes: vec![node("n", 4)],
        pods: vec![
            running(created(pod("a", "a_old", 1), 0), "n", 0),
            created(pod("a", "p_a", 1), 1),
            running(created(pod("a", "v", 3), 2), "n", 2),
            created(pod("r", "r1", 2), 10),
        ],
        groups: vec![],
    };
    let r = cycle(&p, &s, 3600);
    assert_eq!(gpu_fair_shares(&r), vec![2000, 2000]);
    assert_eq!(victims(&r), vec!["a/v"], "{:#?}", r.decisions);
    assert_eq!(
        nominated(&r),
        vec![
            ("r/r1".to_string(), "n".to_string()),
            ("a/p_a".to_string(), "n".to_string())
        ]
    );
}

/// A pod pipelined onto a node takes its releasing room first and leaves its idle room as it
/// was (KAI's eviction solvers pipeline every task they place; `NodeInfo.addTaskResources`
/// takes a pipelined task from the releasing vector).
///
/// n0 (2 GPUs) and n1 (3 GPUs) run A's gang v, one 2-GPU pod on each: n1 has 1 GPU idle. R
/// (quota 2) wants a gang of two 1-GPU pods. Capacity 5: A (quota 0) asks 4 and R 2, so fair
/// shares A 3, R 2; A holds 4, above its share, and v goes whole. r-0 goes to n1, the only node
/// with idle room; n1 then has 2 free of which v still releases 2, but r-0 took 1 of those, so
/// its idle GPU is still there and r-1 goes to n1 too. Had r-0 used up the idle GPU, r-1 would
/// have gone to n0 (binpack's tie, by node order).
#[test]
fn a_pipelined_pod_leaves_the_idle_room_to_the_next_one() {
    let p = policy(
        r#"
        queue "a" { gpu; namespaces "a" }
        queue "r" { gpu quota=2; namespaces "r" }
        "#,
    );
    let (v, vg) = gang("a", "v", 2, 2, 2);
    let mut pods: Vec<Pod> = v
        .into_iter()
        .zip(["n0", "n1"])
        .map(|(p, n)| running(p, n, 0))
        .collect();
    let (r, rg) = gang("r", "r", 2, 1, 2);
    pods.extend(r.into_iter().map(|p| created(p, 100)));
    let s = Snapshot {
        topologies: Vec::new(),
        dra: Default::default(),
        numa_ignore: Default::default(),
        priority_classes: Default::default(),
        nodes: vec![node("n0", 2), node("n1", 3)],
        pods,
        groups: vec![vg, PodGroup { created: 100, ..rg }],
    };
    let r = cycle(&p, &s, 3600);
    assert_eq!(gpu_fair_shares(&r), vec![3000, 2000]);
    assert_eq!(victims(&r), vec!["a/v-0", "a/v-1"], "{:#?}", r.decisions);
    assert_eq!(
        nominated(&r),
        vec![
            ("r/r-0".to_string(), "n1".to_string()),
            ("r/r-1".to_string(), "n1".to_string())
        ],
        "{:#?}",
        r.decisions
    );
}

/// A victim placed back where it runs before the reclaimer (KAI's solver order) is not evicted
/// and runs on: KAI un-evicts it (`Statement.Unevict`), so a later action of the same cycle may
/// still take it.
///
/// n0 (2 GPUs) runs A's e (1 GPU, priority 50) and B's b1 (1 GPU); n1 (2 GPUs) runs B's b2 (2
/// GPUs, newer). A (priority 101, no quota or weight in any resource) also waits with c (1 GPU,
/// priority 500); R (GPU quota 1) wants r (2 GPUs). Capacity 4: fair shares A 0, R 1 + 1 = 2,
/// B the remaining 2. A holds more than its share of 0 in every resource, so it is the last
/// queue in the order and gives first: e. With e taken, A (with c, then e) and R (with r) are
/// both above quota, and A's priority puts it first: e goes back onto n0 before r. Then b2
/// (B holds 3 of its 2): B with b2 (3 of 2) against R with r (2 of 2): R goes first, and r
/// takes n1. Preempt then takes e for c, as if reclaim had never looked at it.
#[test]
fn a_victim_put_back_before_the_reclaimer_may_still_be_preempted() {
    let p = policy(
        r#"
        priority-class "low" value=50
        priority-class "high" value=500 preemptible=#true
        queue "a" priority=101 {
            gpu quota=0 weight=0
            cpu quota=0 weight=0
            memory quota=0 weight=0
            namespaces "a"
        }
        queue "b" { gpu; namespaces "b" }
        queue "r" { gpu quota=1; namespaces "r" }
        "#,
    );
    let class = |p: Pod, c: &str| Pod {
        priority_class: Some(c.into()),
        ..p
    };
    let s = Snapshot {
        topologies: Vec::new(),
        dra: Default::default(),
        numa_ignore: Default::default(),
        priority_classes: Default::default(),
        nodes: vec![node("n0", 2), node("n1", 2)],
        pods: vec![
            running(class(created(pod("a", "e", 1), 0), "low"), "n0", 0),
            running(created(pod("b", "b1", 1), 1), "n0", 1),
            running(created(pod("b", "b2", 2), 2), "n1", 2),
            class(created(pod("a", "c", 1), 5), "high"),
            created(pod("r", "r", 2), 10),
        ],
        groups: vec![],
    };
    let r = cycle(&p, &s, 3600);
    assert_eq!(gpu_fair_shares(&r), vec![0, 2000, 2000]);
    let why: Vec<(String, &str)> = r
        .decisions
        .iter()
        .filter_map(|d| match d {
            Decision::Evict { pod, reason, .. } => Some((
                pod.clone(),
                match reason {
                    EvictReason::Reclaim { .. } => "reclaim",
                    EvictReason::Preempt { .. } => "preempt",
                    _ => "other",
                },
            )),
            _ => None,
        })
        .collect();
    assert_eq!(
        why,
        vec![
            ("b/b2".to_string(), "reclaim"),
            ("a/e".to_string(), "preempt")
        ],
        "{:#?}",
        r.decisions
    );
    assert_eq!(
        nominated(&r),
        vec![
            ("r/r".to_string(), "n1".to_string()),
            ("a/c".to_string(), "n0".to_string())
        ]
    );
}

/// The victims a reclaim needs are placed again after the gang in KAI's queue order, then job
/// order (`common/action.go: TryToVirtuallyAllocatePreemptorAndGetVictims` pops every job from
/// one `JobsOrderByQueues`): where only one of them can move, the one whose queue comes first
/// moves and the other is evicted.
///
/// n1 (4 GPUs) runs v1 of Q1 and v2 of Q2, 2 GPUs each, v1 older; n2 has 2 GPUs free. P wants
/// p1, one 4-GPU pod. Quotas P 4, Q1 1 and Q2 1 add up to the cluster's 6 GPUs: fair shares
/// 4, 1 and 1. Q1 and Q2 hold 2 each, above their shares; P with p1 stays within its quota, so
/// it goes before either victim. Q1, at the lower queue priority, is last in the queue order:
/// v1 is taken first, p1 does not fit on 2 + 2 GPUs, then v2, and p1 fits on n1 with both
/// gone. Put back, v1 leaves no room for p1: both are needed. Only n2's 2 GPUs are left for
/// them. With the queues' allocations as they then are (each 0, 2 with its victim, above its
/// quota), queue priority decides: Q2 (101) before Q1 (100), so v2 moves to n2 and v1 is
/// evicted. Job order alone (v1 older) would have moved v1.
#[test]
fn the_victims_placed_again_after_the_gang_go_in_queue_order() {
    let p = policy(
        r#"
        queue "p" { gpu quota=4; namespaces "p" }
        queue "q1" { gpu quota=1; namespaces "q1" }
        queue "q2" priority=101 { gpu quota=1; namespaces "q2" }
        "#,
    );
    let s = Snapshot {
        topologies: Vec::new(),
        dra: Default::default(),
        numa_ignore: Default::default(),
        priority_classes: Default::default(),
        nodes: vec![node("n1", 4), node("n2", 2)],
        pods: vec![
            running(created(pod("q1", "v1", 2), 0), "n1", 0),
            running(created(pod("q2", "v2", 2), 1), "n1", 1),
            created(pod("p", "p1", 4), 10),
        ],
        groups: vec![],
    };
    let r = cycle(&p, &s, 3600);
    assert_eq!(gpu_fair_shares(&r), vec![4000, 1000, 1000]);
    assert_eq!(reclaimed(&r), vec!["q1/v1"], "{:#?}", r.decisions);
    assert_eq!(moved(&r), vec![("q2/v2".to_string(), "n2".to_string())]);
    assert_eq!(nominated(&r), vec![("p/p1".to_string(), "n1".to_string())]);
}

/// KAI's solver, for a preemptor of one pod, evicts every victim taken so far on the node the
/// preemptor lands on and places them again after it by the nodes' order
/// (`plugins/nodelocalgreedy`: a scenario is the victims on the node of the latest one;
/// `common/action.go: TryToVirtuallyAllocatePreemptorAndGetVictims`): one it does not need
/// may move.
///
/// x (4 GPUs) runs a (1 GPU, priority 10) and l (3 GPUs, priority 40); w (8 GPUs) has 7 taken
/// by a pod that may not be preempted. p (2 GPUs, priority 200) waits in the same queue.
/// Preempt takes a (lowest first): x has 1 GPU free, too few; then l: x has 4. p goes to x.
/// Then l and a are placed again, in job order: l (3 GPUs) fits nowhere (x has 2 left, w 1)
/// and is evicted; a (1 GPU) goes first to a node where it fits in idle room
/// (`plugins/nodeavailability`): x's 2 GPUs are the room a and l are releasing, w's one is
/// idle, so a moves to w. With w full, a goes back to x and stays.
#[test]
fn a_victim_the_preemptor_does_not_need_is_placed_again_by_the_nodes_order() {
    let run = |w_taken: i64| {
        let p = policy(
            r#"
            priority-class "high" value=200 preemptible=#false
            priority-class "mid" value=40
            priority-class "low" value=10
            queue "q" { gpu quota=16; namespaces "q" }
            "#,
        );
        let class = |pod: Pod, class: &str| Pod {
            priority_class: Some(class.into()),
            ..pod
        };
        let s = Snapshot {
            topologies: Vec::new(),
            dra: Default::default(),
            numa_ignore: Default::default(),
            priority_classes: Default::default(),
            nodes: vec![node("x", 4), node("w", 8)],
            pods: vec![
                running(class(created(pod("q", "a", 1), 0), "low"), "x", 0),
                running(class(created(pod("q", "l", 3), 1), "mid"), "x", 1),
                running(class(created(pod("q", "keep", w_taken), 2), "high"), "w", 2),
                class(created(pod("q", "p", 2), 10), "high"),
            ],
            groups: vec![],
        };
        cycle(&p, &s, 3600)
    };
    let preempted = |r: &CycleResult| -> Vec<String> {
        evicted(r)
            .into_iter()
            .filter(|(_, why)| matches!(why, EvictReason::Preempt { .. }))
            .map(|(pod, _)| pod)
            .collect()
    };
    let r = run(7);
    assert_eq!(preempted(&r), vec!["q/l"], "{:#?}", r.decisions);
    assert_eq!(moved(&r), vec![("q/a".to_string(), "w".to_string())]);
    assert_eq!(nominated(&r), vec![("q/p".to_string(), "x".to_string())]);
    let r = run(8);
    assert_eq!(preempted(&r), vec!["q/l"], "{:#?}", r.decisions);
    assert_eq!(moved(&r), Vec::<(String, String)>::new());
    assert_eq!(nominated(&r), vec![("q/p".to_string(), "x".to_string())]);
}

/// KAI ranks the victim queues on a session no victim has left yet (each scenario's simulation
/// is discarded before the next victim is popped): `prioritizeSmallerResourceShareWithoutTask`
/// compares the queues' allocations as they were when the attempt began, and only the
/// dominant share with the job subtracts the victims popped so far (`getVictimsForQueue`).
///
/// Two 4-GPU nodes, full once allocate binds q0's 1-GPU j3 on n0's free GPU. q2 (limit 1)
/// runs the gang j0 (2 x 1 GPU) and the newer j5 (1 GPU) on n0; q1-0 runs j4 (4 GPUs) on n1.
/// Fair shares: 8 GPUs, q0 deserves its quota 2; the 6 left go by weight 2:1:2, q2 capped at
/// its limit 1 and q0 at its request 5: q0 5, q1 2, q2 1. q0's gang j1 (2 x 1 GPU) reclaims
/// (1 + 2 <= 5). Victims come from the last queue in the order: q2's next victim j5 leaves it
/// at (3 - 1) / 1 = 2, q1's j4 at (4 - 4) / 2 = 0, so j5 goes first. Then both dominant
/// shares with the victims are 0 (q2: 3 - 1 - 2 for j5 and j0; q1: 4 - 4); without them q2
/// holds 3 / 1 = 3 when the attempt began, q1 4 / 2 = 2: q2 is last again and j0 goes, which
/// frees 3 GPUs on n0. j1 lands there and j5, not needed, stays. Ranked on what q2 holds with
/// j5 gone (2 / 1 = 2, a tie with q1, then the smaller allocatable share first), j4 went
/// instead: 4 GPUs taken for a job of 2. j2 (2 GPUs) then takes j4 (q0 ends at 5, its share).
#[test]
fn victim_queues_are_ranked_on_the_allocation_the_attempt_began_with() {
    let p = policy(
        r#"
        queue "q0" priority=200 { gpu quota=2 weight=2; namespaces "q0" }
        queue "q1" priority=200 {
            gpu weight=1
            queue "q1-0" priority=50 { gpu weight=1; namespaces "q1-0" }
            queue "q1-1" priority=50 { gpu weight=1; namespaces "q1-1" }
        }
        queue "q2" priority=200 { gpu limit=1 weight=2; namespaces "q2" }
        "#,
    );
    let (mut pods, j0) = gang("q2", "j0", 2, 1, 2);
    for p in &mut pods {
        p.node = Some("n0".into());
        p.started = Some(0);
    }
    let (j1_pods, j1) = gang("q0", "j1", 2, 1, 2);
    pods.extend(j1_pods.into_iter().map(|p| created(p, 7199)));
    pods.push(created(pod("q0", "j2", 2), 7199));
    pods.push(created(pod("q0", "j3", 1), 7199));
    pods.push(running(pod("q1-0", "j4", 4), "n1", 0));
    pods.push(running(created(pod("q2", "j5", 1), 1), "n0", 1));
    let s = Snapshot {
        topologies: Vec::new(),
        dra: Default::default(),
        numa_ignore: Default::default(),
        priority_classes: Default::default(),
        nodes: vec![node("n0", 4), node("n1", 4)],
        pods,
        groups: vec![j0, j1],
    };
    let r = cycle(&p, &s, 7200);
    assert_eq!(gpu_fair_shares(&r), vec![5000, 2000, 2000, 0, 1000]);
    assert_eq!(
        reclaimed(&r),
        vec!["q2/j0-0", "q2/j0-1", "q1-0/j4"],
        "{:#?}",
        r.decisions
    );
    assert_eq!(
        nominated(&r),
        vec![
            ("q0/j1-0".to_string(), "n0".to_string()),
            ("q0/j1-1".to_string(), "n0".to_string()),
            ("q0/j2".to_string(), "n1".to_string()),
        ]
    );
}

/// KAI's eviction solvers place the preemptor, and the victims again, only on the preemptor's
/// feasible nodes and the victims' nodes: for a job whose every pod asks a GPU, the nodes
/// with GPUs idle or being released (`feasible_nodes.go: FeasibleNodesForJob`,
/// `by_pod_solver.go: updateFeasibleNodes`); for a job with a pod that asks none, every node.
///
/// n1 has one GPU and 8 cores, held by b's g1 (1 GPU, 4 cores) and the newer CPU-only c1
/// (4 cores); n2 has 64 cores and no GPU. a (GPU quota 1, fair share 1) wants p (1 GPU,
/// 6 cores) and reclaims from b (1 GPU held, fair share 0). Victims newest first: c1 alone
/// frees no GPU; with g1, p fits on n1, and b's jobs are placed again after it (a, within its
/// quota, comes first): g1 finds no GPU, c1 finds 2 cores left on n1, and n2 is no node of
/// the scenario (no GPU, no victim there). Both are evicted. When the job has a CPU-only pod
/// too (p2, 1 core), every node is the solver's: c1 moves to n2 instead.
#[test]
fn victims_asking_no_gpu_go_only_where_the_solver_places() {
    let p = policy(
        r#"
        queue "a" { gpu quota=1; namespaces "a" }
        queue "b" { gpu; namespaces "b" }
        "#,
    );
    let mut n1 = node("n1", 1);
    n1.allocatable.cpu = 8_000;
    let cores = |p: Pod, cores: i64| Pod {
        request: crate::cluster::Amounts {
            cpu: cores * 1000,
            ..p.request
        },
        ..p
    };
    let mut s = Snapshot {
        topologies: Vec::new(),
        dra: Default::default(),
        numa_ignore: Default::default(),
        priority_classes: Default::default(),
        nodes: vec![n1, node("n2", 0)],
        pods: vec![
            running(created(cores(pod("b", "g1", 1), 4), 0), "n1", 0),
            running(created(cores(pod("b", "c1", 0), 4), 1), "n1", 1),
            Pod {
                group: Some("p".into()),
                ..created(cores(pod("a", "p", 1), 6), 100)
            },
        ],
        groups: vec![],
    };
    let r = cycle(&p, &s, 3600);
    assert_eq!(reclaimed(&r), vec!["b/c1", "b/g1"], "{:#?}", r.decisions);
    assert_eq!(moved(&r), vec![]);
    assert_eq!(nominated(&r), vec![("a/p".to_string(), "n1".to_string())]);

    s.pods.push(Pod {
        group: Some("p".into()),
        ..created(cores(pod("a", "p2", 0), 1), 100)
    });
    s.groups.push(PodGroup {
        namespace: "a".into(),
        name: "p".into(),
        min_member: 2,
        ..Default::default()
    });
    let r = cycle(&p, &s, 3600);
    assert_eq!(reclaimed(&r), vec!["b/g1"], "{:#?}", r.decisions);
    assert_eq!(moved(&r), vec![("b/c1".to_string(), "n2".to_string())]);
}

/// KAI's eviction actions pass over a job with a pod larger than every node before its
/// solver (`VictimInvariantPrePredicateFailureForTasks`: `MaxNodeResourcesPredicate`), and
/// do not count it among the jobs they failed for (`MinimalJobRepresentatives`), so it hides
/// no later job of its queue. Ours: allocate gives such a job its reason, larger than any
/// node, and does not hand it to the eviction actions at all.
///
/// Two 2-GPU nodes, full with b's b1 and the newer b2 (2 GPUs each). a (quota 4, fair share
/// 4) waits with the older j1 (one pod of 3 GPUs, 1 core: no node has 3 GPUs) and j2 (one pod
/// of 2 GPUs and 8 cores, which is no easier than j1: more cores). j1 is passed over; j2
/// reclaims b2, the newest, and is nominated on n2. Had j1 been tried and failed, j2 would not
/// have been tried.
#[test]
fn a_job_larger_than_every_node_hides_no_later_job_from_reclaim() {
    let p = policy(
        r#"
        queue "a" { gpu quota=4; namespaces "a" }
        queue "b" { gpu; namespaces "b" }
        "#,
    );
    let sized = |p: Pod, cores: i64| Pod {
        request: crate::cluster::Amounts {
            cpu: cores * 1000,
            ..p.request
        },
        ..p
    };
    let s = Snapshot {
        topologies: Vec::new(),
        dra: Default::default(),
        numa_ignore: Default::default(),
        priority_classes: Default::default(),
        nodes: vec![node("n1", 2), node("n2", 2)],
        pods: vec![
            running(created(pod("b", "b1", 2), 0), "n1", 0),
            running(created(pod("b", "b2", 2), 1), "n2", 1),
            created(sized(pod("a", "j1", 3), 1), 100),
            created(sized(pod("a", "j2", 2), 8), 200),
        ],
        groups: vec![],
    };
    let r = cycle(&p, &s, 3600);
    assert_eq!(gpu_fair_shares(&r), vec![4000, 0]);
    assert_eq!(reclaimed(&r), vec!["b/b2"], "{:#?}", r.decisions);
    assert_eq!(nominated(&r), vec![("a/j2".to_string(), "n2".to_string())]);
    assert!(matches!(
        pending_reason(&r, "a/j1"),
        Reason::LargerThanAnyNode { .. }
    ));
}

/// KAI's solver allocates each victim job once, at one point of its order, with every pod of it
/// the scenario evicted (`common/action.go: TryToVirtuallyAllocatePreemptorAndGetVictims`, one
/// `AllocateJob` per job, `GetTasksToAllocate`): an elastic victim whose surplus pod and last
/// pod were both taken gets back only what brings it to its minimum, one pod.
///
/// Three 8-GPU nodes. q0 (quota 4, weight 0) runs j0 (two 2-GPU pods, minimum 1) on n0; q1
/// (quota 5, limit 6) has q1-0 running j2 (two 4-GPU pods, on n0 and n1) and q1-1 with j4 (one
/// GPU) waiting. Fair shares: q0 4; q1 6 (its limit), split q1-0 5, q1-1 1 (j4 asks 1).
/// Allocate binds q0's j1 (1 GPU, high) and j3 (2 x 1 GPU) on n1 (1 GPU left there); j4 waits
/// on q1's limit (8 + 1 > 6). Reclaim for j4 takes, in KAI's victim order, j0's surplus pod
/// j0-1, then j0-0, then j2 (all of q1's 8 GPUs: only then does j4 fit q1's limit). KAI's
/// scenario is every victim on j2's first node, n0: j0-1, j0-0 and j2. j4 goes to n1's idle GPU;
/// j0, with none of its pods left, is allocated once for its minimum: one pod, j0-0 (the older
/// in task order, here the first), on n2's idle room (KAI's node order puts idle room before
/// releasing); j0-1 stays evicted; j2 cannot come back under q1's limit. Judged unit by unit,
/// j0-1 came after j4 (q0 then held 5: (5 + 2) / 4 = 1.75 against q1's (8 + 1) / 6 = 1.5) and
/// j0-0 before it ((3 + 2) / 4 = 1.25); j0-1 was then put back where it ran, unneeded.
#[test]
fn a_victim_job_is_placed_again_once_with_every_pod_taken_from_it() {
    let p = policy(
        r#"
        cluster "c" { oversubscription "allow"; min-runtime reclaim="0s" }
        priority-class "low" value=50
        priority-class "high" value=80
        queue "q0" { gpu quota=4 weight=0; namespaces "q0" }
        queue "q1" {
            gpu quota=5 limit=6 weight=1
            queue "q1-0" { gpu quota=0 weight=1; namespaces "q1-0" }
            queue "q1-1" { gpu quota=0 weight=1; namespaces "q1-1" }
        }
        "#,
    );
    let low = |p: Pod| Pod {
        priority_class: Some("low".into()),
        ..p
    };
    let group = |(pods, g): (Vec<Pod>, PodGroup)| {
        let g = PodGroup {
            priority_class: Some("low".into()),
            ..g
        };
        (pods, g)
    };
    let (j0, g0) = group(gang("q0", "j0", 2, 2, 1));
    let (j2, g2) = group(gang("q1-0", "j2", 2, 4, 2));
    let (j3, g3) = group(gang("q0", "j3", 2, 1, 2));
    let mut pods = vec![
        running(j0[0].clone(), "n0", 0),
        running(j0[1].clone(), "n0", 0),
        running(j2[0].clone(), "n0", 0),
        running(j2[1].clone(), "n1", 0),
        Pod {
            priority_class: Some("high".into()),
            ..pod("q0", "j1", 1)
        },
        low(pod("q1-1", "j4", 1)),
    ];
    pods.extend(j3);
    let s = Snapshot {
        topologies: Vec::new(),
        dra: Default::default(),
        numa_ignore: Default::default(),
        priority_classes: Default::default(),
        nodes: vec![node("n0", 8), node("n1", 8), node("n2", 8)],
        pods,
        groups: vec![g0, g2, g3],
    };
    let r = cycle(&p, &s, 7200);
    assert_eq!(gpu_fair_shares(&r), vec![4000, 6000, 5000, 1000]);
    assert_eq!(
        binds(&r),
        vec![
            ("q0/j1".to_string(), "n1".to_string()),
            ("q0/j3-0".to_string(), "n1".to_string()),
            ("q0/j3-1".to_string(), "n1".to_string()),
        ]
    );
    assert_eq!(moved(&r), vec![("q0/j0-0".to_string(), "n2".to_string())]);
    assert_eq!(
        reclaimed(&r),
        vec!["q0/j0-1", "q1-0/j2-0", "q1-0/j2-1"],
        "{:#?}",
        r.decisions
    );
    assert_eq!(
        nominated(&r),
        vec![("q1-1/j4".to_string(), "n1".to_string())]
    );
}

/// KAI's reclaim takes the jobs allocate left waiting in its queue order afresh, on the
/// allocation allocate left (`reclaim.go: Execute` builds its own `JobsOrderByQueues`), not in
/// the order allocate tried them.
///
/// One 8-GPU node, all of it used: C runs seven 1-GPU jobs, five of them inside C's reclaim
/// min-runtime; A's a2 (1 GPU) takes the last GPU in allocate. A, B and C have no quota and
/// weight 1; requests A 3 (a1 2, a2 1), B 2, C 7: fair shares A 3, B 2, C 3. Allocate tries a1
/// first (with it A would hold 2 of 3, 0.67, against B's 2 of 2, 1.0) and it does not fit;
/// then a2, which fits; then b1, which does not. In reclaim, with a2 placed, A with a1 would
/// hold (1 + 2) / 3 = 1.0, as B with b1 (0 + 2) / 2 = 1.0: a tie; without the job, B holds 0
/// against A's 1/3, so B goes first. b1 takes C's two unprotected jobs; a1 then finds only
/// protected ones and waits, told why.
#[test]
fn reclaim_tries_the_waiting_jobs_in_the_queue_order_allocate_left() {
    let p = policy(
        r#"
        queue "a" { gpu quota=0 weight=1; namespaces "a" }
        queue "b" { gpu quota=0 weight=1; namespaces "b" }
        queue "c" { gpu quota=0 weight=1; namespaces "c"; min-runtime reclaim="1h" }
        "#,
    );
    let mut pods = vec![
        created(pod("a", "a1", 2), 10),
        created(pod("a", "a2", 1), 20),
        created(pod("b", "b1", 2), 30),
    ];
    for i in 0..7 {
        // c0 and c1 started two hours before the cycle, the others ten minutes before.
        let started = if i < 2 { 0 } else { 6600 };
        pods.push(running(
            created(pod("c", &format!("c{i}"), 1), started),
            "n",
            started,
        ));
    }
    let s = Snapshot {
        topologies: Vec::new(),
        dra: Default::default(),
        numa_ignore: Default::default(),
        priority_classes: Default::default(),
        nodes: vec![node("n", 8)],
        pods,
        groups: vec![],
    };
    let r = cycle(&p, &s, 7200);
    assert_eq!(gpu_fair_shares(&r), vec![3000, 2000, 3000]);
    assert_eq!(binds(&r), vec![("a/a2".to_string(), "n".to_string())]);
    assert_eq!(reclaimed(&r), vec!["c/c1", "c/c0"], "{:#?}", r.decisions);
    assert_eq!(nominated(&r), vec![("b/b1".to_string(), "n".to_string())]);
    assert!(
        matches!(pending_reason(&r, "a/a1"), Reason::MinRuntime { .. }),
        "{:?}",
        pending_reason(&r, "a/a1")
    );
}

/// A job that failed under a topology constraint does not hide a job of the same size without
/// one: KAI's scheduling signature counts each pod set's topology (`subgroup_info/podset.go`,
/// `minimal_job_comparison.go`).
///
/// Node m (2 GPUs, no zone label) runs A's w (2 GPUs, quota 0). R (quota 2) wants r1, one pod
/// of 2 GPUs that must stay inside one zone: no node carries the label, so no victim helps and
/// r1 fails. r2, the same pod without the constraint, is tried after it, and takes w's room.
#[test]
fn a_job_without_a_topology_is_tried_after_one_with_a_topology_failed() {
    let p = policy(
        r#"
        queue "a" { gpu quota=0; namespaces "a" }
        queue "r" { gpu quota=2; namespaces "r" }
        "#,
    );
    let r1 = Pod {
        group: Some("r1".into()),
        ..created(pod("r", "r1", 2), 10)
    };
    let s = Snapshot {
        topologies: Vec::new(),
        dra: Default::default(),
        numa_ignore: Default::default(),
        priority_classes: Default::default(),
        nodes: vec![node("m", 2)],
        pods: vec![
            running(created(pod("a", "w", 2), 0), "m", 0),
            r1,
            created(pod("r", "r2", 2), 20),
        ],
        groups: vec![PodGroup {
            namespace: "r".into(),
            name: "r1".into(),
            min_member: 1,
            created: 10,
            topology_required: Some("topology.kubernetes.io/zone".into()),
            ..Default::default()
        }],
    };
    let r = cycle(&p, &s, 3600);
    assert_eq!(victims(&r), vec!["a/w"], "{:#?}", r.decisions);
    assert_eq!(nominated(&r), vec![("r/r2".to_string(), "m".to_string())]);
}

/// An elastic victim gives up the pod last in KAI's task order first: pods with a
/// `kai.scheduler/task-priority` label come before those without, the highest first
/// (`plugins/taskorder`, `eviction_info.go: GetTasksToEvict` takes the reversed order).
///
/// n (2 GPUs) runs A's elastic job (minimum 1) of a1 and a2, a1 the older; a1 carries task
/// priority 1 and a2 priority 5, so a2 comes first in the task order and a1 last. R (quota 1)
/// wants one 1-GPU pod; A's quota is 0 and its fair share 1 (capacity 2, R asks 1). The
/// surplus pod that goes is a1, though it is the older (by age alone a2 would go).
#[test]
fn an_elastic_victim_gives_up_the_pod_last_in_its_task_order() {
    let p = policy(
        r#"
        queue "a" { gpu quota=0; namespaces "a" }
        queue "r" { gpu quota=1; namespaces "r" }
        "#,
    );
    let elastic = |name: &str, at: Time, priority: &str| {
        let mut p = Pod {
            group: Some("a".into()),
            ..running(created(pod("a", name, 1), at), "n", at)
        };
        p.labels
            .insert("kai.scheduler/task-priority".into(), priority.into());
        p
    };
    let s = Snapshot {
        topologies: Vec::new(),
        dra: Default::default(),
        numa_ignore: Default::default(),
        priority_classes: Default::default(),
        nodes: vec![node("n", 2)],
        pods: vec![
            elastic("a1", 0, "1"),
            elastic("a2", 1, "5"),
            created(pod("r", "r1", 1), 10),
        ],
        groups: vec![PodGroup {
            namespace: "a".into(),
            name: "a".into(),
            min_member: 1,
            created: 0,
            ..Default::default()
        }],
    };
    let r = cycle(&p, &s, 3600);
    assert_eq!(reclaimed(&r), vec!["a/a1"], "{:#?}", r.decisions);
    assert_eq!(nominated(&r), vec![("r/r1".to_string(), "n".to_string())]);
}

/// The room of pods being deleted is the reclaimer's beside its victims' (KAI's solver places
/// on idle and releasing room alike: `node_info.go: NonAllocatedResource`, and the idle-GPU
/// scenario filter counts releasing GPUs, `idle_gpus.go: nodeIdleOrReleasingGpuCapacity`).
///
/// n1 has 4 GPUs: b's x (2 GPUs) runs, b's t (2 GPUs) is being deleted. a (quota 4, fair share
/// 4; b's is 0, t counting as nothing) wants p (4 GPUs). Allocate cannot pipeline p onto t's
/// 2 GPUs alone; reclaim evicts x, and p is nominated onto n1 with x's and t's room. Before,
/// reclaim counted only the victims' room, and p waited for t to be gone.
#[test]
fn reclaim_nominates_onto_the_room_of_pods_being_deleted_beside_its_victims() {
    let p = policy(
        r#"
        queue "a" { gpu quota=4; namespaces "a" }
        queue "b" { gpu; namespaces "b" }
        "#,
    );
    let s = Snapshot {
        nodes: vec![node("n1", 4)],
        pods: vec![
            running(pod("b", "x", 2), "n1", 0),
            Pod {
                terminating: true,
                ..running(pod("b", "t", 2), "n1", 0)
            },
            created(pod("a", "p", 4), 100),
        ],
        ..Default::default()
    };
    let r = cycle(&p, &s, 3600);
    assert_eq!(reclaimed(&r), vec!["b/x"], "{:#?}", r.decisions);
    assert_eq!(nominated(&r), vec![("a/p".to_string(), "n1".to_string())]);
}

/// One 4-GPU node: b1 (queue b, 1 GPU) runs there; a1 (queue a, 4 GPUs) and b2 (queue b, 1
/// GPU, the newest) wait.
fn one_node_with_b2_pending() -> Snapshot {
    Snapshot {
        nodes: vec![node("n1", 4)],
        pods: vec![
            created(pod("a", "a1", 4), 5),
            running(created(pod("b", "b1", 1), 0), "n1", 0),
            created(pod("b", "b2", 1), 10),
        ],
        ..Default::default()
    }
}

/// KAI's reclaim may take what allocate placed in the same session (its victims are the jobs
/// with active allocated pods, `Allocated` and `Pipelined` among them: `pod_status.go`); ours
/// takes such a placement back before anything is bound, so the pod is neither bound nor
/// evicted, and its job waits saying why.
///
/// One 4-GPU node. A (quota 4) wants one 4-GPU pod; B (quota 0) runs b1 (1 GPU) and has b2
/// (1 GPU, newer) pending. Fair shares A 4, B 0. Allocate serves A first, which does not fit
/// beside b1, then binds b2. Reclaim for a1: A stays within its quota with it (0 + 4 <= 4), B is
/// above its quota; its newest job first: b2, then b1 (B holds 2, then 1, both above its share
/// of 0). With both gone a1 fits, nominated onto the room b1 is releasing. Were b2's placement
/// not taken, evicting b1 would leave 3 GPUs and a1 would wait a cycle more.
#[test]
fn reclaim_takes_back_a_placement_of_the_same_cycle_instead_of_binding_it() {
    let p = policy(
        r#"
        queue "a" { gpu quota=4; namespaces "a" }
        queue "b" { gpu; namespaces "b" }
        "#,
    );
    let s = one_node_with_b2_pending();
    let r = cycle(&p, &s, 3600);
    assert_eq!(gpu_fair_shares(&r), vec![4000, 0]);
    assert_eq!(
        binds(&r),
        Vec::<(String, String)>::new(),
        "{:#?}",
        r.decisions
    );
    assert_eq!(victims(&r), vec!["b/b1".to_string()], "{:#?}", r.decisions);
    assert_eq!(nominated(&r), vec![("a/a1".to_string(), "n1".to_string())]);
    assert_eq!(
        pending_reason(&r, "b/b2"),
        &Reason::Withdrawn {
            reason: EvictReason::Reclaim {
                for_job: "a/a1".into(),
                by_queue: "a".into(),
                from_queue: "b".into(),
            }
        }
    );
    assert_eq!(
        pending_reason(&r, "b/b2").to_string(),
        "placed earlier in this cycle, then given up before binding: reclaimed by queue a (below its fair share) from queue b for a/a1"
    );
}

/// KAI's allocate sets a job's `LastStartTimestamp` to now when it starts it
/// (`allocate.go: setLastStartTimestamp`), so a job started in this cycle is inside any
/// min-runtime. The cluster of the case above, with a reclaim min-runtime of 1h and the clock at
/// 2h: b1 (started at 0) is past it, b2 (started now) inside it for the whole hour. b1 alone
/// frees 3 GPUs, too few: a1 waits, and says that b's min-runtime is what keeps it, for 1h.
#[test]
fn a_job_allocate_started_this_cycle_is_inside_its_min_runtime() {
    let p = policy(
        r#"
        cluster "c" { min-runtime reclaim="1h" }
        queue "a" { gpu quota=4; namespaces "a" }
        queue "b" { gpu; namespaces "b" }
        "#,
    );
    let s = one_node_with_b2_pending();
    let r = cycle(&p, &s, 7200);
    assert_eq!(binds(&r), vec![("b/b2".to_string(), "n1".to_string())]);
    assert_eq!(victims(&r), Vec::<String>::new(), "{:#?}", r.decisions);
    assert_eq!(
        pending_reason(&r, "a/a1"),
        &Reason::MinRuntime {
            action: "reclaim",
            queue: "b".into(),
            remaining: 3600,
        }
    );
}

/// KAI gathers each reclaim attempt's victims afresh (`reclaim.go: getOrderedVictimsQueue`,
/// every job with a pod `Pipelined` or bound), so a job one attempt placed may be moved, or
/// taken, by the next attempt of the same action.
///
/// Two 4-GPU nodes; quotas a 2 (priority 2), b 4, c 2 (priority 1) add up to the cluster, so
/// the fair shares are the quotas: 2, 4 and 2. n1 runs a0, c1 and c2 (not preemptible) and c3;
/// n2 runs c4 to c7. a1 (1 GPU) and b1 (4 GPUs) wait. Both are within quota with their job, so
/// a goes first by priority: a1 takes c7 (c holds 7 > 2) and is nominated onto n2. For b1, c
/// gives c6, c5, c4 and c3 (it holds 6, 5, 4, 3 before each, above its 2); that leaves n2 with
/// a1 and 3 free GPUs. a holds 2, its quota: over in no resource and under in none, so its jobs
/// are candidates, but may only be moved. a1 (newest) moves back before b1 (a comes first) onto
/// n1, the fuller node, into c3's room, and b1 fits on n2. With a1 missing from b1's victims,
/// as when the victims were gathered once for the whole action, b1 would wait.
#[test]
fn a_job_one_reclaim_attempt_placed_may_be_moved_by_the_next() {
    let p = policy(
        r#"
        priority-class "prod" value=1000 preemptible=#false
        queue "a" priority=2 { gpu quota=2; namespaces "a" }
        queue "b" priority=1 { gpu quota=4; namespaces "b" }
        queue "c" priority=1 { gpu quota=2; namespaces "c" }
        "#,
    );
    let at = |p: Pod, n: &str, t: Time| running(created(p, t), n, t);
    let prod = |p: Pod| Pod {
        priority_class: Some("prod".into()),
        ..p
    };
    let s = Snapshot {
        topologies: Vec::new(),
        dra: Default::default(),
        numa_ignore: Default::default(),
        priority_classes: Default::default(),
        nodes: vec![node("n1", 4), node("n2", 4)],
        pods: vec![
            at(pod("a", "a0", 1), "n1", 0),
            at(prod(pod("c", "c1", 1)), "n1", 1),
            at(prod(pod("c", "c2", 1)), "n1", 2),
            at(pod("c", "c3", 1), "n1", 3),
            at(pod("c", "c4", 1), "n2", 4),
            at(pod("c", "c5", 1), "n2", 5),
            at(pod("c", "c6", 1), "n2", 6),
            at(pod("c", "c7", 1), "n2", 7),
            created(pod("a", "a1", 1), 100),
            created(pod("b", "b1", 4), 101),
        ],
        groups: vec![],
    };
    let r = cycle(&p, &s, 3600);
    assert_eq!(gpu_fair_shares(&r), vec![2000, 4000, 2000]);
    assert_eq!(
        reclaimed(&r),
        vec!["c/c7", "c/c6", "c/c5", "c/c4", "c/c3"],
        "{:#?}",
        r.decisions
    );
    assert_eq!(
        nominated(&r),
        vec![
            ("a/a1".to_string(), "n1".to_string()),
            ("b/b1".to_string(), "n2".to_string())
        ]
    );
    assert_eq!(binds(&r), Vec::<(String, String)>::new());
}

/// A gang moved by reclaim that is stale is evicted by stale-gang eviction all the same: KAI
/// evicts every active allocated pod of a stale job, `Pipelined` ones among them
/// (`stalegangeviction.go: handleStaleJob`, `pod_status.go: activeAllocatedStatuses`), and a
/// moved pod is `Pipelined` where it goes.
///
/// Two 2-GPU nodes, n1 (pool a) and n2 (pool b). A (quota 0, weight 0) runs gang g on n1: two
/// 1-GPU pods of a PodGroup whose minimum is 3, marked stale at 130. R (quota 2) wants r1, 2
/// GPUs in pool a. Fair shares: R 2, A 0 (no weight for the rest), so g is R's victim. KAI
/// places a victim job again without its gang minimum (`GetTasksToAllocate` takes the tasks
/// there are; `allocateTasksOnNodeSet` checks none), so both pods move to n2, and r1 is
/// nominated on n1. Then g, still 2 pods of 3, has been stale for 3,470 s, well past the 60 s
/// grace period: both pods are evicted for it, from n1 where they ran, and go nowhere.
#[test]
fn a_stale_gang_moved_by_reclaim_is_evicted_as_stale() {
    let p = policy(
        r#"
        queue "a" { gpu quota=0 weight=0; namespaces "a" }
        queue "r" { gpu quota=2; namespaces "r" }
        "#,
    );
    let pool = |name: &str, value: &str| {
        let mut n = node(name, 2);
        n.labels.insert("pool".into(), value.into());
        n
    };
    let (mut pods, group) = gang("a", "g", 2, 1, 3);
    pods[0] = running(pods[0].clone(), "n1", 0);
    pods[1] = running(pods[1].clone(), "n1", 0);
    let mut r1 = created(pod("r", "r1", 2), 10);
    r1.constraints
        .node_selector
        .insert("pool".into(), "a".into());
    pods.push(r1);
    let s = Snapshot {
        topologies: Vec::new(),
        dra: Default::default(),
        numa_ignore: Default::default(),
        priority_classes: Default::default(),
        nodes: vec![pool("n1", "a"), pool("n2", "b")],
        pods,
        groups: vec![PodGroup {
            stale_since: Some(130),
            ..group
        }],
    };
    let r = cycle(&p, &s, 3600);
    assert_eq!(gpu_fair_shares(&r), vec![0, 2000]);
    let stale = EvictReason::StaleGang {
        running: 2,
        min_member: 3,
        for_seconds: 3470,
    };
    let evict = |pod: &str| Decision::Evict {
        pod: pod.into(),
        node: "n1".into(),
        reason: stale.clone(),
    };
    let nominate = Decision::Nominate {
        pod: "r/r1".into(),
        node: "n1".into(),
    };
    // Stale-gang eviction runs after reclaim: its Evicts follow r1's nomination.
    assert_eq!(
        r.decisions,
        vec![nominate, evict("a/g-0"), evict("a/g-1")],
        "{:#?}",
        r.decisions
    );
}

/// A stale gang that reclaim evicts whole keeps its stale mark: KAI counts its evicted pods
/// (`Releasing`) among the pods it uses (`GetNumActiveUsedTasks`), so it is still stale, with
/// nothing left to evict (`handleStaleJob` evicts only active allocated pods).
///
/// The cluster of the test above without n2: g's pods, evicted for r1, have nowhere to go. The
/// decisions: both evicted for R's reclaim, r1 nominated on n1; no mark changes.
#[test]
fn a_stale_gang_reclaimed_whole_keeps_its_stale_mark() {
    let p = policy(
        r#"
        queue "a" { gpu quota=0 weight=0; namespaces "a" }
        queue "r" { gpu quota=2; namespaces "r" }
        "#,
    );
    let (mut pods, group) = gang("a", "g", 2, 1, 3);
    pods[0] = running(pods[0].clone(), "n1", 0);
    pods[1] = running(pods[1].clone(), "n1", 0);
    pods.push(created(pod("r", "r1", 2), 10));
    let s = Snapshot {
        topologies: Vec::new(),
        dra: Default::default(),
        numa_ignore: Default::default(),
        priority_classes: Default::default(),
        nodes: vec![node("n1", 2)],
        pods,
        groups: vec![PodGroup {
            stale_since: Some(130),
            ..group
        }],
    };
    let r = cycle(&p, &s, 3600);
    assert_eq!(victims(&r), vec!["a/g-0", "a/g-1"]);
    assert!(
        evicted(&r)
            .iter()
            .all(|(_, why)| matches!(why, EvictReason::Reclaim { .. })),
        "{:#?}",
        r.decisions
    );
    assert_eq!(nominated(&r), vec![("r/r1".to_string(), "n1".to_string())]);
    assert!(r.stale_marks.is_empty(), "{:?}", r.stale_marks);
}

/// An attempt is skipped as futile only when it would take exactly the units its candidates'
/// order offers (`futile.rs`): where its side may keep one of them, the attempt leaves that
/// order and may find room elsewhere. Here the first 256 units are all P's, and the gang fits
/// only on B's node.
///
/// 300 one-GPU nodes (32 cores) each run one 1-GPU job of `a` (under `p`, priority 1, quota 0);
/// one 8-GPU node (64 cores) runs two 4-GPU, 32-core jobs of `b` (under `q`, priority 5, quota
/// 0, limit 3). Under `t` (priority 5, GPU quota 7): `r1` waits with j1 (1 GPU, 40 cores: only
/// B's node has the cores) and `r2` with j2 (8 GPUs). 308 GPUs; requests p 300, t 9, q 8. After
/// the quotas (t 7) the rest goes by weight, each queue capped at its request and limit: t gets
/// its 9, q its limit of 3, and p the other 296. So p is 4 above its share, q 5 above its own.
///
/// j1 goes first: r1 with j1 stays within its quota of 1, r2 with j2 does not. The victim order
/// offers p's units first (its priority is below q's), and with t within its quota with j1, p's
/// units pass while p is above its quota of 0: the order offers 256 of p's units, none of which
/// frees B's node. j1 is futile and fails. j2 asks 8 > 7: t is not within its quota with it, so
/// a side gives a unit only while above its share. After 4 units p holds its 296 and may keep
/// the fifth; with 4 GPUs free it may not even move for 8, so the attempt leaves p out and takes
/// b's two jobs, the newest first (q holds 8, then 4, both above its share of 3). j2 is
/// nominated onto B's node, and the 4 units of p it does not need stay.
#[test]
fn an_attempt_whose_side_may_keep_a_unit_is_not_skipped_as_futile() {
    let p = policy(
        r#"
        queue "p" priority=1 { gpu quota=0 weight=100; queue "a" { gpu; namespaces "a" } }
        queue "t" priority=5 {
            gpu quota=7 weight=100
            queue "r1" { gpu quota=1; namespaces "r1" }
            queue "r2" { gpu quota=6; namespaces "r2" }
        }
        queue "q" priority=5 { gpu quota=0 limit=3; queue "b" { gpu; namespaces "b" } }
        "#,
    );
    let small = |name: String| {
        let mut n = node(&name, 1);
        n.allocatable.cpu = 32_000;
        n
    };
    let mut nodes: Vec<_> = (0..300).map(|i| small(format!("an{i:03}"))).collect();
    nodes.push(node("bn", 8));
    let mut pods: Vec<Pod> = (0..300)
        .map(|i| {
            running(
                created(pod("a", &format!("a{i:03}"), 1), i),
                &format!("an{i:03}"),
                i,
            )
        })
        .collect();
    for i in 0..2 {
        let mut b = running(created(pod("b", &format!("b{i}"), 4), i), "bn", i);
        b.request.cpu = 32_000;
        pods.push(b);
    }
    let mut j1 = created(pod("r1", "j1", 1), 500);
    j1.request.cpu = 40_000;
    let mut j2 = created(pod("r2", "j2", 8), 600);
    j2.request.cpu = 8_000;
    pods.extend([j1, j2]);
    let s = Snapshot {
        nodes,
        pods,
        ..Default::default()
    };
    let r = cycle(&p, &s, 3600);
    let fair = |name: &str| {
        let q = p.queues.iter().position(|q| q.name == name).unwrap();
        r.shares.queues[q].gpu.fair_share
    };
    assert_eq!(fair("t"), 9000);
    assert_eq!([fair("p"), fair("q")], [296_000, 3000]);
    assert_eq!(victims(&r), vec!["b/b1", "b/b0"], "{:#?}", r.decisions);
    assert_eq!(nominated(&r), vec![("r2/j2".to_string(), "bn".to_string())]);
}
