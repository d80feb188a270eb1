//! The order in which the actions try waiting jobs, KAI's `utils.JobsOrderByQueues`: at each
//! level of the queue tree the child whose best job comes first in the queue order, each
//! leaf's jobs in job order, ranked again as allocations change. Allocate pops every waiting
//! job from it; consolidation, reclaim and preempt each build their own afresh over the jobs
//! allocate left waiting for room, as KAI's actions do (`consolidation.go`, `reclaim.go`,
//! `preempt.go: Execute`).

use std::cmp::Ordering;
use std::collections::VecDeque;

use rustc_hash::FxHashMap;

use super::allocate::{Context, Unplaced};
use super::kai::{OrderKey, Quantities, Side, compare_keys, quantities};

/// The waiting jobs by leaf, each leaf's in job order, with what it takes to find the next one
/// ([`Context::best`]): how many jobs wait under each queue, each parent's best leaf (kept;
/// only the parents above a change are ranked again) and each job's init resources.
pub(crate) struct Order {
    queues: Vec<VecDeque<usize>>,
    waiting: Vec<usize>,
    best_leaf: Vec<Option<usize>>,
    init: Vec<Quantities>,
    roots: Vec<usize>,
}

impl Context<'_> {
    /// Runs `attempt` on each of `unplaced` in KAI's queue order, taken afresh on the
    /// allocation as it stands and re-ranked after every attempt that changed a queue's
    /// allocation; a job without a queue first, as it came. Returns what `attempt` gives back
    /// (the jobs still waiting, with their reasons) in the order `unplaced` had: the order
    /// allocate tried them, in which their pending decisions are written.
    pub(crate) fn in_queue_order(
        &mut self,
        unplaced: Vec<Unplaced>,
        mut attempt: impl FnMut(&mut Self, Unplaced) -> Option<Unplaced>,
    ) -> Vec<Unplaced> {
        let mut still: Vec<(usize, Unplaced)> = Vec::new();
        let mut entries: Vec<Option<Unplaced>> = Vec::with_capacity(unplaced.len());
        let mut at: FxHashMap<usize, usize> = FxHashMap::default();
        for (i, u) in unplaced.into_iter().enumerate() {
            if self.jobs[u.job].queue.is_err() {
                still.extend(attempt(self, u).map(|u| (i, u)));
                entries.push(None);
            } else {
                at.insert(u.job, i);
                entries.push(Some(u));
            }
        }
        let mut order = self.order_of(entries.iter().flatten().map(|u| u.job));
        while let Some(job) = self.pop_next(&mut order) {
            let i = at[&job];
            let Some(u) = entries[i].take() else { continue };
            self.used.mark();
            still.extend(attempt(self, u).map(|u| (i, u)));
            let mut changed = self.used.changed_since_mark();
            changed.extend(self.jobs[job].queue.as_ref().ok());
            self.rerank(&mut order, &changed);
        }
        still.sort_by_key(|(i, _)| *i);
        still.into_iter().map(|(_, u)| u).collect()
    }

    /// The order of `jobs` (each with a leaf queue), ready to pop.
    pub(crate) fn order_of(&self, jobs: impl Iterator<Item = usize>) -> Order {
        let n = self.policy.queues.len();
        let mut lists: Vec<Vec<usize>> = vec![Vec::new(); n];
        let mut init = vec![Quantities::default(); self.jobs.len()];
        for j in jobs {
            if let Ok(q) = self.jobs[j].queue {
                lists[q].push(j);
                init[j] = quantities(&self.init_request(j));
            }
        }
        let queues: Vec<VecDeque<usize>> = lists
            .into_iter()
            .map(|mut l| {
                l.sort_by_cached_key(|&j| self.job_order(j));
                l.into()
            })
            .collect();
        let mut waiting = vec![0usize; n];
        for (q, list) in queues.iter().enumerate() {
            let mut up = Some(q);
            while let Some(a) = up {
                waiting[a] += list.len();
                up = self.policy.queues[a].parent;
            }
        }
        let mut order = Order {
            queues,
            waiting,
            best_leaf: vec![None; n],
            init,
            roots: (0..n)
                .filter(|&q| self.policy.queues[q].parent.is_none())
                .collect(),
        };
        // A parent comes before its children in the policy's order: from the last up, each
        // parent's children are ranked before it.
        let parents: Vec<usize> = (0..n).rev().collect();
        self.rank_parents(&mut order, &parents);
        order
    }

    /// The next job, taken off its leaf. The ranks on its way up are left as they were: the
    /// caller ranks them again ([`Self::rerank`] with its leaf) once it has tried the job.
    pub(crate) fn pop_next(&self, order: &mut Order) -> Option<usize> {
        let leaf = self.best(&order.roots, order)?;
        let job = order.queues[leaf].pop_front()?;
        let mut up = Some(leaf);
        while let Some(a) = up {
            order.waiting[a] -= 1;
            up = self.policy.queues[a].parent;
        }
        Some(job)
    }

    /// Puts a job back into its leaf `leaf`, at its place in job order, with its init
    /// resources as they are now (KAI's allocate pushes a job with pods left to place).
    pub(crate) fn requeue(&self, order: &mut Order, job: usize, leaf: usize) {
        let key = self.job_order(job);
        let at = order.queues[leaf].partition_point(|&o| self.job_order(o) <= key);
        order.queues[leaf].insert(at, job);
        let mut up = Some(leaf);
        while let Some(a) = up {
            order.waiting[a] += 1;
            up = self.policy.queues[a].parent;
        }
    }

    /// Sets a job's init resources anew (after it was tried: what it asks next).
    pub(crate) fn renew_init(&self, order: &mut Order, job: usize) {
        order.init[job] = quantities(&self.init_request(job));
    }

    /// Ranks again the parents among `changed` (queues whose allocation or waiting jobs
    /// changed) and every parent above them, children first.
    pub(crate) fn rerank(&self, order: &mut Order, changed: &[usize]) {
        let mut parents: Vec<usize> = Vec::new();
        for &q in changed {
            let mut up = Some(q);
            while let Some(a) = up {
                parents.push(a);
                up = self.policy.queues[a].parent;
            }
        }
        parents.sort_unstable_by(|a, b| b.cmp(a));
        parents.dedup();
        self.rank_parents(order, &parents);
    }

    /// Each parent's best leaf among `queues` (children before parents).
    fn rank_parents(&self, order: &mut Order, queues: &[usize]) {
        for &q in queues {
            if self.policy.queues[q].is_leaf() {
                continue;
            }
            order.best_leaf[q] = self.best(&self.policy.queues[q].children, order);
        }
    }

    /// The leaf whose head job goes next among `siblings`: at each level, the child whose best
    /// job comes first in KAI's queue order.
    fn best(&self, siblings: &[usize], order: &Order) -> Option<usize> {
        let mut best: Option<(OrderKey, usize)> = None;
        for &c in siblings.iter().filter(|&&c| order.waiting[c] > 0) {
            let queue = &self.policy.queues[c];
            let leaf = if queue.is_leaf() {
                c
            } else {
                order.best_leaf[c]?
            };
            let Some(&job) = order.queues[leaf].front() else {
                continue;
            };
            let key = self.order_key(&Side {
                queue: c,
                job: order.init[job],
                victims: Quantities::default(),
            });
            if best
                .as_ref()
                .is_none_or(|(b, _)| compare_keys(&key, b) == Ordering::Less)
            {
                best = Some((key, leaf));
            }
        }
        best.map(|(_, leaf)| leaf)
    }
}
