//! The zone choice of each policy, with KAI's own plugin test cases
//! (`plugins/numa/evaluator_test.go`, `numa_test.go`), worked by hand from the kubelet's rules.

use super::*;

fn res(items: &[(&str, i64)]) -> Res {
    items.iter().map(|(k, v)| (k.to_string(), *v)).collect()
}

fn topology(policy: Policy, scope: Scope, zones: &[Res]) -> Topology {
    Topology {
        policy,
        scope,
        zones: zones
            .iter()
            .enumerate()
            .map(|(i, r)| Zone {
                name: format!("node-{i}"),
                allocatable: r.clone(),
                available: r.clone(),
            })
            .collect(),
        names: BTreeMap::from([("gpu".to_string(), "nvidia.com/gpu".to_string())]),
    }
}

fn pod_scope(request: Res) -> PodNuma {
    PodNuma::new(true, request.clone(), vec![request], Vec::new())
}

fn containers(concurrent: Vec<Res>, serial: Vec<Res>) -> PodNuma {
    let mut pod = Res::new();
    for c in &concurrent {
        for (k, v) in c {
            *pod.entry(k.clone()).or_default() += v;
        }
    }
    PodNuma::new(true, pod, concurrent, serial)
}

fn solve(t: &Topology, pod: &PodNuma) -> Option<Placement> {
    let free: Vec<Res> = t.zones.iter().map(|z| z.available.clone()).collect();
    t.solve(&free, pod, &BTreeSet::new())
}

#[test]
fn single_numa_node_takes_the_lowest_zone_that_holds_every_request() {
    let t = topology(
        Policy::SingleNumaNode,
        Scope::Pod,
        &[res(&[("cpu", 4000)]), res(&[("cpu", 4000)])],
    );
    assert_eq!(
        solve(&t, &pod_scope(res(&[("cpu", 3000)]))),
        Some(vec![(0, res(&[("cpu", 3000)]))])
    );
    assert_eq!(solve(&t, &pod_scope(res(&[("cpu", 6000)]))), None);
}

#[test]
fn container_scope_containers_share_the_zones_headroom() {
    // TestSingleNUMAContainerScopeSharesHeadroom: 3 and 3 take a zone each, 2 more fits none.
    let t = topology(
        Policy::SingleNumaNode,
        Scope::Container,
        &[res(&[("cpu", 4000)]), res(&[("cpu", 4000)])],
    );
    let c = |n| res(&[("cpu", n)]);
    assert_eq!(
        solve(&t, &containers(vec![c(3000), c(3000)], vec![])),
        Some(vec![(0, c(3000)), (1, c(3000))])
    );
    assert_eq!(
        solve(&t, &containers(vec![c(3000), c(3000), c(2000)], vec![])),
        None
    );
}

#[test]
fn restricted_takes_the_width_every_resource_agrees_on_split_lowest_zone_first() {
    // TestRestrictedScopeAndInit: zones of 4 GPUs, 8 CPUs and 16Gi.
    let zone = res(&[("gpu", 4), ("cpu", 8000), ("memory", 16 << 30)]);
    let pod_t = topology(
        Policy::Restricted,
        Scope::Pod,
        &[zone.clone(), zone.clone()],
    );
    let ctr_t = topology(Policy::Restricted, Scope::Container, &[zone.clone(), zone]);
    let gpu = |n| res(&[("gpu", n)]);
    // Containers of 3 GPUs: each alone fits one zone; the second takes the other zone.
    assert_eq!(
        solve(&ctr_t, &containers(vec![gpu(3), gpu(3)], vec![])),
        Some(vec![(0, gpu(3)), (1, gpu(3))])
    );
    // 6 GPUs at pod scope: width 2, drawn 4 then 2.
    assert_eq!(
        solve(&pod_t, &pod_scope(gpu(6))),
        Some(vec![(0, gpu(4)), (1, gpu(2))])
    );
    // 6 GPUs want two zones, 16Gi wants one: the kubelet has no preferred hint.
    assert_eq!(
        solve(&pod_t, &pod_scope(res(&[("gpu", 6), ("memory", 16 << 30)]))),
        None
    );
    // An init container of 4 is checked alone and not charged: the app's 4 take zone 0.
    assert_eq!(
        solve(&ctr_t, &containers(vec![gpu(4)], vec![gpu(4)])),
        Some(vec![(0, gpu(4))])
    );
    // An init container larger than the node never passes.
    assert_eq!(solve(&ctr_t, &containers(vec![gpu(1)], vec![gpu(9)])), None);
}

#[test]
fn restricted_refuses_a_width_the_free_room_cannot_give() {
    // Allocatable 4 GPUs a zone, 3 free in each: 4 GPUs prefer one zone, none has them.
    let mut t = topology(
        Policy::Restricted,
        Scope::Pod,
        &[res(&[("gpu", 4)]), res(&[("gpu", 4)])],
    );
    for z in &mut t.zones {
        z.available = res(&[("gpu", 3)]);
    }
    assert_eq!(solve(&t, &pod_scope(res(&[("gpu", 4)]))), None);
    // Three zones of 4, free 1, 4, 4: 6 GPUs take the first pair of width 2 that holds them.
    let mut t = topology(
        Policy::Restricted,
        Scope::Pod,
        &[res(&[("gpu", 4)]), res(&[("gpu", 4)]), res(&[("gpu", 4)])],
    );
    t.zones[0].available = res(&[("gpu", 1)]);
    assert_eq!(
        solve(&t, &pod_scope(res(&[("gpu", 6)]))),
        Some(vec![(1, res(&[("gpu", 4)])), (2, res(&[("gpu", 2)]))])
    );
    // 2 GPUs and 100 CPUs a zone: 4 GPUs want two zones, 1 CPU one.
    let t = topology(
        Policy::Restricted,
        Scope::Pod,
        &[
            res(&[("gpu", 2), ("cpu", 100_000)]),
            res(&[("gpu", 2), ("cpu", 100_000)]),
        ],
    );
    assert_eq!(
        solve(&t, &pod_scope(res(&[("gpu", 4), ("cpu", 1000)]))),
        None
    );
}

#[test]
fn best_effort_covers_greedily_from_the_zone_that_covers_most() {
    let mut t = topology(
        Policy::BestEffort,
        Scope::Pod,
        &[res(&[("cpu", 4000)]), res(&[("cpu", 4000)])],
    );
    t.zones[0].available = res(&[("cpu", 1000)]);
    // Zone 1 covers 4 of 5, zone 0 the last one.
    assert_eq!(
        solve(&t, &pod_scope(res(&[("cpu", 5000)]))),
        Some(vec![(0, res(&[("cpu", 1000)])), (1, res(&[("cpu", 4000)]))])
    );
    assert_eq!(solve(&t, &pod_scope(res(&[("cpu", 9000)]))), None);
}

#[test]
fn only_guaranteed_pods_align_cpu_and_memory() {
    let t = topology(
        Policy::SingleNumaNode,
        Scope::Pod,
        &[res(&[("cpu", 4000)]), res(&[("cpu", 4000)])],
    );
    let mut burstable = pod_scope(res(&[("cpu", 6000)]));
    burstable.guaranteed = false;
    let none = BTreeSet::new();
    assert!(!t.filters(&burstable, &none));
    assert_eq!(solve(&t, &burstable), Some(vec![]));
    // A device the zones report is aligned whatever the QoS class.
    let t = topology(Policy::SingleNumaNode, Scope::Pod, &[res(&[("gpu", 2)])]);
    let mut gpu = pod_scope(res(&[("gpu", 1), ("cpu", 500)]));
    gpu.guaranteed = false;
    assert!(t.filters(&gpu, &none));
    assert!(!t.filters(&gpu, &BTreeSet::from(["gpu".to_string()])));
}

#[test]
fn zones_are_ordered_by_the_number_their_name_ends_in() {
    let mut zones: Vec<Zone> = ["node-10", "node-2", "socket", "node-0"]
        .iter()
        .map(|n| Zone {
            name: n.to_string(),
            ..Zone::default()
        })
        .collect();
    sort_zones(&mut zones);
    let names: Vec<&str> = zones.iter().map(|z| z.name.as_str()).collect();
    assert_eq!(names, ["node-0", "node-2", "node-10", "socket"]);
}

#[test]
fn policy_attributes_win_over_the_deprecated_list() {
    assert_eq!(
        policy_and_scope(
            Some("restricted"),
            Some("pod"),
            Some("SingleNUMANodeContainerLevel")
        ),
        (Policy::Restricted, Scope::Pod)
    );
    assert_eq!(
        policy_and_scope(None, None, Some("SingleNUMANodePodLevel")),
        (Policy::SingleNumaNode, Scope::Pod)
    );
    assert_eq!(
        policy_and_scope(Some("weird"), Some("pod"), None),
        (Policy::None, Scope::Pod)
    );
    assert_eq!(
        policy_and_scope(None, None, None),
        (Policy::None, Scope::Container)
    );
}

#[test]
fn records_read_back_what_is_written_and_unknown_zones_void_a_record() {
    let zone = res(&[("gpu", 4), ("cpu", 8000)]);
    let t = topology(Policy::SingleNumaNode, Scope::Pod, &[zone.clone(), zone]);
    let placement = vec![
        (0, res(&[("cpu", 2500), ("gpu", 2)])),
        (1, res(&[("cpu", 3000)])),
    ];
    let named = t.named(&placement);
    assert_eq!(named[0].amount.get("nvidia.com/gpu"), Some(&2));
    let json = record_json(&named);
    assert_eq!(
        json,
        r#"[{"amount":{"cpu":"2500m","nvidia.com/gpu":"2"},"zone":"node-0"},{"amount":{"cpu":"3"},"zone":"node-1"}]"#
    );
    let back = parse_record(&json).unwrap();
    assert_eq!(t.indexed(&back), Some(placement));
    let stranger = parse_record(r#"[{"zone":"node-7","amount":{"cpu":"1"}}]"#).unwrap();
    assert_eq!(t.indexed(&stranger), None);
    // What the zones do not report is left out of the charge (KAI projects a record onto the
    // resources the topology knows); a record with a negative amount is not read.
    let other = parse_record(r#"[{"zone":"node-0","amount":{"cpu":2,"hugepages-2Mi":"4Mi"}}]"#);
    assert_eq!(
        t.indexed(&other.unwrap()),
        Some(vec![(0, res(&[("cpu", 2000)]))])
    );
    assert_eq!(
        parse_record(r#"[{"zone":"node-0","amount":{"cpu":"-2"}}]"#),
        None
    );
    assert_eq!(parse_record("[]"), None);
    assert_eq!(parse_record("not json"), None);
}
