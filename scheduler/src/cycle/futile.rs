//! Reclaim attempts proven to fail before they run.
//!
//! On a busy cluster most reclaim attempts take their 256 victim units one by one and still
//! find no room for the gang. The units the victim order offers an attempt's candidates are
//! known before it takes any (worked out by the first attempt with those candidates,
//! `reclaim.rs: offered_units`, and kept in `reclaim::Sequence`). When none of them can be
//! taken only on condition that it moves, the attempt is offered exactly those units. No node then ever has
//! more room than it has now plus what those units hold there: victims placed again only take
//! room. If even that room cannot hold the gang's pods, counting only CPU, memory, GPU devices
//! and pod slots, the attempt would fail at every step, and it is not run. Debug builds run it
//! all the same and check that it fails.
//!
//! Most attempts that bound leaves standing fail because the units go back before the gang:
//! KAI's solver places them again, mostly where they were, so their room is never free for
//! the gang. An earlier attempt with the same units may have left a [`Trail`] of its steps that
//! covers them all, each step with its proof (`evict.rs: StepProof`): the changes it made to
//! the queues' allocation, the heads of the victim's queue it judged the unit by, and the room
//! it left on the nodes it changed. An attempt that judges each unit as that one did (going
//! before the gang or not: `Context::follows_trail` brings the allocation, step by step, where
//! it stood, and puts it back) passes through the very same states; if no node's most room over
//! those states, beside every other node's room now, can hold the gang, it fails too, and is
//! not run.

use rustc_hash::FxHashMap;

use super::allocate::Context;
use super::evict::Trail;
use super::jobs::request_of;
use super::kai::each;
use super::reclaim::{WithinBySide, allows};
use super::state::{ClusterState, Freed};
use crate::cluster::{Amounts, Pod};

/// A pod's shape as [`ClusterState::most_pods`] counts it: its request, whether it shares
/// devices, and on how many.
type Shape = (Amounts, bool, u32);

/// A pod's [`Shape`].
fn shape(pod: &Pod) -> Shape {
    (pod.request, pod.fractional, pod.shared_devices)
}

/// How many copies of each pod shape the nodes hold, brought up to date from the nodes changed
/// since it was last counted: the pass's attempts put back what they took, so little changes
/// between two of them.
#[derive(Debug, Default)]
pub(super) struct RoomByShape {
    by_shape: FxHashMap<Shape, ShapeRoom>,
}

/// One shape's copies per node, their sum, and the state's stamp when they were counted.
#[derive(Debug)]
struct ShapeRoom {
    stamp: u64,
    per_node: Vec<u64>,
    total: u128,
}

impl RoomByShape {
    /// The copies of `pod` each node holds now, and their sum.
    fn count(&mut self, state: &ClusterState<'_>, pod: &Pod) -> &ShapeRoom {
        let room = self.by_shape.entry(shape(pod)).or_insert_with(|| {
            let per_node: Vec<u64> = (0..state.len())
                .map(|n| state.most_pods(n, pod, None))
                .collect();
            ShapeRoom {
                stamp: state.stamp(),
                total: per_node.iter().map(|&c| u128::from(c)).sum(),
                per_node,
            }
        });
        if room.stamp != state.stamp() {
            for n in state.changed_since(room.stamp) {
                let now = state.most_pods(n, pod, None);
                room.total = room.total - u128::from(room.per_node[n]) + u128::from(now);
                room.per_node[n] = now;
            }
            room.stamp = state.stamp();
        }
        room
    }
}

impl Context<'_> {
    /// Whether a reclaim attempt for the gang `pending` of a job in `leaf`, asking `request`,
    /// must fail when the victim order offers it `units` (the units it offers the attempt's
    /// candidates, up to the bound on victims or the order's end).
    ///
    /// `trail` is what earlier attempts with these units did (for the job's kind of solver
    /// nodes): where it covers every unit with its proofs, the room bound may come from the
    /// states it passed through instead, if this attempt judges each unit as it did.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn reclaim_is_futile(
        &mut self,
        job: usize,
        leaf: usize,
        pending: &[usize],
        request: &super::kai::Quantities,
        units: &[(usize, Vec<usize>)],
        trail: &Trail,
        room: &mut RoomByShape,
    ) -> bool {
        // Inter-pod terms can open a node when a pod leaves another.
        if self.state.tracks_inter_pod_terms() {
            return false;
        }
        let by_units = self.gang_exceeds(pending, &self.freed_by(units), room);
        let by_trail = !by_units
            && trail.provable(units.len())
            && self.gang_exceeds(pending, &self.peak_room(trail, units.len()), room);
        (by_units || by_trail)
            && !self.some_unit_may_only_move(leaf, request, units)
            && (by_units || self.follows_trail(job, leaf, pending, units, trail))
    }

    /// The room the pods of `units` hold, by node.
    fn freed_by(&self, units: &[(usize, Vec<usize>)]) -> FxHashMap<usize, Freed> {
        let mut freed: FxHashMap<usize, Freed> = FxHashMap::default();
        for &p in units.iter().flat_map(|(_, pods)| pods) {
            let Some(slot) = &self.slots[p] else { continue };
            let devices = self.state.device_free(slot.node).len();
            freed
                .entry(slot.node)
                .or_default()
                .add(slot, &self.snapshot.pods[p], devices);
        }
        freed
    }

    /// Whether some shape of the gang's pods has more pods than copies of it fit the nodes'
    /// free room with `freed` added.
    fn gang_exceeds(
        &self,
        pending: &[usize],
        freed: &FxHashMap<usize, Freed>,
        room: &mut RoomByShape,
    ) -> bool {
        let mut shapes: Vec<(usize, u128)> = Vec::new();
        for &p in pending {
            let of = |q: usize| shape(&self.snapshot.pods[q]);
            match shapes.iter_mut().find(|(q, _)| of(*q) == of(p)) {
                Some((_, count)) => *count += 1,
                None => shapes.push((p, 1)),
            }
        }
        shapes.into_iter().any(|(p, count)| {
            let pod = &self.snapshot.pods[p];
            let now = room.count(self.state, pod);
            let mut most = now.total;
            for (&n, f) in freed {
                most = most - u128::from(now.per_node[n])
                    + u128::from(self.state.most_pods(n, pod, Some(f)));
            }
            most < count
        })
    }

    /// Whether some unit may be one its side cannot give up when its turn comes, so that the
    /// attempt may take it only on condition that it moves, and from there rank the victim
    /// order itself. The side gives the unit up if it does so holding the least it can hold
    /// then (every earlier unit of its subtree gone) with the reclaimer's side holding the most
    /// (what it holds now): `FitsReclaimStrategy` only passes more as the victim's side holds
    /// more and the reclaimer's less.
    fn some_unit_may_only_move(
        &mut self,
        leaf: usize,
        request: &super::kai::Quantities,
        units: &[(usize, Vec<usize>)],
    ) -> bool {
        let mut within = WithinBySide::default();
        let mut sides = Vec::with_capacity(units.len());
        for (job, _) in units {
            // The order ends at a job without a queue.
            let Ok(vq) = self.jobs[*job].queue else { break };
            let (mine, theirs) = self.leveled(leaf, vq);
            sides.push((vq, theirs, within.get(self, mine, request)));
        }
        let mut gone = 0;
        let mut may = false;
        for (&(vq, theirs, mine_within), (job, pods)) in sides.iter().zip(units) {
            let t = self.kai_shares(theirs);
            if !allows(&t, &each(&t, |s| s.allocated), mine_within) {
                may = true;
                break;
            }
            let asks = request_of(self.snapshot, pods);
            let preemptible = self.jobs[*job].preemptible;
            self.used.add(self.policy, vq, asks, preemptible, -1);
            gone += 1;
        }
        for (&(vq, _, _), (job, pods)) in sides.iter().zip(units).take(gone) {
            let asks = request_of(self.snapshot, pods);
            let preemptible = self.jobs[*job].preemptible;
            self.used.add(self.policy, vq, asks, preemptible, 1);
        }
        may
    }
}
