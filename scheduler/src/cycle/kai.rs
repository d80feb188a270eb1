//! KAI's queue arithmetic, in one place: the numbers KAI's proportion plugin keeps per queue and
//! resource (deserved, fair share, max allowed, allocated) and the comparisons built on them —
//! the queue order (`queue_order/queue_order.go: GetQueueOrderResult`) and the reclaim checks
//! (`reclaimable/reclaimable.go`, `reclaimable/filter_victims.go`,
//! `reclaimable/strategies/strategies.go`). Amounts are in KAI's units (GPU devices, CPU
//! millicores, memory bytes) as `f64`, with KAI's `-1` for unlimited, so that every comparison
//! reads like KAI's and gives KAI's answer.

use std::cmp::Ordering;

use kai_policy_compiler::model::{Bound, PerResource};
use kai_policy_compiler::quantity::ResourceKind;

use super::QueueUse;
use super::allocate::Context;
use crate::cluster::Amounts;

/// KAI's `UnlimitedResourceQuantity`.
pub(crate) const UNLIMITED: f64 = -1.0;

/// KAI's `noFairShareDrfMultiplier`: a queue holding a resource it has no allocatable share of
/// ranks as if it held a thousand times that amount.
const NO_FAIR_SHARE_DRF_MULTIPLIER: f64 = 1000.0;

/// Amounts per resource in KAI's units.
pub(crate) type Quantities = PerResource<f64>;

/// One queue's numbers for one resource (KAI's `ResourceShare`).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Share {
    /// The quota (`UNLIMITED` for `#inf` or a resource the queue does not govern).
    pub deserved: f64,
    /// The fair share computed this cycle.
    pub fair_share: f64,
    /// The limit (`UNLIMITED` when there is none).
    pub max_allowed: f64,
    /// What the queue's running work holds.
    pub allocated: f64,
    /// What its non-preemptible running work holds.
    pub allocated_non_preemptible: f64,
}

impl Share {
    /// KAI's `GetAllocatableShare`: what the queue may hold before it counts as saturated.
    pub fn allocatable(&self) -> f64 {
        if self.deserved == UNLIMITED {
            return self.max_allowed;
        }
        let allocatable = self.deserved.max(self.fair_share);
        if self.max_allowed == UNLIMITED {
            allocatable
        } else {
            self.max_allowed.min(allocatable)
        }
    }
}

/// One queue's numbers for every resource (KAI's `QueueAttributes`).
pub(crate) type QueueShares = PerResource<Share>;

/// Converts stored amounts (GPU thousandths) into KAI's units.
pub(crate) fn quantities(amounts: &Amounts) -> Quantities {
    PerResource {
        gpu: amounts.gpu as f64 / 1000.0,
        cpu: amounts.cpu as f64,
        memory: amounts.memory as f64,
    }
}

/// KAI's `compareQuantities`: unlimited is above every finite amount.
fn compare(quantity: f64, other: f64) -> Ordering {
    match (quantity == UNLIMITED, other == UNLIMITED) {
        (true, true) => Ordering::Equal,
        (true, false) => Ordering::Greater,
        (false, true) => Ordering::Less,
        (false, false) => quantity.total_cmp(&other),
    }
}

/// KAI's `ResourceQuantities.LessEqual`: at most `other` in every resource.
pub(crate) fn less_equal(a: &Quantities, other: &Quantities) -> bool {
    ResourceKind::ALL
        .into_iter()
        .all(|k| compare(*a.get(k), *other.get(k)) != Ordering::Greater)
}

/// `a + b`, resource by resource.
pub(crate) fn add(a: &Quantities, b: &Quantities) -> Quantities {
    PerResource {
        gpu: a.gpu + b.gpu,
        cpu: a.cpu + b.cpu,
        memory: a.memory + b.memory,
    }
}

/// `f` of every resource's share.
pub(crate) fn each(q: &QueueShares, f: impl Fn(&Share) -> f64) -> Quantities {
    PerResource {
        gpu: f(&q.gpu),
        cpu: f(&q.cpu),
        memory: f(&q.memory),
    }
}

/// KAI's `GetDominantResourceShare`, with `allocated` in place of the queue's allocation.
fn dominant_share(q: &QueueShares, allocated: &Quantities, total: &Quantities) -> f64 {
    ResourceKind::ALL
        .into_iter()
        .map(|k| {
            let mut allocatable = q.get(k).allocatable();
            if allocatable == UNLIMITED {
                allocatable = *total.get(k);
            }
            let held = *allocated.get(k);
            if allocatable == 0.0 {
                held * NO_FAIR_SHARE_DRF_MULTIPLIER
            } else {
                held / allocatable
            }
        })
        .fold(0.0, f64::max)
}

/// One side of a queue comparison: the queue, the resources its best job needs to start (KAI's
/// job init resources; zero when comparing victim queues), and what the victims picked so far
/// from it would free.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Side {
    /// Queue index.
    pub queue: usize,
    /// The job's init resources.
    pub job: Quantities,
    /// Resources of the victims its dominant share with the job leaves out: for a victim
    /// queue, its best leaf's victims taken so far and its next one (KAI's
    /// `getVictimsForQueue`).
    pub victims: Quantities,
}

/// Each queue's numbers that hold for the whole cycle (quota, fair share, limit), with nothing
/// allocated: [`Context::kai_shares_with`] adds the allocation of the moment.
pub(crate) fn fixed_shares(
    policy: &kai_policy_compiler::model::Policy,
    fair: &kai_policy_compiler::fairshare::FairShares,
) -> Vec<QueueShares> {
    policy
        .queues
        .iter()
        .zip(&fair.queues)
        .map(|(q, fair)| {
            let share = |k: ResourceKind| {
                let unit = if k == ResourceKind::Gpu { 1000.0 } else { 1.0 };
                let bound = |b: Bound| b.finite().map_or(UNLIMITED, |v| v as f64 / unit);
                let (deserved, max_allowed) = q
                    .resources
                    .get(k)
                    .map_or((UNLIMITED, UNLIMITED), |r| (bound(r.quota), bound(r.limit)));
                Share {
                    deserved,
                    fair_share: fair.get(k).fair_share as f64 / unit,
                    max_allowed,
                    allocated: 0.0,
                    allocated_non_preemptible: 0.0,
                }
            };
            PerResource {
                gpu: share(ResourceKind::Gpu),
                cpu: share(ResourceKind::Cpu),
                memory: share(ResourceKind::Memory),
            }
        })
        .collect()
}

impl Context<'_> {
    /// KAI's numbers for one queue, now.
    pub(crate) fn kai_shares(&self, queue: usize) -> QueueShares {
        self.kai_shares_with(queue, self.used)
    }

    /// KAI's numbers for one queue with the allocation `used`.
    pub(crate) fn kai_shares_with(&self, queue: usize, used: &QueueUse) -> QueueShares {
        let mut q = self.fixed_shares[queue];
        let allocated = quantities(&used.all[queue]);
        let non_preemptible = quantities(&used.non_preemptible[queue]);
        for k in ResourceKind::ALL {
            let share = q.get_mut(k);
            share.allocated = *allocated.get(k);
            share.allocated_non_preemptible = *non_preemptible.get(k);
        }
        q
    }

    /// A queue and its best job's key in the queue order.
    pub(crate) fn order_key(&self, s: &Side) -> OrderKey {
        self.order_key_with(s, self.used)
    }

    /// A queue and its best job's key in the queue order, with the allocation `used`.
    pub(crate) fn order_key_with(&self, s: &Side, used: &QueueUse) -> OrderKey {
        Ranked {
            shares: self.kai_shares_with(s.queue, used),
            priority: self.policy.queues[s.queue].priority,
            created: s.queue,
            job: s.job,
            victims: s.victims,
        }
        .key(&quantities(&self.capacity))
    }
}

/// A queue as KAI's queue order sees it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Ranked {
    /// Its numbers.
    pub shares: QueueShares,
    /// Its priority.
    pub priority: i32,
    /// Its creation order (ours: declaration order).
    pub created: usize,
    /// Its best job's init resources.
    pub job: Quantities,
    /// What the victims taken from it so far would free.
    pub victims: Quantities,
}

/// A queue's place in KAI's queue order, worked out once from its [`Ranked`] numbers: what
/// [`compare_keys`] compares, criterion by criterion.
#[derive(Debug, Clone, Copy)]
pub(crate) struct OrderKey {
    /// Over its fair share (over means over in every resource).
    over: bool,
    /// Above its deserved quota with the job added.
    not_starved: bool,
    priority: i32,
    /// Would hold a resource it has no allocatable share of.
    violates: bool,
    /// Dominant share with the job, without the victims.
    share_with_job: f64,
    /// Dominant share as it holds now.
    share_now: f64,
    allocatable: Quantities,
    created: usize,
}

impl Ranked {
    /// Its key in the queue order, with `total` the cluster's resources.
    pub(crate) fn key(&self, total: &Quantities) -> OrderKey {
        let q = &self.shares;
        let held = PerResource {
            gpu: q.gpu.allocated + self.job.gpu - self.victims.gpu,
            cpu: q.cpu.allocated + self.job.cpu - self.victims.cpu,
            memory: q.memory.allocated + self.job.memory - self.victims.memory,
        };
        OrderKey {
            over: ResourceKind::ALL
                .into_iter()
                .all(|k| q.get(k).fair_share < q.get(k).allocated),
            not_starved: !less_equal(
                &add(&each(q, |r| r.allocated), &self.job),
                &each(q, |r| r.deserved),
            ),
            priority: self.priority,
            violates: ResourceKind::ALL.into_iter().any(|k| {
                let share = q.get(k);
                share.allocatable() == 0.0 && share.allocated + self.job.get(k) > 0.0
            }),
            share_with_job: dominant_share(q, &held, total),
            share_now: dominant_share(q, &each(q, |r| r.allocated), total),
            allocatable: each(q, Share::allocatable),
            created: self.created,
        }
    }
}

/// KAI's `GetQueueOrderResult` on keys worked out beforehand: `Less` when `l` goes first.
pub(crate) fn compare_keys(l: &OrderKey, r: &OrderKey) -> Ordering {
    // Not over its fair share first; then still within deserved quota with the job; then
    // higher queue priority; a queue that would hold a resource it has no allocatable share of
    // goes last; then the smaller dominant share with the job (and without the victims), then
    // without the job.
    let smaller = |a: &Quantities, b: &Quantities| !less_equal(b, a) && less_equal(a, b);
    l.over
        .cmp(&r.over)
        .then(l.not_starved.cmp(&r.not_starved))
        .then(r.priority.cmp(&l.priority))
        .then(l.violates.cmp(&r.violates))
        .then(l.share_with_job.total_cmp(&r.share_with_job))
        .then(l.share_now.total_cmp(&r.share_now))
        // Then the queue whose allocatable share is smaller in every resource.
        .then_with(|| {
            let (la, ra) = (&l.allocatable, &r.allocatable);
            (!smaller(la, ra)).cmp(&!smaller(ra, la))
        })
        // KAI's last tie-breaker is the queue's creation time; ours is declaration order.
        .then(l.created.cmp(&r.created))
}

#[cfg(test)]
#[path = "kai_tests.rs"]
mod tests;
