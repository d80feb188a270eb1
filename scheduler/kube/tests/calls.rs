//! Decisions into API calls: the exact bodies the backend sends, and when it sends them. Every
//! expected body is written out from the Kubernetes API (Binding, policy/v1 Eviction, a strategic
//! merge patch of a pod condition, core/v1 Event) and KAI's PodGroup status
//! (`schedulingConditions`, `podgroup_types.go`).

use std::collections::BTreeMap;

use k8s_openapi::jiff::Timestamp;
use kai_policy_compiler::quantity::ResourceKind;
use kai_scheduler::cluster::{Amounts, Pod, Snapshot};
use kai_scheduler::decision::{Decision, EvictReason, Reason};
use kai_scheduler_kube::calls::{
    self, Call, Context, EVENTS_PER_CYCLE, QueueNumbers, Reported, group_condition_patch,
};
use kai_scheduler_kube::client::{Outcome, Sent};
use kai_scheduler_kube::crd::{PodGroupStatus, SchedulingCondition};
use serde_json::{Value, json};

fn now() -> Timestamp {
    "2026-05-01T12:00:00Z".parse().unwrap()
}

fn pod(key: &str, group: Option<&str>, grace: u64) -> Pod {
    let (namespace, name) = key.split_once('/').unwrap();
    Pod {
        namespace: namespace.into(),
        name: name.into(),
        group: group.map(str::to_string),
        termination_grace_seconds: grace,
        ..Pod::default()
    }
}

struct World {
    snapshot: Snapshot,
    groups: BTreeMap<String, PodGroupStatus>,
}

impl World {
    fn new(pods: Vec<Pod>, groups: &[&str]) -> World {
        World {
            snapshot: Snapshot {
                pods,
                ..Snapshot::default()
            },
            groups: groups
                .iter()
                .map(|g| (g.to_string(), PodGroupStatus::default()))
                .collect(),
        }
    }

    fn plan(&self, decisions: &[Decision], reported: &mut Reported) -> Vec<Call> {
        let cx = Context {
            snapshot: &self.snapshot,
            group_status: &self.groups,
            scheduler_name: "kai-scheduler",
            instance: "kai-scheduler-0",
            now: now(),
        };
        calls::plan(decisions, &cx, reported)
    }
}

fn body(call: &Call) -> Value {
    match call {
        Call::Bind { binding, .. } => serde_json::to_value(binding).unwrap(),
        Call::Evict { eviction, .. } => serde_json::to_value(eviction).unwrap(),
        Call::Event { event, .. } => serde_json::to_value(event).unwrap(),
        Call::PodCondition { patch, .. }
        | Call::PodGroupStatus { patch, .. }
        | Call::PodGroupAnnotation { patch, .. }
        | Call::PodGroupSpec { patch, .. }
        | Call::QueueStatus { patch, .. } => patch.clone(),
        Call::Apply { object, .. } | Call::CreatePodGroup { object, .. } => object.clone(),
        Call::Prune { .. } => Value::Null,
    }
}

fn kinds(calls: &[Call]) -> Vec<String> {
    calls.iter().map(Call::describe).collect()
}

fn gang_incomplete() -> Reason {
    Reason::GangIncomplete {
        pods: 1,
        min_member: 2,
    }
}

/// A pod without a group (its own job) pending for an incomplete gang.
fn alone_waiting(pod: &str) -> Decision {
    Decision::Pending {
        job: pod.into(),
        pods: vec![pod.into()],
        reason: gang_incomplete(),
    }
}

#[test]
fn a_bind_is_a_binding_of_the_pod_to_its_node() {
    let world = World::new(vec![pod("team-a/p0", None, 30)], &[]);
    let calls = world.plan(
        &[Decision::Bind {
            pod: "team-a/p0".into(),
            node: "node-1".into(),
        }],
        &mut Reported::default(),
    );
    assert_eq!(
        kinds(&calls),
        [
            "bind team-a/p0 to node-1",
            "record event Scheduled on team-a/p0"
        ]
    );
    assert_eq!(
        body(&calls[0]),
        json!({
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": { "name": "p0", "namespace": "team-a" },
            "target": { "apiVersion": "v1", "kind": "Node", "name": "node-1" },
        })
    );
}

#[test]
fn an_eviction_goes_through_the_eviction_api_with_the_pods_grace_period() {
    let world = World::new(
        vec![pod("team-b/old", Some("job-b"), 120)],
        &["team-b/job-b"],
    );
    let calls = world.plan(
        &[Decision::Evict {
            pod: "team-b/old".into(),
            node: "node-2".into(),
            reason: EvictReason::Reclaim {
                for_job: "team-a/train".into(),
                by_queue: "a".into(),
                from_queue: "b".into(),
            },
        }],
        &mut Reported::default(),
    );
    assert_eq!(
        body(&calls[0]),
        json!({
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": { "name": "old", "namespace": "team-b" },
            "deleteOptions": { "gracePeriodSeconds": 120 },
        })
    );
    // KAI records the eviction on the victim's PodGroup (status_updater's `Evicted`).
    let event = body(&calls[1]);
    assert_eq!(event["involvedObject"]["kind"], "PodGroup");
    assert_eq!(event["involvedObject"]["name"], "job-b");
    assert_eq!(event["reason"], "Evict");
    assert_eq!(
        event["message"],
        "Evicted team-b/old from node-2: reclaimed by queue a (below its fair share) from queue b for team-a/train"
    );
}

#[test]
fn a_pending_pod_is_told_why_once_until_the_reason_changes() {
    let world = World::new(vec![pod("team-a/w0", Some("job"), 30)], &["team-a/job"]);
    let pending = |reason: Reason| Decision::Pending {
        job: "team-a/job".into(),
        pods: vec!["team-a/w0".into()],
        reason,
    };
    let mut reported = Reported::default();
    let first = world.plan(&[pending(gang_incomplete())], &mut reported);
    assert_eq!(
        kinds(&first),
        [
            "set the PodScheduled condition of team-a/w0",
            "update the status of PodGroup team-a/job",
            "record event Unschedulable on team-a/w0",
        ]
    );
    let message = "gang incomplete: 1 pod exists, minMember is 2";
    assert_eq!(
        body(&first[0]),
        json!({ "status": { "conditions": [{
            "type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": message,
        }]}})
    );
    let event = body(&first[2]);
    assert_eq!(
        (
            &event["type"],
            &event["reason"],
            &event["message"],
            &event["involvedObject"]
        ),
        (
            &json!("Warning"),
            &json!("Unschedulable"),
            &json!(message),
            &json!({ "apiVersion": "v1", "kind": "Pod", "namespace": "team-a", "name": "w0" })
        )
    );
    assert_eq!(event["source"]["component"], "kai-scheduler");
    assert_eq!(event["reportingInstance"], "kai-scheduler-0");

    // The same reason next cycle: the pod was told; only the group's status is compared with
    // what the cache shows (here still empty, as the test's cache does not change).
    let second = world.plan(&[pending(gang_incomplete())], &mut reported);
    assert_eq!(kinds(&second), ["update the status of PodGroup team-a/job"]);

    let third = world.plan(
        &[pending(Reason::WaitingBehind {
            jobs: 2,
            queue: "a".into(),
        })],
        &mut reported,
    );
    assert_eq!(third.len(), 3, "{:#?}", kinds(&third));
    assert_eq!(
        body(&third[2])["message"],
        "waiting behind 2 jobs of queue a that went first"
    );
}

#[test]
fn a_pod_that_waits_again_after_binding_is_told_again() {
    let world = World::new(vec![pod("ns/p", None, 30)], &[]);
    let pending = alone_waiting("ns/p");
    let mut reported = Reported::default();
    assert_eq!(
        world
            .plan(std::slice::from_ref(&pending), &mut reported)
            .len(),
        2
    );
    // A cycle where the pod is not pending (bound, or gone) forgets it.
    world.plan(&[], &mut reported);
    assert_eq!(world.plan(&[pending], &mut reported).len(), 2);
}

#[test]
fn a_failed_event_is_sent_again_next_cycle() {
    let world = World::new(vec![pod("ns/p", None, 30)], &[]);
    let pending = alone_waiting("ns/p");
    let mut reported = Reported::default();
    let calls = world.plan(std::slice::from_ref(&pending), &mut reported);
    let sent: Vec<Sent> = calls
        .into_iter()
        .map(|call| Sent {
            call,
            outcome: Outcome::Failed(500, "etcd timeout".into()),
        })
        .collect();
    reported.forget_failed(&sent);
    assert_eq!(world.plan(&[pending], &mut reported).len(), 2);
}

#[test]
fn events_per_cycle_are_bounded_and_the_rest_follow_next_cycle() {
    let n = EVENTS_PER_CYCLE + 50;
    let pods: Vec<Pod> = (0..n).map(|i| pod(&format!("ns/p{i}"), None, 30)).collect();
    let world = World::new(pods, &[]);
    let decisions: Vec<Decision> = (0..n).map(|i| alone_waiting(&format!("ns/p{i}"))).collect();
    let mut reported = Reported::default();
    let events = |calls: &[Call]| {
        calls
            .iter()
            .filter(|c| matches!(c, Call::Event { .. }))
            .count()
    };
    let first = world.plan(&decisions, &mut reported);
    assert_eq!(events(&first), EVENTS_PER_CYCLE);
    let second = world.plan(&decisions, &mut reported);
    assert_eq!(events(&second), 50);
    assert_eq!(events(&world.plan(&decisions, &mut reported)), 0);
}

#[test]
fn event_names_are_unique_within_a_cycle() {
    let world = World::new(vec![pod("ns/p", None, 30)], &[]);
    let calls = world.plan(
        &[
            Decision::Nominate {
                pod: "ns/p".into(),
                node: "n1".into(),
            },
            Decision::Bind {
                pod: "ns/p".into(),
                node: "n1".into(),
            },
        ],
        &mut Reported::default(),
    );
    let names: Vec<String> = calls
        .iter()
        .map(|c| body(c)["metadata"]["name"].as_str().unwrap().to_string())
        .filter(|n| n.starts_with("p."))
        .collect();
    assert_eq!(names.len(), 2);
    assert_ne!(names[0], names[1]);
}

#[test]
fn binding_a_pod_clears_its_groups_scheduling_condition() {
    let mut world = World::new(
        vec![pod("ns/a", Some("g"), 30), pod("ns/b", Some("g"), 30)],
        &["ns/g"],
    );
    world.groups.get_mut("ns/g").unwrap().scheduling_conditions = vec![SchedulingCondition {
        type_: Some("UnschedulableOnNodePool".into()),
        ..SchedulingCondition::default()
    }];
    let bind = |p: &str| Decision::Bind {
        pod: p.into(),
        node: "n".into(),
    };
    let calls = world.plan(&[bind("ns/a"), bind("ns/b")], &mut Reported::default());
    let clears: Vec<&Call> = calls
        .iter()
        .filter(|c| matches!(c, Call::PodGroupStatus { .. }))
        .collect();
    assert_eq!(clears.len(), 1, "one patch per group");
    assert_eq!(
        body(clears[0]),
        json!({ "status": { "schedulingConditions": null } })
    );
}

fn condition(message: &str, id: &str, node_pool: &str) -> SchedulingCondition {
    SchedulingCondition {
        type_: Some("UnschedulableOnNodePool".into()),
        node_pool: Some(node_pool.into()),
        reason: Some("Unschedulable".into()),
        message: Some(message.into()),
        status: Some("True".into()),
        transition_id: Some(id.into()),
        ..SchedulingCondition::default()
    }
}

#[test]
fn the_group_condition_is_written_like_kais_with_the_next_transition_id() {
    let status = PodGroupStatus {
        scheduling_conditions: vec![
            condition("older reason", "3", "pool-b"),
            condition("older reason", "4", ""),
        ],
    };
    let reason = Reason::OverLimit {
        queue: "team-a".into(),
        resource: ResourceKind::Gpu,
        limit: 8000,
        allocated: 6000,
        requested: 4000,
    };
    let patch = group_condition_patch(&status, &reason, now()).expect("the reason changed");
    let message =
        "queue team-a is at its gpu limit: 6 GPU allocated + 4 GPU requested > limit 8 GPU";
    assert_eq!(
        patch,
        json!({ "status": { "schedulingConditions": [
            serde_json::to_value(condition("older reason", "3", "pool-b")).unwrap(),
            {
                "type": "UnschedulableOnNodePool",
                "nodePool": "",
                "reason": "Unschedulable",
                "message": message,
                "reasons": [{
                    "reason": "OverLimit",
                    "message": message,
                    "details": { "queueDetails": {
                        "name": "team-a",
                        "queueAllocatedResources": { "nvidia.com/gpu": "6" },
                        "podGroupRequestedResources": { "nvidia.com/gpu": "4" },
                        "queueResourceLimits": { "nvidia.com/gpu": "8" },
                    }},
                }],
                "lastTransitionTime": "2026-05-01T12:00:00Z",
                "status": "True",
                "transitionID": "5",
            },
        ]}})
    );
    // Written: the same reason again is no change.
    let written = PodGroupStatus {
        scheduling_conditions: vec![condition(message, "5", "")],
    };
    assert_eq!(group_condition_patch(&written, &reason, now()), None);
}

#[test]
fn queue_status_carries_allocation_requests_and_fair_share_and_is_written_on_change() {
    let numbers = QueueNumbers {
        name: "team-a".into(),
        allocated: Amounts {
            gpu: 3000,
            cpu: 1500,
            memory: 2_000_000_000,
        },
        requested: Amounts {
            gpu: 5500,
            cpu: 4000,
            memory: 4_000_000_000,
        },
        fair_share: Amounts {
            gpu: 2000,
            cpu: 8000,
            memory: 16_000_000_000,
        },
    };
    let mut reported = Reported::default();
    let calls = calls::queue_calls(std::slice::from_ref(&numbers), &mut reported);
    assert_eq!(kinds(&calls), ["update the status of Queue team-a"]);
    assert_eq!(
        body(&calls[0]),
        json!({ "status": {
            "allocated": { "nvidia.com/gpu": "3", "cpu": "1500m", "memory": "2G" },
            "requested": { "nvidia.com/gpu": "5.5", "cpu": "4", "memory": "4G" },
            "conditions": [{
                "type": "OverQuota",
                "status": "True",
                "reason": "AboveFairShare",
                "message": "allocated above fair share in gpu; fair share: 2 gpu, 8 cpu, 16G memory",
            }],
        }})
    );
    assert!(calls::queue_calls(std::slice::from_ref(&numbers), &mut reported).is_empty());
    let less = QueueNumbers {
        allocated: Amounts::default(),
        ..numbers
    };
    let calls = calls::queue_calls(&[less], &mut reported);
    assert_eq!(
        body(&calls[0])["status"]["conditions"][0]["status"],
        "False"
    );
}

#[test]
fn a_stale_mark_is_kais_annotation_in_rfc_3339_and_a_cleared_one_removes_it() {
    // 2026-11-21T09:00:00Z is 1,795,251,600 s after the epoch.
    let stale = kai_scheduler::ingest::STALE_ANNOTATION;
    let marks = [
        (("team-a/train".to_string(), stale), Some(1_795_251_600)),
        (("team-b/old".to_string(), stale), None),
    ];
    let calls = calls::mark_calls(&marks);
    assert_eq!(
        calls,
        [
            Call::PodGroupAnnotation {
                namespace: "team-a".into(),
                name: "train".into(),
                patch: serde_json::json!({ "metadata": { "annotations": {
                    "kai.scheduler/stale-podgroup-timestamp": "2026-11-21T09:00:00Z"
                } } }),
            },
            Call::PodGroupAnnotation {
                namespace: "team-b".into(),
                name: "old".into(),
                patch: serde_json::json!({ "metadata": { "annotations": {
                    "kai.scheduler/stale-podgroup-timestamp": null
                } } }),
            },
        ]
    );
    // What is written is what ingest reads back (KAI parses it with time.RFC3339).
    let text = body(&calls[0])["metadata"]["annotations"]["kai.scheduler/stale-podgroup-timestamp"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(
        text.parse::<Timestamp>().unwrap().as_second(),
        1_795_251_600
    );
}

#[test]
fn start_and_eviction_marks_are_kais_annotations() {
    use kai_scheduler::ingest::{LAST_EVICTION_ANNOTATION, LAST_START_ANNOTATION};
    // 2026-11-21T09:00:00Z is 1,795,251,600 s after the epoch.
    let marks = [
        (
            ("team-a/train".to_string(), LAST_START_ANNOTATION),
            Some(1_795_251_600),
        ),
        (
            ("team-b/old".to_string(), LAST_EVICTION_ANNOTATION),
            Some(1_795_251_660),
        ),
    ];
    let calls = calls::mark_calls(&marks);
    assert_eq!(
        calls,
        [
            Call::PodGroupAnnotation {
                namespace: "team-a".into(),
                name: "train".into(),
                patch: serde_json::json!({ "metadata": { "annotations": {
                    "kai.scheduler/last-start-timestamp": "2026-11-21T09:00:00Z"
                } } }),
            },
            Call::PodGroupAnnotation {
                namespace: "team-b".into(),
                name: "old".into(),
                patch: serde_json::json!({ "metadata": { "annotations": {
                    "kai.scheduler/last-eviction-timestamp": "2026-11-21T09:01:00Z"
                } } }),
            },
        ]
    );
}

/// A claim as the watch cache holds it (`kubectl get resourceclaim -o json` less managedFields).
fn claim(name: &str, spec: Value, status: Value) -> Value {
    json!({
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": { "name": name, "namespace": "ml", "resourceVersion": "4711", "uid": "c-1" },
        "spec": spec,
        "status": status,
    })
}

#[test]
fn a_bound_pods_claims_get_their_devices_and_consumer_first() {
    use kai_scheduler::dra::{AllocatedDevice, Allocation, ClaimStatus, PodClaim};
    let mut p = pod("ml/trainer-0", None, 30);
    p.constraints.claims = vec![
        PodClaim {
            name: "gpu".into(),
            claim: Some("trainer-0-gpu-8sfxk".into()),
            template: true,
        },
        PodClaim {
            name: "shared".into(),
            claim: Some("shared-gpu".into()),
            template: false,
        },
    ];
    // The class carries the driver's configuration; the claim adds its own.
    let class = json!({
        "metadata": { "name": "gpu.nvidia.com" },
        "spec": {
            "selectors": [{ "cel": { "expression": "device.driver == 'gpu.nvidia.com'" } }],
            "config": [{ "opaque": { "driver": "gpu.nvidia.com", "parameters": { "kind": "GpuConfig" } } }],
        },
    });
    let sharing = json!({ "requests": ["gpu"], "opaque": { "driver": "gpu.nvidia.com",
        "parameters": { "kind": "GpuConfig", "sharing": { "strategy": "TimeSlicing" } } } });
    let own = claim(
        "trainer-0-gpu-8sfxk",
        json!({ "devices": {
            "requests": [{ "name": "gpu", "exactly": { "deviceClassName": "gpu.nvidia.com", "count": 1 } }],
            "config": [sharing.clone()],
        }}),
        json!({}),
    );
    let allocated = json!({ "devices": { "results": [
        { "request": "gpu", "driver": "gpu.nvidia.com", "pool": "dgx-01", "device": "gpu-1" }
    ]}});
    let shared = claim(
        "shared-gpu",
        json!({ "devices": { "requests": [
            { "name": "gpu", "exactly": { "deviceClassName": "gpu.nvidia.com" } }
        ]}}),
        json!({ "allocation": allocated, "reservedFor": [
            { "resource": "pods", "name": "server-0", "uid": "u-0" }
        ]}),
    );
    let claims = BTreeMap::from([
        (("ml".to_string(), "trainer-0-gpu-8sfxk".to_string()), own),
        (("ml".to_string(), "shared-gpu".to_string()), shared),
    ]);
    let classes = BTreeMap::from([("gpu.nvidia.com".to_string(), class)]);
    let given = Allocation {
        node: Some("dgx-01".into()),
        selector: Vec::new(),
        devices: vec![AllocatedDevice {
            request: "gpu".into(),
            driver: "gpu.nvidia.com".into(),
            pool: "dgx-01".into(),
            device: "gpu-0".into(),
        }],
    };
    let changed = vec![ClaimStatus {
        namespace: "ml".into(),
        name: "trainer-0-gpu-8sfxk".into(),
        allocation: Some(given.clone()),
        reserved_for: vec!["trainer-0".into()],
    }];
    let users = BTreeMap::from([
        (
            ("ml".to_string(), "trainer-0-gpu-8sfxk".to_string()),
            vec![("trainer-0".to_string(), "uid-t0".to_string())],
        ),
        (
            ("ml".to_string(), "shared-gpu".to_string()),
            vec![
                ("trainer-0".to_string(), "uid-t0".to_string()),
                ("trainer-1".to_string(), "uid-t1".to_string()),
            ],
        ),
    ]);
    let writes = calls::claim_writes(&p, &users, &changed, &claims, &classes).unwrap();
    assert_eq!(writes.len(), 2);
    // The pod's own claim: the structured allocator's result, the class's configuration for
    // its request, then the claim's, and the node its device ties it to; on the version seen.
    assert_eq!(writes[0].name, "trainer-0-gpu-8sfxk");
    assert_eq!(writes[0].allocation, Some(given.clone()));
    assert_eq!(
        writes[0].patch,
        json!({
            "metadata": { "resourceVersion": "4711" },
            "status": {
                "reservedFor": [{ "resource": "pods", "name": "trainer-0", "uid": "uid-t0" }],
                "allocation": {
                    "devices": {
                        "results": [{ "request": "gpu", "driver": "gpu.nvidia.com", "pool": "dgx-01", "device": "gpu-0" }],
                        "config": [
                            { "source": "FromClass", "requests": ["gpu"],
                              "opaque": { "driver": "gpu.nvidia.com", "parameters": { "kind": "GpuConfig" } } },
                            { "source": "FromClaim", "requests": ["gpu"],
                              "opaque": { "driver": "gpu.nvidia.com",
                                          "parameters": { "kind": "GpuConfig", "sharing": { "strategy": "TimeSlicing" } } } },
                        ],
                    },
                    "nodeSelector": { "nodeSelectorTerms": [{ "matchFields": [
                        { "key": "metadata.name", "operator": "In", "values": ["dgx-01"] }
                    ]}]},
                },
            },
        })
    );
    // The shared claim keeps its allocation; the pods bound to it in this cycle join its
    // consumers in one patch, written with the first of their binds.
    assert_eq!(writes[1].allocation, None);
    assert_eq!(
        writes[1].patch,
        json!({
            "metadata": { "resourceVersion": "4711" },
            "status": { "reservedFor": [
                { "resource": "pods", "name": "server-0", "uid": "u-0" },
                { "resource": "pods", "name": "trainer-0", "uid": "uid-t0" },
                { "resource": "pods", "name": "trainer-1", "uid": "uid-t1" },
            ]},
        })
    );
    // The second pod's bind writes nothing for the shared claim.
    let mut second = pod("ml/trainer-1", None, 30);
    second.constraints.claims = vec![p.constraints.claims[1].clone()];
    assert_eq!(
        calls::claim_writes(&second, &users, &changed, &claims, &classes).unwrap(),
        []
    );
    // A claim the caches do not hold stops the bind, saying which.
    let none = BTreeMap::new();
    assert_eq!(
        calls::claim_writes(&p, &users, &changed, &none, &classes).unwrap_err(),
        "ResourceClaim ml/trainer-0-gpu-8sfxk is not in the caches"
    );
    // Devices reachable from several nodes tie the claim to their slices' selector, written
    // as the structured allocator writes it.
    use kai_scheduler::cluster::{NodeSelectorTerm, Operator, Requirement};
    let behind_switch = Allocation {
        node: None,
        selector: vec![NodeSelectorTerm {
            expressions: vec![
                Requirement {
                    key: "fabric.example.com/switch".into(),
                    operator: Operator::In,
                    values: vec!["sw1".into()],
                },
                Requirement {
                    key: "fabric.example.com/drained".into(),
                    operator: Operator::DoesNotExist,
                    values: Vec::new(),
                },
            ],
            fields: Vec::new(),
        }],
        ..given.clone()
    };
    let changed = vec![ClaimStatus {
        allocation: Some(behind_switch),
        ..changed[0].clone()
    }];
    let writes = calls::claim_writes(&p, &users, &changed, &claims, &classes).unwrap();
    assert_eq!(
        writes[0].patch["status"]["allocation"]["nodeSelector"],
        json!({ "nodeSelectorTerms": [{ "matchExpressions": [
            { "key": "fabric.example.com/switch", "operator": "In", "values": ["sw1"] },
            { "key": "fabric.example.com/drained", "operator": "DoesNotExist" },
        ]}]})
    );
}
