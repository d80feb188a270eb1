//! Loading `scheduler-config.json`: the config a build wrote gives back the policy it was built
//! from (as far as scheduling reads it), and a tampered, unknown-version, malformed or
//! self-contradicting config is refused with an error naming the file and what to do.

use std::path::Path;

use kai_policy_compiler::check::check;
use kai_policy_compiler::generate::{GenerateSpec, generate};
use kai_policy_compiler::lower::config::{self, content, digest};
use kai_policy_compiler::lower::{CompiledPolicy, LoadError, SourceInfo};
use kai_policy_compiler::model::{Origin, Oversubscription, Policy};
use kai_policy_compiler::source::{SourceSet, load_dir};
use proptest::prelude::*;

fn example() -> Policy {
    let (sources, early) = load_dir(Path::new("../policies")).expect("example policy loads");
    assert!(early.is_empty());
    checked(&sources)
}

fn checked(sources: &SourceSet) -> Policy {
    let c = check(sources, Vec::new());
    assert!(!c.has_errors(), "policy has errors: {:#?}", c.diagnostics);
    c.policy.expect("a policy without errors")
}

/// What the config does not carry, blanked: descriptions and where priority classes, placements
/// and queues are declared (for messages only; the config holds the policy's meaning, not its
/// file layout), and oversubscription (enforced by the checker).
fn scheduling_view(mut p: Policy) -> Policy {
    p.cluster.oversubscription = Oversubscription::default();
    let nowhere = || Origin {
        file: String::new(),
        line: 0,
    };
    for pc in &mut p.priority_classes {
        pc.description = None;
        pc.origin = nowhere();
    }
    for pl in &mut p.placements {
        pl.origin = nowhere();
    }
    for q in &mut p.queues {
        q.origin = nowhere();
    }
    p
}

fn assert_round_trips(policy: &Policy) {
    let built = CompiledPolicy::new(policy, SourceInfo::default());
    let (loaded, back) =
        config::parse("scheduler-config.json", &built.to_json()).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(loaded, built);
    assert_eq!(
        scheduling_view(back.clone()),
        scheduling_view(policy.clone())
    );
    assert_eq!(
        content(&back),
        built.content,
        "compiling the loaded policy again"
    );
}

#[test]
fn the_example_config_loads_back_into_the_policy_it_was_built_from() {
    assert_round_trips(&example());
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 24,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn generated_policies_load_back_from_their_config(
        queues in 4usize..120,
        files in 2usize..8,
        levels in 2usize..5,
        seed in any::<u64>(),
    ) {
        let mut spec = GenerateSpec::with_shape(queues, files, levels);
        spec.seed = seed;
        prop_assume!(spec.validate().is_ok());
        assert_round_trips(&checked(&SourceSet::new(generate(&spec))));
    }
}

fn built_json() -> serde_json::Value {
    serde_json::from_str(&CompiledPolicy::new(&example(), SourceInfo::default()).to_json()).unwrap()
}

fn parse_err(json: &serde_json::Value) -> LoadError {
    let text = serde_json::to_string_pretty(json).unwrap();
    match config::parse("out/scheduler-config.json", &text) {
        Ok(_) => panic!("accepted:\n{text}"),
        Err(e) => e,
    }
}

/// Recomputes the digest after an edit, as someone forging a config would.
fn restamp(json: &mut serde_json::Value) {
    let c: config::CompiledContent = serde_json::from_value(json["content"].clone()).unwrap();
    json["digest"] = digest(&c).into();
}

#[test]
fn a_hand_edited_config_is_refused_by_its_digest() {
    let mut json = built_json();
    json["content"]["queues"][0]["priority"] = 999.into();
    let e = parse_err(&json);
    assert!(matches!(e, LoadError::Digest { .. }), "{e:?}");
    let text = e.to_string();
    assert!(
        text.starts_with("out/scheduler-config.json: the digest sha256:"),
        "{text}"
    );
    assert!(text.contains("rebuild it"), "{text}");
}

#[test]
fn an_unknown_or_missing_version_is_refused_before_the_fields_are_read() {
    let mut json = built_json();
    json["api_version"] = "kai-policy.io/v2".into();
    // A later version may add fields; the version error must win over "unknown field".
    json["content"]["new_field"] = true.into();
    let e = parse_err(&json);
    assert_eq!(
        e.to_string(),
        "out/scheduler-config.json: api_version is \"kai-policy.io/v2\", but this scheduler reads \
         kai-policy.io/v1; rebuild it with a matching `kai-policy build`"
    );
    json.as_object_mut().unwrap().remove("api_version");
    assert!(
        parse_err(&json)
            .to_string()
            .contains("api_version is missing"),
        "{}",
        parse_err(&json)
    );
}

#[test]
fn malformed_json_is_refused_with_its_line_and_column() {
    let e = config::parse(
        "c.json",
        "{\n  \"api_version\": \"kai-policy.io/v1\",\n  oops\n}",
    )
    .unwrap_err();
    assert!(
        matches!(
            e,
            LoadError::Json {
                line: 3,
                column: 3,
                ..
            }
        ),
        "{e:?}"
    );
    assert!(
        e.to_string()
            .starts_with("c.json:3:3: not a valid compiled config: "),
        "{e}"
    );
    let mut json = built_json();
    json["content"]["queues"][0]["priority"] = "high".into();
    let e = parse_err(&json);
    assert!(matches!(e, LoadError::Json { .. }), "{e:?}");
    assert!(e.to_string().contains("invalid type"), "{e}");
}

#[test]
fn a_config_whose_names_do_not_resolve_is_refused_even_with_a_matching_digest() {
    type Edit = fn(&mut serde_json::Value);
    let cases: [(&str, Edit); 4] = [
        (
            "names parent \"nowhere\", which is not declared before it",
            |j| j["content"]["queues"][1]["parent"] = "nowhere".into(),
        ),
        ("names child \"ghost\", which is not declared", |j| {
            j["content"]["queues"][0]["children"][0] = "ghost".into()
        }),
        ("names placement \"nope\", which is not declared", |j| {
            j["content"]["queues"][0]["placement"] = "nope".into()
        }),
        ("is declared twice", |j| {
            let first = j["content"]["queues"][0].clone();
            j["content"]["queues"].as_array_mut().unwrap().push(first)
        }),
    ];
    for (expected, edit) in cases {
        let mut json = built_json();
        edit(&mut json);
        restamp(&mut json);
        let e = parse_err(&json);
        assert!(matches!(e, LoadError::Invalid { .. }), "{expected}: {e:?}");
        assert!(e.to_string().contains(expected), "{expected}: {e}");
    }
}

#[test]
fn a_missing_file_is_refused_naming_it() {
    let e = config::load(Path::new("no/such/scheduler-config.json")).unwrap_err();
    assert!(
        e.to_string()
            .starts_with("cannot read the compiled config no/such/scheduler-config.json: "),
        "{e}"
    );
}
