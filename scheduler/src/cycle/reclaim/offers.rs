//! The victim order's units for a set of candidates, merged from what each subtree offers.
//!
//! Which unit a subtree offers next, and the subtree's key in its parent's ranking, depend only
//! on the subtree: its candidate leaves with their min-runtimes, those leaves' jobs, and the
//! allocation of its queues (`Context::last_victim_queue` ranks siblings on what each one's
//! best leaf frees; a leaf's heads follow from its own jobs). So the units a set of candidates
//! is offered are a merge, level by level, of what each subtree offers on its own.
//!
//! A subtree whose every pool leaf is a candidate, all under one min-runtime, offers the same
//! units to every attempt whose candidates hold it whole. The reclaimers of a busy cluster
//! differ mostly in which whole departments or teams they may take from (172 sets of
//! candidates in a cycle of the steady bench at 4,000 nodes), so each subtree's offers are
//! worked out once and kept, until a commit changes the allocation in the subtree.

use std::cmp::Ordering;

use rustc_hash::FxHashMap;

use super::{Candidates, Context, MAX_VICTIMS, Pool, Sequence};
use crate::cycle::jobs::request_of;
use crate::cycle::kai::{OrderKey, Quantities, add, compare_keys, quantities};

/// One unit a subtree offers: the unit, what its leaf's victims free with it (what the keys of
/// the queues above subtract: `last_victim_queue`'s `found`), and the subtree's key then.
#[derive(Debug, Clone)]
struct Step {
    job: usize,
    pods: Vec<usize>,
    frees: Quantities,
    key: OrderKey,
}

/// What a subtree offers, as far as it has been worked out.
#[derive(Debug, Clone, Default)]
pub(super) struct Offers {
    steps: Vec<Step>,
    /// Whether it offers nothing after `steps`.
    ended: bool,
    /// A leaf: how many of its jobs come before its next head (as `Heads::passed`).
    passed: usize,
    /// A leaf: what its units so far free.
    released: Quantities,
    /// A parent: what it merges its children's offers from.
    merge: Merge,
}

/// Where a merge of children's offers stands: per child, how many units it has given, and
/// its next unit's key once looked up (`Some(None)`: it offers no more).
#[derive(Debug, Clone, Default)]
struct Merge {
    taken: Vec<usize>,
    next: Vec<Option<Option<OrderKey>>>,
}

/// Offers of whole subtrees, kept between attempts: by (min-runtime, whether min-runtimes are
/// honoured), indexed by queue.
pub(super) type Kept = FxHashMap<(Option<u64>, bool), Vec<Offers>>;

/// Whether a subtree's pool leaves are all candidates, under one min-runtime.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Whole {
    /// No pool leaf in it.
    Empty,
    /// All candidates, under this min-runtime.
    Under(Option<u64>),
    /// Some pool leaf is no candidate, or two have different min-runtimes.
    Not,
}

/// Where the offers of each subtree are: kept, for whole ones, or worked out for one attempt.
struct Arenas<'k> {
    whole: Vec<Whole>,
    kept: &'k mut Kept,
    /// Subtrees not whole: the few above the reclaimer's side, or above a side it may not
    /// take from.
    local: FxHashMap<usize, Offers>,
    honour_min_runtime: bool,
}

impl Arenas<'_> {
    fn of(&mut self, queue: usize) -> &mut Offers {
        match self.whole[queue] {
            Whole::Under(min) => {
                let queues = self.whole.len();
                &mut self
                    .kept
                    .entry((min, self.honour_min_runtime))
                    .or_insert_with(|| vec![Offers::default(); queues])[queue]
            }
            Whole::Empty | Whole::Not => self.local.entry(queue).or_default(),
        }
    }
}

/// Forgets the kept offers of every subtree with a `changed` queue in it: each such queue's,
/// and those of the queues above it.
pub(super) fn forget(
    kept: &mut Kept,
    policy: &kai_policy_compiler::model::Policy,
    changed: impl Fn(usize) -> bool,
) {
    for offers in kept.values_mut() {
        for q in (0..offers.len()).filter(|&q| changed(q)) {
            let mut at = Some(q);
            while let Some(a) = at {
                offers[a] = Offers::default();
                at = policy.queues[a].parent;
            }
        }
    }
}

impl Context<'_> {
    /// The victim units the order offers `candidates` (see `Context::offered_units_afresh`,
    /// which works them out unit by unit, and which debug builds check this against), with
    /// what whole subtrees offer taken from `kept`, or worked out and kept there.
    pub(super) fn offered_units(
        &self,
        roots: &[usize],
        candidates: &Candidates,
        pool: &Pool,
        kept: &mut Kept,
    ) -> Sequence {
        let mut arenas = Arenas {
            whole: self.whole_subtrees(candidates, pool),
            kept,
            local: FxHashMap::default(),
            honour_min_runtime: candidates.honour_min_runtime,
        };
        let mut sequence = Sequence::default();
        let mut merge = Merge::default();
        while sequence.units.len() < MAX_VICTIMS {
            let Some(step) = self.merged(roots, &mut merge, candidates, &mut arenas) else {
                sequence.ended = true;
                break;
            };
            sequence.units.push((step.0, step.1));
        }
        sequence
    }

    /// Per queue, whether its subtree's pool leaves are all candidates under one min-runtime.
    fn whole_subtrees(&self, candidates: &Candidates, pool: &Pool) -> Vec<Whole> {
        let mut whole = vec![Whole::Empty; self.policy.queues.len()];
        for &leaf in pool.keys() {
            let this = match candidates.by_leaf[leaf] {
                Some((_, min)) => Whole::Under(min),
                None => Whole::Not,
            };
            let mut at = Some(leaf);
            while let Some(q) = at {
                whole[q] = match whole[q] {
                    Whole::Empty => this,
                    w if w == this => w,
                    _ => Whole::Not,
                };
                at = self.policy.queues[q].parent;
            }
        }
        whole
    }

    /// The next unit of `children`'s offers merged: from the child whose next unit comes last
    /// in the reversed queue order (the first of equals), with its leaf's `frees`.
    fn merged(
        &self,
        children: &[usize],
        merge: &mut Merge,
        candidates: &Candidates,
        arenas: &mut Arenas<'_>,
    ) -> Option<(usize, Vec<usize>, Quantities)> {
        merge.taken.resize(children.len(), 0);
        merge.next.resize(children.len(), None);
        let mut last: Option<(usize, OrderKey)> = None;
        for (k, &c) in children.iter().enumerate() {
            let next = *merge.next[k].get_or_insert_with(|| {
                let i = merge.taken[k];
                (candidates.in_subtree[c] && self.offer(c, i, candidates, arenas))
                    .then(|| arenas.of(c).steps[i].key)
            });
            let Some(key) = next else { continue };
            if last
                .as_ref()
                .is_none_or(|(_, l)| compare_keys(&key, l) == Ordering::Greater)
            {
                last = Some((k, key));
            }
        }
        let (k, _) = last?;
        let step = &arenas.of(children[k]).steps[merge.taken[k]];
        let unit = (step.job, step.pods.clone(), step.frees);
        merge.taken[k] += 1;
        merge.next[k] = None;
        Some(unit)
    }

    /// Works out what `queue`'s subtree offers up to its unit `i`; whether it offers one.
    fn offer(
        &self,
        queue: usize,
        i: usize,
        candidates: &Candidates,
        arenas: &mut Arenas<'_>,
    ) -> bool {
        loop {
            let offers = arenas.of(queue);
            if offers.steps.len() > i {
                return true;
            }
            if offers.ended {
                return false;
            }
            let step = if self.policy.queues[queue].is_leaf() {
                self.next_of_leaf(queue, candidates, offers)
            } else {
                let children = &self.policy.queues[queue].children;
                let mut merge = std::mem::take(&mut offers.merge);
                let step = self.merged(children, &mut merge, candidates, arenas).map(
                    |(job, pods, frees)| Step {
                        job,
                        pods,
                        frees,
                        key: self.victim_key(queue, frees, self.used),
                    },
                );
                arenas.of(queue).merge = merge;
                step
            };
            let offers = arenas.of(queue);
            match step {
                Some(step) => offers.steps.push(step),
                None => offers.ended = true,
            }
        }
    }

    /// A candidate leaf's next unit, its head (as `last_victim_queue` finds it).
    fn next_of_leaf(
        &self,
        leaf: usize,
        candidates: &Candidates,
        offers: &mut Offers,
    ) -> Option<Step> {
        let (jobs, min) = candidates.by_leaf[leaf]?;
        let (job, pods) =
            self.leaf_head(jobs, min, candidates.honour_min_runtime, &mut offers.passed)?;
        offers.passed += 1;
        let frees = add(
            &quantities(&request_of(self.snapshot, &pods)),
            &offers.released,
        );
        offers.released = frees;
        Some(Step {
            job,
            pods,
            frees,
            key: self.victim_key(leaf, frees, self.used),
        })
    }
}
