//! What `build` emits: KAI Queue objects that KAI's own CRD schema accepts, a compiled config
//! that its published JSON Schema accepts, and the same bytes for the same policy every time.

use std::path::{Path, PathBuf};

use kai_policy_compiler::check::check;
use kai_policy_compiler::lower::{Artifacts, CompiledPolicy, SourceInfo};
use kai_policy_compiler::source::{SourceFile, SourceSet, load_dir};
use serde_json::Value;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn compile(sources: &SourceSet) -> Artifacts {
    let checked = check(sources, Vec::new());
    let policy = checked
        .policy
        .unwrap_or_else(|| panic!("policy has errors: {:#?}", checked.diagnostics));
    Artifacts::new(&policy, SourceInfo::default())
}

fn example() -> Artifacts {
    let (sources, early) = load_dir(Path::new("../policies")).expect("example policy loads");
    assert!(early.is_empty());
    compile(&sources)
}

/// A policy that uses every way of writing an amount, to exercise unit conversion.
fn every_notation() -> Artifacts {
    compile(&SourceSet::new(vec![SourceFile::new(
        "all.kdl",
        r#"
        cluster "c" { capacity cpu="512" memory="4Ti"; min-runtime preempt="90s" }
        priority-class "p" value=10
        queue "dept" display-name="yes" priority=300 {
            gpu quota=#inf limit=#inf weight=0.25
            cpu quota="1500m" limit=400
            memory quota="2G" limit="1.5Ti"
            queue "half" { gpu quota=0.5 limit=1.25; memory quota=1e9; namespaces "on" "12-30"; labels "kai.scheduler/node-pool"="pool-a" "team"="true"; annotations "example.com/owner"="ML infra: #ml-infra"; }
            queue "open" { namespaces "*"; min-runtime reclaim="1h30m" }
        }
        "#,
    )]))
}

/// KAI's Queue schema, made strict: every object that lists its properties rejects others, so a
/// misspelt field fails here instead of being pruned silently by the API server.
fn kai_queue_schema() -> Value {
    let path = repo().join("schemas/kai/scheduling.run.ai_queues.yaml");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let crd: Value = serde_saphyr::from_str(&text).expect("CRD parses");
    let version = crd["spec"]["versions"]
        .as_array()
        .and_then(|v| v.iter().find(|v| v["name"] == "v2"))
        .expect("CRD serves v2");
    let mut schema = version["schema"]["openAPIV3Schema"].clone();
    fn strict(v: &mut Value) {
        if let Value::Object(map) = v {
            if map.contains_key("properties") && !map.contains_key("additionalProperties") {
                map.insert("additionalProperties".into(), Value::Bool(false));
            }
            map.values_mut().for_each(strict);
        } else if let Value::Array(items) = v {
            items.iter_mut().for_each(strict);
        }
    }
    strict(&mut schema);
    schema
}

#[test]
fn every_queue_object_validates_against_kais_own_crd_schema() {
    let validator = jsonschema::validator_for(&kai_queue_schema()).expect("schema compiles");
    for artifacts in [example(), every_notation()] {
        for queue in &artifacts.queues {
            let instance = serde_json::to_value(queue).unwrap();
            let errors: Vec<String> = validator
                .iter_errors(&instance)
                .map(|e| format!("{} at {}", e, e.instance_path()))
                .collect();
            assert!(errors.is_empty(), "{}: {errors:#?}", queue.metadata.name);
        }
    }
}

#[test]
fn the_strict_crd_schema_rejects_a_misspelt_field() {
    let validator = jsonschema::validator_for(&kai_queue_schema()).unwrap();
    let mut instance = serde_json::to_value(&example().queues[0]).unwrap();
    instance["spec"]["resources"]["gpu"]["overquotaWeight"] = Value::from(1);
    assert!(!validator.is_valid(&instance));
}

#[test]
fn units_are_kais_and_every_resource_is_explicit() {
    let a = every_notation();
    let dept = &a.queues[0].spec.resources;
    let (gpu, cpu, memory) = (dept.gpu.unwrap(), dept.cpu.unwrap(), dept.memory.unwrap());
    assert_eq!(
        (gpu.quota.0, gpu.limit.0, gpu.over_quota_weight.0),
        (-1.0, -1.0, 0.25)
    );
    assert_eq!(
        (cpu.quota.0, cpu.limit.0),
        (1500.0, 400_000.0),
        "CPU in millicores"
    );
    assert_eq!(memory.quota.0, 2000.0, "memory in megabytes of 10^6 bytes");
    assert_eq!(memory.limit.0, 1.5 * 1024f64.powi(4) / 1e6);
    let half = &a.queues[1].spec.resources;
    assert_eq!(
        (half.gpu.unwrap().quota.0, half.gpu.unwrap().limit.0),
        (0.5, 1.25)
    );
    let open = &a.queues[2].spec.resources;
    for r in [open.gpu, open.cpu, open.memory] {
        let r = r.expect("explicit even when not governed");
        assert_eq!(
            (r.quota.0, r.limit.0, r.over_quota_weight.0),
            (-1.0, -1.0, 1.0),
            "not governed lowers to -1/-1"
        );
    }
    assert_eq!(
        a.queues[2].spec.reclaim_min_runtime.as_deref(),
        Some("1h30m")
    );
    assert_eq!(
        a.queues[2].spec.preempt_min_runtime.as_deref(),
        Some("1m30s"),
        "inherited from the cluster"
    );
}

/// `labels` and `annotations` reach the Queue object (KAI's node-pool label decides which
/// scheduler shard sees the queue), beside kai-policy's own label, and nowhere else.
#[test]
fn labels_and_annotations_lower_to_the_queue_object() {
    let a = every_notation();
    insta::assert_snapshot!(
        "labelled-queue.yaml",
        kai_policy_compiler::lower::yaml_stream(&a.queues[1..2]).unwrap()
    );
    assert!(a.queues[0].metadata.annotations.is_empty(), "not inherited");
    assert_eq!(a.queues[0].metadata.labels.len(), 1, "only managed-by");
}

#[test]
fn yaml_quotes_strings_that_go_would_read_as_booleans_or_numbers() {
    let yaml = every_notation().queues_yaml().unwrap();
    assert!(yaml.contains("displayName: \"yes\""), "{yaml}");
    let back: Vec<Value> = serde_saphyr::from_multiple(&yaml).unwrap();
    assert_eq!(back[0]["spec"]["displayName"], "yes");
}

#[test]
fn queues_come_parents_first() {
    let a = example();
    let mut seen = std::collections::HashSet::new();
    for q in &a.queues {
        if let Some(parent) = &q.spec.parent_queue {
            assert!(
                seen.contains(parent),
                "{} before its parent {parent}",
                q.metadata.name
            );
        }
        seen.insert(q.metadata.name.clone());
    }
}

#[test]
fn the_same_policy_gives_byte_identical_output() {
    let render = |a: &Artifacts| {
        (
            a.queues_yaml().unwrap(),
            a.priority_classes_yaml().unwrap(),
            a.config.to_json(),
        )
    };
    let first = render(&example());
    for _ in 0..3 {
        assert_eq!(render(&example()), first);
    }
    // Files given in another order are merged in path order all the same.
    let (sources, _) = load_dir(Path::new("../policies")).unwrap();
    let mut files: Vec<SourceFile> = sources.iter().map(|(_, f)| f.clone()).collect();
    files.reverse();
    assert_eq!(render(&compile(&SourceSet::new(files))), first);
}

#[test]
fn the_compiled_config_round_trips_and_its_digest_covers_the_content() {
    let config = example().config;
    let back: CompiledPolicy = serde_json::from_str(&config.to_json()).unwrap();
    assert_eq!(back, config);
    assert!(back.verify());
    let mut edited = back.clone();
    edited.content.queues[0].priority += 1;
    assert!(!edited.verify(), "a hand edit must not keep the digest");
    let mut moved = back;
    moved.source.revision = Some("0".repeat(40));
    assert!(
        moved.verify(),
        "the revision is not content: the same policy at two commits has one digest"
    );
}

#[test]
fn the_compiled_config_matches_its_published_schema() {
    let schema: Value = serde_json::from_str(
        &std::fs::read_to_string(repo().join("schemas/compiled-policy.schema.json")).unwrap(),
    )
    .unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    for a in [example(), every_notation()] {
        let instance = serde_json::to_value(&a.config).unwrap();
        let errors: Vec<String> = validator
            .iter_errors(&instance)
            .map(|e| e.to_string())
            .collect();
        assert!(errors.is_empty(), "{errors:#?}");
    }
}

/// `schemas/` holds what `kai-policy schema` prints; `KAI_UPDATE_SCHEMAS=1` rewrites it.
#[test]
fn committed_schemas_are_current() {
    let dir = repo().join("schemas");
    let update = std::env::var_os("KAI_UPDATE_SCHEMAS").is_some();
    for (name, text) in kai_policy_compiler::schemas() {
        let path = dir.join(name);
        if update {
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(&path, &text).unwrap();
            continue;
        }
        let committed = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            committed == text,
            "{} is stale: run `KAI_UPDATE_SCHEMAS=1 cargo test -p kai-policy-compiler --test lowering` and commit it",
            path.display()
        );
    }
}

#[test]
fn the_example_policy_lowers_to_these_objects() {
    let a = example();
    insta::assert_snapshot!("example-queues.yaml", a.queues_yaml().unwrap());
    insta::assert_snapshot!(
        "example-priorityclasses.yaml",
        a.priority_classes_yaml().unwrap()
    );
    insta::assert_snapshot!("example-scheduler-config.json", a.config.to_json());
}
