//! The in-memory cluster of `simulate`, moving on its own clock: the daemon's development and
//! demo backend.
//!
//! The world of a cluster file, in motion: bound pods run for their duration (the
//! [`DURATION_ANNOTATION`] annotation, or the default; counted from the clock's start for pods
//! already running in the file) and finish; evicted pods terminate after
//! their grace period; pods (and pod groups) whose creation time is after the clock's start
//! arrive when the clock reaches it. The clock runs at wall speed times `speed`, from `start`
//! (by default the latest creation or start time in the file, where `simulate` starts: then
//! every pod of the file is there at once).

use std::collections::HashMap;
use std::path::Path;
use std::time::Instant;

use kai_policy_compiler::model::Policy;
use kai_policy_compiler::quantity::parse_duration;
use kai_scheduler::cluster::{Pod, PodGroup, Snapshot, Time};
use kai_scheduler::decision::{Decision, EvictReason};
use kai_scheduler::dra;
use kai_scheduler::ingest::{self, Options};

use crate::backend::{Applied, Backend, CallOutcome};

/// Pod annotation: how long a simulated pod runs once bound (`"90s"`, `"10m"`, `"2h"`).
pub const DURATION_ANNOTATION: &str = "kai-policy.io/simulated-duration";

/// How the simulated cluster moves.
#[derive(Debug, Clone, Copy)]
pub struct SimOptions {
    /// Simulated seconds per wall-clock second.
    pub speed: f64,
    /// How long a pod without the annotation runs, in seconds.
    pub default_duration: Time,
    /// When the clock starts; `None`: the latest creation or start time in the file.
    pub start: Option<k8s_openapi::jiff::Timestamp>,
}

/// The simulated cluster.
pub struct SimCluster {
    world: Snapshot,
    /// Pods and groups created after the clock's start, latest first (popped as they arrive).
    arriving: Vec<Pod>,
    arriving_groups: Vec<PodGroup>,
    durations: HashMap<String, Time>,
    /// Evicted pods, and when they are gone.
    leaving: HashMap<String, Time>,
    options: SimOptions,
    start: Time,
    wall_start: Instant,
}

impl SimCluster {
    /// Reads a cluster file as `simulate` does (for `policy`'s queue label and scheduler name).
    pub fn read(path: &Path, policy: &Policy, options: SimOptions) -> Result<Self, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read the cluster file {}: {e}", path.display()))?;
        let label = path.display().to_string();
        let file = ingest::parse_cluster(&label, &text, &Options::for_policy(policy))
            .map_err(|e| e.to_string())?;
        // As `simulate` prints them: an object skipped is never silent.
        for note in &file.notes {
            tracing::warn!("{}", note.in_file(&label));
        }
        let durations = durations(&label, &text)?;
        let start = match (options.start, file.origin) {
            (None, _) | (Some(_), None) => file.taken,
            (Some(start), Some(origin)) => {
                u64::try_from(start.as_second() - origin.as_second()).unwrap_or(0)
            }
        };
        Ok(Self::new(file.snapshot, durations, options, start))
    }

    /// A simulated cluster over `snapshot`, with per-pod durations by `namespace/name`, whose
    /// clock starts at `start` (seconds on the snapshot's clock).
    pub fn new(
        mut snapshot: Snapshot,
        durations: HashMap<String, Time>,
        options: SimOptions,
        start: Time,
    ) -> Self {
        let (mut arriving, present): (Vec<Pod>, Vec<Pod>) = std::mem::take(&mut snapshot.pods)
            .into_iter()
            .partition(|p| p.node.is_none() && p.created > start);
        snapshot.pods = present;
        arriving.sort_by_key(|p| std::cmp::Reverse(p.created));
        let (mut arriving_groups, groups): (Vec<PodGroup>, Vec<PodGroup>) =
            std::mem::take(&mut snapshot.groups)
                .into_iter()
                .partition(|g| g.created > start);
        snapshot.groups = groups;
        arriving_groups.sort_by_key(|g| std::cmp::Reverse(g.created));
        let leaving = snapshot
            .pods
            .iter()
            .filter(|p| p.terminating)
            .map(|p| (p.key(), start + p.termination_grace_seconds))
            .collect();
        SimCluster {
            world: snapshot,
            arriving,
            arriving_groups,
            durations,
            leaving,
            options,
            start,
            wall_start: Instant::now(),
        }
    }

    /// The simulated clock now.
    pub fn now(&self) -> Time {
        let elapsed = self.wall_start.elapsed().as_secs_f64() * self.options.speed;
        self.start + elapsed as Time
    }

    /// Moves the world to `now`: arrivals, finished pods, evicted pods gone.
    pub fn advance(&mut self, now: Time) {
        while self.arriving.last().is_some_and(|p| p.created <= now) {
            if let Some(pod) = self.arriving.pop() {
                self.world.pods.push(pod);
            }
        }
        while self
            .arriving_groups
            .last()
            .is_some_and(|g| g.created <= now)
        {
            if let Some(group) = self.arriving_groups.pop() {
                self.world.groups.push(group);
            }
        }
        let default = self.options.default_duration;
        let start = self.start;
        let durations = &self.durations;
        let leaving = &mut self.leaving;
        let mut gone = Vec::new();
        self.world.pods.retain(|p| {
            let key = p.key();
            if let Some(&at) = leaving.get(&key) {
                if at <= now {
                    leaving.remove(&key);
                    if !p.constraints.claims.is_empty() {
                        gone.push(p.clone());
                    }
                    return false;
                }
                return true;
            }
            let Some(started) = p.started.filter(|_| p.node.is_some()) else {
                return true;
            };
            // A pod already running in the file runs its duration from the clock's start: the
            // file says when it started, not how long it has left.
            let runs = durations.get(&key).copied().unwrap_or(default);
            let stays = started.max(start).saturating_add(runs) > now;
            if !stays && !p.constraints.claims.is_empty() {
                gone.push(p.clone());
            }
            stays
        });
        // Kubernetes' resource claim controller: the claims of pods gone are theirs no more.
        for p in &gone {
            dra::release(&mut self.world.dra, p);
        }
        if !self.world.dra.is_empty() {
            dra::recount_gpus(&mut self.world);
        }
    }

    /// The world as it is (for tests and the demo).
    pub fn world(&self) -> &Snapshot {
        &self.world
    }

    /// Pods still to arrive.
    pub fn arriving(&self) -> usize {
        self.arriving.len()
    }
}

impl Backend for SimCluster {
    fn snapshot(&mut self, _policy: &Policy) -> Result<(Snapshot, Time), String> {
        let now = self.now();
        self.advance(now);
        Ok((self.world.clone(), now))
    }

    fn apply(&mut self, cycle: &Applied<'_>) -> Result<Vec<CallOutcome>, String> {
        let (decisions, now) = (cycle.decisions, cycle.now);
        let index: HashMap<String, usize> = self
            .world
            .pods
            .iter()
            .enumerate()
            .map(|(i, p)| (p.key(), i))
            .collect();
        let zones = kai_scheduler::numa::by_pod(cycle.numa_zones);
        let zones_of = |pod: &str| zones.get(pod).map(|z| (*z).clone());
        for decision in decisions {
            match decision {
                Decision::Bind { pod, node } => {
                    if let Some(&i) = index.get(pod) {
                        let p = &mut self.world.pods[i];
                        p.node = Some(node.clone());
                        p.started = Some(now);
                        // The binder's record of the predicted NUMA placement.
                        p.numa_zones = zones_of(pod);
                        dra::bind(&mut self.world.dra, &self.world.pods[i], cycle.claims);
                    }
                }
                Decision::Evict { pod, reason, .. } => {
                    let Some(&i) = index.get(pod) else { continue };
                    let p = &mut self.world.pods[i];
                    if let EvictReason::Consolidate { to_node, .. } = reason {
                        p.move_to(to_node, now);
                        p.numa_zones = zones_of(pod);
                        dra::release(&mut self.world.dra, &self.world.pods[i]);
                        dra::bind(&mut self.world.dra, &self.world.pods[i], cycle.claims);
                    } else if !p.terminating {
                        p.terminating = true;
                        p.deletion_deadline = Some(now + p.termination_grace_seconds);
                        self.leaving
                            .insert(pod.clone(), now + p.termination_grace_seconds);
                    }
                }
                Decision::Nominate { .. } | Decision::Pending { .. } => {}
            }
        }
        Ok(Vec::new())
    }
}

/// The simulated durations of the file's pods, from [`DURATION_ANNOTATION`].
fn durations(file: &str, text: &str) -> Result<HashMap<String, Time>, String> {
    let doc: serde_json::Value = serde_saphyr::from_str(text).unwrap_or_default();
    let items = match doc.get("items").and_then(|i| i.as_array()) {
        Some(items) => items.clone(),
        None => vec![doc],
    };
    let mut out = HashMap::new();
    for item in &items {
        let meta = &item["metadata"];
        let Some(value) = meta["annotations"][DURATION_ANNOTATION].as_str() else {
            continue;
        };
        let key = format!(
            "{}/{}",
            meta["namespace"].as_str().unwrap_or("default"),
            meta["name"].as_str().unwrap_or_default()
        );
        let seconds = parse_duration(value).map_err(|e| {
            format!("{file}: pod {key}: annotation {DURATION_ANNOTATION}: {value:?} is not a duration like \"90s\", \"10m\" or \"2h\": {e}")
        })?;
        out.insert(key, seconds.0);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use kai_policy_compiler::check::check;
    use kai_policy_compiler::source::{SourceFile, SourceSet};
    use kai_scheduler::cluster::{Amounts, Node};
    use kai_scheduler::cycle::{Cycle, run};

    use super::*;

    /// Two halves of one node's two GPUs, on the devices KAI's binder named, and a pod asking
    /// a whole GPU: the cycle moves one half to the other device, and the simulated cluster
    /// applies the move as KAI's binder would, naming no device, so the next cycle sees both
    /// halves on one device and binds the waiting pod instead of moving a half again.
    #[test]
    fn a_pod_moved_to_another_device_does_not_keep_the_one_it_left() {
        let policy = check(
            &SourceSet::new(vec![SourceFile::new(
                "p.kdl",
                r#"queue "a" { gpu quota=2; namespaces "a" }"#,
            )]),
            Vec::new(),
        )
        .policy
        .expect("the policy checks");
        let pod = |name: &str, gpu: i64, group: Option<&str>| Pod {
            namespace: "a".into(),
            name: name.into(),
            request: Amounts {
                gpu,
                cpu: 100,
                memory: 1 << 20,
            },
            fractional: gpu < 1000,
            labels: group
                .map(|g| BTreeMap::from([("runai-gpu-group".to_string(), g.to_string())]))
                .unwrap_or_default(),
            node: group.map(|_| "n".into()),
            started: group.map(|_| 0),
            ..Default::default()
        };
        let snapshot = Snapshot {
            nodes: vec![Node {
                name: "n".into(),
                allocatable: Amounts {
                    gpu: 2000,
                    cpu: 8000,
                    memory: 1 << 34,
                },
                ..Default::default()
            }],
            pods: vec![
                pod("h0", 500, Some("g0")),
                pod("h1", 500, Some("g1")),
                pod("w", 1000, None),
            ],
            ..Default::default()
        };
        let options = SimOptions {
            speed: 1.0,
            default_duration: 3600,
            start: None,
        };
        let mut sim = SimCluster::new(snapshot, HashMap::new(), options, 0);
        let cycle = |sim: &mut SimCluster, now: Time| {
            let world = sim.world().clone();
            let r = run(&Cycle {
                snapshot: &world,
                policy: &policy,
                now,
                usage: None,
            });
            sim.apply(&Applied {
                policy: &policy,
                source: ("c", "d"),
                decisions: &r.decisions,
                shares: &r.shares,
                allocated: &r.allocated,
                now,
                stale_marks: &r.stale_marks,
                started: &r.started,
                evicted: &r.evicted,
                claims: &r.claims,
                numa_zones: &r.numa_zones,
            })
            .expect("the simulated cluster applies every decision");
            r.decisions
        };
        let first = cycle(&mut sim, 10);
        let moves = |decisions: &[Decision]| {
            decisions
                .iter()
                .filter(|d| {
                    matches!(
                        d,
                        Decision::Evict {
                            reason: EvictReason::Consolidate { .. },
                            ..
                        }
                    )
                })
                .count()
        };
        assert_eq!(moves(&first), 1, "{first:#?}");
        let moved: Vec<&Pod> = sim
            .world()
            .pods
            .iter()
            .filter(|p| p.started == Some(10))
            .collect();
        assert_eq!(moved.len(), 1, "the moved half runs from the move");
        assert!(moved[0].gpu_groups().is_empty(), "{:?}", moved[0].labels);
        let second = cycle(&mut sim, 20);
        assert_eq!(moves(&second), 0, "{second:#?}");
        assert!(
            second.contains(&Decision::Bind {
                pod: "a/w".into(),
                node: "n".into()
            }),
            "{second:#?}"
        );
    }
}
