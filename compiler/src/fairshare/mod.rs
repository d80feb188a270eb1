//! The fair-share engine: KAI Scheduler's division of the cluster among queues, per resource,
//! level by level. One implementation, called by `explain`, `diff` and the scheduler.
//!
//! It follows KAI's `pkg/scheduler/plugins/proportion/resource_division/resource_division.go`
//! (`setResourceShare` and the functions it calls) for each sibling set: the top level divides
//! the cluster total; children divide their parent's fair share. Every queue first gets what it
//! deserves, `min(quota, limit, request)`, where only an unlimited quota stands for the whole
//! level; what remains is offered in rounds weighted by over-quota weight (and, with time-based
//! fairness, by past usage), every priority bucket's rounds before any leftovers; then each
//! queue still owed a remainder gets at most one whole unit, largest remainder first. Every
//! number keeps why it is what it is. `docs/fair-share.md` maps each rule to KAI's code.

pub mod usage;

use crate::model::{Bound, PerResource, Policy};
use crate::quantity::ResourceKind;

/// What the cluster has and what each queue asks for, in stored units.
#[derive(Debug, Clone, Default)]
pub struct Demand {
    /// Cluster totals; `None` where unknown (then the total is what the top-level queues can take).
    pub capacity: PerResource<Option<i64>>,
    /// Per queue (indexed like `Policy::queues`): what its own running and pending work requests.
    /// A parent's request is this plus everything its descendants request (as KAI counts a
    /// task for its queue and every ancestor).
    pub request: Vec<PerResource<i64>>,
    /// Per queue: normalised historical usage in [0, 1] (0 without time-based fairness).
    pub usage: Vec<PerResource<f64>>,
    /// How strongly past usage pulls a share down (`k`; 0 turns it off).
    pub k: f64,
}

/// Why a queue's deserved part is what it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeservedBy {
    /// Its quota (which may exceed what the level divides: KAI keeps a finite quota in full).
    Quota,
    /// Its limit, below quota and request.
    Limit,
    /// Its request, below quota.
    Request,
    /// Its quota is unlimited (or the resource is not governed), so it deserved the whole level,
    /// which is less than it asks for.
    Divided,
}

/// What stopped a queue from getting more.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cap {
    /// It got everything it asked for (with KAI's leftover rule, possibly a little more).
    Request,
    /// It reached its limit.
    Limit,
    /// Its over-quota weight is 0.
    ZeroWeight,
    /// Nothing was left to divide (higher-priority buckets or bigger shares took the rest).
    Exhausted,
    /// `Share::undivided` stayed undivided because no queue that wants more pulls any of it
    /// (every pull `P` is 0 from past usage): KAI's rounds stop and nobody gets it.
    Stopped,
}

/// One queue's share of one resource, with the story of how it came about.
#[derive(Debug, Clone, PartialEq)]
pub struct Share {
    /// What its sibling set divided: the parent's fair share (or the cluster total).
    pub divided: i64,
    /// What its work asks for (a parent: everything its descendants ask for).
    pub request: i64,
    /// `min(limit, request)`.
    pub requestable: i64,
    /// The deserved part.
    pub deserved: i64,
    /// What bounded the deserved part.
    pub deserved_by: DeservedBy,
    /// What was left for over-quota division when this queue's priority bucket began its rounds.
    pub bucket_available: i64,
    /// Sum of the over-quota weights of the bucket's queues that wanted more.
    pub bucket_weight: f64,
    /// Amount taken in each over-quota round.
    pub rounds: Vec<i64>,
    /// What the leftover pass gave it: at most one whole unit (less when less was left).
    pub leftover: i64,
    /// The part of a unit its last round offered but could not hand out, in whole units
    /// (orders the leftover pass); 0 when it was satisfied or never offered.
    pub fraction: f64,
    /// The fair share: deserved + rounds + leftover.
    pub fair_share: i64,
    /// What its sibling set left undivided at the end.
    pub undivided: i64,
    /// Why it is not more.
    pub cap: Cap,
}

impl Share {
    /// The over-quota part (rounds and leftovers).
    pub fn over_quota(&self) -> i64 {
        self.rounds.iter().sum::<i64>() + self.leftover
    }

    fn blank() -> Share {
        Share {
            divided: 0,
            request: 0,
            requestable: 0,
            deserved: 0,
            deserved_by: DeservedBy::Quota,
            bucket_available: 0,
            bucket_weight: 0.0,
            rounds: Vec::new(),
            leftover: 0,
            fraction: 0.0,
            fair_share: 0,
            undivided: 0,
            cap: Cap::Request,
        }
    }
}

/// Every queue's share of every resource, indexed like `Policy::queues`.
#[derive(Debug, Clone, PartialEq)]
pub struct FairShares {
    /// Per queue, per resource.
    pub queues: Vec<PerResource<Share>>,
}

/// The smallest amount divided in rounds, in stored units: KAI's units (1 GPU device,
/// 1 millicore, 1 byte).
pub fn whole_unit(kind: ResourceKind) -> i64 {
    match kind {
        ResourceKind::Gpu => 1000,
        ResourceKind::Cpu | ResourceKind::Memory => 1,
    }
}

/// How far from a whole number (in units) a float result may be and still count as it: KAI's
/// float sums can land a last bit either side of an exact division, ours must not flip a floor.
const EPSILON: f64 = 1e-9;

/// A queue's terms for one resource; a resource it does not govern is unlimited both ways
/// (as KAI reads `quota: -1, limit: -1`) with weight 1.
#[derive(Debug, Clone, Copy)]
struct Terms {
    quota: Bound,
    limit: Bound,
    weight: f64,
}

fn terms(policy: &Policy, q: usize, kind: ResourceKind) -> Terms {
    match policy.queues[q].resources.get(kind) {
        Some(r) => Terms {
            quota: r.quota,
            limit: r.limit,
            weight: r.weight,
        },
        None => Terms {
            quota: Bound::Unlimited,
            limit: Bound::Unlimited,
            weight: 1.0,
        },
    }
}

fn cap_at(b: Bound, v: i64) -> i64 {
    match b {
        Bound::Finite(x) => x.min(v),
        Bound::Unlimited => v,
    }
}

/// Computes every queue's fair share of every resource.
pub fn compute(policy: &Policy, demand: &Demand) -> FairShares {
    let n = policy.queues.len();
    let mut shares: Vec<PerResource<Share>> = vec![
        PerResource {
            gpu: Share::blank(),
            cpu: Share::blank(),
            memory: Share::blank()
        };
        n
    ];
    let roots: Vec<usize> = (0..n)
        .filter(|&q| policy.queues[q].parent.is_none())
        .collect();
    for kind in ResourceKind::ALL {
        // Requests flow up unchanged: KAI's `updateQueuesResourceUsageFor{Allocated,Pending}Job`
        // add each task's request to its queue and every ancestor, whatever the limits below.
        // Children are declared after their parent, so a reverse walk sees them first.
        let mut request = vec![0i64; n];
        for q in (0..n).rev() {
            let own = demand.request.get(q).map_or(0, |r| *r.get(kind)).max(0);
            request[q] = policy.queues[q]
                .children
                .iter()
                .map(|&c| request[c])
                .fold(own, i64::saturating_add);
        }
        let requestable: Vec<i64> = (0..n)
            .map(|q| cap_at(terms(policy, q, kind).limit, request[q]))
            .collect();
        let total = demand.capacity.get(kind).unwrap_or_else(|| {
            roots
                .iter()
                .map(|&r| requestable[r])
                .fold(0, i64::saturating_add)
        });
        let ctx = Context {
            policy,
            demand,
            kind,
            request: &request,
            requestable: &requestable,
        };
        let mut stack = vec![(roots.clone(), total)];
        while let Some((siblings, divided)) = stack.pop() {
            let result = ctx.divide(&siblings, divided);
            for (q, share) in siblings.iter().zip(result) {
                let children = &policy.queues[*q].children;
                if !children.is_empty() {
                    stack.push((children.clone(), share.fair_share));
                }
                *shares[*q].get_mut(kind) = share;
            }
        }
    }
    FairShares { queues: shares }
}

struct Context<'a> {
    policy: &'a Policy,
    demand: &'a Demand,
    kind: ResourceKind,
    request: &'a [i64],
    requestable: &'a [i64],
}

impl Context<'_> {
    /// Divides `total` among one sibling set (in declaration order): KAI's `setResourceShare`.
    fn divide(&self, siblings: &[usize], total: i64) -> Vec<Share> {
        let terms: Vec<Terms> = siblings
            .iter()
            .map(|&q| terms(self.policy, q, self.kind))
            .collect();
        let mut shares: Vec<Share> = siblings
            .iter()
            .zip(&terms)
            .map(|(&q, t)| self.deserved(q, t, total))
            .collect();
        // `setDeservedResource`: over-subscribed quotas are kept; nothing is left over then.
        let deserved_total = shares
            .iter()
            .map(|s| s.deserved)
            .fold(0i64, i64::saturating_add);
        let mut available = total.saturating_sub(deserved_total).max(0);

        // `divideOverQuotaResource`: every bucket's rounds, highest priority first, each passing
        // on what it could not split; only then the leftover pass, bucket by bucket.
        let mut priorities: Vec<i32> = siblings
            .iter()
            .map(|&q| self.policy.queues[q].priority)
            .collect();
        priorities.sort_unstable_by(|a, b| b.cmp(a));
        priorities.dedup();
        let buckets: Vec<Vec<usize>> = priorities
            .iter()
            .map(|&p| {
                (0..siblings.len())
                    .filter(|&i| self.policy.queues[siblings[i]].priority == p)
                    .collect()
            })
            .collect();
        if available > 0 {
            for bucket in &buckets {
                available = self.rounds(siblings, &terms, bucket, &mut shares, available);
            }
            for bucket in &buckets {
                if available <= 0 {
                    break;
                }
                available = self.leftovers(siblings, bucket, &mut shares, available);
            }
        }

        for (share, t) in shares.iter_mut().zip(&terms) {
            share.undivided = available;
            share.cap = if share.fair_share >= share.requestable {
                if share.requestable < share.request {
                    Cap::Limit
                } else {
                    Cap::Request
                }
            } else if t.weight == 0.0 {
                Cap::ZeroWeight
            } else if available > 0 {
                Cap::Stopped
            } else {
                Cap::Exhausted
            };
        }
        shares
    }

    /// KAI's `setDeservedResource` for one queue: `min(quota, requestable)`, where only an
    /// unlimited quota is replaced by the level's total.
    fn deserved(&self, q: usize, t: &Terms, total: i64) -> Share {
        let request = self.request[q];
        let requestable = self.requestable[q];
        let quota = match t.quota {
            Bound::Finite(x) => x,
            Bound::Unlimited => total,
        };
        let deserved = quota.min(requestable);
        let deserved_by = if deserved == requestable && requestable < request {
            DeservedBy::Limit
        } else if deserved == requestable {
            DeservedBy::Request
        } else if t.quota.finite().is_some() {
            DeservedBy::Quota
        } else {
            DeservedBy::Divided
        };
        Share {
            divided: total,
            request,
            requestable,
            deserved,
            deserved_by,
            fair_share: deserved,
            ..Share::blank()
        }
    }

    /// KAI's `divideUpToFairShare` for one priority bucket; returns what is left.
    ///
    /// Each round offers every unsatisfied queue `available · P / ΣP` of what was there when the
    /// round began. A queue whose remaining request fits takes it exactly; any other takes the
    /// whole units of its offer and remembers the rest (replacing what it remembered before).
    /// Another round runs only when some queue was satisfied with less than its offer.
    fn rounds(
        &self,
        siblings: &[usize],
        terms: &[Terms],
        bucket: &[usize],
        shares: &mut [Share],
        mut available: i64,
    ) -> i64 {
        let unit = whole_unit(self.kind) as f64;
        let wanting = |shares: &[Share], i: usize| shares[i].fair_share < shares[i].requestable;
        let bucket_weight: f64 = bucket
            .iter()
            .filter(|&&i| wanting(shares, i))
            .map(|&i| terms[i].weight)
            .sum();
        for &i in bucket {
            shares[i].bucket_available = available;
            shares[i].bucket_weight = bucket_weight;
        }
        let mut active: Vec<usize> = bucket
            .iter()
            .copied()
            .filter(|&i| wanting(shares, i))
            .collect();
        while available > 0 {
            active.retain(|&i| wanting(shares, i));
            let pull = self.pull(siblings, terms, &active);
            let pull_total: f64 = pull.iter().sum();
            if active.is_empty() || pull_total <= 0.0 {
                break;
            }
            let round_amount = available as f64 / unit;
            let mut another_round = false;
            for (&i, p) in active.iter().zip(&pull) {
                if terms[i].weight == 0.0 || available == 0 {
                    continue;
                }
                let offer = round_amount * p / pull_total;
                let want = shares[i].requestable - shares[i].fair_share;
                let want_units = want as f64 / unit;
                let take = if want_units <= offer + EPSILON {
                    shares[i].fraction = 0.0;
                    want
                } else {
                    let whole = (offer + EPSILON).floor();
                    if offer - whole > EPSILON {
                        shares[i].fraction = offer - whole;
                    }
                    (whole * unit) as i64
                };
                let take = take.min(available);
                if take == 0 {
                    continue;
                }
                shares[i].fair_share += take;
                shares[i].rounds.push(take);
                available -= take;
                another_round |= want_units < offer - EPSILON;
            }
            if !another_round {
                break;
            }
        }
        available
    }

    /// KAI's `calcShareWeights`: each unsatisfied queue's pull `max(0, w' + k·(w' − U))`, with
    /// `w'` its weight over the bucket's unsatisfied weights and `U` its past usage. With
    /// `k = 0` the pull is the weight itself (the same ratio, without float rounding).
    fn pull(&self, siblings: &[usize], terms: &[Terms], active: &[usize]) -> Vec<f64> {
        let k = self.demand.k;
        if k == 0.0 {
            return active.iter().map(|&i| terms[i].weight).collect();
        }
        let weights: f64 = active.iter().map(|&i| terms[i].weight).sum();
        if weights <= 0.0 {
            return vec![0.0; active.len()];
        }
        active
            .iter()
            .map(|&i| {
                let w = terms[i].weight / weights;
                let used = self
                    .demand
                    .usage
                    .get(siblings[i])
                    .map_or(0.0, |u| *u.get(self.kind));
                (w + k * (w - used)).max(0.0)
            })
            .collect()
    }

    /// KAI's `divideRemainingResource` for one bucket: every queue still remembering a
    /// remainder gets `min(1 unit, what is left)` once, largest remainder first, then the queue
    /// declared first (KAI: created first), then by name (KAI: UID). It may end above its
    /// request: KAI does not check.
    fn leftovers(
        &self,
        siblings: &[usize],
        bucket: &[usize],
        shares: &mut [Share],
        mut available: i64,
    ) -> i64 {
        let mut owed: Vec<usize> = bucket
            .iter()
            .copied()
            .filter(|&i| shares[i].fraction > 0.0)
            .collect();
        // Remainders equal but for float noise (0.5 from an offer of 0.5 and from one of 1.5)
        // tie, and the earlier queue goes first, as the exact arithmetic would have it.
        let key = |i: usize| (shares[i].fraction / EPSILON).round() as i64;
        owed.sort_by(|&a, &b| {
            key(b).cmp(&key(a)).then(a.cmp(&b)).then_with(|| {
                self.policy.queues[siblings[a]]
                    .name
                    .cmp(&self.policy.queues[siblings[b]].name)
            })
        });
        for i in owed {
            if available <= 0 {
                break;
            }
            let give = whole_unit(self.kind).min(available);
            shares[i].fair_share += give;
            shares[i].leftover += give;
            available -= give;
        }
        available
    }
}

#[cfg(test)]
mod tests;
