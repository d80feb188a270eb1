//! One scheduling cycle: a pure function of (snapshot, policy, clock) → decisions.
//!
//! Order, as KAI runs it: compute fair shares, then allocate; for what allocate could not place,
//! consolidate (move pods to make room), then reclaim between queues, then preempt inside a
//! queue; finally evict stale gangs. Decisions are taken against the snapshot and returned
//! together; nothing is half-applied.

mod allocate;
mod consolidate;
mod dra;
mod evict;
mod filters;
mod futile;
mod gang;
mod jobs;
mod kai;
mod numa;
mod pending;
mod placement;
mod reclaim;
mod state;
mod topology;

pub use evict::STALE_GANG_GRACE_SECONDS;
pub use filters::GPU_MEMORY_LABEL;
pub use gang::{Gang, Unready};
pub use jobs::Job;
#[doc(hidden)]
pub use reclaim::set_victim_replay;

use kai_policy_compiler::fairshare::{self, Demand, FairShares};
use kai_policy_compiler::model::{PerResource, Policy, Strategy};
use kai_policy_compiler::quantity::ResourceKind;

use std::time::Instant;

use crate::cluster::{Amounts, Pod, Snapshot, Time};
use crate::decision::Decision;

/// How long a running pod may outlive its deletion deadline before KAI counts it stuck rather
/// than releasing (`constants.DefaultStuckInReleasingThreshold`).
pub const STUCK_IN_RELEASING_SECONDS: u64 = 120;

/// Whether a pod being deleted still runs more than [`STUCK_IN_RELEASING_SECONDS`] after its
/// deletion deadline (`metadata.deletionTimestamp`) at `now` (`pod_info.go: getTaskStatus`).
pub fn stuck_in_releasing(pod: &Pod, now: Time) -> bool {
    pod.terminating
        && pod.node.is_some()
        && pod
            .deletion_deadline
            .is_some_and(|t| now.saturating_sub(t) > STUCK_IN_RELEASING_SECONDS)
}

/// The inputs of one cycle.
#[derive(Debug, Clone, Copy)]
pub struct Cycle<'a> {
    /// The cluster.
    pub snapshot: &'a Snapshot,
    /// The checked policy.
    pub policy: &'a Policy,
    /// The clock.
    pub now: Time,
    /// Normalised historical usage per queue (time-based fairness); `None`: none recorded.
    pub usage: Option<&'a [PerResource<f64>]>,
}

/// What one cycle decided, and the numbers it decided with.
#[derive(Debug, Clone)]
pub struct CycleResult {
    /// Binds, nominations, evictions, and every pending job with its reason.
    pub decisions: Vec<Decision>,
    /// Fair shares computed at the start of the cycle.
    pub shares: FairShares,
    /// Allocation per queue (parents include their children) after the cycle's decisions.
    pub allocated: Vec<Amounts>,
    /// Pod groups whose stale mark changes: `(namespace/name, since)`, `None` to clear. The
    /// backend keeps it (KAI: the `kai.scheduler/stale-podgroup-timestamp` annotation) and
    /// gives it back in the next snapshot.
    pub stale_marks: Vec<(String, Option<Time>)>,
    /// Pod groups this cycle started, at its `now` (`namespace/name`, sorted): bound with none
    /// of their pods allocated before (KAI's allocate, `setLastStartTimestamp`). The backend
    /// keeps the time (KAI: the `kai.scheduler/last-start-timestamp` annotation) and gives it
    /// back in the next snapshot: min-runtime counts from it.
    pub started: Vec<String>,
    /// Pod groups consolidation, reclaim or preempt evicted pods of, at its `now` (KAI's
    /// `Statement.commitEvict`): kept as `kai.scheduler/last-eviction-timestamp`, from which a
    /// preemption delay counts again.
    pub evicted: Vec<String>,
    /// The DRA claims whose status the cycle changes: devices allocated to the claims of pods
    /// it places, freed from claims no pod uses any more, and the pods reserving them.
    pub claims: Vec<crate::dra::ClaimStatus>,
    /// Where on its node's NUMA zones each pod the cycle binds, nominates or moves
    /// (consolidation) is predicted to go (`namespace/name`, in decision order; pods that take
    /// no zone left out). The backend records it on the pods it binds (KAI:
    /// `kai.scheduler/numa-placement-predicted`; KAI records no nominated pod's zones), and the
    /// next snapshot charges the zones from it.
    pub numa_zones: Vec<crate::numa::PodZones>,
    /// What each NUMA zone has free after the cycle, by node and zone (nodes whose zones are
    /// charged; empty without any): KAI's zone ledger as its session ends.
    pub numa_free: Vec<(String, Vec<(String, crate::numa::Res)>)>,
    /// Wall time of each step, in seconds, in the order run: `("prepare", …)` (pods grouped into
    /// jobs, the free-room index built), `("fair-share", …)`, `("allocate", …)`, then each other
    /// action that ran. Only observed, for metrics: the
    /// decisions never depend on it.
    pub timings: Vec<(&'static str, f64)>,
}

/// Per-queue allocation, kept for every queue and its ancestors.
#[derive(Debug, Clone)]
pub(crate) struct QueueUse {
    pub all: Vec<Amounts>,
    pub non_preemptible: Vec<Amounts>,
    /// The changes made since [`Self::record`], while recording.
    recorded: Option<Vec<UseChange>>,
    /// Queues [`Self::add`] has changed since [`Self::mark`], each with its allocation then:
    /// what an attempt changed is found among them, not by comparing every queue.
    touched: Vec<(usize, Amounts)>,
    /// Per queue, whether it is in `touched`.
    is_touched: Vec<bool>,
}

/// One change of a [`QueueUse`]: a job's amounts added on its leaf (`sign` 1) or taken off
/// (-1), and whether the job is preemptible.
#[derive(Debug, Clone, Copy)]
pub(crate) struct UseChange {
    leaf: usize,
    amounts: Amounts,
    preemptible: bool,
    sign: i64,
}

impl UseChange {
    /// A job's `amounts` added on its `leaf` (`sign` 1) or taken off (-1).
    pub fn new(leaf: usize, amounts: Amounts, preemptible: bool, sign: i64) -> Self {
        UseChange {
            leaf,
            amounts,
            preemptible,
            sign,
        }
    }
}

impl QueueUse {
    fn new(n: usize) -> Self {
        QueueUse {
            all: vec![Amounts::default(); n],
            non_preemptible: vec![Amounts::default(); n],
            recorded: None,
            touched: Vec::new(),
            is_touched: vec![false; n],
        }
    }

    /// Starts noting which queues change, forgetting those noted so far.
    pub fn mark(&mut self) {
        for (q, _) in self.touched.drain(..) {
            self.is_touched[q] = false;
        }
    }

    /// The queues whose allocation differs from what it was at [`Self::mark`].
    pub fn changed_since_mark(&self) -> Vec<usize> {
        (self.touched.iter())
            .filter(|(q, then)| self.all[*q] != *then)
            .map(|&(q, _)| q)
            .collect()
    }

    /// Starts recording the changes, forgetting those recorded so far.
    pub fn record(&mut self) {
        self.recorded = Some(Vec::new());
    }

    /// Stops recording; the changes recorded.
    pub fn take_recorded(&mut self) -> Vec<UseChange> {
        self.recorded.take().unwrap_or_default()
    }

    /// Makes recorded changes again (`forward`), or undoes them (in reverse order).
    pub fn replay(&mut self, policy: &Policy, changes: &[UseChange], forward: bool) {
        let mut apply = |c: &UseChange| {
            let sign = if forward { c.sign } else { -c.sign };
            self.add(policy, c.leaf, c.amounts, c.preemptible, sign);
        };
        if forward {
            changes.iter().for_each(&mut apply);
        } else {
            changes.iter().rev().for_each(&mut apply);
        }
    }

    /// Adds what `other` charges each queue.
    fn merge(&mut self, other: &QueueUse) {
        let pairs = self.all.iter_mut().zip(&other.all);
        for (mine, theirs) in
            pairs.chain(self.non_preemptible.iter_mut().zip(&other.non_preemptible))
        {
            for kind in ResourceKind::ALL {
                *mine.get_mut(kind) += theirs.get(kind);
            }
        }
    }

    /// Adds (`sign = 1`) or removes (`-1`) a job's amounts on its leaf and every ancestor.
    pub fn add(
        &mut self,
        policy: &Policy,
        leaf: usize,
        amounts: Amounts,
        preemptible: bool,
        sign: i64,
    ) {
        if let Some(recorded) = &mut self.recorded {
            recorded.push(UseChange::new(leaf, amounts, preemptible, sign));
        }
        let mut at = Some(leaf);
        while let Some(q) = at {
            // Noted with what it held before its first change since the mark.
            if !self.is_touched[q] {
                self.is_touched[q] = true;
                self.touched.push((q, self.all[q]));
            }
            for kind in ResourceKind::ALL {
                *self.all[q].get_mut(kind) += sign * amounts.get(kind);
                if !preemptible {
                    *self.non_preemptible[q].get_mut(kind) += sign * amounts.get(kind);
                }
            }
            at = policy.queues[q].parent;
        }
    }
}

/// Which actions a cycle runs; they always run in KAI's order (KAI's scheduler configuration
/// `actions: "allocate, consolidation, reclaim, preempt, stalegangeviction"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Actions {
    /// Place pending jobs on free room. Off: pending jobs are only ordered, as the later
    /// actions see them after an allocate that placed nothing.
    pub allocate: bool,
    /// Move preemptible pods to make room for a job.
    pub consolidation: bool,
    /// Evict across queues for a queue below its fair share.
    pub reclaim: bool,
    /// Evict lower-priority work inside a queue.
    pub preempt: bool,
    /// Evict gangs that lost pods below their minimum.
    pub stale_gang_eviction: bool,
}

impl Actions {
    /// Every action: what the scheduler runs.
    pub const ALL: Actions = Actions {
        allocate: true,
        consolidation: true,
        reclaim: true,
        preempt: true,
        stale_gang_eviction: true,
    };

    /// Reads KAI's comma-separated action list (`"allocate, reclaim"`).
    pub fn parse(text: &str) -> Result<Actions, String> {
        let mut actions = Actions {
            allocate: false,
            consolidation: false,
            reclaim: false,
            preempt: false,
            stale_gang_eviction: false,
        };
        for name in text.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            let flag = match name {
                "allocate" => &mut actions.allocate,
                "consolidation" => &mut actions.consolidation,
                "reclaim" => &mut actions.reclaim,
                "preempt" => &mut actions.preempt,
                "stalegangeviction" => &mut actions.stale_gang_eviction,
                other => {
                    return Err(format!(
                        "unknown action {other:?}: the actions are allocate, consolidation, \
                         reclaim, preempt and stalegangeviction"
                    ));
                }
            };
            *flag = true;
        }
        Ok(actions)
    }
}

/// A cycle's jobs, the nodes' room with each bound pod's slot, and what each queue's running
/// pods hold. Grouping pods into jobs and rebuilding the room read the snapshot only: with
/// `parallel`, the room is rebuilt while the pods are sorted into their jobs' runs and the pod
/// group objects indexed by name, then each half of the jobs is built, and charged to its
/// queues, on its own thread. The result is the same either way.
#[allow(clippy::type_complexity)]
fn prepare<'s>(
    snapshot: &'s Snapshot,
    policy: &Policy,
    parallel: bool,
) -> (
    Vec<jobs::Job>,
    (state::ClusterState<'s>, Vec<Option<state::Slot>>),
    QueueUse,
) {
    if parallel {
        let ((state, slots), objects, mut first) = std::thread::scope(|scope| {
            let room = scope.spawn(|| state::ClusterState::new(snapshot));
            let runs = jobs::group(snapshot);
            // The objects' index is built on this side: rebuilding the room took longer than
            // sorting the runs (28-38 ms against 22-27 at 4,000 nodes). Now the room takes
            // 16-17 ms and the sort 19 (the index 5 more), yet building the index on whichever
            // side finishes first, or after the room, measured no faster (docs/performance.md,
            // stops 48 and 49).
            let objects = jobs::objects(snapshot);
            let room = room
                .join()
                .expect("rebuilding the nodes' room does not panic");
            (room, objects, runs)
        });
        let second = first.split_off(first.len() / 2);
        let total = first.len() + second.len();
        let (jobs, used) = std::thread::scope(|scope| {
            let second = scope.spawn(|| {
                let mut jobs = Vec::with_capacity(second.len());
                jobs::build(snapshot, policy, &objects, &slots, second, &mut jobs);
                let used = charged(snapshot, policy, &jobs, &slots);
                (jobs, used)
            });
            let mut jobs = Vec::with_capacity(total);
            jobs::build(snapshot, policy, &objects, &slots, first, &mut jobs);
            let mut used = charged(snapshot, policy, &jobs, &slots);
            let (rest, rest_used) = second.join().expect("building jobs does not panic");
            jobs.extend(rest);
            used.merge(&rest_used);
            (jobs, used)
        });
        (jobs, (state, slots), used)
    } else {
        let (state, slots) = state::ClusterState::new(snapshot);
        let jobs = jobs::jobs(snapshot, policy, &slots);
        let used = charged(snapshot, policy, &jobs, &slots);
        (jobs, (state, slots), used)
    }
}

/// What the running pods of `jobs` hold, charged to their queues. A pod being deleted still
/// holds its node's room, but not its queue's share: KAI counts releasing pods as neither
/// allocated nor requested.
fn charged(
    snapshot: &Snapshot,
    policy: &Policy,
    jobs: &[jobs::Job],
    slots: &[Option<state::Slot>],
) -> QueueUse {
    let mut used = QueueUse::new(policy.queues.len());
    for (i, job) in jobs.iter().enumerate() {
        // The pods and slots were read when the jobs were made, too long ago to be in cache.
        for &p in jobs
            .get(i + crate::prefetch::AHEAD)
            .map_or(&[][..], |j| &j.pods)
        {
            crate::prefetch::value(&snapshot.pods[p]);
            crate::prefetch::value(&slots[p]);
        }
        let Ok(q) = job.queue else { continue };
        let running = job
            .pods
            .iter()
            .copied()
            .filter(|&p| slots[p].is_some() && !snapshot.pods[p].terminating)
            .chain(job.elsewhere.iter().copied());
        used.add(
            policy,
            q,
            jobs::sum_requests(snapshot, running),
            job.preemptible,
            1,
        );
    }
    // What the actions change is noted from here.
    used.mark();
    used
}

/// Pods from which a cycle prepares its jobs and its nodes' room on two threads.
const PARALLEL_PREPARE: usize = 20_000;

/// Runs one cycle.
pub fn run(cycle: &Cycle) -> CycleResult {
    run_actions(cycle, Actions::ALL)
}

/// Runs one cycle with only the given actions (KAI's action tests run one action at a time).
pub fn run_actions(cycle: &Cycle, actions: Actions) -> CycleResult {
    let Cycle {
        snapshot,
        policy,
        now,
        usage,
    } = *cycle;
    let mut timings = Vec::with_capacity(7);
    let mut clock = Instant::now();
    let mut lap = |name: &'static str| {
        let now = Instant::now();
        timings.push((name, now.duration_since(clock).as_secs_f64()));
        clock = now;
    };
    let (jobs, (mut state, mut slots), mut used) =
        prepare(snapshot, policy, snapshot.pods.len() >= PARALLEL_PREPARE);
    if let Some(dra) = &mut state.dra {
        dra::block_by_queue_label(dra, snapshot, policy, &jobs);
    }
    // Spread ranks nodes by the share of them that is free, for the strategies in use.
    let spread = |s: Strategy| s == Strategy::Spread;
    let named_spread = policy.placements.iter().any(|p| spread(p.strategy));
    state.index_shares(
        named_spread || spread(policy.cluster.placement.gpu),
        named_spread || spread(policy.cluster.placement.cpu),
    );
    lap("prepare");
    let shares = fairshare::compute(policy, &demand(snapshot, policy, &jobs, &used, usage));
    lap("fair-share");
    // A pod stuck in deletion holds its room for good: nothing is pipelined onto it (KAI's
    // `StuckInReleasing` is not `Releasing`, `pod_info.go: getTaskStatus`).
    let releasing: Vec<usize> = state
        .deleting()
        .iter()
        .copied()
        .filter(|&p| slots[p].is_some() && !stuck_in_releasing(&snapshot.pods[p], now))
        .collect();
    // Their room ranks nodes as free (KAI ranks by idle and releasing room alike), though it
    // is not free until they are gone.
    let mut is_releasing = vec![false; snapshot.pods.len()];
    for &p in &releasing {
        is_releasing[p] = true;
        if let Some(slot) = &slots[p] {
            state.hold(slot, &snapshot.pods[p], 1);
        }
    }
    let running_pods = allocate::RunningPods::new(snapshot, &jobs, &slots, state.deleting());
    let mut ctx = allocate::Context {
        snapshot,
        policy,
        now,
        jobs: &jobs,
        fixed_shares: kai::fixed_shares(policy, &shares),
        state: &mut state,
        slots: &mut slots,
        used: &mut used,
        decisions: Vec::new(),
        capacity: capacity(snapshot),
        dry_run: None,
        place: actions.allocate,
        releasing,
        is_releasing,
        pipelined: vec![0; jobs.len()],
        running_pods,
        waiting: vec![Vec::new(); policy.queues.len()],
        started: vec![false; jobs.len()],
        bound_now: vec![false; snapshot.pods.len()],
        unpipelined: vec![false; snapshot.pods.len()],
        placed_at: vec![None; snapshot.pods.len()],
        withdrawn_at: Vec::new(),
        withdrawn: Vec::new(),
        evicted: Vec::new(),
        moves: Default::default(),
        room_by_shape: Default::default(),
    };
    let mut unplaced = ctx.allocate();
    // Every job with a pod still waiting, whatever kept it (KAI's `GetAllPendingJobs`).
    for (j, job) in jobs.iter().enumerate() {
        if let Ok(leaf) = job.queue
            && ctx.waits(j)
        {
            ctx.waiting[leaf].push(j);
        }
    }
    lap("allocate");
    ctx.check_releasing();
    ctx.state.start_pipelining();
    // The eviction actions place on the room of pods being deleted too; what nothing was
    // placed on is theirs again afterwards.
    let leaving = ctx.take_leaving_room();
    if actions.consolidation {
        unplaced = ctx.consolidate(unplaced);
        lap("consolidation");
        ctx.check_releasing();
    }
    if actions.reclaim {
        unplaced = ctx.reclaim(unplaced);
        lap("reclaim");
        ctx.check_releasing();
    }
    if actions.preempt {
        unplaced = ctx.preempt(unplaced);
        lap("preempt");
        ctx.check_releasing();
    }
    ctx.give_leaving_room_back(leaving);
    // A job whose placement a later action took back waits for that reason, whatever else
    // was said of it.
    let mut withdrawn = std::mem::take(&mut ctx.withdrawn);
    for u in unplaced {
        let reason = match withdrawn.iter().position(|(j, _)| *j == u.job) {
            Some(at) => withdrawn.swap_remove(at).1,
            None => u.reason,
        };
        ctx.pending_decision(u.job, reason);
    }
    withdrawn.sort_by_key(|(j, _)| *j);
    // Not for a job placed again since (nothing of it waits), nor twice for one allocate
    // already gave a reason.
    let said: std::collections::HashSet<String> = if withdrawn.is_empty() {
        Default::default()
    } else {
        ctx.decisions
            .iter()
            .filter_map(|d| match d {
                Decision::Pending { job, .. } => Some(job.clone()),
                _ => None,
            })
            .collect()
    };
    for (job, reason) in withdrawn {
        if ctx.waits(job) && !said.contains(&jobs[job].key(ctx.snapshot)) {
            ctx.pending_decision(job, reason);
        }
    }
    // The marks KAI keeps on PodGroups, for the jobs that have one (stale-gang evictions set
    // no eviction time: KAI evicts those outside a statement).
    let marked = |jobs_marked: &[usize]| -> Vec<String> {
        let mut keys: Vec<String> = jobs_marked
            .iter()
            .filter(|&&j| jobs[j].pod_group)
            .map(|&j| jobs[j].key(ctx.snapshot))
            .collect();
        keys.sort();
        keys.dedup();
        keys
    };
    let started_jobs: Vec<usize> = (0..jobs.len()).filter(|&j| ctx.started[j]).collect();
    let started = marked(&started_jobs);
    let evicted = marked(&ctx.evicted);
    let stale_marks = if actions.stale_gang_eviction {
        let marks = ctx.evict_stale_gangs();
        lap("stalegangeviction");
        ctx.check_releasing();
        marks
    } else {
        Vec::new()
    };
    ctx.drop_withdrawn();
    let claims = ctx
        .state
        .dra
        .as_ref()
        .map_or_else(Vec::new, |d| d.changed());
    let numa_zones = match &ctx.state.numa {
        None => Vec::new(),
        Some(numa) => ctx
            .decisions
            .iter()
            .filter_map(|d| match d {
                Decision::Bind { pod, .. }
                | Decision::Nominate { pod, .. }
                | Decision::Evict {
                    pod,
                    reason: crate::decision::EvictReason::Consolidate { .. },
                    ..
                } => Some((pod.clone(), numa.placement(pod)?)),
                _ => None,
            })
            .collect(),
    };
    let numa_free = ctx.state.numa.as_ref().map_or_else(Vec::new, |n| n.free());
    let decisions = ctx.decisions;
    CycleResult {
        claims,
        numa_zones,
        numa_free,
        decisions,
        shares,
        allocated: used.all,
        stale_marks,
        started,
        evicted,
        timings,
    }
}

/// What fair share divides: the nodes' total, and per leaf queue what its running and pending
/// work asks for.
fn demand(
    snapshot: &Snapshot,
    policy: &Policy,
    jobs: &[Job],
    used: &QueueUse,
    usage: Option<&[PerResource<f64>]>,
) -> Demand {
    let mut request: Vec<Amounts> = used.all.clone();
    for (q, r) in request.iter_mut().enumerate() {
        if !policy.queues[q].is_leaf() {
            *r = Amounts::default();
        }
    }
    for job in jobs {
        let Ok(q) = job.queue else { continue };
        let pending = job
            .pods
            .iter()
            .copied()
            .filter(|&p| snapshot.pods[p].node.is_none());
        let add = jobs::sum_requests(snapshot, pending);
        for kind in ResourceKind::ALL {
            *request[q].get_mut(kind) += add.get(kind);
        }
    }
    let total = capacity(snapshot);
    Demand {
        capacity: PerResource {
            gpu: Some(total.gpu),
            cpu: Some(total.cpu),
            memory: Some(total.memory),
        },
        request,
        usage: usage.map_or_else(
            || vec![PerResource::default(); policy.queues.len()],
            <[_]>::to_vec,
        ),
        k: if usage.is_some() {
            policy.cluster.fairness.map_or(0.0, |f| f.k)
        } else {
            0.0
        },
    }
}

/// What fair share divides: Ready, schedulable nodes, less what other schedulers' pods hold
/// there (KAI's `proportion.go: getNodeResources`).
fn capacity(snapshot: &Snapshot) -> Amounts {
    let mut total = Amounts::default();
    let mut usable = std::collections::HashSet::new();
    for n in snapshot.nodes.iter().filter(|n| n.takes_pods()) {
        usable.insert(n.name.as_str());
        // MIG instances count as GPUs in fair shares (KAI's `QuantifyVector`: `TotalGPUs`).
        total.gpu += n.allocatable.gpu + crate::cluster::mig_gpus(&n.extended);
        total.cpu += n.allocatable.cpu;
        total.memory += n.allocatable.memory;
    }
    // KAI takes off what other schedulers' pods hold, but not its own utility pods, its
    // binder's GPU reservation pods among them (`proportion.go: getNodeResources`,
    // `pod_info.IsKaiUtilityPod`).
    for p in snapshot
        .pods
        .iter()
        .filter(|p| p.foreign && !p.is_gpu_reservation())
    {
        if p.node.as_deref().is_some_and(|n| usable.contains(n)) {
            total.gpu -= p.request.gpu + crate::cluster::mig_gpus(&p.extended);
            total.cpu -= p.request.cpu;
            total.memory -= p.request.memory;
        }
    }
    total
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod reclaim_tests;

#[cfg(test)]
mod order_tests;

#[cfg(test)]
mod dra_tests;
#[cfg(test)]
mod numa_tests;
