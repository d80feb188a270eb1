//! The scenario file of `explain` and `diff`: every complaint names the file, line and column
//! of what is wrong, quotes the user's own text, and speaks YAML, not the parser's API.

use kai_policy_compiler::check::check;
use kai_policy_compiler::explain::{ScenarioError, demand_from_scenario, parse_scenario};
use kai_policy_compiler::source::{SourceFile, SourceSet};

const POLICY: &str = "queue \"research\" {\n    gpu quota=10\n    queue \"llm-team\" {\n        namespaces \"llm\"\n    }\n    queue \"vision-team\" {\n        namespaces \"vision\"\n    }\n}\n";

fn errors(text: &str) -> Vec<String> {
    let sources = SourceSet::new(vec![SourceFile::new("p.kdl", POLICY)]);
    let policy = check(&sources, Vec::new())
        .policy
        .expect("the policy checks");
    let result = parse_scenario("s.yaml", text)
        .map_err(|e| vec![e])
        .and_then(|s| demand_from_scenario(&policy, &s, "s.yaml", text));
    result
        .expect_err("must be refused")
        .iter()
        .map(ScenarioError::to_string)
        .collect()
}

fn has(errors: &[String], expected: &str) {
    assert!(
        errors.iter().any(|e| e == expected),
        "want {expected:?} in {errors:#?}"
    );
}

#[test]
fn each_error_is_at_the_line_and_column_of_its_key_or_value() {
    let text = "demand:\n  llm-team: {gpu: 1}\n  nosuch: {gpu: 1}\n  vision-tem: {gpu: 99999999999999999999, cpu: lots}\nusage:\n  llm-team: {gpu: 1.50}\n";
    let e = errors(text);
    has(
        &e,
        "s.yaml:3:3: demand: no queue is named \"nosuch\"; the leaf queues are llm-team, vision-team",
    );
    has(
        &e,
        "s.yaml:4:3: demand: no queue is named \"vision-tem\" (did you mean \"vision-team\"?)",
    );
    has(
        &e,
        "s.yaml:6:19: usage.llm-team.gpu: 1.50 is outside [0, 1]; usage is the queue's share of the cluster over the window",
    );
    let text = "demand:\n  llm-team: {gpu: 99999999999999999999, cpu: lots}\n";
    let e = errors(text);
    assert!(
        e.iter()
            .any(|e| e.starts_with("s.yaml:2:19: demand.llm-team.gpu: `99999999999999999999`")),
        "{e:#?}"
    );
    assert!(
        e.iter()
            .any(|e| e.starts_with("s.yaml:2:46: demand.llm-team.cpu: `lots`")),
        "{e:#?}"
    );
}

#[test]
fn yaml_errors_name_the_file_and_say_it_in_yaml_words() {
    for (text, place, words) in [
        (
            "demand:\n  llm-team: {gpu: 1}\n  llm-team: {gpu: 2}\n",
            "s.yaml:3:3:",
            "llm-team",
        ),
        (
            "demand:\n  llm-team: {gpu: 1e400}\n",
            "s.yaml:2:19:",
            "1e400",
        ),
    ] {
        let e = errors(text);
        assert_eq!(e.len(), 1, "{e:#?}");
        assert!(e[0].starts_with(place), "{e:#?}");
        assert!(e[0].contains(words), "{e:#?}");
        for internal in [
            "<input>",
            "DuplicateKeyPolicy",
            "Options",
            "configured policy",
            "Option<",
        ] {
            assert!(!e[0].contains(internal), "{e:#?}");
        }
    }
}
