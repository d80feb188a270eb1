//! `kai-policy check` and `build` as CI and platform teams run them.

use kai_policy_e2e::*;
use serde_json::Value;

const BROKEN: &str = r#"
cluster "c" { capacity gpu=10 }
queue "research" {
    gpu quota=8 limit=4
    queue "llm" { gpu quota=2; namespaces "llm"; }
}
queue "idle" { gpu quota=1 }
"#;

#[test]
fn the_bundled_example_checks_clean() {
    let run = kai_policy(&repo_root(), &["check", "policies"]);
    assert_eq!(run.status, 0, "{run:?}");
    assert_eq!(run.stdout.trim(), "no problems found");
}

#[test]
fn check_reports_every_problem_with_file_line_and_column() {
    let dir = temp();
    write_files(dir.path(), &[("policies/a.kdl", BROKEN)]);
    let run = kai_policy(dir.path(), &["check"]);
    assert_eq!(run.status, 1, "{run:?}");
    assert!(run.stdout.contains("policies/a.kdl:4:17"), "{}", run.stdout);
    assert!(
        run.stdout.contains("KP0012"),
        "limit below quota: {}",
        run.stdout
    );
    assert!(
        run.stdout.contains("KP0018"),
        "unreachable queue warning: {}",
        run.stdout
    );
    assert!(run.stdout.contains("1 error, 1 warning"), "{}", run.stdout);
    assert!(
        !run.stdout.contains('\u{1b}'),
        "NO_COLOR means no escape codes"
    );
}

#[test]
fn json_output_has_the_documented_shape() {
    let dir = temp();
    write_files(dir.path(), &[("policies/a.kdl", BROKEN)]);
    let run = kai_policy(dir.path(), &["check", "--format", "json"]);
    assert_eq!(run.status, 1);
    let doc: Value = serde_json::from_str(&run.stdout).expect("stdout is one JSON document");
    assert_eq!(
        doc["summary"],
        serde_json::json!({"errors": 1, "warnings": 1})
    );
    let first = &doc["diagnostics"][0];
    for key in [
        "code", "severity", "message", "help", "file", "line", "column", "span",
    ] {
        assert!(first.get(key).is_some(), "missing {key}: {first}");
    }
    assert_eq!(first["file"], "policies/a.kdl");
    assert!(first["span"]["offset"].is_u64() && first["span"]["length"].is_u64());
}

#[test]
fn github_and_sarif_formats_are_what_ci_tools_read() {
    let dir = temp();
    write_files(dir.path(), &[("policies/a.kdl", BROKEN)]);
    let github = kai_policy(dir.path(), &["check", "--format", "github"]);
    assert_eq!(github.status, 1);
    let lines: Vec<&str> = github.stdout.lines().collect();
    assert_eq!(lines.len(), 2);
    assert!(
        lines[0].starts_with("::error file=policies/a.kdl,line=4,col=17,"),
        "{}",
        lines[0]
    );
    assert!(lines[0].contains("title=KP0012::"));
    assert!(lines[1].starts_with("::warning "));

    let sarif = kai_policy(dir.path(), &["check", "--format", "sarif"]);
    let log: Value = serde_json::from_str(&sarif.stdout).unwrap();
    assert_eq!(log["version"], "2.1.0");
    let results = log["runs"][0]["results"].as_array().unwrap();
    assert_eq!(results.len(), 2);
    assert_eq!(results[0]["ruleId"], "KP0012");
    assert_eq!(
        results[0]["locations"][0]["physicalLocation"]["region"]["startLine"],
        4
    );
}

#[test]
fn warnings_pass_unless_denied() {
    let dir = temp();
    write_files(
        dir.path(),
        &[("policies/a.kdl", "queue \"idle\" { gpu quota=1 }\n")],
    );
    assert_eq!(kai_policy(dir.path(), &["check"]).status, 0);
    assert_eq!(
        kai_policy(dir.path(), &["check", "--deny-warnings"]).status,
        1
    );
}

#[test]
fn a_command_that_cannot_run_exits_2_and_says_why() {
    let dir = temp();
    let missing = kai_policy(dir.path(), &["check", "no-such-folder"]);
    assert_eq!(missing.status, 2);
    assert!(
        missing.stderr.contains("no-such-folder"),
        "{}",
        missing.stderr
    );
    std::fs::create_dir(dir.path().join("empty")).unwrap();
    let empty = kai_policy(dir.path(), &["check", "empty"]);
    assert_eq!(empty.status, 2);
    assert!(
        empty.stderr.contains("no *.kdl policy files"),
        "{}",
        empty.stderr
    );
    assert_eq!(
        kai_policy(dir.path(), &["check", "--format", "xml"]).status,
        2
    );
    assert_eq!(kai_policy(dir.path(), &["frobnicate"]).status, 2);
}

#[test]
fn build_writes_three_files_identically_every_time() {
    let dir = temp();
    copy_example(dir.path());
    let first = kai_policy(dir.path(), &["build", "policies", "--out", "dist"]);
    assert_eq!(first.status, 0, "{first:?}");
    assert!(
        first.stderr.contains("wrote 8 queues, 3 priority classes"),
        "{}",
        first.stderr
    );
    let read = |name: &str| std::fs::read(dir.path().join("dist").join(name)).unwrap();
    let outputs: Vec<Vec<u8>> = [
        "queues.yaml",
        "priorityclasses.yaml",
        "scheduler-config.json",
    ]
    .iter()
    .map(|n| read(n))
    .collect();
    assert_eq!(
        kai_policy(dir.path(), &["build", "policies", "--out", "dist"]).status,
        0
    );
    let again: Vec<Vec<u8>> = [
        "queues.yaml",
        "priorityclasses.yaml",
        "scheduler-config.json",
    ]
    .iter()
    .map(|n| read(n))
    .collect();
    assert_eq!(outputs, again);
    let leftovers: Vec<_> = std::fs::read_dir(dir.path().join("dist"))
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().ends_with(".tmp"))
        .collect();
    assert!(leftovers.is_empty());
}

/// What `build` writes is the policy's meaning: not the path it was given, not line numbers, not
/// layout, comments or which file holds a queue.
#[test]
fn build_output_depends_on_the_policy_not_on_paths_layout_or_files() {
    let dir = temp();
    copy_example(dir.path());
    let outputs = |out: &str| -> Vec<String> {
        [
            "queues.yaml",
            "priorityclasses.yaml",
            "scheduler-config.json",
        ]
        .iter()
        .map(|n| std::fs::read_to_string(dir.path().join(out).join(n)).unwrap())
        .collect()
    };
    assert_eq!(
        kai_policy(dir.path(), &["build", "policies", "--out", "a"]).status,
        0
    );
    let absolute = dir.path().join("policies");
    let run = kai_policy(
        dir.path(),
        &["build", absolute.to_str().unwrap(), "--out", "b"],
    );
    assert_eq!(run.status, 0, "{run:?}");
    let first = outputs("a");
    assert_eq!(
        first,
        outputs("b"),
        "`policies` and `$PWD/policies` build the same bytes"
    );
    assert!(
        !first[0].contains(".kdl"),
        "no file name in the objects:\n{}",
        first[0]
    );

    // A comment, blank lines, a queue moved to another file, then `fmt`: same meaning.
    let platform = std::fs::read_to_string(dir.path().join("policies/teams/platform.kdl")).unwrap();
    std::fs::remove_file(dir.path().join("policies/teams/platform.kdl")).unwrap();
    let cluster = std::fs::read_to_string(dir.path().join("policies/cluster.kdl")).unwrap();
    write_files(
        dir.path(),
        &[(
            "policies/cluster.kdl",
            &format!(
                "// moved here\n\n\n{cluster}\n{}",
                platform.replace("\n", "\n\n")
            ),
        )],
    );
    assert_eq!(kai_policy(dir.path(), &["fmt", "policies"]).status, 0);
    assert_eq!(
        kai_policy(dir.path(), &["build", "policies", "--out", "c"]).status,
        0
    );
    assert_eq!(first, outputs("c"));
}

#[test]
fn build_to_stdout_is_one_clean_yaml_stream_for_kubectl() {
    let run = kai_policy(&repo_root(), &["build", "policies", "--out", "-"]);
    assert_eq!(run.status, 0, "{run:?}");
    let docs: Vec<Value> = serde_saphyr::from_multiple(&run.stdout).expect("stdout parses as YAML");
    let kinds: Vec<&str> = docs.iter().map(|d| d["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds.iter().filter(|k| **k == "PriorityClass").count(), 3);
    assert_eq!(kinds.iter().filter(|k| **k == "Queue").count(), 8);
    assert_eq!(
        kinds[0], "PriorityClass",
        "classes first, so queues' workloads can use them at once"
    );
}

#[test]
fn a_policy_with_errors_builds_nothing_and_keeps_the_last_good_output() {
    let dir = temp();
    copy_example(dir.path());
    assert_eq!(
        kai_policy(dir.path(), &["build", "--out", "dist"]).status,
        0
    );
    let before = std::fs::read(dir.path().join("dist/queues.yaml")).unwrap();
    write_files(
        dir.path(),
        &[(
            "policies/teams/broken.kdl",
            "queue \"x\" parent=\"nowhere\" { namespaces \"x\" }\n",
        )],
    );
    let run = kai_policy(dir.path(), &["build", "--out", "dist"]);
    assert_eq!(run.status, 1);
    assert!(run.stderr.contains("KP0008"), "{}", run.stderr);
    assert_eq!(
        std::fs::read(dir.path().join("dist/queues.yaml")).unwrap(),
        before
    );
}

#[test]
fn a_failed_write_exits_2_and_leaves_no_partial_file() {
    let dir = temp();
    copy_example(dir.path());
    std::fs::write(dir.path().join("dist"), "a file, not a folder").unwrap();
    let run = kai_policy(dir.path(), &["build", "--out", "dist/out"]);
    assert_eq!(run.status, 2, "{run:?}");
    assert!(run.stderr.contains("cannot write"), "{}", run.stderr);
    // The example has no problems, and saying so just before the failure would read as success.
    assert!(!run.stderr.contains("no problems"), "{}", run.stderr);
    assert_eq!(
        std::fs::read_to_string(dir.path().join("dist")).unwrap(),
        "a file, not a folder"
    );
}

/// Runs a workspace binary with its standard output sent to `/dev/full`, where every write
/// fails as on a full disk.
fn with_stdout_full(name: &str, cwd: &std::path::Path, args: &[&str]) -> Run {
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .expect("/dev/full exists on Linux");
    std::process::Command::new(binary(name))
        .args(args)
        .current_dir(cwd)
        .env("NO_COLOR", "1")
        .stdout(full)
        .output()
        .expect("the binary runs")
        .into()
}

#[test]
fn output_that_cannot_be_written_to_stdout_exits_2_and_says_why() {
    let dir = temp();
    copy_example(dir.path());
    let cluster = repo_root().join("examples/cluster.yaml");
    let cluster = cluster.to_str().unwrap();
    let runs = [
        ("kai-policy", vec!["build", "--out", "-"]),
        ("kai-policy", vec!["check", "--format", "json"]),
        ("kai-policy", vec!["check", "--format", "sarif"]),
        ("kai-policy", vec!["schema"]),
        (
            "kai-scheduler",
            vec!["simulate", "--policy", "policies", "--cluster", cluster],
        ),
    ];
    for (name, args) in runs {
        let run = with_stdout_full(name, dir.path(), &args);
        assert_eq!(run.status, 2, "{name} {args:?}: {run:?}");
        assert!(
            run.stderr.contains("cannot write to standard output")
                && run.stderr.contains("No space left on device"),
            "{name} {args:?}: {}",
            run.stderr
        );
    }
}

#[test]
fn a_build_that_cannot_replace_every_output_replaces_none() {
    let dir = temp();
    copy_example(dir.path());
    let small = dir.path().join("small");
    write_files(
        &small,
        &[(
            "a.kdl",
            "queue \"solo\" { gpu quota=1; namespaces \"solo\"; }\n",
        )],
    );
    let out = dir.path().join("out");
    let good = kai_policy(dir.path(), &["build", "small", "--out", "out"]);
    assert_eq!(good.status, 0, "{good:?}");
    let read = |name: &str| std::fs::read(out.join(name)).ok();
    // Each output in turn cannot be replaced (a folder stands in its place): the others must
    // keep the first build's contents, and no temporary file may be left behind.
    for blocked in [
        "queues.yaml",
        "priorityclasses.yaml",
        "scheduler-config.json",
    ] {
        let kept = read(blocked).expect("the first build wrote it");
        std::fs::remove_file(out.join(blocked)).unwrap();
        std::fs::create_dir(out.join(blocked)).unwrap();
        let before: Vec<_> = [
            "queues.yaml",
            "priorityclasses.yaml",
            "scheduler-config.json",
        ]
        .map(read)
        .into();
        for format in ["human", "json"] {
            let run = kai_policy(
                dir.path(),
                &["build", "policies", "--out", "out", "--format", format],
            );
            assert_eq!(run.status, 2, "{blocked} {format}: {run:?}");
            let after: Vec<_> = [
                "queues.yaml",
                "priorityclasses.yaml",
                "scheduler-config.json",
            ]
            .map(read)
            .into();
            assert_eq!(after, before, "{blocked} {format}: an output was replaced");
            let mut left: Vec<String> = std::fs::read_dir(&out)
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect();
            left.sort();
            assert_eq!(
                left,
                [
                    "priorityclasses.yaml",
                    "queues.yaml",
                    "scheduler-config.json"
                ],
                "{blocked} {format}: files left behind"
            );
            let said = if format == "json" {
                &run.stdout
            } else {
                &run.stderr
            };
            assert!(said.contains(blocked), "{blocked} {format}: {said}");
        }
        std::fs::remove_dir(out.join(blocked)).unwrap();
        std::fs::write(out.join(blocked), kept).unwrap();
    }
}

#[test]
fn build_prints_a_machine_document_on_stdout_when_it_writes_a_folder() {
    let dir = temp();
    copy_example(dir.path());
    let run = kai_policy(
        dir.path(),
        &["build", "policies", "--out", "out", "--format", "json"],
    );
    assert_eq!(run.status, 0, "{run:?}");
    let doc: Value = serde_json::from_str(&run.stdout).expect("one JSON document on stdout");
    assert_eq!(doc["summary"]["errors"], 0, "{doc}");
    write_files(&dir.path().join("policies"), &[("broken.kdl", BROKEN)]);
    let run = kai_policy(
        dir.path(),
        &["build", "policies", "--out", "out", "--format", "sarif"],
    );
    assert_eq!(run.status, 1, "{run:?}");
    let doc: Value = serde_json::from_str(&run.stdout).expect("one SARIF document on stdout");
    assert_eq!(doc["version"], "2.1.0", "{doc}");
    // With `--out -` stdout is the YAML stream: the document goes to stderr.
    let run = kai_policy(
        dir.path(),
        &["build", "policies", "--out", "-", "--format", "json"],
    );
    assert_eq!(run.status, 1, "{run:?}");
    assert!(run.stdout.is_empty(), "{}", run.stdout);
    serde_json::from_str::<Value>(&run.stderr).expect("one JSON document on stderr");
}

#[cfg(unix)]
#[test]
fn fmt_keeps_a_files_permissions() {
    use std::os::unix::fs::PermissionsExt;
    let dir = temp();
    let messy = "queue   \"solo\"   {  gpu quota=1 ;   namespaces \"solo\" }\n";
    write_files(&dir.path().join("p"), &[("a.kdl", messy)]);
    write_files(&dir.path().join("target"), &[("t.kdl", messy)]);
    std::os::unix::fs::symlink("../target/t.kdl", dir.path().join("p/t.kdl")).unwrap();
    for file in ["p/a.kdl", "target/t.kdl"] {
        std::fs::set_permissions(
            dir.path().join(file),
            std::fs::Permissions::from_mode(0o640),
        )
        .unwrap();
    }
    let run = kai_policy(dir.path(), &["fmt", "p"]);
    assert_eq!(run.status, 0, "{run:?}");
    for file in ["p/a.kdl", "target/t.kdl"] {
        let path = dir.path().join(file);
        assert_ne!(
            std::fs::read_to_string(&path).unwrap(),
            messy,
            "{file} was formatted"
        );
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o640, "{file}: mode {mode:o}");
    }
}

#[test]
fn the_compiled_config_names_the_git_commit_it_came_from() {
    let dir = temp();
    copy_example(dir.path());
    let commit = git_commit_all(dir.path(), "policy");
    assert_eq!(
        kai_policy(dir.path(), &["build", "--out", "dist"]).status,
        0
    );
    let config: Value = serde_json::from_slice(
        &std::fs::read(dir.path().join("dist/scheduler-config.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(config["source"]["revision"], commit.as_str());
    assert_eq!(config["source"]["dirty"], false);
    let digest = config["digest"].clone();
    assert!(digest.as_str().unwrap().starts_with("sha256:"));

    write_files(
        dir.path(),
        &[(
            "policies/teams/llm.kdl",
            &std::fs::read_to_string(dir.path().join("policies/teams/llm.kdl"))
                .unwrap()
                .replace("quota=30", "quota=29"),
        )],
    );
    assert_eq!(
        kai_policy(dir.path(), &["build", "--out", "dist"]).status,
        0
    );
    let edited: Value = serde_json::from_slice(
        &std::fs::read(dir.path().join("dist/scheduler-config.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(
        edited["source"]["dirty"], true,
        "uncommitted policy edits are flagged"
    );
    assert_ne!(edited["digest"], digest);
}

#[test]
fn schema_prints_what_schemas_holds() {
    let run = kai_policy(&repo_root(), &["schema"]);
    assert_eq!(run.status, 0);
    let all: Value = serde_json::from_str(&run.stdout).unwrap();
    for name in ["compiled-policy.schema.json", "scenario.schema.json"] {
        let committed: Value = serde_json::from_str(
            &std::fs::read_to_string(repo_root().join("schemas").join(name)).unwrap(),
        )
        .unwrap();
        assert_eq!(all[name], committed, "{name}");
    }
}

/// A command line clap refuses still gives a script asking for a machine-readable format one
/// document on stdout: the KP0000 failure, its file the command line, its column the argument
/// refused. A human format, or a format clap refuses, prints nothing there.
#[test]
fn a_refused_command_line_with_a_machine_format_prints_one_document() {
    let dir = temp();
    let run = kai_policy(dir.path(), &["check", "--bogus", "--format", "json"]);
    assert_eq!(run.status, 2, "{run:?}");
    assert!(
        run.stderr.contains("unexpected argument '--bogus'"),
        "{run:?}"
    );
    let doc: Value = serde_json::from_str(&run.stdout).expect("one JSON document");
    let d = &doc["diagnostics"][0];
    assert_eq!(d["code"], "KP0000");
    assert_eq!(d["file"], "command line");
    assert_eq!(d["message"], "unexpected argument '--bogus' found");
    // `kai-policy check ` is 17 characters: `--bogus` starts at column 18.
    assert_eq!(
        (d["line"].as_u64(), d["column"].as_u64()),
        (Some(1), Some(18))
    );
    assert_eq!(doc["summary"]["errors"], 1);

    // The value a flag lacks, in a report command's JSON; and `--format=` written as one.
    let run = kai_policy(dir.path(), &["explain", "--format=json", "--scenario"]);
    assert_eq!(run.status, 2, "{run:?}");
    let doc: Value = serde_json::from_str(&run.stdout).expect("one JSON document");
    // `kai-policy explain --format=json ` is 33 characters.
    assert_eq!(doc["diagnostics"][0]["column"], 34, "{doc}");

    let run = kai_policy(dir.path(), &["check", "--bogus", "--format", "github"]);
    assert!(
        run.stdout
            .starts_with("::error file=command line,line=1,col=18,"),
        "{run:?}"
    );
    for args in [
        &["check", "--bogus"][..],
        &["check", "--bogus", "--format", "human"],
        &["check", "--format", "jsn"],
    ] {
        let run = kai_policy(dir.path(), args);
        assert_eq!((run.status, run.stdout.as_str()), (2, ""), "{args:?}");
    }
}

/// A CI step that uploads `--format json|sarif|github` output gets one valid document even when
/// the command cannot run (exit 2), with the failure as a diagnostic naming the path.
#[test]
fn machine_formats_print_one_document_also_when_the_command_cannot_run() {
    let dir = temp();
    for format in ["json", "sarif"] {
        let run = kai_policy(dir.path(), &["check", "no-such-folder", "--format", format]);
        assert_eq!(run.status, 2, "{run:?}");
        let doc: Value = serde_json::from_str(&run.stdout).expect("one JSON document");
        let text = doc.to_string();
        assert!(
            text.contains("KP0000") && text.contains("no-such-folder"),
            "{text}"
        );
    }
    let run = kai_policy(
        dir.path(),
        &["check", "no-such-folder", "--format", "github"],
    );
    assert_eq!(run.status, 2);
    assert!(
        run.stdout
            .starts_with("::error file=no-such-folder,line=1,col=1,")
            && run
                .stdout
                .contains("title=KP0000::cannot read no-such-folder"),
        "{}",
        run.stdout
    );

    // build with an output folder reports on stdout, as check does: a failed write joins the
    // policy's own diagnostics in the one document there. (This test expected stderr until the
    // folder case was told apart from `--out -`, where stdout is the YAML stream: a CI step's
    // `--format sarif > results.sarif` got an empty file.)
    copy_example(dir.path());
    std::fs::write(dir.path().join("dist"), "a file, not a folder").unwrap();
    let run = kai_policy(
        dir.path(),
        &["build", "--out", "dist/out", "--format", "json"],
    );
    assert_eq!(run.status, 2, "{run:?}");
    let doc: Value = serde_json::from_str(&run.stdout).expect("one JSON document on stdout");
    assert_eq!(doc["diagnostics"][0]["code"], "KP0000");
    assert_eq!(doc["diagnostics"][0]["file"], "dist/out");
    let run = kai_policy(
        dir.path(),
        &["build", "nowhere", "--out", "x", "--format", "sarif"],
    );
    assert_eq!(run.status, 2);
    let log: Value = serde_json::from_str(&run.stdout).expect("one SARIF document on stdout");
    assert_eq!(log["runs"][0]["results"][0]["ruleId"], "KP0000");
}

/// KP0013 is reported on the parent, but the pull request changed a child in another file: that
/// file gets an annotation too.
#[test]
fn github_annotates_every_file_a_diagnostic_names() {
    let dir = temp();
    write_files(
        dir.path(),
        &[
            (
                "policies/departments.kdl",
                "queue \"research\" {\n    gpu quota=10\n}\n",
            ),
            (
                "policies/teams/llm.kdl",
                "queue \"llm\" parent=\"research\" {\n    gpu quota=12\n    namespaces \"llm\"\n}\n",
            ),
        ],
    );
    let run = kai_policy(dir.path(), &["check", "--format", "github"]);
    assert_eq!(run.status, 1, "{run:?}");
    let files: Vec<&str> = run
        .stdout
        .lines()
        .filter(|l| l.contains("KP0013"))
        .filter_map(|l| l.split("file=").nth(1)?.split(',').next())
        .collect();
    assert!(
        files.contains(&"policies/departments.kdl"),
        "{}",
        run.stdout
    );
    assert!(files.contains(&"policies/teams/llm.kdl"), "{}", run.stdout);
}

#[test]
fn denied_warnings_say_that_is_why_the_run_fails() {
    let dir = temp();
    write_files(
        dir.path(),
        &[("policies/a.kdl", "queue \"idle\" { gpu quota=1 }\n")],
    );
    let run = kai_policy(dir.path(), &["check", "--deny-warnings"]);
    assert_eq!(run.status, 1);
    assert!(
        run.stderr.contains("failing because warnings are denied"),
        "{}",
        run.stderr
    );
    let run = kai_policy(dir.path(), &["build", "--deny-warnings", "--out", "dist"]);
    assert_eq!(run.status, 1);
    assert!(
        run.stderr.contains("failing because warnings are denied"),
        "{}",
        run.stderr
    );
    let clean = kai_policy(dir.path(), &["check"]);
    assert!(!clean.stderr.contains("denied"), "{}", clean.stderr);
}

/// A policy file cannot drive the terminal: control characters from it (in a string, or raw in
/// the file) come out as visible escapes in every format.
#[test]
fn control_characters_from_a_policy_are_escaped_in_every_output() {
    let dir = temp();
    write_files(
        dir.path(),
        &[
            (
                "policies/a.kdl",
                "queue \"evil\\u{1b}[2J\" { gpu quota=1; namespaces \"a\"; }\n",
            ),
            (
                "policies/b.kdl",
                "queue \"b\" { gpu quota=1; namespaces \"b\"; }\n// \u{1b}]0;pwned\u{7}\u{9b}31m\n",
            ),
        ],
    );
    for format in ["human", "json", "github", "sarif"] {
        let run = kai_policy(dir.path(), &["check", "--format", format]);
        assert_eq!(run.status, 1, "{format}: {run:?}");
        for c in ['\u{1b}', '\u{7}', '\u{9b}'] {
            assert!(
                !run.stdout.contains(c),
                "{format} prints {c:?} raw:\n{}",
                run.stdout
            );
        }
    }
    let human = kai_policy(dir.path(), &["check"]);
    assert!(human.stdout.contains("evil\\u{1b}[2J"), "{}", human.stdout);
}

/// Symbolic links to files and folders inside the policy are followed (a loop is read once and
/// reported), a broken one is reported by name, and `fmt` rewrites the file behind a link.
#[cfg(unix)]
#[test]
fn symlinked_files_and_folders_are_followed_and_skipped_paths_reported() {
    use std::os::unix::fs::symlink;
    let dir = temp();
    write_files(
        dir.path(),
        &[
            (
                "shared/teams/llm.kdl",
                "queue   \"llm\" {  gpu quota=1 limit=0.5; namespaces \"llm\" }\n",
            ),
            (
                "shared/vision.kdl",
                "queue \"vision\" { gpu quota=1; namespaces \"vision\" }\n",
            ),
            (
                "policies/cluster.kdl",
                "cluster \"c\" { capacity gpu=10 }\n",
            ),
        ],
    );
    let p = dir.path().join("policies");
    symlink(dir.path().join("shared/teams"), p.join("teams")).unwrap();
    symlink(dir.path().join("shared/vision.kdl"), p.join("vision.kdl")).unwrap();
    symlink("gone.kdl", p.join("broken.kdl")).unwrap();
    symlink(".", dir.path().join("shared/teams/loop")).unwrap();
    let run = kai_policy(dir.path(), &["check", "--format", "json"]);
    assert_eq!(run.status, 1, "{run:?}");
    let doc: Value = serde_json::from_str(&run.stdout).unwrap();
    let found: Vec<(String, String)> = doc["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            (
                d["code"].as_str().unwrap().into(),
                d["file"].as_str().unwrap().into(),
            )
        })
        .collect();
    assert!(
        found.contains(&("KP0012".into(), "policies/teams/llm.kdl".into())),
        "{found:?}"
    );
    assert!(
        found.contains(&("KP0025".into(), "policies/broken.kdl".into())),
        "{found:?}"
    );
    assert!(
        found.contains(&("KP0025".into(), "policies/teams/loop".into())),
        "{found:?}"
    );

    std::fs::remove_file(p.join("broken.kdl")).unwrap();
    assert_eq!(kai_policy(dir.path(), &["fmt"]).status, 0);
    assert!(
        std::fs::symlink_metadata(p.join("teams"))
            .unwrap()
            .file_type()
            .is_symlink()
    );
    let formatted = std::fs::read_to_string(dir.path().join("shared/teams/llm.kdl")).unwrap();
    assert!(formatted.starts_with("queue \"llm\" {\n"), "{formatted}");
}

/// The traps a team moving from KAI YAML falls into are named, with what was probably meant.
#[test]
fn silent_traps_are_reported_with_the_likely_intent() {
    let dir = temp();
    write_files(
        dir.path(),
        &[(
            "policies/a.kdl",
            "queue \"a\" {\n    gpu quota=2 limit=-1\n    cpu limit=0\n    memory quota=12\n    namespaces \"a\"\n}\nqueue \"b\" {\n    gpu quota=\"1Ki\"\n    namespaces \"b\"\n}\n",
        )],
    );
    let run = kai_policy(dir.path(), &["check"]);
    assert_eq!(run.status, 1, "{run:?}");
    for expected in [
        "KAI writes unlimited as -1; here write `limit=#inf`, or leave `limit` out",
        "cpu limit of 0, so it can never run a pod that asks for CPU",
        "drop the `cpu` line",
        "it is 12 bytes",
        "did you mean `quota=\"12Gi\"`",
        "GPUs are counted in devices",
    ] {
        assert!(
            run.stdout.contains(expected),
            "no `{expected}` in\n{}",
            run.stdout
        );
    }
}

/// docs/diagnostics.md: KP0000 names "the path" that could not be read. A folder deep inside the
/// policy that cannot be read is that folder, not the policy root (`cannot read ud2` sent the
/// user to the wrong place), and an unreadable file is the `file` of the diagnostic, so a GitHub
/// or SARIF annotation lands on it.
#[test]
fn an_unreadable_folder_or_file_is_named_not_the_policy_root() {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = temp();
    copy_example(dir.path());
    let cluster = std::fs::read_to_string(dir.path().join("policies/cluster.kdl")).unwrap();
    let llm = std::fs::read_to_string(dir.path().join("policies/teams/llm.kdl")).unwrap();
    write_files(
        dir.path(),
        &[("ud2/cluster.kdl", &cluster), ("ud2/a/b/llm.kdl", &llm)],
    );
    let mode = |path: &str, mode: u32| {
        std::fs::set_permissions(dir.path().join(path), std::fs::Permissions::from_mode(mode))
            .unwrap();
    };
    mode("ud2/a/b", 0o000);
    mode("policies/teams/llm.kdl", 0o000);
    // Unlocked again at the end, so that a user other than root can remove the folder.
    let unlock = || {
        mode("ud2/a/b", 0o755);
        mode("policies/teams/llm.kdl", 0o644);
    };

    let Some(run) = kai_policy_unprivileged(dir.path(), &["check", "ud2", "--format", "json"])
    else {
        eprintln!("skipped: no user that file permissions apply to (root without setpriv)");
        unlock();
        return;
    };
    assert_eq!(run.status, 2, "{run:?}");
    let doc: Value = serde_json::from_str(&run.stdout).expect("one JSON document");
    let d = &doc["diagnostics"][0];
    assert_eq!(d["code"], "KP0000", "{doc}");
    assert_eq!(d["file"], "ud2/a/b", "{doc}");
    assert!(
        d["message"]
            .as_str()
            .unwrap()
            .starts_with("cannot read ud2/a/b: "),
        "{doc}"
    );
    let run = kai_policy_unprivileged(dir.path(), &["check", "ud2"]).unwrap();
    assert_eq!(run.status, 2, "{run:?}");
    assert!(
        run.stderr.starts_with("error: cannot read ud2/a/b: "),
        "{}",
        run.stderr
    );

    let run =
        kai_policy_unprivileged(dir.path(), &["check", "policies", "--format", "github"]).unwrap();
    assert_eq!(run.status, 2, "{run:?}");
    assert!(
        run.stdout
            .starts_with("::error file=policies/teams/llm.kdl,line=1,col=1,"),
        "{}",
        run.stdout
    );
    unlock();
}

/// docs/diagnostics.md: every problem has "a help line that says how to fix it", and KP0000 says
/// to check the path and its permissions. The JSON form has that help; the human form printed
/// only `error: cannot read …`. It prints the same help now.
#[test]
fn a_command_that_cannot_run_says_how_to_fix_it_in_human_form_too() {
    let dir = temp();
    let json = kai_policy(dir.path(), &["check", "nonexistent", "--format", "json"]);
    let doc: Value = serde_json::from_str(&json.stdout).expect("one JSON document");
    let help = doc["diagnostics"][0]["help"]
        .as_str()
        .expect("a help")
        .to_string();

    let run = kai_policy(dir.path(), &["check", "nonexistent"]);
    assert_eq!(run.status, 2, "{run:?}");
    assert!(
        run.stderr.starts_with("error: cannot read nonexistent: "),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr.contains(&format!("\nhelp: {help}\n")),
        "{}",
        run.stderr
    );

    // `--out` must be a folder: a file in its place is said, with what to do.
    copy_example(dir.path());
    std::fs::write(dir.path().join("afile"), "").unwrap();
    let run = kai_policy(dir.path(), &["build", "--out", "afile"]);
    assert_eq!(run.status, 2, "{run:?}");
    assert!(
        run.stderr.contains("error: cannot write afile"),
        "{}",
        run.stderr
    );
    assert!(run.stderr.contains("\nhelp: "), "{}", run.stderr);
    assert!(run.stderr.contains("--out"), "{}", run.stderr);
}
