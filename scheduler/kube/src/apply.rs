//! `--apply-queues`: the policy's Queue and PriorityClass objects kept in the cluster by
//! server-side apply, as `kai-policy build` writes them, and the ones this scheduler applied
//! that the policy no longer has deleted (pruned).
//!
//! The plan is pure ([`Desired`]: what to apply, in what order, and what to prune given what the
//! cluster holds); [`crate::backend::KubeBackend::apply_policy`] sends it.
//!
//! - **Ownership.** Every object carries the label `app.kubernetes.io/managed-by: kai-policy`
//!   (the compiler sets it). Only objects with that label are ever pruned: a Queue someone
//!   created by hand, or another tool's, is never deleted. Applies use the field manager
//!   [`FIELD_MANAGER`] and force conflicts, as Kubernetes asks of a controller that owns its
//!   objects: the policy in Git is the truth, and `kubectl edit` of a field the policy sets is
//!   undone at the next apply.
//! - **Order.** PriorityClasses and root queues first, then each level of children, so a
//!   parent exists before its children name it; pruned queues go children first.
//! - **Nothing half-done is pruned from.** Pruning runs only after every object applied; a
//!   failed apply leaves the cluster's other objects alone and is tried again.
//! - **A PriorityClass's value cannot change in place** (the API server refuses, 422). When the
//!   policy changes the value of a class this scheduler applied, the class is deleted and
//!   applied again; running pods keep the priority they were admitted with, as after any
//!   re-creation.

use std::collections::{BTreeMap, BTreeSet};

use kai_policy_compiler::lower::objects::{MANAGED_BY, priority_class_objects, queue_objects};
use kai_policy_compiler::model::Policy;
use serde_json::Value;

use crate::calls::{Call, Managed};

/// The field manager of every apply (what `kubectl get --show-managed-fields` names).
pub const FIELD_MANAGER: &str = "kai-policy";

/// The label selector of the objects this scheduler applied.
pub fn managed_selector() -> String {
    format!("{}={}", MANAGED_BY.0, MANAGED_BY.1)
}

/// One object the policy wants in the cluster.
#[derive(Debug, Clone, PartialEq)]
struct Wanted {
    kind: Managed,
    name: String,
    object: Value,
    /// 0 for PriorityClasses and root queues, a queue's depth below the root otherwise.
    level: usize,
}

/// An object of a managed kind that the cluster holds with the managed-by label.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    /// Its kind.
    pub kind: Managed,
    /// Its name.
    pub name: String,
    /// A Queue's `spec.parentQueue`.
    pub parent: Option<String>,
}

/// Everything a policy wants applied.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Desired {
    objects: Vec<Wanted>,
}

impl Desired {
    /// The policy's objects, exactly as `kai-policy build` renders them.
    pub fn of(policy: &Policy) -> Desired {
        let mut objects = Vec::new();
        for class in priority_class_objects(policy) {
            objects.push(Wanted {
                kind: Managed::PriorityClass,
                name: class.metadata.name.clone(),
                object: serde_json::to_value(&class).expect("a PriorityClass serialises"),
                level: 0,
            });
        }
        for (i, queue) in queue_objects(policy).into_iter().enumerate() {
            let mut level = 0;
            let mut at = policy.queues[i].parent;
            while let Some(p) = at {
                level += 1;
                at = policy.queues[p].parent;
            }
            objects.push(Wanted {
                kind: Managed::Queue,
                name: queue.metadata.name.clone(),
                object: serde_json::to_value(&queue).expect("a Queue serialises"),
                level,
            });
        }
        Desired { objects }
    }

    /// How many objects of `kind` the policy wants.
    pub fn count(&self, kind: Managed) -> usize {
        self.objects.iter().filter(|o| o.kind == kind).count()
    }

    /// The apply calls in waves: every parent in a wave before its children's.
    pub fn waves(&self) -> Vec<Vec<Call>> {
        let depth = self.objects.iter().map(|o| o.level).max().unwrap_or(0);
        (0..=depth)
            .map(|level| {
                self.objects
                    .iter()
                    .filter(|o| o.level == level)
                    .map(|o| Call::Apply {
                        kind: o.kind,
                        name: o.name.clone(),
                        object: o.object.clone(),
                    })
                    .collect::<Vec<_>>()
            })
            .filter(|wave| !wave.is_empty())
            .collect()
    }

    /// The delete calls for what the cluster holds with the managed-by label and the policy no
    /// longer has, in waves: a queue's children before it.
    pub fn prune(&self, listed: &[Listed]) -> Vec<Vec<Call>> {
        let wanted: BTreeSet<(Managed, &str)> = self
            .objects
            .iter()
            .map(|o| (o.kind, o.name.as_str()))
            .collect();
        let gone: Vec<&Listed> = listed
            .iter()
            .filter(|l| !wanted.contains(&(l.kind, l.name.as_str())))
            .collect();
        // A pruned queue's height among the pruned ones: 0 for one with no pruned child.
        let parents: BTreeMap<&str, &str> = gone
            .iter()
            .filter(|l| l.kind == Managed::Queue)
            .filter_map(|l| Some((l.name.as_str(), l.parent.as_deref()?)))
            .collect();
        let mut height: BTreeMap<&str, usize> = BTreeMap::new();
        for l in gone.iter().filter(|l| l.kind == Managed::Queue) {
            let (mut at, mut up, mut seen) = (l.name.as_str(), 0, BTreeSet::new());
            // A cycle in hand-edited parents must not loop forever.
            while let Some(&parent) = parents.get(at) {
                if !seen.insert(at) {
                    break;
                }
                up += 1;
                let h = height.entry(parent).or_insert(0);
                *h = (*h).max(up);
                at = parent;
            }
            height.entry(l.name.as_str()).or_insert(0);
        }
        let top = height.values().copied().max().unwrap_or(0);
        let mut waves: Vec<Vec<Call>> = (0..=top)
            .map(|h| {
                gone.iter()
                    .filter(|l| l.kind == Managed::Queue && height.get(l.name.as_str()) == Some(&h))
                    .map(|l| Call::Prune {
                        kind: l.kind,
                        name: l.name.clone(),
                    })
                    .collect::<Vec<_>>()
            })
            .collect();
        waves.push(
            gone.iter()
                .filter(|l| l.kind == Managed::PriorityClass)
                .map(|l| Call::Prune {
                    kind: l.kind,
                    name: l.name.clone(),
                })
                .collect(),
        );
        waves.retain(|w| !w.is_empty());
        waves
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(text: &str) -> Policy {
        use kai_policy_compiler::source::{SourceFile, SourceSet};
        let checked = kai_policy_compiler::check::check(
            &SourceSet::new(vec![SourceFile::new("policy.kdl", text)]),
            Vec::new(),
        );
        checked
            .policy
            .unwrap_or_else(|| panic!("{:#?}", checked.diagnostics))
    }

    fn names(waves: &[Vec<Call>]) -> Vec<Vec<String>> {
        waves
            .iter()
            .map(|w| {
                w.iter()
                    .map(|c| match c {
                        Call::Apply { kind, name, .. } | Call::Prune { kind, name } => {
                            format!("{} {name}", kind.kind())
                        }
                        other => panic!("{other:?}"),
                    })
                    .collect()
            })
            .collect()
    }

    const TREE: &str = r#"
priority-class "train" value=50 preemptible=#true
queue "org" {
    gpu quota=8
    queue "team" {
        gpu quota=4
        queue "project" {
            gpu quota=2
            namespaces "p"
        }
    }
    queue "other" {
        gpu quota=4
        namespaces "o"
    }
}
"#;

    #[test]
    fn parents_are_applied_before_their_children() {
        let desired = Desired::of(&policy(TREE));
        assert_eq!(
            names(&desired.waves()),
            [
                vec!["PriorityClass train", "Queue org"],
                vec!["Queue team", "Queue other"],
                vec!["Queue project"],
            ]
        );
        assert_eq!(desired.count(Managed::Queue), 4);
        assert_eq!(desired.count(Managed::PriorityClass), 1);
    }

    #[test]
    fn the_applied_objects_are_what_build_writes() {
        let p = policy(TREE);
        let desired = Desired::of(&p);
        let Call::Apply { object, .. } = &desired.waves()[1][0] else {
            panic!()
        };
        assert_eq!(object["apiVersion"], "scheduling.run.ai/v2");
        assert_eq!(object["kind"], "Queue");
        assert_eq!(object["metadata"]["name"], "team");
        assert_eq!(
            object["metadata"]["labels"]["app.kubernetes.io/managed-by"],
            "kai-policy"
        );
        assert_eq!(object["spec"]["parentQueue"], "org");
        assert_eq!(object["spec"]["resources"]["gpu"]["quota"], 4.0);
        assert_eq!(
            object,
            &serde_json::to_value(&queue_objects(&p)[1]).unwrap()
        );
    }

    #[test]
    fn only_what_the_policy_no_longer_has_is_pruned_children_first() {
        let desired = Desired::of(&policy(TREE));
        let listed = |kind, name: &str, parent: Option<&str>| Listed {
            kind,
            name: name.into(),
            parent: parent.map(Into::into),
        };
        let cluster = [
            listed(Managed::Queue, "org", None),
            listed(Managed::Queue, "old-dept", None),
            listed(Managed::Queue, "old-team", Some("old-dept")),
            listed(Managed::Queue, "old-project", Some("old-team")),
            listed(Managed::Queue, "stray", Some("org")),
            listed(Managed::PriorityClass, "train", None),
            listed(Managed::PriorityClass, "old-class", None),
        ];
        assert_eq!(
            names(&desired.prune(&cluster)),
            [
                vec!["Queue old-project", "Queue stray"],
                vec!["Queue old-team"],
                vec!["Queue old-dept"],
                vec!["PriorityClass old-class"],
            ]
        );
        assert!(desired.prune(&cluster[..1]).is_empty());
    }

    #[test]
    fn parents_that_loop_do_not_hang_the_prune() {
        let desired = Desired::of(&policy(TREE));
        let cluster = [
            Listed {
                kind: Managed::Queue,
                name: "x".into(),
                parent: Some("y".into()),
            },
            Listed {
                kind: Managed::Queue,
                name: "y".into(),
                parent: Some("x".into()),
            },
        ];
        let waves = desired.prune(&cluster);
        assert_eq!(waves.iter().map(Vec::len).sum::<usize>(), 2);
    }
}
