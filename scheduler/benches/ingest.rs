//! How long `simulate --cluster` takes to read a large cluster file, and how much memory: a
//! generated `kubectl get nodes,pods -A -o yaml` (and `-o json`) List of 5,000 nodes and 50,000
//! pods with the metadata a real cluster carries (managed fields, owner references, labels,
//! annotations, volumes, environment, conditions, container statuses).
//!
//! `cargo bench -p kai-scheduler --bench ingest` prints one line per format: file size, wall
//! time of `ingest::read_cluster` (from disk, as the CLI reads it) and its peak memory (the
//! resident high-water mark of a fresh process that does nothing but the read, less what that
//! process held before it; Linux only). Knobs:
//! `KAI_BENCH_NODES`, `KAI_BENCH_PODS`, `KAI_BENCH_ITERS` (timed reads per format, default 1),
//! `KAI_BENCH_FORMATS` (`yaml,json` by default).
//! The file is generated in a temporary folder and deleted afterwards.

use std::fmt::Write as _;
use std::time::Instant;

use kai_scheduler::ingest::{Options, read_cluster};

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name).map_or(default, |v| {
        v.parse()
            .unwrap_or_else(|_| panic!("{name} must be a whole number, not {v:?}"))
    })
}

const NODE: &str = r#"- apiVersion: v1
  kind: Node
  metadata:
    annotations:
      node.alpha.kubernetes.io/ttl: "0"
      nfd.node.kubernetes.io/feature-labels: cpu-cpuid.AVX512F,cpu-hardware_multithreading,pci-10de.present
      volumes.kubernetes.io/controller-managed-attach-detach: "true"
    creationTimestamp: "2026-01-05T09:00:00Z"
    labels:
      beta.kubernetes.io/arch: amd64
      kubernetes.io/hostname: gpu-{i}
      kubernetes.io/os: linux
      node.kubernetes.io/instance-type: p5.48xlarge
      nvidia.com/gpu.count: "8"
      nvidia.com/gpu.memory: "81559"
      nvidia.com/gpu.product: NVIDIA-H100-80GB-HBM3
      nvidia.com/gpu.clique: clique-{clique}
      topology.kubernetes.io/zone: zone-{zone}
    managedFields:
    - apiVersion: v1
      fieldsType: FieldsV1
      fieldsV1:
        f:metadata:
          f:labels:
            f:nvidia.com/gpu.count: {}
            f:nvidia.com/gpu.product: {}
      manager: gpu-feature-discovery
      operation: Update
      time: "2026-01-05T09:01:00Z"
    name: gpu-{i}
    resourceVersion: "{rv}"
    uid: 6f1c{i:08}-0000-4000-8000-000000000000
  spec:
    podCIDR: 10.{a}.{b}.0/24
    providerID: aws:///us-east-1a/i-0{i:016}
{taints}  status:
    addresses:
    - address: 10.0.{a}.{b}
      type: InternalIP
    - address: gpu-{i}
      type: Hostname
    allocatable:
      cpu: 191450m
      ephemeral-storage: "3532861558526"
      hugepages-1Gi: "0"
      hugepages-2Mi: "0"
      memory: 2052470232Ki
      nvidia.com/gpu: "8"
      pods: "110"
      rdma/ib: "8"
    capacity:
      cpu: "192"
      ephemeral-storage: 3833438204Ki
      memory: 2097152000Ki
      nvidia.com/gpu: "8"
      pods: "110"
    conditions:
    - lastHeartbeatTime: "2026-11-21T09:00:00Z"
      lastTransitionTime: "2026-01-05T09:00:00Z"
      message: kubelet has sufficient memory available
      reason: KubeletHasSufficientMemory
      status: "False"
      type: MemoryPressure
    - lastHeartbeatTime: "2026-11-21T09:00:00Z"
      lastTransitionTime: "2026-01-05T09:00:00Z"
      message: kubelet is posting ready status
      reason: KubeletReady
      status: "{ready}"
      type: Ready
    images:
    - names:
      - nvcr.io/nvidia/pytorch@sha256:0f5e8c8b3a1d4e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b1c2d3e4f5a6b7c8d9e0f
      - nvcr.io/nvidia/pytorch:24.05-py3
      sizeBytes: 9876543210
    nodeInfo:
      architecture: amd64
      containerRuntimeVersion: containerd://1.7.20
      kernelVersion: 6.1.0-18-amd64
      kubeletVersion: v1.31.2
      osImage: Ubuntu 22.04.4 LTS
"#;

const POD: &str = r#"- apiVersion: v1
  kind: Pod
  metadata:
    annotations:
      kubectl.kubernetes.io/default-container: trainer
      pod-group-name: pg-{job}
    creationTimestamp: "2026-11-21T08:{m:02}:00Z"
    generateName: {job}-worker-
    labels:
      kai.scheduler/queue: team-{team}
      training.kubeflow.org/job-name: {job}
      training.kubeflow.org/replica-index: "{k}"
      training.kubeflow.org/replica-type: worker
      app.kubernetes.io/part-of: llm-pretraining
    managedFields:
    - apiVersion: v1
      fieldsType: FieldsV1
      fieldsV1:
        f:metadata:
          f:labels:
            f:training.kubeflow.org/job-name: {}
        f:spec:
          f:containers:
            k:{"name":"trainer"}:
              f:image: {}
              f:resources: {}
      manager: training-operator
      operation: Update
      time: "2026-11-21T08:{m:02}:00Z"
    name: {job}-worker-{k}
    namespace: team-{team}
    ownerReferences:
    - apiVersion: kubeflow.org/v1
      blockOwnerDeletion: true
      controller: true
      kind: PyTorchJob
      name: {job}
      uid: 1d2e{p:08}-0000-4000-8000-000000000000
    resourceVersion: "{rv}"
    uid: 9a8b{p:08}-0000-4000-8000-000000000000
  spec:
    containers:
    - args:
      - --nnodes=8
      - --nproc-per-node=8
      - train.py
      command:
      - torchrun
      env:
      - name: MASTER_ADDR
        value: {job}-master-0
      - name: MASTER_PORT
        value: "23456"
      - name: NCCL_DEBUG
        value: WARN
      image: nvcr.io/nvidia/pytorch:24.05-py3
      imagePullPolicy: IfNotPresent
      name: trainer
      resources:
        limits:
          nvidia.com/gpu: "{gpus}"
          rdma/ib: "1"
        requests:
          cpu: "{cpu}"
          memory: {mem}Gi
          nvidia.com/gpu: "{gpus}"
          rdma/ib: "1"
      terminationMessagePath: /dev/termination-log
      volumeMounts:
      - mountPath: /dev/shm
        name: dshm
      - mountPath: /var/run/secrets/kubernetes.io/serviceaccount
        name: kube-api-access-{k}
        readOnly: true
    dnsPolicy: ClusterFirst
    enableServiceLinks: true
{node}    priorityClassName: train
    restartPolicy: OnFailure
    schedulerName: kai-scheduler
    securityContext: {}
    serviceAccountName: default
    terminationGracePeriodSeconds: 30
    tolerations:
    - effect: NoExecute
      key: node.kubernetes.io/not-ready
      operator: Exists
      tolerationSeconds: 300
    - effect: NoSchedule
      key: nvidia.com/gpu
      operator: Exists
    volumes:
    - emptyDir:
        medium: Memory
        sizeLimit: 64Gi
      name: dshm
    - name: kube-api-access-{k}
      projected:
        sources:
        - serviceAccountToken:
            expirationSeconds: 3607
            path: token
  status:
    conditions:
    - lastTransitionTime: "2026-11-21T08:{m:02}:05Z"
      status: "True"
      type: PodScheduled
{status}"#;

/// Fills `{name}` placeholders (`{name:08}` zero-pads numbers); `{}` is left as it is.
fn fill(template: &str, values: &[(&str, String)], out: &mut String) {
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let close = open + rest[open..].find('}').expect("a closing brace");
        let inner = &rest[open + 1..close];
        let (name, width) = inner.split_once(':').unwrap_or((inner, ""));
        match values.iter().find(|(n, _)| *n == name) {
            Some((_, v)) => {
                let width: usize = width.trim_start_matches('0').parse().unwrap_or(0);
                let _ = write!(out, "{v:0>width$}");
            }
            None => out.push_str(&rest[open..=close]),
        }
        rest = &rest[close + 1..];
    }
    out.push_str(rest);
}

/// The cluster as `kubectl get nodes,pods -A -o yaml` prints it.
fn cluster_yaml(nodes: usize, pods: usize) -> String {
    let mut out = String::with_capacity(pods * 4500 + nodes * 3500);
    out.push_str("apiVersion: v1\nitems:\n");
    for i in 0..nodes {
        let taints = if i % 50 == 7 {
            "    taints:\n    - effect: NoSchedule\n      key: dedicated\n      value: inference\n"
        } else {
            ""
        };
        let ready = if i % 100 == 3 { "Unknown" } else { "True" };
        fill(
            NODE,
            &[
                ("i", i.to_string()),
                ("clique", (i / 16).to_string()),
                ("zone", (i % 4).to_string()),
                ("rv", (1_000_000 + i).to_string()),
                ("a", (i / 250).to_string()),
                ("b", (i % 250).to_string()),
                ("taints", taints.to_string()),
                ("ready", ready.to_string()),
            ],
            &mut out,
        );
    }
    // Pods in gangs of 8 on 8-GPU nodes; four in five run, the rest wait.
    for p in 0..pods {
        let job = format!("pretrain-{}", p / 8);
        let running = (p / 8) % 5 != 4 && p / 8 < nodes;
        let node = if running {
            format!("    nodeName: gpu-{}\n", p / 8)
        } else {
            String::new()
        };
        let status = if running {
            "    containerStatuses:\n    - containerID: containerd://4b1e\n      image: nvcr.io/nvidia/pytorch:24.05-py3\n      name: trainer\n      ready: true\n      restartCount: 0\n      started: true\n      state:\n        running:\n          startedAt: \"2026-11-21T08:30:00Z\"\n    phase: Running\n    podIP: 10.1.2.3\n    qosClass: Burstable\n    startTime: \"2026-11-21T08:30:00Z\"\n"
        } else {
            "    phase: Pending\n    qosClass: Burstable\n"
        };
        fill(
            POD,
            &[
                ("job", job),
                ("k", (p % 8).to_string()),
                ("p", p.to_string()),
                ("m", ((p / 8) % 60).to_string()),
                ("team", ((p / 8) % 40).to_string()),
                ("rv", (2_000_000 + p).to_string()),
                ("gpus", "1".to_string()),
                ("cpu", "22".to_string()),
                ("mem", "240".to_string()),
                ("node", node),
                ("status", status.to_string()),
            ],
            &mut out,
        );
    }
    out.push_str("kind: List\nmetadata:\n  resourceVersion: \"\"\n");
    out
}

/// The process's peak resident memory since the last reset, in bytes (Linux).
fn peak_rss() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// Resets the peak so that it measures only what follows (Linux: `clear_refs` value 5).
fn reset_peak() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

/// Set in the child process that reads one file: its path.
const READ_ONE: &str = "KAI_BENCH_READ_ONE";

/// The child's work: read the file once, print the seconds it took and the bytes of resident
/// memory the read added at its peak.
fn read_one(path: &str, nodes: usize, pods: usize) {
    let options = Options {
        queue_label: "kai.scheduler/queue".into(),
        scheduler_name: Some("kai-scheduler".into()),
        origin: None,
        complete_owner_kinds: Vec::new(),
    };
    reset_peak();
    let before = peak_rss().unwrap_or(0);
    let start = Instant::now();
    let file =
        read_cluster(std::path::Path::new(path), &options).expect("the generated file reads");
    let took = start.elapsed().as_secs_f64();
    assert_eq!(
        (file.snapshot.nodes.len(), file.snapshot.pods.len()),
        (nodes, pods),
        "every object is read"
    );
    println!("{took} {}", peak_rss().unwrap_or(0).saturating_sub(before));
}

fn main() {
    let nodes = env_usize("KAI_BENCH_NODES", 5_000);
    let pods = env_usize("KAI_BENCH_PODS", 50_000);
    if let Ok(path) = std::env::var(READ_ONE) {
        return read_one(&path, nodes, pods);
    }
    let iters = env_usize("KAI_BENCH_ITERS", 1).max(1);
    let dir = tempfile::tempdir().expect("a temporary folder");
    let yaml_path = dir.path().join("cluster.yaml");
    let json_path = dir.path().join("cluster.json");
    {
        let yaml = cluster_yaml(nodes, pods);
        std::fs::write(&yaml_path, &yaml).expect("write the YAML file");
        let value: serde_json::Value = serde_saphyr::from_str_with_options(&yaml, {
            let mut o = serde_saphyr::Options::default();
            let mut b = serde_saphyr::Budget::default();
            b.max_events = usize::MAX;
            b.max_nodes = usize::MAX;
            b.max_total_scalar_bytes = usize::MAX;
            o.budget = Some(b);
            o
        })
        .expect("the generated YAML reads");
        std::fs::write(&json_path, serde_json::to_vec_pretty(&value).expect("JSON"))
            .expect("write the JSON file");
    }
    println!("ingest: {nodes} nodes, {pods} pods (kubectl List with full metadata)");
    // Each read runs in a fresh process: memory this one kept from generating the files (the
    // whole YAML as a tree) would otherwise absorb the read's allocations and hide them.
    let formats = std::env::var("KAI_BENCH_FORMATS").unwrap_or_else(|_| "yaml,json".into());
    for (format, path) in [("yaml", &yaml_path), ("json", &json_path)] {
        if !formats.split(',').any(|f| f == format) {
            continue;
        }
        let size = std::fs::metadata(path).expect("the file exists").len();
        let mut times = Vec::new();
        let mut peak = 0;
        for _ in 0..iters {
            let out = std::process::Command::new(std::env::current_exe().expect("this bench"))
                .env(READ_ONE, path)
                .env("KAI_BENCH_NODES", nodes.to_string())
                .env("KAI_BENCH_PODS", pods.to_string())
                .output()
                .expect("the bench runs itself");
            let text = String::from_utf8_lossy(&out.stdout);
            assert!(
                out.status.success(),
                "the read failed: {text}{}",
                String::from_utf8_lossy(&out.stderr)
            );
            let (took, added) = text
                .trim()
                .split_once(' ')
                .and_then(|(t, p)| Some((t.parse::<f64>().ok()?, p.parse::<u64>().ok()?)))
                .unwrap_or_else(|| panic!("the read printed {text:?}"));
            times.push(took);
            peak = peak.max(added);
        }
        times.sort_by(f64::total_cmp);
        println!(
            "{format:>5}  {:>7.1} MB  median {:>6.2} s  (min {:.2} s)  peak +{:.0} MB = {:.1}x the file",
            size as f64 / 1e6,
            times[times.len() / 2],
            times[0],
            peak as f64 / 1e6,
            peak as f64 / size as f64
        );
    }
}
