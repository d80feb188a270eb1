//! Reclaim, as KAI's reclaim action (`actions/reclaim/reclaim.go`) with the proportion plugin's
//! checks (`plugins/proportion/reclaimable/`) and the min-runtime plugin
//! (`plugins/minruntime/`):
//!
//! - a pending job may reclaim only while its queue, with the job's gang minimum added, stays
//!   within its fair share in every resource (`CanReclaimResources`), and a non-preemptible job
//!   within its quota;
//! - a victim is a preemptible running job of another queue. Queues are judged at the level
//!   where their paths in the tree split (`getLeveledQueues`): the victim's side must be above
//!   its allocatable share, or, when the reclaimer's side is within its quota, above its quota
//!   (`FilterVictim`, `canBeDeservedQuotaReclaimCandidate`);
//! - victims come in KAI's reversed queue order, re-ranked after every victim on the allocation
//!   the attempt began with (KAI's session while it picks victims; only the dominant share with
//!   the job takes off the best leaf's victims so far and its next), and inside a queue in
//!   reversed job order; an elastic victim gives up one surplus pod at a time;
//! - each victim is checked in turn against the two strategies with what its side still holds
//!   before that victim goes (`reclaimResourcesFromReclaimees`, `FitsReclaimStrategy`), so a
//!   queue is never taken more than one victim below its share;
//! - the reclaimer's queue and each ancestor must not end more saturated than the sibling
//!   subtrees it took from (`reclaimingQueuesRemainWithinBoundaries`);
//! - a victim inside its reclaim min-runtime, resolved at the lowest common ancestor
//!   (`resolveReclaimMinRuntimeLCA`), is kept (an elastic one keeps its minimum).

use std::cmp::{Ordering, Reverse};
use std::rc::Rc;

use kai_policy_compiler::model::PerResource;
use kai_policy_compiler::quantity::ResourceKind;

use super::QueueUse;
use super::allocate::{Context, Unplaced};
use super::evict::{MAX_VICTIMS, Trail, Victim};
use super::jobs::{request_of, room_of};
use super::kai::{
    OrderKey, Quantities, Share, Side, add, compare_keys, each, less_equal, quantities,
};
use crate::cluster::{Amounts, Time};
use crate::decision::EvictReason;

mod offers;

/// Reclaim candidates by leaf queue, and every queue with a candidate in its subtree.
struct Candidates<'p> {
    /// Victim queues the reclaimer may take from, each with its running jobs and the reclaim
    /// min-runtime that protects them from this reclaimer.
    /// By queue index (`None`: no candidate there).
    by_leaf: Vec<Option<(&'p PoolLeaf, Option<u64>)>>,
    /// Whether some leaf has candidates.
    any: bool,
    in_subtree: Vec<bool>,
    /// Whether min-runtimes are honoured (off in the dry run that finds out if they block).
    honour_min_runtime: bool,
    /// Whether some job may be left out only because its min-runtime protects it.
    protected_left_out: bool,
}

thread_local! {
    static VICTIM_REPLAY: std::cell::Cell<bool> = const { std::cell::Cell::new(true) };
}

/// Turns off (and on again) taking victim units from an earlier attempt's [`Sequence`] on this
/// thread: for tests that check the decisions are the same either way.
pub fn set_victim_replay(on: bool) {
    VICTIM_REPLAY.with(|r| r.set(on));
}

impl Candidates<'_> {
    /// What an attempt's victim units depend on besides the allocation (see [`Sequence`]);
    /// `None` where a leaf has elastic jobs.
    fn sequence_key(&self) -> Option<SequenceKey> {
        if !VICTIM_REPLAY.with(|r| r.get()) {
            return None;
        }
        let mut key = SequenceKey {
            leaves: vec![0; self.by_leaf.len().div_ceil(64)],
            min_runtimes: Vec::new(),
            honour_min_runtime: self.honour_min_runtime,
        };
        for (q, found) in self.by_leaf.iter().enumerate() {
            if let Some((jobs, min)) = found {
                if jobs.elastic {
                    return None;
                }
                key.leaves[q / 64] |= 1 << (q % 64);
                key.min_runtimes.extend(min.map(|m| (q, m)));
            }
        }
        Some(key)
    }
}

/// One queue's jobs that reclaim may take from (preemptible, running when reclaim began).
#[derive(Debug, Default)]
struct PoolLeaf {
    /// In KAI's reversed job order as it stood when reclaim began (next victim first).
    jobs: Vec<usize>,
    /// Whether a job can shrink pod by pod: its place in the order then moves as it does.
    elastic: bool,
    /// The latest start among the gang jobs (the start a min-runtime counts from); only worked
    /// out when some queue has a reclaim min-runtime.
    latest_gang_start: Option<Time>,
}

/// Jobs reclaim may take from, by leaf queue.
type Pool = std::collections::BTreeMap<usize, PoolLeaf>;

/// What earlier attempts of this reclaim pass worked out about the victims, kept until an
/// attempt commits (and then what it cannot have changed): nothing else changes the state in a
/// pass (a failed attempt puts back all it took), and the attempts of a busy cluster mostly
/// fail, so each is worked out once, not once per attempt.
#[derive(Debug, Default)]
struct KnownVictims {
    /// Leaf heads by (leaf, min-runtime, whether min-runtimes are honoured), with how many of
    /// the leaf's jobs come before the head: a leaf's head depends only on its own jobs.
    by_leaf: rustc_hash::FxHashMap<HeadKey, (usize, Option<Head>)>,
    /// Victim units in the order the victim order offers them, by the candidates they come
    /// from: worked out by the first attempt with those candidates ([`Context::offered_units`]),
    /// or, where it could not be, as attempts took them.
    sequences: rustc_hash::FxHashMap<SequenceKey, Sequence>,
    /// What whole subtrees offer ([`offers`]), worked out by the first sequence that needed it.
    offers: offers::Kept,
}

impl KnownVictims {
    /// Forgets what an attempt that committed may have changed: the sequences, and the heads
    /// of the leaves whose allocation changed (`changed`) and the offers of their subtrees and
    /// every one above. A leaf's head depends only on which of its jobs run with which pods; a
    /// commit places pods only in the reclaimer's leaf and takes them only from its victims'
    /// leaves, so it changes the allocation of every leaf whose jobs it changes (a victim moved
    /// keeps its pods and its allocation).
    fn forget(
        &mut self,
        policy: &kai_policy_compiler::model::Policy,
        changed: impl Fn(usize) -> bool,
    ) {
        self.by_leaf.retain(|&(leaf, _, _), _| !changed(leaf));
        self.sequences.clear();
        offers::forget(&mut self.offers, policy, changed);
    }
}

/// A leaf, the reclaim min-runtime that protects its jobs, and whether it is honoured.
type HeadKey = (usize, Option<u64>, bool);

/// An attempt's candidates: its victim leaves, the min-runtime that protects each (where one
/// does), and whether min-runtimes are honoured. The leaves are a bit set: a pass keeps one key
/// per set of candidates its attempts met, and with thousands of queues a list would be large.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct SequenceKey {
    leaves: Vec<u64>,
    min_runtimes: Vec<(usize, u64)>,
    honour_min_runtime: bool,
}

/// The most sequences a reclaim pass keeps between two commits: with every attempt's
/// candidates different (a flat tree of many leaves, each reclaimer's own leaf left out of its
/// candidates), memory stays bounded and later candidates are ranked afresh.
const MAX_SEQUENCES: usize = 256;

/// The victim units an attempt took, in order, as the victim queue order offered them (before
/// the checks of the attempt's own job: whether a victim may only move).
///
/// Which unit comes next depends on the candidates, the allocation the attempt began with, and
/// the units taken so far, which leave the order whether they are evicted or placed again; not
/// on the attempt's job, except through victims that may only move (an excluded side). So a
/// later attempt with the same candidates, none of whose units so far may only move, is
/// offered the same units, and takes them from here instead of ranking the queues again. Leaves
/// of elastic jobs are left out: what a shrinking job gives next depends on what it still runs.
#[derive(Debug, Default)]
struct Sequence {
    /// Each unit: its job and the pods that go.
    units: Vec<(usize, Vec<usize>)>,
    /// Whether the order offered no unit after them.
    ended: bool,
    /// What the units did, by whether the solver's nodes were limited (the victims of a job
    /// asking GPUs in every pod are placed again only on some nodes): indexed by that `bool`.
    trails: [Trail; 2],
    /// What proving attempts futile worked out for these units.
    bounds: super::futile::Bounds,
}

/// A leaf's next victim unit (a job and the pods that go), and what it frees.
#[derive(Debug, Clone)]
struct Head {
    job: usize,
    pods: Vec<usize>,
    frees: Quantities,
}

/// What one reclaim attempt has worked out about its victims, by queue, kept until a victim
/// leaves the queue's subtree (or the subtree is excluded): `None` while not worked out.
#[derive(Debug, Clone)]
struct Heads {
    /// A leaf's next victim unit (`Some(None)`: it has none).
    leaf: Vec<Option<Option<Head>>>,
    /// A parent's last subtree in the queue order: its leaf and what its victims free.
    parent: Vec<Option<Option<(usize, Quantities)>>>,
    /// Per leaf of gangs, how many of its jobs (in order) are known to be no victim in this
    /// attempt: a job only stops being one while the attempt runs (its pods are released), so
    /// the next head is searched for from there, not from the start.
    passed: Vec<usize>,
    /// A queue's key in the victim queue order, with what its victims free.
    key: Vec<Option<OrderKey>>,
    /// Leaves a victim was taken from in this attempt: their heads are this attempt's own.
    touched: Vec<bool>,
}

impl Heads {
    fn new(queues: usize) -> Self {
        Heads {
            leaf: vec![None; queues],
            parent: vec![None; queues],
            passed: vec![0; queues],
            key: vec![None; queues],
            touched: vec![false; queues],
        }
    }

    /// Forgets what changes when `queue`'s subtree changes: it and its ancestors.
    fn forget(&mut self, policy: &kai_policy_compiler::model::Policy, queue: usize) {
        self.leaf[queue] = None;
        let mut at = Some(queue);
        while let Some(q) = at {
            self.parent[q] = None;
            self.key[q] = None;
            at = policy.queues[q].parent;
        }
    }
}

impl Context<'_> {
    /// Reclaim pass: for each job still unplaced, evict from other queues as KAI allows.
    /// Returns the jobs it could not help.
    pub fn reclaim(&mut self, unplaced: Vec<Unplaced>) -> Vec<Unplaced> {
        // Jobs that could be victims at all: preemptible, running (re-checked as victims go).
        let mut pool = self.victim_pool();
        let mut known = KnownVictims::default();
        let mut failed = super::evict::FailedJobs::default();
        self.in_queue_order(unplaced, |cx, mut u| {
            let Ok(leaf) = cx.jobs[u.job].queue else {
                return None;
            };
            if let Some(reason) = cx.within_preemption_delay(u.job) {
                u.reason = reason;
                return Some(u);
            }
            let pending = cx.gang_core(u.job);
            let request = quantities(&request_of(cx.snapshot, &pending));
            if pending.is_empty()
                || !cx.can_reclaim(u.job, leaf, &request)
                || !failed.easier(cx, u.job, leaf)
            {
                return Some(u);
            }
            let (done, protected_left_out) =
                cx.try_reclaim(u.job, leaf, &request, &pool, true, &mut known);
            if done {
                cx.join_pool(&mut pool, u.job);
                return None;
            }
            failed.record(cx, u.job, leaf);
            if protected_left_out {
                // Would it have worked but for min-runtimes? Then that is the reason to give.
                if let Some(reason) = cx.min_runtime_blocks(
                    "reclaim",
                    |cx| {
                        cx.try_reclaim(u.job, leaf, &request, &pool, false, &mut known)
                            .0
                    },
                    |cx, v| {
                        let vq = *cx.jobs[v].queue.as_ref().ok()?;
                        cx.reclaim_min_runtime(leaf, vq)
                    },
                ) {
                    u.reason = reason;
                }
            }
            Some(u)
        })
    }

    /// One reclaim attempt for a job, with victims from `pool`; `honour_min_runtime: false` is
    /// the dry run that finds out whether min-runtimes are what stops it. Returns whether it
    /// made room, and whether a job was left out only for its min-runtime.
    fn try_reclaim(
        &mut self,
        job: usize,
        leaf: usize,
        request: &Quantities,
        pool: &Pool,
        honour_min_runtime: bool,
        known: &mut KnownVictims,
    ) -> (bool, bool) {
        let pending = self.gang_core(job);
        let candidates = self.reclaim_candidates(leaf, request, pool, honour_min_runtime);
        if !candidates.any {
            return (false, candidates.protected_left_out);
        }
        let request = *request;
        let roots: Vec<usize> = (0..self.policy.queues.len())
            .filter(|&q| self.policy.queues[q].parent.is_none())
            .collect();
        let key = candidates.sequence_key();
        // The first attempt with these candidates works out the units the order offers them
        // before it takes any: it follows them then, and may be proven futile at once.
        if let Some(k) = &key
            && !known.sequences.contains_key(k)
            && known.sequences.len() < MAX_SEQUENCES
        {
            let units = self.offered_units(&roots, &candidates, pool, &mut known.offers);
            if cfg!(debug_assertions) {
                let afresh = self.offered_units_afresh(&roots, &candidates, known);
                assert_eq!(
                    (&units.units, units.ended),
                    (&afresh.units, afresh.ended),
                    "the units merged from the subtrees' offers differ from the order's"
                );
            }
            known.sequences.insert(k.clone(), units);
        }
        let limited = usize::from(self.limits_solver_nodes(job));
        let futile = key.as_ref().is_some_and(|k| {
            known.sequences.get_mut(k).is_some_and(|s| {
                (s.ended || s.units.len() >= MAX_VICTIMS)
                    && self.reclaim_is_futile(
                        job,
                        leaf,
                        &pending,
                        &request,
                        &s.units[..s.units.len().min(MAX_VICTIMS)],
                        &s.trails[limited],
                        limited,
                        &mut s.bounds,
                    )
            })
        });
        if futile && !cfg!(debug_assertions) {
            return (false, candidates.protected_left_out);
        }
        // What the attempt keeps as it runs, made only now: most attempts are proven futile
        // above, and these are a few vectors as long as the queues.
        let need = room_of(self.snapshot, &pending);
        let for_job = self.jobs[job].key(self.snapshot);
        let by_queue = self.policy.queues[leaf].name.clone();
        let mut excluded: Vec<usize> = Vec::new();
        let mut heads = Heads::new(self.policy.queues.len());
        // What the victims popped so far free, per queue (a parent counts its subtree).
        let mut released = vec![Quantities::default(); self.policy.queues.len()];
        // KAI picks victims on a session that none of them has left yet (each scenario's
        // simulation is discarded): the victim queues are ranked on the allocation as it was
        // when the attempt began (see `last_victim_queue` for what the victims take off). The
        // futility proof has put back all it replayed.
        let at_start = self.used.clone();
        let mut seen = 0;
        // What the victims popped that must move will take again somewhere.
        let mut moving = Amounts::default();
        // Whether a unit has come that may only move for this attempt's job: from there the
        // attempt ranks the queues itself, and `sequence` is neither followed nor extended.
        let mut own_order = false;
        // The reason given to the victims of each queue, made once per attempt.
        let mut reasons: Vec<Option<Rc<EvictReason>>> = vec![None; self.policy.queues.len()];
        let mut sequence = key
            .as_ref()
            .map(|k| known.sequences.remove(k).unwrap_or_default());
        // Taken out while the attempt runs: the victim order below borrows the sequence.
        let mut trail = sequence
            .as_mut()
            .map(|s| std::mem::take(&mut s.trails[limited]));
        let mut next = |cx: &Self, popped: &[Victim]| loop {
            // Only the subtrees victims were just taken from rank differently.
            for v in &popped[seen..] {
                if v.must_move {
                    let takes = room_of(cx.snapshot, &v.pods);
                    for k in ResourceKind::ALL {
                        *moving.get_mut(k) += takes.get(k);
                    }
                }
                if let Ok(q) = cx.jobs[v.job].queue {
                    heads.forget(cx.policy, q);
                    heads.touched[q] = true;
                    cx.add_up_the_tree(&mut released, q, &v.pods);
                }
            }
            seen = popped.len();
            // While the attempt follows `sequence`, every unit taken so far is the one it holds
            // at that place; `heads` then holds nothing from the units replayed (a cache only),
            // so the order can be ranked again from any point.
            let following = sequence.as_mut().filter(|_| !own_order);
            let in_sequence = following.is_some();
            let unit = match following {
                Some(s) if seen < s.units.len() => {
                    let unit = s.units[seen].clone();
                    debug_assert!(cx.is_running(unit.0), "a replayed victim no longer runs");
                    Some(unit)
                }
                Some(s) if s.ended => None,
                following => {
                    let unit = cx
                        .last_victim_queue(
                            &roots,
                            &candidates,
                            &excluded,
                            &released,
                            &at_start,
                            &mut heads,
                            known,
                        )
                        .and_then(|(from, _)| heads.leaf[from].clone()?)
                        .map(|head| (head.job, head.pods));
                    if let Some(s) = following {
                        match &unit {
                            Some(unit) => s.units.push(unit.clone()),
                            None => s.ended = true,
                        }
                    }
                    unit
                }
            };
            let (job, pods) = unit?;
            let vq = *cx.jobs[job].queue.as_ref().ok()?;
            let (mine, theirs) = cx.leveled(leaf, vq);
            let must_move = !cx.fits_reclaim_strategy(mine, theirs, &request);
            // What follows may depend on this attempt's job: the units so far stay for later
            // attempts.
            own_order |= must_move;
            // What that side holds only shrinks as victims go: none of it can be evicted now.
            // It may still be moved (KAI counts a moved victim as nothing taken), which helps
            // only while the room free beside the victims that must move can hold the gang.
            if must_move && !cx.may_move_for(&need, &moving) {
                excluded.push(theirs);
                heads.forget(cx.policy, theirs);
                continue;
            }
            let reason = reasons[vq]
                .get_or_insert_with(|| {
                    Rc::new(EvictReason::Reclaim {
                        for_job: for_job.clone(),
                        by_queue: by_queue.clone(),
                        from_queue: cx.policy.queues[vq].name.clone(),
                    })
                })
                .clone();
            return Some(Victim {
                job,
                pods,
                reason: Some(reason),
                must_move,
                in_sequence: in_sequence && !must_move,
            });
        };
        let preemptible = self.jobs[job].preemptible;
        let valid = |cx: &Self, victims: &[Victim]| {
            cx.evictions_fit_strategy(leaf, &request, victims)
                && cx.within_boundaries(leaf, &request, preemptible, victims)
        };
        let done = self.within_solver_nodes(job, |cx| {
            cx.release_until_fit(job, leaf, &pending, &mut next, &valid, trail.as_mut())
        });
        debug_assert!(!(futile && done), "a reclaim proven futile made room");
        if done {
            known.forget(self.policy, |q| at_start.all[q] != self.used.all[q]);
        } else if let (Some(key), Some(mut s), Some(t)) = (key, sequence, trail)
            && known.sequences.len() < MAX_SEQUENCES
        {
            s.trails[limited] = t;
            s.bounds.trail_changed(limited);
            known.sequences.insert(key, s);
        }
        (done, candidates.protected_left_out)
    }

    /// The victim units the order offers `candidates` (without elastic jobs, see
    /// [`Sequence`]), up to the bound on victims, worked out without taking them: a gang leaves
    /// its leaf's order once it is offered, as it does when an attempt takes it (its pods no
    /// longer run, or are being moved), and the queues are ranked as an attempt ranks them.
    /// Worked out unit by unit, ranking the queues again each time: debug builds check
    /// [`Self::offered_units`] against it.
    fn offered_units_afresh(
        &self,
        roots: &[usize],
        candidates: &Candidates,
        known: &mut KnownVictims,
    ) -> Sequence {
        let queues = self.policy.queues.len();
        let mut heads = Heads::new(queues);
        let mut released = vec![Quantities::default(); queues];
        let mut sequence = Sequence::default();
        while sequence.units.len() < MAX_VICTIMS {
            let next = self
                .last_victim_queue(
                    roots,
                    candidates,
                    &[],
                    &released,
                    self.used,
                    &mut heads,
                    known,
                )
                .and_then(|(from, _)| Some((from, heads.leaf[from].take()??)));
            let Some((from, head)) = next else {
                sequence.ended = true;
                break;
            };
            heads.forget(self.policy, from);
            heads.touched[from] = true;
            // The head stands where the leaf's search stopped: the next search starts after it.
            heads.passed[from] += 1;
            self.add_up_the_tree(&mut released, from, &head.pods);
            sequence.units.push((head.job, head.pods));
        }
        sequence
    }

    /// Whether one more victim that may only be moved can help a gang asking `need`: moving
    /// pods makes no room, so the room free now, less what the victims that must move already
    /// popped will take again (`moving`), must hold the gang.
    fn may_move_for(&self, need: &Amounts, moving: &Amounts) -> bool {
        let room = self.state.free_total();
        ResourceKind::ALL
            .into_iter()
            .all(|k| room.get(k) - moving.get(k) >= *need.get(k))
    }

    /// KAI's `CanReclaimResources`: the reclaimer's queue with the job stays within its fair
    /// share in every resource, and a non-preemptible job within its quota.
    fn can_reclaim(&self, job: usize, leaf: usize, request: &Quantities) -> bool {
        let q = self.kai_shares(leaf);
        let with = |f: fn(&Share) -> f64| add(&each(&q, f), request);
        less_equal(&with(|s| s.allocated), &each(&q, |s| s.fair_share))
            && (self.jobs[job].preemptible
                || less_equal(
                    &with(|s| s.allocated_non_preemptible),
                    &each(&q, |s| s.deserved),
                ))
    }

    /// The jobs reclaim may take from (KAI's `getReclaimVictimCandidates` with the victim
    /// filters of the proportion and min-runtime plugins).
    fn reclaim_candidates<'p>(
        &self,
        leaf: usize,
        request: &Quantities,
        pool: &'p Pool,
        honour_min_runtime: bool,
    ) -> Candidates<'p> {
        let mut found = Candidates {
            by_leaf: vec![None; self.policy.queues.len()],
            any: false,
            in_subtree: vec![false; self.policy.queues.len()],
            honour_min_runtime,
            protected_left_out: false,
        };
        let mut within = WithinBySide::default();
        // Most victim leaves meet the reclaimer's path below a few sides: each side is judged
        // once.
        let mut eligible: Vec<Option<bool>> = vec![None; self.policy.queues.len()];
        for (&vq, jobs) in pool.iter().filter(|&(&vq, _)| vq != leaf) {
            let (mine, theirs) = self.leveled(leaf, vq);
            let side = *eligible[theirs].get_or_insert_with(|| {
                let mine_within = within.get(self, mine, request);
                self.victim_side_eligible(mine_within, theirs, request)
            });
            if !side {
                continue;
            }
            let min = self.side_min_runtime(theirs);
            // A job evicted since reclaim began may still count here: then the dry run that
            // follows a failure finds min-runtimes were not what stopped it.
            if let (Some(start), Some(min)) = (jobs.latest_gang_start, min.filter(|&m| m > 0))
                && self.now < start.saturating_add(min)
            {
                found.protected_left_out = true;
            }
            found.by_leaf[vq] = Some((jobs, min));
            found.any = true;
            let mut at = Some(vq);
            while let Some(q) = at
                && !found.in_subtree[q]
            {
                found.in_subtree[q] = true;
                at = self.policy.queues[q].parent;
            }
        }
        found
    }

    /// The jobs reclaim may take from, by leaf queue, each queue's in KAI's reversed job order.
    fn victim_pool(&self) -> Pool {
        let mut pool = Pool::new();
        let min_runtime = self.any_reclaim_min_runtime();
        for v in (0..self.jobs.len()).filter(|&v| self.jobs[v].preemptible && self.is_running(v)) {
            let Ok(q) = self.jobs[v].queue else { continue };
            let leaf = pool.entry(q).or_default();
            leaf.jobs.push(v);
            self.note_in_leaf(leaf, v, min_runtime);
        }
        for leaf in pool.values_mut() {
            leaf.jobs
                .sort_by_cached_key(|&v| Reverse(self.job_order(v)));
        }
        pool
    }

    /// Whether some queue has a reclaim min-runtime.
    fn any_reclaim_min_runtime(&self) -> bool {
        self.policy
            .queues
            .iter()
            .any(|q| q.min_runtime.reclaim.is_some_and(|d| d.0 > 0))
    }

    /// Marks what `v` brings to its leaf: shrinking pod by pod, or, where some queue has a
    /// reclaim min-runtime (`min_runtime`), a gang start such a min-runtime counts from.
    fn note_in_leaf(&self, leaf: &mut PoolLeaf, v: usize, min_runtime: bool) {
        if self.is_elastic(v) {
            leaf.elastic = true;
        } else if min_runtime && let Some(start) = self.started(v) {
            leaf.latest_gang_start = leaf.latest_gang_start.max(Some(start));
        }
    }

    /// Adds a job reclaim has just placed to the victims of the attempts that follow: KAI
    /// gathers each attempt's victims afresh (`reclaim.go: getOrderedVictimsQueue`, over
    /// every job with a pod `Pipelined` or bound, `input_jobs.go: FilterNonActiveAllocated`),
    /// so what one attempt placed may be taken by the next.
    fn join_pool(&self, pool: &mut Pool, job: usize) {
        let Ok(q) = self.jobs[job].queue else { return };
        if !self.jobs[job].preemptible || !self.is_running(job) {
            return;
        }
        let leaf = pool.entry(q).or_default();
        if leaf.jobs.contains(&job) {
            return;
        }
        self.note_in_leaf(leaf, job, self.any_reclaim_min_runtime());
        self.insert_in_reverse_job_order(&mut leaf.jobs, job);
    }

    /// A leaf's next victim unit: for a queue of gangs, the first job in the order reclaim began
    /// with that may still go (a gang leaves whole, so the order of the rest holds); where a job
    /// shrinks pod by pod, the whole queue ranked again.
    fn leaf_head(
        &self,
        jobs: &PoolLeaf,
        min: Option<u64>,
        honour_min_runtime: bool,
        passed: &mut usize,
    ) -> Option<(usize, Vec<usize>)> {
        // Whether a job may be a victim, and whether its min-runtime protects its minimum.
        let eligible = |v: usize| -> Option<bool> {
            if !self.is_running(v) {
                return None;
            }
            let protected = self.protected_until(v, min).is_some() && honour_min_runtime;
            if protected && !self.is_elastic(v) {
                return None;
            }
            Some(protected)
        };
        if !jobs.elastic {
            let rest = jobs.jobs.get(*passed..)?;
            let Some(at) = rest.iter().position(|&v| eligible(v).is_some()) else {
                *passed = jobs.jobs.len();
                return None;
            };
            *passed += at;
            let v = rest[at];
            return Some((v, self.running(v)));
        }
        let ranked: Vec<(usize, bool)> = jobs
            .jobs
            .iter()
            .filter_map(|&v| eligible(v).map(|protected| (v, protected)))
            .collect();
        self.next_in_reverse_job_order(&ranked)
    }

    /// KAI's `FilterVictim`, on the two queues where the paths split, given whether the
    /// reclaimer's side stays within its quota with the job (`mine_within`).
    fn victim_side_eligible(&self, mine_within: bool, theirs: usize, request: &Quantities) -> bool {
        let t = self.kai_shares(theirs);
        if !mine_within {
            return above_allocatable(&t, &each(&t, |s| s.allocated));
        }
        // `canBeDeservedQuotaReclaimCandidate`: over quota in a resource the job asks for, or
        // under it in none of them.
        let mut under = false;
        for k in ResourceKind::ALL
            .into_iter()
            .filter(|&k| *request.get(k) > 0.0)
        {
            let s = t.get(k);
            if s.deserved == super::kai::UNLIMITED {
                continue;
            }
            if s.allocated > s.deserved {
                return true;
            }
            under |= s.allocated < s.deserved;
        }
        !under
    }

    /// KAI's `ReclaimerFitsDeservedQuota`: `queue` with the job stays within its quota.
    fn within_deserved_with(&self, queue: usize, request: &Quantities) -> bool {
        let q = self.kai_shares(queue);
        less_equal(
            &add(&each(&q, |s| s.allocated), request),
            &each(&q, |s| s.deserved),
        )
    }

    /// KAI's `FitsReclaimStrategy` for the next victim, with what the victim's side holds now
    /// (earlier victims already gone): it stays above its allocatable share (maintain fair
    /// share), or the reclaimer's side is within its quota and the victim's above its own
    /// (guarantee deserved quota).
    fn fits_reclaim_strategy(&self, mine: usize, theirs: usize, request: &Quantities) -> bool {
        let t = self.kai_shares(theirs);
        self.strategy_allows(mine, &t, &each(&t, |s| s.allocated), request)
    }

    /// `FitsReclaimStrategy` for a side `t` that holds `holds` before the victim goes.
    fn strategy_allows(
        &self,
        mine: usize,
        t: &super::kai::QueueShares,
        holds: &Quantities,
        request: &Quantities,
    ) -> bool {
        allows(t, holds, self.within_deserved_with(mine, request))
    }

    /// KAI's `reclaimResourcesFromReclaimees` (`Reclaimable`) over the victims evicted, those
    /// released (moved ones are not among them): each, in turn, passes `FitsReclaimStrategy`
    /// with what its side still holds before it goes. Victims taken on condition that they move
    /// and then evicted pass here when the moves of others left their side holding enough.
    fn evictions_fit_strategy(
        &self,
        leaf: usize,
        request: &Quantities,
        victims: &[Victim],
    ) -> bool {
        let freed = self.freed_by_queue(victims);
        let mut gone = vec![Quantities::default(); self.policy.queues.len()];
        for v in victims.iter().filter(|v| v.reason.is_some()) {
            let Ok(vq) = self.jobs[v.job].queue else {
                continue;
            };
            let (mine, theirs) = self.leveled(leaf, vq);
            let t = self.kai_shares(theirs);
            // What the side holds now lacks every victim evicted from it: add back those that
            // go after this one.
            let holds = minus(
                &add(&each(&t, |s| s.allocated), &freed[theirs]),
                &gone[theirs],
            );
            if !self.strategy_allows(mine, &t, &holds, request) {
                return false;
            }
            self.add_up_the_tree(&mut gone, vq, &v.pods);
        }
        true
    }

    /// KAI's `reclaimingQueuesRemainWithinBoundaries`, with the victims released: at every
    /// level of the reclaimer's path, its queue with the job must not be over its fair share
    /// while at least as saturated as a sibling subtree it takes from; a non-preemptible job
    /// keeps every queue on its path within quota.
    fn within_boundaries(
        &self,
        leaf: usize,
        request: &Quantities,
        preemptible: bool,
        victims: &[Victim],
    ) -> bool {
        let freed = self.freed_by_queue(victims);
        let mut at = Some(leaf);
        while let Some(r) = at {
            let parent = self.policy.queues[r].parent;
            let mine = self.kai_shares(r);
            let holds = add(&each(&mine, |s| s.allocated), request);
            let siblings = match parent {
                Some(p) => self.policy.queues[p].children.clone(),
                None => (0..self.policy.queues.len())
                    .filter(|&q| self.policy.queues[q].parent.is_none())
                    .collect(),
            };
            for s in siblings.into_iter().filter(|&s| s != r) {
                let taken = freed[s];
                if taken == Quantities::default() {
                    continue;
                }
                let theirs = self.kai_shares(s);
                for k in ResourceKind::ALL
                    .into_iter()
                    .filter(|&k| *taken.get(k) > 0.0 || *request.get(k) > 0.0)
                {
                    let ratio_mine = saturation(*holds.get(k), mine.get(k).fair_share);
                    let theirs_fair = theirs.get(k).fair_share;
                    let ratio_theirs = saturation(theirs.get(k).allocated, theirs_fair);
                    if ratio_mine > 1.0
                        && theirs_fair > 0.0
                        && ratio_mine * SATURATION_MULTIPLIER >= ratio_theirs
                    {
                        return false;
                    }
                }
            }
            if !preemptible
                && !less_equal(
                    &add(&each(&mine, |s| s.allocated_non_preemptible), request),
                    &each(&mine, |s| s.deserved),
                )
            {
                return false;
            }
            at = parent;
        }
        true
    }

    /// What victims free, per queue (a parent counts its whole subtree).
    fn freed_by_queue(&self, victims: &[Victim]) -> Vec<Quantities> {
        let mut freed = vec![Quantities::default(); self.policy.queues.len()];
        for v in victims {
            if let Ok(vq) = self.jobs[v.job].queue {
                self.add_up_the_tree(&mut freed, vq, &v.pods);
            }
        }
        freed
    }

    /// Adds what `pods` request to `queue` and every queue above it in `per_queue`.
    fn add_up_the_tree(&self, per_queue: &mut [Quantities], queue: usize, pods: &[usize]) {
        let amounts = quantities(&request_of(self.snapshot, pods));
        let mut at = Some(queue);
        while let Some(q) = at {
            per_queue[q] = add(&per_queue[q], &amounts);
            at = self.policy.queues[q].parent;
        }
    }

    /// KAI's `getLeveledQueues`: the two queues where the paths of `a` and `b` split (siblings
    /// under their lowest common ancestor, or two top-level queues); where one is the other's
    /// ancestor, the ancestor twice.
    pub(crate) fn leveled(&self, a: usize, b: usize) -> (usize, usize) {
        let queues = &self.policy.queues;
        let up = |mut q: usize, depth: usize| {
            while queues[q].depth > depth {
                q = queues[q]
                    .parent
                    .expect("a queue below the top has a parent");
            }
            q
        };
        let depth = queues[a].depth.min(queues[b].depth);
        let (mut x, mut y) = (up(a, depth), up(b, depth));
        if x == y {
            return (x, y);
        }
        while queues[x].parent != queues[y].parent {
            let parents = (queues[x].parent, queues[y].parent);
            (x, y) = (
                parents
                    .0
                    .expect("queues at one depth below the top have parents"),
                parents
                    .1
                    .expect("queues at one depth below the top have parents"),
            );
        }
        (x, y)
    }

    /// The reclaim min-runtime that protects a victim in `victim` from a reclaimer in
    /// `reclaimer` (KAI's `resolveReclaimMinRuntimeLCA`): the value of the victim's side one
    /// step below the lowest common ancestor (or its top-level queue when the trees differ),
    /// which the compiler has already resolved up the tree and from the cluster default.
    fn reclaim_min_runtime(&self, reclaimer: usize, victim: usize) -> Option<u64> {
        let (_, theirs) = self.leveled(reclaimer, victim);
        self.side_min_runtime(theirs)
    }

    /// [`Self::reclaim_min_runtime`] for the victim's side `theirs`, already found.
    fn side_min_runtime(&self, theirs: usize) -> Option<u64> {
        self.policy.queues[theirs].min_runtime.reclaim.map(|d| d.0)
    }

    /// Among `siblings`, the subtree that comes last in KAI's reversed queue order, re-ranked
    /// with the victims popped so far (`released`) against the allocation when the attempt
    /// began (`at_start`), skipping `excluded` sides: the leaf whose next victim goes (its unit
    /// is in `heads`) and what that leaf's victims would free.
    #[allow(clippy::too_many_arguments)]
    fn last_victim_queue(
        &self,
        siblings: &[usize],
        candidates: &Candidates,
        excluded: &[usize],
        released: &[Quantities],
        at_start: &QueueUse,
        heads: &mut Heads,
        known: &mut KnownVictims,
    ) -> Option<(usize, Quantities)> {
        let mut last: Option<(OrderKey, (usize, Quantities))> = None;
        for &c in siblings
            .iter()
            .filter(|&&c| candidates.in_subtree[c] && !excluded.contains(&c))
        {
            let found = if self.policy.queues[c].is_leaf() {
                let passed = &mut heads.passed[c];
                let touched = heads.touched[c];
                let head = heads.leaf[c].get_or_insert_with(|| {
                    let (jobs, min) = candidates.by_leaf[c]?;
                    let key = (c, min, candidates.honour_min_runtime);
                    if !touched && let Some((at, head)) = known.by_leaf.get(&key) {
                        if cfg!(debug_assertions) {
                            let mut from = *passed;
                            let fresh =
                                self.leaf_head(jobs, min, candidates.honour_min_runtime, &mut from);
                            let kept = head.as_ref().map(|h| (h.job, h.pods.clone()));
                            assert_eq!(
                                (from, fresh),
                                (*at, kept),
                                "a leaf's head kept has changed"
                            );
                        }
                        *passed = *at;
                        return head.clone();
                    }
                    let head = self
                        .leaf_head(jobs, min, candidates.honour_min_runtime, passed)
                        .map(|(job, pods)| {
                            let frees = quantities(&request_of(self.snapshot, &pods));
                            Head { job, pods, frees }
                        });
                    if !touched {
                        known.by_leaf.insert(key, (*passed, head.clone()));
                    }
                    head
                });
                head.as_ref().map(|h| (c, add(&h.frees, &released[c])))
            } else if let Some(known) = heads.parent[c] {
                known
            } else {
                let found = self.last_victim_queue(
                    &self.policy.queues[c].children,
                    candidates,
                    excluded,
                    released,
                    at_start,
                    heads,
                    known,
                );
                heads.parent[c] = Some(found);
                found
            };
            let Some(found) = found else { continue };
            // KAI subtracts the victims of the subtree's best leaf (`getVictimsForQueue`: the
            // ones popped and the next) from every queue on the way down to it, only where it
            // compares dominant shares with the job (`calculateDominantResourceShareWithJob`).
            let key = *heads.key[c].get_or_insert_with(|| self.victim_key(c, found.1, at_start));
            if last
                .as_ref()
                .is_none_or(|(l, _)| compare_keys(&key, l) == Ordering::Greater)
            {
                last = Some((key, found));
            }
        }
        last.map(|(_, found)| found)
    }

    /// A victim queue's key in the victim queue order, with what its best leaf's victims free
    /// (`frees`), on the allocation `used`.
    fn victim_key(&self, queue: usize, frees: Quantities, used: &QueueUse) -> OrderKey {
        self.order_key_with(
            &Side {
                queue,
                job: Quantities::default(),
                victims: frees,
            },
            used,
        )
    }
}

/// KAI's `relcaimerSaturationMultiplier` default.
const SATURATION_MULTIPLIER: f64 = 1.0;

/// `a - b` per resource.
fn minus(a: &Quantities, b: &Quantities) -> Quantities {
    PerResource {
        gpu: a.gpu - b.gpu,
        cpu: a.cpu - b.cpu,
        memory: a.memory - b.memory,
    }
}

/// Whether each reclaimer's side stays within its quota with the job, asked once per side:
/// most victim leaves meet the reclaimer's side at the same queue.
#[derive(Debug, Default)]
pub(super) struct WithinBySide(Vec<(usize, bool)>);

impl WithinBySide {
    /// [`Context::within_deserved_with`] for side `mine`, worked out on first asking.
    pub(super) fn get(&mut self, cx: &Context<'_>, mine: usize, request: &Quantities) -> bool {
        if let Some(&(_, within)) = self.0.iter().find(|&&(q, _)| q == mine) {
            return within;
        }
        let within = cx.within_deserved_with(mine, request);
        self.0.push((mine, within));
        within
    }
}

/// `FitsReclaimStrategy` for a side `t` that holds `holds`, with whether the reclaimer's side
/// stays within its quota with the job (`mine_within`).
pub(super) fn allows(t: &super::kai::QueueShares, holds: &Quantities, mine_within: bool) -> bool {
    above_allocatable(t, holds) || (mine_within && !less_equal(holds, &each(t, |s| s.deserved)))
}

/// KAI's `FitsMaintainFairShare`: `holds` is above the queue's allocatable share in some
/// resource.
fn above_allocatable(q: &super::kai::QueueShares, holds: &Quantities) -> bool {
    !less_equal(holds, &each(q, Share::allocatable))
}

/// KAI's `fairShareSaturationRatio`.
fn saturation(allocated: f64, fair_share: f64) -> f64 {
    if fair_share == 0.0 {
        if allocated > 0.0 { f64::INFINITY } else { 0.0 }
    } else {
        allocated / fair_share
    }
}
