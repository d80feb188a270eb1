//! The policy-wide part of a diff: which queue each namespace's pods land in, the cluster's
//! settings, priority classes and named placements. Each of them changes where or whether pods
//! run, so each is a row of the table and a phrase of the one-line plan.

use std::collections::BTreeMap;

use super::{Change, Shown, Subject, amount, duration, optional, text};
use crate::model::{Oversubscription, Policy, Strategy};
use crate::quantity::ResourceKind;

fn row(subject: Subject, name: &str, what: &str, old: Option<Shown>, new: Option<Shown>) -> Change {
    Change {
        subject,
        name: name.to_string(),
        what: what.to_string(),
        old,
        new,
        delta: None,
    }
}

/// Pushes a row when `old` and `new` differ.
fn differ(out: &mut Vec<Change>, subject: Subject, name: &str, what: &str, old: Shown, new: Shown) {
    if old != new {
        out.push(row(subject, name, what, Some(old), Some(new)));
    }
}

/// Every policy-wide change, in a fixed order: namespaces (by name), cluster settings, priority
/// classes and placements (head order, removed ones last).
pub(super) fn changes(base: &Policy, head: &Policy) -> Vec<Change> {
    let mut out = Vec::new();
    namespaces(base, head, &mut out);
    cluster(base, head, &mut out);
    priority_classes(base, head, &mut out);
    placements(base, head, &mut out);
    out
}

fn namespace_owners(policy: &Policy) -> BTreeMap<&str, &str> {
    let mut owners = BTreeMap::new();
    for q in &policy.queues {
        for ns in &q.namespaces.defaults {
            owners.insert(ns.as_str(), q.name.as_str());
        }
    }
    owners
}

fn namespaces(base: &Policy, head: &Policy, out: &mut Vec<Change>) {
    let (old, new) = (namespace_owners(base), namespace_owners(head));
    let mut names: Vec<&str> = old.keys().chain(new.keys()).copied().collect();
    names.sort_unstable();
    names.dedup();
    for ns in names {
        let (o, n) = (old.get(ns), new.get(ns));
        if o != n {
            let queue = |q: Option<&&str>| q.map(|q| text(*q));
            out.push(row(Subject::Namespace, ns, "queue", queue(o), queue(n)));
        }
    }
}

fn strategy(s: Strategy) -> Shown {
    text(s.as_str())
}

fn oversubscription(o: Oversubscription) -> Shown {
    text(match o {
        Oversubscription::Error => "error",
        Oversubscription::Warn => "warn",
        Oversubscription::Allow => "allow",
    })
}

fn cluster(base: &Policy, head: &Policy, out: &mut Vec<Change>) {
    let (b, h) = (&base.cluster, &head.cluster);
    let mut push =
        |what: &str, old: Shown, new: Shown| differ(out, Subject::Cluster, "", what, old, new);
    push(
        "scheduler name",
        text(&b.scheduler_name),
        text(&h.scheduler_name),
    );
    push("queue label", text(&b.queue_label), text(&h.queue_label));
    for kind in ResourceKind::ALL {
        let cap = |c: Option<i64>| c.map_or(text("not declared"), |v| amount(v, kind));
        let what = format!("{} capacity", kind.name());
        push(
            &what,
            cap(*b.capacity.get(kind)),
            cap(*h.capacity.get(kind)),
        );
    }
    push(
        "gpu placement",
        strategy(b.placement.gpu),
        strategy(h.placement.gpu),
    );
    push(
        "cpu placement",
        strategy(b.placement.cpu),
        strategy(h.placement.cpu),
    );
    let (bf, hf) = (b.fairness, h.fairness);
    match (bf, hf) {
        (Some(bf), Some(hf)) => {
            push(
                "fairness k",
                Shown::Number(bf.k.to_string(), bf.k),
                Shown::Number(hf.k.to_string(), hf.k),
            );
            push(
                "fairness window",
                duration(Some(bf.window)),
                duration(Some(hf.window)),
            );
            push(
                "fairness half-life",
                duration(Some(bf.half_life)),
                duration(Some(hf.half_life)),
            );
        }
        _ => push(
            "fairness",
            Shown::Flag(bf.is_some()),
            Shown::Flag(hf.is_some()),
        ),
    }
    push(
        "preempt min-runtime",
        duration(b.min_runtime.preempt),
        duration(h.min_runtime.preempt),
    );
    push(
        "reclaim min-runtime",
        duration(b.min_runtime.reclaim),
        duration(h.min_runtime.reclaim),
    );
    push(
        "oversubscription",
        oversubscription(b.oversubscription),
        oversubscription(h.oversubscription),
    );
}

fn priority_classes(base: &Policy, head: &Policy, out: &mut Vec<Change>) {
    let value = |v: i32| Shown::Number(v.to_string(), v as f64);
    for hp in &head.priority_classes {
        let name = hp.name.as_str();
        match base.priority_class(name) {
            None => out.push(row(
                Subject::PriorityClass,
                name,
                "value",
                None,
                Some(value(hp.value)),
            )),
            Some(bp) => {
                let s = Subject::PriorityClass;
                differ(out, s, name, "value", value(bp.value), value(hp.value));
                differ(
                    out,
                    s,
                    name,
                    "preemptible",
                    Shown::Flag(bp.preemptible),
                    Shown::Flag(hp.preemptible),
                );
            }
        }
    }
    for bp in &base.priority_classes {
        if head.priority_class(&bp.name).is_none() {
            out.push(row(
                Subject::PriorityClass,
                &bp.name,
                "value",
                Some(value(bp.value)),
                None,
            ));
        }
    }
}

fn placements(base: &Policy, head: &Policy, out: &mut Vec<Change>) {
    let find = |p: &Policy, name: &str| p.placements.iter().position(|x| x.name == name);
    for hp in &head.placements {
        let name = hp.name.as_str();
        let s = Subject::Placement;
        match find(base, name).map(|i| &base.placements[i]) {
            None => out.push(row(s, name, "strategy", None, Some(strategy(hp.strategy)))),
            Some(bp) => {
                differ(
                    out,
                    s,
                    name,
                    "strategy",
                    strategy(bp.strategy),
                    strategy(hp.strategy),
                );
                let cap = |c: Option<u32>| {
                    c.map_or(text("none"), |v| Shown::Number(v.to_string(), v as f64))
                };
                differ(
                    out,
                    s,
                    name,
                    "max-gpus-per-node",
                    cap(bp.max_gpus_per_node),
                    cap(hp.max_gpus_per_node),
                );
                let (br, hr) = (
                    bp.topology_required.as_deref(),
                    hp.topology_required.as_deref(),
                );
                differ(
                    out,
                    s,
                    name,
                    "topology required",
                    optional(br),
                    optional(hr),
                );
                let (bp_, hp_) = (
                    bp.topology_preferred.as_deref(),
                    hp.topology_preferred.as_deref(),
                );
                differ(
                    out,
                    s,
                    name,
                    "topology preferred",
                    optional(bp_),
                    optional(hp_),
                );
            }
        }
    }
    for bp in &base.placements {
        if find(head, &bp.name).is_none() {
            out.push(row(
                Subject::Placement,
                &bp.name,
                "strategy",
                Some(strategy(bp.strategy)),
                None,
            ));
        }
    }
}

/// The policy-wide part of the one-line plan, or `None` when nothing policy-wide changed:
/// "namespace research-vision moves from vision-team to llm-team; cluster fairness k changed".
pub(super) fn plan(changes: &[Change]) -> Option<String> {
    let mut parts = Vec::new();
    let namespaces: Vec<&Change> = changes
        .iter()
        .filter(|c| c.subject == Subject::Namespace)
        .collect();
    match namespaces.as_slice() {
        [] => {}
        [one] => parts.push(match (&one.old, &one.new) {
            (Some(o), Some(n)) => format!(
                "namespace {} moves from {} to {}",
                one.name,
                o.text(),
                n.text()
            ),
            (None, Some(n)) => format!("namespace {} now lands in {}", one.name, n.text()),
            (Some(o), _) => format!("namespace {} no longer lands in {}", one.name, o.text()),
            (None, None) => String::new(),
        }),
        many => parts.push(format!("{} namespaces change queue", many.len())),
    }
    let cluster: Vec<&str> = changes
        .iter()
        .filter(|c| c.subject == Subject::Cluster)
        .map(|c| c.what.as_str())
        .collect();
    if !cluster.is_empty() {
        parts.push(format!("cluster {} changed", cluster.join(", ")));
    }
    for (subject, noun) in [
        (Subject::PriorityClass, "priority class"),
        (Subject::Placement, "placement"),
    ] {
        let mut names: Vec<String> = Vec::new();
        for c in changes.iter().filter(|c| c.subject == subject) {
            let how = match (&c.old, &c.new) {
                (None, _) => format!("{} added", c.name),
                (_, None) => format!("{} removed", c.name),
                _ => format!("{} {} changed", c.name, c.what),
            };
            names.push(how);
        }
        if !names.is_empty() {
            parts.push(format!("{noun} {}", names.join(", ")));
        }
    }
    (!parts.is_empty()).then(|| parts.join("; "))
}
