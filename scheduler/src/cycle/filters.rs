//! Node filters: whether a pod may go to a node at all, as kube-scheduler's filter plugins and
//! KAI's predicates decide (`pkg/scheduler/plugins/predicates/`,
//! `pkg/scheduler/k8s_internal/predicates/`). Pure functions of the node and the pod; what the
//! node has free (resources, pod slots, host ports, its pods' labels) is checked by
//! [`super::state::ClusterState`], which calls [`misfit`] for the rest.
//!
//! The semantics are Kubernetes' own (`TaintToleration`, `NodeAffinity`, `NodeUnschedulable`,
//! `InterPodAffinity`): `docs/scheduler.md` lists every rule.

use std::collections::BTreeMap;

use crate::cluster::{
    LabelSelector, Node, NodeSelectorTerm, Operator, Pod, PodAffinityTerm, Requirement, Taint,
    TaintEffect, Toleration,
};

/// The node label KAI reads for a device's memory in MiB (GPU feature discovery sets it).
pub const GPU_MEMORY_LABEL: &str = "nvidia.com/gpu.memory";

/// Why a node cannot take a pod whatever is free on it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Misfit {
    /// Its `Ready` condition is not `True`.
    NotReady,
    /// Cordoned (`spec.unschedulable`).
    Unschedulable,
    /// A `NoSchedule` or `NoExecute` taint the pod does not tolerate.
    Taint(String),
    /// `nodeSelector` or required node affinity does not match.
    Selector,
    /// A `gpu-memory` pod, and the node's devices are smaller (or their size is not labelled).
    GpuMemory,
}

impl Misfit {
    /// How kube-scheduler-style summaries count it: "3 have taint …", "1 is not ready".
    pub fn describe(&self, count: u32) -> String {
        let (is, have, do_) = if count == 1 {
            ("is", "has", "does")
        } else {
            ("are", "have", "do")
        };
        match self {
            Misfit::NotReady => format!("{count} {is} not ready"),
            Misfit::Unschedulable => format!("{count} {is} cordoned (unschedulable)"),
            Misfit::Taint(t) => {
                format!("{count} {have} taint {t} that the pod does not tolerate")
            }
            Misfit::Selector => {
                format!("{count} {do_} not match the pod's nodeSelector or required node affinity")
            }
            Misfit::GpuMemory => format!(
                "{count} {have} no device with the pod's gpu-memory (label {GPU_MEMORY_LABEL})"
            ),
        }
    }
}

/// The first filter a node fails for a pod regardless of what is free on it, or `None`.
pub fn misfit(node: &Node, pod: &Pod) -> Option<Misfit> {
    if node.not_ready {
        return Some(Misfit::NotReady);
    }
    if node.unschedulable {
        return Some(Misfit::Unschedulable);
    }
    if let Some(t) = untolerated(&node.taints, &pod.constraints.tolerations) {
        return Some(Misfit::Taint(taint_text(t)));
    }
    if !selects(node, pod) {
        return Some(Misfit::Selector);
    }
    if let Some(need) = pod.gpu_memory {
        let has = node
            .labels
            .get(GPU_MEMORY_LABEL)
            .and_then(|v| v.trim().parse::<i64>().ok());
        if has.is_none_or(|m| m < need) {
            return Some(Misfit::GpuMemory);
        }
    }
    None
}

fn taint_text(t: &Taint) -> String {
    if t.value.is_empty() {
        format!("{}:{}", t.key, t.effect.as_str())
    } else {
        format!("{}={}:{}", t.key, t.value, t.effect.as_str())
    }
}

/// Kubernetes' `Toleration.ToleratesTaint`: effect (empty: all), key (empty with `Exists`:
/// all), then `Exists` or an equal value.
pub fn tolerates(toleration: &Toleration, taint: &Taint) -> bool {
    if toleration.effect.is_some_and(|e| e != taint.effect) {
        return false;
    }
    if !toleration.key.is_empty() && toleration.key != taint.key {
        return false;
    }
    toleration.exists || toleration.value == taint.value
}

/// The first `NoSchedule` or `NoExecute` taint no toleration covers.
pub fn untolerated<'t>(taints: &'t [Taint], tolerations: &[Toleration]) -> Option<&'t Taint> {
    taints
        .iter()
        .filter(|t| t.effect != TaintEffect::PreferNoSchedule)
        .find(|t| !tolerations.iter().any(|tol| tolerates(tol, t)))
}

/// `nodeSelector` and required node affinity (terms ORed, requirements of a term ANDed).
pub fn selects(node: &Node, pod: &Pod) -> bool {
    let c = &pod.constraints;
    c.node_selector
        .iter()
        .all(|(k, v)| node.labels.get(k) == Some(v))
        && (c.required_terms.is_empty() || c.required_terms.iter().any(|t| term_matches(node, t)))
}

/// One node selector term; a term with no requirement matches no node (as in Kubernetes).
pub fn term_matches(node: &Node, term: &NodeSelectorTerm) -> bool {
    if term.expressions.is_empty() && term.fields.is_empty() {
        return false;
    }
    term.expressions
        .iter()
        .all(|r| requirement_holds(r, node.labels.get(&r.key).map(String::as_str)))
        && term.fields.iter().all(|r| {
            // `metadata.name` is the only field Kubernetes allows here.
            r.key == "metadata.name"
                && matches!(r.operator, Operator::In | Operator::NotIn)
                && requirement_holds(r, Some(&node.name))
        })
}

/// One requirement against a label's value (`None`: the label is not set). `Gt` and `Lt` parse
/// both sides as 64-bit integers and fail when either does not parse, as Kubernetes does.
pub fn requirement_holds(r: &Requirement, value: Option<&str>) -> bool {
    match r.operator {
        Operator::In => value.is_some_and(|v| r.values.iter().any(|x| x == v)),
        Operator::NotIn => value.is_none_or(|v| r.values.iter().all(|x| x != v)),
        Operator::Exists => value.is_some(),
        Operator::DoesNotExist => value.is_none(),
        Operator::Gt | Operator::Lt => {
            let (Some(v), [bound]) = (value, r.values.as_slice()) else {
                return false;
            };
            match (v.parse::<i64>(), bound.parse::<i64>()) {
                (Ok(v), Ok(b)) if r.operator == Operator::Gt => v > b,
                (Ok(v), Ok(b)) => v < b,
                _ => false,
            }
        }
    }
}

/// How much a pod prefers a node: the weights of its preferred node-affinity terms that match,
/// less 100 for each `PreferNoSchedule` taint it does not tolerate.
pub fn preference(node: &Node, pod: &Pod) -> i64 {
    let c = &pod.constraints;
    let weights: i64 = c
        .preferred_terms
        .iter()
        .filter(|(_, t)| term_matches(node, t))
        .map(|(w, _)| i64::from(*w))
        .sum();
    let avoided = node
        .taints
        .iter()
        .filter(|t| t.effect == TaintEffect::PreferNoSchedule)
        .filter(|t| !c.tolerations.iter().any(|tol| tolerates(tol, t)))
        .count() as i64;
    weights - 100 * avoided
}

/// Whether a pod has any preference among nodes that pass its filters.
pub fn has_preferences(pod: &Pod) -> bool {
    !pod.constraints.preferred_terms.is_empty()
}

/// Whether a label selector selects a set of labels.
pub fn selector_matches(selector: &LabelSelector, labels: &BTreeMap<String, String>) -> bool {
    selector
        .labels
        .iter()
        .all(|(k, v)| labels.get(k) == Some(v))
        && selector
            .expressions
            .iter()
            .all(|r| requirement_holds(r, labels.get(&r.key).map(String::as_str)))
}

/// Whether an inter-pod term (of a pod in `owner_namespace`) is about a pod with these labels
/// in this namespace.
pub fn term_selects(
    term: &PodAffinityTerm,
    owner_namespace: &str,
    namespace: &str,
    labels: &BTreeMap<String, String>,
) -> bool {
    let in_namespace = if term.namespaces.is_empty() {
        namespace == owner_namespace
    } else {
        term.namespaces.iter().any(|n| n == namespace)
    };
    in_namespace && selector_matches(&term.selector, labels)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(key: &str, operator: Operator, values: &[&str]) -> Requirement {
        Requirement {
            key: key.into(),
            operator,
            values: values.iter().map(|v| v.to_string()).collect(),
        }
    }

    #[test]
    fn gt_and_lt_compare_integers_and_refuse_what_does_not_parse() {
        let gt = req("cores", Operator::Gt, &["8"]);
        assert!(requirement_holds(&gt, Some("16")));
        assert!(!requirement_holds(&gt, Some("8")));
        assert!(!requirement_holds(&gt, Some("9a")), "not an integer");
        assert!(!requirement_holds(&gt, None), "label missing");
        let lt = req("cores", Operator::Lt, &["8"]);
        assert!(requirement_holds(&lt, Some("-3")));
        assert!(!requirement_holds(
            &req("c", Operator::Lt, &["1", "2"]),
            Some("0")
        ));
    }

    #[test]
    fn not_in_holds_when_the_label_is_missing() {
        let r = req("zone", Operator::NotIn, &["a"]);
        assert!(requirement_holds(&r, None));
        assert!(requirement_holds(&r, Some("b")));
        assert!(!requirement_holds(&r, Some("a")));
    }

    #[test]
    fn toleration_matches_key_value_and_effect_as_kubernetes_does() {
        let taint = Taint {
            key: "dedicated".into(),
            value: "inference".into(),
            effect: TaintEffect::NoSchedule,
        };
        let equal = Toleration {
            key: "dedicated".into(),
            value: "inference".into(),
            ..Default::default()
        };
        assert!(tolerates(&equal, &taint));
        let other_value = Toleration {
            value: "training".into(),
            ..equal.clone()
        };
        assert!(!tolerates(&other_value, &taint));
        let other_effect = Toleration {
            effect: Some(TaintEffect::NoExecute),
            ..equal.clone()
        };
        assert!(!tolerates(&other_effect, &taint));
        let everything = Toleration {
            exists: true,
            ..Default::default()
        };
        assert!(tolerates(&everything, &taint));
        let empty_key_equal = Toleration::default();
        assert!(
            !tolerates(&empty_key_equal, &taint),
            "an empty key only matches everything with Exists"
        );
    }

    #[test]
    fn an_empty_term_matches_no_node() {
        let node = Node {
            name: "n".into(),
            ..Default::default()
        };
        assert!(!term_matches(&node, &NodeSelectorTerm::default()));
        let by_name = NodeSelectorTerm {
            fields: vec![req("metadata.name", Operator::In, &["n"])],
            ..Default::default()
        };
        assert!(term_matches(&node, &by_name));
    }
}
