//! The fair-share engine: KAI Scheduler's division of the cluster among queues, per resource,
//! level by level. One implementation, called by `explain`, `diff` and the scheduler.
//!
//! For each sibling set (the top level divides the cluster total; children divide their
//! parent's fair share): every queue first gets what it deserves, `min(quota, limit, request)`;
//! what remains is offered bucket by bucket (highest queue priority first) in rounds weighted by
//! over-quota weight (and, with time-based fairness, by past usage); whole units that rounds
//! cannot split go to the largest remembered fractions. Every number keeps why it is what it is.

pub mod usage;

use crate::model::{Bound, PerResource, Policy};
use crate::quantity::ResourceKind;

/// What the cluster has and what each queue asks for, in stored units.
#[derive(Debug, Clone, Default)]
pub struct Demand {
    /// Cluster totals; `None` where unknown (then every queue gets what it asks for).
    pub capacity: PerResource<Option<i64>>,
    /// Per queue (indexed like `Policy::queues`): what its running and pending work requests.
    /// Only leaves count; a parent's request is what its children can take.
    pub request: Vec<PerResource<i64>>,
    /// Per queue: normalised historical usage in [0, 1] (0 without time-based fairness).
    pub usage: Vec<PerResource<f64>>,
    /// How strongly past usage pulls a share down (`k`; 0 turns it off).
    pub k: f64,
}

/// Why a queue's deserved part is what it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeservedBy {
    /// Its quota.
    Quota,
    /// Its limit, below quota and request.
    Limit,
    /// Its request, below quota.
    Request,
    /// All that its sibling set had to divide, which is less than its quota.
    Divided,
}

/// What stopped a queue from getting more.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cap {
    /// It got everything it asked for.
    Request,
    /// It reached its limit.
    Limit,
    /// Its over-quota weight is 0.
    ZeroWeight,
    /// Nothing was left to divide (higher-priority buckets or bigger shares took the rest).
    Exhausted,
}

/// One queue's share of one resource, with the story of how it came about.
#[derive(Debug, Clone, PartialEq)]
pub struct Share {
    /// What its sibling set divided: the parent's fair share (or the cluster total).
    pub divided: i64,
    /// What its work asks for (a parent: what its children can take).
    pub request: i64,
    /// `min(limit, request)`.
    pub requestable: i64,
    /// The deserved part.
    pub deserved: i64,
    /// What bounded the deserved part.
    pub deserved_by: DeservedBy,
    /// What was left for over-quota division in this queue's priority bucket.
    pub bucket_available: i64,
    /// Sum of the over-quota weights of the bucket's queues that wanted more.
    pub bucket_weight: f64,
    /// Amount taken in each over-quota round.
    pub rounds: Vec<i64>,
    /// Whole units received from the leftovers.
    pub leftover: i64,
    /// Fractions of a unit offered but not handed out, summed over the rounds (orders the leftovers).
    pub fraction: f64,
    /// The fair share: deserved + rounds + leftover.
    pub fair_share: i64,
    /// Why it is not more.
    pub cap: Cap,
}

impl Share {
    /// The over-quota part (rounds and leftovers).
    pub fn over_quota(&self) -> i64 {
        self.rounds.iter().sum::<i64>() + self.leftover
    }
}

/// Every queue's share of every resource, indexed like `Policy::queues`.
#[derive(Debug, Clone, PartialEq)]
pub struct FairShares {
    /// Per queue, per resource.
    pub queues: Vec<PerResource<Share>>,
}

/// The smallest amount divided in rounds, in stored units: KAI's units (1 GPU, 1 millicore, 1 MB).
pub fn whole_unit(kind: ResourceKind) -> i64 {
    match kind {
        ResourceKind::Gpu => 1000,
        ResourceKind::Cpu => 1,
        ResourceKind::Memory => 1_000_000,
    }
}

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
    let blank = Share {
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
        cap: Cap::Request,
    };
    let mut shares: Vec<PerResource<Share>> = vec![
        PerResource {
            gpu: blank.clone(),
            cpu: blank.clone(),
            memory: blank
        };
        n
    ];
    let roots: Vec<usize> = (0..n)
        .filter(|&q| policy.queues[q].parent.is_none())
        .collect();
    for kind in ResourceKind::ALL {
        // Requests flow up: a parent asks for what its children can take.
        let mut request = vec![0i64; n];
        let mut requestable = vec![0i64; n];
        for q in (0..n).rev() {
            let queue = &policy.queues[q];
            request[q] = if queue.is_leaf() {
                demand.request.get(q).map_or(0, |r| *r.get(kind)).max(0)
            } else {
                queue
                    .children
                    .iter()
                    .map(|&c| requestable[c])
                    .fold(0i64, i64::saturating_add)
            };
            requestable[q] = cap_at(terms(policy, q, kind).limit, request[q]);
        }
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
    /// Divides `total` among one sibling set (in declaration order).
    fn divide(&self, siblings: &[usize], total: i64) -> Vec<Share> {
        let kind = self.kind;
        let unit = whole_unit(kind) as f64;
        let terms: Vec<Terms> = siblings
            .iter()
            .map(|&q| terms(self.policy, q, kind))
            .collect();
        let mut shares: Vec<Share> = siblings
            .iter()
            .zip(&terms)
            .map(|(&q, t)| {
                let requestable = self.requestable[q];
                let quota = cap_at(t.quota, total);
                let deserved = quota.min(requestable);
                let deserved_by = if deserved == requestable && requestable < self.request[q] {
                    DeservedBy::Limit
                } else if deserved == requestable {
                    DeservedBy::Request
                } else if t.quota.finite().is_some_and(|q| q <= total) {
                    DeservedBy::Quota
                } else {
                    DeservedBy::Divided
                };
                Share {
                    divided: total,
                    request: self.request[q],
                    requestable,
                    deserved,
                    deserved_by,
                    bucket_available: 0,
                    bucket_weight: 0.0,
                    rounds: Vec::new(),
                    leftover: 0,
                    fraction: 0.0,
                    fair_share: deserved,
                    cap: Cap::Request,
                }
            })
            .collect();
        // Over-subscribed quotas are tolerated: everyone keeps what they deserve, nothing is left.
        let deserved_total = shares
            .iter()
            .map(|s| s.deserved)
            .fold(0i64, i64::saturating_add);
        let mut available = total.saturating_sub(deserved_total).max(0);

        let mut priorities: Vec<i32> = siblings
            .iter()
            .map(|&q| self.policy.queues[q].priority)
            .collect();
        priorities.sort_unstable_by(|a, b| b.cmp(a));
        priorities.dedup();
        for priority in priorities {
            let bucket: Vec<usize> = (0..siblings.len())
                .filter(|&i| self.policy.queues[siblings[i]].priority == priority)
                .collect();
            let wanting: Vec<usize> = bucket
                .iter()
                .copied()
                .filter(|&i| terms[i].weight > 0.0 && shares[i].fair_share < shares[i].requestable)
                .collect();
            let bucket_weight: f64 = wanting.iter().map(|&i| terms[i].weight).sum();
            for &i in &bucket {
                shares[i].bucket_available = available;
                shares[i].bucket_weight = bucket_weight;
            }
            // Rounds: offer C·P/ΣP; a queue whose remaining request fits takes it, others take whole units.
            loop {
                let active: Vec<usize> = wanting
                    .iter()
                    .copied()
                    .filter(|&i| shares[i].fair_share < shares[i].requestable)
                    .collect();
                if active.is_empty() || available == 0 {
                    break;
                }
                let weights: f64 = active.iter().map(|&i| terms[i].weight).sum();
                let pull: Vec<f64> = active
                    .iter()
                    .map(|&i| {
                        let w = terms[i].weight / weights;
                        let used = self
                            .demand
                            .usage
                            .get(siblings[i])
                            .map_or(0.0, |u| *u.get(kind));
                        (w + self.demand.k * (w - used)).max(0.0)
                    })
                    .collect();
                let pull_total: f64 = pull.iter().sum();
                if pull_total <= 0.0 {
                    break;
                }
                let offered_from = available as f64;
                let mut progressed = false;
                for (&i, p) in active.iter().zip(&pull) {
                    let offer = offered_from * p / pull_total;
                    let want = shares[i].requestable - shares[i].fair_share;
                    let take = if (want as f64) <= offer {
                        want.min(available)
                    } else {
                        // What a round could not hand out in whole units is owed, round after
                        // round; the leftovers settle the largest debts first.
                        let whole = (offer / unit).floor();
                        shares[i].fraction += offer / unit - whole;
                        ((whole * unit) as i64).min(available)
                    };
                    if take > 0 {
                        shares[i].fair_share += take;
                        shares[i].rounds.push(take);
                        available -= take;
                        progressed = true;
                    }
                }
                if !progressed {
                    break;
                }
            }
            // Leftovers: whole units, one at a time, largest fraction first, then declaration order.
            let mut order: Vec<usize> = wanting.clone();
            order.sort_by(|&a, &b| {
                shares[b]
                    .fraction
                    .total_cmp(&shares[a].fraction)
                    .then(a.cmp(&b))
                    .then_with(|| {
                        self.policy.queues[siblings[a]]
                            .name
                            .cmp(&self.policy.queues[siblings[b]].name)
                    })
            });
            loop {
                let mut progressed = false;
                for &i in &order {
                    let want = shares[i].requestable - shares[i].fair_share;
                    let give = want.min(whole_unit(kind)).min(available);
                    if give > 0 && (give == want || give == whole_unit(kind)) {
                        shares[i].fair_share += give;
                        shares[i].leftover += give;
                        available -= give;
                        progressed = true;
                    }
                }
                if !progressed || available == 0 {
                    break;
                }
            }
        }
        for (share, t) in shares.iter_mut().zip(&terms) {
            share.cap = if share.fair_share >= share.requestable {
                if share.requestable < share.request {
                    Cap::Limit
                } else {
                    Cap::Request
                }
            } else if t.weight == 0.0 {
                Cap::ZeroWeight
            } else {
                Cap::Exhausted
            };
        }
        shares
    }
}

#[cfg(test)]
mod tests;
