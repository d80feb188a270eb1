//! `kai-policy import`: existing KAI `Queue` objects back into a KDL policy.
//!
//! The input is YAML as `kubectl get queues -o yaml` prints it (a `v1` `List` with `items`) or a
//! multi-document stream (what `build` writes); objects of other kinds are skipped with a note.
//! Each Queue becomes a `queue` node, nested inside its parent's block, with KAI's units turned
//! back into the policy's: GPU devices stay numbers, millicores become cores or `"500m"`,
//! megabytes become the shortest exact quantity (`"960Gi"`), `-1` becomes `#inf` (quota) or no
//! limit, and a resource KAI leaves unbounded both ways with weight 1 is left out (not governed).
//! Pure: text in, text out; the choices are documented in `docs/language.md` ("Importing").

mod duration;
mod fields;

pub use duration::parse_go_duration;

use std::collections::{BTreeMap, HashMap};

use serde_json::Value;

use crate::lower::objects::{QueueObject, QueueResource};
use crate::quantity::{
    Duration, MAX_AMOUNT, QuantityError, ResourceKind, format_quantity, format_thousandths,
    parse_quantity,
};
use crate::yaml::{self, Located, Place};

const INDENT: &str = "    ";

/// Why the input could not be imported: which file, where in it, which object, and what is
/// wrong with it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}{}: {}{message}", where_in(*line, *column), object.as_ref().map(|o| format!("{o}: ")).unwrap_or_default())]
pub struct ImportError {
    /// The input's name (a path, or `-` for stdin).
    pub file: String,
    /// The 1-based line of the value or object to blame, when one is.
    pub line: Option<usize>,
    /// Its 1-based column.
    pub column: Option<usize>,
    /// The object, when one is to blame: `Queue "llm" (document 2)`.
    pub object: Option<String>,
    /// What is wrong.
    pub message: String,
}

/// `:LINE:COLUMN` after a file's name, when the place is known.
fn where_in(line: Option<usize>, column: Option<usize>) -> String {
    match (line, column) {
        (Some(l), Some(c)) => format!(":{l}:{c}"),
        (Some(l), None) => format!(":{l}"),
        _ => String::new(),
    }
}

impl ImportError {
    /// The same error, placed at `place` when that is known.
    fn at(mut self, place: Place) -> Self {
        if place.line > 0 {
            self.line = Some(place.line);
            self.column = (place.column > 0).then_some(place.column);
        }
        self
    }
}

/// A file's name with the place in it, when known: `queues.yaml:12:5`.
fn file_at(file: &str, place: Place) -> String {
    let known = |n: usize| (n > 0).then_some(n);
    format!("{file}{}", where_in(known(place.line), known(place.column)))
}

/// Where the key that ends `path` is in an object (or the nearest part of the path there).
fn key_in(object: Option<&Located>, path: &[&str]) -> Place {
    object.map_or(Place::default(), |o| o.key_place(path))
}

/// Where the value at `path` (dotted, `spec.resources.gpu.quota`) of an object is, or the
/// nearest part of it that is there; the default place when the object's place is unknown.
fn place_in(object: Option<&Located>, path: &str) -> Place {
    object.map_or(Place::default(), |o| {
        let steps: Vec<&str> = path.split('.').filter(|s| !s.is_empty()).collect();
        o.place_of(&steps)
    })
}

/// A policy made from Queue objects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Imported {
    /// The policy, in `kai-policy fmt`'s canonical layout.
    pub kdl: String,
    /// Things the user should know that are not errors: skipped objects, rounded amounts.
    pub notes: Vec<String>,
    /// How many queues it holds.
    pub queues: usize,
}

/// Imports every Queue of `inputs` (name, YAML text) into one policy. On failure, every
/// object that cannot be imported is named, each at its line and column (the queue tree's
/// own faults, a cycle or a name twice, once every object reads).
pub fn import(inputs: &[(&str, &str)]) -> Result<Imported, Vec<ImportError>> {
    let mut notes = Vec::new();
    let mut queues: Vec<Source> = Vec::new();
    let mut errors: Vec<ImportError> = Vec::new();
    for (file, text) in inputs {
        let unreadable = |e: yaml::YamlError| ImportError {
            file: file.to_string(),
            line: e.line,
            column: e.column,
            object: None,
            message: format!("not valid YAML: {}", e.message),
        };
        let located = match yaml::locate_all(text, yaml_options()) {
            Ok(located) => located,
            Err(e) => {
                errors.push(unreadable(e));
                continue;
            }
        };
        let documents: Vec<Value> =
            match serde_saphyr::from_multiple_with_options(text, yaml_options()) {
                Ok(documents) => documents,
                Err(e) => {
                    errors.push(unreadable(yaml::yaml_error(&e)));
                    continue;
                }
            };
        let mut found = Found {
            queues: &mut queues,
            notes: &mut notes,
            errors: &mut errors,
        };
        for (d, document) in documents.into_iter().enumerate() {
            let at = format!("document {}", d + 1);
            collect(file, &at, document, located.get(d), &mut found);
        }
    }
    if queues.is_empty() && errors.is_empty() {
        let files: Vec<&str> = inputs.iter().map(|(f, _)| *f).collect();
        return Err(vec![ImportError {
            file: files.join(", "),
            line: None,
            column: None,
            object: None,
            message: "no KAI Queue objects (apiVersion scheduling.run.ai/v2, kind Queue) found"
                .into(),
        }]);
    }
    let mut converted = Vec::with_capacity(queues.len());
    for source in queues {
        match convert(source, &mut notes) {
            Ok(queue) => converted.push(queue),
            Err(e) => errors.push(e),
        }
    }
    if !errors.is_empty() {
        // In the order of the inputs, each file's from its top.
        let input = |file: &str| inputs.iter().position(|(f, _)| *f == file);
        errors.sort_by_key(|e| (input(&e.file), e.line, e.column));
        return Err(errors);
    }
    let queues = converted;
    let tree = Tree::new(&queues).map_err(|e| vec![e])?;
    let promised = oversubscribed(&queues, &tree);
    if !promised.is_empty() {
        notes.push(format!(
            "children's quotas add up to more than their parent's in {} (KAI allows this; its standard layout puts team queues under a quota-0 default-parent-queue): the policy says `oversubscription \"allow\"` so that it checks as KAI schedules; give those parents a quota and remove the line to have it checked",
            promised.join(", ")
        ));
    }
    Ok(Imported {
        kdl: render(&queues, &tree, &promised),
        notes,
        queues: queues.len(),
    })
}

/// serde-saphyr's default budget stops at 1,024 documents; a cluster's queues come as one
/// document each (`kubectl get queues -o yaml | yq -s`, `build`'s stream) or one `List`. These
/// limits admit well over 100,000 queues and still bound hostile input.
fn yaml_options() -> serde_saphyr::Options {
    let mut budget = serde_saphyr::Budget::default();
    budget.max_documents = 1_000_000;
    budget.max_nodes = 50_000_000;
    budget.max_events = 100_000_000;
    budget.max_total_scalar_bytes = 1 << 30;
    let mut options = serde_saphyr::Options::default();
    options.budget = Some(budget);
    options
}

/// A Queue object and where it came from.
struct Source {
    file: String,
    at: String,
    /// The object's YAML, for the places of its values.
    located: Option<Located>,
    object: QueueObject,
    labels: BTreeMap<String, String>,
    annotations: BTreeMap<String, String>,
    /// Per kind, the fields of a resource that is present but leaves them out: KAI reads each
    /// as Go's zero, which the policy must then say out loud.
    unset: [Vec<&'static str>; 3],
}

impl Source {
    /// An error about the value at `path` (dotted) of this object.
    fn error_at(&self, path: &str, message: impl Into<String>) -> ImportError {
        queue_error(&self.file, &self.object.metadata.name, &self.at, message)
            .at(place_in(self.located.as_ref(), path))
    }
}

/// An error about one imported Queue object, named as the user will look for it.
fn queue_error(file: &str, name: &str, at: &str, message: impl Into<String>) -> ImportError {
    ImportError {
        file: file.to_string(),
        line: None,
        column: None,
        object: Some(format!("Queue \"{name}\" ({at})")),
        message: message.into(),
    }
}

/// Where [`collect`] puts what it finds.
struct Found<'f> {
    queues: &'f mut Vec<Source>,
    notes: &'f mut Vec<String>,
    errors: &'f mut Vec<ImportError>,
}

/// Sorts one YAML document (`located`: its places): a list's items, a Queue, or something to
/// skip; what cannot be imported goes to the errors, and the rest is still read.
fn collect(
    file: &str,
    at: &str,
    document: Value,
    located: Option<&Located>,
    found: &mut Found<'_>,
) {
    if let Err(e) = collect_one(file, at, document, located, found) {
        found.errors.push(e);
    }
}

/// [`collect`] for one object, stopping at its first fault.
fn collect_one(
    file: &str,
    at: &str,
    document: Value,
    located: Option<&Located>,
    found: &mut Found<'_>,
) -> Result<(), ImportError> {
    let error = |object: String, path: &str, message: String| {
        ImportError {
            file: file.to_string(),
            line: None,
            column: None,
            object: Some(object),
            message,
        }
        .at(place_in(located, path))
    };
    let Value::Object(mut map) = document else {
        return match document {
            Value::Null => Ok(()),
            other => Err(error(
                at.to_string(),
                "",
                format!(
                    "is {}, not a Kubernetes object (expected YAML like `kubectl get queues -o yaml` prints)",
                    describe(&other)
                ),
            )),
        };
    };
    let text = |key: &str| {
        map.get(key)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    let (kind, api_version) = (text("kind"), text("apiVersion"));
    let name = map
        .get("metadata")
        .and_then(|m| m.get("name"))
        .and_then(Value::as_str)
        .map(str::to_string);
    if kind.is_empty() {
        return Err(error(
            at.to_string(),
            "",
            "is not a Kubernetes object: it has no `kind` (expected YAML like `kubectl get queues -o yaml` prints)".into(),
        ));
    }
    if kind.ends_with("List") {
        let Some(Value::Array(items)) = map.remove("items") else {
            return Err(error(
                format!("{kind} ({at})"),
                "items",
                "has no `items` list".into(),
            ));
        };
        let places = match located.and_then(|l| l.get("items")).map(|(_, v)| &v.node) {
            Some(yaml::Node::List(places)) => places.as_slice(),
            _ => &[],
        };
        for (i, item) in items.into_iter().enumerate() {
            collect(
                file,
                &format!("{at}, item {}", i + 1),
                item,
                places.get(i),
                found,
            );
        }
        return Ok(());
    }
    if kind == "Queue"
        && api_version.starts_with("scheduling.run.ai/")
        && api_version != KAI_QUEUE_VERSION
    {
        let name = name.as_deref().unwrap_or_default();
        return Err(queue_error(
            file,
            name,
            at,
            format!(
                "apiVersion {api_version} is refused: KAI Scheduler's Queue CRD serves only {KAI_QUEUE_VERSION} (schemas/kai/scheduling.run.ai_queues.yaml), and an older version's fields cannot be mapped onto it without guessing; export the queues as v2 (`kubectl get queues.v2.scheduling.run.ai -o yaml`) and import that"
            ),
        )
        .at(place_in(located, "apiVersion")));
    }
    if kind != "Queue" || !api_version.starts_with("scheduling.run.ai/") {
        let name = name.map(|n| format!(" \"{n}\"")).unwrap_or_default();
        let file = file_at(file, place_in(located, ""));
        found.notes.push(format!(
            "{file}: skipped {kind}{name} ({at}, apiVersion {api_version:?}): not a KAI Queue"
        ));
        return Ok(());
    }
    let Some(name) = name.filter(|n| !n.is_empty()) else {
        return Err(error(
            format!("Queue ({at})"),
            "metadata.name",
            "has no metadata.name".into(),
        ));
    };
    let object = format!("Queue \"{name}\" ({at})");
    for (path, unknown) in fields::unknown(&map) {
        let path: Vec<&str> = path.iter().map(String::as_str).collect();
        let file = file_at(file, key_in(located, &path));
        found.notes.push(format!("{file}: {object}: {unknown}"));
    }
    let metadata = map.get("metadata");
    let mut labels = fields::string_map(metadata, "labels")
        .map_err(|m| error(object.clone(), "metadata.labels", m))?;
    let mut annotations = fields::string_map(metadata, "annotations")
        .map_err(|m| error(object.clone(), "metadata.annotations", m))?;
    // kai-policy's own label is written back by `build`; a foreign manager's is replaced.
    if let Some(manager) = labels.remove(crate::lower::objects::MANAGED_BY.0)
        && manager != crate::lower::objects::MANAGED_BY.1
    {
        let file = file_at(
            file,
            key_in(
                located,
                &["metadata", "labels", crate::lower::objects::MANAGED_BY.0],
            ),
        );
        found.notes.push(format!(
            "{file}: {object}: label app.kubernetes.io/managed-by={manager} was left out: `build` labels the queue as managed by kai-policy"
        ));
    }
    if annotations.remove(LAST_APPLIED).is_some() {
        let file = file_at(
            file,
            key_in(located, &["metadata", "annotations", LAST_APPLIED]),
        );
        found.notes.push(format!(
            "{file}: {object}: annotation {LAST_APPLIED} was left out (kubectl's copy of the object, rewritten on every apply)"
        ));
    }
    // Only the name matters from the rest of metadata; spec is KAI's, with Go's zero values
    // when unset.
    map.insert("metadata".into(), serde_json::json!({ "name": name }));
    let spec = map
        .entry("spec")
        .or_insert_with(|| Value::Object(Default::default()));
    if spec.is_null() {
        *spec = Value::Object(Default::default());
    }
    validate_spec(spec).map_err(|(path, m)| error(object.clone(), &path, m))?;
    let unset = unset_fields(spec);
    let queue: QueueObject = serde_json::from_value(Value::Object(map))
        .map_err(|e| error(object.clone(), "", format!("is not a valid KAI Queue: {e}")))?;
    found.queues.push(Source {
        file: file.to_string(),
        at: at.to_string(),
        located: located.cloned(),
        object: queue,
        labels,
        annotations,
        unset,
    });
    Ok(())
}

/// The fields of each present resource that are missing or null (a misspelt one is missing).
fn unset_fields(spec: &Value) -> [Vec<&'static str>; 3] {
    let mut unset: [Vec<&'static str>; 3] = Default::default();
    for kind in ResourceKind::ALL {
        if let Some(Value::Object(r)) = spec.pointer(&format!("/resources/{}", kind.name())) {
            unset[kind as usize] = ["quota", "limit", "overQuotaWeight"]
                .into_iter()
                .filter(|f| r.get(*f).is_none_or(Value::is_null))
                .collect();
        }
    }
    unset
}

/// What KAI makes of a resource field left out (`QueueResource` has no defaults, and the
/// proportion plugin copies the zero into the queue's share), for the comment and the note.
fn unset_meaning(field: &str, kind: ResourceKind) -> String {
    let name = kind.name();
    match field {
        "limit" => format!(
            "a cap of 0, so no pod that asks for {name} can run here (isOverLimit in capacity_policy/max_allowed_check.go); drop `limit=0` to lift the cap"
        ),
        "overQuotaWeight" => {
            format!("a weight of 0, so the queue gets no share of idle {name} beyond its quota")
        }
        _ => "a guarantee of 0".to_string(),
    }
}

/// The only Queue version KAI Scheduler serves.
const KAI_QUEUE_VERSION: &str = "scheduling.run.ai/v2";
/// kubectl's copy of the last applied object: derived, never policy.
const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

fn describe(v: &Value) -> String {
    match v {
        Value::Null => "empty".into(),
        Value::Bool(b) => format!("the boolean {b}"),
        Value::Number(n) => format!("the number {n}"),
        Value::String(s) if s.chars().count() > 40 => {
            format!("the text \"{}…\"", s.chars().take(40).collect::<String>())
        }
        Value::String(s) => format!("the text {s:?}"),
        Value::Array(_) => "a list".into(),
        Value::Object(_) => "a mapping".into(),
    }
}

/// Checks the types of the spec fields we read, so that a bad value gets a message that names
/// the field instead of a deserializer's.
fn validate_spec(spec: &Value) -> Result<(), (String, String)> {
    let Value::Object(spec) = spec else {
        return Err((
            "spec".into(),
            format!("spec is {}, not a mapping", describe(spec)),
        ));
    };
    for field in [
        "displayName",
        "parentQueue",
        "preemptMinRuntime",
        "reclaimMinRuntime",
    ] {
        match spec.get(field) {
            None | Some(Value::Null | Value::String(_)) => {}
            Some(other) => {
                let path = format!("spec.{field}");
                return Err((
                    path.clone(),
                    format!("{path} is {}, not text", describe(other)),
                ));
            }
        }
    }
    match spec.get("priority") {
        None | Some(Value::Null) => {}
        Some(Value::Number(n)) if n.is_i64() => {}
        Some(other) => {
            return Err((
                "spec.priority".into(),
                format!("spec.priority is {}, not a whole number", describe(other)),
            ));
        }
    }
    let resources = match spec.get("resources") {
        None | Some(Value::Null) => return Ok(()),
        Some(Value::Object(r)) => r,
        Some(other) => {
            return Err((
                "spec.resources".into(),
                format!("spec.resources is {}, not a mapping", describe(other)),
            ));
        }
    };
    for kind in ResourceKind::ALL {
        let resource = match resources.get(kind.name()) {
            None | Some(Value::Null) => continue,
            Some(Value::Object(r)) => r,
            Some(other) => {
                let path = format!("spec.resources.{}", kind.name());
                return Err((
                    path.clone(),
                    format!("{path} is {}, not a mapping", describe(other)),
                ));
            }
        };
        for field in ["quota", "limit", "overQuotaWeight"] {
            match resource.get(field) {
                None | Some(Value::Null) => {}
                Some(Value::Number(n)) if n.as_f64().is_some_and(f64::is_finite) => {}
                Some(other) => {
                    let path = format!("spec.resources.{}.{field}", kind.name());
                    return Err((
                        path.clone(),
                        format!("{path} is {}, not a number", describe(other)),
                    ));
                }
            }
        }
    }
    Ok(())
}

/// A quota or limit in stored units (GPU milli-devices, millicores, bytes); `None` is unlimited.
type Amount = Option<i64>;

/// How a queue governs one resource, in the policy's terms.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Governed {
    quota: Amount,
    limit: Amount,
    weight: f64,
}

/// A queue ready to print.
#[derive(Debug)]
struct Queue {
    name: String,
    file: String,
    at: String,
    /// Where its name and its parent are written, for the tree's complaints.
    name_place: Place,
    parent_place: Place,
    display_name: Option<String>,
    priority: Option<i64>,
    parent: Option<String>,
    /// Per kind; `None` where not governed.
    resources: [Option<Governed>; 3],
    preempt: Option<Duration>,
    reclaim: Option<Duration>,
    /// Comments to print above each resource's line.
    comments: [Vec<String>; 3],
    labels: BTreeMap<String, String>,
    annotations: BTreeMap<String, String>,
}

fn convert(source: Source, notes: &mut Vec<String>) -> Result<Queue, ImportError> {
    let spec = &source.object.spec;
    let mut comments: [Vec<String>; 3] = Default::default();
    let mut resources = [None; 3];
    for ((slot, comments), kind) in resources
        .iter_mut()
        .zip(&mut comments)
        .zip(ResourceKind::ALL)
    {
        *slot = match spec.resources.get(kind) {
            None => {
                // KAI reads an unset resource as Go's zero values, and a limit of 0 refuses every
                // pod that asks for it (isOverLimit in capacity_policy/max_allowed_check.go):
                // kept, so the policy schedules as the cluster did, and said out loud.
                comments.push(format!(
                    "spec.resources.{} was not set, which KAI reads as quota 0, limit 0, weight 0: no pod that asks for {} can run here; drop this line to leave it ungoverned",
                    kind.name(),
                    kind.name()
                ));
                notes.push(format!(
                    "{}: Queue \"{}\": spec.resources.{} was not set, which KAI reads as limit 0 (no pod that asks for it can run); imported as `limit=0`, which `check` warns about (KP0027)",
                    file_at(&source.file, place_in(source.located.as_ref(), "spec.resources")),
                    source.object.metadata.name,
                    kind.name()
                ));
                Some(Governed {
                    quota: Some(0),
                    limit: Some(0),
                    weight: 0.0,
                })
            }
            Some(r) => {
                for field in &source.unset[kind as usize] {
                    let what = format!(
                        "spec.resources.{}.{field} was not set, which KAI reads as 0",
                        kind.name()
                    );
                    let meaning = unset_meaning(field, kind);
                    comments.push(format!("{what}: {meaning}"));
                    let path = format!("spec.resources.{}", kind.name());
                    notes.push(format!(
                        "{}: Queue \"{}\": {what} ({meaning}); imported as that",
                        file_at(&source.file, place_in(source.located.as_ref(), &path)),
                        source.object.metadata.name
                    ));
                }
                governed(r, kind, &source, comments)?
            }
        };
    }
    for c in comments.iter().flatten() {
        if c.contains("rounded") {
            notes.push(format!(
                "{}: Queue \"{}\": {c}",
                source.file, source.object.metadata.name
            ));
        }
    }
    let duration = |field: &str, text: &Option<String>| -> Result<Option<Duration>, ImportError> {
        text.as_deref()
            .map(|t| {
                parse_go_duration(t).map_err(|m| {
                    source.error_at(&format!("spec.{field}"), format!("spec.{field} {m}"))
                })
            })
            .transpose()
    };
    Ok(Queue {
        name: source.object.metadata.name.clone(),
        display_name: spec.display_name.clone(),
        priority: spec.priority,
        parent: spec.parent_queue.clone().filter(|p| !p.is_empty()),
        resources,
        preempt: duration("preemptMinRuntime", &spec.preempt_min_runtime)?,
        reclaim: duration("reclaimMinRuntime", &spec.reclaim_min_runtime)?,
        comments,
        name_place: place_in(source.located.as_ref(), "metadata.name"),
        parent_place: place_in(source.located.as_ref(), "spec.parentQueue"),
        file: source.file,
        at: source.at,
        labels: source.labels,
        annotations: source.annotations,
    })
}

/// One resource of a Queue in the policy's terms; `None` when KAI leaves it ungoverned
/// (`quota: -1, limit: -1, overQuotaWeight: 1`).
fn governed(
    r: &QueueResource,
    kind: ResourceKind,
    source: &Source,
    comments: &mut Vec<String>,
) -> Result<Option<Governed>, ImportError> {
    let mut bound = |field: &str, value: f64| -> Result<Amount, ImportError> {
        if value == -1.0 {
            return Ok(None);
        }
        let field = format!("spec.resources.{}.{field}", kind.name());
        if value < 0.0 {
            return Err(source.error_at(
                &field,
                format!(
                    "{field} is {value}; KAI uses -1 for unlimited, and other negative amounts mean nothing"
                ),
            ));
        }
        let (amount, rounded) = stored_units(value, kind)
            .map_err(|m| source.error_at(&field, format!("{field} {m}")))?;
        if rounded {
            comments.push(format!(
                "{field} {value} was rounded to {}, the finest amount a policy states",
                quantity_text(amount, kind)
            ));
        }
        Ok(Some(amount))
    };
    let quota = bound("quota", r.quota.0)?;
    let limit = bound("limit", r.limit.0)?;
    let weight = r.over_quota_weight.0;
    if weight < 0.0 {
        let field = format!("spec.resources.{}.overQuotaWeight", kind.name());
        return Err(source.error_at(
            &field,
            format!("{field} is {weight}; weights cannot be negative"),
        ));
    }
    if quota.is_none() && limit.is_none() && weight == 1.0 {
        return Ok(None);
    }
    Ok(Some(Governed {
        quota,
        limit,
        weight,
    }))
}

/// A KAI amount (devices, millicores, megabytes) in stored units, exactly when the decimal KAI
/// holds allows it, else rounded to the nearest unit (`true`).
fn stored_units(value: f64, kind: ResourceKind) -> Result<(i64, bool), String> {
    let (suffix, per_kai_unit) = match kind {
        ResourceKind::Gpu => ("", 1000.0),
        ResourceKind::Cpu => ("m", 1.0),
        ResourceKind::Memory => ("M", 1e6),
    };
    // f64's Display is the shortest decimal that reads back as the same number, never with an
    // exponent: the decimal the YAML held (or one KAI cannot tell from it).
    match parse_quantity(&format!("{value}{suffix}"), kind) {
        Ok(v) => Ok((v, false)),
        Err(QuantityError::TooPrecise { .. }) => {
            let v = (value * per_kai_unit).round();
            if v > MAX_AMOUNT as f64 {
                Err(format!("is {value}, too large"))
            } else {
                Ok((v as i64, true))
            }
        }
        Err(QuantityError::TooLarge(_)) => Err(format!("is {value}, too large")),
        Err(e) => Err(format!("is {value}: {e}")),
    }
}

/// The queue tree: children in input order, roots in input order.
struct Tree {
    roots: Vec<usize>,
    children: Vec<Vec<usize>>,
    /// Whether the queue's parent is among the imported queues.
    parent_found: Vec<bool>,
}

impl Tree {
    fn new(queues: &[Queue]) -> Result<Self, ImportError> {
        let mut index: HashMap<&str, usize> = HashMap::new();
        for (i, q) in queues.iter().enumerate() {
            if let Some(&first) = index.get(q.name.as_str()) {
                let f = &queues[first];
                return Err(queue_error(
                    &q.file,
                    &q.name,
                    &q.at,
                    format!(
                        "a queue of this name was already imported from {}{} ({})",
                        f.file,
                        where_in(
                            (f.name_place.line > 0).then_some(f.name_place.line),
                            (f.name_place.column > 0).then_some(f.name_place.column)
                        ),
                        f.at
                    ),
                )
                .at(q.name_place));
            }
            index.insert(&q.name, i);
        }
        let parent: Vec<Option<usize>> = queues
            .iter()
            .map(|q| q.parent.as_deref().and_then(|p| index.get(p).copied()))
            .collect();
        // A parent chain that never ends is a cycle: walk each chain once, iteratively.
        let mut state: Vec<u8> = vec![0; queues.len()]; // 0 unseen, 1 on the current path, 2 done
        for start in 0..queues.len() {
            let mut path: Vec<usize> = Vec::new();
            let mut at = Some(start);
            while let Some(i) = at {
                match state[i] {
                    2 => break,
                    1 => {
                        let from = path.iter().position(|&p| p == i).unwrap_or(0);
                        let mut names: Vec<&str> = path[from..]
                            .iter()
                            .map(|&p| queues[p].name.as_str())
                            .collect();
                        names.push(&queues[i].name);
                        let q = &queues[i];
                        return Err(queue_error(
                            &q.file,
                            &q.name,
                            &q.at,
                            format!("spec.parentQueue makes a cycle: {}", names.join(" → ")),
                        )
                        .at(q.parent_place));
                    }
                    _ => {
                        state[i] = 1;
                        path.push(i);
                        at = parent[i];
                    }
                }
            }
            for p in path {
                state[p] = 2;
            }
        }
        let mut roots = Vec::new();
        let mut children = vec![Vec::new(); queues.len()];
        for (i, p) in parent.iter().enumerate() {
            match p {
                Some(p) => children[*p].push(i),
                None => roots.push(i),
            }
        }
        Ok(Tree {
            roots,
            children,
            parent_found: parent.iter().map(Option::is_some).collect(),
        })
    }
}

/// The parents whose children are promised more than the parent's own quota, as `check` counts
/// it (KP0013: finite parent quota, children's governed quotas, an unlimited one counting as
/// more): `"default-parent-queue" (gpu)`.
fn oversubscribed(queues: &[Queue], tree: &Tree) -> Vec<String> {
    let mut found = Vec::new();
    for (i, q) in queues.iter().enumerate() {
        let kinds: Vec<&str> = ResourceKind::ALL
            .iter()
            .filter(|&&kind| {
                let Some(Governed { quota: Some(p), .. }) = q.resources[kind as usize] else {
                    return false;
                };
                let quotas = tree.children[i]
                    .iter()
                    .filter_map(|&c| queues[c].resources[kind as usize].map(|g| g.quota));
                let mut sum: i128 = 0;
                for quota in quotas {
                    match quota {
                        Some(v) => sum += i128::from(v),
                        None => return true,
                    }
                }
                sum > i128::from(p)
            })
            .map(|k| k.name())
            .collect();
        if !kinds.is_empty() {
            found.push(format!("{} ({})", kdl_string(&q.name), kinds.join(", ")));
        }
    }
    found
}

/// A KDL string, always quoted.
fn kdl_string(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if c.is_control()
                || matches!(c, '\u{2028}' | '\u{2029}' | '\u{200E}'..='\u{200F}'
                    | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' | '\u{FEFF}') =>
            {
                out.push_str(&format!("\\u{{{:x}}}", c as u32));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// An amount as the policy writes it: GPUs and CPU cores as numbers (`24.5`, `32.5`), less than
/// a core in millicores (`"500m"`), memory as the shortest exact quantity (`"960Gi"`).
fn amount_text(amount: Amount, kind: ResourceKind) -> String {
    match (amount, kind) {
        (None, _) => "#inf".into(),
        (Some(0), _) => "0".into(),
        (Some(v), ResourceKind::Gpu) => format_thousandths(v),
        (Some(v), ResourceKind::Cpu) if v >= 1000 => format_thousandths(v),
        (Some(v), kind) => kdl_string(&quantity_text(v, kind)),
    }
}

/// A quantity with a unit. Memory that no unit divides would come out as a bare count of
/// bytes, which `check` takes for a forgotten unit (KP0026); it is written in KAI's own
/// megabytes instead, with as many decimals as it needs (`"1.000001M"`).
fn quantity_text(v: i64, kind: ResourceKind) -> String {
    let text = format_quantity(v, kind);
    if kind != ResourceKind::Memory || v == 0 || !text.ends_with(|c: char| c.is_ascii_digit()) {
        return text;
    }
    let fraction = format!("{:06}", v % 1_000_000);
    format!("{}.{}M", v / 1_000_000, fraction.trim_end_matches('0'))
}

fn resource_line(kind: ResourceKind, g: &Governed) -> String {
    let mut line = format!("{} quota={}", kind.name(), amount_text(g.quota, kind));
    if g.limit.is_some() {
        line.push_str(&format!(" limit={}", amount_text(g.limit, kind)));
    }
    if g.weight != 1.0 {
        line.push_str(&format!(" weight={}", g.weight));
    }
    line
}

fn render(queues: &[Queue], tree: &Tree, oversubscribed: &[String]) -> String {
    let mut lines: Vec<String> = vec![
        "// Imported by `kai-policy import` from KAI Queue objects.".into(),
        "// KAI queues carry no namespace rules: every leaf queue is open to all namespaces".into(),
        "// (`namespaces \"*\"`) until you list the namespaces whose pods belong to it.".into(),
    ];
    if !oversubscribed.is_empty() {
        lines.extend([
            String::new(),
            "// KAI lets children's quotas add up to more than their parent's, and these parents".into(),
            format!("// rely on it: {}.", oversubscribed.join(", ")),
            "// `allow` keeps that; give the parents a quota and remove the line to have it checked.".into(),
            "cluster \"imported\" {".into(),
            format!("{INDENT}oversubscription \"allow\""),
            "}".into(),
        ]);
    }
    /// A step of the walk: open a queue at a depth (with the min-runtimes it inherits), or close one.
    enum Step {
        Open(usize, usize, [Option<Duration>; 2]),
        Close(usize),
    }
    let mut stack: Vec<Step> = tree
        .roots
        .iter()
        .rev()
        .map(|&r| Step::Open(r, 0, [None, None]))
        .collect();
    while let Some(step) = stack.pop() {
        let (i, depth, inherited) = match step {
            Step::Close(depth) => {
                lines.push(format!("{}}}", INDENT.repeat(depth)));
                continue;
            }
            Step::Open(i, depth, inherited) => (i, depth, inherited),
        };
        let q = &queues[i];
        let pad = INDENT.repeat(depth);
        let inner = INDENT.repeat(depth + 1);
        if depth == 0 {
            lines.push(String::new());
        }
        let mut head = format!("{pad}queue {}", kdl_string(&q.name));
        if let Some(parent) = &q.parent
            && !tree.parent_found[i]
        {
            lines.push(format!(
                "{pad}// parent {} is not among the imported queues: import it too, or define it",
                kdl_string(parent)
            ));
            head.push_str(&format!(" parent={}", kdl_string(parent)));
        }
        if let Some(d) = &q.display_name {
            head.push_str(&format!(" display-name={}", kdl_string(d)));
        }
        if let Some(p) = q.priority.filter(|&p| p != 100) {
            head.push_str(&format!(" priority={p}"));
        }
        lines.push(format!("{head} {{"));
        for ((kind, g), comments) in ResourceKind::ALL.iter().zip(&q.resources).zip(&q.comments) {
            for c in comments {
                lines.push(format!("{inner}// {c}"));
            }
            if let Some(g) = g {
                lines.push(format!("{inner}{}", resource_line(*kind, g)));
            }
        }
        // Min-runtimes inherit in the policy, not in KAI: write each where it differs from what
        // the queue would inherit. A queue without one under a parent with one gets "0s".
        let mut resolved = inherited;
        let mut props = Vec::new();
        for (slot, (key, own)) in [("preempt", q.preempt), ("reclaim", q.reclaim)]
            .into_iter()
            .enumerate()
        {
            if own == inherited[slot] {
                continue;
            }
            let value = own.unwrap_or(Duration(0));
            if own.is_none() {
                lines.push(format!(
                    "{inner}// the Queue has no {key} min-runtime; \"0s\" keeps it from inheriting its parent's"
                ));
            }
            props.push(format!("{key}={}", kdl_string(&value.to_string())));
            resolved[slot] = Some(value);
        }
        if !props.is_empty() {
            lines.push(format!("{inner}min-runtime {}", props.join(" ")));
        }
        for (node, map) in [("labels", &q.labels), ("annotations", &q.annotations)] {
            if !map.is_empty() {
                let pairs: Vec<String> = map
                    .iter()
                    .map(|(k, v)| format!("{}={}", kdl_string(k), kdl_string(v)))
                    .collect();
                lines.push(format!("{inner}{node} {}", pairs.join(" ")));
            }
        }
        let children = &tree.children[i];
        if children.is_empty() {
            lines.push(format!(
                "{inner}// TODO: list the namespaces whose pods belong to this queue"
            ));
            lines.push(format!("{inner}namespaces \"*\""));
        }
        stack.push(Step::Close(depth));
        for &c in children.iter().rev() {
            stack.push(Step::Open(c, depth + 1, resolved));
        }
    }
    let mut out = lines.join("\n");
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kai_amounts_become_stored_units_exactly() {
        assert_eq!(stored_units(24.5, ResourceKind::Gpu), Ok((24_500, false)));
        assert_eq!(stored_units(500.0, ResourceKind::Cpu), Ok((500, false)));
        assert_eq!(
            stored_units(1030792.15104, ResourceKind::Memory),
            Ok((960 << 30, false))
        );
        assert_eq!(stored_units(0.0005, ResourceKind::Gpu), Ok((1, true)));
        assert!(stored_units(1e30, ResourceKind::Memory).is_err());
    }

    #[test]
    fn memory_always_has_a_unit() {
        let m = ResourceKind::Memory;
        assert_eq!(quantity_text(960 << 30, m), "960Gi");
        assert_eq!(quantity_text(1_000_001, m), "1.000001M");
        assert_eq!(quantity_text(1_234_567_891, m), "1234.567891M");
        assert_eq!(quantity_text(500, ResourceKind::Cpu), "500m");
    }

    #[test]
    fn strings_are_quoted_for_kdl() {
        assert_eq!(kdl_string("a \"b\" \\ c\n"), r#""a \"b\" \\ c\n""#);
        assert_eq!(kdl_string("\u{1}"), r#""\u{1}""#);
    }
}
