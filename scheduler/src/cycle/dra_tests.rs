//! DRA in the cycle: a claim's devices are never given to two claims, whatever the cycle tries
//! and undoes (the review of the first DRA cut found both cases below giving a device twice).

use super::tests::{cycle, evicted, node, pod, policy, running};
use super::*;
use crate::cluster::{Node, Pod};
use crate::dra::{
    AllocatedDevice, Allocation, Device, DeviceClass, DeviceRequest, Dra, Mode, PodClaim,
    ResourceClaim, ResourceSlice,
};

const TEAM: &str = r#"
priority-class "prod" value=1000 preemptible=#false
priority-class "train" value=50
queue "b" { gpu quota=8; namespaces "b" }
"#;

/// n1 with no device-plugin GPU and two DRA GPUs, gpu-0 and gpu-1.
fn dra_node(cpu: i64) -> (Node, ResourceSlice) {
    let mut n = node("n1", 0);
    n.allocatable.cpu = cpu;
    let slice = ResourceSlice {
        name: "n1-gpus".into(),
        node: Some("n1".into()),
        driver: "gpu.nvidia.com".into(),
        pool: "n1".into(),
        generation: 0,
        slice_count: Some(1),
        all_nodes: false,
        node_selector: Vec::new(),
        devices: ["gpu-0", "gpu-1"]
            .map(|d| Device {
                name: d.into(),
                attributes: Default::default(),
                unsupported: None,
            })
            .to_vec(),
    };
    (n, slice)
}

/// A claim of one GPU, allocated `on` a device of n1 and reserved for `for_pod` when given.
fn claim(name: &str, on: Option<&str>, for_pod: Option<&str>) -> ResourceClaim {
    ResourceClaim {
        namespace: "b".into(),
        name: name.into(),
        requests: vec![DeviceRequest {
            name: "gpu".into(),
            class: "gpu.nvidia.com".into(),
            mode: Mode::Exact(1),
            selectors: Vec::new(),
        }],
        allocation: on.map(|d| Allocation {
            node: Some("n1".into()),
            devices: vec![AllocatedDevice {
                request: "gpu".into(),
                driver: "gpu.nvidia.com".into(),
                pool: "n1".into(),
                device: d.into(),
            }],
            selector: Vec::new(),
        }),
        reserved_for: for_pod.into_iter().map(str::to_string).collect(),
        ..ResourceClaim::default()
    }
}

fn using(mut p: Pod, claim: &str) -> Pod {
    p.constraints.claims = vec![PodClaim {
        name: "gpu".into(),
        claim: Some(claim.into()),
        template: true,
    }];
    p
}

fn snapshot(
    nodes: Vec<Node>,
    slice: ResourceSlice,
    claims: Vec<ResourceClaim>,
    pods: Vec<Pod>,
    groups: Vec<crate::cluster::PodGroup>,
) -> Snapshot {
    let mut s = Snapshot {
        nodes,
        pods,
        groups,
        dra: Dra {
            classes: vec![DeviceClass {
                name: "gpu.nvidia.com".into(),
                selectors: Vec::new(),
            }],
            slices: vec![slice],
            claims,
        },
        ..Snapshot::default()
    };
    crate::dra::count_gpus(&mut s);
    s
}

/// A running pod of class `train` on n1 asking `cores` CPU, made at `created`, using `claim`
/// when given.
fn victim(name: &str, cores: i64, created: Time, claim: Option<&str>) -> Pod {
    let mut p = pod("b", name, 0);
    p.priority_class = Some("train".into());
    p.created = created;
    p.request.cpu = cores * 1000;
    let p = match claim {
        Some(c) => using(p, c),
        None => p,
    };
    running(p, "n1", created)
}

/// The preemptor: class `prod`, 3 CPU, its own claim.
fn preemptor() -> Pod {
    let mut prod = using(pod("b", "prod", 0), "c-prod");
    prod.priority_class = Some("prod".into());
    prod.request.cpu = 3000;
    prod
}

/// The device the cycle left `claim` holding, if it changed it.
fn device_of(r: &CycleResult, claim: &str) -> Option<String> {
    let c = r.claims.iter().find(|c| c.name == claim)?;
    Some(c.allocation.as_ref()?.devices[0].device.clone())
}

#[test]
fn a_claim_reserved_for_a_pending_pod_keeps_its_device_when_the_pods_gang_cannot_start() {
    // p's claim holds gpu-0 and is reserved for p (its claim was written, its binding was
    // not). p's gang cannot start: p2 asks more CPU than the node has. q comes after and gets
    // the other device, never gpu-0.
    let (n1, slice) = dra_node(64_000);
    let mut p2 = pod("b", "p2", 0);
    p2.request.cpu = 100_000;
    let (mut members, group) = super::tests::gang("b", "g", 2, 0, 2);
    members[0] = using(
        Pod {
            group: Some("g".into()),
            ..pod("b", "p", 0)
        },
        "c-p",
    );
    members[1] = Pod {
        group: Some("g".into()),
        ..p2
    };
    let mut q = using(pod("b", "q", 0), "c-q");
    q.created = 5;
    members.push(q);
    let s = snapshot(
        vec![n1],
        slice,
        vec![
            claim("c-p", Some("gpu-0"), Some("p")),
            claim("c-q", None, None),
        ],
        members,
        vec![group],
    );
    let r = cycle(&policy(TEAM), &s, 10);
    assert!(
        r.decisions.contains(&Decision::Bind {
            pod: "b/q".into(),
            node: "n1".into()
        }),
        "{:#?}",
        r.decisions
    );
    assert_eq!(device_of(&r, "c-q").as_deref(), Some("gpu-1"));
    assert!(r.claims.iter().all(|c| c.name != "c-p"), "{:#?}", r.claims);
}

#[test]
fn a_victim_put_back_keeps_its_claims_device_and_the_preemptor_takes_another() {
    // n1 has 4 cores. v1 (1 core) holds gpu-0 through its claim; v2 (3 cores) holds no device.
    // Taking v1 frees gpu-0 and a core, not enough; v2's three cores are, and v1 goes back.
    // The preemptor needs 3 cores and a GPU: v2 goes, v1 stays with gpu-0, and the preemptor's
    // claim gets gpu-1.
    let (n1, slice) = dra_node(4_000);
    // v1 is the newer: the first victim tried, whose device is freed before v2 is taken.
    let v1 = victim("v1", 1, 5, Some("c-v1"));
    let v2 = victim("v2", 3, 0, None);
    let prod = preemptor();
    let s = snapshot(
        vec![n1],
        slice,
        vec![
            claim("c-v1", Some("gpu-0"), Some("v1")),
            claim("c-prod", None, None),
        ],
        vec![v1, v2, prod],
        vec![],
    );
    let r = cycle(&policy(TEAM), &s, 10);
    let gone: Vec<String> = evicted(&r).into_iter().map(|(p, _)| p).collect();
    assert_eq!(gone, ["b/v2"], "{:#?}", r.decisions);
    assert_eq!(
        device_of(&r, "c-prod").as_deref(),
        Some("gpu-1"),
        "{:#?}",
        r.claims
    );
    assert!(r.claims.iter().all(|c| c.name != "c-v1"), "{:#?}", r.claims);
}

#[test]
fn a_victim_whose_only_device_the_preemptor_needs_is_evicted_not_put_back_without_it() {
    // One NIC on n1 (not a GPU class: KAI's resource vectors do not count it), held by v1's
    // claim. The preemptor needs 3 cores and the NIC: v1 (the newer) and v2 both go, since v1
    // cannot come back without the NIC its claim keeps on the API server.
    let (mut n1, _) = dra_node(4_000);
    n1.allocatable.gpu = 0;
    let slice = ResourceSlice {
        name: "n1-nics".into(),
        node: Some("n1".into()),
        driver: "rdma.example.com".into(),
        pool: "n1".into(),
        generation: 0,
        slice_count: Some(1),
        all_nodes: false,
        node_selector: Vec::new(),
        devices: vec![Device {
            name: "nic-0".into(),
            attributes: Default::default(),
            unsupported: None,
        }],
    };
    let nic = |name: &str, on: Option<&str>, for_pod: Option<&str>| {
        let mut c = claim(name, on, for_pod);
        c.requests[0].class = "nic.example.com".into();
        if let Some(a) = &mut c.allocation {
            a.devices[0].driver = "rdma.example.com".into();
        }
        c
    };
    let v1 = victim("v1", 1, 5, Some("c-v1"));
    let v2 = victim("v2", 3, 0, None);
    let prod = preemptor();
    let mut s = snapshot(
        vec![n1],
        slice,
        vec![
            nic("c-v1", Some("nic-0"), Some("v1")),
            nic("c-prod", None, None),
        ],
        vec![v1, v2, prod],
        vec![],
    );
    s.dra.classes = vec![DeviceClass {
        name: "nic.example.com".into(),
        selectors: Vec::new(),
    }];
    let r = cycle(&policy(TEAM), &s, 10);
    let mut gone: Vec<String> = evicted(&r).into_iter().map(|(p, _)| p).collect();
    gone.sort();
    assert_eq!(gone, ["b/v1", "b/v2"], "{:#?}", r.decisions);
    assert_eq!(
        device_of(&r, "c-prod").as_deref(),
        Some("nic-0"),
        "{:#?}",
        r.claims
    );
}

/// A pending pod of queue b asking `cpu` cores, and the claim its template made for its
/// `resourceClaims` entry `entry` (named `<pod>-<entry>`, one request `entry` of `request`,
/// with `status`), as `kubectl get -o yaml` prints them.
fn claimed_pod(name: &str, entry: &str, request: &str, status: &str, cpu: &str) -> String {
    format!(
        r#"
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata:
  name: {name}-{entry}
  namespace: b
  annotations: {{resource.kubernetes.io/pod-claim-name: {entry}}}
  ownerReferences: [{{apiVersion: v1, kind: Pod, name: {name}, uid: uid-{name}, controller: true}}]
spec:
  devices:
    requests:
    - name: {entry}
      exactly: {request}
status: {status}
---
apiVersion: v1
kind: Pod
metadata:
  name: {name}
  namespace: b
  creationTimestamp: '2026-11-21T08:00:00Z'
spec:
  schedulerName: kai-scheduler
  resourceClaims:
  - {{name: {entry}, resourceClaimTemplateName: {name}-template}}
  containers:
  - name: main
    image: registry.example/app:1
    resources:
      claims: [{{name: {entry}}}]
      requests: {{cpu: "{cpu}", memory: 1Gi}}
status:
  phase: Pending
  resourceClaimStatuses:
  - {{name: {entry}, resourceClaimName: {name}-{entry}}}
"#
    )
}

/// Pools as the upstream allocator gathers them (`pools_stable.go: GatherPools`), from
/// ResourceSlices shaped as `kubectl get resourceslices -o yaml` prints them while a DRA driver
/// republishes its pool.
mod pools {
    use super::super::tests::{binds, cycle, pending_reason, policy};
    use super::TEAM;
    use crate::ingest::{Options, parse_cluster};

    const NODE: &str = r#"
apiVersion: v1
kind: Node
metadata:
  name: n1
  labels: {kubernetes.io/hostname: n1, nvidia.com/gpu.present: "true"}
status:
  allocatable: {cpu: "64", memory: 512Gi, pods: "110"}
  conditions: [{type: Ready, status: "True"}]
---
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: gpu.nvidia.com}
spec:
  selectors:
  - cel: {expression: "device.driver == 'gpu.nvidia.com'"}
"#;

    /// A slice of driver gpu.nvidia.com for pool n1 on n1, of `generation` in a pool of
    /// `count` slices, listing `devices`.
    fn slice(name: &str, generation: u32, count: u32, devices: &[&str]) -> String {
        let devices: String = devices
            .iter()
            .map(|d| format!("  - name: {d}\n    attributes: {{type: {{string: gpu}}}}\n"))
            .collect();
        format!(
            r#"
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata:
  name: {name}
  ownerReferences: [{{apiVersion: v1, kind: Node, name: n1, uid: 5c1e}}]
spec:
  driver: gpu.nvidia.com
  nodeName: n1
  pool: {{generation: {generation}, name: n1, resourceSliceCount: {count}}}
  devices:
{devices}"#
        )
    }

    /// A pending pod of queue b with a template's claim asking `mode`: `All` devices of
    /// gpu.nvidia.com, or that many (`ExactCount`).
    fn pod(name: &str, mode: &str) -> String {
        let request = match mode {
            "All" => "{deviceClassName: gpu.nvidia.com, allocationMode: All}".to_string(),
            count => format!(
                "{{deviceClassName: gpu.nvidia.com, allocationMode: ExactCount, count: {count}}}"
            ),
        };
        super::claimed_pod(name, "gpu", &request, "{}", "1")
    }

    fn run(objects: &[String]) -> crate::cycle::CycleResult {
        let policy = policy(TEAM);
        let text = std::iter::once(NODE.to_string())
            .chain(objects.iter().cloned())
            .collect::<Vec<_>>()
            .join("---\n");
        let file = parse_cluster("cluster.yaml", &text, &Options::for_policy(&policy)).unwrap();
        cycle(&policy, &file.snapshot, 1_000)
    }

    /// The devices the cycle gave `claim`.
    fn devices(r: &crate::cycle::CycleResult, claim: &str) -> Vec<String> {
        r.claims
            .iter()
            .filter(|c| c.name == claim)
            .flat_map(|c| c.allocation.iter().flat_map(|a| &a.devices))
            .map(|d| d.device.clone())
            .collect()
    }

    #[test]
    fn a_stale_generation_gives_no_device_the_pool_no_longer_lists() {
        // The driver republished pool n1 as generation 2 without gpu-0 (lost to an error); the
        // slice of generation 1 is not deleted yet. Only gpu-1 exists for the allocator: a pod
        // asking one device gets it, one asking two waits. (KAI still counts the three listed
        // devices as the node's GPUs.)
        let old = slice("n1-gpu-old", 1, 1, &["gpu-0", "gpu-1"]);
        let new = slice("n1-gpu-new", 2, 1, &["gpu-1"]);
        let r = run(&[old.clone(), new.clone(), pod("p1", "1")]);
        assert_eq!(binds(&r), [("b/p1".to_string(), "n1".to_string())]);
        assert_eq!(devices(&r, "p1-gpu"), ["gpu-1"]);
        let r = run(&[old, new, pod("p2", "2")]);
        assert!(binds(&r).is_empty(), "{:?}", binds(&r));
        let reason = pending_reason(&r, "b/p2").to_string();
        assert!(
            reason.contains("1 lacks free devices for ResourceClaim b/p2-gpu"),
            "{reason}"
        );
    }

    #[test]
    fn a_claim_that_cannot_be_read_still_holds_the_devices_of_its_allocation() {
        // Claim odd-gpu asks with an allocation mode this reader does not know (a newer API, a
        // hand edit) and holds gpu-0. Left out of the cluster, gpu-0 would look free and be
        // given a second time; kept, it is taken, and the file says so where the claim is.
        let slice = slice("n1-gpu", 1, 1, &["gpu-0", "gpu-1"]);
        let held = "{allocation: {devices: {results: [{request: gpu, driver: gpu.nvidia.com, \
                    pool: n1, device: gpu-0}]}, nodeSelector: {nodeSelectorTerms: [{matchFields: \
                    [{key: metadata.name, operator: In, values: [n1]}]}]}}}";
        let odd = super::claimed_pod(
            "odd",
            "gpu",
            "{deviceClassName: gpu.nvidia.com, allocationMode: Mystery}",
            held,
            "1",
        );
        let r = run(&[slice.clone(), odd.clone(), pod("p2", "2")]);
        // p2 waits, for want of devices: odd, placed first in its queue, took no new one, so
        // p2 is not said to wait behind it.
        assert!(devices(&r, "p2-gpu").is_empty(), "{:#?}", r.decisions);
        let reason = pending_reason(&r, "b/p2").to_string();
        assert!(
            reason.contains("1 lacks free devices for ResourceClaim b/p2-gpu"),
            "{reason}"
        );
        // Its own pod runs on the devices the claim was given.
        assert_eq!(devices(&r, "odd-gpu"), ["gpu-0"]);
        let r = run(&[slice.clone(), odd.clone(), pod("p1", "1")]);
        assert_eq!(devices(&r, "p1-gpu"), ["gpu-1"]);

        let text = [NODE.to_string(), slice, odd].join("---\n");
        let file = parse_cluster("cluster.yaml", &text, &Options::for_policy(&policy(TEAM)));
        let notes: Vec<String> = file.unwrap().notes.iter().map(|n| n.in_file("f")).collect();
        assert_eq!(
            notes,
            // Counted by hand: the node and the class take lines 1-16 (the first blank), the
            // `---` 17, the slice 18-32 (a blank, nine lines, two lines per device), the `---`
            // 33, then the claim's text opens with a blank line: it starts on line 35.
            [
                "f:35:1: ResourceClaim b/odd-gpu: spec.devices.requests[0].exactly.allocationMode: \
              `Mystery` is not ExactCount or All; kept for the devices its allocation holds, and \
              its pods wait until it is fixed"
            ]
        );
    }

    #[test]
    fn a_pool_being_updated_gives_no_device_and_a_request_for_all_says_why() {
        // Generation 3 of pool n1 has two slices; one is published so far.
        let first = slice("n1-gpu-a", 3, 2, &["gpu-0", "gpu-1"]);
        let r = run(&[first.clone(), pod("p1", "1"), pod("p2", "All")]);
        assert!(binds(&r).is_empty(), "{:?}", binds(&r));
        let reason = pending_reason(&r, "b/p2").to_string();
        assert!(
            reason.contains(
                "cannot give ResourceClaim b/p2-gpu all the devices it asks: resource pool \
                 gpu.nvidia.com/n1 is being updated (1 of its 2 slices of generation 3 are \
                 published)"
            ),
            "{reason}"
        );
        // Once the second slice is out, the pool is whole: one pod gets a device, or the other
        // all four.
        let second = slice("n1-gpu-b", 3, 2, &["gpu-2", "gpu-3"]);
        let r = run(&[first.clone(), second.clone(), pod("p1", "1")]);
        assert_eq!(devices(&r, "p1-gpu"), ["gpu-0"]);
        let r = run(&[first, second, pod("p2", "All")]);
        assert_eq!(devices(&r, "p2-gpu"), ["gpu-0", "gpu-1", "gpu-2", "gpu-3"]);
    }

    #[test]
    fn devices_needing_features_kais_allocator_runs_without_are_never_given() {
        // KAI's allocator runs with no optional feature (`structured.Features{}`): gpu-0, a
        // partition consuming a counter set, and gpu-1, which waits on binding conditions, are
        // never given; gpu-2 is.
        let slice = r#"
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: n1-gpu}
spec:
  driver: gpu.nvidia.com
  nodeName: n1
  pool: {generation: 1, name: n1, resourceSliceCount: 1}
  sharedCounters:
  - name: gpu-0-counters
    counters: {memory: {value: 80Gi}}
  devices:
  - name: gpu-0
    attributes: {type: {string: gpu}}
    consumesCounters:
    - counterSet: gpu-0-counters
      counters: {memory: {value: 80Gi}}
  - name: gpu-1
    attributes: {type: {string: gpu}}
    bindingConditions: [dra.example.com/attached]
    bindingFailureConditions: [dra.example.com/failed]
  - name: gpu-2
    attributes: {type: {string: gpu}}
"#
        .to_string();
        let r = run(&[slice.clone(), pod("p1", "1")]);
        assert_eq!(devices(&r, "p1-gpu"), ["gpu-2"]);
        let r = run(&[slice.clone(), pod("p2", "2")]);
        assert!(binds(&r).is_empty(), "{:?}", binds(&r));
        // A request for all devices: the device with binding conditions is no candidate, but
        // the partition is one the allocator then cannot give, so all cannot be had.
        let r = run(&[slice.clone(), pod("p3", "All")]);
        assert!(binds(&r).is_empty(), "{:?}", binds(&r));
        let without_partition = slice.replace("  - name: gpu-0\n", "  - name: gone\n").replace(
            "    consumesCounters:\n    - counterSet: gpu-0-counters\n      counters: {memory: {value: 80Gi}}\n",
            "",
        );
        let r = run(&[without_partition, pod("p3", "All")]);
        assert_eq!(devices(&r, "p3-gpu"), ["gone", "gpu-2"]);
    }

    #[test]
    fn an_invalid_pool_gives_no_device() {
        // Both slices of generation 1 list gpu-1: the pool is invalid until the driver mends it.
        let r = run(&[
            slice("n1-gpu-a", 1, 2, &["gpu-0", "gpu-1"]),
            slice("n1-gpu-b", 1, 2, &["gpu-1", "gpu-2"]),
            pod("p1", "1"),
            pod("p2", "All"),
        ]);
        assert!(binds(&r).is_empty(), "{:?}", binds(&r));
        let reason = pending_reason(&r, "b/p2").to_string();
        assert!(
            reason.contains(
                "resource pool gpu.nvidia.com/n1 is invalid (device gpu-1 is published twice)"
            ),
            "{reason}"
        );
    }
}

/// A pool whose slices lie on several nodes (a driver publishing a fabric's devices by node):
/// incomplete on one node, it counts its slices of that generation everywhere; a node whose
/// newest slices are of an older generation than the pool's elsewhere has none of its devices
/// offered (`checkSlicesInPool`).
#[test]
fn a_pool_over_several_nodes_counts_its_slices_everywhere() {
    let at = |name: &str, node: Option<&str>, generation: i64| ResourceSlice {
        name: name.into(),
        node: node.map(str::to_string),
        driver: "fabric.example.com".into(),
        pool: "fabric".into(),
        generation,
        slice_count: Some(2),
        all_nodes: false,
        node_selector: Vec::new(),
        devices: vec![Device {
            name: format!("{name}-dev"),
            attributes: Default::default(),
            unsupported: None,
        }],
    };
    let slices = [
        at("old-n1", Some("n1"), 1),
        at("new-n2", Some("n2"), 2),
        at("new-any", None, 2),
    ];
    let nodes: rustc_hash::FxHashMap<&str, usize> = [("n1", 0), ("n2", 1)].into_iter().collect();
    let got = super::dra::gather(&slices, &nodes, &[node("n1", 0), node("n2", 0)]);
    // n1's generation 1 is obsolete: listed (a claim holding its device keeps it) but unusable,
    // with no complaint; n2's one slice of generation 2 and the slice for no node make two.
    assert_eq!(got.slices, [(0, 0, false), (1, 1, true)]);
    assert_eq!(got.unsettled, [None, None]);
}

/// Devices reachable from several nodes: slices for all nodes or a node selector (a fabric's
/// NICs behind a switch, say), as the upstream allocator gathers them (`GatherPools`,
/// `NodeMatches`) and ties the claims given them (`createNodeSelector`).
mod reach {
    use super::super::tests::{binds, cycle, pending_reason, policy};
    use super::TEAM;
    use crate::ingest::{Options, parse_cluster};

    /// n2 behind switch sw2 (with `n2_cpu` cores) and n1 behind sw1, in that order (so n2 is
    /// tried first), the NIC class, a pool of two NICs behind sw1 and one of two devices
    /// reachable from every node.
    fn cluster(n2_cpu: &str) -> String {
        format!(
            r#"
apiVersion: v1
kind: Node
metadata:
  name: n2
  labels: {{kubernetes.io/hostname: n2, fabric.example.com/switch: sw2}}
status:
  allocatable: {{cpu: "{n2_cpu}", memory: 512Gi, pods: "110"}}
  conditions: [{{type: Ready, status: "True"}}]
---
apiVersion: v1
kind: Node
metadata:
  name: n1
  labels: {{kubernetes.io/hostname: n1, fabric.example.com/switch: sw1}}
status:
  allocatable: {{cpu: "64", memory: 512Gi, pods: "110"}}
  conditions: [{{type: Ready, status: "True"}}]
---
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {{name: nic.fabric.example.com}}
spec:
  selectors:
  - cel: {{expression: "device.driver == 'fabric.example.com'"}}
---
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {{name: pool.storage.example.com}}
spec:
  selectors:
  - cel: {{expression: "device.driver == 'storage.example.com'"}}
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {{name: fabric-sw1}}
spec:
  driver: fabric.example.com
  pool: {{generation: 1, name: sw1, resourceSliceCount: 1}}
  nodeSelector:
    nodeSelectorTerms:
    - matchExpressions:
      - {{key: fabric.example.com/switch, operator: In, values: [sw1]}}
  devices:
  - {{name: nic-0, attributes: {{port: {{int: 0}}}}}}
  - {{name: nic-1, attributes: {{port: {{int: 1}}}}}}
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {{name: storage-everywhere}}
spec:
  driver: storage.example.com
  pool: {{generation: 1, name: shared, resourceSliceCount: 1}}
  allNodes: true
  devices:
  - {{name: vol-0}}
  - {{name: vol-1}}
"#
        )
    }

    /// A pending pod of queue b asking 4 cores and `count` devices of `class` through a
    /// template's claim, with `status` for the claim (`{}`: not allocated).
    fn pod(name: &str, class: &str, count: u32, status: &str) -> String {
        let request =
            format!("{{deviceClassName: {class}, allocationMode: ExactCount, count: {count}}}");
        super::claimed_pod(name, "dev", &request, status, "4")
    }

    /// A claim's status: nic-0 (of the pool behind sw1) allocated with the selector for sw2.
    const BEHIND_SW2: &str = r#"
  allocation:
    devices:
      results: [{request: dev, driver: fabric.example.com, pool: sw1, device: nic-0}]
    nodeSelector:
      nodeSelectorTerms:
      - matchExpressions:
        - {key: fabric.example.com/switch, operator: In, values: [sw2]}"#;

    fn run(objects: &[String]) -> crate::cycle::CycleResult {
        let policy = policy(TEAM);
        let file = parse_cluster(
            "cluster.yaml",
            &objects.join("---\n"),
            &Options::for_policy(&policy),
        )
        .unwrap();
        assert!(file.notes.is_empty(), "{:?}", file.notes);
        cycle(&policy, &file.snapshot, 1_000)
    }

    #[test]
    fn a_device_behind_a_node_selector_is_given_on_the_nodes_it_reaches_and_ties_its_claim_to_them()
    {
        // Only n1 reaches the NICs: the pod goes there, not to n2, which comes first, and its
        // claim is tied to the slice's selector, not to n1.
        let r = run(&[cluster("64"), pod("p1", "nic.fabric.example.com", 2, "{}")]);
        assert_eq!(binds(&r), [("b/p1".to_string(), "n1".to_string())]);
        let claim = r.claims.iter().find(|c| c.name == "p1-dev").unwrap();
        let allocation = claim.allocation.as_ref().unwrap();
        assert_eq!(allocation.node, None);
        assert_eq!(allocation.selector.len(), 1);
        let term = &allocation.selector[0];
        assert_eq!(term.expressions.len(), 1);
        assert_eq!(term.expressions[0].key, "fabric.example.com/switch");
        assert_eq!(term.expressions[0].values, ["sw1"]);
        let devices: Vec<&str> = allocation
            .devices
            .iter()
            .map(|d| d.device.as_str())
            .collect();
        assert_eq!(devices, ["nic-0", "nic-1"]);
    }

    /// The reach cluster with `objects`, read.
    fn state_of(objects: &[String]) -> crate::cluster::Snapshot {
        let policy = policy(TEAM);
        let text = std::iter::once(cluster("64"))
            .chain(objects.iter().cloned())
            .collect::<Vec<_>>()
            .join("---\n");
        parse_cluster("cluster.yaml", &text, &Options::for_policy(&policy))
            .unwrap()
            .snapshot
    }

    /// The devices `changed` gives claim `name`, sorted.
    fn given(changed: &[crate::dra::ClaimStatus], name: &str) -> Vec<String> {
        let mut out: Vec<String> = changed
            .iter()
            .filter(|c| c.name == name)
            .flat_map(|c| c.allocation.iter().flat_map(|a| &a.devices))
            .map(|d| d.device.clone())
            .collect();
        out.sort();
        out
    }

    #[test]
    fn a_claim_asking_all_devices_chooses_afresh_on_each_node() {
        // n2 reaches one more volume, behind its switch: tried on n1 (two volumes), undone,
        // then placed on n2, the claim gets all three there, not the two it had on n1.
        let behind_sw2 = r#"
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: storage-sw2}
spec:
  driver: storage.example.com
  pool: {generation: 1, name: sw2-vols, resourceSliceCount: 1}
  nodeSelector:
    nodeSelectorTerms:
    - matchExpressions:
      - {key: fabric.example.com/switch, operator: In, values: [sw2]}
  devices:
  - {name: vol-9}
"#;
        let claim = pod("p1", "pool.storage.example.com", 1, "{}").replace(
            "allocationMode: ExactCount, count: 1",
            "allocationMode: All",
        );
        let s = state_of(&[behind_sw2.to_string(), claim]);
        let (n2, n1) = (0, 1);
        let p1 = s.pods.iter().find(|p| p.name == "p1").unwrap();
        let mut dra = super::super::dra::DraState::new(&s).unwrap();
        dra.take(n1, p1);
        assert_eq!(given(&dra.changed(), "p1-dev"), ["vol-0", "vol-1"]);
        dra.release(p1);
        dra.take(n2, p1);
        assert_eq!(given(&dra.changed(), "p1-dev"), ["vol-0", "vol-1", "vol-9"]);
    }

    #[test]
    fn a_claim_put_back_keeps_the_node_selector_its_allocation_has() {
        // v runs on n2 with a claim the API server allocated nic-0 behind sw2 (the device's
        // slice is behind sw1 now). Evicted and put back, the claim is as the API server has
        // it: unchanged, and a pod sharing it may go to n2, not n1.
        let allocated =
            format!("{BEHIND_SW2}\n  reservedFor: [{{resource: pods, name: v, uid: uid-v}}]");
        let v = pod("v", "nic.fabric.example.com", 1, &allocated)
            .replace(
                "  schedulerName: kai-scheduler\n",
                "  schedulerName: kai-scheduler\n  nodeName: n2\n",
            )
            .replace("  phase: Pending", "  phase: Running");
        let s = state_of(&[v]);
        let (n2, n1) = (0, 1);
        let v = s.pods.iter().find(|p| p.name == "v").unwrap();
        assert_eq!(v.node.as_deref(), Some("n2"));
        let mut sharer = v.clone();
        sharer.name = "q".into();
        sharer.node = None;
        let mut dra = super::super::dra::DraState::new(&s).unwrap();
        dra.release(v);
        dra.take(n2, v);
        assert!(dra.changed().is_empty(), "{:?}", dra.changed());
        assert!(dra.shortage(n2, &sharer).is_none());
        assert!(dra.shortage(n1, &sharer).is_some());
    }

    #[test]
    fn a_device_takes_its_attributes_from_its_current_slice_not_an_obsolete_one_elsewhere() {
        // Pool `accel` had x (a `mig`) on n1 and z0 on n2 in generation 1; generation 2 lists x,
        // now a `gpu`, on n2 only. n1's slice is obsolete: x is a gpu, given on n2.
        let slice =
            |name: &str, node: &str, generation: u32, count: u32, device: &str, kind: &str| {
                format!(
                    r#"
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {{name: {name}}}
spec:
  driver: accel.example.com
  nodeName: {node}
  pool: {{generation: {generation}, name: accel, resourceSliceCount: {count}}}
  devices:
  - {{name: {device}, attributes: {{kind: {{string: {kind}}}}}}}
"#
                )
            };
        let class = r#"
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: fast.accel.example.com}
spec:
  selectors:
  - cel: {expression: "device.driver == 'accel.example.com' && device.attributes['accel.example.com'].kind == 'gpu'"}
"#;
        let r = run(&[
            cluster("64"),
            class.to_string(),
            slice("accel-n1-g1", "n1", 1, 2, "x", "mig"),
            slice("accel-n2-g1", "n2", 1, 2, "z0", "gpu"),
            slice("accel-n2-g2", "n2", 2, 1, "x", "gpu"),
            pod("p1", "fast.accel.example.com", 1, "{}"),
        ]);
        assert_eq!(binds(&r), [("b/p1".to_string(), "n2".to_string())]);
        let claim = r.claims.iter().find(|c| c.name == "p1-dev").unwrap();
        let devices: Vec<&str> = claim
            .allocation
            .iter()
            .flat_map(|a| &a.devices)
            .map(|d| d.device.as_str())
            .collect();
        assert_eq!(devices, ["x"]);
    }

    #[test]
    fn a_device_for_all_nodes_ties_its_claim_to_none() {
        let r = run(&[
            cluster("64"),
            pod("p1", "pool.storage.example.com", 2, "{}"),
        ]);
        assert_eq!(binds(&r).len(), 1, "{:?}", r.decisions);
        let claim = r.claims.iter().find(|c| c.name == "p1-dev").unwrap();
        let allocation = claim.allocation.as_ref().unwrap();
        assert_eq!(
            (allocation.node.as_deref(), allocation.selector.len()),
            (None, 0)
        );
    }

    #[test]
    fn a_claim_allocated_behind_a_node_selector_keeps_its_pod_to_the_nodes_it_names() {
        // The claim was allocated nic-0 with the selector for sw2 (the pool's devices moved
        // to sw2 since): its pod may only run on n2, which has 2 cores; it waits, and n1 says
        // it is out of the claim's reach.
        let allocated = BEHIND_SW2;
        let r = run(&[
            cluster("2"),
            pod("p3", "nic.fabric.example.com", 1, allocated),
        ]);
        assert!(binds(&r).is_empty(), "{:?}", binds(&r));
        let reason = pending_reason(&r, "b/p3").to_string();
        assert!(
            reason.contains(
                "1 is not among the nodes the devices of ResourceClaim b/p3-dev are reachable \
                 from (its allocation's nodeSelector)"
            ) && reason.contains("1 lacks 4 CPU"),
            "{reason}"
        );
        // With room on n2 it runs there.
        let r = run(&[
            cluster("64"),
            pod("p3", "nic.fabric.example.com", 1, allocated),
        ]);
        assert_eq!(binds(&r), [("b/p3".to_string(), "n2".to_string())]);
    }
}
