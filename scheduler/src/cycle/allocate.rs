//! Allocate: pending jobs in KAI's order over the queue tree, each placed whole or given a
//! reason. A queue (and every ancestor) never goes above its limit; non-preemptible jobs only
//! use in-quota resources; otherwise idle resources are usable (fair share orders, not caps).

use std::cmp::{Ordering, Reverse};

use kai_policy_compiler::model::{Bound, Policy, Strategy};
use kai_policy_compiler::quantity::ResourceKind;

use super::QueueUse;
use super::gang::PodState;
use super::jobs::{Job, request_of, sum_requests};
use super::placement::{Plan, place_gang};
use super::state::{ClusterState, DEVICE, Slot};
use crate::cluster::{Amounts, Snapshot, Time};
use crate::decision::{Decision, Reason};

/// A job allocate could not place for lack of room, which preempt or reclaim may still help.
#[derive(Debug, Clone)]
pub struct Unplaced {
    /// Index into the cycle's jobs.
    pub job: usize,
    /// Why it did not fit.
    pub reason: Reason,
}

/// Everything the actions share during one cycle.
pub(crate) struct Context<'a> {
    pub snapshot: &'a Snapshot,
    pub policy: &'a Policy,
    pub now: Time,
    pub jobs: &'a [Job],
    /// Each queue's quota, fair share and limit in KAI's units ([`super::kai::fixed_shares`]).
    pub fixed_shares: Vec<super::kai::QueueShares>,
    pub state: &'a mut ClusterState<'a>,
    /// Where each pod is (bound, or placed this cycle); `None` while pending.
    pub slots: &'a mut Vec<Option<Slot>>,
    pub used: &'a mut QueueUse,
    pub decisions: Vec<Decision>,
    pub capacity: Amounts,
    /// While set, eviction only tries: a job that would fit leaves its victims here and nothing
    /// is committed (used to find out whether min-runtimes are what keeps a job waiting).
    pub dry_run: Option<Vec<super::evict::Victim>>,
    /// Whether allocate places jobs; off, it only orders them for the actions after it.
    pub place: bool,
    /// Pods being deleted that held a node when the cycle began, which pending pods may be
    /// pipelined onto.
    pub releasing: Vec<usize>,
    /// Per pod: whether it is one of `releasing`, whose room ranks nodes as free while it
    /// holds it ([`super::state::ClusterState::hold`]).
    pub is_releasing: Vec<bool>,
    /// Per job: how many of its pods have been nominated (pipelined) in this cycle; they hold
    /// their slots, so they are among its active pods, which KAI's pipelined pods are not.
    pub pipelined: Vec<usize>,
    /// Per job, how many of its pods run (see [`Self::runs`]); kept by [`Self::take_slot`] and
    /// [`Self::put_slot`], so that the victim searches ask it in one step, not per pod.
    pub running_pods: RunningPods,
    /// Per leaf queue, the jobs with pods still waiting after allocate, whatever kept them:
    /// the pending jobs KAI's eviction solvers order together with the preemptor
    /// (`common/action.go: GetJobsToAllocate` over `GetAllPendingJobs`).
    pub waiting: Vec<Vec<usize>>,
    /// Per job: allocate started it (bound with none of its pods allocated before).
    pub started: Vec<bool>,
    /// Per pod: allocate bound it in this cycle onto idle room (see
    /// [`super::state::ClusterState::release_unpipelined`]).
    pub bound_now: Vec<bool>,
    /// Per pod: the room it holds now is such a bind's, which the state does not count as
    /// pipelined. Cleared once an eviction attempt places it again.
    pub unpipelined: Vec<bool>,
    /// Per pod: the index in `decisions` of its Bind or Nominate of this cycle, if any.
    pub placed_at: Vec<Option<u32>>,
    /// Indexes in `decisions` left out of the cycle's result: placements taken back (their
    /// pods became victims of a later action in the same cycle), moves undone, and a moved
    /// pod's Evict superseded by the one a later attempt gave it.
    pub withdrawn_at: Vec<usize>,
    /// Jobs whose placement in this cycle was taken back, with why (the first such reason).
    pub withdrawn: Vec<(usize, Reason)>,
    /// Jobs consolidation, reclaim or preempt evicted pods of (moves included), each once or
    /// more.
    pub evicted: Vec<usize>,
    /// Pods bound before the cycle that a committed attempt moved (to another node, or to other
    /// devices of their own), each with the index of its Evict in `decisions` and the slot it
    /// left: a later attempt may take such a pod again (KAI's moved pods are `Pipelined`, among
    /// the active allocated ones its victims come from), and then changes that Evict rather
    /// than adding one.
    pub moves: rustc_hash::FxHashMap<usize, (usize, Slot)>,
    /// How many copies of each pod shape the nodes' room holds, brought up to date from the
    /// changes since it was last read: an eviction attempt checks its gang against it before it
    /// searches for the gang's place, and reclaim's futility proofs start from it.
    pub room_by_shape: super::futile::RoomByShape,
}

/// Per job, how many of its pods hold a slot (bound before the cycle or placed in it) and are
/// not being deleted; and which pods were moved to another node in this cycle.
#[derive(Debug, Clone)]
pub(crate) struct RunningPods {
    /// The job of each pod (`u32::MAX`: none, a pod of another scheduler).
    job_of: Vec<u32>,
    count: Vec<u32>,
    /// Per pod: moved by the attempt under way, not yet committed (see [`Context::settle`]),
    /// so not running for that attempt.
    moved: Vec<bool>,
    /// Per job: how many of its pods are being moved.
    moved_in: Vec<u32>,
    /// Per job: its pods that hold a slot and are not being deleted (KAI's active pods).
    active: Vec<u32>,
    /// Per pod: moved by the eviction attempt under way, placed again before its preemptor.
    early: Vec<bool>,
    /// Per job: how many of its pods are `early`.
    early_in: Vec<u32>,
    /// Per job: every one of its pods held a slot when the cycle began.
    all_bound: Vec<bool>,
}

impl RunningPods {
    /// Counts the running pods of each job in the slots the cycle starts from, where the pods
    /// holding a slot that are being deleted are `deleting` (read from them before: a pass
    /// over every pod in job order would wait on memory at each).
    pub fn new(
        snapshot: &Snapshot,
        jobs: &[Job],
        slots: &[Option<Slot>],
        deleting: &[usize],
    ) -> Self {
        let mut leaving = vec![false; snapshot.pods.len()];
        for &p in deleting {
            leaving[p] = true;
        }
        let mut job_of = vec![u32::MAX; snapshot.pods.len()];
        let mut count = vec![0; jobs.len()];
        let mut active = vec![0; jobs.len()];
        let mut all_bound = vec![true; jobs.len()];
        for (j, job) in jobs.iter().enumerate() {
            for &p in &job.pods {
                job_of[p] = j as u32;
                all_bound[j] &= slots[p].is_some();
                if slots[p].is_some() && !leaving[p] {
                    active[j] += 1;
                    // A pod holding a slot that is not being deleted counts as running.
                    debug_assert!(
                        counts_as_running(snapshot, p),
                        "a pod being deleted is missed"
                    );
                    count[j] += 1;
                }
            }
        }
        RunningPods {
            job_of,
            count,
            moved: vec![false; snapshot.pods.len()],
            moved_in: vec![0; jobs.len()],
            active,
            early: vec![false; snapshot.pods.len()],
            early_in: vec![0; jobs.len()],
            all_bound,
        }
    }

    /// Whether every pod of `job` held a slot when the cycle began: none was pending then.
    pub fn all_bound(&self, job: usize) -> bool {
        self.all_bound[job]
    }

    /// The job of a pod: `usize::MAX` for none (a pod of another scheduler).
    pub(crate) fn job_of(&self, pod: usize) -> usize {
        match self.job_of[pod] {
            u32::MAX => usize::MAX,
            j => j as usize,
        }
    }

    /// Marks a moved pod as placed again by the eviction attempt under way (its job may still
    /// give other pods to that attempt), or no longer.
    pub(crate) fn set_early(&mut self, pod: usize, early: bool) {
        if self.early[pod] == early {
            return;
        }
        self.early[pod] = early;
        if let Some(n) = self.early_in.get_mut(self.job_of[pod] as usize) {
            *n = if early { *n + 1 } else { *n - 1 };
        }
    }

    /// Whether a pod was placed again by the eviction attempt under way.
    pub(crate) fn is_early(&self, pod: usize) -> bool {
        self.early[pod]
    }

    /// Counts a pod that gets a slot (`up`) or loses it among its job's active pods.
    fn slot_changed(&mut self, snapshot: &Snapshot, pod: usize, up: bool) {
        let job = self.job_of[pod];
        if job == u32::MAX || snapshot.pods[pod].terminating {
            return;
        }
        let active = &mut self.active[job as usize];
        *active = if up { *active + 1 } else { *active - 1 };
    }

    /// Whether some pod of `job` runs and none is being moved by the attempt under way, but
    /// placed again before its preemptor: KAI's solver may take more of such a job, not of one
    /// it moves after the preemptor.
    pub fn any(&self, job: usize) -> bool {
        self.count[job] > 0 && self.moved_in[job] == self.early_in[job]
    }

    /// Whether a pod is being moved by the attempt under way.
    pub fn is_moved(&self, pod: usize) -> bool {
        self.moved[pod]
    }

    fn change(&mut self, snapshot: &Snapshot, pod: usize, up: bool) {
        let job = self.job_of[pod];
        if job == u32::MAX || self.moved[pod] || !counts_as_running(snapshot, pod) {
            return;
        }
        let count = &mut self.count[job as usize];
        *count = if up { *count + 1 } else { *count - 1 };
    }

    /// Marks a pod (holding no slot) as moved, or no longer moved.
    fn set_moved(&mut self, pod: usize, moved: bool) {
        if self.moved[pod] == moved {
            return;
        }
        self.moved[pod] = moved;
        if let Some(n) = self.moved_in.get_mut(self.job_of[pod] as usize) {
            *n = if moved { *n + 1 } else { *n - 1 };
        }
    }
}

/// Whether a pod counts as running while it holds a slot: bound before the cycle or placed in
/// it (KAI's active allocated pods), and not being deleted.
pub(super) fn counts_as_running(snapshot: &Snapshot, pod: usize) -> bool {
    !snapshot.pods[pod].terminating
}

impl PodState for Context<'_> {
    fn active(&self, pod: usize) -> bool {
        self.slots[pod].is_some() && !self.snapshot.pods[pod].terminating
    }

    fn pending(&self, pod: usize) -> bool {
        self.is_pending(pod)
    }
}

impl Context<'_> {
    /// The pending pods of a job: not bound, not placed in this cycle.
    pub fn pending(&self, job: usize) -> Vec<usize> {
        // A bound pod without a slot was evicted in this cycle: it is leaving, not waiting, and
        // is never placed again in the cycle that evicts it.
        self.jobs[job]
            .pods
            .iter()
            .copied()
            .filter(|&p| self.is_pending(p))
            .collect()
    }

    /// Takes a pod's slot away (the pod leaves its node), keeping the running counts.
    pub(crate) fn take_slot(&mut self, pod: usize) -> Option<Slot> {
        let slot = self.slots[pod].take();
        if let Some(slot) = &slot {
            self.running_pods.change(self.snapshot, pod, false);
            self.running_pods.slot_changed(self.snapshot, pod, false);
            if self.is_releasing[pod] {
                self.state.hold(slot, &self.snapshot.pods[pod], -1);
            }
        }
        slot
    }

    /// Takes a pod off its node and frees its room as it holds it (a pod allocate bound in
    /// this cycle is not counted as pipelined there); returns its slot.
    pub(crate) fn take_off(&mut self, pod: usize) -> Option<Slot> {
        let slot = self.take_slot(pod)?;
        self.free_slot(pod, &slot);
        Some(slot)
    }

    /// Frees the room a pod taken off `slot` held there, as it held it (a pod allocate bound in
    /// this cycle is not counted as pipelined there).
    pub(crate) fn free_slot(&mut self, pod: usize, slot: &Slot) {
        let p = &self.snapshot.pods[pod];
        if self.unpipelined[pod] {
            self.state.release_unpipelined(slot, p);
        } else {
            self.state.release(slot, p);
        }
    }

    /// Puts a pod [`Self::take_off`] took back on its slot, holding its room as before.
    pub(crate) fn put_back(&mut self, pod: usize, slot: Slot) {
        let p = &self.snapshot.pods[pod];
        if self.unpipelined[pod] {
            self.state.take_unpipelined(&slot, p);
        } else {
            self.state.take(&slot, p);
        }
        self.put_slot(pod, slot);
    }

    /// Checks, in debug builds, that each node's releasing room is what the pods bound there
    /// before the cycle and away from it now leave.
    pub(crate) fn check_releasing(&self) {
        if !cfg!(debug_assertions) {
            return;
        }
        let index = self.snapshot.node_index();
        let mut expected = vec![Amounts::default(); self.snapshot.nodes.len()];
        for (p, pod) in self.snapshot.pods.iter().enumerate() {
            let Some(&home) = pod.node.as_deref().and_then(|n| index.get(n)) else {
                continue;
            };
            if self.slots[p].as_ref().is_none_or(|s| s.node != home) {
                let e = &mut expected[home];
                e.gpu += pod.request.gpu;
                e.cpu += pod.request.cpu;
                e.memory += pod.request.memory;
            }
        }
        for (n, e) in expected.iter().enumerate() {
            assert_eq!(self.state.releasing(n), *e, "releasing room on node {n}");
        }
    }

    /// Gives a pod a slot (it was without one), keeping the running counts.
    pub(crate) fn put_slot(&mut self, pod: usize, slot: Slot) {
        debug_assert!(self.slots[pod].is_none(), "a pod given a second slot");
        if self.is_releasing[pod] {
            self.state.hold(&slot, &self.snapshot.pods[pod], 1);
        }
        self.slots[pod] = Some(slot);
        self.running_pods.change(self.snapshot, pod, true);
        self.running_pods.slot_changed(self.snapshot, pod, true);
    }

    /// Gives a pod that was taken off its node a slot on another one, for the attempt under
    /// way: until the attempt commits ([`Self::settle`]) it does not count as running (see
    /// [`RunningPods::any`]).
    pub(crate) fn move_to(&mut self, pod: usize, slot: Slot) {
        debug_assert!(
            self.slots[pod].is_none(),
            "a pod moved while it holds a slot"
        );
        self.running_pods.set_moved(pod, true);
        self.slots[pod] = Some(slot);
        self.running_pods.slot_changed(self.snapshot, pod, true);
    }

    /// Ends a move its attempt commits to: the pod runs where it was moved, and a later attempt
    /// may take it as a victim again (KAI's moved pods are `Pipelined`: active allocated).
    pub(crate) fn settle(&mut self, pod: usize) {
        debug_assert!(
            self.running_pods.is_moved(pod) && self.slots[pod].is_some(),
            "a pod settled that is not being moved"
        );
        self.running_pods.set_moved(pod, false);
        self.running_pods.change(self.snapshot, pod, true);
    }

    /// Takes a moved pod's new slot away, undoing [`Self::move_to`].
    pub(crate) fn unmove(&mut self, pod: usize) -> Option<Slot> {
        let slot = self.slots[pod].take();
        self.running_pods.set_moved(pod, false);
        if slot.is_some() {
            self.running_pods.slot_changed(self.snapshot, pod, false);
        }
        slot
    }

    /// Whether some pod of a job still waits.
    pub(crate) fn waits(&self, job: usize) -> bool {
        self.jobs[job].pods.iter().any(|&p| self.is_pending(p))
    }

    /// Whether a pod waits: not bound before the cycle, not placed in it.
    fn is_pending(&self, pod: usize) -> bool {
        self.slots[pod].is_none() && self.snapshot.pods[pod].node.is_none()
    }

    /// Leaves out of the decisions those taken back or superseded in this cycle
    /// ([`Self::withdrawn_at`]).
    pub(crate) fn drop_withdrawn(&mut self) {
        if self.withdrawn_at.is_empty() {
            return;
        }
        let mut gone = vec![false; self.decisions.len()];
        for &at in &self.withdrawn_at {
            gone[at] = true;
        }
        let mut at = 0;
        self.decisions.retain(|_| {
            at += 1;
            !gone[at - 1]
        });
        self.withdrawn_at.clear();
    }

    /// Records that a job stays pending, and why.
    pub fn pending_decision(&mut self, job: usize, reason: Reason) {
        let pods = self
            .pending(job)
            .iter()
            .map(|&p| self.snapshot.pods[p].key())
            .collect();
        self.decisions.push(Decision::Pending {
            job: self.jobs[job].key(self.snapshot),
            pods,
            reason,
        });
    }

    /// Runs allocate; returns the jobs that did not fit, in the order they were tried.
    pub fn allocate(&mut self) -> Vec<Unplaced> {
        let mut waiting = Vec::new();
        for j in 0..self.jobs.len() {
            self.tell_stray(j);
            // Nothing has moved yet: a job whose pods all held a slot when the cycle began has
            // none pending (most of a busy cluster's jobs), and its pods need not be read.
            if self.running_pods.all_bound(j) {
                debug_assert!(self.pending(j).is_empty());
                continue;
            }
            let job = &self.jobs[j];
            let pending = self.pending(j);
            if pending.is_empty() {
                continue;
            }
            if let Err(reason) = &job.queue {
                self.pending_decision(j, Reason::clone(reason));
                continue;
            }
            if let Some(name) = &job.unknown_priority_class {
                self.pending_decision(j, Reason::UnknownPriorityClass { name: name.clone() });
                continue;
            }
            if let Some(reason) = self.incomplete(j, false) {
                self.pending_decision(j, reason);
                continue;
            }
            waiting.push(j);
        }
        let mut placed_in = vec![0usize; self.policy.queues.len()];
        // The jobs of each queue allocate has placed pods of so far.
        let mut placed_jobs: Vec<Vec<usize>> = vec![Vec::new(); self.policy.queues.len()];
        let mut unplaced = Vec::new();
        let mut order = self.order_of(waiting.into_iter());
        while let Some(j) = self.pop_next(&mut order) {
            let Ok(leaf) = self.jobs[j].queue else {
                continue;
            };
            let started = self.active_count(j) > 0;
            let outcome = if self.place {
                self.try_job(j, leaf)
            } else {
                Err(Reason::NoNodeFits {
                    nodes: self.snapshot.nodes.len() as u32,
                    found: Vec::new(),
                })
            };
            self.renew_init(&mut order, j);
            // KAI's allocate re-queues a job that still has pods to place: its next pod competes
            // again, one pod per turn, against every other job in the queue order.
            if outcome.is_ok() && !self.pending(j).is_empty() {
                self.requeue(&mut order, j, leaf);
            }
            self.rerank(&mut order, &[leaf]);
            if outcome.is_ok() && !placed_jobs[leaf].contains(&j) {
                placed_jobs[leaf].push(j);
            }
            match outcome {
                Ok(()) if !started => placed_in[leaf] += 1,
                Ok(()) => {}
                // Room may still be made by moving or evicting pods; a limit may still be met by
                // preempting the queue's own lower-priority work.
                Err(
                    reason @ (Reason::NoNodeFits { .. }
                    | Reason::NoTopologyDomain { .. }
                    | Reason::OverLimit { .. }),
                ) => {
                    // Jobs of the queue that started before it in this cycle, itself excluded.
                    let started_now = started
                        && !self.jobs[j]
                            .pods
                            .iter()
                            .any(|&p| self.runs(p) && self.snapshot.pods[p].node.is_some());
                    let reason = match (placed_in[leaf] - usize::from(started_now), reason) {
                        (0, reason) => reason,
                        (jobs, reason @ Reason::NoNodeFits { .. }) => {
                            let before: Vec<usize> = placed_jobs[leaf]
                                .iter()
                                .filter(|&&o| o != j)
                                .flat_map(|&o| self.jobs[o].pods.iter().copied())
                                .filter(|&p| self.placed_now(p))
                                .collect();
                            if self.fits_without(j, leaf, &before) {
                                Reason::WaitingBehind {
                                    jobs,
                                    queue: self.policy.queues[leaf].name.clone(),
                                }
                            } else {
                                reason
                            }
                        }
                        (_, reason) => reason,
                    };
                    unplaced.push(Unplaced { job: j, reason });
                }
                Err(reason) => self.pending_decision(j, reason),
            }
        }
        unplaced
    }

    /// Whether `job` would fit had the pods in `placed` not been placed: only then did the jobs
    /// that went before it in its queue take what it needed. Nothing changes: the pods are put
    /// back where they were.
    fn fits_without(&mut self, job: usize, leaf: usize, placed: &[usize]) -> bool {
        let core = self.gang_core(job);
        // Devices and NUMA zones are chosen afresh as pods are placed again, so a pod put back
        // might not get the ones it had: where any pod here has claims or NUMA constraints,
        // those choices are saved and restored whole.
        let concerned = placed.iter().chain(&core).any(|&p| {
            let c = &self.snapshot.pods[p].constraints;
            !c.claims.is_empty() || c.numa.is_some()
        });
        let saved = concerned.then(|| (self.state.dra.clone(), self.state.numa.clone()));
        // A pod whose claim was allocated before the cycle is left in place: taken off, it would
        // seem to free devices its claim keeps whether or not the pod runs.
        let dra = self.state.dra.as_ref();
        let placed: Vec<usize> = placed
            .iter()
            .copied()
            .filter(|&p| !dra.is_some_and(|d| d.allocated_before(&self.snapshot.pods[p])))
            .collect();
        let mut freed: Vec<(usize, Slot)> = Vec::with_capacity(placed.len());
        for p in placed {
            if let Some(slot) = self.take_off(p) {
                freed.push((p, slot));
            }
        }
        let request = request_of(self.snapshot, &core);
        let plan = Plan::for_job(self.policy, leaf, &self.jobs[job], request.gpu > 0);
        let fits = match place_gang(self.state, self.snapshot, &core, &plan) {
            Ok(slots) => {
                self.give_back(&slots);
                true
            }
            Err(_) => false,
        };
        for (p, slot) in freed.into_iter().rev() {
            self.put_back(p, slot);
        }
        if let Some((dra, numa)) = saved {
            self.state.dra = dra;
            self.state.numa = numa;
        }
        fits
    }

    /// KAI's job order inside a leaf queue (the priority and elastic plugins' `JobOrderFn`, then
    /// creation time): higher priority; below its minimum, then exactly at it, then above it;
    /// older; then the stable job order.
    pub(crate) fn job_order(&self, job: usize) -> (Reverse<i32>, Ordering, Time, usize) {
        let j = &self.jobs[job];
        (Reverse(j.priority), self.min_state(job), j.created, job)
    }

    /// Puts `job` into `jobs`, a list in KAI's reversed job order (next victim first), at its
    /// place: a job an eviction attempt has just placed joins the victims of the next.
    pub(crate) fn insert_in_reverse_job_order(&self, jobs: &mut Vec<usize>, job: usize) {
        let key = Reverse(self.job_order(job));
        let at = jobs.partition_point(|&v| Reverse(self.job_order(v)) < key);
        jobs.insert(at, job);
    }

    /// Whether a job's active pods are below (`Less`), at or above its minimum; with
    /// sub-groups, as KAI's elastic plugin reads them (any pod set below is below).
    pub(crate) fn min_state(&self, job: usize) -> Ordering {
        let j = &self.jobs[job];
        match &j.gang {
            Some(gang) => gang.min_state(self),
            None => self.active_count(job).cmp(&(j.min_member as usize)),
        }
    }

    /// Why a job cannot start whatever the room: too few pods for its minimum, or for a
    /// sub-group's (KAI's `IsReadyForScheduling`); with `member`, for a job that started, also
    /// the sub-group its waiting pods are in that has too few pods.
    fn incomplete(&self, job: usize, member: bool) -> Option<Reason> {
        let j = &self.jobs[job];
        match &j.gang {
            Some(gang) => gang
                .unready()
                .or_else(|| member.then(|| gang.short_member()).flatten())
                .map(|u| Reason::SubGroupIncomplete {
                    subgroup: u.subgroup,
                    have: u.have,
                    need: u.need,
                    pods: u.pods,
                }),
            None => ((j.pods.len() as u32) < j.min_member).then_some(Reason::GangIncomplete {
                pods: j.pods.len() as u32,
                min_member: j.min_member,
            }),
        }
    }

    /// Says, once per cycle, why a job's pods that name a sub-group it lacks never start.
    fn tell_stray(&mut self, job: usize) {
        let j = &self.jobs[job];
        if j.stray.is_empty() {
            return;
        }
        let key = j.key(self.snapshot);
        let mut by_name: Vec<(&str, Vec<String>)> = Vec::new();
        for (p, name) in &j.stray {
            let pod = self.snapshot.pods[*p].key();
            match by_name.iter_mut().find(|(n, _)| n == name) {
                Some((_, pods)) => pods.push(pod),
                None => by_name.push((name, vec![pod])),
            }
        }
        let decisions: Vec<Decision> = by_name
            .into_iter()
            .map(|(name, pods)| Decision::Pending {
                job: key.clone(),
                pods,
                reason: Reason::UnknownSubGroup {
                    subgroup: name.to_string(),
                    group: key.clone(),
                },
            })
            .collect();
        self.decisions.extend(decisions);
    }

    /// The first limit (queue or ancestor) that `request` would break, and the first quota a
    /// non-preemptible job would go above.
    pub fn admission(&self, job: usize, leaf: usize, request: &Amounts) -> Result<(), Reason> {
        let preemptible = self.jobs[job].preemptible;
        let mut at = Some(leaf);
        while let Some(q) = at {
            let queue = &self.policy.queues[q];
            for kind in ResourceKind::ALL
                .into_iter()
                .filter(|&k| *request.get(k) > 0)
            {
                let Some(terms) = queue.resources.get(kind) else {
                    continue;
                };
                let (allocated, requested) = (*self.used.all[q].get(kind), *request.get(kind));
                if let Bound::Finite(limit) = terms.limit
                    && allocated + requested > limit
                {
                    return Err(Reason::OverLimit {
                        queue: queue.name.clone(),
                        resource: kind,
                        limit,
                        allocated,
                        requested,
                    });
                }
                if let (false, Bound::Finite(quota)) = (preemptible, terms.quota) {
                    let allocated = *self.used.non_preemptible[q].get(kind);
                    if allocated + requested > quota {
                        return Err(Reason::NonPreemptibleOverQuota {
                            queue: queue.name.clone(),
                            resource: kind,
                            quota,
                            allocated,
                            requested,
                        });
                    }
                }
            }
            at = queue.parent;
        }
        Ok(())
    }

    /// Places the pods a job needs next: its gang minimum whole, or, for a job at its minimum
    /// already, one more pod (KAI's `GetTasksToAllocate`).
    fn try_job(&mut self, job: usize, leaf: usize) -> Result<(), Reason> {
        let core = self.gang_core(job);
        if core.is_empty() {
            let j = &self.jobs[job];
            return Err(self
                .incomplete(job, true)
                .unwrap_or(Reason::GangIncomplete {
                    pods: j.pods.len() as u32,
                    min_member: j.min_member,
                }));
        }
        match self.place(job, leaf, &core) {
            Err(Reason::NoNodeFits { .. } | Reason::NoTopologyDomain { .. })
                if self.pipeline_onto_releasing(job, leaf) =>
            {
                Ok(())
            }
            outcome => outcome,
        }
    }

    /// The pods a job needs placed together now: enough to reach its minimum, or, for a job at
    /// its minimum already, one more pod; none when its pending pods cannot reach the minimum.
    pub fn gang_core(&self, job: usize) -> Vec<usize> {
        if let Some(gang) = &self.jobs[job].gang {
            return gang.next_pods(self);
        }
        let pending = self.pending(job);
        let active = self.active_count(job);
        let need = (self.jobs[job].min_member as usize)
            .saturating_sub(active)
            .max(1);
        // A gang whose running pods were evicted in this cycle cannot reach its minimum with
        // the pods left: it places nothing now.
        if pending.len() < need {
            return Vec::new();
        }
        pending.into_iter().take(need).collect()
    }

    /// How many pods of a job hold resources and are not being released: bound and running, or
    /// placed in this cycle (KAI's active allocated pods).
    pub(crate) fn active_count(&self, job: usize) -> usize {
        let active = self.running_pods.active[job] as usize;
        debug_assert_eq!(
            active,
            self.jobs[job]
                .pods
                .iter()
                .filter(|&&p| self.slots[p].is_some() && !self.snapshot.pods[p].terminating)
                .count(),
            "the active count of job {job} is off"
        );
        active
    }

    /// What [`Self::gang_core`]'s pods request (KAI's job init resources), without collecting
    /// them: the queue order asks this of every sibling's best job at every turn.
    pub(crate) fn init_request(&self, job: usize) -> Amounts {
        if let Some(gang) = &self.jobs[job].gang {
            return request_of(self.snapshot, &gang.next_pods(self));
        }
        let active = self.active_count(job);
        let need = (self.jobs[job].min_member as usize)
            .saturating_sub(active)
            .max(1);
        let pending = self.jobs[job]
            .pods
            .iter()
            .copied()
            .filter(|&p| self.is_pending(p))
            .take(need);
        if pending.clone().count() < need {
            return Amounts::default();
        }
        sum_requests(self.snapshot, pending)
    }

    /// Admits and places some pods of a job all or none, binding them.
    fn place(&mut self, job: usize, leaf: usize, pods: &[usize]) -> Result<(), Reason> {
        let request = request_of(self.snapshot, pods);
        self.admission(job, leaf, &request)?;
        let plan = Plan::for_job(self.policy, leaf, &self.jobs[job], request.gpu > 0);
        let mut slots = place_gang(self.state, self.snapshot, pods, &plan)?;
        // KAI's allocated pods: bound or placed, not pipelined, not being deleted.
        // (A pod being deleted that was nominated counts as pipelined but not as active.)
        let allocated_before = self.active_count(job).saturating_sub(self.pipelined[job]);
        let mut pipelined = vec![false; slots.len()];
        if plan.strategy == Strategy::Binpack && !self.releasing.is_empty() {
            for (at, (p, slot)) in slots.iter_mut().enumerate() {
                pipelined[at] = self.onto_releasing_shared_device(*p, slot);
            }
        }
        // A pod that took room still being released (a pod slot or CPU a pod being deleted
        // holds, beside one pipelined there) waits for it: nominated, not bound.
        for (at, (p, slot)) in slots.iter().enumerate() {
            pipelined[at] |= !self
                .state
                .took_idle_only(slot.node, &self.snapshot.pods[*p]);
        }
        // A pod set with a pipelined pod, of this turn or an earlier one, and fewer active
        // pods than its minimum is pipelined whole (`allocate.go: attemptToAllocateJob`,
        // `PodGroupInfo.ShouldPipelineJob`).
        let waiting = pipelined.iter().filter(|&&p| p).count();
        let before = self.pipelined[job];
        if waiting + before > 0
            && self.active_count(job).saturating_sub(before) + slots.len() - waiting
                < self.jobs[job].min_member as usize
        {
            pipelined.fill(true);
        }
        let (mut bound, mut nominated) = (Vec::new(), Vec::new());
        for (slot, pipelined) in slots.into_iter().zip(pipelined) {
            match pipelined {
                true => nominated.push(slot),
                false => bound.push(slot),
            }
        }
        // KAI records when a job starts: its pods bound, not pipelined, with none allocated
        // before (`allocate.go: setLastStartTimestamp`); min-runtime counts from then.
        if !bound.is_empty() {
            if allocated_before == 0 {
                self.started[job] = true;
            }
            self.commit(job, leaf, bound, false);
        }
        if !nominated.is_empty() {
            self.commit(job, leaf, nominated, true);
        }
        Ok(())
    }

    /// KAI's GPU binpack puts a shared pod on the fullest shared device of its node, counting
    /// the room the device's releasing pods leave, before an idle one
    /// (`gpu_sharing/gpuSharing.go: GetNodePreferableGpuForSharing` over
    /// `Session.FittingGPUs`, `gpupack`); where it fits only with that room it is pipelined
    /// there. Moves pod `p`, placed at `slot` on free room, onto such a device if it is a
    /// shared pod of one device and there is one (the device's pods being deleted leave it);
    /// returns whether it did.
    fn onto_releasing_shared_device(&mut self, p: usize, slot: &mut Slot) -> bool {
        let pod = &self.snapshot.pods[p];
        if !pod.fractional || pod.shared_devices > 1 {
            return false;
        }
        self.give_back(&[(p, slot.clone())]);
        let Some((device, leaving)) = self.shared_device_releasing(p, slot) else {
            self.state.take(slot, &self.snapshot.pods[p]);
            return false;
        };
        for q in leaving {
            let left = self.take_slot(q).expect("a releasing pod holds its slot");
            self.state.release(&left, &self.snapshot.pods[q]);
        }
        *slot = Slot {
            node: slot.node,
            devices: vec![(device, self.snapshot.pods[p].request.gpu)],
        };
        self.state.take(slot, &self.snapshot.pods[p]);
        true
    }

    /// For a shared pod of one device that fits on free room on the node of `slot` (its own
    /// room there given back), the device of that node KAI would put it on instead: the
    /// fullest one (its releasing pods' room counted as used) that some pod still running
    /// shares, where the pod fits only with the room the device's pods being deleted leave;
    /// with those pods.
    fn shared_device_releasing(&self, p: usize, slot: &Slot) -> Option<(usize, Vec<usize>)> {
        let free = self.state.device_free(slot.node);
        let mut leaving = vec![0; free.len()];
        let on_node: Vec<usize> = self
            .releasing
            .iter()
            .copied()
            .filter(|&q| self.slots[q].as_ref().is_some_and(|s| s.node == slot.node))
            .collect();
        for &q in &on_node {
            for &(d, amount) in &self.slots[q].as_ref().expect("filtered").devices {
                leaving[d] += amount;
            }
        }
        let share = self.snapshot.pods[p].request.gpu;
        let device = (0..free.len())
            .filter(|&d| free[d] < share && share <= free[d] + leaving[d])
            .filter(|&d| DEVICE - free[d] - leaving[d] > 0)
            .min_by_key(|&d| (free[d], d))?;
        let leaving = on_node
            .into_iter()
            .filter(|&q| {
                self.slots[q]
                    .as_ref()
                    .is_some_and(|s| s.devices.iter().any(|&(d, _)| d == device))
            })
            .collect();
        Some((device, leaving))
    }

    /// Records placed slots: binds, or nominations when the room is still being freed.
    pub fn commit(&mut self, job: usize, leaf: usize, slots: Vec<(usize, Slot)>, nominate: bool) {
        if nominate {
            self.pipelined[job] += slots.len();
        }
        let pods: Vec<usize> = slots.iter().map(|(p, _)| *p).collect();
        self.used.add(
            self.policy,
            leaf,
            request_of(self.snapshot, &pods),
            self.jobs[job].preemptible,
            1,
        );
        for (p, slot) in slots {
            if nominate {
                self.state
                    .count_nominated(slot.node, &self.snapshot.pods[p]);
            }
            let pod = self.snapshot.pods[p].key();
            let node = self.snapshot.nodes[slot.node].name.clone();
            if !nominate && !self.state.is_pipelining() {
                self.bound_now[p] = true;
                self.unpipelined[p] = true;
            }
            self.placed_at[p] = Some(self.decisions.len() as u32);
            self.decisions.push(if nominate {
                Decision::Nominate { pod, node }
            } else {
                Decision::Bind { pod, node }
            });
            self.put_slot(p, slot);
        }
    }
}
