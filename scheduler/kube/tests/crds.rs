//! The CRDs generated from our Rust types: committed and fresh, compatible with KAI's own (every
//! field we model has KAI's type, every field we do not model is kept), and every object KAI's
//! CRD accepts — the compiler's Queue objects for the example policy, and objects in the shapes
//! of KAI's documentation — fits our schema and our types.

use std::path::{Path, PathBuf};

use kai_scheduler_kube::crd::{self, PodGroup, Queue};
use serde_json::Value;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `charts/kai-scheduler/crds/` holds what [`crd::crd_yaml`] prints; `KAI_UPDATE_CRDS=1`
/// rewrites it.
#[test]
fn committed_crds_are_current() {
    let dir = repo().join("charts/kai-scheduler/crds");
    let update = std::env::var_os("KAI_UPDATE_CRDS").is_some();
    for (name, text) in crd::crd_yaml() {
        let path = dir.join(name);
        if update {
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(&path, &text).unwrap();
            continue;
        }
        let committed = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            committed == text,
            "{} is stale: run `KAI_UPDATE_CRDS=1 cargo test -p kai-scheduler-kube --test crds` and commit it",
            path.display()
        );
    }
}

/// The `openAPIV3Schema` of a CRD (as JSON) for one version.
fn version_schema(crd: &Value, version: &str) -> Value {
    crd["spec"]["versions"]
        .as_array()
        .and_then(|v| v.iter().find(|v| v["name"] == version))
        .unwrap_or_else(|| panic!("the CRD serves {version}"))["schema"]["openAPIV3Schema"]
        .clone()
}

fn kais(file: &str, version: &str) -> Value {
    let path = repo().join("schemas/kai").join(file);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    version_schema(&serde_saphyr::from_str(&text).unwrap(), version)
}

fn ours(kind: &str) -> Value {
    let crd = match kind {
        "Queue" => crd::queue_crd(),
        _ => crd::pod_group_crd(),
    };
    let version = if kind == "Queue" { "v2" } else { "v2alpha2" };
    version_schema(&serde_json::to_value(crd).unwrap(), version)
}

fn kai_schema(kind: &str) -> Value {
    match kind {
        "Queue" => kais("scheduling.run.ai_queues.yaml", "v2"),
        _ => kais("scheduling.run.ai_podgroups.yaml", "v2alpha2"),
    }
}

fn errors(schema: &Value, instance: &Value) -> Vec<String> {
    let validator = jsonschema::validator_for(schema).expect("schema compiles");
    validator
        .iter_errors(instance)
        .map(|e| format!("{e} at {}", e.instance_path()))
        .collect()
}

/// Every object the test knows KAI's CRD accepts.
fn kai_objects() -> Vec<Value> {
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/objects/kai-examples.yaml"),
    )
    .unwrap();
    let mut objects: Vec<Value> = serde_saphyr::from_multiple(&text).unwrap();
    let (sources, early) =
        kai_policy_compiler::source::load_dir(&repo().join("policies")).expect("example loads");
    assert!(early.is_empty());
    let checked = kai_policy_compiler::check::check(&sources, Vec::new());
    let policy = checked.policy.expect("the example policy has no errors");
    let artifacts = kai_policy_compiler::lower::Artifacts::new(&policy, Default::default());
    assert!(!artifacts.queues.is_empty());
    objects.extend(
        artifacts
            .queues
            .iter()
            .map(|q| serde_json::to_value(q).unwrap()),
    );
    objects
}

/// The object read into our types and written back (the fields we do not model dropped).
fn written_back(object: &Value) -> Value {
    match object["kind"].as_str().unwrap() {
        "Queue" => serde_json::to_value(serde_json::from_value::<Queue>(object.clone()).unwrap()),
        _ => serde_json::to_value(serde_json::from_value::<PodGroup>(object.clone()).unwrap()),
    }
    .unwrap()
}

#[test]
fn every_object_kais_crd_accepts_fits_our_schema_and_our_types() {
    for object in kai_objects() {
        let kind = object["kind"].as_str().unwrap();
        let name = format!("{kind} {}", object["metadata"]["name"]);
        assert_eq!(
            errors(&kai_schema(kind), &object),
            Vec::<String>::new(),
            "KAI's schema, {name}"
        );
        assert_eq!(
            errors(&ours(kind), &object),
            Vec::<String>::new(),
            "our schema, {name}"
        );
        // Our types read it, and what they write back is valid for both schemas.
        let back = written_back(&object);
        assert_eq!(
            errors(&kai_schema(kind), &back),
            Vec::<String>::new(),
            "{name} written back"
        );
        assert_eq!(back["spec"]["queue"], object["spec"]["queue"], "{name}");
        // A PodGroup's spec survives whole (sub-groups, topology, …): ingest reads it from the
        // watch cache's typed objects.
        if kind == "PodGroup" {
            assert_eq!(back["spec"], object["spec"], "{name}");
        }
        assert_eq!(
            back["spec"]["parentQueue"], object["spec"]["parentQueue"],
            "{name}"
        );
    }
}

#[test]
fn quantities_read_whether_written_as_numbers_or_strings() {
    let objects = kai_objects();
    let research = objects
        .iter()
        .find(|o| o["metadata"]["name"] == "research")
        .unwrap();
    let queue: Queue = serde_json::from_value(research.clone()).unwrap();
    let requested = queue.status.unwrap().requested.unwrap();
    assert_eq!(requested["cpu"], crd::Quantity("4".into()));
    assert_eq!(requested["nvidia.com/gpu"], crd::Quantity("5500m".into()));
}

/// Walks `ours` and finds each property at the same path in `kais`, with the same type.
fn same_types(ours: &Value, kais: &Value, path: &str, out: &mut Vec<String>) {
    let kind = |v: &Value| -> String {
        if v["x-kubernetes-int-or-string"] == true {
            "int-or-string".into()
        } else {
            v["type"].as_str().unwrap_or("?").to_string()
        }
    };
    if kind(ours) != kind(kais) {
        out.push(format!(
            "{path}: ours is {}, KAI's is {}",
            kind(ours),
            kind(kais)
        ));
        return;
    }
    if let Some(props) = ours["properties"].as_object() {
        for (name, schema) in props {
            let here = format!("{path}.{name}");
            match kais["properties"].get(name) {
                Some(theirs) => same_types(schema, theirs, &here, out),
                None => out.push(format!("{here}: KAI's CRD has no such field")),
            }
        }
    }
    for key in ["items", "additionalProperties"] {
        if ours[key].is_object() {
            same_types(&ours[key], &kais[key], &format!("{path}[{key}]"), out);
        }
    }
}

#[test]
fn every_field_we_model_is_in_kais_crd_with_kais_type() {
    for kind in ["Queue", "PodGroup"] {
        let mut out = Vec::new();
        for part in ["spec", "status"] {
            same_types(
                &ours(kind)["properties"][part],
                &kai_schema(kind)["properties"][part],
                &format!("{kind}.{part}"),
                &mut out,
            );
        }
        assert_eq!(out, Vec::<String>::new());
    }
}

#[test]
fn the_fields_we_do_not_model_are_kept_not_pruned() {
    for kind in ["Queue", "PodGroup"] {
        for part in ["spec", "status"] {
            assert_eq!(
                ours(kind)["properties"][part]["x-kubernetes-preserve-unknown-fields"],
                true,
                "{kind}.{part}"
            );
        }
    }
}

#[test]
fn an_object_without_a_spec_is_accepted_as_kais_crd_accepts_it() {
    for (kind, api_version) in [
        ("Queue", "scheduling.run.ai/v2"),
        ("PodGroup", "scheduling.run.ai/v2alpha2"),
    ] {
        let bare =
            serde_json::json!({"apiVersion": api_version, "kind": kind, "metadata": {"name": "x"}});
        assert!(errors(&kai_schema(kind), &bare).is_empty());
        assert_eq!(errors(&ours(kind), &bare), Vec::<String>::new(), "{kind}");
    }
}

#[test]
fn our_schema_refuses_what_kais_refuses_in_the_fields_we_model() {
    let bad = [
        serde_json::json!({"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup",
            "metadata": {"name": "g"}, "spec": {"minMember": -1}}),
        serde_json::json!({"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup",
            "metadata": {"name": "g"}, "spec": {"queue": 7}}),
        serde_json::json!({"apiVersion": "scheduling.run.ai/v2", "kind": "Queue",
            "metadata": {"name": "q"}, "spec": {"resources": {"gpu": {"quota": "two"}}}}),
        serde_json::json!({"apiVersion": "scheduling.run.ai/v2", "kind": "Queue",
            "metadata": {"name": "q"}, "status": {"allocated": {"cpu": "lots"}}}),
    ];
    for object in bad {
        let kind = object["kind"].as_str().unwrap();
        assert!(
            !errors(&kai_schema(kind), &object).is_empty(),
            "KAI's refuses {object}"
        );
        assert!(
            !errors(&ours(kind), &object).is_empty(),
            "ours refuses {object}"
        );
    }
}

#[test]
fn the_pod_groups_the_scheduler_makes_fit_kais_schema_and_ours() {
    use kai_scheduler::cluster::{ObjectRef, PodGroup as Group, SubGroup};
    let sub = |name: &str, parent: Option<&str>, min: Option<u32>, min_sub: Option<u32>| SubGroup {
        name: name.into(),
        parent: parent.map(Into::into),
        min_member: min,
        min_sub_group: min_sub,
        topology: (name == "workers").then(|| "cluster-topology".into()),
        topology_required: (name == "workers").then(|| "rack".into()),
        topology_preferred: None,
    };
    let owner = Some(Box::new(ObjectRef {
        api_version: "jobset.x-k8s.io/v1alpha2".into(),
        kind: "JobSet".into(),
        name: "train".into(),
        uid: "8c3e".into(),
    }));
    let plain = Group {
        namespace: "team-a".into(),
        name: "pg-train".into(),
        min_member: 4,
        kind_priority: Some("train".into()),
        topology_required: Some("zone".into()),
        owner: owner.clone(),
        ..Group::default()
    };
    let with_subs = Group {
        min_member: 0,
        min_sub_group: Some(1),
        sub_groups: vec![
            sub("workers", None, None, Some(1)),
            sub("workers-replica-0", Some("workers"), Some(2), None),
        ],
        ..plain.clone()
    };
    for group in [plain, with_subs] {
        let object = kai_scheduler_kube::grouper::object(&group, Some("a"));
        assert_eq!(
            errors(&kai_schema("PodGroup"), &object),
            Vec::<String>::new(),
            "{object}"
        );
        assert_eq!(
            errors(&ours("PodGroup"), &object),
            Vec::<String>::new(),
            "{object}"
        );
        assert_eq!(object["metadata"]["ownerReferences"][0]["uid"], "8c3e");
    }
}
