//! The steady scenario's cluster: a busy cluster in its steady state.

use kai_policy_compiler::generate::Rng;

use super::{
    BENCH_SALT, GIB, GPUS_PER_NODE, STEADY_MAX_RUNNING_PER_NODE, Scenario, Shape, Synthetic,
    checked, nodes, pod_shape, policy_files, priority_class, push_gang, tree,
};
use crate::cluster::{Amounts, Pod, PodGroup, Snapshot, Time};

/// The steady scenario (see the module comment). Every node runs the same mix, 7 of its 8 GPUs
/// in use: six one-GPU pods, four quarter-GPU pods sharing one device, and one-core CPU pods for
/// the rest of its share of running pods; 9 in 10 running pods are preemptible. Running pods
/// belong to the first half of the leaf queues (in tree order), so those are far above their
/// quotas; the pending backlog (gangs of 1-8) goes 4 times in 5 to the other half, which run
/// nothing and sit below their fair share.
pub fn steady_cluster(shape: &Shape) -> Result<Synthetic, String> {
    shape.validate(Scenario::Steady)?;
    let mut rng = Rng::salted(shape.seed, BENCH_SALT);
    let capacity = shape.nodes as i64 * GPUS_PER_NODE * 1000;
    let tree = tree(&mut rng, "d", shape.queues, capacity * 8 / 10);
    let files = policy_files(shape.nodes, &[&tree]);
    let policy = checked(&files)?;
    let now: Time = 100_000;
    let running = shape.pods * 6 / 7;
    let per_node = running
        .div_ceil(shape.nodes)
        .min(STEADY_MAX_RUNNING_PER_NODE);
    let (rich, poor) = tree.leaves.split_at(tree.leaves.len().div_ceil(2));
    let mut snapshot = Snapshot {
        topologies: Vec::new(),
        dra: Default::default(),
        numa_ignore: Default::default(),
        priority_classes: Default::default(),
        nodes: nodes(shape.nodes),
        pods: Vec::with_capacity(shape.pods),
        groups: Vec::new(),
    };
    let mut placed = 0;
    'nodes: for n in 0..shape.nodes {
        for slot in 0..per_node {
            if placed == running {
                break 'nodes;
            }
            let (gpu, fractional, cpu, memory) = match slot {
                0..=5 => (1000, false, 12_000, 96 * GIB),
                6..=9 => (250, true, 4_000, 32 * GIB),
                _ => (0, false, 1_000, 4 * GIB),
            };
            let queue = tree.queues[rich[rng.below(rich.len())]].name.clone();
            let class = if rng.chance(10) { "inference" } else { "train" };
            let name = format!("run-{placed:06}");
            let created = now - 3_600 - rng.below(7_200) as Time;
            snapshot.pods.push(Pod {
                namespace: queue.clone(),
                name: name.clone(),
                group: Some(name.clone()),
                queue: Some(queue.clone()),
                priority_class: Some(class.to_string()),
                request: Amounts { gpu, cpu, memory },
                fractional,
                node: Some(snapshot.nodes[n].name.clone()),
                created,
                started: Some(created + 10),
                termination_grace_seconds: 30,
                terminating: false,
                deletion_deadline: None,
                legacy_mig: false,
                ..Default::default()
            });
            snapshot.groups.push(PodGroup {
                namespace: queue.clone(),
                name,
                min_member: 1,
                queue: Some(queue),
                priority_class: Some(class.to_string()),
                created,
                ..Default::default()
            });
            placed += 1;
        }
    }
    let mut gang = 0;
    while snapshot.pods.len() < shape.pods {
        let size = rng.between(1, 8).min(shape.pods - snapshot.pods.len());
        let pool = if poor.is_empty() || rng.chance(20) {
            rich
        } else {
            poor
        };
        let leaf = &tree.queues[pool[rng.below(pool.len())]].name;
        let class = priority_class(&mut rng);
        let pod = pod_shape(&mut rng);
        push_gang(
            &mut snapshot,
            leaf,
            format!("job-{gang:06}"),
            size,
            class,
            pod,
            now - 600 + (gang % 600) as Time,
        );
        gang += 1;
    }
    Ok(Synthetic {
        snapshot,
        policy,
        files,
        now,
    })
}
