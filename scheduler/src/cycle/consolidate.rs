//! Consolidate: move running preemptible pods between nodes when that lets a pending gang fit
//! and every moved pod fits elsewhere, with a bounded number of moves. Moves that do not end in
//! the gang fitting are undone.

use std::collections::HashSet;

use kai_policy_compiler::model::Strategy;

use super::allocate::{Context, Unplaced};
use super::jobs::request_of;
use super::placement::{Plan, try_place_gang};
use super::state::Slot;
use crate::decision::{Decision, EvictReason};

/// The most pods one cycle moves for one gang.
pub const MAX_MOVES: usize = 8;

/// How many of the nodes closest to fitting are searched for a pod to move.
const NODES_SEARCHED: usize = 16;

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
        let mut still = Vec::new();
        let mut moved: HashSet<usize> = HashSet::new();
        let mut job_of = vec![usize::MAX; self.snapshot.pods.len()];
        for (j, job) in self.jobs.iter().enumerate() {
            for &p in &job.pods {
                job_of[p] = j;
            }
        }
        for u in unplaced {
            // KAI consolidates only for preemptible pending jobs (`FilterNonPreemptible`) past
            // their preemption delay (reclaim and preempt give the delay as the reason).
            if !self.jobs[u.job].preemptible
                || self.within_preemption_delay(u.job).is_some()
                || !self.try_consolidate(u.job, &mut moved, &job_of)
            {
                still.push(u);
            }
        }
        still
    }

    fn try_consolidate(
        &mut self,
        job: usize,
        moved: &mut HashSet<usize>,
        job_of: &[usize],
    ) -> bool {
        let Ok(leaf) = self.jobs[job].queue else {
            return false;
        };
        let pending = self.gang_core(job);
        if pending.is_empty() {
            return false;
        }
        let request = request_of(self.snapshot, &pending);
        let plan = Plan::for_job(self.policy, leaf, &self.jobs[job], request.gpu > 0);
        if plan.required.is_some() || self.admission(job, leaf, &request).is_err() {
            return false;
        }
        // Moving pods creates no room: when the cluster's free total cannot hold the gang, skip.
        let free = self.state.free_total();
        if free.gpu < request.gpu || free.cpu < request.cpu || free.memory < request.memory {
            return false;
        }
        let mut on_node: Vec<Vec<usize>> = vec![Vec::new(); self.state.len()];
        for (p, slot) in self.slots.iter().enumerate() {
            if let (Some(slot), Some(_)) = (slot, &self.snapshot.pods[p].node) {
                on_node[slot.node].push(p);
            }
        }
        let mut moves: Vec<(usize, Slot, Slot)> = Vec::new();
        while moves.len() <= MAX_MOVES {
            if let Some(slots) = try_place_gang(self.state, self.snapshot, &pending, &plan) {
                let for_job = self.jobs[job].key.clone();
                for (p, from, to) in moves {
                    let to_node = self.snapshot.nodes[to.node].name.clone();
                    self.decisions.push(Decision::Evict {
                        pod: self.snapshot.pods[p].key(),
                        node: self.snapshot.nodes[from.node].name.clone(),
                        reason: EvictReason::Consolidate {
                            for_job: for_job.clone(),
                            to_node,
                        },
                    });
                    moved.insert(p);
                }
                self.commit(job, leaf, slots, true);
                return true;
            }
            if moves.len() == MAX_MOVES {
                break;
            }
            let Some(step) = self.next_move(&pending, &plan, moved, &moves, &on_node, job_of)
            else {
                break;
            };
            on_node[step.1.node].retain(|&p| p != step.0);
            on_node[step.2.node].push(step.0);
            let pod = &self.snapshot.pods[step.0];
            self.state.release(&step.1, pod);
            self.state.take(&step.2, pod);
            self.slots[step.0] = Some(step.2.clone());
            moves.push(step);
        }
        for (p, from, to) in moves.into_iter().rev() {
            let pod = &self.snapshot.pods[p];
            self.state.release(&to, pod);
            self.state.take(&from, pod);
            self.slots[p] = Some(from);
        }
        false
    }

    /// One pod to move: from the node that comes closest to fitting the gang's largest pod, a
    /// running preemptible pod (past its min-runtime) that fits on another node.
    fn next_move(
        &self,
        pending: &[usize],
        plan: &Plan,
        moved: &HashSet<usize>,
        moves: &[(usize, Slot, Slot)],
        on_node: &[Vec<usize>],
        job_of: &[usize],
    ) -> Option<(usize, Slot, Slot)> {
        let largest = *pending.iter().max_by_key(|&&p| {
            (
                self.snapshot.pods[p].request.gpu,
                self.snapshot.pods[p].request.cpu,
            )
        })?;
        let pod = &self.snapshot.pods[largest];
        let mut nodes: Vec<(i64, usize)> = (0..self.state.len())
            .filter(|&n| self.state.schedulable(n))
            .map(|n| {
                let l = self.state.lacking(n, pod);
                (l.gpu * 1_000_000 + l.cpu * 1000 + l.memory / 1_000_000, n)
            })
            .filter(|&(lacking, _)| lacking > 0)
            .collect();
        nodes.sort_unstable();
        let touched: HashSet<usize> = moves.iter().map(|(p, _, _)| *p).collect();
        for (_, node) in nodes.into_iter().take(NODES_SEARCHED) {
            let mut movable: Vec<usize> = on_node[node]
                .iter()
                .copied()
                .filter(|&p| {
                    !moved.contains(&p)
                        && !touched.contains(&p)
                        && !self.snapshot.pods[p].terminating
                })
                .filter(|&p| self.movable(job_of[p]))
                .collect();
            movable.sort_by_key(|&p| (std::cmp::Reverse(self.snapshot.pods[p].request.gpu), p));
            for p in movable {
                let victim = &self.snapshot.pods[p];
                let destination = self
                    .state
                    .candidates(victim, plan.strategy)
                    .filter(|&m| m != node)
                    .find_map(|m| {
                        self.state
                            .devices_for(m, victim, plan.strategy)
                            .map(|devices| Slot { node: m, devices })
                    });
                if let (Some(to), Some(from)) = (destination, self.slots[p].clone()) {
                    return Some((p, from, to));
                }
            }
        }
        None
    }

    /// Whether a running job's pods may be moved: it is preemptible and not growing. KAI's
    /// min-runtime plugin does not guard consolidation (it registers reclaim and preempt
    /// filters only), so neither do we.
    fn movable(&self, job: usize) -> bool {
        let Some(j) = self.jobs.get(job) else {
            return false;
        };
        j.queue.is_ok() && j.preemptible && !self.growing(job)
    }
}
