//! The Kubernetes backend behind the daemon's synchronous [`Backend`] trait.
//!
//! [`KubeCluster`] owns a small tokio runtime of its own (one worker thread, `kube-backend`) on
//! which the watch caches, the leader election and the readiness watcher run all the time. The
//! scheduling loop calls [`Backend::snapshot`] and [`Backend::apply`] from the blocking thread
//! its cycle runs on: the snapshot is a copy of the caches (no waiting), and `apply` blocks on
//! the runtime while the calls go out. The daemon's own runtime (HTTP, the loop's timer) never
//! runs Kubernetes work, so a slow list of 100,000 pods cannot stall `/healthz`.
//!
//! Only the leader sends anything. Without `--leader-elect-lease` this replica always leads
//! (one replica, or a developer's laptop). With it, the Lease task of
//! `kai_scheduler_kube::lease` runs beside the loop; a follower still takes snapshots and runs
//! cycles (its `/pending`, metrics and usage history stay warm for a take-over) but sends no
//! call, and a leader that loses the Lease stops sending between two batches of calls.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use k8s_openapi::jiff::Timestamp;
use kai_policy_compiler::model::Policy;
use kai_policy_compiler::quantity::ResourceKind;
use kai_scheduler::cluster::{Amounts, Snapshot, Time};
use kai_scheduler::ingest::Options;
use kai_scheduler_kube::apply::Desired;
use kai_scheduler_kube::backend::{Config, KubeBackend};
use kai_scheduler_kube::calls::{Call, Managed, QueueNumbers};
use kai_scheduler_kube::client::{Limits, Outcome, Sent};
use kai_scheduler_kube::lease::{Election, Leading};
use kai_scheduler_kube::snapshot;
use tracing::{debug, error, info, warn};

use crate::backend::{Applied, Backend, CallOutcome};

/// How to reach the cluster and who this replica is.
#[derive(Debug, Clone)]
pub struct KubeOptions {
    /// A kubeconfig file; `None`: `$KUBECONFIG`, `~/.kube/config`, else the in-cluster service
    /// account (kube-rs's order).
    pub kubeconfig: Option<PathBuf>,
    /// The scheduler name pods ask for (`--scheduler-name`); `None`: the policy's.
    pub scheduler_name: Option<String>,
    /// Leader election; `None`: this replica always leads.
    pub election: Option<Election>,
    /// This replica's name (events' reporting instance; the Lease holder).
    pub instance: String,
    /// How hard to press on the API server.
    pub limits: Limits,
    /// Server-side apply the policy's Queues and PriorityClasses (`--apply-queues`).
    pub apply_queues: bool,
    /// NUMA alignment (`--numa`), with the resources it leaves out (`--numa-ignore`).
    pub numa: Option<std::collections::BTreeSet<String>>,
}

/// A policy applied completely is applied again after this long, so that a hand edit of a field
/// the policy sets, or a deleted Queue, is put right (the drift repair of Argo CD's self-heal).
const RESYNC: Duration = Duration::from_secs(600);
/// A policy that could not be applied completely is tried again after this long.
const RETRY: Duration = Duration::from_secs(30);

/// `--apply-queues`: what the active policy wants, and what was last applied completely.
#[derive(Default)]
struct ApplyState {
    /// The commit and digest [`ApplyState::desired`] was made for.
    source: (String, String),
    desired: Desired,
    /// The objects last applied completely, and when.
    done: Option<(Desired, Instant)>,
    /// No attempt before this (after one that failed).
    retry_at: Option<Instant>,
}

impl ApplyState {
    /// Whether to apply now, after bringing `desired` up to date with the cycle's policy.
    fn due(&mut self, cycle: &Applied<'_>, now: Instant) -> bool {
        let (commit, digest) = cycle.source;
        if self.source.0 != commit || self.source.1 != digest {
            self.desired = Desired::of(cycle.policy);
            self.source = (commit.to_string(), digest.to_string());
            self.retry_at = None;
        }
        match &self.done {
            Some((applied, at)) if *applied == self.desired => now.duration_since(*at) >= RESYNC,
            _ => self.retry_at.is_none_or(|t| now >= t),
        }
    }
}

/// What the HTTP server and the log show about the cluster: shared with the backend's tasks.
#[derive(Debug, Default)]
pub struct ClusterStatus {
    synced: AtomicBool,
    failed: Mutex<Option<String>>,
    leading: Mutex<Option<Leading>>,
    elected: AtomicBool,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl ClusterStatus {
    /// Why the cluster is not ready to schedule, or `None` once every watch cache has listed.
    pub fn not_ready(&self) -> Option<String> {
        if self.synced.load(Ordering::Acquire) {
            return None;
        }
        Some(lock(&self.failed).clone().unwrap_or_else(|| {
            "the watch caches (Nodes, Pods, PodGroups) have not listed yet".to_string()
        }))
    }

    /// Whether this replica may send calls now.
    pub fn leads(&self) -> bool {
        !self.elected.load(Ordering::Acquire)
            || lock(&self.leading).as_ref().is_some_and(Leading::leads)
    }

    /// For `/policy`: `"yes"`, `"no (holder: NAME)"`, `"unknown: WHY"`, or `"yes (no election)"`.
    pub fn leading(&self) -> String {
        if !self.elected.load(Ordering::Acquire) {
            return "yes (no leader election)".to_string();
        }
        match &*lock(&self.leading) {
            None => "not yet (no Lease round finished)".to_string(),
            Some(Leading::Yes) => "yes".to_string(),
            Some(Leading::No { holder }) => format!("no (the Lease is held by {holder})"),
            Some(Leading::Unknown(why)) => format!("no (the last Lease round failed: {why})"),
        }
    }
}

/// The Kubernetes backend, driven synchronously by the scheduling loop.
pub struct KubeCluster {
    /// Dropped with `shutdown_background` (the loop may drop this inside the daemon's runtime,
    /// where a blocking drop would panic).
    runtime: Option<tokio::runtime::Runtime>,
    backend: KubeBackend,
    status: Arc<ClusterStatus>,
    scheduler_name: Option<String>,
    /// Problems of the last snapshot, so each is logged once.
    problems: BTreeSet<String>,
    /// Call failures of the last cycle, so a failure repeated every cycle is logged once.
    failures: BTreeSet<String>,
    /// The policy's scheduler name that `--scheduler-name` overrides, once warned about.
    warned_name: Option<String>,
    /// `--apply-queues`.
    apply: Option<ApplyState>,
    /// The Lease this replica competes for, to give up at shutdown, and the task competing.
    election: Option<Election>,
    lease_task: Option<tokio::task::JoinHandle<()>>,
}

impl Drop for KubeCluster {
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

impl KubeCluster {
    /// Reads the configuration, builds the client and starts the watch caches, the readiness
    /// watcher and (with an election) the Lease task. Nothing here waits for the API server:
    /// an unreachable one shows as "not ready" on `/readyz`. Call it outside any tokio runtime.
    pub fn start(options: KubeOptions) -> Result<KubeCluster, String> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("kube-backend")
            .enable_all()
            .build()
            .map_err(|e| format!("cannot start the Kubernetes backend's runtime: {e}"))?;
        let config = Config {
            kubeconfig: options.kubeconfig.clone(),
            options: Options {
                queue_label: String::new(),
                scheduler_name: options.scheduler_name.clone(),
                origin: None,
                complete_owner_kinds: Vec::new(),
            },
            instance: options.instance.clone(),
            limits: options.limits,
            numa: options.numa.clone(),
        };
        let backend = runtime
            .block_on(KubeBackend::connect(config))
            .map_err(|e| e.to_string())?;
        let status = Arc::new(ClusterStatus::default());

        let synced = backend.synced();
        let s = status.clone();
        runtime.spawn(async move {
            match synced.await {
                Ok(()) => {
                    info!("watch caches synced (Nodes, Pods, PodGroups, PriorityClasses, owners of pods)");
                    s.synced.store(true, Ordering::Release);
                }
                Err(e) => {
                    error!("the watch caches cannot sync: {e}");
                    *lock(&s.failed) = Some(e);
                }
            }
        });

        let mut lease_task = None;
        if let Some(election) = options.election.clone() {
            status.elected.store(true, Ordering::Release);
            info!(
                lease = %format!("{}/{}", election.namespace, election.name),
                identity = %election.identity,
                "competing for the Lease"
            );
            let (task, mut rx) = {
                let _guard = runtime.enter();
                backend.elect(election)
            };
            lease_task = Some(runtime.spawn(task));
            let s = status.clone();
            runtime.spawn(async move {
                while rx.changed().await.is_ok() {
                    let now = rx.borrow_and_update().clone();
                    match &now {
                        Leading::Yes => info!("leading: this replica holds the Lease"),
                        Leading::No { holder } => {
                            info!(%holder, "following: another replica holds the Lease")
                        }
                        Leading::Unknown(why) => {
                            warn!("not leading: the Lease round failed: {why}")
                        }
                    }
                    *lock(&s.leading) = Some(now);
                }
            });
        }
        Ok(KubeCluster {
            runtime: Some(runtime),
            backend,
            status,
            scheduler_name: options.scheduler_name,
            problems: BTreeSet::new(),
            failures: BTreeSet::new(),
            warned_name: None,
            apply: options.apply_queues.then(ApplyState::default),
            election: options.election,
            lease_task,
        })
    }

    /// The status the HTTP server reads.
    pub fn status(&self) -> Arc<ClusterStatus> {
        self.status.clone()
    }

    fn options(&mut self, policy: &Policy) -> Options {
        let mut options = Options::for_policy(policy);
        if let Some(name) = &self.scheduler_name {
            let theirs = &policy.cluster.scheduler_name;
            if theirs != name && self.warned_name.as_ref() != Some(theirs) {
                warn!(
                    "the policy names the scheduler {theirs:?} but --scheduler-name is {name:?}: scheduling the pods that ask for {name:?}"
                );
                self.warned_name = Some(theirs.clone());
            }
            options.scheduler_name = Some(name.clone());
        }
        options
    }
}

impl Backend for KubeCluster {
    fn snapshot(&mut self, policy: &Policy) -> Result<(Snapshot, Time), String> {
        if let Some(why) = self.status.not_ready() {
            return Err(format!("the cluster is not ready: {why}"));
        }
        let options = self.options(policy);
        self.backend.set_options(options);
        let now = Timestamp::now();
        let read = self.backend.snapshot(now);
        let problems: BTreeSet<String> = read.problems.iter().cloned().collect();
        for p in problems.difference(&self.problems) {
            warn!("left out of the snapshot: {p}");
        }
        let snapshot = read.snapshot.clone();
        self.problems = problems;
        Ok((snapshot, snapshot::clock(now)))
    }

    fn apply(&mut self, cycle: &Applied<'_>) -> Result<Vec<CallOutcome>, String> {
        if !self.status.leads() {
            // A replica that takes the Lease applies the policy at once.
            if let Some(apply) = &mut self.apply {
                apply.done = None;
            }
            return Ok(Vec::new());
        }
        let mut policy_calls = Vec::new();
        if let Some(apply) = &mut self.apply
            && let Some(runtime) = &self.runtime
            && apply.due(cycle, Instant::now())
        {
            let report = runtime.block_on(self.backend.apply_policy(&apply.desired));
            let (mut applied, mut pruned) = (0, Vec::new());
            for s in &report.sent {
                match (&s.call, &s.outcome) {
                    (Call::Apply { .. }, Outcome::Done) => applied += 1,
                    (Call::Prune { kind, name }, Outcome::Done) => {
                        pruned.push(format!("{} {name}", kind.kind()))
                    }
                    (_, Outcome::Done) => {}
                    _ => warn!("--apply-queues: {s}"),
                }
            }
            for problem in &report.problems {
                warn!("--apply-queues: {problem}");
            }
            info!(
                commit = %cycle.source.0,
                queues = apply.desired.count(Managed::Queue),
                priority_classes = apply.desired.count(Managed::PriorityClass),
                applied,
                pruned = %pruned.join(", "),
                complete = report.complete,
                "applied the policy's Queues and PriorityClasses"
            );
            if report.complete {
                apply.done = Some((apply.desired.clone(), Instant::now()));
                apply.retry_at = None;
            } else {
                apply.done = None;
                apply.retry_at = Some(Instant::now() + RETRY);
            }
            policy_calls = report.sent.iter().map(count).collect();
        }
        let queues = queue_numbers(cycle);
        let now = Timestamp::from_second(i64::try_from(cycle.now).unwrap_or(i64::MAX))
            .unwrap_or_else(|_| Timestamp::now());
        let status = self.status.clone();
        let Some(runtime) = &self.runtime else {
            return Ok(Vec::new());
        };
        // The backend's clock is seconds since the epoch: the marks are written as they are.
        self.backend.mark_stale(cycle.stale_marks);
        self.backend.cycle_claims(cycle.claims);
        self.backend.cycle_numa(cycle.numa_zones);
        self.backend
            .mark_started_and_evicted(cycle.started, cycle.evicted, cycle.now);
        let sent =
            runtime.block_on(
                self.backend
                    .apply_while(cycle.decisions, &queues, now, || status.leads()),
            );
        let mut failures = BTreeSet::new();
        for s in &sent {
            if s.outcome == Outcome::Done {
                continue;
            }
            let line = s.to_string();
            if self.failures.contains(&line) {
                debug!("{line}");
            } else {
                warn!("{line}");
            }
            failures.insert(line);
        }
        self.failures = failures;
        policy_calls.extend(sent.iter().map(count));
        Ok(policy_calls)
    }

    fn acts(&self) -> bool {
        self.status.leads()
    }

    fn stop(&mut self) {
        let (Some(election), Some(runtime)) = (&self.election, &self.runtime) else {
            return;
        };
        // No more rounds: one after the release would take the Lease straight back.
        if let Some(task) = self.lease_task.take() {
            task.abort();
            let _ = runtime.block_on(task);
        }
        // Bounded: an API server that does not answer must not hold the shutdown up; the
        // Lease then expires by itself.
        let released = runtime.block_on(async {
            tokio::time::timeout(election.period, self.backend.release(election)).await
        });
        match released {
            Ok(Ok(true)) => info!("released the Lease: another replica may lead at once"),
            Ok(Ok(false)) => {}
            Ok(Err(outcome)) => {
                warn!("could not release the Lease ({outcome}); it expires by itself")
            }
            Err(_) => warn!("releasing the Lease took too long; it expires by itself"),
        }
    }
}

/// One sent call as the metrics count it.
fn count(sent: &Sent) -> CallOutcome {
    let call = match &sent.call {
        Call::Bind { .. } => "bind",
        Call::Evict { .. } => "evict",
        Call::PodCondition { .. } => "pod-condition",
        Call::PodGroupStatus { .. } => "podgroup-status",
        Call::PodGroupAnnotation { .. } => "podgroup-annotation",
        Call::CreatePodGroup { .. } => "podgroup-create",
        Call::PodGroupSpec { .. } => "podgroup-update",
        Call::QueueStatus { .. } => "queue-status",
        Call::Event { .. } => "event",
        Call::Apply { .. } => "apply",
        Call::Prune { .. } => "prune",
    };
    let outcome = match &sent.outcome {
        Outcome::Done => "done",
        Outcome::RefusedByBudget(_) => "refused",
        Outcome::Gone(_) => "gone",
        Outcome::Conflict(_) => "conflict",
        Outcome::Forbidden(_) => "forbidden",
        Outcome::Failed(0, m) if m.starts_with("not sent") => "skipped",
        Outcome::Failed(..) => "failed",
    };
    CallOutcome { call, outcome }
}

/// Each queue's numbers for its status: what it holds after the cycle, what its work asks for,
/// and its fair share, from the cycle's own figures.
pub fn queue_numbers(cycle: &Applied<'_>) -> Vec<QueueNumbers> {
    cycle
        .policy
        .queues
        .iter()
        .enumerate()
        .map(|(i, q)| {
            let mut requested = Amounts::default();
            let mut fair_share = Amounts::default();
            if let Some(share) = cycle.shares.queues.get(i) {
                for kind in ResourceKind::ALL {
                    *requested.get_mut(kind) = share.get(kind).request;
                    *fair_share.get_mut(kind) = share.get(kind).fair_share;
                }
            }
            QueueNumbers {
                name: q.name.clone(),
                allocated: cycle.allocated.get(i).copied().unwrap_or_default(),
                requested,
                fair_share,
            }
        })
        .collect()
}
