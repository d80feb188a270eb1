//! What reclaim, preempt and pipelining share: victims released one unit at a time, in the
//! action's order, until the pending gang fits; the victims the gang can do without are kept
//! (for a gang of one pod, those on its node are placed again by the nodes' order, as KAI's);
//! the placement is nominated (pipelined) onto the room the victims are still releasing. If the
//! gang never fits, everything is put back. Also preempt and stale-gang eviction.

use std::cmp::{Ordering, Reverse};
use std::rc::Rc;

use kai_policy_compiler::quantity::ResourceKind;

use super::UseChange;
use super::allocate::{Context, Unplaced};
use super::gang::PodState;
use super::jobs::{request_of, room_of};
use super::kai::{Quantities, Side, compare_keys, quantities};
use super::placement::{Plan, try_place_gang};
use super::state::{NodeRoom, Slot, same_place};
use crate::cluster::Time;
use crate::decision::{Decision, EvictReason, Reason};

/// How long a running gang may stay below `minMember` before it is evicted whole (KAI's default
/// `--default-staleness-grace-period`).
pub const STALE_GANG_GRACE_SECONDS: u64 = 60;

/// The most victim units one pending job may release in one cycle (KAI bounds its search by time).
pub(crate) const MAX_VICTIMS: usize = 256;

/// Pods released together: a victim job's surplus pod, the rest of a job, or a terminating pod
/// whose room a pending job is pipelined onto.
#[derive(Debug, Clone)]
pub(crate) struct Victim {
    /// Index into the cycle's jobs.
    pub job: usize,
    /// The pods released.
    pub pods: Vec<usize>,
    /// Why they are evicted; `None` for pods already terminating (nothing to evict). Shared:
    /// an attempt pops hundreds of victims from a few queues, and each is cloned as it goes.
    pub reason: Option<Rc<EvictReason>>,
    /// Whether reclaim took it on condition that it moves: its side could not give it up when
    /// it was taken. Moving keeps the queue's allocation whole (KAI's consolidating reclaim);
    /// evicting it passes only if reclaim's final check, with the others' moves, allows it.
    pub must_move: bool,
    /// Whether it is the unit reclaim's recorded victim order holds at this place, taken as an
    /// earlier attempt took it (not on condition that it moves): a [`Trail`] holds only while
    /// every unit of the attempt is.
    pub in_sequence: bool,
}

/// What the victims of earlier attempts did, step by step: whether each unit went before the
/// gang and, if it did, where its job's pods were placed again. An attempt's state at a step
/// depends only on the state it began in, the units it took and which of them went before the
/// gang (the gang itself is only tried, never placed, until the attempt ends); so an attempt of
/// the same reclaim pass (nothing committed since) that takes the same units with the same
/// judgements so far is where the recording attempt was, and reads where a unit goes instead of
/// searching the nodes again.
#[derive(Debug, Default)]
pub(crate) struct Trail {
    steps: Vec<Step>,
}

/// One victim unit's step of a [`Trail`].
#[derive(Debug)]
struct Step {
    before: bool,
    /// For a unit that went before the gang: where its job's pods were placed again.
    placed: Placed,
    /// What shows that another job's attempt judges the unit alike, and bounds the room the
    /// step leaves (`None`: not kept).
    proof: Option<Box<StepProof>>,
}

/// What a later reclaim attempt needs to prove, without taking the units, that it would pass
/// through this step as the recording attempt did ([`Context::follows_trail`]), and what room
/// the step leaves on the nodes it changed ([`Trail::rooms`]).
#[derive(Debug)]
struct StepProof {
    /// The changes the step made to the queues' allocation after the unit left it and was
    /// judged, in order.
    changes: Vec<UseChange>,
    /// The heads of the victim's queue the judgement compared with the gang's queue's.
    theirs: Vec<Quantities>,
    /// The nodes whose free room the step changed, with their room after it.
    rooms: Vec<(usize, NodeRoom)>,
}

/// The most heads of a victim's queue a [`StepProof`] keeps: a queue with a longer backlog
/// leaves its steps unproven, so that a trail's memory stays small.
const MAX_PROOF_HEADS: usize = 64;

impl Trail {
    /// The free room each of the first `units` steps left on the nodes it changed (none for a
    /// step without its proof).
    pub(crate) fn rooms(&self, units: usize) -> Vec<&[(usize, NodeRoom)]> {
        self.steps[..units]
            .iter()
            .map(|s| s.proof.as_deref().map_or(&[][..], |p| &p.rooms[..]))
            .collect()
    }

    /// Whether it holds a step, with its proof, for each of the first `units` units.
    pub(crate) fn provable(&self, units: usize) -> bool {
        self.steps.len() >= units && self.steps[..units].iter().all(|s| s.proof.is_some())
    }
}

/// The slots a victim job's pods were given when placed again (`None`: they found none).
type Placed = Option<Vec<(usize, Slot)>>;

/// Jobs that reclaim (or preempt) could not help, one per queue and placement constraints: a
/// later job of that queue is tried only if it is easier to place (KAI's
/// `MinimalJobRepresentatives.IsEasierToSchedule`: fewer pods, or pods no larger, one smaller).
#[derive(Debug, Default)]
pub(crate) struct FailedJobs {
    /// Per leaf queue, the smallest job that failed with each placement signature (mostly
    /// one): few enough to be told apart by comparing the signatures themselves.
    by_leaf: rustc_hash::FxHashMap<usize, Vec<Failed>>,
}

/// A job that could not be helped, standing for its placement signature: KAI's signature
/// counts the pods' constraints and the topology constraint (`subgroup_info/podset.go`).
#[derive(Debug)]
struct Failed {
    /// The job.
    job: usize,
    /// Its first pod asking room, whose constraints the signature reads (`None`: no pod).
    pod: Option<usize>,
    /// The pods it asks room for, largest first.
    sizes: Vec<Size>,
}

/// What one pod asks for, as KAI's resource vectors compare it: CPU, memory, GPU and every
/// other resource (MIG instances among them).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Size {
    request: crate::cluster::Amounts,
    extended: std::collections::BTreeMap<String, i64>,
}

impl Size {
    /// KAI's `ResourceVector.LessEqual`: no more of anything (a resource missing is none).
    fn less_equal(&self, other: &Size) -> bool {
        let (a, b) = (&self.request, &other.request);
        a.gpu <= b.gpu
            && a.cpu <= b.cpu
            && a.memory <= b.memory
            && self
                .extended
                .iter()
                .all(|(k, v)| *v <= other.extended.get(k).copied().unwrap_or(0))
    }
}

impl FailedJobs {
    /// The pods a job asks room for, largest first.
    fn sizes(cx: &Context<'_>, pods: &[usize]) -> Vec<Size> {
        let mut sizes: Vec<Size> = pods
            .iter()
            .map(|&p| Size {
                request: cx.snapshot.pods[p].request,
                extended: cx.snapshot.pods[p].extended.clone(),
            })
            .collect();
        sizes.sort_by(|a, b| {
            let key = |s: &Size| (s.request.gpu, s.request.cpu, s.request.memory);
            key(b)
                .cmp(&key(a))
                .then_with(|| b.extended.cmp(&a.extended))
        });
        sizes
    }

    /// Whether jobs `a` and `b`, with first pods asking room `pa` and `pb`, have one placement
    /// signature.
    fn same_signature(
        cx: &Context<'_>,
        (a, pa): (usize, Option<usize>),
        (b, pb): (usize, Option<usize>),
    ) -> bool {
        let (ja, jb) = (&cx.jobs[a], &cx.jobs[b]);
        match (pa, pb) {
            (None, None) => true,
            (Some(pa), Some(pb)) => {
                cx.snapshot.pods[pa].constraints == cx.snapshot.pods[pb].constraints
                    && ja.topology == jb.topology
            }
            _ => false,
        }
    }

    /// Where among a queue's `recorded` failures the one with the signature of `job` lies,
    /// whose first pod asking room is `pod`.
    fn like(
        cx: &Context<'_>,
        recorded: &[Failed],
        job: usize,
        pod: Option<usize>,
    ) -> Option<usize> {
        recorded
            .iter()
            .position(|f| Self::same_signature(cx, (job, pod), (f.job, f.pod)))
    }

    /// Whether `job` is worth trying after the failures recorded for its queue.
    pub fn easier(&self, cx: &Context<'_>, job: usize, leaf: usize) -> bool {
        let pods = cx.gang_core(job);
        let recorded = self.by_leaf.get(&leaf).map_or(&[][..], Vec::as_slice);
        let Some(at) = Self::like(cx, recorded, job, pods.first().copied()) else {
            return true;
        };
        let (mine, failed) = (Self::sizes(cx, &pods), &recorded[at].sizes);
        if mine.is_empty() || failed.is_empty() || failed.len() > mine.len() {
            return !mine.is_empty();
        }
        for (a, b) in mine.iter().zip(failed) {
            let le = a.less_equal(b);
            if le && a != b {
                return true;
            }
            if !le {
                return false;
            }
        }
        false
    }

    /// Remembers a job that could not be helped, if it is the smallest so far.
    pub fn record(&mut self, cx: &Context<'_>, job: usize, leaf: usize) {
        let pods = cx.gang_core(job);
        let mine = Self::sizes(cx, &pods);
        let pod = pods.first().copied();
        let recorded = self.by_leaf.entry(leaf).or_default();
        match Self::like(cx, recorded, job, pod) {
            None => recorded.push(Failed {
                job,
                pod,
                sizes: mine,
            }),
            Some(at) => {
                let failed = &mut recorded[at];
                let smaller = mine.len() < failed.sizes.len()
                    || (mine.len() == failed.sizes.len()
                        && mine.iter().map(|a| a.request.gpu).sum::<i64>()
                            < failed.sizes.iter().map(|a| a.request.gpu).sum::<i64>());
                if smaller {
                    *failed = Failed {
                        job,
                        pod,
                        sizes: mine,
                    };
                }
            }
        }
    }
}

/// A candidate that can give a victim unit now ([`Context::victim_entry`]).
enum VictimEntry {
    /// A gang's unit: its pods.
    Gang(Vec<usize>),
    /// A plain job, with its active pods counted.
    Plain(usize),
}

/// Preempt's candidates in KAI's reversed job order for one attempt. While an attempt runs,
/// only the jobs it has taken victims from change their place in the order or stop giving
/// victims (their pods leave, or are being moved): the others are ranked once, and only the
/// jobs taken from are looked at again at each step, where [`Context::next_in_reverse_job_order`]
/// ranked every candidate at every step.
pub(crate) struct ReverseJobOrder<'c> {
    candidates: &'c [(usize, bool)],
    /// The candidates that gave a unit when the attempt began, next first (indexes into
    /// `candidates`); `None` until the first step.
    ranked: Option<Vec<usize>>,
    /// Where in `ranked` the next candidate not taken from is.
    at: usize,
    /// Candidates a unit was given from (the attempt takes every unit it is given), by index.
    taken: Vec<usize>,
    is_taken: Vec<bool>,
}

impl<'c> ReverseJobOrder<'c> {
    /// The order of `candidates` (as [`Context::next_in_reverse_job_order`] takes them).
    pub(crate) fn new(candidates: &'c [(usize, bool)]) -> Self {
        ReverseJobOrder {
            candidates,
            ranked: None,
            at: 0,
            taken: Vec::new(),
            is_taken: vec![false; candidates.len()],
        }
    }

    /// The next victim unit, which the attempt takes: the unit
    /// [`Context::next_in_reverse_job_order`] gives (debug builds check it).
    pub(crate) fn next(&mut self, cx: &Context<'_>) -> Option<(usize, Vec<usize>)> {
        let candidates = self.candidates;
        let ranked = self.ranked.get_or_insert_with(|| {
            let mut ranked: Vec<usize> = (0..candidates.len())
                .filter(|&i| {
                    let (v, protected) = candidates[i];
                    cx.victim_entry(v, protected).is_some()
                })
                .collect();
            ranked.sort_by_cached_key(|&i| Reverse(cx.job_order(candidates[i].0)));
            ranked
        });
        // A job not taken from gives the unit it gave when the attempt began; one that would
        // not (never seen: debug builds check the whole order below) is passed over.
        let untaken = loop {
            let Some(&i) = ranked.get(self.at) else {
                break None;
            };
            let (v, protected) = candidates[i];
            match self.is_taken[i] {
                false => match cx.victim_entry(v, protected) {
                    Some(entry) => break Some((i, entry)),
                    None => self.at += 1,
                },
                true => self.at += 1,
            }
        };
        let chosen = untaken
            .into_iter()
            .chain(self.taken.iter().filter_map(|&i| {
                let (v, protected) = candidates[i];
                Some((i, cx.victim_entry(v, protected)?))
            }))
            .max_by_key(|&(i, _)| cx.job_order(candidates[i].0));
        let next = chosen.map(|(i, entry)| {
            if !self.is_taken[i] {
                self.is_taken[i] = true;
                self.taken.push(i);
            }
            cx.victim_unit(candidates[i].0, entry)
        });
        debug_assert_eq!(
            next,
            cx.next_in_reverse_job_order(candidates),
            "the reversed job order kept for an attempt differs from the order ranked afresh"
        );
        next
    }
}

/// Whether `to` gives each pod of `from` the very slot it had there, and no other pod.
fn same_slots(to: &[(usize, Slot)], from: &[(usize, Slot)]) -> bool {
    to.len() == from.len() && to.iter().all(|t| from.contains(t))
}

/// A victim released tentatively, with the slots its pods held.
type Released = (Victim, Vec<(usize, Slot)>);

/// A victim placed again elsewhere: the slots its pods left and the ones they took.
type Moved = (Victim, Vec<(usize, Slot)>, Vec<(usize, Slot)>);

impl Context<'_> {
    /// KAI's `IsWithinPreemptionDelay` (`input_jobs.go` leaves such jobs out of consolidation,
    /// reclaim and preempt): the reason a job may not evict yet, if so.
    pub(crate) fn within_preemption_delay(&self, job: usize) -> Option<Reason> {
        let until = self.jobs[job].evicts_from?;
        (self.now < until).then(|| Reason::PreemptionDelay {
            remaining: until - self.now,
        })
    }

    /// Preempt pass: for each job still unplaced, evict lower-priority jobs of its own queue.
    /// Returns the jobs it could not help.
    pub fn preempt(&mut self, unplaced: Vec<Unplaced>) -> Vec<Unplaced> {
        let mut failed = FailedJobs::default();
        // Preempt only looks inside a queue: its jobs, listed once.
        let mut by_queue: Vec<Vec<usize>> = vec![Vec::new(); self.policy.queues.len()];
        for (j, job) in self.jobs.iter().enumerate() {
            if let Ok(q) = job.queue {
                by_queue[q].push(j);
            }
        }
        self.in_queue_order(unplaced, |cx, mut u| {
            let Ok(leaf) = cx.jobs[u.job].queue else {
                return None;
            };
            if let Some(reason) = cx.within_preemption_delay(u.job) {
                u.reason = reason;
                return Some(u);
            }
            if !failed.easier(cx, u.job, leaf) {
                return Some(u);
            }
            let mates = &by_queue[leaf];
            if cx.try_preempt(u.job, leaf, mates, true) {
                return None;
            }
            failed.record(cx, u.job, leaf);
            let min = cx.policy.queues[leaf].min_runtime.preempt.map(|d| d.0);
            if let Some(reason) = cx.min_runtime_blocks(
                "preempt",
                |cx| cx.try_preempt(u.job, leaf, mates, false),
                |_, _| min,
            ) {
                u.reason = reason;
            }
            Some(u)
        })
    }

    /// One preempt attempt for a job; `honour_min_runtime: false` is the dry run that finds out
    /// whether min-runtimes are what stops it.
    fn try_preempt(
        &mut self,
        job: usize,
        leaf: usize,
        mates: &[usize],
        honour_min_runtime: bool,
    ) -> bool {
        let pending = self.gang_core(job);
        let candidates = self.preempt_candidates(job, leaf, mates, honour_min_runtime);
        if candidates.is_empty() || pending.is_empty() {
            return false;
        }
        let for_job = self.jobs[job].key(self.snapshot);
        let priority = self.jobs[job].priority;
        // One reason per victim priority, shared by its victims.
        let mut reasons: Vec<(i32, Rc<EvictReason>)> = Vec::new();
        let mut order = ReverseJobOrder::new(&candidates);
        let mut next = |cx: &Self, _: &[Victim]| {
            let (victim, pods) = order.next(cx)?;
            let theirs = cx.jobs[victim].priority;
            let reason = match reasons.iter().find(|(p, _)| *p == theirs) {
                Some((_, reason)) => reason.clone(),
                None => {
                    let reason = Rc::new(EvictReason::Preempt {
                        for_job: for_job.clone(),
                        priorities: (theirs, priority),
                    });
                    reasons.push((theirs, reason.clone()));
                    reason
                }
            };
            Some(Victim {
                job: victim,
                pods,
                reason: Some(reason),
                must_move: false,
                in_sequence: false,
            })
        };
        self.within_solver_nodes(job, |cx| {
            cx.release_until_fit(job, leaf, &pending, &mut next, &|_, _| true, None)
        })
    }

    /// Preempt candidates (KAI's `preempt.go`): preemptible jobs of the same queue with strictly
    /// lower priority and running pods, past the queue's preempt min-runtime (an elastic job
    /// inside it may still lose its pods above `minMember`).
    fn preempt_candidates(
        &self,
        job: usize,
        leaf: usize,
        mates: &[usize],
        honour_min_runtime: bool,
    ) -> Vec<(usize, bool)> {
        let priority = self.jobs[job].priority;
        let min = self.policy.queues[leaf].min_runtime.preempt.map(|d| d.0);
        mates
            .iter()
            .copied()
            .filter(|&v| v != job)
            .filter(|&v| self.jobs[v].preemptible && self.jobs[v].priority < priority)
            .filter(|&v| self.is_running(v))
            .filter_map(|v| {
                let protected = honour_min_runtime && self.protected_until(v, min).is_some();
                (!protected || self.is_elastic(v)).then_some((v, protected))
            })
            .collect()
    }

    /// Whether an eviction attempt that ignores min-runtimes (`attempt`) would make room: then
    /// the reason a job waits is the victims' protection, and it says when the last of it ends
    /// (each victim's min-runtime from `min_of`).
    pub(crate) fn min_runtime_blocks(
        &mut self,
        action: &'static str,
        attempt: impl FnOnce(&mut Self) -> bool,
        min_of: impl Fn(&Self, usize) -> Option<u64>,
    ) -> Option<Reason> {
        self.dry_run = Some(Vec::new());
        let fits = attempt(self);
        let victims = self.dry_run.take().unwrap_or_default();
        if !fits {
            return None;
        }
        let (until, job) = victims
            .iter()
            .filter_map(|v| Some((self.protected_until(v.job, min_of(self, v.job))?, v.job)))
            .max()?;
        let queue = self.jobs[job]
            .queue
            .as_ref()
            .map_or(String::new(), |&q| self.policy.queues[q].name.clone());
        Some(Reason::MinRuntime {
            action,
            queue,
            remaining: until - self.now,
        })
    }

    /// Whether a job may run more pods than its minimum.
    pub(crate) fn is_elastic(&self, job: usize) -> bool {
        match &self.jobs[job].gang {
            Some(gang) => gang.is_elastic(),
            None => self.jobs[job].pods.len() as u32 > self.jobs[job].min_member,
        }
    }

    /// Running pods of a job, bound before this cycle or placed in it, and not being released:
    /// what eviction can take (KAI's active allocated pods: `Allocated`, `Pipelined`, `Binding`
    /// and the rest, `pod_status.go: activeAllocatedStatuses`).
    pub(crate) fn running(&self, job: usize) -> Vec<usize> {
        self.jobs[job]
            .pods
            .iter()
            .copied()
            .filter(|&p| self.runs(p))
            .collect()
    }

    /// Whether some pod of a job runs (see [`Self::running`]) and none is being moved by the
    /// attempt under way: whether it may be a victim.
    pub(crate) fn is_running(&self, job: usize) -> bool {
        let running = self.running_pods.any(job);
        debug_assert_eq!(
            running,
            self.jobs[job].pods.iter().any(|&p| self.runs(p))
                && !self.jobs[job]
                    .pods
                    .iter()
                    .any(|&p| self.running_pods.is_moved(p) && !self.running_pods.is_early(p)),
            "the running count of job {job} is off"
        );
        running
    }

    /// Whether a pod holds a slot (bound before the cycle, placed in it, or moved by an attempt
    /// that committed), is not being moved by the attempt under way, and is not being deleted.
    pub(crate) fn runs(&self, p: usize) -> bool {
        self.slots[p].is_some()
            && super::allocate::counts_as_running(self.snapshot, p)
            && !self.running_pods.is_moved(p)
    }

    /// Whether a pod holds a placement made in this cycle (a Bind or Nominate among the
    /// decisions): taking it as a victim takes that placement back, as KAI's actions may evict
    /// what allocate placed in the same session.
    pub(crate) fn placed_now(&self, p: usize) -> bool {
        self.placed_at[p].is_some()
    }

    /// When a job's min-runtime protection ends, if it has not yet: counted from when the job
    /// started ([`Self::started`]).
    pub(crate) fn protected_until(&self, job: usize, min: Option<u64>) -> Option<Time> {
        let min = min.filter(|&m| m > 0)?;
        let until = self.started(job)?.saturating_add(min);
        (self.now < until).then_some(until)
    }

    /// When a job started: KAI's `LastStartTimestamp`, kept on its PodGroup by the backend
    /// (`kai.scheduler/last-start-timestamp`, set when allocate last bound it with none of its
    /// pods allocated: now, for a job allocate started in this cycle). Without one (a job
    /// started before the scheduler kept it, or with no PodGroup), its earliest running pod's
    /// start; KAI would not protect such a job at all.
    pub(crate) fn started(&self, job: usize) -> Option<Time> {
        if self.started[job] {
            return Some(self.now);
        }
        self.jobs[job].last_start.or_else(|| {
            self.jobs[job]
                .pods
                .iter()
                .filter(|&&p| self.runs(p))
                .filter_map(|&p| self.snapshot.pods[p].started)
                .min()
        })
    }

    /// Whether KAI's eviction solver places victim job `v` (its released pods `moved`) again
    /// before the preemptor `job` of `leaf` (its pods `pending`); judged once, as `v` is taken.
    /// KAI's solver runs an allocation over the pending jobs, the preemptor and the victims'
    /// jobs in queue and job order (`common/action.go:
    /// TryToVirtuallyAllocatePreemptorAndGetVictims` over `GetJobsToAllocate`), passing over
    /// the pending jobs: across queues, compared at the level where their paths split, each
    /// queue competes with its jobs in turn. In one queue, a gang taken whole is below its
    /// minimum, as the preemptor is, so it is ahead when its priority is higher, or as high and
    /// it is older; a plain elastic job gives its pods above its minimum one at a time, so it
    /// stays at its minimum and is ahead only with a higher priority.
    ///
    /// The preemptor's side of the comparison (its queue's waiting jobs up to it) is kept in
    /// `heads` between calls for one preemptor (`&mut None` for a single judgement): only a
    /// victim of the preemptor's own queue can change it, and one forgets it.
    pub(crate) fn goes_before(
        &self,
        v: usize,
        moved: &[usize],
        job: usize,
        leaf: usize,
        pending: &[usize],
        heads: &mut Option<Vec<Quantities>>,
    ) -> bool {
        self.goes_before_noting(v, moved, job, leaf, pending, heads, None)
    }

    /// [`Self::goes_before`], keeping in `theirs` the victim's queue's heads it compared with
    /// the preemptor's queue's (left `None` where the two are one queue).
    #[allow(clippy::too_many_arguments)]
    fn goes_before_noting(
        &self,
        v: usize,
        moved: &[usize],
        job: usize,
        leaf: usize,
        pending: &[usize],
        heads: &mut Option<Vec<Quantities>>,
        theirs: Option<&mut Option<Vec<Quantities>>>,
    ) -> bool {
        let Ok(vq) = self.jobs[v].queue else {
            return false;
        };
        if vq == leaf {
            *heads = None;
            if self.is_elastic(v) && self.jobs[v].gang.is_none() {
                return self.jobs[v].priority > self.jobs[job].priority;
            }
            return self.job_order(v) < self.job_order(job);
        }
        // Each queue's jobs up to the one in question, in job order, as KAI's solver meets
        // them: the waiting ones are popped and passed over, so the queue then competes again
        // with its next job.
        let theirs_jobs = self.heads_up_to(vq, v, moved);
        let mine_jobs = heads.get_or_insert_with(|| self.heads_up_to(leaf, job, pending));
        let first = self.reaches_first(leaf, vq, &theirs_jobs, mine_jobs, self.used);
        if let Some(out) = theirs {
            *out = Some(theirs_jobs);
        }
        first
    }

    /// Whether the victim's queue `vq`, meeting its jobs' `theirs_jobs` in turn, reaches its
    /// last before the preemptor's queue `leaf` reaches the last of `mine_jobs` (the
    /// preemptor), with the allocation `used`.
    fn reaches_first(
        &self,
        leaf: usize,
        vq: usize,
        theirs_jobs: &[Quantities],
        mine_jobs: &[Quantities],
        used: &super::QueueUse,
    ) -> bool {
        let (mine, theirs) = self.leveled(leaf, vq);
        let side = |queue: usize, job: Quantities| Side {
            queue,
            job,
            victims: Quantities::default(),
        };
        let (mut t, mut m) = (theirs_jobs.iter(), mine_jobs.iter());
        let (mut at_t, mut at_m) = (t.next(), m.next());
        while let (Some(&tj), Some(&mj)) = (at_t, at_m) {
            let first = compare_keys(
                &self.order_key_with(&side(theirs, tj), used),
                &self.order_key_with(&side(mine, mj), used),
            ) == Ordering::Less;
            if first {
                at_t = t.next();
                if at_t.is_none() {
                    return true;
                }
            } else {
                at_m = m.next();
                if at_m.is_none() {
                    return false;
                }
            }
        }
        false
    }

    /// Whether an attempt of `job` (in `leaf`, its gang `pending`) taking `units` judges each
    /// of them as the steps of `trail` did (going before the gang or not), and so passes
    /// through the states the recording attempt passed through: the allocation is brought, step
    /// by step, where that attempt had it when it judged the unit, then put back as it was.
    /// `trail` must be [`Trail::provable`] over `units`.
    pub(crate) fn follows_trail(
        &mut self,
        job: usize,
        leaf: usize,
        pending: &[usize],
        units: &[(usize, Vec<usize>)],
        trail: &Trail,
    ) -> bool {
        let mut mine_jobs = None;
        let mut made: Vec<UseChange> = Vec::new();
        let mut follows = true;
        for ((v, pods), step) in units.iter().zip(&trail.steps) {
            let (Some(proof), &Ok(vq)) = (step.proof.as_deref(), &self.jobs[*v].queue) else {
                follows = false;
                break;
            };
            // The unit leaves its queue's allocation ([`Self::take_slots`]), is judged, and
            // the step's changes follow.
            let leaves = UseChange::new(
                vq,
                request_of(self.snapshot, pods),
                self.jobs[*v].preemptible,
                -1,
            );
            self.used.replay(self.policy, &[leaves], true);
            made.push(leaves);
            let mine = mine_jobs.get_or_insert_with(|| self.heads_up_to(leaf, job, pending));
            let before = vq != leaf && self.reaches_first(leaf, vq, &proof.theirs, mine, self.used);
            self.used.replay(self.policy, &proof.changes, true);
            made.extend_from_slice(&proof.changes);
            if vq == leaf || before != step.before {
                follows = false;
                break;
            }
        }
        self.used.replay(self.policy, &made, false);
        follows
    }

    /// The init resources of the jobs allocate left waiting in `leaf` that come before `job`
    /// in job order and still wait, in that order, then `job`'s own (its pods `pods`).
    fn heads_up_to(&self, leaf: usize, job: usize, pods: &[usize]) -> Vec<Quantities> {
        let key = self.job_order(job);
        let mut before: Vec<usize> = self.waiting[leaf]
            .iter()
            .copied()
            .filter(|&w| w != job && self.job_order(w) < key)
            .filter(|&w| self.waits(w))
            .collect();
        before.sort_by_cached_key(|&w| self.job_order(w));
        before
            .into_iter()
            .map(|w| quantities(&self.init_request(w)))
            .chain(std::iter::once(quantities(&request_of(
                self.snapshot,
                pods,
            ))))
            .collect()
    }

    /// The next victim unit among `candidates` (jobs of one queue, each with whether its
    /// min-runtime protects its core), in KAI's reversed job order: lowest priority, jobs above
    /// their minimum before jobs at it, newest first. A job above its minimum gives one surplus
    /// pod at a time; at its minimum it goes whole, unless protected.
    pub(crate) fn next_in_reverse_job_order(
        &self,
        candidates: &[(usize, bool)],
    ) -> Option<(usize, Vec<usize>)> {
        let (v, entry) = candidates
            .iter()
            .filter_map(|&(v, protected)| Some((v, self.victim_entry(v, protected)?)))
            .max_by_key(|&(v, _)| self.job_order(v))?;
        Some(self.victim_unit(v, entry))
    }

    /// Whether a candidate can give a victim unit now, and what [`Self::victim_unit`] needs to
    /// make it: a gang's pods (KAI's `GetTasksToEvict`), or a plain job's active pods.
    fn victim_entry(&self, v: usize, protected: bool) -> Option<VictimEntry> {
        // Victims popped so far are released already: their pods hold no slot, so they count
        // neither as running nor as active here.
        if !self.is_running(v) {
            return None;
        }
        if let Some(gang) = &self.jobs[v].gang {
            let pods = gang.victim_pods(self, protected, &|pods| self.newest(pods));
            // A unit whose pods do not all run (one being moved by this attempt) is not taken.
            if pods.is_empty() || !pods.iter().all(|&p| self.runs(p)) {
                return None;
            }
            return Some(VictimEntry::Gang(pods));
        }
        let active = self.active_count(v);
        let min = self.jobs[v].min_member as usize;
        if protected && active <= min {
            return None;
        }
        Some(VictimEntry::Plain(active))
    }

    /// The victim unit of a candidate [`Self::victim_entry`] accepted.
    fn victim_unit(&self, v: usize, entry: VictimEntry) -> (usize, Vec<usize>) {
        match entry {
            VictimEntry::Gang(pods) => (v, pods),
            VictimEntry::Plain(active) => {
                let pods = self.running(v);
                if active > self.jobs[v].min_member as usize {
                    return (v, self.newest(&pods).into_iter().collect());
                }
                (v, pods)
            }
        }
    }

    /// The pod of `pods` that goes first: the last in KAI's task order (`GetTasksToEvict`),
    /// a pod placed in this cycle starting now.
    fn newest(&self, pods: &[usize]) -> Option<usize> {
        pods.iter().copied().max_by_key(|&p| {
            let pod = &self.snapshot.pods[p];
            let started = pod.started.or(self.placed_now(p).then_some(self.now));
            (super::jobs::task_rank(pod), started, pod.created, p)
        })
    }

    /// Runs an eviction solver's attempt for `job` (reclaim, preempt, consolidation) with
    /// placements limited to the nodes KAI's solver uses ([`Self::scenario_nodes`]), victims'
    /// nodes added as they are taken.
    pub(crate) fn within_solver_nodes<T>(
        &mut self,
        job: usize,
        attempt: impl FnOnce(&mut Self) -> T,
    ) -> T {
        if let Some(nodes) = self.scenario_nodes(job) {
            self.state.limit_to(nodes);
        }
        let out = attempt(self);
        self.state.unlimit();
        out
    }

    /// Whether KAI's eviction solvers place a preemptor's victims again on some nodes only
    /// ([`Self::scenario_nodes`]): where every pod of the job asks for GPUs.
    pub(crate) fn limits_solver_nodes(&self, job: usize) -> bool {
        let pods = &self.jobs[job].pods;
        pods.iter().all(|&p| self.snapshot.pods[p].asks_gpu())
    }

    /// The nodes KAI's eviction solvers place on for a preemptor `job`, before any victim's
    /// node is added: `None` (every node) when some pod of the job asks no GPU, otherwise the
    /// nodes with GPUs idle or being released, pods terminating before the cycle among them
    /// (`common/feasible_nodes.go: FeasibleNodesForJob`). It matters for the victims placed
    /// again that ask no GPU: they may not go to a node without such GPUs that no victim left.
    pub(crate) fn scenario_nodes(&self, job: usize) -> Option<Vec<bool>> {
        if !self.limits_solver_nodes(job) {
            return None;
        }
        let mut nodes = self.state.nodes_with_free_gpus();
        for &p in &self.releasing {
            if let Some(slot) = &self.slots[p]
                && self.snapshot.pods[p].asks_gpu()
            {
                nodes[slot.node] = true;
            }
        }
        Some(nodes)
    }

    /// Releases victims one unit at a time, each from `next(context, released so far)`, until
    /// the pods `pending` fit; keeps every earlier victim the gang can do without; then, if
    /// `valid(context, needed)` accepts the victims, commits the evictions and nominates the
    /// pods onto the room. Otherwise, or if the gang never fits, puts everything back. Where
    /// victims go before the gang is read from `trail` while it holds, and recorded there.
    pub(crate) fn release_until_fit(
        &mut self,
        job: usize,
        leaf: usize,
        pending: &[usize],
        next: &mut dyn FnMut(&Self, &[Victim]) -> Option<Victim>,
        valid: &dyn Fn(&Self, &[Victim]) -> bool,
        mut trail: Option<&mut Trail>,
    ) -> bool {
        let request = request_of(self.snapshot, pending);
        let plan = Plan::for_job(self.policy, leaf, &self.jobs[job], request.gpu > 0);
        let mut released: Vec<Released> = Vec::new();
        let mut popped: Vec<Victim> = Vec::new();
        // Victims KAI's solver places again before the gang, placed as they are taken; and the
        // pods of such victims that found no place (evicted, unless a later unit of their job
        // comes after the gang: then all its units go with the released ones).
        let mut early: Vec<Moved> = Vec::new();
        let mut early_failed: Vec<Released> = Vec::new();
        // Nodes victims freed room on since the gang last failed to be placed; `None` until it
        // has been tried once. Room only grows elsewhere in this loop, so the gang can fit now
        // only if one of its pods fits on one of these nodes: no need to try the whole cluster
        // again otherwise. Inter-pod terms can change on other nodes when a pod leaves, so with
        // them every victim leads to a full attempt.
        let mut freed_since: Option<Vec<usize>> = None;
        let terms = self.state.tracks_inter_pod_terms();
        // The gang's pods that may fit where the others may not: checking a freed node for one
        // of alike pods answers for all of them.
        let mut unlike: Vec<usize> = Vec::new();
        for &p in pending {
            let pod = &self.snapshot.pods[p];
            if !unlike
                .iter()
                .any(|&u| self.state.fit_alike(&self.snapshot.pods[u], pod))
            {
                unlike.push(p);
            }
        }
        // The gang's side in `goes_before`, worked out once.
        let mut mine_heads = None;
        while popped.len() < MAX_VICTIMS {
            let Some(victim) = next(self, &popped) else {
                break;
            };
            popped.push(victim.clone());
            // The pods leave their slots and the victim its queue's allocation; the room is
            // freed below, once it is known whether the unit goes straight back onto it.
            let freed = self.take_slots(&victim);
            let proving = trail.is_some() && victim.in_sequence;
            let mut theirs = None;
            let before = victim.reason.is_some()
                && self.goes_before_noting(
                    victim.job,
                    &victim.pods,
                    job,
                    leaf,
                    pending,
                    &mut mine_heads,
                    proving.then_some(&mut theirs),
                );
            // The trail holds from its start up to here: this step's is reused if it judged the
            // unit alike; otherwise this attempt's steps replace it from here.
            let step = popped.len() - 1;
            if !victim.in_sequence {
                trail = None;
            }
            let known = trail.as_deref_mut().and_then(|t| match t.steps.get(step) {
                Some(s) if s.before == before => Some(s.placed.clone()),
                _ => {
                    t.steps.truncate(step);
                    None
                }
            });
            // A step the trail keeps records what proves it ([`StepProof`]).
            let recording = proving && trail.as_deref().is_some_and(|t| t.steps.len() == step);
            if recording {
                self.used.record();
                self.state.note_changes();
            }
            // A unit the trail places again on the very slots it left, alone of its job in this
            // attempt, would free its room only to take it again: it keeps it (debug builds free
            // it and search, checking the trail).
            let of_job = |v: &Victim| v.job == victim.job;
            let held = before
                && !cfg!(debug_assertions)
                && matches!(&known, Some(Some(to)) if same_slots(to, &freed))
                && freed.iter().all(|&(p, _)| {
                    !self.unpipelined[p] && !self.bound_now[p] && !self.is_releasing[p]
                })
                && !released.iter().chain(&early_failed).any(|(v, _)| of_job(v))
                && !early.iter().any(|(v, _, _)| of_job(v));
            if !held {
                self.free_room(&freed);
            }
            // KAI's solver adds each victim's node to the nodes it places on.
            for (_, slot) in &freed {
                self.state.allow(slot.node);
            }
            if let Some(nodes) = freed_since.as_mut() {
                nodes.extend(freed.iter().map(|(_, slot)| slot.node));
            }
            // KAI's solver allocates a victim's job once, at one point of its order, with every
            // pod of it the victims taken so far hold: the job's units taken earlier in this
            // attempt go where this latest one goes. Those placed again before the gang are
            // taken back first (their room, given again, is free once more).
            let back = self.take_back_early(&mut early, &mut early_failed, victim.job);
            // Where the job's pods were placed again, if the unit went before the gang.
            let mut placed = None;
            let mut units: Vec<Released> = Vec::with_capacity(back.len() + 1);
            for (unit, to) in back {
                if let Some(nodes) = freed_since.as_mut() {
                    nodes.extend(to.iter().map(|(_, slot)| slot.node));
                }
                units.push(unit);
            }
            if before {
                units.extend(released.extract_if(.., |(v, _)| v.job == victim.job));
                units.push((victim, freed));
                // Marked moved, even back on its own node, so this attempt does not take those
                // pods again.
                let known = known.map(|to| (to, held));
                let (gone, stay, to) = self.move_job(units, true, known);
                placed = to;
                if let Some((_, _, to)) = &gone {
                    for (p, _) in to {
                        self.running_pods.set_early(*p, true);
                    }
                }
                early.extend(gone);
                early_failed.extend(stay);
            } else if units.is_empty() {
                released.push((victim, freed));
            } else {
                // The job's units placed before the gang until now come after it too, in the
                // order they were taken (a unit merged from several, at its first one's place).
                released.extend(units);
                released.push((victim, freed));
                released.sort_by_key(|(v, _)| {
                    popped
                        .iter()
                        .position(|u| v.pods.iter().any(|p| u.pods.contains(p)))
                });
            }
            let changes = self.used.take_recorded();
            let changed = self.state.take_noted();
            if let Some(t) = trail.as_deref_mut()
                && t.steps.len() == step
            {
                debug_assert!(recording, "a step the trail keeps was not recorded");
                let proof = theirs
                    .filter(|heads| heads.len() <= MAX_PROOF_HEADS)
                    .map(|theirs| {
                        Box::new(StepProof {
                            changes,
                            theirs,
                            rooms: changed
                                .into_iter()
                                .map(|n| (n, self.state.node_room(n)))
                                .collect(),
                        })
                    });
                t.steps.push(Step {
                    before,
                    placed,
                    proof,
                });
            }
            // Limits and non-preemptible quota are judged now, with the victims gone: allocate
            // has placed other jobs since this one was first admitted.
            if self.admission(job, leaf, &request).is_err() {
                continue;
            }
            if let Some(nodes) = freed_since.as_mut()
                && !terms
            {
                let fits_somewhere = nodes.iter().any(|&n| {
                    unlike.iter().any(|&p| {
                        self.state
                            .fits_now(n, &self.snapshot.pods[p], plan.strategy)
                    })
                });
                nodes.clear();
                if !fits_somewhere {
                    continue;
                }
            }
            if self.gang_outnumbers_room(pending) {
                // Debug builds search all the same, and check that it finds no place.
                debug_assert!(
                    try_place_gang(self.state, self.snapshot, pending, &plan).is_none(),
                    "a gang outnumbering the nodes' room was placed"
                );
                freed_since = Some(Vec::new());
                continue;
            }
            let Some(slots) = try_place_gang(self.state, self.snapshot, pending, &plan) else {
                freed_since = Some(Vec::new());
                continue;
            };
            // The victims taken in the order they were popped, for the decisions' order.
            let taken: Vec<usize> = popped.iter().flat_map(|v| v.pods.iter().copied()).collect();
            let placed_before = !early.is_empty();
            let (slots, needed) =
                self.keep_unneeded(job, leaf, pending, slots, released, placed_before);
            let (late, mut needed) = self.move_victims(job, leaf, pending, needed);
            needed.extend(early_failed);
            needed.sort_by_key(|(v, _)| taken.iter().position(|p| v.pods.contains(p)));
            let moved: Vec<Moved> = early.into_iter().chain(late).collect();
            // Only the victims evicted count as taken from their queues: the moved ones keep
            // their allocation (KAI's `allowConsolidatingReclaim`, on by default).
            let victims: Vec<Victim> = needed
                .iter()
                .filter(|(v, _)| v.reason.is_some())
                .map(|(v, _)| v.clone())
                .collect();
            let valid = valid(self, &victims);
            if !valid || self.dry_run.is_some() {
                let all: Vec<Victim> = victims
                    .into_iter()
                    .chain(moved.iter().map(|(v, _, _)| v.clone()))
                    .collect();
                let back = self.unmove_victims(moved);
                self.give_back(&slots);
                for (v, freed) in needed.into_iter().chain(back).rev() {
                    self.restore(&v, &freed);
                }
                if let (true, Some(dry)) = (valid, self.dry_run.as_mut()) {
                    *dry = all;
                    return true;
                }
                return false;
            }
            let for_job = self.jobs[job].key(self.snapshot);
            for (v, from, to) in &moved {
                for ((p, from), (_, to)) in from.iter().zip(to) {
                    self.running_pods.set_early(*p, false);
                    if !same_place(&self.snapshot.pods[*p], from, to) {
                        self.record_move(*p, from, to, &for_job, v.job);
                        self.settle(*p);
                        continue;
                    }
                    if self.running_pods.is_moved(*p) {
                        // A victim placed back where it runs before the gang was kept out of
                        // this attempt's victims; it runs on, and may be a victim again (KAI's
                        // `Unevict`).
                        let slot = self.unmove(*p).expect("a moved pod holds its new slot");
                        self.put_slot(*p, slot);
                    }
                    self.rebind_unpipelined(*p);
                }
            }
            for (v, freed) in needed {
                let Some(why) = v.reason else { continue };
                let mut evicted = false;
                for (p, slot) in freed {
                    if self.placed_now(p) {
                        self.withdraw(p, v.job, &why);
                        continue;
                    }
                    evicted = true;
                    // Moved earlier in this cycle: it leaves where it ran all the same, now for
                    // this preemptor, and goes nowhere.
                    if let Some((at, _)) = self.moves.remove(&p) {
                        self.retell(at, EvictReason::clone(&why));
                        continue;
                    }
                    self.decisions.push(Decision::Evict {
                        pod: self.snapshot.pods[p].key(),
                        node: self.snapshot.nodes[slot.node].name.clone(),
                        reason: EvictReason::clone(&why),
                    });
                }
                if evicted {
                    self.evicted.push(v.job);
                }
            }
            self.commit(job, leaf, slots, true);
            return true;
        }
        // Nothing fits even with every candidate gone: put them all back.
        let back = self.unmove_victims(early);
        for (v, freed) in released.into_iter().chain(early_failed).chain(back).rev() {
            self.restore(&v, &freed);
        }
        false
    }

    /// Takes back what this attempt placed again of victim job `v` before the gang (`early`,
    /// and its pods that found no place, `early_failed`): the pods leave the slots they were
    /// given and their queue's allocation, as when they were released. Returns each unit as
    /// released, with the slots it had been given (none for the ones that found no place).
    fn take_back_early(
        &mut self,
        early: &mut Vec<Moved>,
        early_failed: &mut Vec<Released>,
        v: usize,
    ) -> Vec<(Released, Vec<(usize, Slot)>)> {
        let mut units = Vec::new();
        let mut i = 0;
        while i < early.len() {
            if early[i].0.job != v {
                i += 1;
                continue;
            }
            let (unit, freed, to) = early.remove(i);
            self.release_moved(&unit, &to);
            units.push(((unit, freed), to));
        }
        let mut i = 0;
        while i < early_failed.len() {
            if early_failed[i].0.job == v {
                units.push((early_failed.remove(i), Vec::new()));
            } else {
                i += 1;
            }
        }
        units
    }

    /// With the gang placed, puts back every released victim (but the last) that the gang can do
    /// without; `early` when victims were placed again before the gang (as they were taken, in
    /// [`Self::release_until_fit`]). Returns the gang's slots and the victims to place again
    /// after it: the ones it needs and, for a gang of one pod, every one on its node.
    fn keep_unneeded(
        &mut self,
        job: usize,
        leaf: usize,
        pending: &[usize],
        mut slots: Vec<(usize, Slot)>,
        mut released: Vec<Released>,
        early: bool,
    ) -> (Vec<(usize, Slot)>, Vec<Released>) {
        let request = request_of(self.snapshot, pending);
        // Rebuilt here, once per attempt that places its gang, rather than passed in.
        let plan = &Plan::for_job(self.policy, leaf, &self.jobs[job], request.gpu > 0);
        let last = released.pop();
        let mut needed = Vec::with_capacity(released.len() + 1);
        let mut kept: Vec<Victim> = Vec::new();
        // KAI's solver, for a preemptor of one pod, evicts every victim on the node it lands on
        // (NodeLocalGreedy's scenario: the victims taken so far on the latest one's node) and
        // places them again after it by the nodes' scores: they go with the needed ones, to be
        // placed again where they fit, at home or elsewhere. Pods being deleted are not placed
        // again at all.
        let scenario = match (pending, slots.as_slice()) {
            ([_], [(_, slot)]) => Some(slot.node),
            _ => None,
        };
        for (v, freed) in released {
            if v.reason.is_some()
                && scenario.is_some_and(|n| freed.iter().any(|(_, slot)| slot.node == n))
            {
                needed.push((v, freed));
                continue;
            }
            self.restore(&v, &freed);
            // Where the victim fits back beside the gang as it is placed, the gang keeps its
            // place; otherwise it is placed again without the victim's room.
            let fits_back = freed
                .iter()
                .all(|(_, slot)| self.state.overdrawn(slot.node) == Some(false));
            if fits_back && self.admission(job, leaf, &request).is_ok() {
                kept.push(v);
                continue;
            }
            self.give_back(&slots);
            // Victims placed again before the gang may hold the room this one left: then it
            // cannot come back whatever the gang does.
            let taken_again = early
                && freed
                    .iter()
                    .any(|(_, slot)| self.state.overdrawn(slot.node) != Some(false));
            // Not worth trying when the free room left in the whole cluster is too small.
            let room = self.state.free_total();
            let needs = room_of(self.snapshot, pending);
            let may_fit = ResourceKind::ALL
                .into_iter()
                .all(|k| room.get(k) >= needs.get(k));
            let fewer = (!taken_again && may_fit && self.admission(job, leaf, &request).is_ok())
                .then(|| try_place_gang(self.state, self.snapshot, pending, plan))
                .flatten();
            match fewer {
                Some(fewer) => {
                    slots = fewer;
                    kept.push(v);
                }
                None => {
                    // Without the victim the state is the one the gang's slots were found in.
                    self.release(&v);
                    for (p, slot) in &slots {
                        self.state.take(slot, &self.snapshot.pods[*p]);
                    }
                    needed.push((v, freed));
                }
            }
        }
        needed.extend(last);
        // A gang is never left partly bound: where the gang needs some pods of a job placed in
        // this cycle and the ones put back would leave it below its minimum, those go too, to
        // be placed again with the rest or not at all (test
        // `a_gang_placed_this_cycle_is_never_left_partly_bound`). A job that ran before the
        // cycle is left as KAI's solver leaves it (its sub-scenarios take victims by node, and
        // its allocation of the victim's job asks only what brings it up to its minimum);
        // stale-gang eviction deals with it after its grace period.
        for v in kept {
            let needs_job = needed
                .iter()
                .any(|(n, _)| n.job == v.job && n.reason.is_some());
            let placed_now = v.pods.iter().any(|&p| self.placed_now(p));
            if needs_job && placed_now && self.below_minimum(v.job) {
                let freed = self.release(&v);
                needed.push((v, freed));
            }
        }
        (slots, needed)
    }

    /// Whether a job holds pods but fewer than its minimum (a PodGroup's, sub-groups included).
    fn below_minimum(&self, job: usize) -> bool {
        self.short_of_minimum(job, self.active_count(job) as u32, self)
    }

    /// Whether a job has `count` pods (those `counted` counts), some but fewer than its
    /// minimum (a PodGroup's, sub-groups included).
    fn short_of_minimum(&self, job: usize, count: u32, counted: &dyn PodState) -> bool {
        count > 0
            && match &self.jobs[job].gang {
                Some(gang) => gang.below_minimum(counted),
                None => count < self.jobs[job].min_member,
            }
    }

    /// With the gang placed, places the needed victims again where they fit, job by job in queue
    /// order, then job order (KAI's by-pod solver runs its allocation over the preemptor and
    /// the victims' jobs: `common/action.go: TryToVirtuallyAllocatePreemptorAndGetVictims`;
    /// the jobs that go before the preemptor were placed as they were taken), each given back
    /// what [`Self::move_job`] says. A pod placed again is moved, not evicted, and keeps its
    /// queue's allocation, so it must also fit its queue's limits beside the placed gang (`job`
    /// of `leaf`, pods `pending`). Returns the moved victims and the ones still to evict.
    fn move_victims(
        &mut self,
        job: usize,
        leaf: usize,
        pending: &[usize],
        needed: Vec<Released>,
    ) -> (Vec<Moved>, Vec<Released>) {
        // Pods being deleted go whatever happens; they need no job (another scheduler's have
        // none).
        let (mut needed, mut evicted): (Vec<Released>, Vec<Released>) =
            needed.into_iter().partition(|(v, _)| v.reason.is_some());
        needed.sort_by_cached_key(|(v, _)| self.job_order(v.job));
        let gang = request_of(self.snapshot, pending);
        let preemptible = self.jobs[job].preemptible;
        self.used.add(self.policy, leaf, gang, preemptible, 1);
        let mut moved = Vec::new();
        // The units of each job together, the jobs in job order.
        let mut jobs: Vec<Vec<Released>> = Vec::new();
        for unit in needed {
            match jobs.last_mut() {
                Some(units) if units[0].0.job == unit.0.job => units.push(unit),
                _ => jobs.push(vec![unit]),
            }
        }
        while !jobs.is_empty() {
            // KAI's solver places the victims' jobs in queue order, then job order: the next is
            // the one no other reaches before, each judged with its queue's allocation as the
            // moves so far left it.
            let mut next = 0;
            for i in 1..jobs.len() {
                if self.placed_before(&jobs[i], &jobs[next]) {
                    next = i;
                }
            }
            let units = jobs.remove(next);
            let (gone, stay, _) = self.move_job(units, false, None);
            moved.extend(gone);
            evicted.extend(stay);
        }
        self.used.add(self.policy, leaf, gang, preemptible, -1);
        (moved, evicted)
    }

    /// Whether KAI's solver places victim job `a` (its released units) before victim job `b`:
    /// in one queue, by job order; across queues, as [`Self::goes_before`] judges a victim
    /// against the preemptor.
    fn placed_before(&self, a: &[Released], b: &[Released]) -> bool {
        let (va, vb) = (a[0].0.job, b[0].0.job);
        let (Ok(qa), Ok(qb)) = (&self.jobs[va].queue, &self.jobs[vb].queue) else {
            return false;
        };
        if qa == qb {
            return self.job_order(va) < self.job_order(vb);
        }
        let pods = |units: &[Released]| -> Vec<usize> {
            units
                .iter()
                .flat_map(|(u, _)| u.pods.iter().copied())
                .collect()
        };
        self.goes_before(va, &pods(a), vb, *qb, &pods(b), &mut None)
    }

    /// Places released pods of one victim job (`units`) again where they fit, all or none, as
    /// KAI's solver allocates a victim's job once (`AllocateJob` over `GetTasksToAllocate`):
    /// the first of them in KAI's task order, as many as [`Self::placed_back`] says; a PodGroup
    /// with sub-groups all of them.
    /// With `always_moved`, a pod that lands on its own node counts as moved too (no victim
    /// again in this attempt). Where the pods go is `known` when a [`Trail`] holds it, with
    /// whether they still hold that room. Returns the pods placed, as a move, the ones to
    /// evict, and the slots the pods were given.
    fn move_job(
        &mut self,
        units: Vec<Released>,
        always_moved: bool,
        known: Option<(Placed, bool)>,
    ) -> (Option<Moved>, Vec<Released>, Placed) {
        let v = units[0].0.job;
        let (Some(_), Ok(vq)) = (&units[0].0.reason, &self.jobs[v].queue) else {
            return (None, units, None);
        };
        let vq = *vq;
        // Every pod released of the job, with its slot and whether it may only move.
        let mut pods: Vec<(usize, Slot, bool)> = units
            .iter()
            .flat_map(|(u, freed)| {
                freed
                    .iter()
                    .map(move |(p, slot)| (*p, slot.clone(), u.must_move))
            })
            .collect();
        pods.sort_by_key(|&(p, _, _)| super::jobs::task_order(self.snapshot, p));
        let all: Vec<usize> = pods.iter().map(|&(p, _, _)| p).collect();
        let count = match self.jobs[v].gang {
            Some(_) => all.len(),
            None => self.placed_back(v, all.len()),
        };
        let to = match (count, known) {
            (0, _) => None,
            (n, None) => self.place_again(v, vq, &all[..n]),
            (n, Some((known, held))) => self.place_as_known(v, vq, &all[..n], known, held),
        };
        let placed = to.clone();
        let mut to = to.unwrap_or_default();
        let reason = units[0].0.reason.clone();
        let unit = |pods: &[(usize, Slot, bool)]| Victim {
            job: v,
            pods: pods.iter().map(|&(p, _, _)| p).collect(),
            reason: reason.clone(),
            must_move: pods.iter().any(|&(_, _, m)| m),
            in_sequence: false,
        };
        let slots = |pods: &[(usize, Slot, bool)]| -> Vec<(usize, Slot)> {
            pods.iter().map(|(p, slot, _)| (*p, slot.clone())).collect()
        };
        let (gone, stay): (Vec<_>, Vec<_>) = pods
            .into_iter()
            .partition(|(p, _, _)| to.iter().any(|(q, _)| q == p));
        let evicted: Vec<Released> = if stay.is_empty() {
            Vec::new()
        } else {
            vec![(unit(&stay), slots(&stay))]
        };
        if gone.is_empty() {
            return (None, evicted, placed);
        }
        to.sort_by_key(|(p, _)| gone.iter().position(|(q, _, _)| q == p));
        for ((p, from, _), (_, to)) in gone.iter().zip(&to) {
            // Placed again as the eviction actions place: counted as pipelined.
            self.unpipelined[*p] = false;
            if same_place(&self.snapshot.pods[*p], from, to) && !always_moved {
                self.put_slot(*p, to.clone());
            } else {
                self.move_to(*p, to.clone());
            }
        }
        // `place_again` has given the queue its allocation back.
        (Some((unit(&gone), slots(&gone), to)), evicted, placed)
    }

    /// How many of `released` pods of victim job `v` (no PodGroup sub-groups) KAI's solver
    /// places again: it allocates the job once, with every pod of the attempt released (all of
    /// them are in `released`: see [`Self::release_until_fit`]), and asks for what brings the job's
    /// active pods up to its minimum, or one pod when they are there already
    /// (`podgroup_info/allocation_info.go: getNumTasksToAllocate`; the released pods are
    /// `Releasing`, not active, and may be allocated again: `PodInfo.ShouldAllocate`).
    fn placed_back(&self, v: usize, released: usize) -> usize {
        let active = self.active_count(v);
        let min = self.jobs[v].min_member as usize;
        let asked = if active >= min { 1 } else { min - active };
        asked.min(released)
    }

    /// Places released pods of a job again, all or none, within its queue's limits; the slots
    /// taken.
    fn place_again(
        &mut self,
        job: usize,
        queue: usize,
        pods: &[usize],
    ) -> Option<Vec<(usize, Slot)>> {
        let request = request_of(self.snapshot, pods);
        self.admission(job, queue, &request).ok()?;
        let plan = Plan::for_job(self.policy, queue, &self.jobs[job], request.gpu > 0);
        let to = try_place_gang(self.state, self.snapshot, pods, &plan)?;
        // Placed now, they count towards the limits the next pod is checked against.
        self.used
            .add(self.policy, queue, request, self.jobs[job].preemptible, 1);
        Some(to)
    }

    /// [`Self::place_again`] where a [`Trail`] says where the pods go, in the state the search
    /// found them there: the pods take those slots (unless they still hold that room,
    /// `held`), no search made. Debug builds search all the same and check that it finds them
    /// there.
    fn place_as_known(
        &mut self,
        job: usize,
        queue: usize,
        pods: &[usize],
        known: Placed,
        held: bool,
    ) -> Placed {
        if cfg!(debug_assertions) {
            let found = self.place_again(job, queue, pods);
            assert_eq!(found, known, "a trail's step is not what the search finds");
            return found;
        }
        let to = known?;
        if !held {
            for (p, slot) in &to {
                self.state.take(slot, &self.snapshot.pods[*p]);
            }
        }
        let request = request_of(self.snapshot, pods);
        self.used
            .add(self.policy, queue, request, self.jobs[job].preemptible, 1);
        Some(to)
    }

    /// Undoes moves ([`Self::move_victims`], and the victims placed again as they were taken):
    /// the moved victims are released again, as they were before, and returned for the caller
    /// to put back; those placed again on the very devices they left are put back at once.
    fn unmove_victims(&mut self, moved: Vec<Moved>) -> Vec<Released> {
        let mut back = Vec::with_capacity(moved.len());
        for (v, freed, to) in moved.into_iter().rev() {
            // Placed again on the very devices it left: the state and its queue's allocation
            // are as they were before it was taken, so only the pods' slots are given back
            // (most victims a failed attempt places again before the gang land there).
            // A pod allocate bound in this cycle held room the state does not count as
            // pipelined, which its new slot is: it goes back the long way.
            let home = to
                .iter()
                .zip(&freed)
                .all(|((p, t), (q, f))| p == q && t == f && !self.bound_now[*p]);
            if !home {
                self.release_moved(&v, &to);
                back.push((v, freed));
                continue;
            }
            for (p, slot) in to.iter().rev() {
                self.take_moved_slot(*p);
                self.put_slot(*p, slot.clone());
            }
        }
        back
    }

    /// Takes a moved victim's pods off the slots they were given (`to`), and their allocation
    /// off their queue: released, as before the move.
    fn release_moved(&mut self, v: &Victim, to: &[(usize, Slot)]) {
        for (p, slot) in to.iter().rev() {
            self.take_moved_slot(*p);
            self.state.release(slot, &self.snapshot.pods[*p]);
            // Released again from the room it held before the attempt.
            self.unpipelined[*p] = self.bound_now[*p];
        }
        self.account(v, -1);
    }

    /// Takes away the slot a victim's pod was given again (marked moved, or put back on its own
    /// node), undoing the mark.
    fn take_moved_slot(&mut self, p: usize) {
        self.running_pods.set_early(p, false);
        if self.running_pods.is_moved(p) {
            self.unmove(p);
        } else {
            self.take_slot(p);
        }
    }

    /// Records that pod `p` of job `job` moves from slot `from` to slot `to` for `for_job`. A
    /// pod placed in this cycle is nominated there instead of where it was placed. A pod moved
    /// before in this cycle keeps its one Evict, now naming where it goes; moved back onto the
    /// very room it ran on, its Evict is dropped (nothing has left the cycle, so it runs on,
    /// where KAI, which evicted it when the first move committed, would restart it there).
    pub(crate) fn record_move(
        &mut self,
        p: usize,
        from: &Slot,
        to: &Slot,
        for_job: &str,
        job: usize,
    ) {
        if self.placed_now(p) {
            self.replace_placement(p, to.node);
            return;
        }
        let reason = EvictReason::Consolidate {
            for_job: for_job.to_string(),
            to_node: self.snapshot.nodes[to.node].name.clone(),
        };
        if let Some((at, home)) = self.moves.get(&p) {
            let at = *at;
            if same_place(&self.snapshot.pods[p], home, to) {
                self.moves.remove(&p);
                self.withdrawn_at.push(at);
                if let Some(i) = self.evicted.iter().rposition(|&j| j == job) {
                    self.evicted.remove(i);
                }
                return;
            }
            let at = self.retell(at, reason);
            self.moves.get_mut(&p).expect("a pod moved before").0 = at;
            return;
        }
        self.moves.insert(p, (self.decisions.len(), from.clone()));
        self.decisions.push(Decision::Evict {
            pod: self.snapshot.pods[p].key(),
            node: self.snapshot.nodes[from.node].name.clone(),
            reason,
        });
        self.evicted.push(job);
    }

    /// Gives the Evict at `at` in the decisions, a moved pod's, a new reason: a later attempt
    /// has taken the pod again. The Evict moves to the end, with the decisions of the attempt
    /// that takes the pod, so that the decisions stay in the order they were made (as a moved
    /// placement's Nominate does, [`Self::replace_placement`]). Returns where it now is.
    fn retell(&mut self, at: usize, why: EvictReason) -> usize {
        let Decision::Evict { pod, node, .. } = &self.decisions[at] else {
            unreachable!("a moved pod's decision is its Evict");
        };
        let evict = Decision::Evict {
            pod: pod.clone(),
            node: node.clone(),
            reason: why,
        };
        self.withdrawn_at.push(at);
        self.decisions.push(evict);
        self.decisions.len() - 1
    }

    /// Takes back the placement a pod was given in this cycle, for a later action's preemptor
    /// (`why`): its Bind or Nominate leaves the decisions, no eviction is issued (nothing was
    /// bound), and its job waits, saying why. KAI evicts such a pod (`framework/statement.go:
    /// Evict` on an `Allocated` or `Pipelined` task), after allocate has sent its binding.
    fn withdraw(&mut self, p: usize, job: usize, why: &EvictReason) {
        self.drop_placement(p);
        self.nominate_short_binds(job);
        // Pending again: a later placement of it in this cycle is the eviction actions'.
        self.unpipelined[p] = false;
        self.bound_now[p] = false;
        if !self.withdrawn.iter().any(|(j, _)| *j == job) {
            self.withdrawn.push((
                job,
                Reason::Withdrawn {
                    reason: why.clone(),
                },
            ));
        }
        if self.started[job] && self.active_count(job) == 0 {
            self.started[job] = false;
        }
    }

    /// Moves a pod placed in this cycle to node `to`: its placement there replaces the one it
    /// had, as a nomination (it is placed as the eviction actions place). The job's other pods
    /// bound in this cycle are nominated where they are instead, so that a gang never starts
    /// part bound and part waiting (KAI's allocate pipelines a whole job once one of its pods
    /// is pipelined, `allocate.go: ConvertAllAllocatedToPipelined`); the job has not started.
    pub(crate) fn replace_placement(&mut self, p: usize, to: usize) {
        self.drop_placement(p);
        // Nominated now, as the eviction actions place: no longer allocate's bind.
        self.bound_now[p] = false;
        self.placed_at[p] = Some(self.decisions.len() as u32);
        self.decisions.push(Decision::Nominate {
            pod: self.snapshot.pods[p].key(),
            node: self.snapshot.nodes[to].name.clone(),
        });
        let job = self.running_pods.job_of(p);
        self.nominate_binds(job);
    }

    /// Turns the Binds a job was given in this cycle into Nominates: the job has not started.
    fn nominate_binds(&mut self, job: usize) {
        for &q in &self.jobs[job].pods {
            let Some(at) = self.placed_at[q] else {
                continue;
            };
            let decision = &mut self.decisions[at as usize];
            if let Decision::Bind { pod, node } = decision {
                *decision = Decision::Nominate {
                    pod: std::mem::take(pod),
                    node: std::mem::take(node),
                };
            }
        }
        self.started[job] = false;
    }

    /// After a pod placed in this cycle is taken back: where a job that ran nothing before the
    /// cycle keeps pods bound in it too few for its minimum beside pods nominated in it, the
    /// binds become nominations, so that it does not start part bound and part waiting (found
    /// by `cycles_keep_the_invariants`: allocate bound two pods of a gang of minimum two,
    /// consolidation nominated its third, and reclaim took one of the bound ones back).
    fn nominate_short_binds(&mut self, job: usize) {
        let pods = &self.jobs[job].pods;
        if pods.iter().any(|&p| self.snapshot.pods[p].node.is_some()) {
            return;
        }
        let bound = BoundNow(self);
        let (binds, nominated) = pods
            .iter()
            .fold((0, false), |(b, n), &p| match bound.placed(p) {
                Some(true) => (b + 1, n),
                Some(false) => (b, true),
                None => (b, n),
            });
        if nominated && self.short_of_minimum(job, binds, &bound) {
            self.nominate_binds(job);
        }
    }

    /// Marks the Bind or Nominate a pod was given in this cycle to be left out of the result.
    fn drop_placement(&mut self, p: usize) {
        if let Some(at) = self.placed_at[p].take() {
            self.withdrawn_at.push(at as usize);
        }
    }

    /// Counts a pod allocate bound in this cycle, and an eviction attempt placed again on the
    /// very room it held, as bound there again: not pipelined (its Bind stands).
    pub(crate) fn rebind_unpipelined(&mut self, p: usize) {
        if !self.bound_now[p] || self.unpipelined[p] {
            return;
        }
        let Some(slot) = self.slots[p].clone() else {
            return;
        };
        let pod = &self.snapshot.pods[p];
        self.state.release(&slot, pod);
        self.state.take_unpipelined(&slot, pod);
        self.unpipelined[p] = true;
    }

    /// Takes a victim's pods off their nodes (and its allocation off its queue); returns the
    /// slots they held.
    fn release(&mut self, victim: &Victim) -> Vec<(usize, Slot)> {
        let freed = self.take_slots(victim);
        self.free_room(&freed);
        freed
    }

    /// [`Self::release`] but for the room: the pods leave their slots, the victim its queue's
    /// allocation; [`Self::free_room`] frees what they held.
    fn take_slots(&mut self, victim: &Victim) -> Vec<(usize, Slot)> {
        let freed = victim
            .pods
            .iter()
            .filter_map(|&p| Some((p, self.take_slot(p)?)))
            .collect();
        self.account(victim, -1);
        freed
    }

    /// Frees the room of pods [`Self::take_slots`] took off their slots.
    fn free_room(&mut self, freed: &[(usize, Slot)]) {
        for (p, slot) in freed {
            self.free_slot(*p, slot);
        }
    }

    /// Un-places a tentative gang placement.
    pub(crate) fn give_back(&mut self, slots: &[(usize, Slot)]) {
        for (p, slot) in slots.iter().rev() {
            self.state.release(slot, &self.snapshot.pods[*p]);
        }
    }

    /// Puts a released victim back where it was.
    fn restore(&mut self, victim: &Victim, freed: &[(usize, Slot)]) {
        for (p, slot) in freed {
            self.put_back(*p, slot.clone());
        }
        self.account(victim, 1);
    }

    /// Adds (1) or removes (-1) a victim's pods from its queue's allocation. Terminating pods
    /// are not in it (KAI does not count releasing pods as allocated).
    fn account(&mut self, victim: &Victim, sign: i64) {
        if victim.reason.is_none() {
            return;
        }
        if let Ok(vq) = self.jobs[victim.job].queue {
            self.used.add(
                self.policy,
                vq,
                request_of(self.snapshot, &victim.pods),
                self.jobs[victim.job].preemptible,
                sign,
            );
        }
    }

    /// Frees the room of the pods being deleted when the cycle began that still hold it, for
    /// the eviction actions: KAI's solvers place on idle and releasing room alike
    /// (`node_info.go: NonAllocatedResource`; consolidation's `utils/action.go:
    /// IsEnoughGPUsAllocatableForJob` adds releasing GPUs), so a job needing a victim's room and
    /// such a pod's is nominated onto both at once. Returns the pods and the slots they held.
    pub(crate) fn take_leaving_room(&mut self) -> Vec<(usize, Slot)> {
        let mut leaving = Vec::new();
        for p in self.releasing.clone() {
            if let Some(slot) = self.take_slot(p) {
                self.state.release(&slot, &self.snapshot.pods[p]);
                leaving.push((p, slot));
            }
        }
        leaving
    }

    /// Gives the pods of [`Self::take_leaving_room`] their room back where nothing placed
    /// since needs it.
    pub(crate) fn give_leaving_room_back(&mut self, leaving: Vec<(usize, Slot)>) {
        for (p, slot) in leaving.into_iter().rev() {
            let pod = &self.snapshot.pods[p];
            self.state.take(&slot, pod);
            if self.state.overdrawn(slot.node) == Some(false) {
                self.put_slot(p, slot);
            } else {
                self.state.release(&slot, pod);
            }
        }
    }

    /// Pipelining onto terminating pods (KAI's `allocateTaskToNode` → `pipelineTaskToNode`):
    /// when a job does not fit on idle resources, it may be placed on the room pods that are
    /// being deleted still hold, nearest nodes first; it is nominated there and binds once they
    /// are gone. Returns whether it was.
    pub(crate) fn pipeline_onto_releasing(&mut self, job: usize, leaf: usize) -> bool {
        let releasing: Vec<usize> = self
            .releasing
            .iter()
            .copied()
            .filter(|&p| self.slots[p].is_some())
            .collect();
        if releasing.is_empty() {
            return false;
        }
        let pending = self.gang_core(job);
        let mut at = 0;
        let mut next = |cx: &Self, _: &[Victim]| {
            let p = *releasing.get(at)?;
            at += 1;
            Some(Victim {
                // `usize::MAX` for another scheduler's pod: nothing looks at the job of a pod
                // being deleted.
                job: cx.running_pods.job_of(p),
                pods: vec![p],
                reason: None,
                must_move: false,
                in_sequence: false,
            })
        };
        self.release_until_fit(job, leaf, &pending, &mut next, &|_, _| true, None)
    }

    /// Whether a job is stale (KAI's `PodGroupInfo.IsStale`, success aside): some of its pods
    /// hold or held a node in this cycle, and fewer than its minimum. KAI counts them by
    /// `GetNumActiveUsedTasks`, whose statuses include `Releasing`: a pod being deleted, or
    /// evicted earlier in the cycle, still counts, so a gang is not stale while the pods it
    /// lacks are still terminating.
    fn stale(&self, job: usize) -> bool {
        // A job of one pod's minimum is never short of it: no walk over its pods.
        if self.jobs[job].gang.is_none() && self.jobs[job].min_member <= 1 {
            return false;
        }
        let used = UsedPods(self);
        let count = self.jobs[job]
            .pods
            .iter()
            .filter(|&&p| used.active(p))
            .count();
        self.short_of_minimum(job, count as u32, &used)
    }

    /// Stale-gang eviction (KAI's `stalegangeviction.go` with `PodGroupInfo.IsStale`): a gang
    /// is stale while some of its pods hold resources but fewer than its minimum
    /// ([`Self::stale`]), and none has succeeded (a gang whose pods finish is not broken). The
    /// first cycle that sees it stale marks the time (KAI's
    /// `kai.scheduler/stale-podgroup-timestamp`); once it has been stale for
    /// its grace period (the PodGroup's `stalenessGracePeriod`, or KAI's default of 60 s; a
    /// negative one means never), its running pods are evicted. A gang no longer stale loses its
    /// mark. Returns the marks that changed: `(pod group, since)`, `None` to clear.
    pub fn evict_stale_gangs(&mut self) -> Vec<(String, Option<Time>)> {
        let mut marks = Vec::new();
        for j in 0..self.jobs.len() {
            let job = &self.jobs[j];
            let stale = job.succeeded == 0 && self.stale(j);
            if !stale {
                if job.stale_since.is_some() {
                    marks.push((job.key(self.snapshot), None));
                }
                continue;
            }
            let since = job.stale_since.unwrap_or(self.now);
            if job.stale_since.is_none() {
                marks.push((job.key(self.snapshot), Some(since)));
            }
            let grace = job
                .staleness_grace
                .unwrap_or(STALE_GANG_GRACE_SECONDS as i64);
            let below_for = self.now.saturating_sub(since);
            if grace < 0 || below_for < grace as u64 {
                continue;
            }
            // Every pod it holds room with, as KAI evicts every active allocated pod of the
            // job: those moved in this cycle (`Pipelined`) too, and any placed in it.
            let running: Vec<usize> = self.running(j);
            let reason = EvictReason::StaleGang {
                running: self.active_count(j) as u32,
                min_member: job.gang.as_ref().map_or(job.min_member, |g| g.min_pods()),
                for_seconds: below_for,
            };
            if let Ok(q) = job.queue {
                self.used.add(
                    self.policy,
                    q,
                    request_of(self.snapshot, &running),
                    job.preemptible,
                    -1,
                );
            }
            for p in running {
                let Some(slot) = self.take_off(p) else {
                    continue;
                };
                if self.placed_now(p) {
                    self.withdraw(p, j, &reason);
                    continue;
                }
                // Moved in this cycle: its one Evict, from where it ran, now says why it goes
                // nowhere.
                if let Some((at, _)) = self.moves.remove(&p) {
                    self.retell(at, reason.clone());
                    continue;
                }
                self.decisions.push(Decision::Evict {
                    pod: self.snapshot.pods[p].key(),
                    node: self.snapshot.nodes[slot.node].name.clone(),
                    reason: reason.clone(),
                });
            }
        }
        marks
    }
}

/// The pods KAI counts for staleness (`pod_status.go: activeUsedStatuses`): placed, running,
/// being deleted, or bound before the cycle and evicted in it ([`Context::stale`]).
struct UsedPods<'c, 'a>(&'c Context<'a>);

impl PodState for UsedPods<'_, '_> {
    fn active(&self, pod: usize) -> bool {
        self.0.slots[pod].is_some() || self.0.snapshot.pods[pod].node.is_some()
    }

    fn pending(&self, pod: usize) -> bool {
        PodState::pending(self.0, pod)
    }
}

/// The pods bound in this cycle, for [`Context::nominate_short_binds`].
struct BoundNow<'c, 'a>(&'c Context<'a>);

impl BoundNow<'_, '_> {
    /// Whether a pod was placed in this cycle by a Bind (`Some(true)`) or a Nominate
    /// (`Some(false)`), `None` if it was not placed in it or that placement was taken back.
    fn placed(&self, pod: usize) -> Option<bool> {
        let at = self.0.placed_at[pod]? as usize;
        Some(matches!(self.0.decisions[at], Decision::Bind { .. }))
    }
}

impl PodState for BoundNow<'_, '_> {
    fn active(&self, pod: usize) -> bool {
        self.placed(pod) == Some(true)
    }

    fn pending(&self, pod: usize) -> bool {
        PodState::pending(self.0, pod)
    }
}
