//! The state's candidate order, against the rule it stands for.

use proptest::prelude::*;

use super::{ClusterState, DEVICE};
use crate::cluster::{Amounts, Node, Pod, Snapshot};
use kai_policy_compiler::model::Strategy as Placement;

/// A node with `gpus` devices and `cpu` millicores; `cordoned` nodes are out of every index.
fn node(i: usize, gpus: i64, cpu: i64, cordoned: bool) -> Node {
    Node {
        name: format!("n{i}"),
        allocatable: Amounts {
            gpu: gpus * DEVICE,
            cpu,
            memory: 1 << 40,
        },
        unschedulable: cordoned,
        ..Default::default()
    }
}

fn pod(gpu: i64, cpu: i64, fractional: bool, shared_devices: u32) -> Pod {
    Pod {
        namespace: "ns".into(),
        name: "p".into(),
        request: Amounts {
            gpu,
            cpu,
            memory: 1 << 30,
        },
        fractional,
        shared_devices,
        ..Default::default()
    }
}

/// What [`ClusterState::candidates`] must give: every schedulable node with the pod's CPU free
/// and room on its GPU devices (whole devices, or devices with the share free), in strategy
/// order. Binpack: by what is free ascending (whole devices; for a shared pod whole devices,
/// then GPU thousandths; CPU for a pod asking no GPU), then index. Spread: by the share of the node that is free
/// descending (whole free devices over its devices for a GPU pod, shared or not; free CPU over
/// its allocatable CPU for a pod asking none: KAI's `nodeplacement/spread.go`), then index
/// descending. A pod asking no GPU takes the nodes without GPUs first, each class in strategy
/// order (KAI's `resourcetype` plugin: its 10 points are above any strategy's 0 to 9).
fn by_the_rule(state: &ClusterState, pod: &Pod, strategy: Placement) -> Vec<usize> {
    let spread = strategy == Placement::Spread;
    // (free, of, node): the key is free / of, compared exactly.
    let mut found: Vec<(i64, i64, usize)> = (0..state.len())
        .filter(|&n| state.schedulable(n) && state.admits(n, pod))
        .filter_map(|n| {
            let free = &state.nodes[n];
            let gpu_share = (i64::from(free.whole), free.devices.len() as i64, n);
            if pod.request.gpu == 0 {
                let of = if spread {
                    state.meta[n].allocatable.cpu
                } else {
                    1
                };
                return (free.free.cpu >= pod.request.cpu).then_some((free.free.cpu, of, n));
            }
            if free.free.cpu < pod.request.cpu {
                return None;
            }
            if pod.fractional {
                let share = pod.share_per_device();
                let devices = free.devices.iter().filter(|&&f| f >= share).count();
                // Whole free devices first (KAI's idle GPUs), then thousandths.
                let packed = i64::from(free.whole) * 1_000_000_000 + free.free.gpu;
                let key = if spread { gpu_share } else { (packed, 1, n) };
                (free.free.gpu >= pod.request.gpu && devices >= pod.shared_devices.max(1) as usize)
                    .then_some(key)
            } else {
                let need = (pod.request.gpu + DEVICE - 1) / DEVICE;
                let key = if spread {
                    gpu_share
                } else {
                    (i64::from(free.whole), 1, n)
                };
                (i64::from(free.whole) >= need).then_some(key)
            }
        })
        .collect();
    found.sort_unstable_by(|&(a, of_a, m), &(b, of_b, n)| {
        let (a, b) = (
            i128::from(a) * i128::from(of_b),
            i128::from(b) * i128::from(of_a),
        );
        a.cmp(&b).then(m.cmp(&n))
    });
    if spread {
        found.reverse();
    }
    if !pod.asks_gpu() {
        // Stable: each class keeps the strategy's order.
        found.sort_by_key(|&(_, _, n)| !state.cpu_only[n]);
    }
    found.into_iter().map(|(_, _, n)| n).collect()
}

/// What [`ClusterState::on_used_shared_devices`] must give a shared pod: every schedulable node
/// with the pod's CPU free and a device some shared pod uses (neither empty nor full) with the
/// pod's share free, by whole free devices ascending, then free GPU, then index.
fn sharing_by_the_rule(state: &ClusterState, pod: &Pod) -> Vec<usize> {
    let share = pod.share_per_device();
    let mut found: Vec<((u32, i64), usize)> = (0..state.len())
        .filter(|&n| state.schedulable(n) && state.admits(n, pod))
        .filter(|&n| {
            let free = &state.nodes[n];
            free.free.cpu >= pod.request.cpu
                && free.free.gpu >= pod.request.gpu
                && free
                    .devices
                    .iter()
                    .any(|&f| f > 0 && f < DEVICE && f >= share)
        })
        .map(|n| ((state.nodes[n].whole, state.nodes[n].free.gpu), n))
        .collect();
    found.sort_unstable();
    found.into_iter().map(|(_, n)| n).collect()
}

/// Every third bound pod leaves; then the first of them comes back.
fn leave_and_come_back(
    state: &mut ClusterState,
    snapshot: &Snapshot,
    slots: &[Option<super::Slot>],
) {
    let leaving: Vec<usize> = (0..snapshot.pods.len())
        .filter(|&p| p % 3 == 0 && slots[p].is_some())
        .collect();
    for &p in &leaving {
        state.release(slots[p].as_ref().unwrap(), &snapshot.pods[p]);
    }
    if let Some(&p) = leaving.first() {
        state.take(slots[p].as_ref().unwrap(), &snapshot.pods[p]);
    }
}

prop_compose! {
    /// A cluster of up to 40 nodes with pods bound on them, whole-GPU, shared-GPU and CPU-only.
    fn cluster()(
        nodes in prop::collection::vec((0i64..=8, 1i64..=16, prop::bool::weighted(0.1)), 1..40),
        bound in prop::collection::vec((0usize..40, 0i64..=3, 0i64..=4, 0u8..3), 0..120),
    ) -> Snapshot {
        let nodes: Vec<Node> = nodes
            .iter()
            .enumerate()
            .map(|(i, &(gpus, cores, cordoned))| node(i, gpus, cores * 1000, cordoned))
            .collect();
        let pods = bound
            .iter()
            .enumerate()
            .map(|(i, &(on, gpus, cores, kind))| {
                let on = on % nodes.len();
                let mut p = match kind {
                    0 => pod(gpus * DEVICE, cores * 1000, false, 0),
                    1 => pod(250 * (gpus + 1), cores * 1000, true, 1),
                    _ => pod(0, cores * 1000, false, 0),
                };
                p.name = format!("b{i}");
                p.node = Some(nodes[on].name.clone());
                p
            })
            .collect();
        Snapshot {
            nodes,
            pods,
            ..Default::default()
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    /// The CPU index walked beside the GPU index (`with_cpu`) gives exactly the rule's nodes
    /// in the rule's order, whichever of the two runs out first.
    #[test]
    fn candidates_come_in_strategy_order_with_the_pods_cpu_free(
        snapshot in cluster(),
        shape in (0i64..=4, 0i64..=12, 0u8..3, 1u32..=2),
        spread in any::<bool>(),
        alike in any::<bool>(),
    ) {
        // Nodes alike (spread ranks them by the amounts' indexes) or not (by the shares').
        let mut snapshot = snapshot;
        if alike {
            let first = snapshot.nodes[0].allocatable;
            for n in &mut snapshot.nodes {
                n.allocatable = first;
            }
        }
        let (mut state, slots) = ClusterState::new(&snapshot);
        state.index_shares(true, true);
        let (gpus, cores, kind, shared) = shape;
        let pod = match kind {
            0 => pod(gpus.max(1) * DEVICE, cores * 1000, false, 0),
            1 => pod(250 * (gpus + 1) * i64::from(shared), cores * 1000, true, shared),
            _ => pod(0, cores * 1000, false, 0),
        };
        let strategy = if spread { Placement::Spread } else { Placement::Binpack };
        let got: Vec<usize> = state.candidates(&pod, strategy).collect();
        prop_assert_eq!(got, by_the_rule(&state, &pod, strategy));
        // The indexes follow the nodes as pods leave and one comes back.
        leave_and_come_back(&mut state, &snapshot, &slots);
        state.settle();
        let got: Vec<usize> = state.candidates(&pod, strategy).collect();
        prop_assert_eq!(got, by_the_rule(&state, &pod, strategy));
    }

    /// The nodes with a used shared device a shared pod fits on, kept in their own index as
    /// pods come and go, are the rule's nodes in the rule's order.
    #[test]
    fn used_shared_devices_come_in_binpack_order(
        snapshot in cluster(),
        quarters in 1i64..=3,
        cores in 0i64..=12,
    ) {
        let (mut state, slots) = ClusterState::new(&snapshot);
        let pod = pod(250 * quarters, cores * 1000, true, 1);
        let got: Vec<usize> = state.on_used_shared_devices(&pod, false).collect();
        prop_assert_eq!(got, sharing_by_the_rule(&state, &pod));
        leave_and_come_back(&mut state, &snapshot, &slots);
        state.settle();
        let got: Vec<usize> = state.on_used_shared_devices(&pod, false).collect();
        prop_assert_eq!(got, sharing_by_the_rule(&state, &pod));
    }

    /// Pods the state calls alike get the same answer from `fits_now` on every node, whatever
    /// else tells them apart (names, labels and queues); pods that ask differently, or one with
    /// a toleration the other lacks, are not alike.
    #[test]
    fn pods_alike_fit_the_same_nodes(
        snapshot in cluster(),
        shape in (0i64..=4, 0i64..=12, 0u8..3, 1u32..=2),
        tainted in prop::collection::vec(any::<bool>(), 40),
        spread in any::<bool>(),
    ) {
        let mut snapshot = snapshot;
        for (n, &t) in snapshot.nodes.iter_mut().zip(&tainted) {
            if t {
                n.taints.push(crate::cluster::Taint {
                    key: "gpu".into(),
                    value: "a100".into(),
                    effect: crate::cluster::TaintEffect::NoSchedule,
                });
            }
        }
        let (state, _) = ClusterState::new(&snapshot);
        let (gpus, cores, kind, shared) = shape;
        let a = match kind {
            0 => pod(gpus.max(1) * DEVICE, cores * 1000, false, 0),
            1 => pod(250 * (gpus + 1) * i64::from(shared), cores * 1000, true, shared),
            _ => pod(0, cores * 1000, false, 0),
        };
        let mut b = a.clone();
        b.name = "other".into();
        b.queue = Some("q".into());
        b.labels.insert("index".into(), "1".into());
        let strategy = if spread { Placement::Spread } else { Placement::Binpack };
        prop_assert!(state.fit_alike(&a, &b));
        for n in 0..state.len() {
            prop_assert_eq!(state.fits_now(n, &a, strategy), state.fits_now(n, &b, strategy));
        }
        let mut more = a.clone();
        more.request.cpu += 1000;
        prop_assert!(!state.fit_alike(&a, &more));
        let mut tolerating = a.clone();
        tolerating.constraints.tolerations.push(crate::cluster::Toleration {
            key: "gpu".into(),
            exists: true,
            ..Default::default()
        });
        prop_assert!(!state.fit_alike(&a, &tolerating));
    }
}
