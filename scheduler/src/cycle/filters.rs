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

/// The node label that says whether MIG is on (KAI's default `MIGWorkerNodeLabelKey`); without
/// it, a node is a MIG node when it reports some `nvidia.com/mig-*` resource.
pub const MIG_ENABLED_LABEL: &str = "node-role.kubernetes.io/mig-enabled";

/// The node label with the MIG strategy (`single` or `mixed`; GPU feature discovery sets it).
pub const MIG_STRATEGY_LABEL: &str = "nvidia.com/mig.strategy";

/// The prefix of MIG instance resources (`nvidia.com/mig-1g.10gb`).
const MIG_RESOURCE_PREFIX: &str = "nvidia.com/mig-";

/// Why a node cannot take a pod whatever is free on it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Misfit {
    /// Its `Ready` condition is not `True`.
    NotReady,
    /// A pressure condition (`DiskPressure`, …) is not `False`.
    Condition(String),
    /// Cordoned (`spec.unschedulable`).
    Unschedulable,
    /// A `NoSchedule` or `NoExecute` taint the pod does not tolerate.
    Taint(String),
    /// `nodeSelector` or required node affinity does not match.
    Selector,
    /// A `gpu-memory` pod, and the node's devices are smaller (or their size is not labelled).
    GpuMemory,
    /// A MIG node with strategy `single`, and the pod asks for part of a GPU or a MIG instance.
    MigSingle,
    /// A MIG node with strategy `mixed`, and the pod asks for GPUs, not MIG instances.
    MigMixed,
    /// The pod asks MIG instances through annotations (a legacy MIG pod): no node takes it.
    LegacyMig,
    /// The node runs a legacy MIG pod, and the pod asks MIG instances.
    LegacyMigNode,
    /// The pod's DRA claims keep it off every node (why).
    Dra(String),
    /// A shared (fractional) GPU pod, and the node's GPUs come through DRA.
    DraGpus,
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
            Misfit::Condition(c) => format!("{count} {have} condition {c}"),
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
            Misfit::MigSingle => format!(
                "{count} {have} MIG strategy single, which takes whole GPUs only (the pod asks \
                 for a fraction, GPU memory or a MIG instance)"
            ),
            Misfit::MigMixed => format!(
                "{count} {have} MIG strategy mixed, which takes MIG instances only (the pod \
                 asks for GPUs)"
            ),
            Misfit::LegacyMig => format!(
                "{count} {do_} not take a pod asking MIG instances through annotations (legacy \
                 MIG, which KAI never schedules: ask for them as resources, \
                 `nvidia.com/mig-1g.10gb: 1`)"
            ),
            Misfit::LegacyMigNode => format!(
                "{count} {have} a legacy MIG pod running, which keeps MIG pods off the node"
            ),
            Misfit::Dra(why) => format!("{count} cannot take it: {why}"),
            Misfit::DraGpus => format!(
                "{count} {have} DRA GPUs, which KAI does not share (ask whole GPUs through a \
                 ResourceClaim there)"
            ),
        }
    }
}

/// The first filter a node fails for a pod regardless of what is free on it, or `None`.
pub fn misfit(node: &Node, pod: &Pod) -> Option<Misfit> {
    if node.not_ready {
        return Some(Misfit::NotReady);
    }
    if let Some(c) = node.pressure.first() {
        return Some(Misfit::Condition(c.clone()));
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
    // KAI shares no DRA GPU (`PredicateByNodeResourcesType`: shared GPU pods are not
    // supported on nodes with DRA GPUs).
    if pod.fractional && node.dra_gpus > 0 {
        return Some(Misfit::DraGpus);
    }
    None
}

/// What a node's MIG set-up lets onto it (KAI's `IsMIGEnabled` with `GetMigStrategy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mig {
    /// Not a MIG node, or no strategy KAI knows: no MIG rule.
    Off,
    /// Strategy `single`: whole GPUs only.
    Single,
    /// Strategy `mixed`: MIG instances only.
    Mixed,
}

fn is_mig(name: &str, amount: i64) -> bool {
    name.starts_with(MIG_RESOURCE_PREFIX) && amount > 0
}

/// A node's [`Mig`]: a MIG node is one whose `node-role.kubernetes.io/mig-enabled` label is
/// true, or, without the label, one that reports some MIG instance; only then does its
/// `nvidia.com/mig.strategy` label count (GPU feature discovery writes one on every GPU node).
pub fn mig(node: &Node) -> Mig {
    let mig_node = mig_enabled(node);
    match node.labels.get(MIG_STRATEGY_LABEL).map(String::as_str) {
        Some("single") if mig_node => Mig::Single,
        Some("mixed") if mig_node => Mig::Mixed,
        _ => Mig::Off,
    }
}

/// Whether MIG is on on a node (KAI's `NodeInfo.IsMIGEnabled`): its
/// `node-role.kubernetes.io/mig-enabled` label is true, or, without the label, it reports some
/// MIG instance.
pub fn mig_enabled(node: &Node) -> bool {
    match node.labels.get(MIG_ENABLED_LABEL) {
        // Go's `strconv.ParseBool`; anything else is not true.
        Some(v) => matches!(v.as_str(), "1" | "t" | "T" | "true" | "TRUE" | "True"),
        None => node.extended.iter().any(|(n, &a)| is_mig(n, a)),
    }
}

/// Whether a pod asks MIG instances (KAI's `IsMigCandidate`).
pub fn asks_mig(pod: &Pod) -> bool {
    pod.extended.iter().any(|(n, &a)| is_mig(n, a))
}

/// KAI's `node_info.go: PredicateByNodeResourcesType` for MIG nodes: on a node with strategy
/// `single` only pods asking for whole GPUs, on one with `mixed` only pods asking for MIG
/// instances; a CPU-only pod goes anywhere.
pub fn mig_misfit(mig: Mig, pod: &Pod) -> Option<Misfit> {
    if mig == Mig::Off {
        return None;
    }
    let wants_mig = asks_mig(pod);
    if pod.request.gpu == 0 && pod.gpu_memory.is_none() && !wants_mig {
        return None;
    }
    let whole_gpus = !pod.fractional && pod.gpu_memory.is_none() && !wants_mig;
    match mig {
        Mig::Single if !whole_gpus => Some(Misfit::MigSingle),
        Mig::Mixed if !wants_mig => Some(Misfit::MigMixed),
        _ => None,
    }
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

    /// Labels as GPU feature discovery and KAI set them on real nodes.
    fn gpu_node(labels: &[(&str, &str)], extended: &[(&str, i64)]) -> Node {
        Node {
            name: "n".into(),
            labels: labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            extended: extended.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
            ..Node::default()
        }
    }

    #[test]
    fn a_mig_node_takes_only_the_pods_its_strategy_allows() {
        let whole = Pod {
            request: crate::cluster::Amounts {
                gpu: 1000,
                ..Default::default()
            },
            ..Pod::default()
        };
        let fraction = Pod {
            request: crate::cluster::Amounts {
                gpu: 500,
                ..Default::default()
            },
            fractional: true,
            ..Pod::default()
        };
        let instance = Pod {
            extended: [("nvidia.com/mig-1g.10gb".to_string(), 1)].into(),
            ..Pod::default()
        };
        let cpu_only = Pod::default();
        // GPU feature discovery labels every GPU node with a strategy; without MIG it is no
        // MIG node and takes anything.
        let plain = gpu_node(
            &[
                ("nvidia.com/mig.strategy", "single"),
                ("nvidia.com/mig.capable", "false"),
            ],
            &[],
        );
        for pod in [&whole, &fraction, &instance, &cpu_only] {
            assert_eq!(mig_misfit(mig(&plain), pod), None);
        }
        let single = gpu_node(
            &[
                (MIG_ENABLED_LABEL, "true"),
                ("nvidia.com/mig.strategy", "single"),
            ],
            &[],
        );
        assert_eq!(mig_misfit(mig(&single), &whole), None);
        assert_eq!(mig_misfit(mig(&single), &cpu_only), None);
        assert_eq!(mig_misfit(mig(&single), &fraction), Some(Misfit::MigSingle));
        assert_eq!(mig_misfit(mig(&single), &instance), Some(Misfit::MigSingle));
        // Without the enabled label, MIG instances on the node make it a MIG node.
        let mixed = gpu_node(
            &[("nvidia.com/mig.strategy", "mixed")],
            &[("nvidia.com/mig-1g.10gb", 7)],
        );
        assert_eq!(mig_misfit(mig(&mixed), &instance), None);
        assert_eq!(mig_misfit(mig(&mixed), &cpu_only), None);
        assert_eq!(mig_misfit(mig(&mixed), &whole), Some(Misfit::MigMixed));
        assert_eq!(mig_misfit(mig(&mixed), &fraction), Some(Misfit::MigMixed));
        // The label wins over the resources, and only Go's true spellings are true.
        let off = gpu_node(
            &[
                (MIG_ENABLED_LABEL, "yes"),
                ("nvidia.com/mig.strategy", "mixed"),
            ],
            &[("nvidia.com/mig-1g.10gb", 7)],
        );
        assert_eq!(mig_misfit(mig(&off), &whole), None);
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
