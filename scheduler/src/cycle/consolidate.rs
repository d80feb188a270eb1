//! Consolidate: move running preemptible pods between nodes when that lets a pending gang fit
//! and every moved pod fits elsewhere, with a bounded number of moves. Moves that do not end in
//! the gang fitting are undone.

use std::cmp::Ordering;

use kai_policy_compiler::model::Strategy;

use super::allocate::{Context, Unplaced};
use super::jobs::{request_of, room_of};
use super::kai::{Quantities, Side, add, compare_keys, quantities};
use super::placement::{Plan, try_place_gang};
use super::state::{Slot, same_place};

/// A pod taken off its node to be moved: the pod, the slot it held, its job.
type Taken = (usize, Slot, usize);

/// The most victim jobs one consolidation attempt may move. KAI's flag
/// `--max-consolidation-preemptees` is 16, and its candidate filter
/// (`consolidation.go: buildPreemptibleFilterFunc`) stops only once its count is *above* the
/// flag, so it lets 17 jobs through.
pub const MAX_VICTIM_JOBS: usize = 17;

impl Context<'_> {
    /// Consolidation pass; returns the jobs it could not help.
    pub fn consolidate(&mut self, unplaced: Vec<Unplaced>) -> Vec<Unplaced> {
        // KAI turns consolidation off when either default placement spreads
        // (`schedulingshard_types.go: setDefaultActions`): moving pods to pack nodes would undo
        // the spreading.
        let placement = self.policy.cluster.placement;
        if placement.gpu == Strategy::Spread || placement.cpu == Strategy::Spread {
            return unplaced;
        }
        // The movable jobs, the lowest priority and newest first (KAI's reversed job order),
        // worked out once for the pass and joined by each job an attempt places
        // (`join_victims`). Each attempt takes its candidates from the head of
        // this list: KAI takes the first 17 its filter meets in a map's order, that is, any 17;
        // these are the ones its victims queue would hand out first within their queues.
        let mut victims: Vec<usize> = (0..self.jobs.len())
            .filter(|&v| self.movable(v) && self.is_running(v))
            .collect();
        victims.sort_by_cached_key(|&v| std::cmp::Reverse(self.job_order(v)));
        let mut failed = super::evict::FailedJobs::default();
        self.in_queue_order(unplaced, |cx, u| {
            // KAI consolidates only for preemptible pending jobs (`FilterNonPreemptible`) past
            // their preemption delay (reclaim and preempt give the delay as the reason), and
            // skips a job no easier than one it already failed for (`smallestFailedJobs`).
            let Ok(leaf) = cx.jobs[u.job].queue else {
                return Some(u);
            };
            if !cx.jobs[u.job].preemptible
                || cx.within_preemption_delay(u.job).is_some()
                || !failed.easier(cx, u.job, leaf)
            {
                return Some(u);
            }
            if cx.try_consolidate(u.job, &victims) {
                cx.join_victims(&mut victims, u.job);
                return None;
            }
            failed.record(cx, u.job, leaf);
            Some(u)
        })
    }

    /// Moves the first of `victims` (in order) that it takes for the gang to fit, if every pod
    /// moved fits again elsewhere, placing only where KAI's solver does
    /// ([`Self::scenario_nodes`]).
    fn try_consolidate(&mut self, job: usize, victims: &[usize]) -> bool {
        self.within_solver_nodes(job, |cx| cx.consolidate_for(job, victims))
    }

    /// [`Self::try_consolidate`], within the nodes it allows.
    fn consolidate_for(&mut self, job: usize, victims: &[usize]) -> bool {
        let Ok(leaf) = self.jobs[job].queue else {
            return false;
        };
        let pending = self.gang_core(job);
        if pending.is_empty() {
            return false;
        }
        let request = request_of(self.snapshot, &pending);
        let plan = Plan::for_job(self.policy, leaf, &self.jobs[job], request.gpu > 0);
        if self.admission(job, leaf, &request).is_err() {
            return false;
        }
        // Moving pods creates no room: when the cluster's free total (with the room of pods
        // being deleted, see `take_leaving_room`) cannot hold the gang, skip.
        let free = self.state.free_total();
        let room = room_of(self.snapshot, &pending);
        if free.gpu < room.gpu || free.cpu < room.cpu || free.memory < room.memory {
            return false;
        }
        // Each victim unit is added to the moved set in turn until the gang fits and every
        // moved pod fits again elsewhere (KAI's job solver with `allPodsReallocated`). A job
        // placed or moved earlier in this cycle is a candidate, as KAI's candidates are the
        // jobs with active allocated pods (`consolidation.go: buildPreemptibleFilterFunc`,
        // `GetActiveAllocatedTasksCount`).
        let candidates: Vec<usize> = victims
            .iter()
            .copied()
            .filter(|&v| v != job && self.is_running(v))
            .take(MAX_VICTIM_JOBS)
            .collect();
        let mut queue = VictimQueue::new(self, &candidates);
        let mut released: Vec<Taken> = Vec::new();
        // KAI's solver places the preemptor and the moved jobs in queue and job order: a
        // moved job ahead of the preemptor goes back first, the others after it.
        let mut ahead: Vec<bool> = Vec::new();
        while let Some((v, pods)) = queue.pop(self) {
            for p in pods {
                if let Some(slot) = self.take_off(p) {
                    self.state.allow(slot.node);
                    released.push((p, slot, v));
                }
            }
            let moved: Vec<usize> = released
                .iter()
                .filter(|&&(_, _, u)| u == v)
                .map(|&(p, _, _)| p)
                .collect();
            // A job is placed again once, every pod taken from it together: its earlier units
            // go where its latest one goes.
            let first = self.goes_before(v, &moved, job, leaf, &pending, &mut None);
            ahead.resize(released.len(), first);
            for (a, _) in ahead.iter_mut().zip(&released).filter(|(_, r)| r.2 == v) {
                *a = first;
            }
            let part = |before: bool| -> Vec<Taken> {
                released
                    .iter()
                    .zip(&ahead)
                    .filter(|&(_, &a)| a == before)
                    .map(|(r, _)| r.clone())
                    .collect()
            };
            let (early, late) = (part(true), part(false));
            let Some(early_to) = self.replace_all(&early, plan.strategy) else {
                continue;
            };
            let Some(slots) = try_place_gang(self.state, self.snapshot, &pending, &plan) else {
                self.unplace(&early, &early_to);
                continue;
            };
            let Some(late_to) = self.replace_all(&late, plan.strategy) else {
                self.give_back(&slots);
                self.unplace(&early, &early_to);
                continue;
            };
            let for_job = self.jobs[job].key(self.snapshot);
            let moves = early
                .into_iter()
                .zip(early_to)
                .chain(late.into_iter().zip(late_to));
            for ((p, from, v), to) in moves {
                // Placed again as the eviction actions place: counted as pipelined.
                self.unpipelined[p] = false;
                if same_place(&self.snapshot.pods[p], &from, &to) {
                    self.put_slot(p, to);
                    self.rebind_unpipelined(p);
                    continue;
                }
                self.record_move(p, &from, &to, &for_job, v);
                self.put_slot(p, to);
            }
            self.commit(job, leaf, slots, true);
            return true;
        }
        for (p, slot, _) in released.into_iter().rev() {
            self.put_back(p, slot);
        }
        false
    }

    /// Gives back the room [`Self::replace_all`] took for `released` (slots `to`).
    fn unplace(&mut self, released: &[Taken], to: &[Slot]) {
        for ((p, _, _), slot) in released.iter().zip(to) {
            self.state.release(slot, &self.snapshot.pods[*p]);
        }
    }

    /// Places every released pod again, job by job in job order and each job's pods oldest
    /// first (KAI's `AllocateJob` per job, its task order), where the filters and the strategy
    /// allow; among nodes the strategy ranks equal, its own node first (a pod that lands where
    /// it was does not move).
    /// Returns the new slots in `released`'s order, or puts everything back and returns `None`.
    fn replace_all(&mut self, released: &[Taken], strategy: Strategy) -> Option<Vec<Slot>> {
        let mut order: Vec<usize> = (0..released.len()).collect();
        order.sort_by_cached_key(|&i| {
            let (p, _, v) = released[i];
            (self.job_order(v), super::jobs::task_order(self.snapshot, p))
        });
        let mut to: Vec<Option<Slot>> = vec![None; released.len()];
        for &i in &order {
            let (p, ref from, _) = released[i];
            let pod = &self.snapshot.pods[p];
            self.state.settle();
            let on = |m: usize| {
                self.state
                    .devices_on_candidate(m, pod, strategy)
                    .map(|devices| Slot { node: m, devices })
            };
            // Unlike placement, no idle room first: KAI's by-pod solver moves the pods of the
            // nodes it frees, ours takes whole jobs, and sending their pods to idle room first
            // would scatter pods KAI never moves (`integration_tests/consolidation/
            // consolidationGang_test.go` #0).
            let slot = self
                .state
                .candidates(pod, strategy)
                .find_map(on)
                .map(|best| {
                    let own = from.node;
                    let tie = own != best.node
                        && self.state.schedulable(own)
                        && self.state.admits(own, pod)
                        && self.state.strategy_key(own, pod, strategy)
                            == self.state.strategy_key(best.node, pod, strategy);
                    tie.then(|| on(own)).flatten().unwrap_or(best)
                });
            match slot {
                Some(slot) => {
                    self.state.take(&slot, pod);
                    to[i] = Some(slot);
                }
                None => {
                    for (k, slot) in to.iter().enumerate() {
                        if let Some(slot) = slot {
                            self.state.release(slot, &self.snapshot.pods[released[k].0]);
                        }
                    }
                    return None;
                }
            }
        }
        to.into_iter().collect()
    }

    /// Whether a running job's pods may be moved: it is preemptible. KAI's min-runtime plugin
    /// does not guard consolidation (it registers reclaim and preempt filters only), so
    /// neither do we.
    fn movable(&self, job: usize) -> bool {
        let Some(j) = self.jobs.get(job) else {
            return false;
        };
        j.queue.is_ok() && j.preemptible
    }

    /// Adds a job consolidation has just placed to the movable jobs of the attempts that
    /// follow, at its place in the reversed job order: KAI gathers each attempt's candidates
    /// afresh (`consolidation.go: getOrderedVictimsQueue`), so what one attempt placed may be
    /// moved by the next.
    fn join_victims(&self, victims: &mut Vec<usize>, job: usize) {
        if !self.movable(job) || !self.is_running(job) || victims.contains(&job) {
            return;
        }
        self.insert_in_reverse_job_order(victims, job);
    }
}

/// KAI's victims queue for consolidation (`utils.GetVictimsQueue`, `job_order_by_queue.go` with
/// `VictimQueue`): the candidate jobs by leaf queue, handed out as victim units. Down the queue
/// tree, among siblings the one last in the queue order goes first, its dominant share counted
/// without the victims of its best leaf taken so far and the next one (`getVictimsForQueue`);
/// in a leaf, KAI's reversed job order, a job above its minimum giving one surplus pod at a
/// time and the rest going whole (`GetTasksToEvict`).
struct VictimQueue {
    /// Candidate jobs by leaf queue.
    by_leaf: Vec<Vec<(usize, bool)>>,
    /// Whether a queue's subtree holds a candidate.
    in_subtree: Vec<bool>,
    /// What the units taken so far from each leaf free.
    taken: Vec<Quantities>,
    roots: Vec<usize>,
}

impl VictimQueue {
    /// The queue of `candidates` (movable jobs, none protected: min-runtime does not guard
    /// consolidation).
    fn new(cx: &Context<'_>, candidates: &[usize]) -> Self {
        let n = cx.policy.queues.len();
        let mut queue = VictimQueue {
            by_leaf: vec![Vec::new(); n],
            in_subtree: vec![false; n],
            taken: vec![Quantities::default(); n],
            roots: (0..n)
                .filter(|&q| cx.policy.queues[q].parent.is_none())
                .collect(),
        };
        for &v in candidates {
            let Ok(leaf) = cx.jobs[v].queue else { continue };
            queue.by_leaf[leaf].push((v, false));
            let mut at = Some(leaf);
            while let Some(q) = at {
                queue.in_subtree[q] = true;
                at = cx.policy.queues[q].parent;
            }
        }
        queue
    }

    /// The next victim unit (its job and pods); the pods must be released before the next
    /// call, as KAI's solver has them gone from its scenario.
    fn pop(&mut self, cx: &Context<'_>) -> Option<(usize, Vec<usize>)> {
        let next = self.last(cx, &self.roots)?;
        self.taken[next.leaf] = next.frees;
        Some((next.job, next.pods))
    }

    /// Among `siblings`, the subtree whose victims go first: its best leaf's next unit, with
    /// what that leaf's victims taken so far and the unit free.
    fn last(&self, cx: &Context<'_>, siblings: &[usize]) -> Option<NextUnit> {
        let mut last: Option<(super::kai::OrderKey, NextUnit)> = None;
        for &c in siblings.iter().filter(|&&c| self.in_subtree[c]) {
            let found = if cx.policy.queues[c].is_leaf() {
                cx.next_in_reverse_job_order(&self.by_leaf[c])
                    .map(|(job, pods)| {
                        let frees = quantities(&request_of(cx.snapshot, &pods));
                        NextUnit {
                            leaf: c,
                            job,
                            pods,
                            frees: add(&frees, &self.taken[c]),
                        }
                    })
            } else {
                self.last(cx, &cx.policy.queues[c].children)
            };
            let Some(found) = found else { continue };
            let key = cx.order_key(&Side {
                queue: c,
                job: Quantities::default(),
                victims: found.frees,
            });
            if last
                .as_ref()
                .is_none_or(|(l, _)| compare_keys(&key, l) == Ordering::Greater)
            {
                last = Some((key, found));
            }
        }
        last.map(|(_, found)| found)
    }
}

/// A leaf's next victim unit in the victims queue.
struct NextUnit {
    leaf: usize,
    job: usize,
    pods: Vec<usize>,
    /// What the leaf's victims taken so far and this unit free.
    frees: Quantities,
}
