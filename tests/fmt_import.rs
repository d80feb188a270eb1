//! `kai-policy fmt` and `kai-policy import` as authors, CI jobs and platform teams run them.

use kai_policy_e2e::*;
use serde_json::Value;

const MESSY: &str = "// Research's queues.\nqueue \"research\"{\n  gpu quota = 8 // eight GPUs\n\n\n  queue \"llm\" { gpu quota=2; namespaces \"llm\"; }\n}\n";
const CANONICAL: &str = "// Research's queues.\nqueue \"research\" {\n    gpu quota=8 // eight GPUs\n\n    queue \"llm\" {\n        gpu quota=2\n        namespaces \"llm\"\n    }\n}\n";
const TIDY: &str = "queue \"ops\" {\n    gpu quota=1\n    namespaces \"ops\"\n}\n";

fn read(dir: &std::path::Path, path: &str) -> String {
    std::fs::read_to_string(dir.join(path)).unwrap()
}

#[test]
fn the_bundled_example_is_formatted() {
    let run = kai_policy(&repo_root(), &["fmt", "--check", "policies"]);
    assert_eq!(run.status, 0, "{run:?}");
    assert_eq!(run.stdout, "");
}

#[test]
fn fmt_rewrites_what_is_not_canonical_and_keeps_comments() {
    let dir = temp();
    write_files(
        dir.path(),
        &[("policies/a.kdl", MESSY), ("policies/teams/b.kdl", TIDY)],
    );
    let run = kai_policy(dir.path(), &["fmt"]);
    assert_eq!(run.status, 0, "{run:?}");
    assert_eq!(
        run.stdout, "policies/a.kdl\n",
        "only the changed file is listed"
    );
    assert_eq!(read(dir.path(), "policies/a.kdl"), CANONICAL);
    assert_eq!(read(dir.path(), "policies/teams/b.kdl"), TIDY);
    let leftovers: Vec<_> = std::fs::read_dir(dir.path().join("policies"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".tmp"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
    // A second run has nothing to do, and the policy still checks.
    let again = kai_policy(dir.path(), &["fmt", "--check"]);
    assert_eq!((again.status, again.stdout.as_str()), (0, ""), "{again:?}");
    assert_eq!(kai_policy(dir.path(), &["check"]).status, 0);
}

#[test]
fn fmt_check_lists_the_files_and_changes_nothing() {
    let dir = temp();
    write_files(
        dir.path(),
        &[
            ("pol/a.kdl", MESSY),
            ("pol/b.kdl", TIDY),
            ("pol/c.kdl", "x;y\n"),
        ],
    );
    let run = kai_policy(dir.path(), &["fmt", "pol", "--check"]);
    assert_eq!(run.status, 1, "{run:?}");
    assert_eq!(run.stdout, "pol/a.kdl\npol/c.kdl\n");
    assert!(
        run.stderr
            .contains("2 files are not in the canonical layout"),
        "{}",
        run.stderr
    );
    assert_eq!(read(dir.path(), "pol/a.kdl"), MESSY);
    assert_eq!(read(dir.path(), "pol/c.kdl"), "x;y\n");
}

#[test]
fn a_syntax_error_anywhere_means_no_file_is_written() {
    let dir = temp();
    let broken = "queue \"ops\" {\n    gpu quota=1\n";
    write_files(
        dir.path(),
        &[("policies/a.kdl", MESSY), ("policies/b.kdl", broken)],
    );
    for args in [&["fmt"][..], &["fmt", "--check"][..]] {
        let run = kai_policy(dir.path(), args);
        assert_eq!(run.status, 1, "{run:?}");
        assert!(run.stdout.contains("KP0001"), "{}", run.stdout);
        assert!(run.stdout.contains("policies/b.kdl"), "{}", run.stdout);
        assert!(run.stderr.contains("no file was written"), "{}", run.stderr);
        assert_eq!(read(dir.path(), "policies/a.kdl"), MESSY);
        assert_eq!(read(dir.path(), "policies/b.kdl"), broken);
    }
}

#[test]
fn fmt_of_a_missing_folder_cannot_run() {
    let dir = temp();
    let run = kai_policy(dir.path(), &["fmt", "nowhere"]);
    assert_eq!(run.status, 2, "{run:?}");
    assert!(run.stderr.contains("nowhere"), "{}", run.stderr);
}

/// Queue objects of a YAML stream by name, without the metadata kai-policy adds.
fn queues(yaml: &str) -> Vec<(String, Value)> {
    let docs: Vec<Value> = serde_saphyr::from_multiple(yaml).unwrap();
    let mut out: Vec<(String, Value)> = docs
        .into_iter()
        .filter(|d| d["kind"] == "Queue")
        .map(|d| {
            (
                d["metadata"]["name"].as_str().unwrap().to_string(),
                d["spec"].clone(),
            )
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

#[test]
fn build_then_import_gives_back_the_same_queues() {
    let dir = temp();
    copy_example(dir.path());
    let built = kai_policy(dir.path(), &["build", "--out", "out"]);
    assert_eq!(built.status, 0, "{built:?}");
    let imported = kai_policy(dir.path(), &["import", "out/queues.yaml"]);
    assert_eq!(imported.status, 0, "{imported:?}");
    assert_eq!(imported.stderr, "", "no notes for kai-policy's own output");
    assert!(
        imported.stdout.contains("namespaces \"*\""),
        "{}",
        imported.stdout
    );
    write_files(dir.path(), &[("imported/all.kdl", &imported.stdout)]);
    let fmt = kai_policy(dir.path(), &["fmt", "--check", "imported"]);
    assert_eq!(fmt.status, 0, "import prints the canonical layout: {fmt:?}");
    let rebuilt = kai_policy(dir.path(), &["build", "imported", "--out", "-"]);
    assert_eq!(rebuilt.status, 0, "{rebuilt:?}");
    assert_eq!(
        queues(&rebuilt.stdout),
        queues(&read(dir.path(), "out/queues.yaml"))
    );
}

#[test]
fn import_reads_standard_input() {
    let yaml = "apiVersion: v1\nkind: List\nitems:\n- apiVersion: scheduling.run.ai/v2\n  kind: Queue\n  metadata: {name: solo, uid: abc, resourceVersion: \"7\"}\n  spec: {resources: {gpu: {quota: 2, limit: -1, overQuotaWeight: 1}}}\n  status: {childQueues: []}\n- apiVersion: v1\n  kind: ConfigMap\n  metadata: {name: other}\n";
    let run = run_binary(
        "kai-policy",
        &repo_root(),
        &["import", "-"],
        Some(yaml.as_bytes()),
    );
    assert_eq!(run.status, 0, "{run:?}");
    assert!(
        run.stdout.contains("queue \"solo\" {\n    gpu quota=2\n"),
        "{}",
        run.stdout
    );
    assert!(
        run.stderr
            .contains("note: -:9:3: skipped ConfigMap \"other\""),
        "{}",
        run.stderr
    );
}

#[test]
fn import_of_bad_input_exits_2_naming_the_file_and_object() {
    let dir = temp();
    write_files(
        dir.path(),
        &[
            ("not-yaml.yaml", "{ this is: [not yaml\n"),
            (
                "bad-quota.yaml",
                "apiVersion: scheduling.run.ai/v2\nkind: Queue\nmetadata: {name: greedy}\nspec: {resources: {gpu: {quota: lots}}}\n",
            ),
        ],
    );
    let run = kai_policy(dir.path(), &["import", "not-yaml.yaml"]);
    assert_eq!(run.status, 2, "{run:?}");
    assert!(
        run.stderr
            .starts_with("error: not-yaml.yaml:1:12: not valid YAML: unclosed bracket"),
        "{}",
        run.stderr
    );
    assert_eq!(run.stdout, "");
    let run = kai_policy(dir.path(), &["import", "bad-quota.yaml"]);
    assert_eq!(run.status, 2, "{run:?}");
    assert!(
        run.stderr.contains(
            "bad-quota.yaml:4:33: Queue \"greedy\" (document 1): spec.resources.gpu.quota"
        ),
        "{}",
        run.stderr
    );
    let run = kai_policy(dir.path(), &["import", "missing.yaml"]);
    assert_eq!(run.status, 2, "{run:?}");
    assert!(run.stderr.contains("missing.yaml"), "{}", run.stderr);
    let run = kai_policy(dir.path(), &["import"]);
    assert_eq!(run.status, 2, "a file is required: {run:?}");
}

/// One KAI Queue document with every resource stated (as KAI's own examples write them).
fn kai_queue(name: &str, parent: Option<&str>, gpu_quota: f64, extra_metadata: &str) -> String {
    let parent = parent.map_or(String::new(), |p| format!("  parentQueue: {p}\n"));
    format!(
        "---\napiVersion: scheduling.run.ai/v2\nkind: Queue\nmetadata:\n  name: {name}\n{extra_metadata}spec:\n{parent}  resources:\n    gpu: {{quota: {gpu_quota}, limit: -1, overQuotaWeight: 1}}\n    cpu: {{quota: -1, limit: -1, overQuotaWeight: 1}}\n    memory: {{quota: -1, limit: -1, overQuotaWeight: 1}}\n"
    )
}

#[test]
fn import_reports_every_field_it_does_not_know_with_its_path() {
    let yaml = "apiVersion: scheduling.run.ai/v2\nkind: Queue\nmetadata: {name: team}\nspec:\n  parentQeue: research\n  resources:\n    gpu: {quota: 2, limit: -1, overQuotaWieght: 3}\n    cpu: {quota: -1, limit: -1, overQuotaWeight: 1}\n    memory: {quota: -1, limit: -1, overQuotaWeight: 1}\n    tpu: {quota: 1}\n";
    let run = run_binary(
        "kai-policy",
        &repo_root(),
        &["import", "-"],
        Some(yaml.as_bytes()),
    );
    for expected in [
        "spec.parentQeue is not a field of a KAI Queue (did you mean spec.parentQueue?)",
        "spec.resources.gpu.overQuotaWieght is not a field of a KAI Queue (did you mean spec.resources.gpu.overQuotaWeight?)",
        "spec.resources.tpu is not a field of a KAI Queue (did you mean spec.resources.cpu?)",
    ] {
        assert!(
            run.stderr.contains(expected),
            "no `{expected}` in\n{}",
            run.stderr
        );
    }
}

#[test]
fn import_refuses_queue_versions_kai_does_not_serve() {
    let yaml = "apiVersion: scheduling.run.ai/v1\nkind: Queue\nmetadata: {name: old}\nspec: {deservedGpus: 2}\n";
    let run = run_binary(
        "kai-policy",
        &repo_root(),
        &["import", "-"],
        Some(yaml.as_bytes()),
    );
    assert_eq!(run.status, 2, "{run:?}");
    assert!(
        run.stderr
            .contains("Queue \"old\" (document 1): apiVersion scheduling.run.ai/v1 is refused")
            && run.stderr.contains("serves only scheduling.run.ai/v2"),
        "{}",
        run.stderr
    );
    assert!(run.stdout.is_empty());
}

/// KAI's node-pool label decides which scheduler shard sees a queue: it survives import and
/// build.
#[test]
fn labels_and_annotations_survive_import_and_build() {
    let dir = temp();
    let yaml = kai_queue(
        "team",
        None,
        2.0,
        "  labels: {kai.scheduler/node-pool: pool-a}\n  annotations: {example.com/owner: \"ML infra\"}\n",
    );
    let run = run_binary(
        "kai-policy",
        dir.path(),
        &["import", "-"],
        Some(yaml.as_bytes()),
    );
    assert_eq!(run.status, 0, "{run:?}");
    assert!(
        run.stdout
            .contains("labels \"kai.scheduler/node-pool\"=\"pool-a\""),
        "{}",
        run.stdout
    );
    write_files(dir.path(), &[("policies/imported.kdl", &run.stdout)]);
    let build = kai_policy(dir.path(), &["build", "--out", "-"]);
    assert_eq!(build.status, 0, "{build:?}");
    let docs: Vec<Value> = serde_saphyr::from_multiple(&build.stdout).unwrap();
    let team = docs.iter().find(|d| d["kind"] == "Queue").expect("a Queue");
    assert_eq!(
        team["metadata"]["labels"]["kai.scheduler/node-pool"],
        "pool-a"
    );
    assert_eq!(
        team["metadata"]["annotations"]["example.com/owner"],
        "ML infra"
    );
}

/// KAI's standard layout: team queues with quotas under a quota-0 `default-parent-queue`.
#[test]
fn kais_standard_layout_imports_into_a_policy_that_checks() {
    let dir = temp();
    let yaml = [
        kai_queue("default-parent-queue", None, 0.0, ""),
        kai_queue("team-a", Some("default-parent-queue"), 8.0, ""),
        kai_queue("team-b", Some("default-parent-queue"), 4.0, ""),
    ]
    .concat();
    let run = run_binary(
        "kai-policy",
        dir.path(),
        &["import", "-"],
        Some(yaml.as_bytes()),
    );
    assert_eq!(run.status, 0, "{run:?}");
    assert!(
        run.stdout.contains("oversubscription \"allow\""),
        "{}",
        run.stdout
    );
    assert!(
        run.stderr.contains(
            "children's quotas add up to more than their parent's in \"default-parent-queue\" (gpu)"
        ),
        "{}",
        run.stderr
    );
    write_files(dir.path(), &[("policies/imported.kdl", &run.stdout)]);
    let check = kai_policy(dir.path(), &["check"]);
    assert_eq!(check.status, 0, "{check:?}");
}

/// cli.md allows `import` only 0 / 2: it exited 1 when the imported policy failed `check`,
/// which scripts that follow the contract take for an unknown failure. The policy is printed, so
/// the import worked (0); that it does not pass `check` yet is said loudly on stderr.
#[test]
fn an_import_that_would_not_pass_check_exits_0_and_says_loudly_why() {
    // Only the team was exported, not its parent.
    let yaml = kai_queue("team-a", Some("research"), 2.0, "");
    let run = run_binary(
        "kai-policy",
        &repo_root(),
        &["import", "-"],
        Some(yaml.as_bytes()),
    );
    assert_eq!(run.status, 0, "{run:?}");
    assert!(
        run.stdout.contains("queue \"team-a\""),
        "the policy is printed"
    );
    assert!(run.stderr.contains("KP0008"), "{}", run.stderr);
    assert!(
        run.stderr
            .contains("note: the imported policy does not pass `check`")
            && run.stderr.contains("before you use it"),
        "{}",
        run.stderr
    );
}

/// The README: "Text from policy files is printed with control characters escaped (`\u{1b}`)".
/// The input's text reaches `import`'s notes and errors too.
#[test]
fn import_notes_and_errors_escape_control_characters() {
    let yaml = "apiVersion: scheduling.run.ai/v2\nkind: Queue\nmetadata: {name: \"a\\u001b[31mred\"}\nspec:\n  resources:\n    gpu: {quota: 5, limit: -1, overQuotaWeight: 1}\n";
    let run = run_binary(
        "kai-policy",
        &repo_root(),
        &["import", "-"],
        Some(yaml.as_bytes()),
    );
    assert!(run.stderr.contains("note: "), "{run:?}");
    assert!(!run.stderr.contains('\u{1b}'), "{:?}", run.stderr);
    assert!(!run.stdout.contains('\u{1b}'), "{:?}", run.stdout);
    assert!(run.stderr.contains("a\\u{1b}[31mred"), "{}", run.stderr);

    // An error names the object the same way.
    let bad = yaml.replace("quota: 5", "quota: lots");
    let run = run_binary(
        "kai-policy",
        &repo_root(),
        &["import", "-"],
        Some(bad.as_bytes()),
    );
    assert_eq!(run.status, 2, "{run:?}");
    assert!(!run.stderr.contains('\u{1b}'), "{:?}", run.stderr);
    assert!(run.stderr.contains("a\\u{1b}[31mred"), "{}", run.stderr);
}

/// serde-saphyr's default budget stopped at 1,024 documents; a cluster has more queues.
#[test]
fn import_takes_thousands_of_queue_documents() {
    let mut yaml = kai_queue("root", None, 0.0, "");
    for i in 0..3_000 {
        yaml.push_str(&kai_queue(&format!("q{i}"), Some("root"), 0.0, ""));
    }
    let run = run_binary(
        "kai-policy",
        &repo_root(),
        &["import", "-"],
        Some(yaml.as_bytes()),
    );
    assert_eq!(run.status, 0, "{}", run.stderr);
    assert_eq!(run.stdout.matches("queue \"q").count(), 3_000);
}
