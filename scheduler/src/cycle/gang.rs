//! Sub-groups: the tree of smaller gangs a PodGroup's `spec.subGroups` makes (KAI's
//! `subgroup_info.SubGroupSet` and `PodSet`), and what the actions ask of it: which pods go
//! next, whether the job is below, at or above its minimum, which pods a victim gives up, and
//! whether the group is stale. A job without sub-groups has no tree: the cycle keeps its single
//! `min_member` (the same rules on a tree of one pod set, done without one).
//!
//! KAI's rules, from `pkg/scheduler/api/podgroup_info/`:
//! - a pod set is satisfied when its active pods reach its `minMember`; a set of sub-groups when
//!   its satisfied members reach its `minSubGroup` (all members when unset);
//! - `allocation_info.go: collectTasksFromSubGroupSet`: an unsatisfied set takes, from its first
//!   `minSubGroup` members in the sub-group order, the pods they need to be satisfied (members
//!   satisfied already give nothing); a satisfied set takes one pod from its first member that
//!   has one to give;
//! - `eviction_info.go: GetTasksToEvict`: a surplus pod of the deepest elastic pod set, then a
//!   whole surplus member, then everything;
//! - `subgrouporder/subgroup_order.go: SubGroupOrderFn`: unsatisfied members first, then
//!   required before optional, then the lower ratio of satisfied to required.

use std::cmp::Ordering;

use crate::cluster::{PodGroup, SUBGROUP_LABEL, Snapshot};

/// A PodGroup's sub-group tree; member 0 is the group itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gang {
    members: Vec<Member>,
}

/// One sub-group, or the group itself.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Member {
    /// The sub-group's name (empty for the group itself).
    name: String,
    kind: Kind,
    /// The member it belongs to (`None` for the group itself).
    parent: Option<usize>,
    /// Its `topologyConstraint`: the topology it names, the node label its pods must share,
    /// and the one they should.
    topology: Option<String>,
    required: Option<String>,
    preferred: Option<String>,
}

/// Pods of a gang that are placed together under one sub-group's topology constraint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Part<'g> {
    /// The KAI `Topology` whose levels the labels below are.
    pub topology: Option<&'g str>,
    /// The node label all these pods must share.
    pub required: Option<&'g str>,
    /// The node label they should share.
    pub preferred: Option<&'g str>,
    /// The pods no constrained sub-group below this one holds, in the order given.
    pub pods: Vec<usize>,
    /// Every pod under this sub-group, its own and those of the parts below it, in the order
    /// given: what its domain must hold.
    pub subtree: Vec<usize>,
    /// The part of the nearest constrained sub-group above (an index in the list, always
    /// before this one): this part's domain lies inside that part's.
    pub parent: Option<usize>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Kind {
    /// Groups sub-groups: KAI's `SubGroupSet`.
    Set {
        /// Grouping members first, then pod-holding ones, each in the order written (KAI's
        /// `GetMembers`).
        children: Vec<usize>,
        /// `minSubGroup`; `None`: every child.
        min: Option<u32>,
    },
    /// Holds pods: KAI's `PodSet`.
    Pods {
        /// `minMember`, less the pods running on nodes outside the snapshot.
        min: u32,
        /// The job's pods that name it, in the job's order.
        pods: Vec<usize>,
        /// Pods running on nodes outside the snapshot: active, never placed or evicted.
        elsewhere: u32,
    },
}

/// Whether a pod holds resources now, and whether it waits to be placed.
pub(crate) trait PodState {
    /// Placed or running, and not being deleted (KAI's active allocated pods).
    fn active(&self, pod: usize) -> bool;
    /// Neither bound nor placed.
    fn pending(&self, pod: usize) -> bool;
}

/// The first sub-group that keeps a job from starting, and the numbers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unready {
    /// The sub-group (empty: the PodGroup's own `minSubGroup`).
    pub subgroup: String,
    /// Pods that exist, or members that could start.
    pub have: u32,
    /// `minMember`, or `minSubGroup`.
    pub need: u32,
    /// Whether the numbers count pods (a pod-holding sub-group) or sub-groups.
    pub pods: bool,
}

impl Gang {
    /// The tree of a PodGroup with sub-groups, with the job's pods in their sub-groups; `None`
    /// when the group has none. Also returns the pods that name no sub-group of the group, with
    /// the name they give: KAI schedules none of them (`AddTaskInfo`: "SubGroup not found").
    /// `elsewhere` are pods running on nodes outside the snapshot.
    pub fn build(
        group: &PodGroup,
        snapshot: &Snapshot,
        pods: &[usize],
        elsewhere: &[usize],
    ) -> Option<(Gang, Vec<(usize, String)>)> {
        if group.sub_groups.is_empty() {
            return None;
        }
        let subs = &group.sub_groups;
        let is_parent = |name: &str| subs.iter().any(|s| s.parent.as_deref() == Some(name));
        // Members in the order KAI lists them: sets first, then pod sets, as written.
        let mut members = vec![Member {
            name: String::new(),
            kind: Kind::Set {
                children: Vec::new(),
                min: group.min_sub_group,
            },
            parent: None,
            topology: None,
            required: None,
            preferred: None,
        }];
        let mut index = std::collections::HashMap::new();
        for sets in [true, false] {
            for s in subs.iter().filter(|s| is_parent(&s.name) == sets) {
                index.insert(s.name.as_str(), members.len());
                members.push(Member {
                    name: s.name.clone(),
                    kind: if sets {
                        Kind::Set {
                            children: Vec::new(),
                            min: s.min_sub_group,
                        }
                    } else {
                        Kind::Pods {
                            min: s.min_member.unwrap_or(0),
                            pods: Vec::new(),
                            elsewhere: 0,
                        }
                    },
                    parent: None,
                    topology: s.topology.clone(),
                    required: s.topology_required.clone(),
                    preferred: s.topology_preferred.clone(),
                });
            }
        }
        for sets in [true, false] {
            for s in subs.iter().filter(|s| is_parent(&s.name) == sets) {
                let me = index[s.name.as_str()];
                // Ingest refuses unknown parents and cycles; a parent not found is the group.
                let parent = s
                    .parent
                    .as_deref()
                    .and_then(|p| index.get(p).copied())
                    .unwrap_or(0);
                if let Kind::Set { children, .. } = &mut members[parent].kind {
                    children.push(me);
                }
                members[me].parent = Some(parent);
            }
        }
        let mut stray = Vec::new();
        let mut sort = |p: usize, running_elsewhere: bool| {
            // KAI puts a pod without the label into the sub-group named `default`.
            let name = snapshot.pods[p]
                .labels
                .get(SUBGROUP_LABEL)
                .map_or("default", String::as_str);
            match index.get(name).map(|&m| &mut members[m].kind) {
                Some(Kind::Pods {
                    pods, elsewhere, ..
                }) => {
                    if running_elsewhere {
                        *elsewhere += 1;
                    } else {
                        pods.push(p);
                    }
                }
                _ => stray.push((p, name.to_string())),
            }
        };
        for &p in pods {
            sort(p, false);
        }
        for &p in elsewhere {
            sort(p, true);
        }
        Some((Gang { members }, stray))
    }

    /// The pods, split by the sub-group topology constraint that holds them: for each pod, the
    /// nearest sub-group (its own, then the ones above it, the group itself not included) with
    /// a constraint. Constrained parts come first, each before the constrained parts below it
    /// (KAI's `allocateSubGroupSet` subsets a set's nodes before it places its members, which
    /// subset them again), siblings in member order; a constrained set whose pods all belong
    /// to parts below it is a part without pods of its own. Pods under no constraint come last.
    /// `None` when no sub-group has a constraint.
    pub fn parts(&self, pods: &[usize]) -> Option<Vec<Part<'_>>> {
        if self
            .members
            .iter()
            .all(|m| m.required.is_none() && m.preferred.is_none())
        {
            return None;
        }
        let constrained = |m: usize| {
            m != 0 && (self.members[m].required.is_some() || self.members[m].preferred.is_some())
        };
        // Each pod's pod set, and the constrained members above it (nearest first).
        let holder = |pod: usize| {
            self.members.iter().position(|m| match &m.kind {
                Kind::Pods { pods, .. } => pods.contains(&pod),
                Kind::Set { .. } => false,
            })
        };
        let chain = |pod: usize| -> Vec<usize> {
            let mut out = Vec::new();
            let mut at = holder(pod);
            while let Some(m) = at {
                if constrained(m) {
                    out.push(m);
                }
                at = self.members[m].parent;
            }
            out
        };
        let chains: Vec<(usize, Vec<usize>)> = pods.iter().map(|&p| (p, chain(p))).collect();
        // Constrained members in pre-order over the tree, children in member order.
        let mut order = Vec::new();
        let mut stack = vec![0];
        while let Some(m) = stack.pop() {
            if constrained(m) && chains.iter().any(|(_, c)| c.contains(&m)) {
                order.push(m);
            }
            if let Kind::Set { children, .. } = &self.members[m].kind {
                stack.extend(children.iter().rev());
            }
        }
        let mut parts: Vec<Part> = Vec::with_capacity(order.len() + 1);
        for &m in &order {
            let member = &self.members[m];
            let parent = chains
                .iter()
                .find_map(|(_, c)| {
                    let at = c.iter().position(|&x| x == m)?;
                    Some(c.get(at + 1).map(|up| order.iter().position(|x| x == up)))
                })
                .flatten()
                .flatten();
            parts.push(Part {
                topology: member.topology.as_deref(),
                required: member.required.as_deref(),
                preferred: member.preferred.as_deref(),
                pods: chains
                    .iter()
                    .filter(|(_, c)| c.first() == Some(&m))
                    .map(|&(p, _)| p)
                    .collect(),
                subtree: chains
                    .iter()
                    .filter(|(_, c)| c.contains(&m))
                    .map(|&(p, _)| p)
                    .collect(),
                parent,
            });
        }
        let free: Vec<usize> = chains
            .iter()
            .filter(|(_, c)| c.is_empty())
            .map(|&(p, _)| p)
            .collect();
        if !free.is_empty() {
            parts.push(Part {
                topology: None,
                required: None,
                preferred: None,
                subtree: free.clone(),
                pods: free,
                parent: None,
            });
        }
        Some(parts)
    }

    /// The sum of the pod sets' minimums (how stale-gang messages state the gang's minimum).
    pub fn min_pods(&self) -> u32 {
        self.members
            .iter()
            .map(|m| match &m.kind {
                Kind::Pods { min, elsewhere, .. } => min.saturating_sub(*elsewhere),
                Kind::Set { .. } => 0,
            })
            .sum()
    }

    /// How many satisfied members a member needs (KAI's `GetMinMembersToSatisfy`).
    fn needed(&self, m: usize) -> usize {
        match &self.members[m].kind {
            Kind::Set { children, min } => min.map_or(children.len(), |n| n as usize),
            Kind::Pods { min, .. } => *min as usize,
        }
    }

    /// Active pods of a pod set, or satisfied children of a set (KAI's
    /// `GetNumActiveAllocatedMembers`).
    fn count(&self, m: usize, s: &dyn PodState) -> usize {
        match &self.members[m].kind {
            Kind::Set { children, .. } => {
                children.iter().filter(|&&c| self.satisfied(c, s)).count()
            }
            Kind::Pods {
                pods, elsewhere, ..
            } => *elsewhere as usize + pods.iter().filter(|&&p| s.active(p)).count(),
        }
    }

    /// Whether a member's minimum is met (KAI's `IsMinRequirementSatisfied`).
    fn satisfied(&self, m: usize, s: &dyn PodState) -> bool {
        self.count(m, s) >= self.needed(m)
    }

    /// KAI's sub-group order: `Less` when `a` goes before `b`.
    fn order(&self, a: usize, b: usize, s: &dyn PodState) -> Ordering {
        let (ac, at) = (self.count(a, s), self.needed(a));
        let (bc, bt) = (self.count(b, s), self.needed(b));
        match (ac >= at, bc >= bt) {
            // KAI leaves these tied (and Go's sort breaks ties at random); a member with the
            // pods to start goes first, so a gang is not held back by one that cannot.
            (false, false) => return self.has_enough(b).cmp(&self.has_enough(a)),
            (false, true) => return Ordering::Less,
            (true, false) => return Ordering::Greater,
            (true, true) => {}
        }
        match (at, bt) {
            (0, 0) => ac.cmp(&bc),
            (0, _) => Ordering::Greater,
            (_, 0) => Ordering::Less,
            // ac/at against bc/bt, without division.
            _ => (ac * bt).cmp(&(bc * at)),
        }
    }

    /// A set's children in the sub-group order (stable: ties keep the written order).
    fn ordered(&self, m: usize, s: &dyn PodState) -> Vec<usize> {
        let Kind::Set { children, .. } = &self.members[m].kind else {
            return Vec::new();
        };
        let mut children = children.clone();
        children.sort_by(|&a, &b| self.order(a, b, s));
        children
    }

    /// The pods to place together next (KAI's `GetTasksToAllocate`): enough to satisfy every
    /// unsatisfied set along the way, or one more pod when all are satisfied; none when the
    /// pending pods cannot satisfy what they must.
    pub(crate) fn next_pods(&self, s: &dyn PodState) -> Vec<usize> {
        let mut out = Vec::new();
        if self.collect(0, s, &mut out) {
            out
        } else {
            Vec::new()
        }
    }

    /// Adds a member's next pods to `out`; false when a pod set cannot reach its minimum.
    fn collect(&self, m: usize, s: &dyn PodState, out: &mut Vec<usize>) -> bool {
        match &self.members[m].kind {
            Kind::Pods { min, pods, .. } => {
                let active = self.count(m, s);
                let need = (*min as usize).saturating_sub(active).max(1);
                let pending = pods.iter().copied().filter(|&p| s.pending(p));
                if active < *min as usize && pending.clone().count() < need {
                    return false;
                }
                out.extend(pending.take(need));
                true
            }
            Kind::Set { .. } => {
                let children = self.ordered(m, s);
                if !self.satisfied(m, s) {
                    for &c in children.iter().take(self.needed(m)) {
                        if !self.satisfied(c, s) && !self.collect(c, s, out) {
                            return false;
                        }
                    }
                    return true;
                }
                // Satisfied already: one more pod from the first member that has one to give.
                // A member that cannot reach its own minimum is passed over (KAI would start
                // part of it, a sub-gang below its minimum).
                for c in children {
                    let before = out.len();
                    if !self.collect(c, s, out) {
                        out.truncate(before);
                    } else if out.len() > before {
                        return true;
                    }
                }
                true
            }
        }
    }

    /// The elastic plugin's state: `Less` when some pod set is below its minimum, `Equal` when
    /// all are exactly at it, `Greater` when none is below and some above (KAI's
    /// `minAvailableState`).
    pub(crate) fn min_state(&self, s: &dyn PodState) -> Ordering {
        let mut state = Ordering::Equal;
        for m in 0..self.members.len() {
            if let Kind::Pods { min, .. } = &self.members[m].kind {
                match self.count(m, s).cmp(&(*min as usize)) {
                    Ordering::Less => return Ordering::Less,
                    Ordering::Greater => state = Ordering::Greater,
                    Ordering::Equal => {}
                }
            }
        }
        state
    }

    /// Whether the job can give up part of itself and run on: a pod set with more pods than
    /// its minimum (KAI's `IsElastic`), or a set that needs fewer members than it has (which
    /// KAI's `GetTasksToEvict` also takes from).
    pub fn is_elastic(&self) -> bool {
        self.members
            .iter()
            .enumerate()
            .any(|(m, member)| match &member.kind {
                Kind::Pods {
                    min,
                    pods,
                    elsewhere,
                } => (*min as usize) < pods.len() + *elsewhere as usize,
                Kind::Set { children, .. } => self.needed(m) < children.len(),
            })
    }

    /// Whether the group's minimum is not met: the part of a stale-gang test the tree decides
    /// (the caller checks that something runs and nothing succeeded).
    ///
    /// Not KAI's `PodGroupInfo.IsStale`, which calls a group stale when any pod set is below
    /// its `minMember`, `minSubGroup` or not: a job that KAI started with three of four
    /// replicas (`minSubGroup: 3`) would be evicted whole a minute later. KAI's own end-to-end
    /// test of `minSubGroup` (`test/e2e/suites/reclaim/reclaim_min_subgroup_specs.go`) expects
    /// such a job to keep running, so the tree's minimum decides here (docs/scheduler.md).
    pub(crate) fn below_minimum(&self, s: &dyn PodState) -> bool {
        !self.satisfied(0, s)
    }

    /// Why the job cannot start whatever room there is: the first set along the way whose
    /// members that have enough pods fall short (KAI's `IsReadyForScheduling`), named by its
    /// first such member when that is a pod set; `None` when it can start.
    pub fn unready(&self) -> Option<Unready> {
        self.unready_at(0)
    }

    /// The first pod-holding sub-group with fewer pods than its minimum, ready or not the
    /// group: why its pods wait once the rest of the group runs without it.
    pub fn short_member(&self) -> Option<Unready> {
        (0..self.members.len()).find_map(|m| match &self.members[m].kind {
            Kind::Pods { .. } => self.unready_at(m),
            Kind::Set { .. } => None,
        })
    }

    fn has_enough(&self, m: usize) -> bool {
        self.unready_at(m).is_none()
    }

    fn unready_at(&self, m: usize) -> Option<Unready> {
        let member = &self.members[m];
        match &member.kind {
            Kind::Pods {
                min,
                pods,
                elsewhere,
            } => {
                let have = (pods.len() + *elsewhere as usize) as u32;
                (have < *min).then(|| Unready {
                    subgroup: member.name.clone(),
                    have,
                    need: *min,
                    pods: true,
                })
            }
            Kind::Set { children, .. } => {
                let ready = children.iter().filter(|&&c| self.has_enough(c)).count();
                if ready >= self.needed(m) {
                    return None;
                }
                // One short member explains it best; a set short only because it asks for more
                // members than it has is itself the cause.
                match children.iter().find_map(|&c| self.unready_at(c)) {
                    Some(u) if ready + 1 == self.needed(m) => Some(u),
                    _ => Some(Unready {
                        subgroup: member.name.clone(),
                        have: ready as u32,
                        need: self.needed(m) as u32,
                        pods: false,
                    }),
                }
            }
        }
    }

    /// The pods a victim gives up next (KAI's `GetTasksToEvict`): one surplus pod of an
    /// elastic pod set, deepest first; else a whole member a set can do without; else, unless
    /// `elastic_only`, every active pod. `newest` picks the pod set's pod to give up; `running`
    /// says which active pods eviction may take.
    pub(crate) fn victim_pods(
        &self,
        s: &dyn PodState,
        elastic_only: bool,
        newest: &dyn Fn(&[usize]) -> Option<usize>,
    ) -> Vec<usize> {
        let surplus = self.surplus(0, s, newest);
        if !surplus.is_empty() || elastic_only {
            return surplus;
        }
        self.active_under(0, s)
    }

    /// KAI's `collectElasticEvictionFromSubGroupSet` (phases 1 and 2) for any member.
    fn surplus(
        &self,
        m: usize,
        s: &dyn PodState,
        newest: &dyn Fn(&[usize]) -> Option<usize>,
    ) -> Vec<usize> {
        match &self.members[m].kind {
            Kind::Pods { min, pods, .. } => {
                if self.count(m, s) <= *min as usize {
                    return Vec::new();
                }
                let active: Vec<usize> = pods.iter().copied().filter(|&p| s.active(p)).collect();
                newest(&active).into_iter().collect()
            }
            Kind::Set { .. } => {
                let satisfied = self.count(m, s);
                if satisfied == 0 {
                    return Vec::new();
                }
                // The reversed sub-group order: the member most above its minimum first.
                let mut members = self.ordered(m, s);
                members.reverse();
                if self.has_surplus(m, s) {
                    for &c in &members {
                        let pods = self.surplus(c, s, newest);
                        if !pods.is_empty() {
                            return pods;
                        }
                    }
                }
                if self.needed(m) < satisfied {
                    for &c in &members {
                        let pods = self.active_under(c, s);
                        if !pods.is_empty() {
                            return pods;
                        }
                    }
                }
                Vec::new()
            }
        }
    }

    /// KAI's `hasElasticSurplusInSubGroupSet`.
    fn has_surplus(&self, m: usize, s: &dyn PodState) -> bool {
        match &self.members[m].kind {
            Kind::Pods { min, .. } => self.count(m, s) > *min as usize,
            Kind::Set { children, .. } => {
                self.count(m, s) > self.needed(m)
                    || children.iter().any(|&c| self.has_surplus(c, s))
            }
        }
    }

    /// Every active pod under a member.
    fn active_under(&self, m: usize, s: &dyn PodState) -> Vec<usize> {
        match &self.members[m].kind {
            Kind::Pods { pods, .. } => pods.iter().copied().filter(|&p| s.active(p)).collect(),
            Kind::Set { children, .. } => children
                .iter()
                .flat_map(|&c| self.active_under(c, s))
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::{Pod, SubGroup};
    use std::collections::BTreeSet;

    /// Which pods are active (bound or placed) and which are pending; others are neither.
    struct State {
        active: BTreeSet<usize>,
        pending: BTreeSet<usize>,
    }

    impl PodState for State {
        fn active(&self, pod: usize) -> bool {
            self.active.contains(&pod)
        }
        fn pending(&self, pod: usize) -> bool {
            self.pending.contains(&pod)
        }
    }

    fn sub(
        name: &str,
        parent: Option<&str>,
        min_member: Option<u32>,
        min_sub: Option<u32>,
    ) -> SubGroup {
        SubGroup {
            name: name.into(),
            parent: parent.map(str::to_string),
            min_member,
            min_sub_group: min_sub,
            ..SubGroup::default()
        }
    }

    /// A gang whose pods are `(sub-group label, active)`, pod i being index i.
    fn gang(
        min_sub_group: Option<u32>,
        subs: Vec<SubGroup>,
        pods: &[(&str, bool)],
    ) -> (Gang, State, Vec<(usize, String)>) {
        let snapshot = Snapshot {
            pods: pods
                .iter()
                .enumerate()
                .map(|(i, (label, _))| Pod {
                    name: format!("p{i}"),
                    labels: [(SUBGROUP_LABEL.to_string(), label.to_string())].into(),
                    ..Pod::default()
                })
                .collect(),
            ..Snapshot::default()
        };
        let group = PodGroup {
            sub_groups: subs,
            min_sub_group,
            ..PodGroup::default()
        };
        let all: Vec<usize> = (0..pods.len()).collect();
        let (gang, stray) = Gang::build(&group, &snapshot, &all, &[]).expect("sub-groups");
        let state = State {
            active: (0..pods.len()).filter(|&i| pods[i].1).collect(),
            pending: (0..pods.len()).filter(|&i| !pods[i].1).collect(),
        };
        (gang, state, stray)
    }

    fn newest(pods: &[usize]) -> Option<usize> {
        pods.iter().copied().max()
    }

    #[test]
    fn a_group_without_sub_groups_has_no_tree() {
        assert!(Gang::build(&PodGroup::default(), &Snapshot::default(), &[], &[]).is_none());
    }

    #[test]
    fn min_sub_group_starts_the_first_members_whole() {
        // Three replicas of two pods, two needed: the first two replicas' four pods go together.
        let subs = (0..3)
            .map(|i| sub(&format!("r{i}"), None, Some(2), None))
            .collect();
        let pods = [
            ("r0", false),
            ("r0", false),
            ("r1", false),
            ("r1", false),
            ("r2", false),
            ("r2", false),
        ];
        let (g, s, _) = gang(Some(2), subs, &pods);
        assert_eq!(g.next_pods(&s), [0, 1, 2, 3]);
        assert!(g.below_minimum(&s));
        assert_eq!(g.min_state(&s), Ordering::Less);
    }

    #[test]
    fn once_satisfied_the_unsatisfied_member_comes_next_whole() {
        // r0 and r1 run: the minimum (2) is met; r2's two pods are the next unit, together.
        let subs = (0..3)
            .map(|i| sub(&format!("r{i}"), None, Some(2), None))
            .collect();
        let pods = [
            ("r0", true),
            ("r0", true),
            ("r1", true),
            ("r1", true),
            ("r2", false),
            ("r2", false),
        ];
        let (g, s, _) = gang(Some(2), subs, &pods);
        assert_eq!(g.next_pods(&s), [4, 5]);
        assert!(!g.below_minimum(&s), "3 of 4 replicas met is not stale");
    }

    #[test]
    fn a_member_that_cannot_start_is_passed_over_once_satisfied() {
        // r1 has one pod of the two it needs; r2 is an elastic pod set with a pending pod.
        let subs = vec![
            sub("r0", None, Some(1), None),
            sub("r1", None, Some(2), None),
            sub("r2", None, Some(0), None),
        ];
        let pods = [("r0", true), ("r1", false), ("r2", false)];
        let (g, s, _) = gang(Some(1), subs, &pods);
        assert_eq!(g.next_pods(&s), [2]);
        // The group can start; r1 is what its waiting pod lacks.
        assert_eq!(g.unready(), None);
        assert_eq!(
            g.short_member(),
            Some(Unready {
                subgroup: "r1".into(),
                have: 1,
                need: 2,
                pods: true
            })
        );
    }

    #[test]
    fn an_unsatisfiable_member_in_the_gang_phase_places_nothing() {
        // Both members are needed; r1's pending pods cannot reach its minimum.
        let subs = vec![
            sub("r0", None, Some(1), None),
            sub("r1", None, Some(2), None),
        ];
        let (g, s, _) = gang(None, subs, &[("r0", false), ("r1", false)]);
        assert_eq!(g.next_pods(&s), Vec::<usize>::new());
        assert_eq!(
            g.unready(),
            Some(Unready {
                subgroup: "r1".into(),
                have: 1,
                need: 2,
                pods: true
            })
        );
    }

    #[test]
    fn sub_group_order_is_kais() {
        // KAI's SubGroupOrderFn: unsatisfied first, then required before optional, then the
        // lower ratio of satisfied to required.
        let subs = vec![
            sub("opt", None, Some(0), None),
            sub("high", None, Some(1), None),
            sub("low", None, Some(2), None),
            sub("short", None, Some(3), None),
        ];
        let pods = [
            ("opt", true),
            ("high", true),
            ("high", true),
            ("high", true),
            ("low", true),
            ("low", true),
            ("short", true),
            ("short", false),
            ("short", false),
        ];
        let (g, s, _) = gang(Some(0), subs, &pods);
        let names: Vec<&str> = g
            .ordered(0, &s)
            .iter()
            .map(|&m| g.members[m].name.as_str())
            .collect();
        // short: 1 of 3 (unsatisfied); low: 2/2 = 1; high: 3/1 = 3; opt: optional, last.
        assert_eq!(names, ["short", "low", "high", "opt"]);
    }

    #[test]
    fn a_victim_gives_a_surplus_pod_then_a_surplus_member_then_everything() {
        // r0 has a pod above its minimum; the group needs one replica of two.
        let subs = vec![
            sub("r0", None, Some(1), None),
            sub("r1", None, Some(2), None),
        ];
        let pods = [("r0", true), ("r0", true), ("r1", true), ("r1", true)];
        let (g, mut s, _) = gang(Some(1), subs, &pods);
        assert_eq!(
            g.victim_pods(&s, false, &newest),
            [1],
            "the surplus pod of r0"
        );
        s.active.remove(&1);
        // No pod surplus now: a whole replica goes, the one most above its minimum first
        // (both at a ratio of 1: the later one, as written).
        assert_eq!(g.victim_pods(&s, false, &newest), [2, 3]);
        assert_eq!(g.victim_pods(&s, true, &newest), [2, 3], "still elastic");
        s.active.remove(&2);
        s.active.remove(&3);
        // At its minimum: everything, unless only elastic victims are allowed.
        assert_eq!(g.victim_pods(&s, false, &newest), [0]);
        assert_eq!(g.victim_pods(&s, true, &newest), Vec::<usize>::new());
        assert!(g.is_elastic());
    }

    #[test]
    fn nested_sets_need_their_own_minimum() {
        let subs = vec![
            sub("decode", None, None, Some(2)),
            sub("leaders", Some("decode"), Some(1), None),
            sub("workers", Some("decode"), Some(2), None),
        ];
        let pods = [
            ("leaders", false),
            ("workers", false),
            ("workers", false),
            ("workers", false),
        ];
        let (g, s, _) = gang(None, subs, &pods);
        // Leader and the two workers of the minimum; the third worker later.
        assert_eq!(g.next_pods(&s), [0, 1, 2]);
        assert!(g.is_elastic(), "a third worker above the minimum of two");
    }

    #[test]
    fn pods_naming_no_sub_group_are_stray() {
        let subs = vec![sub("workers", None, Some(1), None)];
        let (_, _, stray) = gang(None, subs, &[("workers", false), ("workrs", false)]);
        assert_eq!(stray, [(1, "workrs".to_string())]);
    }
}
