//! Cluster objects into the snapshot: the same reading as a cluster file, one bad object never
//! stopping the rest, and accepted calls laid over the caches until the caches show them.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, Pod};
use kai_scheduler::cluster::Amounts;
use kai_scheduler::ingest::Options;
use kai_scheduler_kube::calls::{self, Call};
use kai_scheduler_kube::client::{Outcome, Sent};
use kai_scheduler_kube::crd::PodGroup;
use kai_scheduler_kube::snapshot::{Assumed, Objects, Read, read};
use serde_json::json;

fn options() -> Options {
    Options {
        queue_label: "kai.scheduler/queue".into(),
        scheduler_name: Some("kai-scheduler".into()),
        origin: None,
        complete_owner_kinds: Vec::new(),
    }
}

fn node(name: &str, gpus: u32) -> Arc<Node> {
    Arc::new(
        serde_json::from_value(json!({
            "metadata": { "name": name, "labels": { "zone": "a" } },
            "status": { "allocatable": { "cpu": "32", "memory": "256Gi", "nvidia.com/gpu": gpus.to_string() } },
        }))
        .unwrap(),
    )
}

fn pod(name: &str, node: Option<&str>, scheduler: &str, gpu: &str) -> Arc<Pod> {
    Arc::new(
        serde_json::from_value(json!({
            "metadata": {
                "name": name,
                "namespace": "team-a",
                "labels": { "kai.scheduler/queue": "a" },
                "annotations": { "pod-group-name": "job" },
                "creationTimestamp": "2026-05-01T12:00:00Z",
            },
            "spec": {
                "schedulerName": scheduler,
                "nodeName": node,
                "containers": [{ "name": "c", "resources": { "limits": { "nvidia.com/gpu": gpu } } }],
            },
        }))
        .unwrap(),
    )
}

fn group() -> Arc<PodGroup> {
    Arc::new(
        serde_json::from_value(json!({
            "apiVersion": "scheduling.run.ai/v2alpha2",
            "kind": "PodGroup",
            "metadata": { "name": "job", "namespace": "team-a", "creationTimestamp": "2026-05-01T11:59:00Z" },
            "spec": { "minMember": 2, "queue": "a" },
        }))
        .unwrap(),
    )
}

/// A KAI Topology as the watch cache holds it: untyped, with its type set.
fn topology() -> Arc<kube::api::DynamicObject> {
    Arc::new(
        serde_json::from_value(json!({
            "apiVersion": "kai.scheduler/v1alpha1",
            "kind": "Topology",
            "metadata": { "name": "cluster-topology" },
            "spec": { "levels": [{ "nodeLabel": "zone" }, { "nodeLabel": "rack" }] },
        }))
        .unwrap(),
    )
}

#[test]
fn topologies_reach_the_snapshot() {
    let objects = Objects {
        nodes: vec![node("n1", 8)],
        topologies: vec![topology()],
        ..Objects::default()
    };
    let Read {
        snapshot, problems, ..
    } = read(&objects, &options());
    assert!(problems.is_empty(), "{problems:?}");
    assert_eq!(snapshot.topologies.len(), 1);
    assert_eq!(snapshot.topologies[0].name, "cluster-topology");
    assert_eq!(snapshot.topologies[0].levels, ["zone", "rack"]);
}

/// 2026-05-01T12:00:00Z in seconds since the Unix epoch.
const NOON: u64 = 1_777_636_800;

#[test]
fn objects_read_as_a_cluster_file_reads_them_on_the_unix_clock() {
    let objects = Objects {
        nodes: vec![node("n1", 8)],
        pods: vec![
            pod("running", Some("n1"), "kai-scheduler", "2"),
            pod("waiting", None, "kai-scheduler", "4"),
        ],
        groups: vec![group()],
        ..Objects::default()
    };
    let Read {
        snapshot,
        problems,
        notes,
        ..
    } = read(&objects, &options());
    assert!(
        problems.is_empty() && notes.is_empty(),
        "{problems:?} {notes:?}"
    );
    assert_eq!(snapshot.nodes[0].name, "n1");
    assert_eq!(snapshot.nodes[0].allocatable.gpu, 8000);
    assert_eq!(snapshot.nodes[0].labels["zone"], "a");
    let keys: Vec<(String, Option<String>, i64)> = snapshot
        .pods
        .iter()
        .map(|p| (p.key(), p.node.clone(), p.request.gpu))
        .collect();
    assert_eq!(
        keys,
        [
            ("team-a/running".into(), Some("n1".into()), 2000),
            ("team-a/waiting".into(), None, 4000),
        ]
    );
    assert_eq!(snapshot.pods[1].queue.as_deref(), Some("a"));
    assert_eq!(snapshot.pods[1].group.as_deref(), Some("job"));
    assert_eq!(snapshot.pods[1].created, NOON);
    assert_eq!(snapshot.groups[0].min_member, 2);
    assert_eq!(snapshot.groups[0].created, NOON - 60);
}

#[test]
fn other_schedulers_pods_hold_capacity_but_are_never_ours_to_place() {
    let objects = Objects {
        nodes: vec![node("n1", 8)],
        pods: vec![
            pod("theirs-running", Some("n1"), "default-scheduler", "2"),
            pod("theirs-waiting", None, "default-scheduler", "2"),
        ],
        groups: vec![],
        ..Objects::default()
    };
    let read = read(&objects, &options());
    let keys: Vec<String> = read.snapshot.pods.iter().map(|p| p.key()).collect();
    assert_eq!(keys, ["team-a/theirs-running"]);
    assert_eq!(read.notes.len(), 1, "{:?}", read.notes);
    assert!(read.notes[0].contains("another scheduler (default-scheduler"));
}

// Since main's ingest skips an object it cannot read with a note (instead of refusing the whole
// file), a bad pod is named in `notes`, not `problems`, and a bad bound pod no longer keeps new
// pods off its node: these two tests were rewritten for that at the merge (the node-blocking in
// `snapshot::read` only runs when ingest refuses an object).
#[test]
fn pending_pods_that_cannot_be_read_are_left_out_and_named() {
    let objects = Objects {
        nodes: vec![node("n1", 8)],
        pods: vec![
            pod("bad", None, "kai-scheduler", "half"),
            pod("good", None, "kai-scheduler", "1"),
            pod("worse", None, "kai-scheduler", "0.5"),
        ],
        groups: vec![],
        ..Objects::default()
    };
    let read = read(&objects, &options());
    let keys: Vec<String> = read.snapshot.pods.iter().map(|p| p.key()).collect();
    assert_eq!(keys, ["team-a/good"]);
    for name in ["team-a/bad", "team-a/worse"] {
        assert!(
            read.notes.iter().any(|n| n.contains(name)),
            "{:?}",
            read.notes
        );
    }
}

#[test]
fn a_bound_pod_that_cannot_be_read_is_named() {
    let objects = Objects {
        nodes: vec![node("n1", 8), node("n2", 8)],
        pods: vec![pod("bad", Some("n1"), "kai-scheduler", "half")],
        groups: vec![],
        ..Objects::default()
    };
    let read = read(&objects, &options());
    assert!(read.snapshot.pods.is_empty());
    assert!(
        read.notes.iter().any(|n| n.contains("team-a/bad")),
        "{:?}",
        read.notes
    );
}

fn sent(call: Call, outcome: Outcome) -> Sent {
    Sent { call, outcome }
}

#[test]
fn an_accepted_bind_is_assumed_until_the_cache_shows_it() {
    let cache = Objects {
        nodes: vec![node("n1", 8)],
        pods: vec![pod("p", None, "kai-scheduler", "1")],
        groups: vec![],
        ..Objects::default()
    };
    let mut assumed = Assumed::default();
    assumed.record(&[sent(calls::bind("team-a/p", "n1"), Outcome::Done)]);

    let mut next = read(&cache, &options()).snapshot;
    assumed.overlay(&mut next, NOON + 5);
    assert_eq!(next.pods[0].node.as_deref(), Some("n1"));
    assert_eq!(next.pods[0].started, Some(NOON + 5));

    // The watch delivers the bound pod: nothing is laid over it any more.
    let bound = Objects {
        pods: vec![pod("p", Some("n1"), "kai-scheduler", "1")],
        ..cache.clone()
    };
    let mut later = read(&bound, &options()).snapshot;
    assumed.overlay(&mut later, NOON + 6);
    assert_eq!(assumed, Assumed::default());
    // So if the pod were unbound again (deleted and recreated), it is pending, not assumed.
    let mut again = read(&cache, &options()).snapshot;
    assumed.overlay(&mut again, NOON + 7);
    assert_eq!(again.pods[0].node, None);
}

#[test]
fn a_failed_bind_is_not_assumed_so_the_next_snapshot_rolls_it_back() {
    let cache = Objects {
        nodes: vec![node("n1", 8)],
        pods: vec![pod("p", None, "kai-scheduler", "1")],
        groups: vec![],
        ..Objects::default()
    };
    let mut assumed = Assumed::default();
    assumed.record(&[
        sent(
            calls::bind("team-a/p", "n1"),
            Outcome::Conflict("already assigned".into()),
        ),
        sent(
            calls::bind("team-a/gone", "n1"),
            Outcome::Gone("not found".into()),
        ),
    ]);
    assert_eq!(assumed, Assumed::default());
    let mut next = read(&cache, &options()).snapshot;
    assumed.overlay(&mut next, NOON);
    assert_eq!(next.pods[0].node, None);
}

#[test]
fn an_accepted_eviction_is_assumed_terminating_and_forgotten_when_the_pod_is_gone() {
    let cache = Objects {
        nodes: vec![node("n1", 8)],
        pods: vec![pod("victim", Some("n1"), "kai-scheduler", "2")],
        groups: vec![],
        ..Objects::default()
    };
    let mut assumed = Assumed::default();
    assumed.record(&[sent(calls::evict("team-a/victim", 30), Outcome::Done)]);
    let mut next = read(&cache, &options()).snapshot;
    assumed.overlay(&mut next, NOON);
    assert!(next.pods[0].terminating);
    assert_eq!(
        next.pods[0].request,
        Amounts {
            gpu: 2000,
            ..Amounts::default()
        }
    );

    let mut empty = read(
        &Objects {
            pods: vec![],
            ..cache
        },
        &options(),
    )
    .snapshot;
    assumed.overlay(&mut empty, NOON + 30);
    assert_eq!(assumed, Assumed::default());
}

/// An owner as the owner watches keep it: its type set, metadata, and the spec.
fn owner(
    kind: &str,
    api_version: &str,
    name: &str,
    parent: Option<(&str, &str)>,
    spec: serde_json::Value,
) -> Arc<kube::api::DynamicObject> {
    let refs: Vec<_> = parent
        .map(|(kind, name)| json!({ "apiVersion": "x/v1", "kind": kind, "name": name, "uid": format!("u-{name}"), "controller": true }))
        .into_iter()
        .collect();
    Arc::new(
        serde_json::from_value(json!({
            "apiVersion": api_version, "kind": kind,
            "metadata": { "name": name, "namespace": "team-a", "ownerReferences": refs,
                          "labels": { "kai.scheduler/queue": "a" } },
            "spec": spec,
        }))
        .unwrap(),
    )
}

/// A pending pod of the JobSet `train`'s only Job, with the labels the JobSet controller sets.
fn jobset_pod(name: &str) -> Arc<Pod> {
    Arc::new(
        serde_json::from_value(json!({
            "metadata": {
                "name": name, "namespace": "team-a",
                "labels": { "jobset.sigs.k8s.io/replicatedjob-name": "workers", "jobset.sigs.k8s.io/job-index": "0" },
                "ownerReferences": [{ "apiVersion": "batch/v1", "kind": "Job", "name": "train-workers-0", "uid": "u-job", "controller": true }],
                "creationTimestamp": "2026-05-01T12:00:00Z",
            },
            "spec": {
                "schedulerName": "kai-scheduler",
                "containers": [{ "name": "c", "resources": { "limits": { "nvidia.com/gpu": "1" } } }],
            },
        }))
        .unwrap(),
    )
}

#[test]
fn owners_from_the_watches_group_a_jobsets_pods_and_a_missing_owner_holds_them() {
    // The whole chain: one group for the JobSet, its queue from the JobSet's label, and the
    // replica as a sub-group that needs both pods (parallelism 2).
    let whole = read(&jobset_cluster(), &options());
    assert_eq!(whole.problems, Vec::<String>::new());
    let s = &whole.snapshot;
    assert_eq!(s.pods.len(), 2);
    assert!(
        s.pods
            .iter()
            .all(|p| p.group.as_deref() == Some("pg-train") && p.queue.as_deref() == Some("a"))
    );
    assert_eq!(s.groups.len(), 1);
    let sub = &s.groups[0].sub_groups;
    assert!(
        sub.iter()
            .any(|g| g.name == "workers-replica-0" && g.min_member == Some(2)),
        "{sub:?}"
    );

    // The JobSet not listed yet: the pods wait rather than go as groups of one.
    let mut without_jobset = jobset_cluster();
    without_jobset
        .owners
        .retain(|o| o.types.as_ref().is_some_and(|t| t.kind != "JobSet"));
    let waiting = read(&without_jobset, &options());
    assert!(
        waiting.snapshot.pods.is_empty(),
        "{:?}",
        waiting.snapshot.pods
    );
    assert_eq!(
        waiting
            .notes
            .iter()
            .filter(|n| n.contains("its owner JobSet team-a/train is not read yet"))
            .count(),
        2,
        "{:?}",
        waiting.notes
    );
}

/// A cluster with the JobSet `train` (queue `a`), its Job and its two pending workers.
fn jobset_cluster() -> Objects {
    let mut jobset = owner(
        "JobSet",
        "jobset.x-k8s.io/v1alpha2",
        "train",
        None,
        json!({ "replicatedJobs": [{ "name": "workers", "replicas": 1,
                                     "template": { "spec": { "parallelism": 2, "completions": 2 } } }] }),
    );
    Arc::make_mut(&mut jobset).metadata.uid = Some("u-train".into());
    Objects {
        nodes: vec![node("n1", 8)],
        pods: vec![jobset_pod("w0"), jobset_pod("w1")],
        owners: vec![
            jobset,
            owner(
                "Job",
                "batch/v1",
                "train-workers-0",
                Some(("JobSet", "train")),
                json!({}),
            ),
        ],
        complete_owner_kinds: vec!["Job".into(), "JobSet".into()],
        ..Objects::default()
    }
}

fn creates(calls: &[Call]) -> Vec<(String, String, serde_json::Value)> {
    calls
        .iter()
        .filter_map(|c| match c {
            Call::CreatePodGroup {
                namespace,
                name,
                object,
            } => Some((namespace.clone(), name.clone(), object.clone())),
            _ => None,
        })
        .collect()
}

#[test]
fn a_workload_without_a_pod_group_gets_one_owned_by_its_top_owner_that_reads_back_the_same() {
    use kai_scheduler_kube::grouper;
    let cluster = jobset_cluster();
    let before = read(&cluster, &options());
    let made = creates(&grouper::plan(&before.snapshot, &|_| false));
    assert_eq!(made.len(), 1, "{made:?}");
    let (namespace, name, object) = &made[0];
    assert_eq!((namespace.as_str(), name.as_str()), ("team-a", "pg-train"));
    // Owned by the JobSet (the ref the Job holds), so it goes when the JobSet goes.
    assert_eq!(
        object["metadata"]["ownerReferences"],
        json!([{ "apiVersion": "x/v1", "kind": "JobSet", "name": "train", "uid": "u-train" }])
    );
    // The queue from the JobSet's label; the replica's two pods as its one sub-group's minimum.
    assert_eq!(object["spec"]["queue"], "a");
    assert_eq!(
        object["metadata"]["annotations"]["kai-policy/kind-priority-class"],
        "train"
    );

    // Read back: the pods join the object by its name and the cycle sees the same group.
    let mut with_object = cluster.clone();
    with_object
        .groups
        .push(Arc::new(serde_json::from_value(object.clone()).unwrap()));
    let after = read(&with_object, &options());
    assert_eq!(after.problems, Vec::<String>::new());
    // What may differ: the object has no owner link in the model, a creation time, and the
    // queue the group's pods name written into it (the cycle took the queue from them before).
    let strip = |g: &kai_scheduler::cluster::PodGroup| kai_scheduler::cluster::PodGroup {
        owner: None,
        created: 0,
        queue: None,
        ..g.clone()
    };
    assert_eq!(
        after.snapshot.groups.iter().map(strip).collect::<Vec<_>>(),
        before.snapshot.groups.iter().map(strip).collect::<Vec<_>>()
    );
    assert_eq!(after.snapshot.pods, before.snapshot.pods);
    // And nothing more is made.
    assert!(creates(&grouper::plan(&after.snapshot, &|_| false)).is_empty());
    // Nor while the object is made but not yet in the caches.
    assert!(creates(&grouper::plan(&before.snapshot, &|k| k == "team-a/pg-train")).is_empty());
}

#[test]
fn groups_of_one_and_groups_whose_owner_was_not_read_get_no_pod_group() {
    use kai_scheduler_kube::grouper;
    // A Deployment's pod (a group of its own), a bare pod, and a PyTorchJob's pod whose
    // PyTorchJob is not read (its size is a guess from the pods present).
    let with_owner = |name: &str, kind: &str, owner: &str| {
        let mut pod = (*jobset_pod(name)).clone();
        pod.metadata.labels = Some([("kai.scheduler/queue".to_string(), "a".to_string())].into());
        pod.metadata.owner_references = Some(vec![
            serde_json::from_value(json!({
                "apiVersion": "x/v1", "kind": kind, "name": owner, "uid": format!("u-{owner}"),
                "controller": true
            }))
            .unwrap(),
        ]);
        Arc::new(pod)
    };
    let mut bare = (*jobset_pod("bare")).clone();
    bare.metadata.owner_references = None;
    let cluster = Objects {
        nodes: vec![node("n1", 8)],
        pods: vec![
            with_owner("web-1", "ReplicaSet", "web-7d4"),
            Arc::new(bare),
            with_owner("trainer-0", "PyTorchJob", "trainer"),
        ],
        owners: vec![
            owner(
                "ReplicaSet",
                "apps/v1",
                "web-7d4",
                Some(("Deployment", "web")),
                json!({}),
            ),
            owner("Deployment", "apps/v1", "web", None, json!({})),
        ],
        complete_owner_kinds: vec!["ReplicaSet".into(), "Deployment".into()],
        ..Objects::default()
    };
    let read = read(&cluster, &options());
    assert_eq!(read.snapshot.pods.len(), 3, "{:?}", read.notes);
    assert!(creates(&grouper::plan(&read.snapshot, &|_| false)).is_empty());
}

#[test]
fn a_pod_group_that_cannot_be_read_holds_its_pending_pods_and_one_without_a_spec_reads() {
    use kai_scheduler_kube::caches::typed_group;
    let dynamic = |spec: Option<serde_json::Value>| -> kube::api::DynamicObject {
        let mut object = json!({
            "apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup",
            "metadata": { "name": "job", "namespace": "team-a" },
        });
        if let Some(spec) = spec {
            object["spec"] = spec;
        }
        serde_json::from_value(object).unwrap()
    };
    // No spec: accepted by KAI's CRD and ours, read with an empty spec as KAI's Go types do.
    let bare = typed_group(&dynamic(None)).unwrap();
    assert_eq!(bare.spec, Default::default());
    // A field of the wrong type cannot be read, and says why.
    let why = typed_group(&dynamic(Some(json!({ "minMember": "two" })))).unwrap_err();
    assert!(why.contains("invalid type"), "{why}");

    // Its pending pods wait (they would otherwise go one by one); its bound pod still counts.
    let read = read(
        &Objects {
            nodes: vec![node("n1", 8)],
            pods: vec![
                pod("running", Some("n1"), "kai-scheduler", "2"),
                pod("waiting", None, "kai-scheduler", "4"),
            ],
            unreadable_groups: vec![("team-a".into(), "job".into(), why.clone())],
            ..Objects::default()
        },
        &options(),
    );
    let names: Vec<&str> = read.snapshot.pods.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["running"]);
    assert_eq!(
        read.problems,
        [format!(
            "PodGroup team-a/job: cannot be read ({why}); its pending pods wait until it is fixed"
        )]
    );
}

#[test]
fn the_clusters_priority_classes_reach_the_snapshot() {
    let class: k8s_openapi::api::scheduling::v1::PriorityClass = serde_json::from_value(json!({
        "metadata": { "name": "tenant-critical", "resourceVersion": "412" },
        "value": 2000, "preemptionPolicy": "PreemptLowerPriority"
    }))
    .unwrap();
    let read = read(
        &Objects {
            nodes: vec![node("n1", 8)],
            priority_classes: vec![Arc::new(class)],
            ..Objects::default()
        },
        &options(),
    );
    assert_eq!(read.problems, Vec::<String>::new());
    assert_eq!(
        read.snapshot.priority_classes,
        [("tenant-critical".to_string(), 2000)].into()
    );
}

#[test]
fn a_pod_group_the_scheduler_made_follows_its_owners_new_size() {
    use kai_scheduler_kube::grouper;
    let cluster = jobset_cluster();
    let made = creates(&grouper::plan(
        &read(&cluster, &options()).snapshot,
        &|_| false,
    ));
    let object = made[0].2.clone();
    let mut with_object = cluster.clone();
    with_object
        .groups
        .push(Arc::new(serde_json::from_value(object.clone()).unwrap()));
    let specs: std::collections::BTreeMap<String, serde_json::Value> =
        [("team-a/pg-train".to_string(), object["spec"].clone())].into();

    // Unchanged owner: nothing to update.
    let same = read(&with_object, &options());
    assert_eq!(
        same.owner_groups.len(),
        1,
        "the pods joined the object by their owner"
    );
    assert!(grouper::updates(&same.owner_groups, &specs).is_empty());

    // The JobSet's replica now runs three pods at once: the sub-group's minimum follows; the
    // queue and everything else are left as they are.
    let jobset = with_object
        .owners
        .iter_mut()
        .find(|o| o.metadata.name.as_deref() == Some("train"))
        .unwrap();
    Arc::make_mut(jobset).data["spec"]["replicatedJobs"][0]["template"]["spec"]["parallelism"] =
        json!(3);
    let changed = read(&with_object, &options());
    let calls = grouper::updates(&changed.owner_groups, &specs);
    assert_eq!(calls.len(), 1, "{calls:?}");
    let Call::PodGroupSpec {
        namespace,
        name,
        patch,
    } = &calls[0]
    else {
        panic!("{calls:?}")
    };
    assert_eq!((namespace.as_str(), name.as_str()), ("team-a", "pg-train"));
    assert_eq!(
        patch,
        &json!({ "spec": { "subGroups": [
            { "name": "workers", "minSubGroup": 1 },
            { "name": "workers-replica-0", "parent": "workers", "minMember": 3 }
        ] } })
    );
    // A PodGroup someone else made is never touched.
    assert!(grouper::updates(&changed.owner_groups, &Default::default()).is_empty());
}

/// A DRA object as the watch cache holds it: untyped, with its type set.
fn dra(value: serde_json::Value) -> Arc<kube::api::DynamicObject> {
    Arc::new(serde_json::from_value(value).unwrap())
}

/// A pending pod using the claim `c` of namespace team-a by name.
fn claiming_pod() -> Arc<Pod> {
    let mut p = pod("p", None, "kai-scheduler", "0");
    let spec = Arc::make_mut(&mut p).spec.as_mut().unwrap();
    spec.resource_claims = Some(vec![k8s_openapi::api::core::v1::PodResourceClaim {
        name: "gpu".into(),
        resource_claim_name: Some("c".into()),
        ..Default::default()
    }]);
    p
}

fn dra_objects() -> Vec<Arc<kube::api::DynamicObject>> {
    vec![
        dra(json!({
            "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
            "metadata": { "name": "gpu.nvidia.com" }, "spec": {},
        })),
        dra(json!({
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": { "name": "n1-gpus" },
            "spec": { "driver": "gpu.nvidia.com", "nodeName": "n1", "pool": { "name": "n1", "generation": 1, "resourceSliceCount": 1 },
                      "devices": [{ "name": "gpu-0" }, { "name": "gpu-1" }] },
        })),
        dra(json!({
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": { "name": "c", "namespace": "team-a", "labels": { "kai.scheduler/queue": "a" } },
            "spec": { "devices": { "requests": [{ "name": "gpu", "exactly": { "deviceClassName": "gpu.nvidia.com" } }] } },
        })),
    ]
}

#[test]
fn dra_objects_reach_the_snapshot_and_count_as_gpus() {
    let objects = Objects {
        nodes: vec![node("n1", 0)],
        pods: vec![claiming_pod()],
        dra: dra_objects(),
        ..Objects::default()
    };
    let Read {
        snapshot, problems, ..
    } = read(&objects, &options());
    assert!(problems.is_empty(), "{problems:?}");
    assert_eq!(snapshot.dra.claims.len(), 1);
    assert_eq!(snapshot.dra.slices[0].devices.len(), 2);
    assert_eq!(snapshot.nodes[0].allocatable.gpu, 2000);
    assert_eq!(snapshot.pods[0].request.gpu, 1000);
}

#[test]
fn a_claim_written_for_an_accepted_bind_is_assumed_until_the_cache_shows_it() {
    use kai_scheduler::dra::{AllocatedDevice, Allocation};
    let cache = Objects {
        nodes: vec![node("n1", 0)],
        pods: vec![claiming_pod()],
        dra: dra_objects(),
        ..Objects::default()
    };
    let given = Allocation {
        node: Some("n1".into()),
        selector: Vec::new(),
        devices: vec![AllocatedDevice {
            request: "gpu".into(),
            driver: "gpu.nvidia.com".into(),
            pool: "n1".into(),
            device: "gpu-0".into(),
        }],
    };
    let mut bind = calls::bind("team-a/p", "n1");
    if let Call::Bind { claims, .. } = &mut bind {
        claims.push(calls::ClaimWrite {
            name: "c".into(),
            patch: json!({}),
            allocation: Some(given.clone()),
        });
    }
    let mut assumed = Assumed::default();
    assumed.record(&[sent(bind, Outcome::Done)]);
    let mut next = read(&cache, &options()).snapshot;
    assumed.overlay(&mut next, NOON + 5);
    // The next cycle sees the devices taken, not free for another claim.
    assert_eq!(next.dra.claims[0].allocation, Some(given.clone()));
    assert_eq!(next.dra.claims[0].reserved_for, ["p"]);
    // Once the watch shows the pod bound and the claim written, nothing is laid over them.
    let mut shown = dra_objects();
    shown[2] = dra(json!({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": { "name": "c", "namespace": "team-a", "labels": { "kai.scheduler/queue": "a" } },
        "spec": { "devices": { "requests": [{ "name": "gpu", "exactly": { "deviceClassName": "gpu.nvidia.com" } }] } },
        "status": { "allocation": { "devices": { "results": [{ "request": "gpu", "driver": "gpu.nvidia.com", "pool": "n1", "device": "gpu-0" }] } },
                    "reservedFor": [{ "resource": "pods", "name": "p", "uid": "u" }] },
    }));
    let mut bound = claiming_pod();
    Arc::make_mut(&mut bound).spec.as_mut().unwrap().node_name = Some("n1".into());
    let later_objects = Objects {
        pods: vec![bound],
        dra: shown,
        ..cache.clone()
    };
    let mut later = read(&later_objects, &options()).snapshot;
    assumed.overlay(&mut later, NOON + 6);
    assert_eq!(assumed, Assumed::default());
}
