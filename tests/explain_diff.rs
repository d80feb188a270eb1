//! `kai-policy explain` and `kai-policy diff`: what a team gets, and what a pull request changes.

use kai_policy_e2e::*;
use serde_json::Value;

fn explain(args: &[&str]) -> Run {
    let mut all = vec![
        "explain",
        "policies",
        "--scenario",
        "examples/busy-week.yaml",
    ];
    all.extend_from_slice(args);
    kai_policy(&repo_root(), &all)
}

#[test]
fn explain_shows_the_tree_and_says_why_for_every_queue() {
    let run = explain(&[]);
    assert_eq!(run.status, 0, "{run:?}");
    insta::assert_snapshot!("explain-busy-week-human", run.stdout);
}

#[test]
fn explain_markdown_is_a_pull_request_comment() {
    let run = explain(&["--format", "markdown"]);
    assert_eq!(run.status, 0);
    insta::assert_snapshot!("explain-busy-week-markdown", run.stdout);
}

#[test]
fn explain_json_has_every_queue_in_the_documented_units() {
    let run = explain(&["--format", "json"]);
    let doc: Value = serde_json::from_str(&run.stdout).unwrap();
    let queues = doc["queues"].as_object().unwrap();
    assert_eq!(queues.len(), 8, "parents included");
    let analytics = &queues["analytics"];
    assert_eq!(analytics["gpu"]["quota"], 24.5, "GPU in devices");
    assert_eq!(analytics["gpu"]["limit"], 36);
    assert_eq!(analytics["gpu"]["request"], 40);
    assert_eq!(
        queues["vision-team"]["cpu"]["request"], 64_000,
        "CPU in millicores"
    );
    assert_eq!(
        queues["research"]["memory"]["quota"],
        2400u64 << 30,
        "memory in bytes"
    );
    assert!(
        queues["llm-team"]["gpu"]["limit"].is_null(),
        "unlimited is null"
    );
    assert!(
        queues["llm-team"]["cpu"]["quota"].is_null(),
        "not governed is null"
    );
    let total: f64 = ["research", "data-science", "infrastructure"]
        .iter()
        .map(|q| queues[*q]["gpu"]["fair_share"].as_f64().unwrap())
        .sum();
    assert!(total <= 100.0);
}

#[test]
fn a_scenario_that_does_not_fit_the_policy_is_refused_with_where_and_why() {
    let dir = temp();
    copy_example(dir.path());
    write_files(
        dir.path(),
        &[(
            "s.yaml",
            "demand:\n  research: {gpu: 4}\n  llm-tem: {gpu: 2}\nusage:\n  vision-team: {gpu: 1.5}\n",
        )],
    );
    let run = kai_policy(dir.path(), &["explain", "--scenario", "s.yaml"]);
    assert_eq!(run.status, 2, "{run:?}");
    assert!(
        run.stderr
            .contains("s.yaml:2:3: demand: \"research\" has child queues (llm-team, vision-team)"),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr.contains(
            "s.yaml:3:3: demand: no queue is named \"llm-tem\" (did you mean \"llm-team\"?)"
        ),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr
            .contains("s.yaml:5:22: usage.vision-team.gpu: 1.5 is outside [0, 1]"),
        "{}",
        run.stderr
    );
    write_files(dir.path(), &[("bad.yaml", "demand: [1, 2\n")]);
    let run = kai_policy(dir.path(), &["explain", "--scenario", "bad.yaml"]);
    assert_eq!(run.status, 2);
    assert!(
        run.stderr.contains("bad.yaml:") && run.stderr.contains(": not a valid scenario"),
        "{}",
        run.stderr
    );
}

/// Runs `explain` on one policy file (and a scenario, when given) in a fresh folder.
fn explain_policy(policy: &str, scenario: Option<&str>) -> Run {
    let dir = temp();
    let mut files = vec![("policies/p.kdl", policy)];
    files.extend(scenario.map(|s| ("s.yaml", s)));
    write_files(dir.path(), &files);
    let mut args = vec!["explain"];
    if scenario.is_some() {
        args.extend(["--scenario", "s.yaml"]);
    }
    let run = kai_policy(dir.path(), &args);
    assert_eq!(run.status, 0, "{run:?}");
    run
}

#[test]
fn explain_says_when_a_share_is_more_than_the_cluster_has() {
    // KAI keeps a finite quota in full (`setDeservedResource`): 10 of a cluster of 8.
    let run = explain_policy(
        "cluster \"c\" { oversubscription \"allow\" }\n\
         queue \"a\" { gpu quota=10; queue \"a1\" { namespaces \"a1\" } }\n\
         queue \"b\" { gpu quota=0; namespaces \"b\" }\n",
        Some("capacity: {gpu: 8}\ndemand:\n  a1: {gpu: 10}\n  b: {gpu: 4}\n"),
    );
    assert!(
        run.stdout.contains(
            "a: 10 deserved (request); that is more than the cluster's 8: the quotas here add up \
             to more than there is"
        ),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout
            .contains("b: 0 deserved (quota); nothing left to divide (4 more requested)"),
        "{}",
        run.stdout
    );
}

#[test]
fn explain_says_when_the_leftover_pass_gives_more_than_the_request() {
    // The review's ex_over: 4.5 GPUs, offers of 2.25 each; both take 2 and remember 0.25; the
    // last 0.5 goes to `a` (tie, declared first) although it asked for only 2.3.
    let run = explain_policy(
        "queue \"a\" { gpu quota=0; namespaces \"a\" }\nqueue \"b\" { gpu quota=0; namespaces \"b\" }\n",
        Some("capacity: {gpu: 4.5}\ndemand:\n  a: {gpu: 2.3}\n  b: {gpu: 10}\n"),
    );
    assert!(
        run.stdout.contains(
            "a: 0 deserved (quota) + 2.5 over quota (weight 1 of 2 at priority 100, 4.5 GPUs left \
             after quotas; 0.5 of it from the leftover pass); 0.2 more than its request 2.3: \
             KAI's leftover pass gives a whole unit without cutting it to the request\n"
        ),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout.contains("b: 0 deserved (quota) + 2 over quota"),
        "{}",
        run.stdout
    );
}

#[test]
fn explain_without_capacity_says_what_it_assumed_and_how_to_declare_it() {
    let run = explain_policy(
        "queue \"a\" { gpu quota=2; namespaces \"a\" }\nqueue \"b\" { gpu quota=1; namespaces \"b\" }\n",
        None,
    );
    assert!(
        run.stdout.starts_with(
            "note: no gpu capacity is declared: assumed 0 GPUs, what the top-level queues ask \
             for, so every share is 0; declare it with `capacity gpu=…` in the `cluster` block, \
             or `capacity: {gpu: …}` in a scenario file (--scenario)\n"
        ),
        "{}",
        run.stdout
    );
    // With demand but still no capacity, the assumed total is what the queues ask for.
    let run = explain_policy(
        "queue \"a\" { gpu quota=2; namespaces \"a\" }\nqueue \"b\" { gpu quota=1; namespaces \"b\" }\n",
        Some("demand:\n  a: {gpu: 3}\n  b: {gpu: 1}\n"),
    );
    assert!(
        run.stdout
            .starts_with("note: no gpu capacity is declared: assumed 4 GPUs, what the top-level queues ask for; declare it"),
        "{}",
        run.stdout
    );
    let declared = explain_policy(
        "cluster \"c\" { capacity gpu=4; }\nqueue \"a\" { gpu quota=2; namespaces \"a\" }\n",
        None,
    );
    assert!(!declared.stdout.contains("note:"), "{}", declared.stdout);
}

#[test]
fn explain_says_a_resource_is_not_governed_instead_of_giving_each_child_the_whole_parent() {
    // Neither child governs CPU: each may take up to all of its parent's share (KAI reads no
    // quota as unlimited), which is not a division between them.
    let run = explain_policy(
        "queue \"p\" { cpu quota=8; queue \"x\" { namespaces \"x\" }; queue \"y\" { namespaces \"y\" } }\n",
        Some("capacity: {cpu: 8}\ndemand:\n  x: {cpu: 8}\n  y: {cpu: 8}\n"),
    );
    for child in ["x", "y"] {
        let line = run
            .stdout
            .lines()
            .find(|l| l.starts_with(&format!("{child} (cpu): ")))
            .unwrap_or_else(|| panic!("{}", run.stdout));
        assert!(
            line.contains(
                "8 deserved (not governed at this queue: unlimited, so it may take up to all of \
                 p's share of 8 whatever its siblings take; a `cpu quota=…` here divides it among them)"
            ),
            "{line}"
        );
        assert!(!line.contains("all of its parent's share"), "{line}");
    }
}

/// The example policy in a fresh Git repository, with one commit.
fn repo_with_example() -> tempfile::TempDir {
    let dir = temp();
    copy_example(dir.path());
    git_commit_all(dir.path(), "base");
    dir
}

fn edit(dir: &std::path::Path, file: &str, from: &str, to: &str) {
    let path = dir.join(file);
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains(from), "{file} has no {from}");
    std::fs::write(path, text.replace(from, to)).unwrap();
}

#[test]
fn diff_against_the_working_tree_previews_a_quota_move() {
    let dir = repo_with_example();
    edit(
        dir.path(),
        "policies/teams/llm.kdl",
        "quota=30 weight=2",
        "quota=26 weight=2",
    );
    edit(
        dir.path(),
        "policies/teams/vision.kdl",
        "quota=20 limit=40",
        "quota=24 limit=40",
    );
    let run = kai_policy(dir.path(), &["diff", "--base", "HEAD"]);
    assert_eq!(run.status, 1, "changes exit 1: {run:?}");
    assert!(run.stdout.starts_with("2 queues changed, 0 added, 0 removed; 4 GPUs of guarantee move from llm-team to vision-team\n"), "{}", run.stdout);
    assert!(
        run.stdout.contains("-      quota: 30\n+      quota: 26"),
        "{}",
        run.stdout
    );
    let markdown = kai_policy(
        dir.path(),
        &["diff", "--base", "HEAD", "--format", "markdown"],
    );
    let markdown = markdown
        .stdout
        .replace(&head_label(dir.path()), "HEAD (<commit>)");
    insta::assert_snapshot!("diff-quota-move-markdown", markdown);
}

fn head_label(dir: &std::path::Path) -> String {
    let repo = git2::Repository::open(dir).unwrap();
    let id = repo
        .head()
        .unwrap()
        .peel_to_commit()
        .unwrap()
        .id()
        .to_string();
    format!("HEAD ({})", &id[..12])
}

#[test]
fn diff_between_two_commits_reads_history_without_checking_out() {
    let dir = repo_with_example();
    let base = git2::Repository::open(dir.path())
        .unwrap()
        .head()
        .unwrap()
        .peel_to_commit()
        .unwrap()
        .id()
        .to_string();
    write_files(
        dir.path(),
        &[(
            "policies/teams/audio.kdl",
            "queue \"audio\" parent=\"research\" {\n    gpu quota=0 weight=1\n    namespaces \"research-audio\"\n}\n",
        )],
    );
    std::fs::remove_file(dir.path().join("policies/teams/platform.kdl")).unwrap();
    edit(
        dir.path(),
        "policies/departments.kdl",
        "queue \"infrastructure\" display-name=\"Infrastructure\" priority=200 {\n    gpu quota=15 limit=20 weight=1\n}\n",
        "",
    );
    edit(
        dir.path(),
        "policies/departments.kdl",
        "gpu quota=35 limit=60 weight=1",
        "gpu quota=50 limit=60 weight=1",
    );
    edit(
        dir.path(),
        "policies/teams/analytics.kdl",
        "gpu quota=24.5 limit=36",
        "gpu quota=39.5 limit=50",
    );
    let head = git_commit_all(dir.path(), "reorganise");
    // The working tree moves on; the comparison of the two commits must not see it.
    edit(dir.path(), "policies/teams/llm.kdl", "quota=30", "quota=1");
    let run = kai_policy(
        dir.path(),
        &["diff", "--base", &base, "--head", &head, "--format", "json"],
    );
    assert_eq!(run.status, 1, "{run:?}");
    let doc: Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(doc["added"], serde_json::json!(["audio"]));
    assert_eq!(
        doc["removed"],
        serde_json::json!(["infrastructure", "platform"])
    );
    assert!(doc["summary"].as_str().unwrap().starts_with("2 queues changed, 1 added, 2 removed; GPU guarantees: data-science +15, analytics +15, infrastructure -15, platform -15"), "{}", doc["summary"]);
    assert!(!run.stdout.contains("\"quota: 1\""));
}

#[test]
fn no_change_exits_0() {
    let dir = repo_with_example();
    let run = kai_policy(dir.path(), &["diff", "--base", "HEAD"]);
    assert_eq!(run.status, 0, "{run:?}");
    assert_eq!(run.stdout, "0 queues changed, 0 added, 0 removed\n");
}

#[test]
fn a_revision_that_does_not_compile_is_reported_never_previewed() {
    let dir = repo_with_example();
    edit(
        dir.path(),
        "policies/teams/llm.kdl",
        "gpu quota=30",
        "gpu quota=thirty",
    );
    let run = kai_policy(dir.path(), &["diff", "--base", "HEAD"]);
    assert_eq!(run.status, 2, "{run:?}");
    assert!(
        run.stderr
            .contains("the policy at working tree does not compile"),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr.contains("policies/teams/llm.kdl:3:"),
        "file and line at that revision: {}",
        run.stderr
    );
    assert!(run.stdout.is_empty());

    let broken = git_commit_all(dir.path(), "broken");
    edit(
        dir.path(),
        "policies/teams/llm.kdl",
        "gpu quota=thirty",
        "gpu quota=30",
    );
    let run = kai_policy(dir.path(), &["diff", "--base", &broken]);
    assert_eq!(run.status, 2);
    assert!(
        run.stderr
            .contains(&format!("{broken} ({})", &broken[..12])),
        "{}",
        run.stderr
    );
}

#[test]
fn diff_outside_git_or_with_an_unknown_revision_exits_2() {
    let dir = temp();
    copy_example(dir.path());
    let run = kai_policy(dir.path(), &["diff", "--base", "main"]);
    assert_eq!(run.status, 2);
    assert!(
        run.stderr.contains("not inside a Git repository"),
        "{}",
        run.stderr
    );
    git_commit_all(dir.path(), "base");
    let run = kai_policy(dir.path(), &["diff", "--base", "no-such-branch"]);
    assert_eq!(run.status, 2);
    assert!(
        run.stderr.contains("unknown revision `no-such-branch`"),
        "{}",
        run.stderr
    );
}

/// One edit a pull request might make that changes where or whether pods run, and what `diff`
/// must say about it: a phrase of the one-line plan, a table row (`row`: its old → new), and that row in JSON.
struct SchedulingEdit {
    edits: &'static [(&'static str, &'static str, &'static str)],
    plan: &'static str,
    subject: &'static str,
    name: &'static str,
    what: &'static str,
    old: Value,
    new: Value,
    row: &'static str,
}

fn scheduling_edits() -> Vec<SchedulingEdit> {
    use serde_json::json;
    const LLM: &str = "policies/teams/llm.kdl";
    const CLUSTER: &str = "policies/cluster.kdl";
    vec![
        SchedulingEdit {
            edits: &[
                (
                    LLM,
                    "namespaces \"research-llm\" \"research-llm-dev\"",
                    "namespaces \"research-llm\"",
                ),
                (
                    "policies/teams/vision.kdl",
                    "namespaces \"research-vision\"",
                    "namespaces \"research-vision\" \"research-llm-dev\"",
                ),
            ],
            plan: "0 queues changed, 0 added, 0 removed; namespace research-llm-dev moves from llm-team to vision-team",
            subject: "namespace",
            name: "research-llm-dev",
            what: "queue",
            old: json!("llm-team"),
            new: json!("vision-team"),
            row: "llm-team → vision-team",
        },
        SchedulingEdit {
            edits: &[(
                "policies/teams/inference.kdl",
                "placement \"inference-spread\"",
                "placement \"training-pack\"",
            )],
            plan: "1 queue changed, 0 added, 0 removed",
            subject: "queue",
            name: "inference",
            what: "placement",
            old: json!("inference-spread"),
            new: json!("training-pack"),
            row: "inference-spread → training-pack",
        },
        SchedulingEdit {
            edits: &[(
                "policies/teams/analytics.kdl",
                "default-priority-class \"interactive\"",
                "default-priority-class \"background-training\"",
            )],
            plan: "1 queue changed, 0 added, 0 removed",
            subject: "queue",
            name: "analytics",
            what: "default priority class",
            old: json!("interactive"),
            new: json!("background-training"),
            row: "interactive → background-training",
        },
        SchedulingEdit {
            edits: &[(
                CLUSTER,
                "value=1000 preemptible=#false",
                "value=1000 preemptible=#true",
            )],
            plan: "0 queues changed, 0 added, 0 removed; priority class production-inference preemptible changed",
            subject: "priority-class",
            name: "production-inference",
            what: "preemptible",
            old: json!(false),
            new: json!(true),
            row: "no → yes",
        },
        SchedulingEdit {
            edits: &[(
                CLUSTER,
                "value=100 preemptible=#true",
                "value=150 preemptible=#true",
            )],
            plan: "0 queues changed, 0 added, 0 removed; priority class background-training value changed",
            subject: "priority-class",
            name: "background-training",
            what: "value",
            old: json!(100),
            new: json!(150),
            row: "100 → 150",
        },
        SchedulingEdit {
            edits: &[(CLUSTER, "fairness k=1.0", "fairness k=0.5")],
            plan: "; cluster fairness k changed",
            subject: "cluster",
            name: "",
            what: "fairness k",
            old: json!(1),
            new: json!(0.5),
            row: "1 → 0.5",
        },
        SchedulingEdit {
            edits: &[(
                CLUSTER,
                "min-runtime preempt=\"5m\"",
                "min-runtime preempt=\"10m\"",
            )],
            plan: "; cluster preempt min-runtime changed",
            subject: "cluster",
            name: "",
            what: "preempt min-runtime",
            old: json!(300),
            new: json!(600),
            row: "5m → 10m",
        },
        SchedulingEdit {
            edits: &[(
                CLUSTER,
                "oversubscription \"error\"",
                "oversubscription \"warn\"",
            )],
            plan: "0 queues changed, 0 added, 0 removed; cluster oversubscription changed",
            subject: "cluster",
            name: "",
            what: "oversubscription",
            old: json!("error"),
            new: json!("warn"),
            row: "error → warn",
        },
        SchedulingEdit {
            edits: &[(
                CLUSTER,
                "scheduler-name \"kai-scheduler\"",
                "scheduler-name \"gpu-scheduler\"",
            )],
            plan: "0 queues changed, 0 added, 0 removed; cluster scheduler name changed",
            subject: "cluster",
            name: "",
            what: "scheduler name",
            old: json!("kai-scheduler"),
            new: json!("gpu-scheduler"),
            row: "kai-scheduler → gpu-scheduler",
        },
        SchedulingEdit {
            edits: &[(
                CLUSTER,
                "queue-label \"kai.scheduler/queue\"",
                "queue-label \"team\"",
            )],
            plan: "0 queues changed, 0 added, 0 removed; cluster queue label changed",
            subject: "cluster",
            name: "",
            what: "queue label",
            old: json!("kai.scheduler/queue"),
            new: json!("team"),
            row: "kai.scheduler/queue → team",
        },
        SchedulingEdit {
            edits: &[(CLUSTER, "placement gpu=binpack", "placement gpu=spread")],
            plan: "0 queues changed, 0 added, 0 removed; cluster gpu placement changed",
            subject: "cluster",
            name: "",
            what: "gpu placement",
            old: json!("binpack"),
            new: json!("spread"),
            row: "binpack → spread",
        },
        SchedulingEdit {
            edits: &[(CLUSTER, "max-gpus-per-node 2", "max-gpus-per-node 4")],
            plan: "0 queues changed, 0 added, 0 removed; placement inference-spread max-gpus-per-node changed",
            subject: "placement",
            name: "inference-spread",
            what: "max-gpus-per-node",
            old: json!(2),
            new: json!(4),
            row: "2 → 4",
        },
        SchedulingEdit {
            edits: &[(
                CLUSTER,
                "required=\"nvidia.com/gpu.clique\"",
                "required=\"kubernetes.io/hostname\"",
            )],
            plan: "; placement training-pack topology required changed",
            subject: "placement",
            name: "training-pack",
            what: "topology required",
            old: json!("nvidia.com/gpu.clique"),
            new: json!("kubernetes.io/hostname"),
            row: "nvidia.com/gpu.clique → kubernetes.io/hostname",
        },
    ]
}

#[test]
fn every_change_that_alters_scheduling_is_previewed_and_exits_1() {
    for case in scheduling_edits() {
        let dir = repo_with_example();
        for (file, from, to) in case.edits {
            edit(dir.path(), file, from, to);
        }
        let label = format!("{} {} {}", case.subject, case.name, case.what);
        let human = kai_policy(dir.path(), &["diff", "--base", "HEAD"]);
        assert_eq!(human.status, 1, "{label}: {human:?}");
        let plan = human.stdout.lines().next().unwrap_or_default();
        assert!(plan.contains(case.plan), "{label}: plan is `{plan}`");
        let subject = match case.subject {
            "queue" => case.name.to_string(),
            "cluster" => "cluster".to_string(),
            other => format!("{} {}", other.replace('-', " "), case.name),
        };
        let in_one_line = |l: &&str| {
            l.starts_with(&format!("{subject} ")) && l.contains(case.what) && l.contains(case.row)
        };
        assert!(
            human.stdout.lines().any(|l| in_one_line(&l)),
            "{label}: no row `{subject}  {}  {}` in\n{}",
            case.what,
            case.row,
            human.stdout
        );

        let markdown = kai_policy(
            dir.path(),
            &["diff", "--base", "HEAD", "--format", "markdown"],
        );
        assert_eq!(markdown.status, 1);
        let wanted = format!("| {} |", case.what);
        assert!(
            markdown.stdout.contains(&wanted),
            "{label}:\n{}",
            markdown.stdout
        );

        let json = kai_policy(dir.path(), &["diff", "--base", "HEAD", "--format", "json"]);
        assert_eq!(json.status, 1);
        let doc: Value = serde_json::from_str(&json.stdout).unwrap();
        let row = doc["changes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| {
                c["subject"] == case.subject && c["name"] == case.name && c["what"] == case.what
            })
            .unwrap_or_else(|| panic!("{label}: no such row in {}", json.stdout));
        assert_eq!(
            (&row["old"], &row["new"]),
            (&case.old, &case.new),
            "{label}"
        );
    }
}

#[test]
fn comments_layout_and_moving_a_queue_between_files_change_nothing() {
    let dir = repo_with_example();
    edit(
        dir.path(),
        "policies/teams/llm.kdl",
        "gpu quota=30 weight=2",
        "gpu   quota=30   weight=2 // the big one",
    );
    edit(
        dir.path(),
        "policies/cluster.kdl",
        "// Cluster-wide",
        "/* reviewed */\n\n// Cluster-wide",
    );
    let platform = std::fs::read_to_string(dir.path().join("policies/teams/platform.kdl")).unwrap();
    std::fs::remove_file(dir.path().join("policies/teams/platform.kdl")).unwrap();
    let departments = std::fs::read_to_string(dir.path().join("policies/departments.kdl")).unwrap();
    write_files(
        dir.path(),
        &[(
            "policies/departments.kdl",
            &format!("{departments}\n{platform}"),
        )],
    );
    for format in ["human", "markdown", "json"] {
        let run = kai_policy(dir.path(), &["diff", "--base", "HEAD", "--format", format]);
        assert_eq!(run.status, 0, "{format}: {run:?}");
    }
}

/// The pull request that adds the policy folder: the base revision has none, so every queue is
/// previewed as added (exit 1), with a note saying so, not an error.
#[test]
fn a_change_that_adds_the_policy_folder_previews_every_queue_as_added() {
    let dir = temp();
    write_files(dir.path(), &[("README", "hi\n")]);
    git_commit_all(dir.path(), "before any policy");
    copy_example(dir.path());
    let run = kai_policy(dir.path(), &["diff", "--base", "HEAD", "--format", "json"]);
    assert_eq!(run.status, 1, "{run:?}");
    let doc: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(doc["added"].as_array().map(Vec::len), Some(8), "{doc}");
    assert_eq!(doc["removed"], serde_json::json!([]), "{doc}");
    assert!(
        run.stderr.contains("policies does not exist at `HEAD`")
            && run.stderr.contains("every queue is added"),
        "{}",
        run.stderr
    );
    // A head revision without the folder is still an error: there is nothing to preview.
    let run = kai_policy(
        dir.path(),
        &[
            "diff", "--base", "HEAD", "--head", "HEAD", "--format", "json",
        ],
    );
    assert_eq!(run.status, 2, "{run:?}");
}

/// Declaration order breaks ties (fair share's leftover pass, the scheduler's queue order), and
/// files are read in path order: a queue moved to a file read later comes after its siblings,
/// which changes meaning, so `diff` names it instead of showing only reordered objects.
#[test]
fn moving_a_queue_after_its_siblings_is_named_as_a_change_of_order() {
    let dir = repo_with_example();
    std::fs::rename(
        dir.path().join("policies/teams/llm.kdl"),
        dir.path().join("policies/zz-llm.kdl"),
    )
    .unwrap();
    let run = kai_policy(dir.path(), &["diff", "--base", "HEAD", "--format", "json"]);
    assert_eq!(run.status, 1, "{run:?}");
    let doc: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(doc["changed"], serde_json::json!([]), "{doc}");
    assert_eq!(
        doc["changes"],
        serde_json::json!([{
            "subject": "queue",
            "name": "research",
            "what": "order of its queues",
            "old": "llm-team, vision-team",
            "new": "vision-team, llm-team",
            "delta": null
        }]),
        "{doc}"
    );
    let summary = doc["summary"].as_str().unwrap();
    assert!(
        summary.contains("the order of the queues under research changed"),
        "{summary}"
    );
}

/// At a revision, symbolic links are followed as in the working tree (Git stores a link as a
/// blob holding its target, which is not KDL): the two sides read the same policy.
#[cfg(unix)]
#[test]
fn diff_follows_symlinked_files_and_folders_at_a_revision() {
    use std::os::unix::fs::symlink;
    let dir = temp();
    copy_example(dir.path());
    let teams = dir.path().join("policies/teams");
    std::fs::rename(&teams, dir.path().join("team-files")).unwrap();
    symlink("../team-files", &teams).unwrap();
    std::fs::rename(
        dir.path().join("policies/departments.kdl"),
        dir.path().join("departments.kdl"),
    )
    .unwrap();
    symlink(
        "../departments.kdl",
        dir.path().join("policies/departments.kdl"),
    )
    .unwrap();
    git_commit_all(dir.path(), "linked");
    let run = kai_policy(dir.path(), &["diff", "--base", "HEAD"]);
    assert_eq!(run.status, 0, "{run:?}");
    edit(
        dir.path(),
        "team-files/llm.kdl",
        "quota=30 weight=2",
        "quota=26 weight=2",
    );
    let run = kai_policy(dir.path(), &["diff", "--base", "HEAD"]);
    assert_eq!(run.status, 1, "{run:?}");
    assert!(run.stdout.contains("llm-team"), "{}", run.stdout);
}

/// Parses what a command printed as exactly one JSON document (trailing text fails the parse).
fn one_document(run: &Run) -> Value {
    serde_json::from_str(&run.stdout)
        .unwrap_or_else(|e| panic!("stdout is not one JSON document ({e}): {run:?}"))
}

/// cli.md: `--format json` prints one JSON document; the README: "always print exactly one
/// valid document — also when the command cannot run". So a failed `explain` prints one too: the
/// policy's diagnostics as `check --format json` prints them (exit 1, as `check`), or why it
/// could not run as KP0000 naming the path it could not use (exit 2). The human report stays on
/// stderr.
#[test]
fn explain_json_is_one_document_also_when_it_fails() {
    let dir = temp();
    copy_example(dir.path());
    write_files(
        dir.path(),
        &[
            (
                "bad/a.kdl",
                "queue \"a\" {\n    gpu quota=-3\n    namespaces \"a\"\n}\n",
            ),
            (
                "sc.yaml",
                "demand:\n  llm-team: {gpu: 1}\n  nosuch: {gpu: 2}\n",
            ),
        ],
    );
    let run = kai_policy(dir.path(), &["explain", "bad", "--format", "json"]);
    assert_eq!(run.status, 1, "{run:?}");
    let doc = one_document(&run);
    assert_eq!(doc["diagnostics"][0]["code"], "KP0011", "{doc}");
    assert_eq!(doc["diagnostics"][0]["file"], "bad/a.kdl");
    assert_eq!(doc["diagnostics"][0]["line"], 2);
    assert_eq!(doc["summary"]["errors"], 1);
    assert!(run.stderr.contains("KP0011"), "{}", run.stderr);

    for (args, file) in [
        (
            &["explain", "no-such-folder", "--format", "json"][..],
            "no-such-folder",
        ),
        (
            &["explain", "--scenario", "nope.yaml", "--format", "json"][..],
            "nope.yaml",
        ),
    ] {
        let run = kai_policy(dir.path(), args);
        assert_eq!(run.status, 2, "{run:?}");
        let doc = one_document(&run);
        assert_eq!(
            doc["diagnostics"].as_array().map(Vec::len),
            Some(1),
            "{doc}"
        );
        assert_eq!(doc["diagnostics"][0]["code"], "KP0000");
        assert_eq!(doc["diagnostics"][0]["file"], file);
        assert!(doc["diagnostics"][0]["help"].is_string(), "{doc}");
        assert!(
            run.stderr.contains(&format!("error: cannot read {file}")),
            "{}",
            run.stderr
        );
    }

    // A scenario that does not fit the policy: KP0000 at the line that names the queue.
    let run = kai_policy(
        dir.path(),
        &["explain", "--scenario", "sc.yaml", "--format", "json"],
    );
    assert_eq!(run.status, 2, "{run:?}");
    let doc = one_document(&run);
    let d = &doc["diagnostics"][0];
    assert_eq!(d["code"], "KP0000", "{doc}");
    assert_eq!((&d["file"], &d["line"]), (&"sc.yaml".into(), &3.into()));
    assert!(
        d["message"]
            .as_str()
            .unwrap()
            .contains("no queue is named \"nosuch\""),
        "{doc}"
    );
    assert!(run.stderr.contains("no queue is named"), "{}", run.stderr);
}

/// `--format markdown` is a pull-request comment: when `explain` or `diff` fails, the comment
/// says so and carries the diagnostics as the terminal shows them (a CI step that posts whatever
/// stdout holds never posts an empty comment), and the exit status is that of the failure.
#[test]
fn a_failure_in_markdown_is_a_comment_that_says_what_is_wrong() {
    let dir = temp();
    write_files(
        dir.path(),
        &[(
            "bad/a.kdl",
            "queue \"a\" {\n    gpu quota=-3\n    namespaces \"a\"\n}\n",
        )],
    );
    let run = kai_policy(dir.path(), &["explain", "bad", "--format", "markdown"]);
    assert_eq!(run.status, 1, "{run:?}");
    assert!(run.stdout.starts_with("**kai-policy:** "), "{}", run.stdout);
    assert!(run.stdout.contains("KP0011"), "{}", run.stdout);
    assert!(run.stdout.contains("bad/a.kdl:2:"), "{}", run.stdout);

    let run = kai_policy(
        dir.path(),
        &["explain", "no-such-folder", "--format", "markdown"],
    );
    assert_eq!(run.status, 2, "{run:?}");
    assert!(run.stdout.starts_with("**kai-policy:** "), "{}", run.stdout);
    assert!(
        run.stdout.contains("cannot read no-such-folder"),
        "{}",
        run.stdout
    );
}

/// As `explain`: `diff --format json` prints one JSON document also when it fails (always exit
/// 2 for `diff`). A revision that does not compile gives its diagnostics (file and line at that
/// revision) and a KP0000 that names the revision, so the document says which side failed.
#[test]
fn diff_json_is_one_document_also_when_it_fails() {
    let dir = repo_with_example();
    let run = kai_policy(
        dir.path(),
        &["diff", "--base", "no-such-branch", "--format", "json"],
    );
    assert_eq!(run.status, 2, "{run:?}");
    let doc = one_document(&run);
    let d = &doc["diagnostics"][0];
    assert_eq!(d["code"], "KP0000", "{doc}");
    assert_eq!(d["file"], "policies");
    assert!(
        d["message"]
            .as_str()
            .unwrap()
            .contains("unknown revision `no-such-branch`"),
        "{doc}"
    );
    assert!(
        run.stderr.contains("unknown revision `no-such-branch`"),
        "{}",
        run.stderr
    );

    edit(
        dir.path(),
        "policies/teams/llm.kdl",
        "gpu quota=30",
        "gpu quota=thirty",
    );
    let run = kai_policy(dir.path(), &["diff", "--base", "HEAD", "--format", "json"]);
    assert_eq!(run.status, 2, "{run:?}");
    let doc = one_document(&run);
    let all = doc["diagnostics"].as_array().unwrap();
    assert!(
        all.iter().any(|d| d["code"] != "KP0000"
            && d["file"] == "policies/teams/llm.kdl"
            && d["line"] == 3),
        "{doc}"
    );
    assert!(
        all.iter().any(|d| d["code"] == "KP0000"
            && d["message"]
                .as_str()
                .unwrap()
                .contains("the policy at working tree does not compile")),
        "{doc}"
    );
    assert!(run.stderr.contains("does not compile"), "{}", run.stderr);

    let run = kai_policy(
        dir.path(),
        &["diff", "--base", "HEAD", "--format", "markdown"],
    );
    assert_eq!(run.status, 2, "{run:?}");
    assert!(run.stdout.starts_with("**kai-policy:** "), "{}", run.stdout);
    assert!(run.stdout.contains("does not compile"), "{}", run.stdout);
    assert!(
        run.stdout.contains("policies/teams/llm.kdl:3:"),
        "{}",
        run.stdout
    );

    let outside = temp();
    let run = kai_policy(
        outside.path(),
        &["diff", "--base", "main", "--format", "json"],
    );
    assert_eq!(run.status, 2, "{run:?}");
    assert_eq!(one_document(&run)["diagnostics"][0]["code"], "KP0000");
}
