//! `kai-policy import`'s library half: KAI Queue YAML → KDL policy, and the round trip
//! policy → Queue objects → YAML → import → policy → the same Queue objects.

use std::collections::BTreeMap;
use std::path::Path;

use kai_policy_compiler::check::check;
use kai_policy_compiler::format::format;
use kai_policy_compiler::import::{ImportError, import, parse_go_duration};
use kai_policy_compiler::lower::objects::{
    Metadata, Number, QueueObject, QueueResource, QueueResources, QueueSpec,
};
use kai_policy_compiler::lower::{Artifacts, SourceInfo, yaml_stream};
use kai_policy_compiler::source::{SourceFile, SourceSet, load_dir};
use proptest::prelude::*;

/// Checks and builds policy text (with an optional prelude file), returning the Queue objects.
fn build(files: &[(&str, &str)]) -> Vec<QueueObject> {
    let sources = SourceSet::new(
        files
            .iter()
            .map(|(name, text)| SourceFile::new(*name, *text))
            .collect(),
    );
    let checked = check(&sources, Vec::new());
    let policy = checked.policy.unwrap_or_else(|| {
        panic!(
            "the policy has errors: {:#?}\n{}",
            checked.diagnostics,
            files.last().unwrap().1
        )
    });
    Artifacts::new(&policy, SourceInfo::default()).queues
}

/// What a Queue means to KAI: everything but metadata other than the name, with min-runtimes
/// compared as lengths of time (`5m` and `5m0s` are the same to KAI).
type Meaning = (QueueSpec, Option<u64>, Option<u64>);

fn meaning(queues: &[QueueObject]) -> BTreeMap<String, Meaning> {
    let seconds = |d: &Option<String>| d.as_deref().map(|d| parse_go_duration(d).unwrap().0);
    queues
        .iter()
        .map(|q| {
            let mut spec = q.spec.clone();
            let runtimes = (
                seconds(&spec.preempt_min_runtime),
                seconds(&spec.reclaim_min_runtime),
            );
            spec.preempt_min_runtime = None;
            spec.reclaim_min_runtime = None;
            (q.metadata.name.clone(), (spec, runtimes.0, runtimes.1))
        })
        .collect()
}

fn example_queues() -> Vec<QueueObject> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../policies");
    let (sources, early) = load_dir(&dir).expect("example loads");
    assert!(early.is_empty());
    let policy = check(&sources, Vec::new()).policy.expect("example checks");
    Artifacts::new(&policy, SourceInfo::default()).queues
}

#[test]
fn the_example_policy_round_trips_through_its_queue_objects() {
    let original = example_queues();
    let yaml = yaml_stream(&original).unwrap();
    let imported = import(&[("queues.yaml", &yaml)]).unwrap();
    assert_eq!(imported.queues, original.len());
    assert!(imported.notes.is_empty(), "{:?}", imported.notes);
    insta::assert_snapshot!("example-imported", imported.kdl);
    assert_eq!(
        format(&imported.kdl).unwrap(),
        imported.kdl,
        "import writes the canonical layout"
    );
    let sources = SourceSet::new(vec![SourceFile::new("imported.kdl", imported.kdl.as_str())]);
    let checked = check(&sources, Vec::new());
    assert!(checked.diagnostics.is_empty(), "{:#?}", checked.diagnostics);
    let rebuilt = build(&[("imported.kdl", &imported.kdl)]);
    // Strings too, not only meanings: the example's own output round-trips byte for byte.
    let specs = |q: &[QueueObject]| -> BTreeMap<String, QueueSpec> {
        q.iter()
            .map(|q| (q.metadata.name.clone(), q.spec.clone()))
            .collect()
    };
    assert_eq!(specs(&rebuilt), specs(&original));
}

#[test]
fn a_kubectl_list_with_status_and_server_fields_imports_cleanly() {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/import-fixtures/kubectl-queues.yaml");
    let yaml = std::fs::read_to_string(&path).unwrap();
    let imported = import(&[("kubectl-queues.yaml", &yaml)]).unwrap();
    assert_eq!(imported.queues, 3);
    insta::assert_snapshot!("kubectl-imported", imported.kdl);
    let rebuilt = build(&[("imported.kdl", &imported.kdl)]);
    // The same queues as the input, read the way KAI reads them.
    let list: serde_json::Value = serde_saphyr::from_str(&yaml).unwrap();
    let original: Vec<QueueObject> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|item| {
            let mut item = item.clone();
            item["metadata"] = serde_json::json!({"name": item["metadata"]["name"]});
            serde_json::from_value(item).unwrap()
        })
        .collect();
    let mut expected = meaning(&original);
    // KAI's default priority is 100 where the object leaves it out; build writes it.
    for (spec, _, _) in expected.values_mut() {
        spec.priority.get_or_insert(100);
    }
    assert_eq!(meaning(&rebuilt), expected);
}

#[test]
fn a_stream_mixing_kinds_skips_the_others_with_a_note() {
    let yaml = r#"
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: train}
value: 100
---
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata: {name: volcano-queue}
---
apiVersion: scheduling.run.ai/v2
kind: Queue
metadata: {name: solo}
spec:
  resources:
    gpu: {quota: 2, limit: -1, overQuotaWeight: 1}
    cpu: {quota: -1, limit: -1, overQuotaWeight: 1}
    memory: {quota: -1, limit: -1, overQuotaWeight: 1}
---
"#;
    let imported = import(&[("mixed.yaml", yaml)]).unwrap();
    assert_eq!(imported.queues, 1);
    assert_eq!(imported.notes.len(), 2, "{:?}", imported.notes);
    assert!(imported.notes[0].contains("PriorityClass \"train\""));
    assert!(imported.notes[1].contains("volcano-queue"));
    assert!(imported.kdl.contains("queue \"solo\" {\n    gpu quota=2\n"));
    assert!(
        !imported.kdl.contains("cpu"),
        "not governed: {}",
        imported.kdl
    );
}

#[test]
fn units_come_back_in_the_policys_words() {
    let yaml = r#"
apiVersion: scheduling.run.ai/v2
kind: Queue
metadata: {name: units}
spec:
  priority: 100
  resources:
    gpu: {quota: 24.5, limit: -1, overQuotaWeight: 0.25}
    cpu: {quota: 500, limit: 4000, overQuotaWeight: 1}
    memory: {quota: 512, limit: 1030792.15104, overQuotaWeight: 1}
"#;
    let kdl = import(&[("u.yaml", yaml)]).unwrap().kdl;
    assert!(kdl.contains("gpu quota=24.5 weight=0.25\n"), "{kdl}");
    assert!(kdl.contains("cpu quota=\"500m\" limit=4\n"), "{kdl}");
    assert!(
        kdl.contains("memory quota=\"512M\" limit=\"960Gi\"\n"),
        "{kdl}"
    );
    assert!(!kdl.contains("priority"), "100 is the default: {kdl}");
}

#[test]
fn unset_resources_and_unbounded_quotas_say_what_kai_reads() {
    let yaml = r#"
apiVersion: scheduling.run.ai/v2
kind: Queue
metadata: {name: sparse}
spec:
  resources:
    gpu: {quota: -1, limit: -1, overQuotaWeight: 3}
"#;
    let kdl = import(&[("s.yaml", yaml)]).unwrap().kdl;
    assert!(kdl.contains("gpu quota=#inf weight=3\n"), "{kdl}");
    assert!(kdl.contains("cpu quota=0 limit=0 weight=0\n"), "{kdl}");
    assert!(
        kdl.contains("// spec.resources.memory was not set"),
        "{kdl}"
    );
}

/// KAI's `QueueResource` fields are plain float64s with no defaults (`resources.go`), and the
/// proportion plugin copies them unchanged (`createQueueResourceAttrs`): a missing `limit` is
/// a cap of 0 (`isOverLimit` refuses every pod that asks), a missing `overQuotaWeight` is a
/// weight of 0, a missing `quota` a guarantee of 0. A misspelt field is a missing one.
#[test]
fn missing_or_misspelt_resource_fields_say_what_kai_reads() {
    let yaml = r#"
apiVersion: scheduling.run.ai/v2
kind: Queue
metadata: {name: sparse}
spec:
  resources:
    gpu: {quota: 1}
    cpu: {quota: 2000, limit: -1, overQuotaWieght: 3}
    memory: {limit: -1, overQuotaWeight: 1}
"#;
    let imported = import(&[("f.yaml", yaml)]).unwrap();
    let kdl = &imported.kdl;
    assert!(kdl.contains("    gpu quota=1 limit=0 weight=0\n"), "{kdl}");
    assert!(kdl.contains("    cpu quota=2 weight=0\n"), "{kdl}");
    assert!(kdl.contains("    memory quota=0\n"), "{kdl}");
    for (kind, fields) in [
        ("gpu", &["limit", "overQuotaWeight"][..]),
        ("cpu", &["overQuotaWeight"][..]),
        ("memory", &["quota"][..]),
    ] {
        for field in fields {
            let path = format!("spec.resources.{kind}.{field} was not set");
            let comment = kdl
                .lines()
                .find(|l| l.trim_start().starts_with("//") && l.contains(&path))
                .unwrap_or_else(|| panic!("no comment on {path}: {kdl}"));
            assert!(comment.contains("KAI reads as 0"), "{comment}");
            assert!(
                imported
                    .notes
                    .iter()
                    .any(|n| n.contains(&path) && n.contains("KAI reads as 0")),
                "no note on {path}: {:?}",
                imported.notes
            );
        }
    }
    assert!(
        !kdl.contains("spec.resources.cpu.limit was not set"),
        "cpu has a limit: {kdl}"
    );
}

/// KAI's memory is in megabytes of 10^6 bytes; an amount that no unit divides is written in
/// KAI's own unit with decimals, so `check` reads it as memory, not as a count of bytes.
#[test]
fn memory_that_no_unit_divides_keeps_an_explicit_unit() {
    let yaml = r#"
apiVersion: scheduling.run.ai/v2
kind: Queue
metadata: {name: odd}
spec:
  resources:
    memory: {quota: 0.000123, limit: 1.0000005, overQuotaWeight: 1}
"#;
    let imported = import(&[("m.yaml", yaml)]).unwrap();
    let kdl = &imported.kdl;
    assert!(
        kdl.contains("memory quota=\"0.000123M\" limit=\"1.000001M\"\n"),
        "{kdl}"
    );
    assert!(
        kdl.contains("spec.resources.memory.limit 1.0000005 was rounded to 1.000001M"),
        "{kdl}"
    );
    let sources = SourceSet::new(vec![SourceFile::new("imported.kdl", kdl.as_str())]);
    let checked = check(&sources, Vec::new());
    assert!(
        checked.diagnostics.iter().all(|d| d.code.id() != "KP0026"),
        "{:#?}",
        checked.diagnostics
    );
    let rebuilt = build(&[("imported.kdl", kdl)]);
    let memory = rebuilt[0].spec.resources.memory.as_ref().unwrap();
    assert_eq!(memory.quota.0, 0.000123);
}

#[test]
fn a_child_without_a_min_runtime_under_a_parent_with_one_gets_zero() {
    let yaml = r#"
apiVersion: scheduling.run.ai/v2
kind: Queue
metadata: {name: parent}
spec: {preemptMinRuntime: 10m0s}
---
apiVersion: scheduling.run.ai/v2
kind: Queue
metadata: {name: child}
spec: {parentQueue: parent}
"#;
    let kdl = import(&[("m.yaml", yaml)]).unwrap().kdl;
    assert!(kdl.contains("    min-runtime preempt=\"10m\"\n"), "{kdl}");
    assert!(
        kdl.contains("        min-runtime preempt=\"0s\"\n"),
        "{kdl}"
    );
}

#[test]
fn a_queue_whose_parent_is_missing_stays_at_the_top_with_a_comment() {
    let yaml = r#"
apiVersion: scheduling.run.ai/v2
kind: Queue
metadata: {name: orphan}
spec: {parentQueue: elsewhere}
"#;
    let kdl = import(&[("o.yaml", yaml)]).unwrap().kdl;
    assert!(
        kdl.contains("// parent \"elsewhere\" is not among the imported queues"),
        "{kdl}"
    );
    assert!(
        kdl.contains("\nqueue \"orphan\" parent=\"elsewhere\" {\n"),
        "{kdl}"
    );
}

fn error(inputs: &[(&str, &str)]) -> ImportError {
    import(inputs)
        .expect_err("must be rejected")
        .into_iter()
        .next()
        .expect("at least one error")
}

#[test]
fn bad_input_is_rejected_naming_the_file_and_the_object() {
    let e = error(&[("bad.yaml", "key: [unclosed\n")]);
    assert_eq!(e.file, "bad.yaml");
    assert!(e.message.contains("not valid YAML"), "{e}");
    assert!(e.line.is_some(), "{e}");

    let e = error(&[("policy.kdl", "queue \"a\" {\n    gpu quota=1\n}\n")]);
    assert!(e.to_string().starts_with("policy.kdl:1:1: "), "{e}");

    let e = error(&[(
        "q.yaml",
        "apiVersion: scheduling.run.ai/v2\nkind: Queue\nmetadata: {labels: {a: b}}\n",
    )]);
    assert_eq!(
        e.to_string(),
        "q.yaml:3:11: Queue (document 1): has no metadata.name"
    );

    let e = error(&[(
        "q.yaml",
        "apiVersion: v1\nkind: List\nitems:\n- apiVersion: scheduling.run.ai/v2\n  kind: Queue\n  metadata: {name: greedy}\n  spec: {resources: {gpu: {quota: lots}}}\n",
    )]);
    assert_eq!(
        e.to_string(),
        "q.yaml:7:35: Queue \"greedy\" (document 1, item 1): spec.resources.gpu.quota is the text \"lots\", not a number"
    );

    let cycle = "apiVersion: scheduling.run.ai/v2\nkind: Queue\nmetadata: {name: a}\nspec: {parentQueue: b}\n---\napiVersion: scheduling.run.ai/v2\nkind: Queue\nmetadata: {name: b}\nspec: {parentQueue: a}\n";
    let e = error(&[("cycle.yaml", cycle)]);
    assert!(
        e.to_string()
            .starts_with("cycle.yaml:4:21: Queue \"a\" (document 1): "),
        "{e}"
    );
    assert!(
        e.message.contains("a → b → a") || e.message.contains("b → a → b"),
        "{e}"
    );

    let e = error(&[("one.yaml", cycle), ("two.yaml", "")]);
    assert!(e.message.contains("cycle"), "{e}");

    let twice = "apiVersion: scheduling.run.ai/v2\nkind: Queue\nmetadata: {name: a}\n";
    let e = error(&[("x.yaml", twice), ("y.yaml", twice)]);
    assert_eq!(
        e.to_string(),
        "y.yaml:3:18: Queue \"a\" (document 1): a queue of this name was already imported from x.yaml:3:18 (document 1)"
    );

    let e = error(&[("empty.yaml", "")]);
    assert!(e.message.contains("no KAI Queue objects"), "{e}");

    let e = error(&[(
        "d.yaml",
        "apiVersion: scheduling.run.ai/v2\nkind: Queue\nmetadata: {name: slow}\nspec: {reclaimMinRuntime: soon}\n",
    )]);
    assert!(
        e.to_string().starts_with("d.yaml:4:27: Queue \"slow\""),
        "{e}"
    );
    assert!(e.message.contains("spec.reclaimMinRuntime"), "{e}");

    let e = error(&[(
        "n.yaml",
        "apiVersion: scheduling.run.ai/v2\nkind: Queue\nmetadata: {name: neg}\nspec: {resources: {cpu: {quota: -5}}}\n",
    )]);
    assert!(e.message.contains("spec.resources.cpu.quota is -5"), "{e}");
    assert_eq!((e.line, e.column), (Some(4), Some(33)), "{e}");
}

/// Every object that cannot be imported is named, each where it is, not only the first; the
/// good ones between them are read and left out of the result (nothing is printed).
#[test]
fn every_bad_object_is_reported_at_its_line_and_column() {
    let yaml = "apiVersion: scheduling.run.ai/v2
kind: Queue
metadata: {name: fine}
---
apiVersion: scheduling.run.ai/v2
kind: Queue
metadata: {name: bad-quota}
spec:
  resources:
    gpu: {quota: abc, limit: -1, overQuotaWeight: 1}
---
apiVersion: scheduling.run.ai/v2
kind: Queue
metadata: {name: bad-weight}
spec:
  resources:
    cpu:
      quota: 2
      overQuotaWeight: -3
";
    let errors = import(&[("q.yaml", yaml)]).expect_err("two bad queues");
    let said: Vec<String> = errors.iter().map(ToString::to_string).collect();
    assert_eq!(
        said,
        vec![
            "q.yaml:10:18: Queue \"bad-quota\" (document 2): spec.resources.gpu.quota is the text \"abc\", not a number".to_string(),
            "q.yaml:19:24: Queue \"bad-weight\" (document 3): spec.resources.cpu.overQuotaWeight is -3; weights cannot be negative".to_string(),
        ]
    );
}

// ---- random queue trees ----

/// An amount in KAI's unit for the kind, from a whole number of stored units: GPU milli-devices,
/// millicores, or bytes (as megabytes, fractions and all), and the same for a larger limit.
fn amounts(kind: usize) -> impl Strategy<Value = (f64, Option<f64>)> {
    let (max, per_kai_unit) = match kind {
        0 => (200_000u64, 1000.0),
        1 => (2_000_000, 1.0),
        _ => (1 << 40, 1e6),
    };
    (0..max, prop::option::of(0..max)).prop_map(move |(quota, extra)| {
        (
            quota as f64 / per_kai_unit,
            extra.map(|e| (quota + e) as f64 / per_kai_unit),
        )
    })
}

fn resource(kind: usize) -> impl Strategy<Value = QueueResource> {
    let weight = prop::sample::select(vec![0.0, 0.5, 1.0, 2.0, 3.25]);
    prop_oneof![
        Just((-1.0, -1.0, 1.0)),
        weight.clone().prop_map(|w| (-1.0, -1.0, w)),
        // A limit, when there is one, is at least the quota.
        (amounts(kind), weight).prop_map(|((q, limit), w)| (q, limit.unwrap_or(-1.0), w)),
    ]
    .prop_map(|(quota, limit, w)| QueueResource {
        quota: Number(quota),
        limit: Number(limit),
        over_quota_weight: Number(w),
    })
}

#[derive(Debug, Clone)]
struct Shape {
    parent: Option<prop::sample::Index>,
    display_name: Option<&'static str>,
    priority: i64,
    resources: [QueueResource; 3],
    runtimes: [Option<u64>; 2],
}

fn shape() -> impl Strategy<Value = Shape> {
    let runtime = prop::option::of(prop::sample::select(vec![0u64, 45, 300, 5400, 604_800]));
    (
        prop::option::of(any::<prop::sample::Index>()),
        prop::option::of(prop::sample::select(vec![
            "Research",
            "Data \"Science\"",
            "ML · Vision",
            "tab\there",
        ])),
        prop::sample::select(vec![1i64, 50, 100, 150, 1000]),
        (resource(0), resource(1), resource(2)),
        [runtime.clone(), runtime],
    )
        .prop_map(
            |(parent, display_name, priority, (g, c, m), runtimes)| Shape {
                parent,
                display_name,
                priority,
                resources: [g, c, m],
                runtimes,
            },
        )
}

/// Queue objects for a random tree: queue i hangs under some queue before it, or at the top.
/// Min-runtimes are what KAI would see from a policy: a queue under one with a min-runtime has
/// one too (its own or the inherited value), written the way Go prints durations.
fn objects(shapes: &[Shape]) -> Vec<QueueObject> {
    let go = |s: u64| format!("{}h{}m{}s", s / 3600, s / 60 % 60, s % 60);
    let mut runtimes: Vec<[Option<u64>; 2]> = Vec::new();
    let mut out = Vec::new();
    for (i, s) in shapes.iter().enumerate() {
        let parent = s.parent.filter(|_| i > 0).map(|p| p.index(i));
        let mut own = s.runtimes;
        if let Some(p) = parent {
            for k in 0..2 {
                if runtimes[p][k].is_some() && own[k].is_none() {
                    own[k] = runtimes[p][k];
                }
            }
        }
        runtimes.push(own);
        out.push(QueueObject {
            api_version: "scheduling.run.ai/v2".into(),
            kind: "Queue".into(),
            metadata: Metadata {
                name: format!("q{i}"),
                labels: BTreeMap::from([("team".into(), "x".into())]),
                annotations: BTreeMap::new(),
            },
            spec: QueueSpec {
                display_name: s.display_name.map(str::to_string),
                parent_queue: parent.map(|p| format!("q{p}")),
                priority: Some(s.priority),
                preempt_min_runtime: own[0].map(go),
                reclaim_min_runtime: own[1].map(go),
                resources: QueueResources {
                    gpu: Some(s.resources[0]),
                    cpu: Some(s.resources[1]),
                    memory: Some(s.resources[2]),
                },
            },
        });
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig {
        // PROPTEST_CASES raises it (proptest reads it into the default config).
        cases: ProptestConfig::default().cases.max(128),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn random_queue_trees_round_trip_through_yaml_and_import(
        shapes in prop::collection::vec(shape(), 1..12),
        as_list in any::<bool>(),
    ) {
        let original = objects(&shapes);
        let yaml = if as_list {
            let list = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": original});
            serde_saphyr::to_string(&list).unwrap()
        } else {
            yaml_stream(&original).unwrap()
        };
        let imported = import(&[("random.yaml", &yaml)])
            .map_err(|e| TestCaseError::fail(format!("{e:?}\n{yaml}")))?;
        // The only note a random tree may earn is that children are promised more than their
        // parent, which KAI allows.
        let notes: Vec<&String> =
            imported.notes.iter().filter(|n| !n.contains("children's quotas add up")).collect();
        prop_assert!(notes.is_empty(), "amounts are exact: {:?}", notes);
        prop_assert_eq!(format(&imported.kdl).unwrap(), imported.kdl.clone());
        // KAI lets children's quotas add up to more than their parent's: the import says so
        // itself (it used to need a prelude here), so its policy checks on its own.
        let rebuilt = build(&[("imported.kdl", &imported.kdl)]);
        prop_assert_eq!(meaning(&rebuilt), meaning(&original), "imported:\n{}", imported.kdl);
        for q in &rebuilt {
            prop_assert_eq!(q.metadata.labels.get("team").map(String::as_str), Some("x"), "labels carried");
        }
    }
}

/// Notes point where errors do: a misspelt field at its key, a skipped object at its top, a
/// resource left out at `spec.resources`.
#[test]
fn notes_name_the_line_and_column_of_what_they_speak_of() {
    let yaml = "apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: high}
value: 1000
---
apiVersion: scheduling.run.ai/v2
kind: Queue
metadata: {name: team}
spec:
  parentQeue: research
  resources:
    gpu: {quota: 2, limit: -1, overQuotaWeight: 1}
";
    let imported = import(&[("q.yaml", yaml)]).expect("imports");
    let has = |start: &str| imported.notes.iter().any(|n| n.starts_with(start));
    assert!(
        has("q.yaml:1:1: skipped PriorityClass \"high\" (document 1"),
        "{:#?}",
        imported.notes
    );
    assert!(
        has(
            "q.yaml:10:3: Queue \"team\" (document 2): spec.parentQeue is not a field of a KAI Queue (did you mean spec.parentQueue?)"
        ),
        "{:#?}",
        imported.notes
    );
    assert!(
        has("q.yaml:12:5: Queue \"team\": spec.resources.cpu was not set"),
        "{:#?}",
        imported.notes
    );
}
