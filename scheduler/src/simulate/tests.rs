use super::*;
use crate::cluster::{Node, Pod};
use crate::decision::Reason;

fn pod(name: &str, node: Option<&str>) -> Pod {
    Pod {
        namespace: "ns".into(),
        name: name.into(),
        group: None,
        queue: None,
        priority_class: None,
        request: Amounts {
            gpu: 1000,
            cpu: 0,
            memory: 0,
        },
        fractional: false,
        node: node.map(str::to_string),
        created: 0,
        started: node.map(|_| 0),
        termination_grace_seconds: 30,
        terminating: false,
        deletion_deadline: None,
        legacy_mig: false,
        ..Default::default()
    }
}

fn node(name: &str) -> Node {
    Node {
        name: name.into(),
        labels: Default::default(),
        allocatable: Amounts {
            gpu: 8000,
            cpu: 64000,
            memory: 1 << 40,
        },
        unschedulable: false,
        ..Default::default()
    }
}

#[test]
fn decisions_change_the_snapshot() {
    let mut snapshot = Snapshot {
        topologies: Vec::new(),
        dra: Default::default(),
        numa_ignore: Default::default(),
        priority_classes: Default::default(),
        nodes: vec![node("a"), node("b")],
        pods: vec![
            pod("new", None),
            pod("victim", Some("a")),
            Pod {
                fractional: true,
                labels: [("runai-gpu-group", "g"), ("app", "notebook")]
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .into(),
                ..pod("moved", Some("a"))
            },
            pod("waiting", None),
        ],
        groups: vec![],
    };
    let decisions = [
        Decision::Evict {
            pod: "ns/victim".into(),
            node: "a".into(),
            reason: EvictReason::Preempt {
                for_job: "ns/waiting".into(),
                priorities: (100, 500),
            },
        },
        Decision::Evict {
            pod: "ns/moved".into(),
            node: "a".into(),
            reason: EvictReason::Consolidate {
                for_job: "ns/new".into(),
                to_node: "b".into(),
            },
        },
        Decision::Bind {
            pod: "ns/new".into(),
            node: "a".into(),
        },
        Decision::Nominate {
            pod: "ns/waiting".into(),
            node: "a".into(),
        },
    ];
    let (mut evicted, mut nominated) = (BTreeSet::new(), BTreeMap::new());
    assert!(apply(
        &mut snapshot,
        (&decisions, &[], &[]),
        120,
        &mut evicted,
        &mut nominated
    ));
    let by_name: BTreeMap<&str, &Pod> =
        snapshot.pods.iter().map(|p| (p.name.as_str(), p)).collect();
    assert!(!by_name.contains_key("victim"));
    assert_eq!(by_name["moved"].node.as_deref(), Some("b"));
    assert_eq!(by_name["moved"].started, Some(120));
    // A moved shared pod shares whatever device it gets on its new node: its old one is no more.
    assert!(by_name["moved"].gpu_groups().is_empty());
    assert_eq!(by_name["moved"].labels.len(), 1);
    assert_eq!(by_name["new"].node.as_deref(), Some("a"));
    assert_eq!(by_name["new"].started, Some(120));
    assert_eq!(by_name["waiting"].node, None);
    let pods = states(&snapshot, &evicted, &nominated);
    assert_eq!(pods["ns/victim"].status, Status::Evicted);
    assert_eq!(pods["ns/waiting"].nominated.as_deref(), Some("a"));
    assert_eq!(pods["ns/waiting"].status, Status::Pending);
    assert_eq!(pods["ns/moved"].status, Status::Bound);

    // Only pending reasons: nothing changes.
    let pending = [Decision::Pending {
        job: "ns/waiting".into(),
        pods: vec!["ns/waiting".into()],
        reason: Reason::NoNodeFits {
            nodes: 1,
            found: Vec::new(),
        },
    }];
    assert!(!apply(
        &mut snapshot,
        (&pending, &[], &[]),
        180,
        &mut evicted,
        &mut nominated
    ));
}

#[test]
fn json_rows_one_per_pod() {
    let rows = decision_rows(&[
        Decision::Nominate {
            pod: "ns/a".into(),
            node: "n".into(),
        },
        Decision::Pending {
            job: "ns/g".into(),
            pods: vec!["ns/a".into(), "ns/b".into()],
            reason: Reason::GangIncomplete {
                pods: 2,
                min_member: 3,
            },
        },
    ]);
    assert_eq!(
        Value::Array(rows),
        json!([
            {"action": "pending", "pod": "ns/a", "node": "n", "reason": NOMINATED},
            {"action": "pending", "pod": "ns/b", "node": null,
             "reason": "gang incomplete: 2 pods exist, minMember is 3"},
        ])
    );
}

#[test]
fn seconds_read_like_durations() {
    assert_eq!(format_seconds(0), "0s");
    assert_eq!(format_seconds(90), "1m30s");
    assert_eq!(format_seconds(3600), "1h");
    assert_eq!(format_seconds(3661), "1h1m1s");
}
