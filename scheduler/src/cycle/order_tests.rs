//! The order allocate serves jobs in, as KAI's allocate action does it (queue order over the
//! tree, job order inside a leaf, one pod per turn once a job runs), one small cluster each.
//! Examples A1 and Q2 come from the KAI fidelity review, traced by hand through KAI's
//! `actions/allocate/allocate.go`, `queue_order.go` and the elastic plugin.

use super::tests::{binds, cycle, gang, node, pending_reason, pod, policy, running};
use super::*;
use crate::cluster::{Pod, PodGroup};
use crate::decision::{EvictReason, Reason};

fn created(p: Pod, at: Time) -> Pod {
    Pod { created: at, ..p }
}

fn bound_of(r: &CycleResult, prefix: &str) -> usize {
    binds(r)
        .iter()
        .filter(|(p, _)| p.starts_with(prefix))
        .count()
}

/// A1: once a job reaches its minimum, each further pod competes again, one per turn; a job
/// below its minimum goes before one at it.
///
/// One queue, 4 GPUs. Elastic E (minMember 1, four 1-GPU pods, older) and gang K (minMember 2,
/// two 1-GPU pods). E's first pod goes (both below their minimum, E older); then K, below its
/// minimum, beats E at its minimum and takes 2; then E takes the last GPU: E 2, K 2. (Taking
/// every pod of E at once would leave K's gang without room: E 4, K 0.)
#[test]
fn an_elastic_job_grows_one_pod_per_turn() {
    let p = policy(r#"queue "a" { gpu; namespaces "a" }"#);
    let (e, eg) = gang("a", "e", 4, 1, 1);
    let (k, kg) = gang("a", "k", 2, 1, 2);
    let s = Snapshot {
        topologies: Vec::new(),
        dra: Default::default(),
        numa_ignore: Default::default(),
        priority_classes: Default::default(),
        nodes: vec![node("n1", 4)],
        pods: e.into_iter().chain(k).collect(),
        groups: vec![
            PodGroup { created: 0, ..eg },
            PodGroup { created: 10, ..kg },
        ],
    };
    let r = cycle(&p, &s, 100);
    assert_eq!(
        (bound_of(&r, "a/e-"), bound_of(&r, "a/k-")),
        (2, 2),
        "{:#?}",
        r.decisions
    );
}

/// Q2: "within quota with the job" counts the job's gang minimum, not every pending pod.
///
/// 4 GPUs; A and B quota 2 each (fair shares 2 and 2). A's E has minMember 2 and four pods; B's
/// J needs all three of its pods. E's minimum keeps A within quota (0 + 2 <= 2), J's does not
/// (0 + 3 > 2): E goes first and takes 2. Then A with E's next pod is over quota like B; their
/// dominant shares with the job tie (3/2 = 3/2) and without it B's is smaller (0 < 1), so J
/// is tried and does not fit (3 > 2 free); E then takes the last two: E 4, J 0, as in KAI.
#[test]
fn within_quota_counts_the_gang_minimum() {
    let p = policy(
        r#"
        queue "a" { gpu quota=2; namespaces "a" }
        queue "b" { gpu quota=2; namespaces "b" }
        "#,
    );
    let (e, eg) = gang("a", "e", 4, 1, 2);
    let (j, jg) = gang("b", "j", 3, 1, 3);
    let s = Snapshot {
        topologies: Vec::new(),
        dra: Default::default(),
        numa_ignore: Default::default(),
        priority_classes: Default::default(),
        nodes: vec![node("n1", 4)],
        pods: e.into_iter().chain(j).collect(),
        groups: vec![
            PodGroup { created: 10, ..eg },
            PodGroup { created: 0, ..jg },
        ],
    };
    let r = cycle(&p, &s, 100);
    assert_eq!(
        (bound_of(&r, "a/e-"), bound_of(&r, "b/j-")),
        (4, 0),
        "{:#?}",
        r.decisions
    );
}

/// Across departments, the queue order compares the departments: D2, within its quota with the
/// job, goes before D1, over its quota with the job, even though D1's team has the older job.
///
/// 5 GPUs, 1 free. D1 (quota 4) runs 4 GPUs in T1a; T1b (in D1) and T2 (in D2, quota 4) each
/// want 1. Fair shares: D1 min(4, 5) = 4, D2 min(4, 1) = 1.
#[test]
fn departments_are_ordered_before_their_teams() {
    let p = policy(
        r#"
        queue "d1" {
            gpu quota=4
            queue "t1a" { gpu quota=4; namespaces "t1a" }
            queue "t1b" { gpu; namespaces "t1b" }
        }
        queue "d2" { gpu quota=4; queue "t2" { gpu quota=4; namespaces "t2" } }
        "#,
    );
    let s = Snapshot {
        topologies: Vec::new(),
        dra: Default::default(),
        numa_ignore: Default::default(),
        priority_classes: Default::default(),
        nodes: vec![node("n1", 4), node("n2", 1)],
        pods: vec![
            running(pod("t1a", "run", 4), "n1", 0),
            pod("t1b", "old", 1),
            created(pod("t2", "new", 1), 50),
        ],
        groups: vec![],
    };
    let r = cycle(&p, &s, 100);
    assert_eq!(binds(&r), vec![("t2/new".to_string(), "n2".to_string())]);
    assert!(matches!(
        pending_reason(&r, "t1b/old"),
        Reason::NoNodeFits { .. }
    ));
}

/// Preempt inside a team whose department is at its limit: the higher-priority job evicts the
/// team's own lower-priority work, and the department's limit is judged with the victim gone.
#[test]
fn preempt_inside_a_department_at_its_limit() {
    let p = policy(
        r#"
        priority-class "train" value=50
        priority-class "urgent" value=500 preemptible=#true
        queue "dept" {
            gpu quota=4 limit=4
            queue "team" { gpu quota=4; namespaces "team"; default-priority-class "train" }
        }
        "#,
    );
    let s = Snapshot {
        topologies: Vec::new(),
        dra: Default::default(),
        numa_ignore: Default::default(),
        priority_classes: Default::default(),
        nodes: vec![node("n1", 8)],
        pods: vec![
            running(pod("team", "train", 4), "n1", 0),
            created(
                Pod {
                    priority_class: Some("urgent".into()),
                    ..pod("team", "urgent", 4)
                },
                50,
            ),
        ],
        groups: vec![],
    };
    let r = cycle(&p, &s, 3600);
    assert_eq!(
        super::tests::evicted(&r),
        vec![(
            "team/train".to_string(),
            EvictReason::Preempt {
                for_job: "team/urgent".into(),
                priorities: (50, 500)
            }
        )]
    );
}
