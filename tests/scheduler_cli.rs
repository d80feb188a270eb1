//! `kai-scheduler simulate` and `bench`, run as a user would: the example cluster, the JSON
//! contract of `cli.md`, and the exit statuses (0 ok, 1 policy errors, 2 cannot run).

use std::io::Read;
use std::process::{Command, Stdio};

use kai_policy_e2e::*;
use serde_json::Value;

fn simulate_example(extra: &[&str]) -> Run {
    let mut args = vec![
        "simulate",
        "--policy",
        "policies",
        "--cluster",
        "examples/cluster.yaml",
    ];
    args.extend_from_slice(extra);
    kai_scheduler(&repo_root(), &args)
}

#[test]
fn the_example_shows_reclaim_a_whole_gang_and_preemption() {
    let run = simulate_example(&[]);
    assert_eq!(run.status, 0, "{run:?}");
    assert_eq!(run.stderr, "", "no notes for the example");
    let out = &run.stdout;
    for line in [
        "evict     research-vision/vit-sweep-1 on gpu-01: reclaimed by queue llm-team",
        "nominate  research-llm/pretrain-7b-0 → gpu-01",
        "evict     ds-inference/eval-3 on gpu-12: preempted by ds-inference/chat-serve-5",
        "bind      research-llm/pretrain-7b-0 → gpu-01",
        "bind      research-llm/pretrain-7b-2 → gpu-03",
        "bind      ds-inference/chat-serve-5 → gpu-12",
    ] {
        assert!(out.contains(line), "missing `{line}` in:\n{out}");
    }
    insta::assert_snapshot!("simulate-example-human", run.stdout);
}

#[test]
fn the_json_has_the_documented_shape() {
    let run = simulate_example(&["--format", "json"]);
    assert_eq!(run.status, 0, "{run:?}");
    let doc: Value = serde_json::from_str(&run.stdout).expect("one JSON document");
    let keys: Vec<&String> = doc.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["cycles", "pods", "queues"]);
    let cycles = doc["cycles"].as_array().unwrap();
    assert!(!cycles.is_empty());
    for decision in cycles
        .iter()
        .flat_map(|c| c["decisions"].as_array().unwrap())
    {
        let d = decision.as_object().unwrap();
        let keys: Vec<&String> = d.keys().collect();
        assert_eq!(keys, ["action", "node", "pod", "reason"], "{decision}");
        let action = d["action"].as_str().unwrap();
        assert!(["bind", "evict", "pending"].contains(&action), "{action}");
        assert!(d["pod"].as_str().unwrap().contains('/'), "NS/NAME");
        if action != "pending" {
            assert!(d["node"].is_string(), "{decision}");
        }
        if action == "bind" {
            assert!(d["reason"].is_null());
        } else {
            assert!(d["reason"].is_string(), "{decision}");
        }
    }
    let pods = doc["pods"].as_object().unwrap();
    for (key, pod) in pods {
        let status = pod["status"].as_str().unwrap();
        assert!(["bound", "pending", "evicted"].contains(&status), "{key}");
        assert_eq!(pod["node"].is_string(), status == "bound", "{key}: {pod}");
    }
    assert_eq!(pods["research-llm/pretrain-7b-1"]["status"], "bound");
    assert_eq!(pods["research-vision/vit-sweep-2"]["status"], "evicted");
    assert_eq!(pods["ds-inference/eval-3"]["status"], "evicted");
    assert_eq!(pods["research-vision/vit-sweep-5"]["node"], "gpu-05");
    let queues = doc["queues"].as_object().unwrap();
    assert_eq!(queues.len(), 8, "every queue, parents included");
    let llm = &queues["llm-team"];
    assert_eq!(llm["allocated"]["gpu"], 26, "GPU in devices");
    assert_eq!(llm["allocated"]["cpu"], 200_000, "CPU in millicores");
    assert_eq!(llm["allocated"]["memory"], 1600u64 << 30, "memory in bytes");
    for kind in ["gpu", "cpu", "memory"] {
        assert!(llm["fair_share"][kind].is_number(), "{kind}");
    }
    insta::assert_snapshot!("simulate-example-json", run.stdout);
}

#[test]
fn cycles_bounds_the_run_and_a_nominated_pod_says_where() {
    let run = simulate_example(&["--format", "json", "--cycles", "1"]);
    assert_eq!(run.status, 0, "{run:?}");
    let doc: Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(doc["cycles"].as_array().unwrap().len(), 1);
    let gang_pod = &doc["pods"]["research-llm/pretrain-7b-0"];
    assert_eq!(gang_pod["status"], "pending");
    assert_eq!(gang_pod["nominated"], "gpu-01");
    assert!(gang_pod["node"].is_null());

    let run = simulate_example(&["--cycles", "0"]);
    assert_eq!(run.status, 2, "{run:?}");
}

#[test]
fn a_policy_with_errors_prints_its_diagnostics_and_exits_1() {
    let dir = temp();
    write_files(
        dir.path(),
        &[
            ("policy/bad.kdl", "queue \"a\" {\n    gpu quota=-1\n}\n"),
            ("cluster.yaml", "apiVersion: v1\nkind: List\nitems: []\n"),
        ],
    );
    let run = kai_scheduler(
        dir.path(),
        &[
            "simulate",
            "--policy",
            "policy",
            "--cluster",
            "cluster.yaml",
        ],
    );
    assert_eq!(run.status, 1, "{run:?}");
    assert_eq!(run.stdout, "");
    assert!(run.stderr.contains("KP0"), "{}", run.stderr);
    assert!(run.stderr.contains("bad.kdl"), "{}", run.stderr);
}

#[test]
fn an_unreadable_cluster_file_exits_2_and_an_unreadable_object_is_skipped_with_a_note() {
    let dir = temp();
    copy_example(dir.path());
    let run = kai_scheduler(dir.path(), &["simulate", "--cluster", "missing.yaml"]);
    assert_eq!(run.status, 2, "{run:?}");
    assert!(
        run.stderr
            .starts_with("error: missing.yaml: cannot read it:"),
        "{}",
        run.stderr
    );

    write_files(
        dir.path(),
        &[(
            "cluster.yaml",
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: nb\n  namespace: ds-analytics\n  annotations: {gpu-fraction: \"1.5\"}\nspec:\n  schedulerName: kai-scheduler\n  containers: [{name: c}]\n---\napiVersion: v1\nkind: Node\nmetadata: {name: gpu-01}\nstatus:\n  allocatable: {nvidia.com/gpu: \"8\", cpu: \"64\", memory: 512Gi}\n",
        )],
    );
    // One object that cannot be read no longer rejects the file (a real cluster's dump always
    // holds something odd): it is skipped, with a note naming it and the field, and the rest runs.
    // (The file had no node until a file with nothing usable came to be refused, below.)
    let run = kai_scheduler(dir.path(), &["simulate", "--cluster", "cluster.yaml"]);
    assert_eq!(run.status, 0, "{run:?}");
    assert_eq!(
        run.stderr,
        "note: cluster.yaml:1:1: skipped Pod ds-analytics/nb: annotation gpu-fraction: `1.5` is not a fraction of one GPU in (0, 1], like \"0.5\"\n"
    );

    let run = kai_scheduler(
        dir.path(),
        &[
            "simulate",
            "--policy",
            "nowhere",
            "--cluster",
            "cluster.yaml",
        ],
    );
    assert_eq!(run.status, 2, "{run:?}");
    assert!(run.stderr.contains("nowhere"), "{}", run.stderr);
}

#[test]
fn a_cluster_file_with_no_nodes_and_no_pods_is_refused() {
    let dir = temp();
    copy_example(dir.path());
    for (name, text) in [("empty.yaml", ""), ("other.yaml", "foo: bar\n")] {
        write_files(dir.path(), &[(name, text)]);
        let run = kai_scheduler(dir.path(), &["simulate", "--cluster", name]);
        assert_eq!(run.status, 2, "{name}: {run:?}");
        assert!(
            run.stderr
                .contains(&format!("{name} holds no nodes and no pods"))
                && run.stderr.contains("kubectl get nodes,pods"),
            "{name}: {}",
            run.stderr
        );
    }
}

#[test]
fn a_refused_command_line_with_format_json_prints_one_document() {
    let dir = temp();
    let run = kai_scheduler(
        dir.path(),
        &["simulate", "--format", "json", "--cluster", "x", "--bogus"],
    );
    assert_eq!(run.status, 2, "{run:?}");
    let doc: Value = serde_json::from_str(&run.stdout).expect("one JSON document");
    let d = &doc["diagnostics"][0];
    assert_eq!(
        (d["code"].as_str(), d["file"].as_str()),
        (Some("KP0000"), Some("command line"))
    );
    // `kai-scheduler simulate --format json --cluster x ` is 49 characters.
    assert_eq!(d["column"], 50, "{doc}");
}

#[test]
fn skipped_objects_are_noted_on_stderr() {
    let dir = temp();
    copy_example(dir.path());
    write_files(
        dir.path(),
        &[(
            "cluster.yaml",
            // The ConfigMap starts on line 7, after the node's five lines and `---`.
            "apiVersion: v1\nkind: Node\nmetadata: {name: gpu-01}\nstatus:\n  allocatable: {nvidia.com/gpu: \"8\", cpu: \"64\", memory: 512Gi}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings, namespace: default}\n",
        )],
    );
    let run = kai_scheduler(
        dir.path(),
        &["simulate", "--cluster", "cluster.yaml", "--format", "json"],
    );
    assert_eq!(run.status, 0, "{run:?}");
    assert_eq!(
        run.stderr,
        "note: cluster.yaml:7:1: skipped ConfigMap default/settings: v1 ConfigMap is not a Node, Pod or scheduling.run.ai/v2alpha2 PodGroup\n"
    );
    let doc: Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(doc["pods"], serde_json::json!({}));
}

#[test]
fn now_sets_the_clock_and_cannot_precede_the_file() {
    // The file's last event is at 10:00; an hour later the same story plays out.
    let run = simulate_example(&["--now", "2026-11-21T11:00:00Z"]);
    assert_eq!(run.status, 0, "{run:?}");
    assert!(
        run.stdout
            .contains("bind      research-llm/pretrain-7b-0 → gpu-01")
    );
    let run = simulate_example(&["--now", "2026-11-21T08:00:00Z"]);
    assert_eq!(run.status, 2, "{run:?}");
    assert!(
        run.stderr
            .contains("is before the latest creation or start time"),
        "{}",
        run.stderr
    );
    let run = simulate_example(&["--now", "yesterday"]);
    assert_eq!(run.status, 2, "{run:?}");
}

#[test]
fn the_cluster_can_come_from_standard_input() {
    let text = std::fs::read(repo_root().join("examples/cluster.yaml")).unwrap();
    let run = run_binary(
        "kai-scheduler",
        &repo_root(),
        &["simulate", "--cluster", "-", "--format", "json"],
        Some(&text),
    );
    assert_eq!(run.status, 0, "{run:?}");
    let from_file = simulate_example(&["--format", "json"]);
    assert_eq!(run.stdout, from_file.stdout);
}

#[test]
fn a_closed_pipe_is_not_a_crash() {
    let mut child = Command::new(binary("kai-scheduler"))
        .args([
            "simulate",
            "--policy",
            "policies",
            "--cluster",
            "examples/cluster.yaml",
        ])
        .current_dir(repo_root())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    let status = child.wait().unwrap();
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(status.code(), Some(0), "{stderr}");
}

#[test]
fn bench_prints_its_report() {
    let run = kai_scheduler(
        &repo_root(),
        &[
            "bench", "--nodes", "20", "--pods", "40", "--queues", "3", "--cycles", "1", "--format",
            "json",
        ],
    );
    assert_eq!(run.status, 0, "{run:?}");
    let doc: Value = serde_json::from_str(&run.stdout).expect("one JSON object");
    for key in [
        "nodes",
        "pods",
        "queues",
        "cycle_ms",
        "bound",
        "pods_per_second",
        "first_fit_ms",
        "decisions",
    ] {
        assert!(doc.get(key).is_some(), "{key} in {doc}");
    }
    assert_eq!(doc["nodes"], 20);
}

#[test]
fn the_compiled_config_and_the_policy_folder_give_identical_decisions() {
    let dir = temp();
    copy_example(dir.path());
    let build = kai_policy(dir.path(), &["build", "policies", "--out", "dist"]);
    assert_eq!(build.status, 0, "{build:?}");
    let config = dir.path().join("dist/scheduler-config.json");
    let cluster = repo_root().join("examples/cluster.yaml");
    let cluster = cluster.to_str().unwrap();
    let from_folder = simulate_example(&["--format", "json"]);
    let from_config = kai_scheduler(
        dir.path(),
        &[
            "simulate",
            "--config",
            config.to_str().unwrap(),
            "--cluster",
            cluster,
            "--format",
            "json",
        ],
    );
    assert_eq!(from_config.status, 0, "{from_config:?}");
    assert!(
        from_folder.stdout.contains("\"bind\""),
        "the example binds pods"
    );
    assert_eq!(from_config.stdout, from_folder.stdout);

    // A config edited after the build is refused, naming the file and the fix.
    let text = std::fs::read_to_string(&config).unwrap();
    let edited = text.replacen("\"priority\": 100", "\"priority\": 101", 1);
    assert_ne!(edited, text, "the example has a queue of priority 100");
    std::fs::write(&config, edited).unwrap();
    let tampered = kai_scheduler(
        dir.path(),
        &[
            "simulate",
            "--config",
            config.to_str().unwrap(),
            "--cluster",
            cluster,
        ],
    );
    assert_eq!(tampered.status, 2, "{tampered:?}");
    assert!(
        tampered
            .stderr
            .contains("scheduler-config.json: the digest sha256:")
            && tampered.stderr.contains("rebuild it"),
        "{}",
        tampered.stderr
    );
    assert!(tampered.stdout.is_empty());

    let both = kai_scheduler(
        dir.path(),
        &[
            "simulate",
            "--config",
            "x.json",
            "--policy",
            "policies",
            "--cluster",
            cluster,
        ],
    );
    assert_eq!(
        both.status, 2,
        "--config and --policy exclude each other: {both:?}"
    );
}

/// cli.md: `simulate --format json` prints one JSON document; the README promises one valid
/// document also when the command cannot run. So a failed run prints one too: the policy's
/// diagnostics as `kai-policy check --format json` prints them (exit 1), or why it could not
/// run as KP0000 naming the path (exit 2). The human messages stay on stderr.
#[test]
fn simulate_json_is_one_document_also_when_it_fails() {
    let dir = temp();
    copy_example(dir.path());
    write_files(
        dir.path(),
        &[
            ("bad/a.kdl", "queue \"a\" {\n    gpu quota=-1\n}\n"),
            ("cluster.yaml", "apiVersion: v1\nkind: List\nitems: []\n"),
        ],
    );
    let document = |run: &Run| -> Value {
        serde_json::from_str(&run.stdout)
            .unwrap_or_else(|e| panic!("stdout is not one JSON document ({e}): {run:?}"))
    };
    let simulate = |policy: &str, cluster: &str| {
        kai_scheduler(
            dir.path(),
            &[
                "simulate",
                "--policy",
                policy,
                "--cluster",
                cluster,
                "--format",
                "json",
            ],
        )
    };
    let run = simulate("bad", "cluster.yaml");
    assert_eq!(run.status, 1, "{run:?}");
    let doc = document(&run);
    assert!(doc["summary"]["errors"].as_u64() >= Some(1), "{doc}");
    assert_eq!(doc["diagnostics"][0]["file"], "bad/a.kdl", "{doc}");
    assert!(run.stderr.contains("bad/a.kdl"), "{}", run.stderr);

    for (policy, cluster, file) in [
        ("policies", "nope.yaml", "nope.yaml"),
        ("nowhere", "cluster.yaml", "nowhere"),
    ] {
        let run = simulate(policy, cluster);
        assert_eq!(run.status, 2, "{run:?}");
        let doc = document(&run);
        let d = &doc["diagnostics"][0];
        assert_eq!(d["code"], "KP0000", "{doc}");
        assert_eq!(d["file"], file, "{doc}");
        assert!(d["help"].is_string(), "{doc}");
        assert!(run.stderr.contains("error: "), "{}", run.stderr);
        assert!(run.stderr.contains(file), "{}", run.stderr);
    }
}
