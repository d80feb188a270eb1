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
//! it stood, and puts it back) passes through the very same states; if in none of those states
//! the nodes' room (each node's as the latest step that changed it left it, the others' now)
//! can hold the gang, it fails too, and is not run. Each state is bounded on its own: a node's
//! most room over all of them would count the room of a victim placed again elsewhere twice,
//! where it was and where it goes.

use rustc_hash::FxHashMap;

use super::allocate::Context;
use super::evict::Trail;
use super::jobs::request_of;
use super::kai::quantities;
use super::reclaim::{WithinBySide, allows};
use super::state::{ClusterState, Freed, NodeRoom};
use crate::cluster::{Amounts, Pod, Snapshot};
use kai_policy_compiler::quantity::ResourceKind;

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

/// What [`Context::reclaim_is_futile`] works out for one [`super::reclaim::Sequence`]'s units,
/// kept with them: between two commits the units hold the same slots and the nodes the same
/// room at the start of every attempt (a failed attempt puts back all it took), so it holds
/// until the sequence is forgotten, except what comes from a trail, which holds until an
/// attempt changes the trail. Debug builds work each out afresh and check it.
#[derive(Debug, Default)]
pub(super) struct Bounds {
    /// The room the units hold, by node.
    freed: Option<RoomByNode>,
    /// Per pod shape, how many copies the nodes' room holds with the units' room freed.
    by_units: CopiesByShape,
    /// By the kind of solver nodes (see `reclaim::Sequence::trails`): per pod shape, how many
    /// copies the nodes' room holds after each of the trail's steps.
    by_trail: [Option<CopiesByStep>; 2],
}

/// Room by node (what units free).
type RoomByNode = FxHashMap<usize, Freed>;

/// Per pod shape, how many copies the nodes' room holds after each step of a trail.
type CopiesByStep = FxHashMap<Shape, Vec<u128>>;

/// Per pod shape, how many copies the nodes' room holds.
type CopiesByShape = FxHashMap<Shape, u128>;

impl Bounds {
    /// Forgets what came from the trail of the `limited` kind of solver nodes: an attempt may
    /// have changed it.
    pub(super) fn trail_changed(&mut self, limited: usize) {
        self.by_trail[limited] = None;
    }
}

/// The gang's pods by [`Shape`]: one pod of each, and how many have it.
fn gang_shapes(snapshot: &Snapshot, pending: &[usize]) -> Vec<(usize, u128)> {
    let mut shapes: Vec<(usize, u128)> = Vec::new();
    for &p in pending {
        let of = |q: usize| shape(&snapshot.pods[q]);
        match shapes.iter_mut().find(|(q, _)| of(*q) == of(p)) {
            Some((_, count)) => *count += 1,
            None => shapes.push((p, 1)),
        }
    }
    shapes
}

/// Whether, after each step of a trail, some shape of the gang's pods `pending` has more pods
/// than copies of it fit the nodes' room then: `rooms` holds the free room each step left on
/// the nodes it changed, the others keep their room now. `most` keeps the copies by shape and
/// step, for the next gang. Bounding each step on its own, rather than each node by the most
/// room it had at any step, counts the room a victim placed again elsewhere leaves once, not
/// both where it was and where it goes.
fn exceeds_at_every_step(
    state: &ClusterState<'_>,
    snapshot: &Snapshot,
    pending: &[usize],
    rooms: &[&[(usize, NodeRoom)]],
    most: &mut CopiesByStep,
    room: &mut RoomByShape,
) -> bool {
    let by_step = |room: &mut RoomByShape, pod: &Pod| {
        let now = room.count(state, pod);
        let mut total = now.total;
        // The copies each node changed so far holds.
        let mut then: FxHashMap<usize, u64> = FxHashMap::default();
        rooms
            .iter()
            .map(|step| {
                for (n, after) in *step {
                    let copies = state.most_pods_in(*n, pod, after);
                    let before = then.insert(*n, copies).unwrap_or(now.per_node[*n]);
                    total = total - u128::from(before) + u128::from(copies);
                }
                total
            })
            .collect::<Vec<u128>>()
    };
    let shapes = gang_shapes(snapshot, pending);
    for &(p, _) in &shapes {
        let pod = &snapshot.pods[p];
        let kept = most.entry(shape(pod)).or_insert_with(|| by_step(room, pod));
        if cfg!(debug_assertions) {
            assert_eq!(*kept, by_step(room, pod), "the nodes' room has changed");
        }
    }
    (0..rooms.len()).all(|step| {
        shapes
            .iter()
            .any(|&(p, count)| most[&shape(&snapshot.pods[p])][step] < count)
    })
}

impl Context<'_> {
    /// Whether a reclaim attempt for the gang `pending` of a job in `leaf`, asking `request`,
    /// must fail when the victim order offers it `units` (the units it offers the attempt's
    /// candidates, up to the bound on victims or the order's end).
    ///
    /// `trail` is what earlier attempts with these units did (for the job's kind of solver
    /// nodes): where it covers every unit with its proofs, the room bound may come from the
    /// states it passed through instead, if this attempt judges each unit as it did.
    ///
    /// `bounds` keeps what it works out for these units and this trail (`limited`: the kind of
    /// solver nodes), for the next attempt offered them.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn reclaim_is_futile(
        &mut self,
        job: usize,
        leaf: usize,
        pending: &[usize],
        request: &super::kai::Quantities,
        units: &[(usize, Vec<usize>)],
        trail: &Trail,
        limited: usize,
        bounds: &mut Bounds,
    ) -> bool {
        // Inter-pod terms can open a node when a pod leaves another.
        if self.state.tracks_inter_pod_terms() {
            return false;
        }
        if cfg!(debug_assertions)
            && let Some(freed) = &bounds.freed
        {
            assert_eq!(freed, &self.freed_by(units), "the units' room has changed");
        }
        // The context's count of copies per shape, taken out while the bounds borrow the
        // context.
        let mut room = std::mem::take(&mut self.room_by_shape);
        let freed = bounds.freed.get_or_insert_with(|| self.freed_by(units));
        let by_units = self.gang_exceeds(pending, freed, &mut bounds.by_units, &mut room);
        let by_trail = !by_units && trail.provable(units.len()) && {
            let most = bounds.by_trail[limited].get_or_insert_with(FxHashMap::default);
            let rooms = trail.rooms(units.len());
            exceeds_at_every_step(self.state, self.snapshot, pending, &rooms, most, &mut room)
        };
        self.room_by_shape = room;
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
    /// free room with `freed` added; `most` keeps those copies by shape, for the next gang.
    fn gang_exceeds(
        &self,
        pending: &[usize],
        freed: &FxHashMap<usize, Freed>,
        most: &mut FxHashMap<Shape, u128>,
        room: &mut RoomByShape,
    ) -> bool {
        let copies = |room: &mut RoomByShape, pod: &Pod| {
            let now = room.count(self.state, pod);
            let mut most = now.total;
            for (&n, f) in freed {
                most = most - u128::from(now.per_node[n])
                    + u128::from(self.state.most_pods(n, pod, Some(f)));
            }
            most
        };
        gang_shapes(self.snapshot, pending)
            .into_iter()
            .any(|(p, count)| {
                let pod = &self.snapshot.pods[p];
                let kept = *most.entry(shape(pod)).or_insert_with(|| copies(room, pod));
                if cfg!(debug_assertions) {
                    assert_eq!(kept, copies(room, pod), "the nodes' room has changed");
                }
                kept < count
            })
    }

    /// Whether some shape of the gang's pods has more pods than copies of it fit the nodes'
    /// room as it is: then no search can place the gang (the count reads only what every
    /// placement needs). Inter-pod terms are left to the search.
    pub(crate) fn gang_outnumbers_room(&mut self, pending: &[usize]) -> bool {
        if self.state.tracks_inter_pod_terms() {
            return false;
        }
        let room = &mut self.room_by_shape;
        gang_shapes(self.snapshot, pending)
            .into_iter()
            .any(|(p, count)| room.count(self.state, &self.snapshot.pods[p]).total < count)
    }

    /// Whether some unit may be one its side cannot give up when its turn comes, so that the
    /// attempt may take it only on condition that it moves, and from there rank the victim
    /// order itself. The side gives the unit up if it does so holding the least it can hold
    /// then (every earlier unit of its subtree gone) with the reclaimer's side holding the most
    /// (what it holds now): `FitsReclaimStrategy` only passes more as the victim's side holds
    /// more and the reclaimer's less.
    fn some_unit_may_only_move(
        &self,
        leaf: usize,
        request: &super::kai::Quantities,
        units: &[(usize, Vec<usize>)],
    ) -> bool {
        let mut within = WithinBySide::default();
        // What the units so far take off each side: every unit of a side's subtree meets the
        // reclaimer's path at that side, so only the side's own total matters.
        let mut gone: Vec<(usize, Amounts)> = Vec::new();
        for (job, pods) in units {
            // The order ends at a job without a queue.
            let Ok(vq) = self.jobs[*job].queue else { break };
            let (mine, theirs) = self.leveled(leaf, vq);
            let at = match gone.iter().position(|&(side, _)| side == theirs) {
                Some(at) => at,
                None => {
                    gone.push((theirs, Amounts::default()));
                    gone.len() - 1
                }
            };
            let mut holds = self.used.all[theirs];
            for k in ResourceKind::ALL {
                *holds.get_mut(k) -= gone[at].1.get(k);
            }
            // `allows` reads only the side's quota, fair share and limit: no need for its
            // allocation in KAI's numbers.
            let t = &self.fixed_shares[theirs];
            if !allows(t, &quantities(&holds), within.get(self, mine, request)) {
                return true;
            }
            let asks = request_of(self.snapshot, pods);
            for k in ResourceKind::ALL {
                *gone[at].1.get_mut(k) += asks.get(k);
            }
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::Node;
    use crate::cycle::state::DEVICE;

    /// Two one-GPU nodes: `a` runs a one-GPU victim, `b` is free; a gang of two one-GPU pods
    /// waits. A trail's one step takes the victim off `a` and places it again on `b`: after it
    /// one GPU is free, on `a`, and the gang cannot fit. The most room each node had (`a`'s
    /// after the step, `b`'s before it) would hold the gang: only bounding the step on its own
    /// proves the attempt futile.
    #[test]
    fn a_victim_placed_again_elsewhere_frees_its_room_once() {
        let node = |name: &str| Node {
            name: name.to_string(),
            allocatable: Amounts {
                gpu: DEVICE,
                cpu: 8_000,
                memory: 1 << 40,
            },
            ..Default::default()
        };
        let pod = |name: &str, node: Option<&str>| Pod {
            namespace: "ns".into(),
            name: name.into(),
            request: Amounts {
                gpu: DEVICE,
                cpu: 1_000,
                memory: 1 << 30,
            },
            node: node.map(str::to_string),
            ..Default::default()
        };
        let cluster = |victim: Option<&str>| Snapshot {
            nodes: vec![node("a"), node("b")],
            pods: vec![pod("victim", victim), pod("g-0", None), pod("g-1", None)],
            ..Default::default()
        };
        let now = cluster(Some("a"));
        let (state, _) = ClusterState::new(&now);
        let moved = cluster(Some("b"));
        let after = ClusterState::new(&moved).0;
        let gang = [1, 2];
        let exceeds = |rooms: &[&[(usize, NodeRoom)]]| {
            exceeds_at_every_step(
                &state,
                &now,
                &gang,
                rooms,
                &mut FxHashMap::default(),
                &mut RoomByShape::default(),
            )
        };
        let step = [(0, after.node_room(0)), (1, after.node_room(1))];
        assert!(exceeds(&[&step]));
        // The most room each node had: `a` after the step, `b` now.
        let copies = state.most_pods_in(0, &now.pods[1], &after.node_room(0))
            + state.most_pods(1, &now.pods[1], None);
        assert_eq!(copies, 2, "the most room of each node would hold the gang");
        // With the victim gone for good, the gang fits after the step.
        assert!(!exceeds(&[&step[..1]]));
    }
}
