//! Preempt, reclaim and stale-gang eviction. Victims are whole jobs (evicting part of a gang
//! breaks it), released one at a time until the pending gang fits; if it never fits, nothing is
//! evicted. A gang placed on room its victims still hold is nominated there (pipelined).

use std::cmp::Reverse;

use kai_policy_compiler::model::Bound;
use kai_policy_compiler::quantity::ResourceKind;

use super::allocate::{Context, Unplaced};
use super::jobs::request_of;
use super::placement::{Plan, place_gang};
use super::state::Slot;
use crate::cluster::Amounts;
use crate::decision::{Decision, EvictReason};

/// A victim job released tentatively: its index, why it would be evicted, and the slots it held.
type Released = (usize, EvictReason, Vec<(usize, Slot)>);

/// How long a running gang may stay below `minMember` before it is evicted whole (KAI's default).
pub const STALE_GANG_GRACE_SECONDS: u64 = 60;

impl Context<'_> {
    /// Reclaim pass: for each job still unplaced, evict from queues above their fair share.
    /// Returns the jobs it could not help.
    pub fn reclaim(&mut self, unplaced: Vec<Unplaced>) -> Vec<Unplaced> {
        self.evict_for(unplaced, |cx, job, leaf, pending| {
            let request = request_of(cx.snapshot, pending);
            let for_job = &cx.jobs[job].key;
            let by_queue = &cx.policy.queues[leaf].name;
            cx.reclaim_victims(leaf, &request)
                .into_iter()
                .map(|v| {
                    let from_queue = cx.jobs[v]
                        .queue
                        .as_ref()
                        .map_or(String::new(), |&q| cx.policy.queues[q].name.clone());
                    let reason = EvictReason::Reclaim {
                        for_job: for_job.clone(),
                        by_queue: by_queue.clone(),
                        from_queue,
                    };
                    (v, reason)
                })
                .collect()
        })
    }

    /// Preempt pass: for each job still unplaced, evict lower-priority jobs of its own queue.
    /// Returns the jobs it could not help.
    pub fn preempt(&mut self, unplaced: Vec<Unplaced>) -> Vec<Unplaced> {
        self.evict_for(unplaced, |cx, job, leaf, _| {
            let for_job = &cx.jobs[job].key;
            let priority = cx.jobs[job].priority;
            cx.preempt_victims(job, leaf)
                .into_iter()
                .map(|v| {
                    let reason = EvictReason::Preempt {
                        for_job: for_job.clone(),
                        priorities: (cx.jobs[v].priority, priority),
                    };
                    (v, reason)
                })
                .collect()
        })
    }

    /// What reclaim and preempt share: for each unplaced job with a queue, evict the victims
    /// `victims(context, job, leaf, pending pods)` names, in order, until the job fits.
    /// Returns the jobs that still do not fit.
    fn evict_for(
        &mut self,
        unplaced: Vec<Unplaced>,
        victims: impl Fn(&Self, usize, usize, &[usize]) -> Vec<(usize, EvictReason)>,
    ) -> Vec<Unplaced> {
        let mut still = Vec::new();
        for u in unplaced {
            let Ok(leaf) = self.jobs[u.job].queue else {
                continue;
            };
            let pending = self.pending(u.job);
            let victims = victims(self, u.job, leaf, &pending);
            if !self.release_until_fit(u.job, leaf, &pending, victims) {
                still.push(u);
            }
        }
        still
    }

    /// Running pods of a job.
    pub(crate) fn running(&self, job: usize) -> Vec<usize> {
        self.jobs[job]
            .pods
            .iter()
            .copied()
            .filter(|&p| self.slots[p].is_some() && self.snapshot.pods[p].node.is_some())
            .collect()
    }

    /// Whether a job got pods placed in this cycle: it is growing, so it is nobody's victim now
    /// (evicting its older pods would leave the new ones as a partial gang).
    pub(crate) fn growing(&self, job: usize) -> bool {
        self.jobs[job]
            .pods
            .iter()
            .any(|&p| self.slots[p].is_some() && self.snapshot.pods[p].node.is_none())
    }

    /// Whether every running pod of a job has run at least `min` seconds.
    pub(crate) fn past_min_runtime(&self, job: usize, min: Option<u64>) -> bool {
        let min = min.unwrap_or(0);
        self.running(job).iter().all(|&p| {
            self.snapshot.pods[p]
                .started
                .is_none_or(|s| self.now.saturating_sub(s) >= min)
        })
    }

    /// Preemptible jobs of the same queue with strictly lower priority, past their min-runtime;
    /// lowest priority first, then the most recently started.
    fn preempt_victims(&self, job: usize, leaf: usize) -> Vec<usize> {
        let priority = self.jobs[job].priority;
        let min = self.policy.queues[leaf].min_runtime.preempt.map(|d| d.0);
        let mut victims: Vec<usize> = (0..self.jobs.len())
            .filter(|&v| v != job && self.jobs[v].queue == Ok(leaf))
            .filter(|&v| self.jobs[v].preemptible && self.jobs[v].priority < priority)
            .filter(|&v| {
                !self.running(v).is_empty() && !self.growing(v) && self.past_min_runtime(v, min)
            })
            .collect();
        victims.sort_by_cached_key(|&v| (self.jobs[v].priority, Reverse(self.latest_start(v)), v));
        victims
    }

    fn latest_start(&self, job: usize) -> u64 {
        self.running(job)
            .iter()
            .filter_map(|&p| self.snapshot.pods[p].started)
            .max()
            .unwrap_or(0)
    }

    fn saturation(&self, queue: usize, kind: ResourceKind, delta: i64) -> f64 {
        let share = self.shares.queues[queue].get(kind).fair_share;
        let used = self.used.all[queue].get(kind) + delta;
        if share <= 0 {
            if used > 0 { f64::INFINITY } else { 0.0 }
        } else {
            used as f64 / share as f64
        }
    }

    /// Preemptible jobs of other queues that are above their fair share (or above quota while the
    /// reclaimer is within quota), past their reclaim min-runtime, and whose eviction does not
    /// push the reclaimer above the victim's saturation. Most saturated queues first, then lower
    /// queue priority, then lower job priority, then the most recently started.
    fn reclaim_victims(&self, leaf: usize, request: &Amounts) -> Vec<usize> {
        let kind = if request.gpu > 0 {
            ResourceKind::Gpu
        } else {
            ResourceKind::Cpu
        };
        let want = *request.get(kind);
        let fair = self.shares.queues[leaf].get(kind).fair_share;
        let used = *self.used.all[leaf].get(kind);
        let quota = self.policy.queues[leaf]
            .resources
            .get(kind)
            .map(|r| r.quota);
        let within_quota = match quota {
            Some(Bound::Finite(q)) => used + want <= q,
            _ => true,
        };
        if used + want > fair && !within_quota {
            return Vec::new();
        }
        let mut victims: Vec<(usize, f64)> = Vec::new();
        for v in 0..self.jobs.len() {
            let Ok(vq) = self.jobs[v].queue else { continue };
            if vq == leaf || !self.jobs[v].preemptible || self.growing(v) {
                continue;
            }
            let running = self.running(v);
            if running.is_empty() {
                continue;
            }
            let min = self.policy.queues[vq].min_runtime.reclaim.map(|d| d.0);
            if !self.past_min_runtime(v, min) {
                continue;
            }
            let v_used = *self.used.all[vq].get(kind);
            let v_fair = self.shares.queues[vq].get(kind).fair_share;
            let v_quota = self.policy.queues[vq].resources.get(kind).map(|r| r.quota);
            let above_quota = matches!(v_quota, Some(Bound::Finite(q)) if v_used > q);
            if !(v_used > v_fair || (above_quota && within_quota)) {
                continue;
            }
            let freed = *request_of(self.snapshot, &running).get(kind);
            if self.saturation(leaf, kind, want) > self.saturation(vq, kind, -freed)
                && v_used <= v_fair
            {
                continue;
            }
            victims.push((v, self.saturation(vq, kind, 0)));
        }
        // Each victim's order key, computed once: most saturated queue first, then lower queue
        // priority, lower job priority, most recently started.
        let mut keyed: Vec<_> = victims
            .into_iter()
            .map(|(v, saturation)| {
                let queue_priority = self.jobs[v]
                    .queue
                    .as_ref()
                    .map_or(0, |&q| self.policy.queues[q].priority);
                let job = (
                    queue_priority,
                    self.jobs[v].priority,
                    Reverse(self.latest_start(v)),
                    v,
                );
                (saturation, job)
            })
            .collect();
        keyed.sort_by(|(sa, a), (sb, b)| sb.total_cmp(sa).then(a.cmp(b)));
        keyed.into_iter().map(|(_, (.., v))| v).collect()
    }

    /// Releases victims one job at a time until the gang fits; commits (evictions + nominations)
    /// or rolls everything back.
    fn release_until_fit(
        &mut self,
        job: usize,
        leaf: usize,
        pending: &[usize],
        victims: Vec<(usize, EvictReason)>,
    ) -> bool {
        if victims.is_empty() {
            return false;
        }
        let request = request_of(self.snapshot, pending);
        let plan = Plan::for_queue(self.policy, leaf, request.gpu > 0);
        let mut released: Vec<Released> = Vec::new();
        for (v, why) in victims {
            let Ok(vq) = self.jobs[v].queue else { continue };
            let pods = self.running(v);
            let mut freed = Vec::new();
            for &p in &pods {
                if let Some(slot) = self.slots[p].take() {
                    self.state.release(&slot, &self.snapshot.pods[p]);
                    freed.push((p, slot));
                }
            }
            self.used.add(
                self.policy,
                vq,
                request_of(self.snapshot, &pods),
                self.jobs[v].preemptible,
                -1,
            );
            released.push((v, why, freed));
            // Limits and non-preemptible quota are judged now, with the victims gone: allocate
            // has placed other jobs since this one was first admitted.
            if self.admission(job, leaf, &request).is_err() {
                continue;
            }
            if let Ok(mut slots) = place_gang(self.state, self.snapshot, pending, &plan) {
                // Never evict more than needed: keep every earlier victim the gang can do without.
                let mut needed = Vec::with_capacity(released.len());
                let last = released.pop();
                for (v, why, freed) in released {
                    self.give_back(&slots);
                    self.restore(v, &freed);
                    let fewer = self
                        .admission(job, leaf, &request)
                        .ok()
                        .and_then(|()| place_gang(self.state, self.snapshot, pending, &plan).ok());
                    match fewer {
                        Some(fewer) => slots = fewer,
                        None => {
                            self.evict_again(v, &freed);
                            slots = place_gang(self.state, self.snapshot, pending, &plan)
                                .unwrap_or_default();
                            needed.push((v, why, freed));
                        }
                    }
                }
                needed.extend(last);
                for (_, why, freed) in needed {
                    for (p, slot) in freed {
                        let pod = &self.snapshot.pods[p];
                        self.decisions.push(Decision::Evict {
                            pod: pod.key(),
                            node: self.snapshot.nodes[slot.node].name.clone(),
                            reason: why.clone(),
                        });
                    }
                }
                self.commit(job, leaf, slots, true);
                return true;
            }
        }
        // Nothing fits even with every candidate gone: put them all back.
        for (v, _, freed) in released.into_iter().rev() {
            self.restore(v, &freed);
        }
        false
    }

    /// Un-places a tentative gang placement.
    fn give_back(&mut self, slots: &[(usize, Slot)]) {
        for (p, slot) in slots.iter().rev() {
            self.state.release(slot, &self.snapshot.pods[*p]);
        }
    }

    /// Puts a released victim back where it was.
    fn restore(&mut self, victim: usize, freed: &[(usize, Slot)]) {
        for (p, slot) in freed {
            self.state.take(slot, &self.snapshot.pods[*p]);
            self.slots[*p] = Some(slot.clone());
        }
        self.account(victim, freed, 1);
    }

    /// Releases a victim again after a failed attempt to keep it.
    fn evict_again(&mut self, victim: usize, freed: &[(usize, Slot)]) {
        for (p, slot) in freed {
            self.state.release(slot, &self.snapshot.pods[*p]);
            self.slots[*p] = None;
        }
        self.account(victim, freed, -1);
    }

    fn account(&mut self, victim: usize, freed: &[(usize, Slot)], sign: i64) {
        if let Ok(vq) = self.jobs[victim].queue {
            let pods: Vec<usize> = freed.iter().map(|(p, _)| *p).collect();
            self.used.add(
                self.policy,
                vq,
                request_of(self.snapshot, &pods),
                self.jobs[victim].preemptible,
                sign,
            );
        }
    }

    /// Evicts, whole, every running gang that has been below `minMember` longer than the grace
    /// period (measured from when its newest missing pod was created).
    pub fn evict_stale_gangs(&mut self) {
        for j in 0..self.jobs.len() {
            let job = &self.jobs[j];
            let running = self.running(j);
            if running.is_empty() || running.len() as u32 >= job.min_member {
                continue;
            }
            let pending_pods = self.pending(j);
            // Pods placed this cycle count as running: the gang is being completed, not stale.
            let placed_now = job
                .pods
                .iter()
                .filter(|&&p| self.slots[p].is_some() && self.snapshot.pods[p].node.is_none())
                .count();
            if (running.len() + placed_now) as u32 >= job.min_member {
                continue;
            }
            let since = pending_pods
                .iter()
                .map(|&p| self.snapshot.pods[p].created)
                .max()
                .unwrap_or(0);
            let below_for = self.now.saturating_sub(since);
            if below_for < STALE_GANG_GRACE_SECONDS {
                continue;
            }
            let reason = EvictReason::StaleGang {
                running: running.len() as u32,
                min_member: job.min_member,
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
                if let Some(slot) = self.slots[p].take() {
                    self.state.release(&slot, &self.snapshot.pods[p]);
                    self.decisions.push(Decision::Evict {
                        pod: self.snapshot.pods[p].key(),
                        node: self.snapshot.nodes[slot.node].name.clone(),
                        reason: reason.clone(),
                    });
                }
            }
        }
    }
}
