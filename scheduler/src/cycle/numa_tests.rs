//! NUMA in the cycle, from objects shaped as `kubectl get -o yaml` prints them: NFD's
//! NodeResourceTopology (v1alpha2, with `attributes` and the deprecated `topologyPolicies`),
//! Guaranteed pods with a `status.qosClass`, and the placement exporter's annotation.

use super::tests::{binds, cycle, pending_reason, policy};
use crate::ingest::{Options, parse_cluster};

const TEAM: &str = r#"
queue "a" { gpu quota=8; cpu quota=1000; memory quota="4000Gi"; namespaces "a" }
"#;

/// A node of 64 cores and 4 GPUs, and its NRT object: two zones of 16 cores and 2 GPUs each
/// (the NRT reports what the kubelet's managers hold back, so zones sum to less than the node),
/// under `policy`, with `zone0_free` cores the exporter says are free in zone 0.
fn node(name: &str, policy: &str) -> String {
    format!(
        r#"
apiVersion: v1
kind: Node
metadata:
  name: {name}
  labels: {{kubernetes.io/hostname: {name}, nvidia.com/gpu.count: "4", feature.node.kubernetes.io/memory-numa: "true"}}
status:
  allocatable: {{cpu: "64", memory: 512Gi, nvidia.com/gpu: "4", pods: "110"}}
  conditions: [{{type: Ready, status: "True"}}]
---
apiVersion: topology.node.k8s.io/v1alpha2
kind: NodeResourceTopology
metadata:
  name: {name}
  ownerReferences: [{{apiVersion: v1, kind: Namespace, name: node-feature-discovery, uid: 1f9c}}]
topologyPolicies: ["SingleNUMANodePodLevel"]
attributes:
- {{name: topologyManagerPolicy, value: {policy}}}
- {{name: topologyManagerScope, value: pod}}
- {{name: nodeTopologyPodsFingerprint, value: pfp0v0019fa3c2d1e5b77a2}}
zones:
- name: node-1
  type: Node
  costs: [{{name: node-0, value: 21}}, {{name: node-1, value: 10}}]
  resources:
  - {{name: cpu, capacity: "32", allocatable: "16", available: "16"}}
  - {{name: memory, capacity: "270582939648", allocatable: "135291469824", available: "135291469824"}}
  - {{name: nvidia.com/gpu, capacity: "2", allocatable: "2", available: "2"}}
- name: node-0
  type: Node
  costs: [{{name: node-0, value: 10}}, {{name: node-1, value: 21}}]
  resources:
  - {{name: cpu, capacity: "32", allocatable: "16", available: "16"}}
  - {{name: memory, capacity: "270582939648", allocatable: "135291469824", available: "135291469824"}}
  - {{name: nvidia.com/gpu, capacity: "2", allocatable: "2", available: "2"}}
- name: socket-0
  type: Socket
"#
    )
}

/// A pod asking `cpu` cores, 8Gi and `gpus` GPUs, requests equal to limits (Guaranteed),
/// running on `on` with the exporter's record when given.
fn pod(name: &str, cpu: &str, gpus: u32, on: Option<(&str, &str)>) -> String {
    sized(name, cpu, "8Gi", gpus, on)
}

/// [`pod`], with `memory`.
fn sized(name: &str, cpu: &str, memory: &str, gpus: u32, on: Option<(&str, &str)>) -> String {
    let (node, annotations, phase) = match on {
        Some((node, record)) => (
            format!("  nodeName: {node}\n"),
            format!("  annotations:\n    kai.scheduler/numa-placement-observed: '{record}'\n"),
            "Running",
        ),
        None => (String::new(), String::new(), "Pending"),
    };
    format!(
        r#"
apiVersion: v1
kind: Pod
metadata:
  name: {name}
  namespace: a
  labels: {{kai.scheduler/queue: a}}
{annotations}spec:
  schedulerName: kai-scheduler
{node}  containers:
  - name: main
    image: nvcr.io/nvidia/pytorch:24.05-py3
    resources:
      requests: {{cpu: "{cpu}", memory: {memory}, nvidia.com/gpu: "{gpus}"}}
      limits: {{cpu: "{cpu}", memory: {memory}, nvidia.com/gpu: "{gpus}"}}
status:
  phase: {phase}
  qosClass: Guaranteed
"#
    )
}

fn run(objects: &[String]) -> crate::cycle::CycleResult {
    let policy = policy(TEAM);
    let text = objects.join("---\n");
    let file = parse_cluster("cluster.yaml", &text, &Options::for_policy(&policy)).unwrap();
    cycle(&policy, &file.snapshot, 1_000)
}

#[test]
fn a_pod_waits_when_no_single_zone_holds_it_and_says_so() {
    // 12 cores and 3 GPUs fit the node (64 cores, 4 GPUs) but no zone (16 cores, 2 GPUs).
    let r = run(&[node("n1", "single-numa-node"), pod("p", "12", 3, None)]);
    assert!(binds(&r).is_empty());
    let reason = pending_reason(&r, "a/p").to_string();
    assert!(
        reason.contains("no NUMA zone with room for all of the pod's aligned requests")
            && reason.contains("single-numa-node"),
        "{reason}"
    );
    // Under restricted, 3 GPUs take both zones (2 + 1) and 12 cores fit in one: the kubelet
    // finds no width all resources agree on, and neither do we. So with 20 cores and 3 GPUs,
    // while 8Gi of memory fits one zone.
    let r = run(&[node("n1", "restricted"), pod("p", "12", 3, None)]);
    assert!(binds(&r).is_empty());
    let r = run(&[node("n1", "restricted"), pod("p", "20", 3, None)]);
    assert!(binds(&r).is_empty());
    // 20 cores, 3 GPUs and 200Gi (a zone has 126Gi) all want two zones: admitted, split lowest
    // zone first.
    let r = run(&[node("n1", "restricted"), sized("p", "20", "200Gi", 3, None)]);
    assert_eq!(binds(&r), [("a/p".to_string(), "n1".to_string())]);
    let zones = &r.numa_zones[0].1;
    assert_eq!(zones.len(), 2);
    assert_eq!(zones[0].zone, "node-0");
    assert_eq!(zones[0].amount["cpu"], 16_000);
    assert_eq!(zones[0].amount["nvidia.com/gpu"], 2);
    assert_eq!(zones[1].amount["cpu"], 4_000);
    assert_eq!(zones[1].amount["nvidia.com/gpu"], 1);
}

#[test]
fn running_pods_take_the_zones_their_record_names_and_terminating_ones_none() {
    // r1 holds 14 cores and both GPUs of node-0: p (4 cores, 2 GPUs) fits only in node-1.
    let record = r#"[{"zone":"node-0","amount":{"cpu":"14","nvidia.com/gpu":"2"}}]"#;
    let r = run(&[
        node("n1", "single-numa-node"),
        pod("r1", "14", 2, Some(("n1", record))),
        pod("p", "4", 2, None),
    ]);
    assert_eq!(r.numa_zones.len(), 1);
    assert_eq!(r.numa_zones[0].1[0].zone, "node-1");
    // Another pod of 4 cores and 2 GPUs after p fits no zone.
    let r = run(&[
        node("n1", "single-numa-node"),
        pod("r1", "14", 2, Some(("n1", record))),
        pod("p", "4", 2, None),
        pod("q", "4", 2, None),
    ]);
    assert_eq!(binds(&r).len(), 1);
    // A terminating pod's zones count as free (KAI rebuilds the zones from the pods that hold
    // resources, releasing ones excluded): p takes node-0, the lowest zone.
    let terminating = pod("r1", "14", 2, Some(("n1", record))).replace(
        "  name: r1\n",
        "  name: r1\n  deletionTimestamp: \"2026-11-27T06:00:00Z\"\n",
    );
    let r = run(&[
        node("n1", "single-numa-node"),
        terminating,
        pod("p", "4", 2, None),
    ]);
    assert_eq!(r.numa_zones[0].1[0].zone, "node-0");
}

#[test]
fn node_order_prefers_the_node_that_takes_fewer_zones() {
    // Under best-effort nothing is refused, but a node that holds the pod in one zone scores
    // above one that splits it, whatever the strategy says (KAI: 100 / span against at most
    // 10). n-a is first by name and splits the pod (its zone 0 has 6 cores in use).
    let record =
        r#"[{"zone":"node-0","amount":{"cpu":"6"}},{"zone":"node-1","amount":{"cpu":"6"}}]"#;
    let r = run(&[
        node("n-a", "best-effort"),
        node("n-b", "best-effort"),
        pod("r1", "12", 0, Some(("n-a", record))),
        pod("p", "12", 1, None),
    ]);
    assert_eq!(binds(&r), [("a/p".to_string(), "n-b".to_string())]);
}

// What a cycle takes off and puts back leaves the zones as they were (KAI's statement undo
// restores each pod's saved placement, `framework/statement.go`); the cases the review of the
// first cut found drifting.

/// `line` added under the object's `name:`.
fn with_meta(p: String, name: &str, line: &str) -> String {
    p.replacen(
        &format!("  name: {name}\n"),
        &format!("  name: {name}\n  {line}\n"),
        1,
    )
}

fn snapshot(objects: &[String]) -> crate::cluster::Snapshot {
    let policy = policy(TEAM);
    parse_cluster(
        "cluster.yaml",
        &objects.join("---\n"),
        &Options::for_policy(&policy),
    )
    .unwrap()
    .snapshot
}

#[test]
fn a_terminating_pod_put_back_after_a_failed_pipeline_holds_no_zone() {
    // t is leaving node-0 (16 cores) and charged nowhere. p (3 GPUs) fits no zone: its try to
    // pipeline onto t takes t off and puts it back. q1 and q2 then take a zone each.
    let t = with_meta(
        pod("t", "16", 0, Some(("n1", "[]"))),
        "t",
        "deletionTimestamp: \"2026-11-27T06:00:00Z\"",
    );
    let at = |name: &str, minute: u32| {
        with_meta(
            pod(
                name,
                if name == "p" { "12" } else { "14" },
                if name == "p" { 3 } else { 2 },
                None,
            ),
            name,
            &format!("creationTimestamp: \"2026-11-27T05:0{minute}:00Z\""),
        )
    };
    let r = run(&[
        node("n1", "single-numa-node"),
        t,
        at("p", 0),
        at("q1", 1),
        at("q2", 2),
    ]);
    let mut bound: Vec<String> = binds(&r).into_iter().map(|(p, _)| p).collect();
    bound.sort();
    assert_eq!(bound, ["a/q1", "a/q2"]);
}

#[test]
fn a_pod_put_back_holds_the_zones_it_held_and_none_when_it_held_none() {
    let record = r#"[{"zone":"node-1","amount":{"cpu":"4","hugepages-2Mi":"4Mi"}}]"#;
    let s = snapshot(&[
        node("n1", "single-numa-node"),
        node("n2", "single-numa-node"),
        pod("r", "4", 0, Some(("n1", record))),
        pod("u", "16", 0, Some(("n1", "[]"))),
    ]);
    let mut numa = super::numa::NumaState::new(&s).unwrap();
    let (n1, n2) = (0, 1);
    let r = s.pods.iter().find(|p| p.name == "r").unwrap();
    let u = s.pods.iter().find(|p| p.name == "u").unwrap();
    // A resource the zones do not report (hugepages here) is not charged: nothing overdrawn.
    assert!(!numa.overdrawn(n1));
    // r is taken off, tried on n2, taken off again and put back: on its recorded zone.
    numa.release(r);
    numa.take(n2, r);
    numa.release(r);
    numa.take(n1, r);
    assert_eq!(numa.placement("a/r").unwrap()[0].zone, "node-1");
    // u held no zone (no record): put back, it holds none.
    numa.release(u);
    numa.take(n1, u);
    assert!(numa.placement("a/u").is_none());
    assert!(!numa.overdrawn(n1));
}

#[test]
fn a_pod_placed_again_takes_the_lowest_zone_that_fits_not_its_last() {
    // KAI stamps every placement afresh: p, placed on node-1 beside q and released with it,
    // goes to node-0 when placed alone.
    let s = snapshot(&[
        node("n1", "single-numa-node"),
        pod("q", "14", 2, None),
        pod("p", "4", 0, None),
    ]);
    let mut numa = super::numa::NumaState::new(&s).unwrap();
    let q = s.pods.iter().find(|p| p.name == "q").unwrap();
    let p = s.pods.iter().find(|p| p.name == "p").unwrap();
    numa.take(0, q);
    numa.take(0, p);
    assert_eq!(numa.placement("a/p").unwrap()[0].zone, "node-1");
    numa.release(p);
    numa.release(q);
    numa.take(0, p);
    assert_eq!(numa.placement("a/p").unwrap()[0].zone, "node-0");
}

#[test]
fn a_record_numa_does_not_concern_stays_charged_through_an_undo_and_an_eviction() {
    // b is Burstable and asks no device: its record is charged (KAI rebuilds the zones from
    // every record) but it gives nothing back when taken off (KAI seeds no placement for it).
    let record = r#"[{"zone":"node-0","amount":{"cpu":"16"}}]"#;
    let b = pod("b", "16", 0, Some(("n1", record)))
        .replace("qosClass: Guaranteed", "qosClass: Burstable")
        .replace(
            "nvidia.com/gpu: \"0\"",
            "nvidia.com/gpu: \"0\", ephemeral-storage: 1Gi",
        );
    let s = snapshot(&[node("n1", "single-numa-node"), b, pod("g", "16", 0, None)]);
    let mut numa = super::numa::NumaState::new(&s).unwrap();
    let b = s.pods.iter().find(|p| p.name == "b").unwrap();
    let g = s.pods.iter().find(|p| p.name == "g").unwrap();
    numa.release(b);
    numa.take(0, b);
    numa.take(0, g);
    assert_eq!(numa.placement("a/g").unwrap()[0].zone, "node-1");
    // Taken off for good (a victim), it frees no zone either.
    numa.release(g);
    numa.release(b);
    numa.take(0, g);
    assert_eq!(numa.placement("a/g").unwrap()[0].zone, "node-1");
}

#[test]
fn the_runtimes_cpu_overhead_is_not_pinned_to_a_zone() {
    // 16 whole cores with a RuntimeClass overhead of 250m fit a 16-core zone (KAI takes the
    // pod's CPU from its containers' whole CPUs only).
    let p = pod("p", "16", 0, None).replace(
        "  schedulerName: kai-scheduler\n",
        "  schedulerName: kai-scheduler\n  overhead: {cpu: 250m}\n",
    );
    let r = run(&[node("n1", "single-numa-node"), p]);
    assert_eq!(binds(&r).len(), 1, "{:#?}", r.decisions);
}

#[test]
fn pod_level_memory_is_what_the_pod_scope_aligns() {
    // Two containers of 4 cores and 8Gi, in a pod whose pod-level resources ask 150Gi: the
    // kubelet aligns the pod's 150Gi, more than a zone's 126Gi, so no single zone takes it.
    let pod = r#"
apiVersion: v1
kind: Pod
metadata:
  name: p
  namespace: a
  labels: {kai.scheduler/queue: a}
spec:
  schedulerName: kai-scheduler
  resources:
    requests: {cpu: "8", memory: 150Gi}
    limits: {cpu: "8", memory: 150Gi}
  containers:
  - name: main
    image: nvcr.io/nvidia/pytorch:24.05-py3
    resources:
      requests: {cpu: "4", memory: 8Gi}
      limits: {cpu: "4", memory: 8Gi}
  - name: loader
    image: nvcr.io/nvidia/pytorch:24.05-py3
    resources:
      requests: {cpu: "4", memory: 8Gi}
      limits: {cpu: "4", memory: 8Gi}
status:
  phase: Pending
  qosClass: Guaranteed
"#;
    let r = run(&[node("n1", "single-numa-node"), pod.to_string()]);
    assert!(binds(&r).is_empty(), "{:?}", binds(&r));
    let reason = pending_reason(&r, "a/p").to_string();
    assert!(reason.contains("no NUMA zone with room"), "{reason}");
    // Under best-effort it binds, over both zones: 126Gi from node-0, the rest from node-1.
    let r = run(&[node("n1", "best-effort"), pod.to_string()]);
    assert_eq!(binds(&r), [("a/p".to_string(), "n1".to_string())]);
    let zones = &r.numa_zones[0].1;
    assert_eq!(zones.len(), 2, "{zones:?}");
    assert_eq!(zones[0].amount["memory"], 135_291_469_824);
    assert_eq!(zones[1].amount["memory"], 150 * (1 << 30) - 135_291_469_824);
}
