use super::*;
use crate::cluster::Amounts;

fn options() -> Options {
    Options {
        queue_label: "kai.scheduler/queue".into(),
        scheduler_name: Some("kai-scheduler".into()),
        origin: None,
        complete_owner_kinds: Vec::new(),
    }
}

fn parse(text: &str) -> ClusterFile {
    parse_cluster("cluster.yaml", text, &options()).unwrap_or_else(|e| panic!("{e}"))
}

fn fail(text: &str) -> String {
    parse_cluster("cluster.yaml", text, &options())
        .expect_err("the file is rejected")
        .to_string()
}

/// The notes of a file that is read (one bad object never rejects the file).
fn notes(text: &str) -> Vec<String> {
    parse(text).notes.into_iter().map(|n| n.text).collect()
}

/// What notes say, without their places.
fn texts(notes: &[Note]) -> Vec<&str> {
    notes.iter().map(|n| n.text.as_str()).collect()
}

/// The one note of a file whose only object is skipped.
fn skipped(text: &str) -> String {
    let file = parse(text);
    assert!(
        file.snapshot.pods.is_empty() && file.snapshot.nodes.is_empty(),
        "the object is skipped: {file:?}"
    );
    match file.notes.as_slice() {
        [one] => one.text.clone(),
        many => panic!("one note expected: {many:?}"),
    }
}

const NODE: &str = "
apiVersion: v1
kind: Node
metadata:
  name: gpu-01
  labels: {nvidia.com/gpu.clique: a}
spec: {unschedulable: true}
status:
  allocatable: {nvidia.com/gpu: \"8\", cpu: 63500m, memory: 512Gi, pods: \"110\"}
";

#[test]
fn a_list_of_nodes_pods_and_pod_groups() {
    let file = parse(
        "
apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: Node
  metadata: {name: gpu-01}
  status:
    allocatable: {nvidia.com/gpu: \"8\", cpu: \"64\", memory: 512Gi}
- apiVersion: v1
  kind: Pod
  metadata:
    name: train-0
    namespace: research-llm
    creationTimestamp: \"2026-11-20T10:00:00Z\"
    labels: {kai.scheduler/queue: llm-team}
    annotations: {pod-group-name: train}
  spec:
    schedulerName: kai-scheduler
    priorityClassName: background-training
    terminationGracePeriodSeconds: 120
    nodeName: gpu-01
    containers:
    - name: main
      image: trainer
      resources:
        limits: {nvidia.com/gpu: \"4\"}
        requests: {cpu: \"8\", memory: 64Gi}
    - name: sidecar
      image: logger
      resources:
        requests: {cpu: 500m, memory: 1Gi}
  status:
    phase: Running
    startTime: \"2026-11-20T10:02:00Z\"
- apiVersion: scheduling.run.ai/v2alpha2
  kind: PodGroup
  metadata:
    name: train
    namespace: research-llm
    creationTimestamp: \"2026-11-20T09:59:30Z\"
  spec: {minMember: 2, queue: llm-team, priorityClassName: background-training}
",
    );
    let s = &file.snapshot;
    assert_eq!(s.nodes.len(), 1);
    assert_eq!(
        s.nodes[0].allocatable,
        Amounts {
            gpu: 8000,
            cpu: 64000,
            memory: 512 << 30
        }
    );
    let pod = &s.pods[0];
    assert_eq!(pod.key(), "research-llm/train-0");
    assert_eq!(
        pod.request,
        Amounts {
            gpu: 4000,
            cpu: 8500,
            memory: 65 << 30
        }
    );
    assert!(!pod.fractional);
    assert_eq!(pod.group.as_deref(), Some("train"));
    assert_eq!(pod.queue.as_deref(), Some("llm-team"));
    assert_eq!(pod.priority_class.as_deref(), Some("background-training"));
    assert_eq!(pod.node.as_deref(), Some("gpu-01"));
    assert_eq!(pod.termination_grace_seconds, 120);
    assert!(!pod.terminating);
    // The origin is the earliest time in the file: the pod group's creation.
    assert_eq!(pod.created, 30);
    assert_eq!(pod.started, Some(150));
    assert_eq!(file.taken, 150);
    assert_eq!(
        file.origin,
        Some("2026-11-20T09:59:30Z".parse::<Timestamp>().unwrap())
    );
    let group = &s.groups[0];
    assert_eq!(
        (group.name.as_str(), group.min_member, group.created),
        ("train", 2, 0)
    );
    assert_eq!(group.queue.as_deref(), Some("llm-team"));
    assert_eq!(group.priority_class.as_deref(), Some("background-training"));
    assert!(file.notes.is_empty(), "{:?}", file.notes);
}

#[test]
fn a_multi_document_stream_and_node_fields() {
    let file = parse(&format!(
        "{NODE}---\n---
apiVersion: v1
kind: Pod
metadata: {{name: p, namespace: ns}}
spec:
  schedulerName: kai-scheduler
  containers: [{{name: c}}]
"
    ));
    let node = &file.snapshot.nodes[0];
    assert_eq!(node.name, "gpu-01");
    assert!(node.unschedulable);
    assert_eq!(node.allocatable.cpu, 63500);
    assert_eq!(node.gpu_devices(), 8);
    assert_eq!(node.labels["nvidia.com/gpu.clique"], "a");
    let pod = &file.snapshot.pods[0];
    assert_eq!(pod.request, Amounts::default());
    assert_eq!(
        (pod.node.as_ref(), pod.started, pod.created),
        (None, None, 0)
    );
    assert_eq!(pod.termination_grace_seconds, DEFAULT_GRACE_SECONDS);
    assert_eq!((pod.group.as_ref(), pod.queue.as_ref()), (None, None));
    assert_eq!(file.origin, None);
}

fn pod(annotations: &str, resources: &str) -> String {
    format!(
        "
apiVersion: v1
kind: Pod
metadata:
  name: nb
  namespace: ds-analytics
  annotations: {annotations}
spec:
  schedulerName: kai-scheduler
  containers:
  - name: c
    resources: {resources}
"
    )
}

#[test]
fn gpu_fractions() {
    let file = parse(&pod("{gpu-fraction: \"0.25\"}", "{requests: {cpu: 1}}"));
    let p = &file.snapshot.pods[0];
    assert!(p.fractional);
    assert_eq!((p.request.gpu, p.request.cpu), (250, 1000));
    let whole = parse(&pod("{gpu-fraction: \"1\"}", "{}"));
    assert_eq!(whole.snapshot.pods[0].request.gpu, 1000);

    for bad in ["0", "1.5", "half", "-0.5"] {
        let e = skipped(&pod(&format!("{{gpu-fraction: \"{bad}\"}}"), "{}"));
        assert!(
            e.contains("skipped Pod ds-analytics/nb: annotation gpu-fraction")
                && e.contains("(0, 1]"),
            "{bad}: {e}"
        );
    }
    // Finer than a thousandth: rounded up, with a note (KAI takes any float).
    let fine = parse(&pod("{gpu-fraction: \"0.0001\"}", "{}"));
    assert_eq!(fine.snapshot.pods[0].request.gpu, 1);
    assert!(
        fine.notes[0].text.contains("counted as 0.001"),
        "{:?}",
        fine.notes
    );
    let e = skipped(&pod(
        "{gpu-fraction: \"0.5\"}",
        "{limits: {nvidia.com/gpu: 1}}",
    ));
    assert!(e.contains("use one or the other"), "{e}");
}

#[test]
fn init_containers_raise_the_request() {
    let file = parse(
        "
apiVersion: v1
kind: Pod
metadata: {name: p, namespace: ns}
spec:
  schedulerName: kai-scheduler
  initContainers:
  - {name: fetch, resources: {requests: {cpu: \"4\", memory: 1Gi}}}
  containers:
  - {name: a, resources: {requests: {cpu: \"1\", memory: 2Gi}}}
  - {name: b, resources: {requests: {cpu: \"1\"}}}
",
    );
    let r = file.snapshot.pods[0].request;
    assert_eq!((r.cpu, r.memory), (4000, 2 << 30));
}

#[test]
fn sidecars_add_up_and_pod_level_requests_win() {
    let file = parse(
        "
apiVersion: v1
kind: Pod
metadata: {name: p, namespace: ns}
spec:
  schedulerName: kai-scheduler
  initContainers:
  - {name: proxy, restartPolicy: Always, resources: {requests: {cpu: \"1\", memory: 1Gi}}}
  - {name: migrate, resources: {requests: {cpu: \"4\", memory: 1Gi}}}
  containers:
  - {name: a, resources: {requests: {cpu: \"2\", memory: 2Gi}}}
",
    );
    let r = file.snapshot.pods[0].request;
    // The migration runs beside the proxy (4 + 1 CPU); afterwards app and proxy run (2 + 1).
    assert_eq!((r.cpu, r.memory), (5000, 3 << 30));
    let file = parse(
        "
apiVersion: v1
kind: Pod
metadata: {name: p, namespace: ns}
spec:
  schedulerName: kai-scheduler
  resources: {requests: {cpu: \"8\"}}
  containers:
  - {name: a, resources: {requests: {cpu: \"2\", memory: 2Gi}, limits: {nvidia.com/gpu: \"1\"}}}
",
    );
    let r = file.snapshot.pods[0].request;
    assert_eq!((r.gpu, r.cpu, r.memory), (1000, 8000, 2 << 30));
}

#[test]
fn bad_quantities_skip_the_object_with_a_note_naming_the_field() {
    let e = skipped(&pod("{}", "{requests: {cpu: lots}}"));
    assert_eq!(
        e,
        "skipped Pod ds-analytics/nb: container c: resources.requests.cpu: `lots` is not a Kubernetes quantity"
    );
    let e = skipped(&pod("{}", "{limits: {nvidia.com/gpu: 500m}}"));
    assert!(e.contains("counts whole devices"), "{e}");
    let e = skipped(&NODE.replace("63500m", "many"));
    assert_eq!(
        e,
        "skipped Node gpu-01: status.allocatable.cpu: `many` is not a Kubernetes quantity"
    );
}

#[test]
fn quantities_kubernetes_accepts_are_rounded_not_refused() {
    let file = parse(&pod("{}", "{requests: {cpu: 1u, memory: \"0.1\"}}"));
    let r = file.snapshot.pods[0].request;
    assert_eq!(
        (r.cpu, r.memory),
        (1, 1),
        "requests round up to a millicore and a byte"
    );
    let file = parse(&NODE.replace("63500m", "63500500u"));
    assert_eq!(
        file.snapshot.nodes[0].allocatable.cpu, 63500,
        "allocatable rounds down"
    );
}

#[test]
fn unquoted_label_values_are_read_as_strings() {
    let file = parse(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: ns, labels: {version: 2, canary: true}}\nspec: {schedulerName: kai-scheduler, containers: []}\n",
    );
    let labels = &file.snapshot.pods[0].labels;
    assert_eq!(labels["version"], "2");
    assert_eq!(labels["canary"], "true");
}

#[test]
fn missing_names_and_duplicates_are_skipped_with_a_note() {
    let e =
        skipped("apiVersion: v1\nkind: Pod\nmetadata: {namespace: ns}\nspec: {containers: []}\n");
    assert_eq!(e, "skipped Pod (document 1): it has no metadata.name");
    let file = parse(&format!("{NODE}---{NODE}"));
    assert_eq!(file.snapshot.nodes.len(), 1);
    assert_eq!(
        texts(&file.notes),
        ["skipped Node gpu-01: it appears twice in the file (the first is used)"]
    );
    let e =
        skipped("apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, metadata: {name: x}}\n");
    assert_eq!(e, "skipped document 1, item 1: it has no kind");
    let e = skipped("just text\n");
    assert!(e.contains("is not a Kubernetes object"), "{e}");
    // Text that is not YAML at all still rejects the file: nothing in it can be trusted.
    let e = fail("a: [b\n");
    assert!(e.starts_with("cluster.yaml: not valid YAML"), "{e}");
}

#[test]
fn bad_types_skip_the_object_naming_the_field() {
    let e = skipped(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: ns}\nspec: {containers: {}}\n",
    );
    assert!(
        e.starts_with("skipped Pod ns/p: not a valid Pod: spec.containers: invalid type"),
        "{e}"
    );
    let group = |spec: &str| {
        format!(
            "apiVersion: scheduling.run.ai/v2alpha2\nkind: PodGroup\nmetadata: {{name: g, namespace: ns}}\nspec: {spec}\n"
        )
    };
    // minMember 0 is valid in KAI's CRD: no gang requirement.
    assert_eq!(
        parse(&group("{minMember: 0}")).snapshot.groups[0].min_member,
        0
    );
    let e = notes(&group("{minMember: -1}"));
    assert_eq!(
        e,
        ["skipped PodGroup ns/g: spec.minMember is -1; it must be 0 or more"]
    );
    let e = notes(
        "apiVersion: scheduling.run.ai/v2alpha2\nkind: PodGroup\nmetadata: {name: g, namespace: ns, creationTimestamp: yesterday}\n",
    );
    assert!(e[0].contains("not an RFC 3339 time"), "{e:?}");
}

#[test]
fn pod_group_fields_kai_reads() {
    let file = parse(
        "apiVersion: scheduling.run.ai/v2alpha2
kind: PodGroup
metadata:
  name: g
  namespace: ns
  creationTimestamp: \"2026-01-01T00:00:00Z\"
  annotations:
    kai.scheduler/stale-podgroup-timestamp: \"2026-01-01T00:01:00Z\"
    kai.scheduler/last-start-timestamp: \"2026-01-01T00:00:30Z\"
    kai.scheduler/last-eviction-timestamp: \"2026-01-01T00:00:10Z\"
spec:
  minMember: 2
  preemptibility: non-preemptible
  preemptionDelay: 1m30s
  stalenessGracePeriod: -1s
  topologyConstraint: {requiredTopologyLevel: topology.kubernetes.io/zone}
",
    );
    let g = &file.snapshot.groups[0];
    assert_eq!(g.preemptible, Some(false));
    assert_eq!(g.preemption_delay, Some(90));
    assert_eq!(g.staleness_grace, Some(-1));
    // The file's clock starts at its earliest creation time, the group's.
    assert_eq!(g.stale_since, Some(60));
    assert_eq!(g.last_start, Some(30));
    assert_eq!(g.last_evicted, Some(10));
    assert_eq!(
        g.topology_required.as_deref(),
        Some("topology.kubernetes.io/zone")
    );
}

#[test]
fn topologies_and_the_topology_a_pod_group_names() {
    // As KAI's examples write them (`docs/topology`): levels from the broadest down.
    let file = parse(
        "apiVersion: v1
kind: List
items:
- apiVersion: kai.scheduler/v1alpha1
  kind: Topology
  metadata: {name: cluster-topology}
  spec:
    levels:
    - nodeLabel: topology.kubernetes.io/zone
    - nodeLabel: cloud.provider.com/topology-rack
    - nodeLabel: kubernetes.io/hostname
- apiVersion: kai.scheduler/v1alpha1
  kind: Topology
  metadata: {name: empty}
  spec: {levels: []}
- apiVersion: kai.scheduler/v1alpha1
  kind: Topology
  metadata: {name: twice}
  spec: {levels: [{nodeLabel: rack}, {nodeLabel: rack}]}
- apiVersion: scheduling.run.ai/v2alpha2
  kind: PodGroup
  metadata: {name: g, namespace: ns}
  spec:
    minMember: 2
    topologyConstraint:
      topology: cluster-topology
      requiredTopologyLevel: topology.kubernetes.io/zone
      preferredTopologyLevel: cloud.provider.com/topology-rack
",
    );
    let t = &file.snapshot.topologies;
    assert_eq!(t.len(), 1, "{:?}", file.notes);
    assert_eq!(t[0].name, "cluster-topology");
    assert_eq!(
        t[0].levels,
        [
            "topology.kubernetes.io/zone",
            "cloud.provider.com/topology-rack",
            "kubernetes.io/hostname"
        ]
    );
    let g = &file.snapshot.groups[0];
    assert_eq!(g.topology.as_deref(), Some("cluster-topology"));
    assert_eq!(
        g.topology_preferred.as_deref(),
        Some("cloud.provider.com/topology-rack")
    );
    let notes = texts(&file.notes).join("\n");
    assert!(
        notes.contains("Topology empty: spec.levels must list at least one level"),
        "{notes}"
    );
    assert!(
        notes.contains("Topology twice: spec.levels[1]: node label rack names two levels"),
        "{notes}"
    );
}

/// The notes of a file, each as `line:column: text` (or the text alone where it has no place).
fn placed(text: &str) -> Vec<String> {
    parse(text)
        .notes
        .iter()
        .map(|n| match n.line_column {
            Some((line, column)) => format!("{line}:{column}: {}", n.text),
            None => n.text.clone(),
        })
        .collect()
}

#[test]
fn every_note_about_an_object_names_the_line_and_column_it_starts_at() {
    // A List's items are placed where their mapping starts (after `- `), a document where it
    // starts (after `---`); counted by hand. Objects of other kinds are noted last.
    let yaml = "\
apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: Node
  metadata: {name: n1}
  status: {allocatable: {nvidia.com/gpu: \"8\", cpu: \"8\", memory: 8Gi}}
- apiVersion: batch/v1
  kind: Job
  metadata: {name: j, namespace: a}
- apiVersion: v1
  kind: Node
  metadata: {name: n1}
---
apiVersion: v1
kind: Pod
metadata: {namespace: a}
--- [1, 2]
";
    assert_eq!(
        placed(yaml),
        [
            "11:3: skipped Node n1: it appears twice in the file (the first is used)",
            "15:1: skipped Pod (document 2): it has no metadata.name",
            "18:5: skipped document 3: it is not a Kubernetes object (expected a mapping with apiVersion and kind)",
            "8:3: skipped Job a/j: batch/v1 Job is not a Node, Pod or scheduling.run.ai/v2alpha2 PodGroup",
        ]
    );
    // JSON as `kubectl -o json` prints a List: each item where its `{` is.
    let json = r#"{"apiVersion": "v1", "kind": "List", "items": [
  {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j", "namespace": "a"}},
    {"apiVersion": "v1", "kind": "Pod", "metadata": {"namespace": "a"}}
]}
"#;
    assert_eq!(
        placed(json),
        [
            "3:5: skipped Pod (document 1, item 2): it has no metadata.name",
            "2:3: skipped Job a/j: batch/v1 Job is not a Node, Pod or scheduling.run.ai/v2alpha2 PodGroup",
        ]
    );
    // An anchor sends the file to the whole-file reader: the places are the same.
    let anchored = "\
apiVersion: v1
kind: List
items:
- apiVersion: batch/v1
  kind: &k Job
  metadata: {name: j, namespace: a}
- apiVersion: v1
  kind: Pod
  metadata: {namespace: a}
";
    assert_eq!(
        placed(anchored),
        [
            "7:3: skipped Pod (document 1, item 2): it has no metadata.name",
            "4:3: skipped Job a/j: batch/v1 Job is not a Node, Pod or scheduling.run.ai/v2alpha2 PodGroup",
        ]
    );
}

#[test]
fn skipped_objects_leave_a_note() {
    let file = parse(
        "
apiVersion: v1
kind: List
items:
- {apiVersion: v1, kind: ConfigMap, metadata: {name: c, namespace: ns}}
- apiVersion: v1
  kind: Pod
  metadata: {name: done, namespace: ns}
  spec: {schedulerName: kai-scheduler, containers: []}
  status: {phase: Succeeded}
- apiVersion: v1
  kind: Pod
  metadata: {name: theirs, namespace: ns}
  spec: {containers: []}
- apiVersion: v1
  kind: Pod
  metadata: {name: system, namespace: kube-system}
  spec: {nodeName: gpu-01, containers: [{name: c, resources: {requests: {cpu: 100m}}}]}
- apiVersion: scheduling.run.ai/v2
  kind: Queue
  metadata: {name: q}
",
    );
    // Objects of other kinds are noted last: only once every pod is read is it known that they
    // own none. The bound pod's node is not in the file, but it is another scheduler's: no note.
    assert_eq!(
        texts(&file.notes),
        [
            "skipped Pod ns/done: it has finished (phase Succeeded)",
            "skipped Pod ns/theirs: it is pending for another scheduler (default-scheduler, not kai-scheduler)",
            "skipped ConfigMap ns/c: v1 ConfigMap is not a Node, Pod or scheduling.run.ai/v2alpha2 PodGroup",
            "skipped Queue q: scheduling.run.ai/v2 Queue is not a Node, Pod or scheduling.run.ai/v2alpha2 PodGroup",
        ]
    );
    // A bound pod of another scheduler still holds its node's resources.
    assert_eq!(file.snapshot.pods.len(), 1);
    assert_eq!(file.snapshot.pods[0].request.cpu, 100);
    assert!(file.snapshot.pods[0].foreign);
}

#[test]
fn a_pod_asking_mig_instances_in_annotations_is_a_legacy_mig_pod() {
    let file = parse(
        "apiVersion: v1
kind: Pod
metadata:
  name: old
  namespace: ns
  annotations: {nvidia.com/mig-1g.10gb: \"2\"}
spec:
  schedulerName: kai-scheduler
  containers:
  - name: c
    resources: {limits: {nvidia.com/gpu: \"1\"}}
",
    );
    let p = &file.snapshot.pods[0];
    assert!(p.legacy_mig);
    // The annotation replaces what the containers ask of GPUs, as in KAI.
    assert_eq!(p.request.gpu, 0);
    assert_eq!(p.extended.get("nvidia.com/mig-1g.10gb"), Some(&2));
}

#[test]
fn terminating_pods_and_a_given_origin() {
    let text = "
apiVersion: v1
kind: Pod
metadata:
  name: p
  namespace: ns
  creationTimestamp: \"2026-11-20T10:00:00Z\"
  deletionTimestamp: \"2026-11-20T11:00:00Z\"
spec:
  nodeName: gpu-01
  containers: []
";
    let early = Options {
        origin: Some("2026-11-20T09:00:00Z".parse().unwrap()),
        ..options()
    };
    let file = parse_cluster("f", text, &early).unwrap();
    let p = &file.snapshot.pods[0];
    assert!(p.terminating);
    assert_eq!(p.deletion_deadline, Some(7200));
    // Bound with no start time: it started when it was created.
    assert_eq!((p.created, p.started), (3600, Some(3600)));
    // The deletion time is a deadline, not an event the snapshot has seen.
    assert_eq!(file.taken, 3600);
    // Times before the origin count as 0.
    let late = Options {
        origin: Some("2026-11-21T00:00:00Z".parse().unwrap()),
        ..options()
    };
    assert_eq!(
        parse_cluster("f", text, &late).unwrap().snapshot.pods[0].created,
        0
    );
}

#[test]
fn an_unreadable_file_is_named() {
    let e = read_cluster(Path::new("/nonexistent/cluster.yaml"), &options()).unwrap_err();
    assert!(
        e.to_string()
            .starts_with("/nonexistent/cluster.yaml: cannot read it:"),
        "{e}"
    );
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig { cases: 300, ..Default::default() })]

    /// Whatever the file holds, reading it returns a snapshot or an error; it never panics.
    #[test]
    fn any_text_is_read_or_rejected(text in "\\PC{0,300}") {
        let _ = parse_cluster("f", &text, &options());
    }

    /// A valid file with one stretch of it replaced by arbitrary text.
    #[test]
    fn a_damaged_file_is_read_or_rejected(at in 0usize..1000, len in 0usize..20, junk in "[ -~\\n]{0,20}") {
        let valid = format!("{NODE}---\n{}", pod("{gpu-fraction: \"0.5\", pod-group-name: g}", "{requests: {cpu: 1, memory: 1Gi}}"));
        let start = at.min(valid.len());
        let end = (start + len).min(valid.len());
        let damaged = format!("{}{junk}{}", &valid[..start], &valid[end..]);
        let _ = parse_cluster("f", &damaged, &options());
    }
}

/// The fast readers give what reading the whole file gives, for every cluster file of the
/// scenarios and the example, as YAML and as JSON.
#[test]
fn the_fast_readers_read_as_the_whole_file_reader() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = vec![root.join("../examples/cluster.yaml")];
    for entry in std::fs::read_dir(root.join("tests/scenarios")).unwrap() {
        let path = entry.unwrap().path().join("cluster.yaml");
        if path.exists() {
            files.push(path);
        }
    }
    assert!(files.len() > 50, "{files:?}");
    for path in files {
        let text = std::fs::read_to_string(&path).unwrap();
        let whole = parse_whole("f", &text, &options());
        assert_eq!(
            parse_cluster("f", &text, &options()),
            whole,
            "{}",
            path.display()
        );
        let documents: Vec<Value> = serde_saphyr::from_multiple(&text).unwrap();
        let json: String = documents
            .iter()
            .map(|d| serde_json::to_string_pretty(d).unwrap())
            .collect::<Vec<_>>()
            .join("\n");
        assert_eq!(
            parse_cluster("f", &json, &options()),
            parse_whole("f", &json, &options()),
            "{} as JSON",
            path.display()
        );
        // The same objects, at other lines.
        assert_eq!(
            without_places(parse_cluster("f", &json, &options())),
            without_places(whole),
            "{} as JSON",
            path.display()
        );
    }
}

/// Scalars the fast YAML reader resolves as serde-saphyr does.
#[test]
fn odd_yaml_reads_as_the_whole_file_reader() {
    for text in [
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: ns, labels: {a: 0x1F, b: 1e3, c: yes, d: .inf, e: 007, f: -12, g: 1_000, h: Null, i: ~}}\nspec: {schedulerName: kai-scheduler, containers: []}\n",
        "apiVersion: v1\nkind: Pod\nmetadata: &m {name: p, namespace: ns}\nspec: {containers: []}\n---\napiVersion: v1\nkind: Pod\nmetadata: *m\n",
        "apiVersion: v1\nitems:\n- {apiVersion: v1, kind: Pod, metadata: {name: p}, spec: {containers: []}}\nkind: NotAList\n",
        "items: [{kind: Pod}]\nkind: PodList\n",
        "---\n~\n---\n\n---\nkind: Pod\n",
        "kind: Pod\nkind: Node\n",
        "apiVersion: v1\nkind: Pod\nmetadata: {name: !!str 1, namespace: ns}\nspec: {containers: []}\n",
        "- a\n- b\n",
        "[{\"kind\": \"List\", \"items\": [1, {\"kind\": \"Pod\"}]}]",
        "{\"kind\": \"List\", \"items\": {\"kind\": \"Pod\"}}",
        "{\"kind\": \"PodList\", \"items\": [{\"kind\": \"Pod\", \"metadata\": {\"name\": \"a\"}}]} {\"kind\": \"Pod\"}",
    ] {
        let whole = parse_whole("f", text, &options());
        // JSON documents one after another are no YAML: the whole-file reader, which finds
        // places by reading the text as YAML, has none for them.
        let placed = whole
            .as_ref()
            .is_ok_and(|f| f.notes.iter().all(|n| n.line_column.is_some()));
        if placed {
            assert_eq!(parse_cluster("f", text, &options()), whole, "{text}");
        } else {
            assert_eq!(
                without_places(parse_cluster("f", text, &options())),
                without_places(whole),
                "{text}"
            );
        }
    }
}

/// A file read, its notes' places left out.
fn without_places(read: Result<ClusterFile, IngestError>) -> Result<ClusterFile, IngestError> {
    read.map(|mut file| {
        for note in &mut file.notes {
            note.line_column = None;
        }
        file
    })
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig { cases: 300, ..Default::default() })]

    /// The example file with one stretch replaced: the fast readers and the whole-file reader
    /// agree on every object and every note.
    #[test]
    fn fast_and_whole_readers_agree_on_damaged_files(at in 0usize..100_000, len in 0usize..20, junk in "[ -~\\n]{0,20}") {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/cluster.yaml");
        let valid = std::fs::read_to_string(path).unwrap();
        let mut start = at % (valid.len() + 1);
        while !valid.is_char_boundary(start) {
            start -= 1;
        }
        let mut end = (start + len).min(valid.len());
        while !valid.is_char_boundary(end) {
            end -= 1;
        }
        let damaged = format!("{}{junk}{}", &valid[..start], &valid[end..]);
        proptest::prop_assert_eq!(
            parse_cluster("f", &damaged, &options()),
            parse_whole("f", &damaged, &options())
        );
    }
}

fn podgroup(spec: &str) -> String {
    format!(
        "apiVersion: scheduling.run.ai/v2alpha2\nkind: PodGroup\nmetadata: {{name: g, namespace: ns}}\nspec: {spec}\n"
    )
}

#[test]
fn sub_groups_are_read_with_their_parents_and_minimums() {
    let file = parse(&podgroup(
        "{minSubGroup: 1, subGroups: [{name: decode, minSubGroup: 2}, {name: leaders, parent: decode, minMember: 1, topologyConstraint: {requiredTopologyLevel: rack}}, {name: workers, parent: decode, minMember: 4}]}",
    ));
    let g = &file.snapshot.groups[0];
    assert_eq!(g.min_sub_group, Some(1));
    let read: Vec<String> = g
        .sub_groups
        .iter()
        .map(|s| {
            format!(
                "{} parent={:?} minMember={:?} minSubGroup={:?}",
                s.name, s.parent, s.min_member, s.min_sub_group
            )
        })
        .collect();
    assert_eq!(
        read,
        [
            "decode parent=None minMember=None minSubGroup=Some(2)",
            "leaders parent=Some(\"decode\") minMember=Some(1) minSubGroup=None",
            "workers parent=Some(\"decode\") minMember=Some(4) minSubGroup=None",
        ]
    );
    assert_eq!(g.sub_groups[1].topology_required.as_deref(), Some("rack"));
    assert!(file.notes.is_empty(), "{:?}", file.notes);
}

#[test]
fn sub_groups_kai_admission_refuses_skip_the_group() {
    let cases = [
        (
            "{subGroups: [{name: a, minMember: 1}, {name: a, minMember: 2}]}",
            "skipped PodGroup ns/g: spec.subGroups[1]: the name a is used twice; sub-group names must be unique",
        ),
        (
            "{subGroups: [{name: a, parent: b, minMember: 1}]}",
            "skipped PodGroup ns/g: sub-group a names parent b, which is not in spec.subGroups",
        ),
        (
            "{subGroups: [{name: a, parent: b}, {name: b, parent: a}]}",
            "skipped PodGroup ns/g: sub-group a is its own ancestor (a cycle of parents)",
        ),
        (
            "{minMember: 2, minSubGroup: 1, subGroups: [{name: a, minMember: 1}]}",
            "skipped PodGroup ns/g: spec.minMember (2) and spec.minSubGroup are both set; they exclude each other: keep minSubGroup to count sub-groups, or remove spec.subGroups",
        ),
        (
            "{subGroups: [{name: a, minMember: 1, minSubGroup: 1}]}",
            "skipped PodGroup ns/g: sub-group a: minMember and minSubGroup exclude each other",
        ),
        (
            "{subGroups: [{name: a, minMember: -1}]}",
            "skipped PodGroup ns/g: spec.subGroups[0].minMember is -1; it must be 0 or more",
        ),
    ];
    for (spec, note) in cases {
        assert_eq!(notes(&podgroup(spec)), [note], "{spec}");
    }
}

#[test]
fn sub_groups_kai_admission_warns_and_reads_as_kai_does() {
    let file = parse(&podgroup(
        "{minSubGroup: 3, subGroups: [{name: a}, {name: mid, minMember: 2}, {name: b, parent: mid, minSubGroup: 1}]}",
    ));
    assert_eq!(file.snapshot.groups.len(), 1, "warnings keep the group");
    let notes = texts(&file.notes);
    assert_eq!(
        notes,
        [
            "PodGroup ns/g: spec.minSubGroup (3) is more than its 2 top-level sub-groups: the group can never start (KAI's admission webhook warns the same)",
            "PodGroup ns/g: sub-group a has no minMember: its pods run as they fit, none required (KAI's admission webhook warns the same)",
            "PodGroup ns/g: sub-group mid has sub-groups under it, so its minMember is ignored; use minSubGroup (KAI's admission webhook warns the same)",
            "PodGroup ns/g: sub-group b has minSubGroup but no sub-groups under it: ignored (KAI's admission webhook warns the same)",
            "PodGroup ns/g: sub-group b has no minMember: its pods run as they fit, none required (KAI's admission webhook warns the same)",
        ]
    );
}

/// A pod of namespace `a` owned by `kind`/`owner`, bound to `node` or pending.
fn owned_pod(name: &str, kind: &str, owner: &str, node: Option<&str>) -> String {
    let node = node.map_or(String::new(), |n| format!("\n  nodeName: {n}"));
    format!(
        "---
apiVersion: v1
kind: Pod
metadata:
  name: {name}
  namespace: a
  labels: {{kai.scheduler/queue: a}}
  ownerReferences: [{{apiVersion: batch/v1, kind: {kind}, name: {owner}, uid: u-{owner}, controller: true}}]
spec:
  schedulerName: kai-scheduler{node}
  containers: [{{name: c, resources: {{limits: {{nvidia.com/gpu: 1}}}}}}]
"
    )
}

#[test]
fn a_pending_pod_whose_owner_the_caches_lack_waits_for_it() {
    // A JobSet's Job and pods arrive through separate watches: a cycle may see the pods before
    // the Job. Grouped without the Job each pod would be a group of one (a gang taken one pod
    // at a time), so where every Job is known to be read, a pending pod waits for its owner.
    let jobset = "---
apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
metadata: {name: train, namespace: a}
spec:
  replicatedJobs:
  - name: workers
    replicas: 1
    template: {spec: {parallelism: 2, completions: 2}}
";
    let job = "---
apiVersion: batch/v1
kind: Job
metadata:
  name: train-workers-0
  namespace: a
  ownerReferences: [{apiVersion: jobset.x-k8s.io/v1alpha2, kind: JobSet, name: train, uid: u-train, controller: true}]
";
    let pods = owned_pod("p0", "Job", "train-workers-0", None)
        + &owned_pod("p1", "Job", "train-workers-0", Some("n1"));
    let complete = Options {
        complete_owner_kinds: vec!["Job".into(), "JobSet".into()],
        ..options()
    };
    let read = |text: &str, options: &Options| parse_cluster("f", text, options).unwrap();
    let pods_of = |file: &ClusterFile| -> Vec<String> {
        file.snapshot.pods.iter().map(|p| p.name.clone()).collect()
    };

    // The Job is missing: the pending pod waits and says why; the bound one still holds its GPU.
    // Each note is at its pod's place (p0 from line 2, p1 from line 13, after p0's 11 lines),
    // p1's after p0 has left the pods.
    let file = read(&pods, &complete);
    assert_eq!(pods_of(&file), ["p1"]);
    assert_eq!(
        file.notes
            .iter()
            .map(|n| n.in_file("f"))
            .collect::<Vec<_>>(),
        [
            "f:2:1: skipped Pod a/p0: its owner Job a/train-workers-0 is not read yet, so its group is not known; it waits until the owner is read",
            "f:13:1: Pod a/p1: runs on node n1, which is not in the file: what it holds stays charged to its queue, and it is not placed again",
        ],
    );
    // The Job is there but its JobSet is not: still waiting.
    let file = read(&format!("{job}{pods}"), &complete);
    assert_eq!(pods_of(&file), ["p1"]);
    assert!(
        file.notes
            .iter()
            .any(|n| n.text.contains("its owner JobSet a/train is not read yet"))
    );
    // The whole chain: both pods in the JobSet's group.
    let file = read(&format!("{jobset}{job}{pods}"), &complete);
    assert_eq!(pods_of(&file), ["p0", "p1"]);
    assert!(
        file.snapshot
            .pods
            .iter()
            .all(|p| p.group.as_deref() == Some("pg-train"))
    );
    // A kind not known to be complete (a file): grouped as before, by the owner named.
    let file = read(&pods, &options());
    assert_eq!(pods_of(&file), ["p0", "p1"]);
    assert!(
        file.snapshot
            .pods
            .iter()
            .all(|p| p.group.as_deref() == Some("pg-train-workers-0"))
    );
}

#[test]
fn kais_gpu_reservation_pods_hold_no_gpu_and_shared_pods_name_their_devices() {
    // As KAI's binder leaves a node with one device shared by two pods and a pod on halves of
    // two devices (`resource_reservation.go: createResourceReservationPod`,
    // `updatePodGPUGroup`): a reservation pod per device, in its own namespace, requesting a
    // whole GPU and not scheduled by us.
    let reservation = |name: &str, group: &str, node: &str| {
        format!(
            "
apiVersion: v1
kind: Pod
metadata:
  name: {name}
  namespace: kai-resource-reservation
  labels: {{app: kai-resource-reservation, runai-gpu-group: {group}}}
  annotations: {{karpenter.sh/do-not-disrupt: \"true\"}}
spec:
  {node}
  containers:
  - name: resource-reservation
    image: registry/kai/resource-reservation:v0.9
    resources:
      limits: {{nvidia.com/gpu: \"1\"}}
      requests: {{nvidia.com/gpu: \"1\"}}
status: {{phase: Running}}
"
        )
    };
    let shared = |name: &str, labels: &str, devices: u32| {
        format!(
            "
apiVersion: v1
kind: Pod
metadata:
  name: {name}
  namespace: team
  labels: {{{labels}}}
  annotations: {{gpu-fraction: \"0.5\", gpu-fraction-num-devices: \"{devices}\"}}
spec:
  schedulerName: kai-scheduler
  nodeName: gpu-01
  containers: [{{name: c, resources: {{requests: {{cpu: 100m}}}}}}]
status: {{phase: Running}}
"
        )
    };
    let text = [
        NODE.to_string(),
        reservation("gpu-reservation-gpu-01-a", "a", "nodeName: gpu-01"),
        reservation("gpu-reservation-gpu-01-b", "b", "nodeName: gpu-01"),
        reservation("gpu-reservation-gpu-01-c", "c", "nodeName: gpu-01"),
        shared("one", "runai-gpu-group: a", 1),
        shared("two", "runai-gpu-group: a, app: notebook", 1),
        shared("split", "runai-gpu-group/b: b, runai-gpu-group/c: c", 2),
        shared("unnamed", "app: notebook", 1),
        reservation(
            "gpu-reservation-gpu-02-d",
            "d",
            "schedulerName: kai-scheduler",
        ),
    ]
    .join("---\n");
    let file = parse(&text);
    assert_eq!(
        texts(&file.notes),
        [
            "skipped Pod kai-resource-reservation/gpu-reservation-gpu-02-d: it is a GPU reservation pod of KAI's binder, which places it"
        ]
    );
    let pods = &file.snapshot.pods;
    let by_name = |n: &str| pods.iter().find(|p| p.name == n).expect(n);
    for name in ["gpu-reservation-gpu-01-a", "gpu-reservation-gpu-01-b"] {
        let r = by_name(name);
        assert!(r.foreign, "{name} is KAI's, not a job");
        assert_eq!(
            r.request.gpu, 0,
            "{name}'s device is counted by its shared pods"
        );
        assert!(
            r.gpu_groups().is_empty(),
            "a reservation pod shares nothing"
        );
    }
    assert_eq!(by_name("one").gpu_groups(), ["a"]);
    assert_eq!(by_name("two").gpu_groups(), ["a"]);
    assert_eq!(by_name("split").gpu_groups(), ["b", "c"]);
    assert_eq!(by_name("split").request.gpu, 1000);
    assert!(by_name("unnamed").gpu_groups().is_empty());
}

/// Objects as `kubectl get -o yaml` prints them on a cluster running NVIDIA's DRA driver
/// (k8s-dra-driver-gpu): its DeviceClass, a node's ResourceSlice, a claim made from a
/// template for one pod and a shared claim already allocated to a running pod.
const NVIDIA_DRA: &str = r#"
apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: Node
  metadata: {name: dgx-01, labels: {nvidia.com/gpu.present: "true"}}
  status:
    allocatable: {cpu: "64", memory: 512Gi, pods: "110"}
    conditions: [{type: Ready, status: "True"}]
- apiVersion: resource.k8s.io/v1
  kind: DeviceClass
  metadata:
    name: gpu.nvidia.com
    managedFields: [{manager: helm, operation: Update}]
  spec:
    selectors:
    - cel: {expression: "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'"}
- apiVersion: resource.k8s.io/v1
  kind: ResourceSlice
  metadata:
    name: dgx-01-gpu.nvidia.com-x7k2p
    ownerReferences: [{apiVersion: v1, kind: Node, name: dgx-01, uid: 5d1c7a0e}]
  spec:
    driver: gpu.nvidia.com
    nodeName: dgx-01
    pool: {generation: 1, name: dgx-01, resourceSliceCount: 1}
    devices:
    - name: gpu-0
      attributes:
        architecture: {string: Hopper}
        brand: {string: Nvidia}
        cudaComputeCapability: {version: 9.0.0}
        driverVersion: {version: 570.124.6}
        index: {int: 0}
        minor: {int: 0}
        productName: {string: NVIDIA H100 80GB HBM3}
        type: {string: gpu}
        uuid: {string: GPU-4cf8db2d-06c0-7d70-1a51-e59b25b2c16c}
        resource.kubernetes.io/pcieRoot: {string: pci0000:14}
      capacity:
        memory: {value: 80Gi}
    - name: gpu-1
      attributes:
        index: {int: 1}
        type: {string: gpu}
      capacity:
        memory: {value: 80Gi}
- apiVersion: resource.k8s.io/v1
  kind: ResourceClaim
  metadata:
    name: trainer-0-gpu-8sfxk
    namespace: ml
    annotations: {resource.kubernetes.io/pod-claim-name: gpu}
    ownerReferences: [{apiVersion: v1, kind: Pod, name: trainer-0, uid: 0b9f, controller: true}]
  spec:
    devices:
      requests:
      - name: gpu
        exactly: {deviceClassName: gpu.nvidia.com, allocationMode: ExactCount, count: 1}
  status: {}
- apiVersion: v1
  kind: Pod
  metadata: {name: trainer-0, namespace: ml, labels: {kai.scheduler/queue: team-a}}
  spec:
    schedulerName: kai-scheduler
    resourceClaims:
    - {name: gpu, resourceClaimTemplateName: one-gpu}
    containers:
    - name: c
      resources: {claims: [{name: gpu}], requests: {cpu: "1"}}
  status:
    phase: Pending
    resourceClaimStatuses:
    - {name: gpu, resourceClaimName: trainer-0-gpu-8sfxk}
- apiVersion: resource.k8s.io/v1
  kind: ResourceClaim
  metadata:
    name: shared-gpu
    namespace: ml
    labels: {kai.scheduler/queue: team-a}
  spec:
    devices:
      requests:
      - name: gpu
        exactly: {deviceClassName: gpu.nvidia.com}
  status:
    allocation:
      devices:
        results:
        - {device: gpu-1, driver: gpu.nvidia.com, pool: dgx-01, request: gpu}
      nodeSelector:
        nodeSelectorTerms:
        - matchFields:
          - {key: metadata.name, operator: In, values: [dgx-01]}
    reservedFor:
    - {resource: pods, name: server-0, uid: 77aa}
- apiVersion: v1
  kind: Pod
  metadata: {name: server-0, namespace: ml, labels: {kai.scheduler/queue: team-a}}
  spec:
    schedulerName: kai-scheduler
    nodeName: dgx-01
    resourceClaims: [{name: gpu, resourceClaimName: shared-gpu}]
    containers: [{name: c, resources: {claims: [{name: gpu}]}}]
  status: {phase: Running}
- apiVersion: v1
  kind: Pod
  metadata: {name: server-1, namespace: ml, labels: {kai.scheduler/queue: team-a}}
  spec:
    schedulerName: kai-scheduler
    resourceClaims: [{name: gpu, resourceClaimName: shared-gpu}]
    containers: [{name: c, resources: {claims: [{name: gpu}]}}]
  status: {phase: Pending}
"#;

#[test]
fn dra_claims_slices_and_classes_count_as_gpus() {
    let file = parse(NVIDIA_DRA);
    assert!(file.notes.is_empty(), "{:?}", file.notes);
    let s = &file.snapshot;
    // Two devices of a GPU driver's slice make two GPUs on the node (KAI's populateDRAGPUs).
    assert_eq!(s.nodes[0].dra_gpus, 2);
    assert_eq!(s.nodes[0].allocatable.gpu, 2000);
    assert_eq!(s.dra.classes.len(), 1);
    assert_eq!(s.dra.classes[0].selectors.len(), 1);
    let slice = &s.dra.slices[0];
    assert_eq!(
        (
            slice.node.as_deref(),
            slice.pool.as_str(),
            slice.devices.len()
        ),
        (Some("dgx-01"), "dgx-01", 2)
    );
    assert_eq!(
        slice.devices[0].attributes.get("driverVersion"),
        Some(&crate::dra::Attribute::Version("570.124.6".into()))
    );
    let pod = |name: &str| s.pods.iter().find(|p| p.name == name).unwrap();
    // The template's claim is found through the pod's status; it asks one GPU.
    let trainer = pod("trainer-0");
    assert_eq!(
        trainer.constraints.claims,
        vec![crate::dra::PodClaim {
            name: "gpu".into(),
            claim: Some("trainer-0-gpu-8sfxk".into()),
            template: true,
        }]
    );
    assert_eq!(trainer.request.gpu, 1000);
    // The shared claim's device is counted once on its node: for the running pod, not again
    // for the pending one that shares it (dedupSharedDRAGpus).
    assert_eq!(pod("server-0").request.gpu, 1000);
    assert_eq!(pod("server-1").request.gpu, 0);
    let shared = s.dra.claim("ml", "shared-gpu").unwrap();
    let allocation = shared.allocation.as_ref().unwrap();
    assert_eq!(allocation.node.as_deref(), Some("dgx-01"));
    assert_eq!(allocation.devices[0].device, "gpu-1");
    assert_eq!(shared.reserved_for, vec!["server-0".to_string()]);
}

#[test]
fn a_dra_object_that_cannot_be_read_is_skipped_with_a_note() {
    let note = skipped(
        "apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: c, namespace: ml}
spec:
  devices:
    requests:
    - name: gpu
      exactly: {deviceClassName: gpu.nvidia.com, allocationMode: Most}
",
    );
    // A claim is no longer skipped (this expected "skipped ResourceClaim ml/c: …" until a
    // review found that skipping an allocated one shows its devices free): it is kept, its
    // requests unread, and its pods wait (`cycle/dra_tests.rs: a_claim_that_cannot_be_read_…`).
    assert_eq!(
        note,
        "ResourceClaim ml/c: spec.devices.requests[0].exactly.allocationMode: `Most` is not ExactCount or All; kept for the devices its allocation holds, and its pods wait until it is fixed"
    );
    let note = skipped(
        "apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: n1-gpus}
spec:
  driver: gpu.nvidia.com
  nodeName: n1
  pool: {name: n1, generation: two, resourceSliceCount: 1}
",
    );
    assert_eq!(
        note,
        "skipped ResourceSlice n1-gpus: spec.pool.generation: expected an integer, found \"two\""
    );
}

#[test]
fn a_claim_with_match_attribute_constraints_is_read_as_one_kai_policy_cannot_place() {
    let file = parse(
        "apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: pair, namespace: ml}
spec:
  devices:
    requests:
    - name: gpus
      exactly: {deviceClassName: gpu.nvidia.com, count: 2}
    constraints:
    - {requests: [gpus], matchAttribute: gpu.nvidia.com/parentUUID}
",
    );
    let claim = file.snapshot.dra.claim("ml", "pair").unwrap();
    assert_eq!(
        claim.unsupported.as_deref(),
        Some("spec.devices.constraints (matchAttribute)")
    );
}

#[test]
fn a_claim_setting_admin_access_even_to_false_is_read_as_one_kai_refuses() {
    // KAI's allocator runs without its admin-access feature and refuses any request that sets
    // the field (`hasAdminAccess`).
    let file = parse(
        "apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: watch, namespace: ml}
spec:
  devices:
    requests:
    - name: gpus
      exactly: {deviceClassName: gpu.nvidia.com, adminAccess: false}
",
    );
    let claim = file.snapshot.dra.claim("ml", "watch").unwrap();
    assert_eq!(
        claim.unsupported.as_deref(),
        Some("adminAccess in request gpus")
    );
}

#[test]
fn node_resource_topologies_give_nodes_zones_and_pods_their_numa_requests() {
    // An older NFD: no attributes, the deprecated policy list only; zones listed out of order,
    // a socket zone beside them.
    let file = parse(
        r#"
apiVersion: v1
kind: Node
metadata: {name: n1}
status: {allocatable: {cpu: "64", memory: 256Gi, nvidia.com/gpu: "4"}}
---
apiVersion: topology.node.k8s.io/v1alpha2
kind: NodeResourceTopology
metadata: {name: n1}
topologyPolicies: ["RestrictedPodLevel"]
zones:
- {name: socket-0, type: Socket}
- name: node-1
  type: Node
  resources: [{name: cpu, allocatable: "30", available: "2"}, {name: nvidia.com/gpu, allocatable: "2", available: "2"}]
- name: node-0
  type: Node
  resources: [{name: cpu, allocatable: "30", available: "30"}, {name: nvidia.com/gpu, allocatable: "2", available: "1"}]
---
apiVersion: topology.node.k8s.io/v1alpha2
kind: NodeResourceTopology
metadata: {name: gone}
zones: [{name: node-0, type: Node}]
---
apiVersion: v1
kind: Pod
metadata:
  name: guaranteed
  annotations:
    kai.scheduler/numa-placement-observed: 'not json'
    kai.scheduler/numa-placement-predicted: '[{"zone":"node-1","amount":{"cpu":"4"}}]'
spec:
  nodeName: n1
  initContainers:
  - {name: proxy, restartPolicy: Always, resources: {requests: {cpu: 1500m, memory: 1Gi}, limits: {cpu: 1500m, memory: 1Gi}}}
  - {name: fetch, resources: {requests: {cpu: "8", memory: 1Gi}, limits: {cpu: "8", memory: 1Gi}}}
  containers:
  - {name: main, resources: {requests: {cpu: "4", memory: 8Gi, nvidia.com/gpu: "1"}, limits: {cpu: "4", memory: 8Gi, nvidia.com/gpu: "1"}}}
---
apiVersion: v1
kind: Pod
metadata: {name: burstable-gpu}
spec:
  schedulerName: kai-scheduler
  containers:
  - {name: main, resources: {requests: {cpu: "4"}, limits: {nvidia.com/gpu: "1"}}}
status: {qosClass: Burstable}
---
apiVersion: v1
kind: Pod
metadata: {name: status-says}
spec:
  schedulerName: kai-scheduler
  containers:
  - {name: main, resources: {requests: {cpu: "4", memory: 1Gi, nvidia.com/gpu: "1"}, limits: {cpu: "4", memory: 1Gi, nvidia.com/gpu: "1"}}}
status: {qosClass: Burstable}
---
apiVersion: v1
kind: Pod
metadata: {name: burstable-cpu}
spec:
  schedulerName: kai-scheduler
  containers:
  - {name: main, resources: {requests: {cpu: "4"}}}
"#,
    );
    let n1 = file.snapshot.nodes[0]
        .numa
        .as_deref()
        .expect("n1 has zones");
    assert_eq!(n1.policy, crate::numa::Policy::Restricted);
    assert_eq!(n1.scope, crate::numa::Scope::Pod);
    let zones: Vec<&str> = n1.zones.iter().map(|z| z.name.as_str()).collect();
    assert_eq!(zones, ["node-0", "node-1"]);
    assert_eq!(n1.zones[0].allocatable["cpu"], 30_000);
    assert_eq!(n1.zones[0].available["gpu"], 1);
    assert_eq!(n1.names["gpu"], "nvidia.com/gpu");
    let pod = |name: &str| file.snapshot.pods.iter().find(|p| p.name == name).unwrap();
    // No status: Guaranteed from requests equal to limits. The sidecar's 1500m stays in the
    // shared pool; the init container (8) runs alone beside it, the app (4) after: the pod
    // asks max(8, 4) whole CPUs.
    let g = pod("guaranteed");
    let numa = g.constraints.numa.as_deref().unwrap();
    assert!(numa.guaranteed);
    assert_eq!(numa.asked("cpu"), 8_000);
    assert_eq!(numa.asked("gpu"), 1);
    // Memory: the app's 8Gi beside the sidecar's 1Gi, above the init container's 1Gi + 1Gi.
    assert_eq!(numa.asked("memory"), 9 << 30);
    assert_eq!(numa.concurrent.len(), 2);
    // No CPU of the sidecar is pinned: an amount of zero is not kept (every reader skips it).
    assert!(numa.concurrent[0].iter().all(|(name, _)| name != "cpu"));
    assert_eq!(crate::numa::amount(&numa.serial[0], "cpu"), 8_000);
    // The observed record is malformed: the predicted one is read.
    assert_eq!(g.numa_zones.as_ref().unwrap()[0].zone, "node-1");
    // Burstable: only its GPU is aligned; asking only CPU, nothing is.
    let b = pod("burstable-gpu").constraints.numa.as_deref().unwrap();
    assert!(!b.guaranteed);
    assert_eq!(*b.pod, [("gpu".to_string(), 1)]);
    assert!(pod("burstable-cpu").constraints.numa.is_none());
    // The status's class is read as KAI reads it, even where the spec would say otherwise.
    assert!(
        !pod("status-says")
            .constraints
            .numa
            .as_deref()
            .unwrap()
            .guaranteed
    );
}
