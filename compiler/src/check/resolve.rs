//! Second pass: the rules that need the whole policy — duplicates across files, the queue tree,
//! references, sums of quotas, namespace ownership and semantic traps — and, when nothing is
//! wrong, the checked [`Policy`].

use std::collections::HashMap;

use super::decl::*;
use super::read::did_you_mean;
use crate::diagnostics::{Code, Diagnostic, Label, Severity};
use crate::model::{self, Bound, Cluster, Oversubscription, Policy, Queue};
use crate::quantity::{ResourceKind, format_quantity};
use crate::source::SourceSet;

/// Most queues one policy may declare.
pub const MAX_QUEUES: usize = 50_000;

/// Most related places listed under one diagnostic.
const MAX_SECONDARY: usize = 8;

/// Most "did you mean" searches one run makes: past it, unknown names get the plain help, so a
/// hostile policy with thousands of unknown names stays cheap.
const MAX_SUGGESTIONS: usize = 100;

pub(super) struct Resolver<'a> {
    pub decls: &'a Decls,
    pub sources: &'a SourceSet,
    /// Texts of files that failed to parse: a reference to a name written in one of them may
    /// be defined there, so it is not reported as unknown.
    pub unread: &'a [&'a str],
    pub diags: &'a mut Vec<Diagnostic>,
    /// "Did you mean" searches made so far.
    pub suggestions: usize,
}

/// An amount with its unit, for sentences: "24.5 GPUs", "500m CPU", "960Gi of memory".
fn amount(v: i128, kind: ResourceKind) -> String {
    let v = i64::try_from(v).unwrap_or(i64::MAX);
    match kind {
        ResourceKind::Gpu => format!(
            "{} GPU{}",
            format_quantity(v, kind),
            if v == 1000 { "" } else { "s" }
        ),
        ResourceKind::Cpu => format!("{} CPU", format_quantity(v, kind)),
        ResourceKind::Memory => format!("{} of memory", format_quantity(v, kind)),
    }
}

/// How sentences name a resource: "GPUs", "CPU", "memory".
fn noun(kind: ResourceKind) -> &'static str {
    match kind {
        ResourceKind::Gpu => "GPUs",
        ResourceKind::Cpu => "CPU",
        ResourceKind::Memory => "memory",
    }
}

/// "\"a\", \"b\" and \"c\"".
fn and_list(names: &[&str]) -> String {
    let quoted: Vec<String> = names.iter().map(|n| format!("\"{n}\"")).collect();
    match quoted.split_last() {
        None => String::new(),
        Some((last, [])) => last.clone(),
        Some((last, rest)) => format!("{} and {last}", rest.join(", ")),
    }
}

/// "an unlimited amount of GPUs".
fn unlimited(kind: ResourceKind) -> &'static str {
    match kind {
        ResourceKind::Gpu => "an unlimited amount of GPUs",
        ResourceKind::Cpu => "an unlimited amount of CPU",
        ResourceKind::Memory => "an unlimited amount of memory",
    }
}

fn bound_text(b: Bound, kind: ResourceKind) -> String {
    match b {
        Bound::Finite(v) => amount(v as i128, kind),
        Bound::Unlimited => "unlimited".to_string(),
    }
}

/// What the first pass of the tree found out about each queue.
struct Tree {
    /// The effective parent of each queue.
    parents: Vec<Option<usize>>,
    /// Whether the queue takes part in the tree (false: a duplicate, unnamed, or in a cycle).
    keep: Vec<bool>,
    /// Its `parent=` names no queue: it is checked on its own, but not counted as top-level.
    detached: Vec<bool>,
    /// Some queue's unknown `parent=` probably meant this one (the did-you-mean target).
    wanted_as_parent: Vec<bool>,
    /// Some queue names this one as its parent, even one left out of the tree (too deep, or a
    /// rejected duplicate).
    has_children: Vec<bool>,
}

impl Resolver<'_> {
    /// A likely intended name, while the run's budget of searches lasts.
    fn suggest<'c>(
        &mut self,
        word: &str,
        candidates: impl IntoIterator<Item = &'c str>,
    ) -> Option<&'c str> {
        if self.suggestions >= MAX_SUGGESTIONS {
            return None;
        }
        self.suggestions += 1;
        did_you_mean(word, candidates)
    }

    /// Whether a name could be declared where the checker could not see it: in a file that
    /// did not parse, or in a declaration that had an error of its own.
    fn maybe_unread(&self, name: &str) -> bool {
        self.unread.iter().any(|text| text.contains(name))
            || self.decls.half_read.iter().any(|n| n == name)
    }

    fn push(&mut self, d: Diagnostic) {
        self.diags.push(d);
    }

    /// Reports names defined twice; the result says which declarations to keep. Nameless
    /// declarations (already reported) are not kept.
    fn duplicates<'d>(&mut self, what: &str, items: impl Iterator<Item = &'d Named>) -> Vec<bool> {
        let mut first: HashMap<&str, &Label> = HashMap::new();
        let mut keep = Vec::new();
        for named in items {
            if named.value.is_empty() {
                keep.push(false);
            } else if let Some(prev) = first.get(named.value.as_str()) {
                self.push(
                    Diagnostic::error(
                        Code::Duplicate,
                        format!("{what} \"{}\" is defined twice", named.value),
                        named.at.clone().with_text("defined again here"),
                    )
                    .with_secondary((*prev).clone().with_text("first defined here"))
                    .with_help(format!(
                        "{what} names are unique across the whole policy: rename one, or merge them"
                    )),
                );
                keep.push(false);
            } else {
                first.insert(&named.value, &named.at);
                keep.push(true);
            }
        }
        keep
    }

    pub fn run(mut self) -> Option<Policy> {
        let d = self.decls;
        for extra in d.clusters.iter().skip(1) {
            self.push(
                Diagnostic::error(
                    Code::Duplicate,
                    "the policy has two `cluster` nodes",
                    extra.at.clone().with_text("second cluster node"),
                )
                .with_secondary(d.clusters[0].at.clone().with_text("first cluster node"))
                .with_help(
                    "a policy describes one cluster: merge the settings into one `cluster` node",
                ),
            );
        }
        let cluster = d.clusters.first();
        let pc_keep = self.duplicates("priority class", d.priority_classes.iter().map(|p| &p.name));
        let pl_keep = self.duplicates("placement", d.placements.iter().map(|p| &p.name));
        let q_keep = self.duplicates("queue", d.queues.iter().map(|q| &q.name));

        let by_name: HashMap<&str, usize> = d
            .queues
            .iter()
            .enumerate()
            .filter(|(i, _)| q_keep[*i])
            .map(|(i, q)| (q.name.value.as_str(), i))
            .collect();
        let tree = self.parents(&by_name, q_keep);
        let order = self.tree(&tree.parents, &tree.keep);
        let parents = &tree.parents;

        let mut children: Vec<Vec<usize>> = vec![Vec::new(); d.queues.len()];
        for &i in &order {
            if let Some(p) = parents[i] {
                children[p].push(i);
            }
        }
        let pc_names: Vec<&str> = pc_keep_names(&d.priority_classes, &pc_keep);
        let pl_names: Vec<&str> = d
            .placements
            .iter()
            .zip(&pl_keep)
            .filter(|(_, k)| **k)
            .map(|(p, _)| p.name.value.as_str())
            .collect();
        for &i in &order {
            self.queue_rules(i, &tree, &children, &pc_names, &pl_names);
        }
        let oversubscription = cluster.map_or(Oversubscription::Error, |c| c.oversubscription);
        for &i in &order {
            self.children_quota(i, &children[i], oversubscription);
        }
        if let Some(c) = cluster {
            let roots: Vec<usize> = order
                .iter()
                .copied()
                .filter(|&i| parents[i].is_none() && !tree.detached[i])
                .collect();
            self.capacity(c, &roots);
        }
        self.namespace_defaults(&order, &children);

        if self.diags.iter().any(|d| d.severity == Severity::Error) {
            return None;
        }
        Some(self.build(cluster, &order, parents, &children))
    }

    /// The effective parent of every queue, reporting bad `parent=` and cycles.
    /// Queues in a cycle lose their place in the tree (`keep` turns false).
    fn parents(&mut self, by_name: &HashMap<&str, usize>, mut keep: Vec<bool>) -> Tree {
        let d = self.decls;
        let n = d.queues.len();
        let mut parents: Vec<Option<usize>> = vec![None; n];
        let mut detached = vec![false; n];
        let mut wanted_as_parent = vec![false; n];
        let mut child_rejected = vec![false; n];
        for (i, q) in d.queues.iter().enumerate() {
            parents[i] = match (q.nested_in, &q.parent) {
                (Some(outer), Some(p)) => {
                    let outer_name = &d.queues[outer].name;
                    self.push(
                        Diagnostic::error(
                            Code::NestedWithParent,
                            format!(
                                "queue \"{}\" is nested inside \"{}\" and also has parent=\"{}\"",
                                q.name.value, outer_name.value, p.value
                            ),
                            p.at.clone().with_text("parent= on a nested queue"),
                        )
                        .with_secondary(outer_name.at.clone().with_text("nested inside this queue"))
                        .with_help(
                            "a queue has one parent: remove `parent=`, or move the queue to the top level of a file",
                        ),
                    );
                    Some(outer)
                }
                (Some(outer), None) => Some(outer),
                (None, Some(p)) => {
                    match by_name.get(p.value.as_str()) {
                        Some(&target) => Some(target),
                        None => {
                            detached[i] = true;
                            let suggestion = self.suggest(&p.value, by_name.keys().copied());
                            if let Some(s) = suggestion {
                                wanted_as_parent[by_name[s]] = true;
                            }
                            if !self.maybe_unread(&p.value) {
                                let help = match suggestion {
                                Some(s) => format!("did you mean \"{s}\"?"),
                                None => "define a queue with that name, or fix the name in `parent=`"
                                    .to_string(),
                            };
                                self.push(
                                Diagnostic::error(
                                    Code::UnknownParent,
                                    format!(
                                        "queue \"{}\" names parent \"{}\", but no queue has that name",
                                        q.name.value, p.value
                                    ),
                                    p.at.clone().with_text("unknown queue"),
                                )
                                .with_help(help),
                            );
                            }
                            None
                        }
                    }
                }
                (None, None) => {
                    detached[i] = q.parent_unreadable;
                    None
                }
            };
            // A rejected duplicate leaves the tree, but its parent still has a child in the
            // user's eyes: calling that parent an unreachable leaf would only follow from the
            // duplicate, which is reported already.
            if !keep[i] {
                if let Some(p) = parents[i] {
                    child_rejected[p] = true;
                }
                parents[i] = None;
            }
        }
        // A cycle can only go through parent= links; report each cycle once, at its first member.
        let mut state = vec![0u8; n]; // 0 unseen, 1 on the current path, 2 done
        for start in 0..n {
            let mut path = Vec::new();
            let mut at = Some(start);
            while let Some(i) = at {
                if state[i] == 2 {
                    break;
                }
                if state[i] == 1 {
                    let cycle_start = path.iter().position(|&p| p == i).unwrap_or(0);
                    let cycle: Vec<usize> = path[cycle_start..].to_vec();
                    self.report_cycle(&cycle);
                    for &c in &cycle {
                        keep[c] = false;
                    }
                    break;
                }
                state[i] = 1;
                path.push(i);
                at = parents[i];
            }
            for p in path {
                state[p] = 2;
            }
        }
        let mut has_children = child_rejected;
        for p in parents.iter().flatten() {
            has_children[*p] = true;
        }
        Tree {
            parents,
            keep,
            detached,
            wanted_as_parent,
            has_children,
        }
    }

    fn report_cycle(&mut self, cycle: &[usize]) {
        let d = self.decls;
        let first = *cycle.iter().min().unwrap_or(&cycle[0]);
        let q = &d.queues[first];
        let closing = q
            .parent
            .as_ref()
            .map_or(q.name.at.clone(), |p| p.at.clone());
        if cycle.len() == 1 {
            self.push(
                Diagnostic::error(
                    Code::ParentCycle,
                    format!("queue \"{}\" names itself as its parent", q.name.value),
                    closing.with_text("parent= names this queue itself"),
                )
                .with_help("remove `parent=` to make it a top-level queue, or name the queue it belongs under"),
            );
            return;
        }
        let start = cycle.iter().position(|&c| c == first).unwrap_or(0);
        let names: Vec<&str> = (start..=start + cycle.len())
            .map(|at| d.queues[cycle[at % cycle.len()]].name.value.as_str())
            .collect();
        let mut diag = Diagnostic::error(
            Code::ParentCycle,
            format!(
                "queues form a cycle through parent=: {}",
                names.join(" → ")
            ),
            closing.with_text("this parent= closes the cycle"),
        )
        .with_help(
            "a queue cannot be its own ancestor: point one of these parent= at a queue outside the cycle, or remove it",
        );
        for &c in cycle.iter().filter(|&&c| c != first).take(MAX_SECONDARY) {
            if let Some(p) = &d.queues[c].parent {
                diag = diag.with_secondary(p.at.clone().with_text(format!(
                    "\"{}\" points on from here",
                    d.queues[c].name.value
                )));
            }
        }
        self.push(diag);
    }

    /// Parents-first order (depth first, declaration order), enforcing depth and count limits.
    fn tree(&mut self, parents: &[Option<usize>], keep: &[bool]) -> Vec<usize> {
        let d = self.decls;
        let mut children: Vec<Vec<usize>> = vec![Vec::new(); d.queues.len()];
        let mut roots = Vec::new();
        for i in 0..d.queues.len() {
            if !keep[i] || under_dropped(i, parents, keep) {
                continue;
            }
            match parents[i] {
                Some(p) => children[p].push(i),
                None => roots.push(i),
            }
        }
        let mut order = Vec::new();
        let mut stack: Vec<(usize, usize)> = roots.into_iter().rev().map(|r| (r, 0)).collect();
        let mut too_deep = false;
        while let Some((i, depth)) = stack.pop() {
            if depth >= super::read::MAX_QUEUE_DEPTH {
                if !too_deep {
                    too_deep = true;
                    self.push(
                        Diagnostic::error(
                            Code::PolicyTooLarge,
                            format!(
                                "queue \"{}\" is {} levels deep; at most {} are allowed",
                                d.queues[i].name.value,
                                depth + 1,
                                super::read::MAX_QUEUE_DEPTH
                            ),
                            d.queues[i].name.at.clone().with_text("too deep"),
                        )
                        .with_help(
                            "flatten the hierarchy; queue trees are rarely deeper than 4 levels",
                        ),
                    );
                }
                continue;
            }
            if order.len() == MAX_QUEUES {
                self.push(
                    Diagnostic::error(
                        Code::PolicyTooLarge,
                        format!("the policy declares more than {MAX_QUEUES} queues"),
                        d.queues[i].name.at.clone().with_text("one queue too many"),
                    )
                    .with_help("split the cluster into several policies, or merge small queues"),
                );
                break;
            }
            order.push(i);
            stack.extend(children[i].iter().rev().map(|&c| (c, depth + 1)));
        }
        order
    }

    fn queue_rules(
        &mut self,
        i: usize,
        tree: &Tree,
        children: &[Vec<usize>],
        pcs: &[&str],
        pls: &[&str],
    ) {
        let d = self.decls;
        let q = &d.queues[i];
        let name = &q.name.value;
        let leaf = children[i].is_empty();
        for kind in ResourceKind::ALL {
            let Some(r) = q.resource(kind) else { continue };
            let k = kind.name();
            let (quota, limit) = (r.policy.quota, r.policy.limit);
            let below = match (quota, limit) {
                (Bound::Finite(qv), Bound::Finite(lv)) if lv < qv => Some((
                    format!(
                        "queue \"{name}\" has a {k} limit of {}, below its {k} quota of {}",
                        format_quantity(lv, kind),
                        format_quantity(qv, kind)
                    ),
                    "a limit caps what the queue may use, so it must be at least its quota: raise the limit or lower the quota".to_string(),
                )),
                (Bound::Unlimited, Bound::Finite(lv)) => Some((
                    format!(
                        "queue \"{name}\" has an unlimited {k} quota but a {k} limit of {}",
                        format_quantity(lv, kind)
                    ),
                    format!(
                        "a limit caps the quota too: remove `limit=` to keep the quota unlimited, or give a quota of at most {}",
                        format_quantity(lv, kind)
                    ),
                )),
                _ => None,
            };
            if let Some((message, help)) = below {
                let mut diag = Diagnostic::error(
                    Code::LimitBelowQuota,
                    message,
                    r.limit_at
                        .clone()
                        .unwrap_or_else(|| r.at.clone())
                        .with_text("limit below quota"),
                )
                .with_help(help);
                if let Some(qa) = &r.quota_at {
                    diag = diag.with_secondary(qa.clone().with_text("quota set here"));
                }
                self.push(diag);
            }
            // KAI refuses any request above a queue's limit (capacity_policy/max_allowed_check.go,
            // isOverLimit: limit < allocated + requested), so a limit of 0 shuts the resource off.
            if r.policy.limit == Bound::Finite(0) {
                self.push(
                    Diagnostic::warning(
                        Code::ZeroLimit,
                        format!(
                            "queue \"{name}\" has a {k} limit of 0, so it can never run a pod that asks for {}",
                            noun(kind)
                        ),
                        r.limit_at.clone().unwrap_or_else(|| r.at.clone()).with_text("limit 0"),
                    )
                    .with_help(format!(
                        "to leave {} ungoverned here, drop the `{k}` line; to allow some, give a limit above 0; keep `limit=0` only to forbid pods that ask for {} in this queue",
                        noun(kind),
                        noun(kind)
                    )),
                );
            }
            if quota == Bound::Finite(0) && r.policy.weight == 0.0 {
                self.push(
                    Diagnostic::warning(
                        Code::QueueCannotRun,
                        format!(
                            "queue \"{name}\" has a {k} quota of 0 and an over-quota weight of 0, so its fair share of {} is always 0",
                            noun(kind)
                        ),
                        r.weight_at
                            .clone()
                            .unwrap_or_else(|| r.at.clone())
                            .with_text("weight 0 with quota 0"),
                    )
                    .with_help(format!(
                        "its preemptible jobs can use {} only while no other queue wants them, and lose them first; its non-preemptible jobs never start (they run only within quota); give the queue a {k} quota or a weight above 0, or remove the queue",
                        noun(kind)
                    )),
                );
            }
        }
        // Whether some queue hangs under this one, even one left out of the tree (too deep),
        // or was probably meant to (a misspelt parent=), or could not be read.
        let has_children =
            !leaf || q.incomplete || tree.wanted_as_parent[i] || tree.has_children[i];
        if !leaf {
            if let Some(first) = q.namespaces.first() {
                self.push(
                    Diagnostic::error(
                        Code::NamespacesOnParent,
                        format!("queue \"{name}\" has child queues, so it cannot take namespaces"),
                        first.at.clone().with_text("namespaces on a parent queue"),
                    )
                    .with_help(
                        "only leaf queues accept work: move `namespaces` into one of its child queues",
                    ),
                );
            }
        } else if q.namespaces.is_empty() && !has_children {
            self.push(
                Diagnostic::warning(
                    Code::UnreachableQueue,
                    format!("leaf queue \"{name}\" lists no namespaces, so no pod may use it"),
                    q.name.at.clone().with_text("unreachable queue"),
                )
                .with_help(
                    "add `namespaces \"team-ns\"` to route a team's pods here, or `namespaces \"*\"` to let any namespace name this queue",
                ),
            );
        }
        if let Some(pc) = &q.default_priority_class
            && !pcs.contains(&pc.value.as_str())
            && !self.maybe_unread(&pc.value)
        {
            self.unknown_ref(Code::UnknownPriorityClass, "priority class", pc, pcs);
        }
        if leaf {
            self.non_preemptible_trap(i, &tree.parents, pcs);
        }
        if let Some(pl) = &q.placement
            && !pls.contains(&pl.value.as_str())
            && !self.maybe_unread(&pl.value)
        {
            self.unknown_ref(Code::UnknownPlacement, "placement", pl, pls);
        }
    }

    fn unknown_ref(&mut self, code: Code, what: &str, named: &Named, known: &[&str]) {
        let node = what.replace(' ', "-");
        let help = match self.suggest(&named.value, known.iter().copied()) {
            Some(s) => format!("did you mean \"{s}\"?"),
            None if code == Code::UnknownPlacement
                && matches!(named.value.as_str(), "binpack" | "spread") =>
            {
                format!(
                    "a queue's `placement` names a top-level `placement` node; \"{0}\" is a strategy: declare `placement \"{0}-all\" strategy={0}` and name that",
                    named.value
                )
            }
            None if known.is_empty() => {
                format!("the policy defines no {what}; declare one with a top-level `{node}` node")
            }
            None => format!(
                "the policy defines {}; name one of those, or declare \"{}\" with a top-level `{node}` node",
                and_list(known),
                named.value
            ),
        };
        self.push(
            Diagnostic::error(
                code,
                format!("no {what} is named \"{}\"", named.value),
                named.at.clone().with_text(format!("unknown {what}")),
            )
            .with_help(help),
        );
    }

    /// A leaf queue whose default priority class (its own, or inherited from the nearest
    /// ancestor that sets one) is non-preemptible, while the queue or an ancestor guarantees
    /// 0 of a resource: jobs of that class never fit in quota, so they never start.
    fn non_preemptible_trap(&mut self, leaf: usize, parents: &[Option<usize>], pcs: &[&str]) {
        let d = self.decls;
        let mut owner = Some(leaf);
        let pc = loop {
            let Some(j) = owner else { return };
            if let Some(pc) = &d.queues[j].default_priority_class {
                break pc;
            }
            owner = parents[j];
        };
        let owner = owner.unwrap_or(leaf);
        let known = pcs.contains(&pc.value.as_str());
        let Some(class) = d
            .priority_classes
            .iter()
            .find(|c| known && c.name.value == pc.value)
        else {
            return;
        };
        if class.preemptible {
            return;
        }
        let leaf_name = &d.queues[leaf].name.value;
        let mut at = Some(leaf);
        while let Some(j) = at {
            for kind in ResourceKind::ALL {
                let Some(r) = d.queues[j].resource(kind) else {
                    continue;
                };
                if r.quota() != Bound::Finite(0) {
                    continue;
                }
                let k = kind.name();
                let whose = if j == leaf {
                    "it".to_string()
                } else {
                    format!("its ancestor \"{}\"", d.queues[j].name.value)
                };
                let inherited = if owner == leaf {
                    String::new()
                } else {
                    format!(" (set on \"{}\")", d.queues[owner].name.value)
                };
                let primary = if owner == leaf {
                    pc.at.clone().with_text("non-preemptible default")
                } else {
                    d.queues[leaf]
                        .name
                        .at
                        .clone()
                        .with_text("inherits a non-preemptible default")
                };
                let mut diag = Diagnostic::warning(
                    Code::NonPreemptibleWithoutQuota,
                    format!(
                        "queue \"{leaf_name}\" runs jobs as non-preemptible \"{}\" by default{inherited}, but {whose} has a {k} quota of 0: those jobs can never start",
                        pc.value
                    ),
                    primary,
                )
                .with_help(format!(
                    "non-preemptible jobs only run inside quota: give the queue (and its ancestors) a {k} quota, or make its default priority class a preemptible one"
                ));
                if owner != leaf {
                    diag = diag.with_secondary(pc.at.clone().with_text("default set here"));
                }
                diag = diag.with_secondary(r.quota_label().with_text("quota 0 here"));
                self.push(diag);
                return;
            }
            at = parents[j];
        }
    }

    fn children_quota(&mut self, parent: usize, children: &[usize], mode: Oversubscription) {
        let d = self.decls;
        let severity = match mode {
            Oversubscription::Error => Severity::Error,
            Oversubscription::Warn => Severity::Warning,
            Oversubscription::Allow => return,
        };
        let p = &d.queues[parent];
        for kind in ResourceKind::ALL {
            let Some(pr) = p.resource(kind) else { continue };
            let Bound::Finite(pq) = pr.quota() else {
                continue;
            };
            let governed: Vec<(&QueueDecl, &ResourceDecl)> = children
                .iter()
                .filter_map(|&c| d.queues[c].resource(kind).map(|r| (&d.queues[c], r)))
                .collect();
            let unlimited_child = governed.iter().any(|(_, r)| r.quota() == Bound::Unlimited);
            let sum: i128 = governed
                .iter()
                .filter_map(|(_, r)| r.quota().finite())
                .map(i128::from)
                .sum();
            if !unlimited_child && sum <= pq as i128 {
                continue;
            }
            let total = if unlimited_child {
                unlimited(kind).to_string()
            } else {
                format!("{} in total", amount(sum, kind))
            };
            let k = kind.name();
            let help = match mode {
                Oversubscription::Warn => format!(
                    "the children cannot all get their quota at once; lower their {k} quotas or raise this one, or set `oversubscription \"allow\"` in the `cluster` node to accept this silently"
                ),
                _ => format!(
                    "lower the children's {k} quotas or raise this one; if promising more than the parent has is intended, set `oversubscription \"warn\"` or `\"allow\"` in the `cluster` node"
                ),
            };
            let mut diag = Diagnostic::new(
                Code::ChildrenOverQuota,
                severity,
                format!(
                    "the children of queue \"{}\" are guaranteed {total}, more than its own quota of {}",
                    p.name.value,
                    amount(pq as i128, kind)
                ),
                pr.quota_label().with_text("parent quota"),
            )
            .with_help(help);
            for (c, r) in governed
                .iter()
                .filter(|(_, r)| r.quota() != Bound::Finite(0))
                .take(MAX_SECONDARY)
            {
                diag = diag.with_secondary(r.quota_label().with_text(format!(
                    "\"{}\": {}",
                    c.name.value,
                    bound_text(r.quota(), kind)
                )));
            }
            self.push(diag);
        }
    }

    fn capacity(&mut self, cluster: &ClusterDecl, roots: &[usize]) {
        let d = self.decls;
        for kind in ResourceKind::ALL {
            let (Some(cap), Some(cap_at)) = (
                *cluster.capacity.get(kind),
                cluster.capacity_at.get(kind).clone(),
            ) else {
                continue;
            };
            let governed: Vec<(&QueueDecl, &ResourceDecl)> = roots
                .iter()
                .filter_map(|&r| d.queues[r].resource(kind).map(|x| (&d.queues[r], x)))
                .collect();
            let unlimited_root = governed.iter().any(|(_, r)| r.quota() == Bound::Unlimited);
            let sum: i128 = governed
                .iter()
                .filter_map(|(_, r)| r.quota().finite())
                .map(i128::from)
                .sum();
            if !unlimited_root && sum <= cap as i128 {
                continue;
            }
            let total = if unlimited_root {
                unlimited(kind).to_string()
            } else {
                format!("{} in total", amount(sum, kind))
            };
            let mut diag = Diagnostic::error(
                Code::OverCapacity,
                format!(
                    "top-level queues are guaranteed {total}, more than the cluster's capacity of {}",
                    amount(cap as i128, kind)
                ),
                cap_at.with_text("declared capacity"),
            )
            .with_help(
                "guarantees must fit in the cluster: lower the top-level quotas, or correct `capacity` if the cluster has grown",
            );
            for (q, r) in governed
                .iter()
                .filter(|(_, r)| r.quota() != Bound::Finite(0))
                .take(MAX_SECONDARY)
            {
                diag = diag.with_secondary(r.quota_label().with_text(format!(
                    "\"{}\": {}",
                    q.name.value,
                    bound_text(r.quota(), kind)
                )));
            }
            self.push(diag);
        }
    }

    fn namespace_defaults(&mut self, order: &[usize], children: &[Vec<usize>]) {
        let d = self.decls;
        let mut owner: HashMap<&str, (&str, &Label)> = HashMap::new();
        for &i in order.iter().filter(|&&i| children[i].is_empty()) {
            let q = &d.queues[i];
            for ns in q.namespaces.iter().filter(|n| n.value != "*") {
                match owner.get(ns.value.as_str()) {
                    Some((other, at)) if *other != q.name.value => {
                        self.push(
                            Diagnostic::error(
                                Code::NamespaceTwice,
                                format!(
                                    "namespace \"{}\" is the default of two queues, \"{other}\" and \"{}\"",
                                    ns.value, q.name.value
                                ),
                                ns.at
                                    .clone()
                                    .with_text(format!("also the default of \"{}\"", q.name.value)),
                            )
                            .with_secondary(
                                (*at).clone()
                                    .with_text(format!("default of \"{other}\" here")),
                            )
                            .with_help(format!(
                                "pods in \"{}\" that name no queue need exactly one home: list it on one of the two queues only; to let its pods also name the other queue explicitly, give that queue `namespaces \"*\"`",
                                ns.value
                            )),
                        );
                    }
                    Some(_) => {}
                    None => {
                        owner.insert(&ns.value, (&q.name.value, &ns.at));
                    }
                }
            }
        }
    }

    fn build(
        &self,
        cluster: Option<&ClusterDecl>,
        order: &[usize],
        parents: &[Option<usize>],
        children: &[Vec<usize>],
    ) -> Policy {
        let d = self.decls;
        let defaults = Cluster::default();
        let cluster = match cluster {
            Some(c) => Cluster {
                name: c.name.clone(),
                scheduler_name: c.scheduler_name.clone().unwrap_or(defaults.scheduler_name),
                queue_label: c.queue_label.clone().unwrap_or(defaults.queue_label),
                capacity: c.capacity,
                placement: c.placement,
                fairness: c.fairness,
                min_runtime: c.min_runtime,
                oversubscription: c.oversubscription,
            },
            None => defaults,
        };
        let origin = |at: &Label| {
            let file = self.sources.get(at.file);
            model::Origin {
                file: file.path.clone(),
                line: file.line_col(at.offset).0,
            }
        };
        let mut position = vec![usize::MAX; d.queues.len()];
        for (pos, &i) in order.iter().enumerate() {
            position[i] = pos;
        }
        let mut queues: Vec<Queue> = Vec::with_capacity(order.len());
        for &i in order {
            let q = &d.queues[i];
            let parent = parents[i].map(|p| position[p]);
            let inherited = parent.map(|p| &queues[p]);
            let mut resources = model::PerResource::default();
            for kind in ResourceKind::ALL {
                *resources.get_mut(kind) = q.resource(kind).map(|r| r.policy);
            }
            let min_runtime = model::MinRuntime {
                preempt: q
                    .min_runtime
                    .preempt
                    .or(inherited.map_or(cluster.min_runtime.preempt, |p: &Queue| {
                        p.min_runtime.preempt
                    })),
                reclaim: q
                    .min_runtime
                    .reclaim
                    .or(inherited.map_or(cluster.min_runtime.reclaim, |p: &Queue| {
                        p.min_runtime.reclaim
                    })),
            };
            let namespaces = model::Namespaces {
                defaults: q
                    .namespaces
                    .iter()
                    .filter(|n| n.value != "*")
                    .map(|n| n.value.clone())
                    .collect(),
                open_to_all: q.namespaces.iter().any(|n| n.value == "*"),
            };
            queues.push(Queue {
                name: q.name.value.clone(),
                display_name: q.display_name.clone(),
                priority: q.priority,
                parent,
                children: children[i].iter().map(|&c| position[c]).collect(),
                depth: inherited.map_or(0, |p| p.depth + 1),
                resources,
                namespaces,
                default_priority_class: q
                    .default_priority_class
                    .as_ref()
                    .map(|n| n.value.clone())
                    .or_else(|| inherited.and_then(|p| p.default_priority_class.clone())),
                placement: q
                    .placement
                    .as_ref()
                    .map(|n| n.value.clone())
                    .or_else(|| inherited.and_then(|p| p.placement.clone())),
                min_runtime,
                labels: q.labels.clone(),
                annotations: q.annotations.clone(),
                origin: origin(&q.name.at),
            });
        }
        Policy {
            cluster,
            priority_classes: d
                .priority_classes
                .iter()
                .map(|p| model::PriorityClass {
                    name: p.name.value.clone(),
                    value: p.value,
                    preemptible: p.preemptible,
                    description: p.description.clone(),
                    origin: origin(&p.at),
                })
                .collect(),
            placements: d
                .placements
                .iter()
                .map(|p| model::Placement {
                    name: p.name.value.clone(),
                    strategy: p.strategy,
                    max_gpus_per_node: p.max_gpus_per_node,
                    topology_required: p.topology_required.clone(),
                    topology_preferred: p.topology_preferred.clone(),
                    origin: origin(&p.at),
                })
                .collect(),
            queues,
        }
    }
}

fn pc_keep_names<'a>(pcs: &'a [PriorityClassDecl], keep: &[bool]) -> Vec<&'a str> {
    pcs.iter()
        .zip(keep)
        .filter(|(_, k)| **k)
        .map(|(p, _)| p.name.value.as_str())
        .collect()
}

/// Whether a queue hangs under a dropped queue (a duplicate, or a member of a cycle).
fn under_dropped(i: usize, parents: &[Option<usize>], keep: &[bool]) -> bool {
    let mut at = parents[i];
    let mut steps = 0;
    while let Some(p) = at {
        if !keep[p] || steps > parents.len() {
            return true;
        }
        at = parents[p];
        steps += 1;
    }
    false
}
