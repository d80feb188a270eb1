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
        devices: ["gpu-0", "gpu-1"]
            .map(|d| Device {
                name: d.into(),
                attributes: Default::default(),
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
        devices: vec![Device {
            name: "nic-0".into(),
            attributes: Default::default(),
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
