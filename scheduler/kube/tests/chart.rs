//! The Helm chart grants exactly the permissions the code uses (`access::all()`), no wildcard and
//! nothing cluster-admin; and the Deployment keeps the security settings the chart promises.
//! (`.ci/run` lints the chart with the real Helm library; this test reads the templates.)

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use kai_scheduler_kube::access::{self, Access};
use serde_json::Value;

fn chart() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../charts/kai-scheduler")
}

/// The RBAC template's documents, with the lines that hold template expressions (names, labels,
/// namespaces) left out; a rule never holds one, which the test checks first. Each comes with
/// the value it is rendered only with (`applyQueues`, `numa.enabled`), if any.
fn rbac_documents() -> Vec<(Value, Option<&'static str>)> {
    let text = std::fs::read_to_string(chart().join("templates/rbac.yaml")).unwrap();
    let mut documents = Vec::new();
    for document in text.split("\n---\n") {
        let mut in_rules = false;
        let mut kept = Vec::new();
        let only = ["applyQueues", "numa.enabled"]
            .into_iter()
            .find(|v| document.contains(&format!("{{{{- if .Values.{v} }}}}")));
        for line in document.lines() {
            if line.starts_with("rules:") {
                in_rules = true;
            } else if !line.starts_with(' ') && !line.starts_with('#') {
                in_rules = false;
            }
            if line.contains("{{") {
                assert!(!in_rules, "a rule holds a template expression: {line}");
                continue;
            }
            kept.push(line);
        }
        documents.push((serde_saphyr::from_str(&kept.join("\n")).unwrap(), only));
    }
    documents
}

/// What the rendered rules grant, one permission per (group, resource, verb): the documents
/// rendered only when the value `only` is on, or (`None`) those rendered always.
fn granted(only: Option<&str>) -> BTreeSet<(String, String, String, bool)> {
    let mut out = BTreeSet::new();
    for (doc, when) in rbac_documents() {
        if when != only {
            continue;
        }
        let kind = doc["kind"].as_str().unwrap_or("");
        let namespaced = match kind {
            "ClusterRole" => false,
            "Role" => true,
            _ => continue,
        };
        let strings = |v: &Value| -> Vec<String> {
            v.as_array()
                .unwrap()
                .iter()
                .map(|s| s.as_str().unwrap().to_string())
                .collect()
        };
        for rule in doc["rules"].as_array().unwrap() {
            for group in strings(&rule["apiGroups"]) {
                for resource in strings(&rule["resources"]) {
                    for verb in strings(&rule["verbs"]) {
                        out.insert((group.clone(), resource.clone(), verb, namespaced));
                    }
                }
            }
        }
    }
    out
}

fn key(a: &Access) -> (String, String, String, bool) {
    (
        a.group.to_string(),
        a.resource.to_string(),
        a.verb.to_string(),
        a.namespaced,
    )
}

#[test]
fn rbac_grants_exactly_the_permissions_the_code_uses() {
    for (list, only) in [
        (access::all(), None),
        (access::APPLY.to_vec(), Some("applyQueues")),
        (access::NUMA.to_vec(), Some("numa.enabled")),
    ] {
        let used: BTreeSet<_> = list.iter().map(key).collect();
        let granted = granted(only);
        let missing: Vec<_> = used.difference(&granted).collect();
        let extra: Vec<_> = granted.difference(&used).collect();
        assert!(
            missing.is_empty(),
            "{only:?}: the chart does not grant {missing:?}"
        );
        assert!(
            extra.is_empty(),
            "{only:?}: the chart grants what the code never uses: {extra:?}"
        );
    }
}

#[test]
fn rbac_has_no_wildcard_and_binds_no_built_in_role() {
    let every = [None, Some("applyQueues"), Some("numa.enabled")];
    for (group, resource, verb, _) in every.into_iter().flat_map(granted) {
        assert!(
            ![&group, &resource, &verb].iter().any(|s| s.contains('*')),
            "{group} {resource} {verb}"
        );
    }
    for (doc, _) in rbac_documents() {
        if let Some(name) = doc["roleRef"]["name"].as_str() {
            assert!(
                !["cluster-admin", "admin", "edit"].contains(&name),
                "{name}"
            );
        }
    }
}

#[test]
fn every_kind_of_call_needs_a_permission_of_the_list() {
    use kai_scheduler_kube::calls::{self, Call, Managed};
    let list: BTreeSet<_> = access::all()
        .iter()
        .chain(access::APPLY)
        .chain(access::NUMA)
        .map(key)
        .collect();
    let patch = serde_json::json!({});
    let every = [
        calls::bind("ns/p", "n"),
        calls::evict("ns/p", 30),
        Call::PodCondition {
            namespace: "ns".into(),
            pod: "p".into(),
            patch: patch.clone(),
        },
        Call::PodGroupStatus {
            namespace: "ns".into(),
            name: "g".into(),
            patch: patch.clone(),
        },
        Call::QueueStatus {
            name: "q".into(),
            patch,
        },
        Call::Event {
            namespace: "ns".into(),
            event: Box::default(),
        },
        Call::Apply {
            kind: Managed::Queue,
            name: "q".into(),
            object: serde_json::json!({}),
        },
        Call::Apply {
            kind: Managed::PriorityClass,
            name: "p".into(),
            object: serde_json::json!({}),
        },
        Call::Prune {
            kind: Managed::Queue,
            name: "q".into(),
        },
        Call::Prune {
            kind: Managed::PriorityClass,
            name: "p".into(),
        },
    ];
    for call in every {
        assert!(list.contains(&key(&call.access())), "{}", call.describe());
    }
}

#[test]
fn the_deployment_runs_unprivileged_with_probes_and_requests() {
    let text = std::fs::read_to_string(chart().join("templates/deployment.yaml")).unwrap();
    for needle in [
        "runAsNonRoot: true",
        "readOnlyRootFilesystem: true",
        "allowPrivilegeEscalation: false",
        "path: /healthz",
        "path: /readyz",
        "resources:",
    ] {
        assert!(text.contains(needle), "deployment.yaml lacks `{needle}`");
    }
    let values = std::fs::read_to_string(chart().join("values.yaml")).unwrap();
    let values: Value = serde_saphyr::from_str(&values).unwrap();
    assert_eq!(values["replicas"], 2, "two replicas with leader election");
    assert!(values["resources"]["requests"]["cpu"].is_string());
    assert!(values["resources"]["requests"]["memory"].is_string());
}
