//! `kai-scheduler run`: the long-running scheduler. Three parts share one [`Shared`] state:
//! - the **follower** thread looks at the policy repository (on every `--poll`, and at once when
//!   a watched checkout changes), compiles each new tip and publishes it as one immutable
//!   `Arc<Active>`;
//! - the **scheduling loop** (a tokio interval) takes the active policy once at the start of each
//!   cycle, so a swap lands between two cycles and a cycle never sees half of two policies; the
//!   cycle itself runs on a blocking thread, off the runtime;
//! - the **HTTP server** answers `/healthz`, `/readyz`, `/policy`, `/pending` and `/metrics`.
//!
//! The cluster is a [`Backend`]: the simulator over a cluster file (`--cluster`), or Kubernetes
//! (`--kubeconfig`, or in-cluster), whose watch caches must have listed before the daemon is
//! ready.
//!
//! SIGTERM or SIGINT: the cycle in progress finishes, the usage history is persisted, the
//! follower stops, then the server.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::{Duration, Instant, SystemTime};

use kai_policy_compiler::fairshare::usage::UsageHistory;
use kai_scheduler::bench::Counts;
use kai_scheduler::cluster::{PodGroup, Time};
use kai_scheduler::cycle::{self, Cycle};
use kai_scheduler::decision::{Decision, Reason};
use kai_scheduler::usage;
use serde_json::{Value, json};
use tokio::sync::watch;
use tracing::{debug, error, info, warn};

use crate::backend::{Applied, Backend};
use crate::follow::{Active, FollowOptions, Follower, Origin, Outcome, Rejected};
use crate::kubernetes::{ClusterStatus, KubeCluster, KubeOptions};
use crate::metrics::{CycleFigures, Metrics};
use crate::sim::{SimCluster, SimOptions};

/// Everything `kai-scheduler run` is told.
#[derive(Debug, Clone)]
pub struct DaemonOptions {
    /// The policy repository and what to read in it.
    pub follow: FollowOptions,
    /// How often the repository is looked at (a watched checkout is also read on change).
    pub poll: Duration,
    /// Time between the starts of two cycles.
    pub period: Duration,
    /// Where the HTTP server listens.
    pub listen: SocketAddr,
    /// The cluster to schedule.
    pub cluster: ClusterOptions,
}

/// Which cluster the daemon schedules.
#[derive(Debug, Clone)]
pub enum ClusterOptions {
    /// The simulated cluster (development and demo mode).
    File {
        /// The cluster file it starts from.
        path: PathBuf,
        /// How it moves.
        sim: SimOptions,
    },
    /// A Kubernetes cluster.
    Kube(KubeOptions),
}

/// A job pending after the last cycle, as `/pending` lists it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct PendingJob {
    /// `namespace/name` of its pod group or single pod.
    pub job: String,
    /// Why it did not start.
    pub reason: String,
}

/// State the follower, the loop and the server share.
pub struct Shared {
    active: RwLock<Option<Arc<Active>>>,
    rejected: Mutex<Option<Rejected>>,
    unreachable: Mutex<Option<String>>,
    pending: Mutex<Vec<PendingJob>>,
    /// The metrics `/metrics` serves.
    pub metrics: Metrics,
    source: Value,
    /// The Kubernetes backend's readiness and leadership (`None`: the simulated cluster).
    cluster: Option<Arc<ClusterStatus>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

fn rfc3339(t: SystemTime) -> String {
    let seconds = t
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    k8s_openapi::jiff::Timestamp::from_second(seconds)
        .map_or_else(|_| String::new(), |t| t.to_string())
}

impl Shared {
    /// Empty state for a daemon following `follow`.
    pub fn new(follow: &FollowOptions) -> Self {
        let (kind, location) = match &follow.origin {
            Origin::Remote(url) => ("remote", url.clone()),
            Origin::Local(path) => ("local", path.display().to_string()),
        };
        Shared {
            active: RwLock::new(None),
            rejected: Mutex::new(None),
            unreachable: Mutex::new(None),
            pending: Mutex::new(Vec::new()),
            metrics: Metrics::new(),
            source: json!({
                "kind": kind,
                "repository": location,
                "branch": follow.branch,
                "path": follow.path,
            }),
            cluster: None,
        }
    }

    /// The same, scheduling a Kubernetes cluster whose readiness `status` tells.
    pub fn with_cluster(follow: &FollowOptions, status: Arc<ClusterStatus>) -> Self {
        Shared {
            cluster: Some(status),
            ..Shared::new(follow)
        }
    }

    /// The active policy, if one compiled.
    pub fn active(&self) -> Option<Arc<Active>> {
        self.active
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Why the daemon is not ready, or `None` when it is: a policy must be active and the
    /// cluster's watch caches (Kubernetes) must have listed.
    pub fn not_ready(&self) -> Option<String> {
        if self.active().is_some() {
            return self
                .cluster
                .as_ref()
                .and_then(|c| c.not_ready())
                .map(|why| format!("the cluster is not ready: {why}"));
        }
        let why = lock(&self.rejected)
            .as_ref()
            .map(|r| r.message.clone())
            .or_else(|| lock(&self.unreachable).clone())
            .unwrap_or_else(|| "the policy repository has not been read yet".to_string());
        Some(format!("no compilable policy: {why}"))
    }

    /// The `/policy` document.
    pub fn policy_json(&self) -> Value {
        let active = self.active();
        let rejected = lock(&self.rejected).clone();
        json!({
            "ready": active.is_some(),
            "source": self.source,
            "commit": active.as_ref().map(|a| a.commit.clone()),
            "digest": active.as_ref().map(|a| a.digest.clone()),
            "loaded_at": active.as_ref().map(|a| rfc3339(a.loaded_at)),
            "queues": active.as_ref().map(|a| a.policy.queues.len()),
            "rejected": rejected.map(|r| json!({
                "commit": r.commit,
                "message": r.message,
                "at": rfc3339(r.at),
                "diagnostics": r.diagnostics,
            })),
            "unreachable": lock(&self.unreachable).clone(),
            "cluster": match &self.cluster {
                None => json!({ "kind": "simulated" }),
                Some(c) => json!({
                    "kind": "kubernetes",
                    "synced": c.not_ready().is_none(),
                    "leading": c.leading(),
                }),
            },
        })
    }

    /// The `/pending` document.
    pub fn pending_json(&self) -> Value {
        json!({ "pending": *lock(&self.pending) })
    }

    /// Takes in one look at the repository: logs it, counts it, and publishes a loaded policy.
    pub fn take(&self, outcome: Outcome) {
        match outcome {
            Outcome::Unchanged => {
                lock(&self.unreachable).take();
            }
            Outcome::Loaded(active) => {
                info!(
                    commit = %active.commit,
                    digest = %active.digest,
                    queues = active.policy.queues.len(),
                    "policy loaded"
                );
                self.metrics.reload("loaded");
                self.metrics.policy(&active.commit, &active.digest);
                lock(&self.unreachable).take();
                *self.active.write().unwrap_or_else(PoisonError::into_inner) = Some(active);
            }
            Outcome::Rejected(rejected) => {
                warn!(commit = %rejected.commit, "policy rejected: {}", rejected.message);
                self.metrics.reload("rejected");
                *lock(&self.rejected) = Some(rejected);
                self.say_if_not_ready();
            }
            Outcome::Unreachable(why) => {
                let mut last = lock(&self.unreachable);
                if last.as_deref() != Some(why.as_str()) {
                    warn!("policy repository unreachable (retrying every poll): {why}");
                }
                self.metrics.reload("unreachable");
                *last = Some(why);
                drop(last);
                self.say_if_not_ready();
            }
        }
    }

    fn say_if_not_ready(&self) {
        if let Some(why) = self.not_ready() {
            error!("not ready, scheduling nothing: {why}");
        }
    }
}

/// Runs the daemon until SIGTERM or SIGINT (or a fatal error, returned).
pub fn run(options: DaemonOptions) -> Result<(), String> {
    // The Kubernetes backend starts first, on a runtime of its own (outside the daemon's): a
    // kubeconfig that cannot be read stops the daemon before it listens.
    let (backend, shared): (Option<Box<dyn Backend>>, Shared) = match &options.cluster {
        ClusterOptions::File { .. } => (None, Shared::new(&options.follow)),
        ClusterOptions::Kube(kube) => {
            let cluster = KubeCluster::start(kube.clone())?;
            let shared = Shared::with_cluster(&options.follow, cluster.status());
            (Some(Box::new(cluster)), shared)
        }
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the runtime: {e}"))?;
    runtime.block_on(serve(options, Arc::new(shared), backend))
}

async fn serve(
    options: DaemonOptions,
    shared: Arc<Shared>,
    backend: Option<Box<dyn Backend>>,
) -> Result<(), String> {
    let state_dir = options.follow.state_dir.clone();
    std::fs::create_dir_all(&state_dir)
        .map_err(|e| format!("cannot create --state-dir {}: {e}", state_dir.display()))?;
    let history = load_history(&state_dir);
    let listener = tokio::net::TcpListener::bind(options.listen)
        .await
        .map_err(|e| format!("cannot listen on {}: {e}", options.listen))?;
    let address = listener
        .local_addr()
        .map_err(|e| format!("cannot listen on {}: {e}", options.listen))?;
    info!(%address, "listening");

    let (wake, woken) = mpsc::channel();
    let follower = spawn_follower(&shared, &options, wake.clone(), woken)?;
    let (stop, stopped) = watch::channel(false);
    let mut scheduler = tokio::spawn(schedule(shared.clone(), options, backend, history, stopped));
    let (stop_server, server_stopped) = watch::channel(false);
    let server = tokio::spawn(
        axum::serve(listener, crate::http::router(shared.clone()))
            .with_graceful_shutdown(changed(server_stopped))
            .into_future(),
    );

    let failed = tokio::select! {
        signal = shutdown_signal() => {
            info!("{signal}: finishing the cycle in progress");
            let _ = stop.send(true);
            match (&mut scheduler).await {
                Ok(result) => result.err(),
                Err(e) => Some(e.to_string()),
            }
        }
        result = &mut scheduler => match result {
            Ok(result) => result.err(),
            Err(e) => Some(e.to_string()),
        },
    };
    let _ = wake.send(Wake::Stop);
    let _ = tokio::task::spawn_blocking(move || follower.join()).await;
    let _ = stop_server.send(true);
    let _ = server.await;
    match failed {
        None => {
            info!("stopped");
            Ok(())
        }
        Some(e) => Err(e),
    }
}

async fn changed(mut rx: watch::Receiver<bool>) {
    let _ = rx.changed().await;
}

async fn shutdown_signal() -> &'static str {
    let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(term) => term,
        Err(e) => {
            warn!("cannot listen for SIGTERM: {e}");
            let _ = tokio::signal::ctrl_c().await;
            return "SIGINT";
        }
    };
    tokio::select! {
        _ = term.recv() => "SIGTERM",
        _ = tokio::signal::ctrl_c() => "SIGINT",
    }
}

/// Messages to the follower thread.
enum Wake {
    /// The watched checkout changed: look now.
    Changed,
    /// Shut down.
    Stop,
}

/// How long the follower lets a change settle before it looks.
const SETTLE: Duration = Duration::from_millis(100);

/// Starts the follower thread (and, for a local checkout, the file watcher that wakes it).
fn spawn_follower(
    shared: &Arc<Shared>,
    options: &DaemonOptions,
    wake: mpsc::Sender<Wake>,
    woken: mpsc::Receiver<Wake>,
) -> Result<std::thread::JoinHandle<()>, String> {
    let mut watcher = match &options.follow.origin {
        Origin::Local(path) => Some(crate::watch::CheckoutWatch::new(path, move || {
            let _ = wake.send(Wake::Changed);
        })?),
        Origin::Remote(_) => None,
    };
    let mut follower = Follower::new(options.follow.clone());
    let shared = shared.clone();
    let poll = options.poll;
    std::thread::Builder::new()
        .name("policy-follower".to_string())
        .spawn(move || {
            loop {
                if let Some(watcher) = watcher.as_mut() {
                    watcher.refresh();
                }
                shared.take(follower.check());
                match woken.recv_timeout(poll) {
                    Ok(Wake::Stop) | Err(mpsc::RecvTimeoutError::Disconnected) => return,
                    // The files of one commit or swap arrive together: take them as one, once
                    // they have had a moment to land.
                    Ok(Wake::Changed) => std::thread::sleep(SETTLE),
                    Err(mpsc::RecvTimeoutError::Timeout) => {}
                }
                while let Ok(w) = woken.try_recv() {
                    if matches!(w, Wake::Stop) {
                        return;
                    }
                }
            }
        })
        .map_err(|e| format!("cannot start the policy follower: {e}"))
}

/// The scheduling loop's own state, moved onto a blocking thread for each cycle.
struct LoopState {
    backend: Option<Box<dyn Backend>>,
    history: UsageHistory,
    previous: Option<Arc<Active>>,
    /// Queues removed by a policy swap, and the commit that removed them.
    removed: BTreeMap<String, String>,
    /// The marks cycles set on pod groups (KAI keeps them in annotations), laid over each
    /// snapshot until the backend shows them.
    marks: GroupMarks,
    persisted: Instant,
    options: DaemonOptions,
}

/// The marks cycles set on pod groups, by `namespace/name`: the stale mark, when a group was
/// started, when a pod of it was last evicted. KAI keeps them in the PodGroup's annotations
/// (`kai.scheduler/stale-podgroup-timestamp`, `last-start-timestamp`,
/// `last-eviction-timestamp`); the in-memory cluster has none, and a cluster's caches show them
/// a little after they are written, so they are kept here and laid over each snapshot.
#[derive(Debug, Default)]
struct GroupMarks {
    stale: BTreeMap<String, Time>,
    started: BTreeMap<String, Time>,
    evicted: BTreeMap<String, Time>,
}

impl GroupMarks {
    /// Forgets the groups gone from `groups`, and gives the others the marks they do not show
    /// yet: a stale mark where they have none, a start or eviction time where theirs is older.
    fn lay_over(&mut self, groups: &mut [PodGroup]) {
        let keys: BTreeSet<String> = groups
            .iter()
            .map(|g| format!("{}/{}", g.namespace, g.name))
            .collect();
        for map in [&mut self.stale, &mut self.started, &mut self.evicted] {
            map.retain(|key, _| keys.contains(key));
        }
        for g in groups {
            let key = format!("{}/{}", g.namespace, g.name);
            if g.stale_since.is_none() {
                g.stale_since = self.stale.get(&key).copied();
            }
            // A group made again under the same name since a mark does not inherit it.
            let mark =
                |map: &BTreeMap<String, Time>| map.get(&key).copied().filter(|&at| at >= g.created);
            if let Some(at) = mark(&self.started) {
                g.last_start = g.last_start.max(Some(at));
            }
            if let Some(at) = mark(&self.evicted) {
                g.last_evicted = g.last_evicted.max(Some(at));
            }
        }
    }

    /// Takes in a cycle's marks, made at `now`.
    fn record(&mut self, result: &cycle::CycleResult, now: Time) {
        for (key, since) in &result.stale_marks {
            match since {
                Some(since) => self.stale.insert(key.clone(), *since),
                None => self.stale.remove(key),
            };
        }
        for key in &result.started {
            self.started.insert(key.clone(), now);
        }
        for key in &result.evicted {
            self.evicted.insert(key.clone(), now);
        }
    }
}

/// How often the usage history is written between shutdowns.
const PERSIST_EVERY: Duration = Duration::from_secs(60);

async fn schedule(
    shared: Arc<Shared>,
    options: DaemonOptions,
    backend: Option<Box<dyn Backend>>,
    history: UsageHistory,
    mut stop: watch::Receiver<bool>,
) -> Result<(), String> {
    let mut tick = tokio::time::interval(options.period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut state = LoopState {
        backend,
        history,
        previous: None,
        removed: BTreeMap::new(),
        marks: GroupMarks::default(),
        persisted: Instant::now(),
        options,
    };
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = stop.changed() => break,
        }
        let shared = shared.clone();
        let (back, result) = tokio::task::spawn_blocking(move || {
            let result = state.step(&shared);
            (state, result)
        })
        .await
        .map_err(|e| format!("the scheduling cycle failed: {e}"))?;
        state = back;
        if let Err(e) = result {
            state.persist();
            return Err(e);
        }
    }
    state.persist();
    if let Some(mut backend) = state.backend.take() {
        tokio::task::spawn_blocking(move || backend.stop())
            .await
            .map_err(|e| format!("stopping the cluster backend failed: {e}"))?;
    }
    Ok(())
}

impl LoopState {
    /// One cycle with the policy active now; nothing when none is.
    fn step(&mut self, shared: &Shared) -> Result<(), String> {
        let Some(active) = shared.active() else {
            return Ok(());
        };
        if shared.not_ready().is_some() {
            // The cluster's caches have not listed yet: `/readyz` says so.
            return Ok(());
        }
        self.note_swap(&active);
        let policy = &active.policy;
        let backend = match (&mut self.backend, &self.options.cluster) {
            (Some(backend), _) => backend,
            (None, ClusterOptions::File { path, sim }) => self
                .backend
                .insert(Box::new(SimCluster::read(path, policy, *sim)?)),
            (None, ClusterOptions::Kube(_)) => {
                return Err("the Kubernetes backend was not started".to_string());
            }
        };
        let (mut snapshot, now) = backend.snapshot(policy)?;
        self.marks.lay_over(&mut snapshot.groups);
        let usage = usage::of(&self.history, policy, now);
        let started = Instant::now();
        let result = cycle::run(&Cycle {
            snapshot: &snapshot,
            policy,
            now,
            usage: usage.as_deref(),
        });
        let seconds = started.elapsed().as_secs_f64();
        usage::record(&mut self.history, &snapshot, policy, &result.allocated, now);
        self.marks.record(&result, now);
        let calls = backend.apply(&Applied {
            policy,
            source: (&active.commit, &active.digest),
            decisions: &result.decisions,
            shares: &result.shares,
            allocated: &result.allocated,
            now,
            stale_marks: &result.stale_marks,
            started: &result.started,
            evicted: &result.evicted,
            claims: &result.claims,
            numa_zones: &result.numa_zones,
        })?;
        shared.metrics.calls(&calls);
        let acts = backend.acts();

        let pending: Vec<PendingJob> = result
            .decisions
            .iter()
            .filter_map(|d| match d {
                Decision::Pending { job, reason, .. } => Some(PendingJob {
                    job: job.clone(),
                    reason: self.explain(reason),
                }),
                _ => None,
            })
            .collect();
        shared.metrics.cycle(
            seconds,
            &CycleFigures {
                policy,
                snapshot: &snapshot,
                now,
                decisions: &result.decisions,
                shares: &result.shares,
                allocated: &result.allocated,
                timings: &result.timings,
            },
        );
        let Counts {
            bound: binds,
            evicted: evictions,
            nominated: nominations,
            ..
        } = Counts::of(&result.decisions);
        let changed = acts
            && (binds + evictions + nominations > 0
                || pending.len() != lock(&shared.pending).len());
        *lock(&shared.pending) = pending;
        let pending = lock(&shared.pending).len();
        let ms = (seconds * 1000.0 * 1000.0).round() / 1000.0;
        if changed {
            info!(
                at = now,
                binds,
                evictions,
                nominations,
                pending,
                ms,
                commit = active.short(),
                "cycle"
            );
        } else {
            debug!(at = now, binds, pending, ms, acts, "cycle");
        }
        if self.persisted.elapsed() >= PERSIST_EVERY {
            self.persist();
        }
        Ok(())
    }

    /// Remembers which queues a newly active policy removed, for the pending reasons.
    fn note_swap(&mut self, active: &Arc<Active>) {
        if let Some(previous) = &self.previous {
            if Arc::ptr_eq(previous, active) {
                return;
            }
            for q in &previous.policy.queues {
                if active.policy.queue(&q.name).is_none() {
                    self.removed
                        .insert(q.name.clone(), active.short().to_string());
                }
            }
        }
        self.removed
            .retain(|name, _| active.policy.queue(name).is_none());
        self.previous = Some(active.clone());
    }

    /// A pending reason in words; a queue that a reload removed says so.
    fn explain(&self, reason: &Reason) -> String {
        if let Reason::UnknownQueue { queue, .. } = reason
            && let Some(commit) = self.removed.get(queue)
        {
            return format!("queue {queue} no longer exists (removed in commit {commit})");
        }
        reason.to_string()
    }

    fn persist(&mut self) {
        self.persisted = Instant::now();
        let dir = &self.options.follow.state_dir;
        if let Err(e) = save_history(dir, &self.history) {
            warn!("cannot persist the usage history in {}: {e}", dir.display());
        }
    }
}

/// The usage history file under `--state-dir`.
pub fn history_path(state_dir: &Path) -> PathBuf {
    state_dir.join("usage.json")
}

/// Writes the history atomically: a temporary file renamed over the old one.
pub fn save_history(state_dir: &Path, history: &UsageHistory) -> std::io::Result<()> {
    let path = history_path(state_dir);
    let tmp = path.with_extension("json.tmp");
    std::fs::write(&tmp, history.to_json())?;
    std::fs::rename(&tmp, &path)
}

/// Reads the persisted history; an unreadable one is set aside (renamed, not lost) and the
/// history starts empty.
pub fn load_history(state_dir: &Path) -> UsageHistory {
    let path = history_path(state_dir);
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return UsageHistory::new(),
        Err(e) => {
            warn!(
                "cannot read {}: {e}; fairness starts from no usage",
                path.display()
            );
            return UsageHistory::new();
        }
    };
    match UsageHistory::from_json(&text) {
        Ok(history) => {
            info!(
                buckets = history.len(),
                "usage history read from {}",
                path.display()
            );
            history
        }
        Err(e) => {
            let aside = path.with_extension("json.unreadable");
            let _ = std::fs::rename(&path, &aside);
            warn!(
                "{} is not a usage history ({e}); kept as {} and fairness starts from no usage",
                path.display(),
                aside.display()
            );
            UsageHistory::new()
        }
    }
}
