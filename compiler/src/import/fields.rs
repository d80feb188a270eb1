//! Which fields of a Queue object `import` reads, so that every other one is reported (with
//! the field it was probably meant to be) instead of dropped without a word.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use crate::check::did_you_mean;

const TOP: &[&str] = &["apiVersion", "kind", "metadata", "spec", "status"];
/// `name`, `labels` and `annotations` are carried over; the rest is the API server's
/// bookkeeping, which a policy does not state.
const METADATA: &[&str] = &[
    "name",
    "labels",
    "annotations",
    "namespace",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "managedFields",
    "ownerReferences",
    "finalizers",
    "generateName",
    "selfLink",
];
/// KAI's `QueueSpec` (`pkg/apis/scheduling/v2/queue_types.go`).
const SPEC: &[&str] = &[
    "displayName",
    "parentQueue",
    "resources",
    "priority",
    "preemptMinRuntime",
    "reclaimMinRuntime",
];
/// KAI's `QueueResources` and `QueueResource` (`pkg/apis/scheduling/v2/resources.go`).
const RESOURCES: &[&str] = &["gpu", "cpu", "memory"];
const RESOURCE: &[&str] = &["quota", "limit", "overQuotaWeight"];

/// Per field of `object` that a KAI Queue does not have, its path (keys) and one sentence with
/// the field it was probably meant to be. `status` is KAI's to write and is not looked into.
pub(super) fn unknown(object: &Map<String, Value>) -> Vec<(Vec<String>, String)> {
    let mut found = Vec::new();
    check(object, "", TOP, &mut found);
    if let Some(Value::Object(m)) = object.get("metadata") {
        check(m, "metadata.", METADATA, &mut found);
    }
    if let Some(Value::Object(spec)) = object.get("spec") {
        check(spec, "spec.", SPEC, &mut found);
        if let Some(Value::Object(resources)) = spec.get("resources") {
            check(resources, "spec.resources.", RESOURCES, &mut found);
            for kind in RESOURCES {
                if let Some(Value::Object(r)) = resources.get(*kind) {
                    check(r, &format!("spec.resources.{kind}."), RESOURCE, &mut found);
                }
            }
        }
    }
    found
}

fn check(
    map: &Map<String, Value>,
    prefix: &str,
    known: &[&str],
    found: &mut Vec<(Vec<String>, String)>,
) {
    for key in map.keys().filter(|k| !known.contains(&k.as_str())) {
        let hint = match did_you_mean(key, known.iter().copied()) {
            Some(s) => format!(" (did you mean {prefix}{s}?)"),
            None => format!(" (it has {})", known.join(", ")),
        };
        let mut path: Vec<String> = prefix
            .split('.')
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect();
        path.push(key.clone());
        found.push((
            path,
            format!("{prefix}{key} is not a field of a KAI Queue{hint}; it was left out"),
        ));
    }
}

/// `metadata.labels` or `metadata.annotations` as text pairs.
pub(super) fn string_map(
    metadata: Option<&Value>,
    field: &str,
) -> Result<BTreeMap<String, String>, String> {
    match metadata.and_then(|m| m.get(field)) {
        None | Some(Value::Null) => Ok(BTreeMap::new()),
        Some(Value::Object(map)) => map
            .iter()
            .map(|(k, v)| match v {
                Value::String(s) => Ok((k.clone(), s.clone())),
                other => Err(format!(
                    "metadata.{field}.{k} is {}, not text",
                    super::describe(other)
                )),
            })
            .collect(),
        Some(other) => Err(format!(
            "metadata.{field} is {}, not a mapping",
            super::describe(other)
        )),
    }
}
