//! `kai-scheduler run` as an operator runs it: pointed at a Git checkout and at a `file://`
//! remote, watched over HTTP (`/readyz`, `/policy`, `/metrics`), stopped with SIGTERM.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use kai_policy_e2e::*;
use serde_json::{Value, json};

#[path = "fake_apiserver.rs"]
mod fake_apiserver;
use fake_apiserver::{FakeApi, Seen};

/// A running daemon: its HTTP address and its log lines (JSON), read on a thread.
struct Daemon {
    child: Child,
    address: String,
    logs: mpsc::Receiver<String>,
    seen: Vec<String>,
}

impl Daemon {
    fn start(cwd: &Path, repo: &str, extra: &[&str]) -> Daemon {
        Daemon::start_on(cwd, repo, &repo_root().join("examples/cluster.yaml"), extra)
    }

    fn start_on(cwd: &Path, repo: &str, cluster: &Path, extra: &[&str]) -> Daemon {
        let cluster = cluster.to_str().unwrap();
        let args: Vec<&str> = ["--cluster", cluster]
            .iter()
            .chain(extra)
            .copied()
            .collect();
        Daemon::spawn(cwd, repo, &args)
    }

    /// `kai-scheduler run --policy-repo REPO` with `args`, logging JSON, its HTTP server on a
    /// free port, a cycle every 200 ms.
    fn spawn(cwd: &Path, repo: &str, args: &[&str]) -> Daemon {
        let mut child = Command::new(binary("kai-scheduler"))
            .args(["run", "--policy-repo", repo])
            .args([
                "--listen",
                "127.0.0.1:0",
                "--period",
                "200ms",
                "--log-format",
                "json",
            ])
            .args(["--state-dir", "state"])
            .args(args)
            .current_dir(cwd)
            .env_remove("KUBECONFIG")
            .env_remove("POD_NAMESPACE")
            .env_remove("POD_NAME")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("kai-scheduler runs");
        let stderr = child.stderr.take().unwrap();
        let (tx, logs) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut daemon = Daemon {
            child,
            address: String::new(),
            logs,
            seen: Vec::new(),
        };
        let line = daemon.wait_log(|l| l["fields"]["message"] == "listening");
        daemon.address = line["fields"]["address"].as_str().unwrap().to_string();
        daemon
    }

    /// Waits (at most 20 s) for a log line matching `pred`.
    fn wait_log(&mut self, pred: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + Duration::from_secs(20);
        for seen in &self.seen {
            let v: Value = serde_json::from_str(seen).unwrap_or(Value::Null);
            if pred(&v) {
                return v;
            }
        }
        while let Some(left) = deadline.checked_duration_since(Instant::now()) {
            match self.logs.recv_timeout(left) {
                Ok(line) => {
                    self.seen.push(line.clone());
                    let v: Value = serde_json::from_str(&line)
                        .unwrap_or_else(|e| panic!("a log line is JSON ({e}): {line}"));
                    if pred(&v) {
                        return v;
                    }
                }
                Err(_) => break,
            }
        }
        panic!("no such log line; seen:\n{}", self.seen.join("\n"));
    }

    /// `GET path`: status and body.
    fn get(&self, path: &str) -> (u16, String) {
        let mut stream = TcpStream::connect(&self.address).expect("the daemon listens");
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        write!(
            stream,
            "GET {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n"
        )
        .unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).unwrap();
        let (head, body) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
        let status = head
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        (status, body.to_string())
    }

    fn policy(&self) -> Value {
        let (status, body) = self.get("/policy");
        assert_eq!(status, 200, "{body}");
        serde_json::from_str(&body).unwrap()
    }

    /// Waits (at most 20 s) until `/policy` satisfies `pred`; returns it and how long it took.
    fn wait_policy(&self, pred: impl Fn(&Value) -> bool) -> (Value, Duration) {
        let started = Instant::now();
        loop {
            let p = self.policy();
            if pred(&p) {
                return (p, started.elapsed());
            }
            assert!(
                started.elapsed() < Duration::from_secs(20),
                "gave up waiting; /policy is {p}"
            );
            std::thread::sleep(Duration::from_millis(25));
        }
    }

    /// SIGTERM, then the exit status (at most 20 s).
    fn terminate(mut self) -> (i32, Vec<String>) {
        let pid = self.child.id().to_string();
        let sent = Command::new("kill").args(["-TERM", &pid]).status().unwrap();
        assert!(sent.success());
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                while let Ok(line) = self.logs.recv_timeout(Duration::from_secs(1)) {
                    self.seen.push(line);
                }
                return (status.code().unwrap_or(-1), std::mem::take(&mut self.seen));
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                panic!(
                    "no exit 20 s after SIGTERM; logs:\n{}",
                    self.seen.join("\n")
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn metric(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

/// git-sync's layout: each commit checked out as a new worktree under `.worktrees`, the link
/// (`--link`) swapped to it by a rename, the old worktree deleted after. The link is given as
/// itself, with a trailing slash, and through a second link.
#[test]
fn a_git_sync_link_swapped_to_a_new_worktree_is_followed_at_once_every_time() {
    for given in ["git/policy", "git/policy/", "current"] {
        let dir = temp();
        let root = dir.path().join("git");
        let worktree = |name: &str, extra: Option<&str>| -> (std::path::PathBuf, String) {
            let at = root.join(".worktrees").join(name);
            std::fs::create_dir_all(&at).unwrap();
            copy_example(&at);
            if let Some(text) = extra {
                std::fs::write(at.join("policies/zz.kdl"), text).unwrap();
            }
            let commit = git_commit_all(&at, name);
            (at, commit)
        };
        let swap = |to: &Path| {
            let staged = root.join("policy.tmp");
            std::os::unix::fs::symlink(to, &staged).unwrap();
            std::fs::rename(&staged, root.join("policy")).unwrap();
        };
        let (first, one) = worktree("a1", None);
        swap(&first);
        std::os::unix::fs::symlink(root.join("policy"), dir.path().join("current")).unwrap();
        // A poll far longer than the test: only the watch can see the swaps.
        let daemon = Daemon::start(dir.path(), given, &["--poll", "10m"]);
        daemon.wait_policy(|p| p["commit"] == one.as_str());
        let mut previous = first;
        for (name, text) in [
            ("b2", "// second\n"),
            ("c3", "// third\n"),
            ("d4", "// fourth\n"),
        ] {
            let (next, commit) = worktree(name, Some(text));
            swap(&next);
            std::fs::remove_dir_all(&previous).unwrap();
            let (_, took) = daemon.wait_policy(|p| p["commit"] == commit.as_str());
            assert!(
                took < Duration::from_secs(5),
                "given {given}, the swap to {name} took {took:?}"
            );
            previous = next;
        }
    }
}

#[test]
fn a_watched_checkout_reloads_rejects_and_serves_metrics_then_stops_on_sigterm() {
    let dir = temp();
    let repo_dir = dir.path().join("repo");
    std::fs::create_dir_all(&repo_dir).unwrap();
    copy_example(&repo_dir);
    let first = git_commit_all(&repo_dir, "the example");
    let mut daemon = Daemon::start(dir.path(), repo_dir.to_str().unwrap(), &["--speed", "10"]);

    let (p, _) = daemon.wait_policy(|p| p["ready"] == true);
    assert_eq!(p["commit"], first.as_str());
    assert!(p["digest"].as_str().unwrap().starts_with("sha256:"));
    assert_eq!(p["source"]["kind"], "local");
    assert_eq!(daemon.get("/readyz").0, 200);
    assert_eq!(daemon.get("/healthz"), (200, "ok\n".to_string()));
    daemon.wait_log(|l| l["fields"]["message"] == "cycle");

    let (status, metrics) = daemon.get("/metrics");
    assert_eq!(status, 200);
    for family in [
        "kai_cycle_duration_seconds",
        "kai_decisions",
        "kai_evictions",
        "kai_policy_reloads",
        // (kai_pending_jobs and kai_pending_wait_seconds have series only while jobs wait.)
        "kai_queue_fair_share",
        "kai_queue_allocated",
        "kai_queue_quota",
        "kai_queue_limit",
        "kai_policy_info",
    ] {
        assert!(
            metrics.contains(&format!("# TYPE {family} ")),
            "{family} in\n{metrics}"
        );
    }
    // policies/departments.kdl: research has gpu quota=50 limit=80, memory quota="2400Gi".
    let research = |m: &str, r: &str| {
        metric(
            &metrics,
            &format!("kai_{m}{{queue=\"research\",resource=\"{r}\"}}"),
        )
    };
    assert_eq!(research("queue_quota", "gpu"), Some(50.0));
    assert_eq!(research("queue_limit", "gpu"), Some(80.0));
    assert_eq!(
        research("queue_quota", "memory"),
        Some(2400.0 * 1024f64.powi(3))
    );
    assert_eq!(
        metric(&metrics, "kai_policy_reloads_total{outcome=\"loaded\"}"),
        Some(1.0)
    );
    let info = format!(
        "kai_policy_info{{commit=\"{first}\",digest=\"{}\"}}",
        p["digest"].as_str().unwrap()
    );
    assert_eq!(metric(&metrics, &info), Some(1.0), "{metrics}");
    // Each step of the cycle has its own series beside the whole cycle's, one observation per
    // cycle so far (a scrape may fall between the two updates of one cycle).
    let cycles = metric(
        &metrics,
        "kai_cycle_duration_seconds_count{action=\"cycle\"}",
    )
    .expect("the whole cycle's series");
    for action in [
        "prepare",
        "fair-share",
        "allocate",
        "consolidation",
        "reclaim",
        "preempt",
        "stalegangeviction",
    ] {
        let steps = metric(
            &metrics,
            &format!("kai_cycle_duration_seconds_count{{action=\"{action}\"}}"),
        );
        assert!(
            steps.is_some_and(|n| n >= 1.0 && (cycles - n).abs() <= 1.0),
            "{action}: {steps:?} for {cycles} cycles in\n{metrics}"
        );
    }
    // The example's first cycle (as `simulate` prints it): vision-team's three sweep pods are
    // reclaimed for llm-team's gang, and eval-3 is preempted by chat-serve-5. Evicted pods then
    // terminate for 30 simulated seconds (3 s at --speed 10) and are never evicted twice.
    let evicted = |why: &str| {
        metric(
            &metrics,
            &format!("kai_evictions_total{{reason=\"{why}\"}}"),
        )
    };
    assert_eq!(
        (evicted("reclaim"), evicted("preempt")),
        (Some(3.0), Some(1.0)),
        "{metrics}"
    );
    assert_eq!(
        metric(&metrics, "kai_decisions_total{kind=\"evict\"}"),
        Some(4.0)
    );

    // A broken commit is rejected; the first policy stays active.
    std::fs::write(
        repo_dir.join("policies/zz.kdl"),
        "queue \"x\" { gpu quota=\"lots\" }\n",
    )
    .unwrap();
    let broken = git_commit_all(&repo_dir, "broken");
    let (p, _) = daemon.wait_policy(|p| p["rejected"]["commit"] == broken.as_str());
    assert_eq!(
        p["commit"],
        first.as_str(),
        "the running policy stays in force"
    );
    let diagnostics = &p["rejected"]["diagnostics"]["diagnostics"];
    assert!(
        diagnostics
            .as_array()
            .unwrap()
            .iter()
            .any(|d| d["file"].as_str().unwrap().ends_with("zz.kdl")),
        "{p}"
    );
    assert_eq!(daemon.get("/readyz").0, 200);

    // A later good commit takes effect.
    std::fs::write(repo_dir.join("policies/zz.kdl"), "// nothing yet\n").unwrap();
    let fixed = git_commit_all(&repo_dir, "fixed");
    let (_, took) = daemon.wait_policy(|p| p["commit"] == fixed.as_str());
    assert!(
        took < Duration::from_secs(5),
        "a watched commit took {took:?}"
    );

    let (status, logs) = daemon.terminate();
    assert_eq!(status, 0, "{}", logs.join("\n"));
    assert!(
        logs.iter().any(|l| l.contains("\"stopped\"")),
        "{}",
        logs.join("\n")
    );
    // The example enables time-based fairness: usage was recorded and persisted.
    let usage = std::fs::read_to_string(dir.path().join("state/usage.json")).unwrap();
    assert!(usage.contains("\"research\""), "{usage}");
}

#[test]
fn a_file_remote_without_a_compilable_policy_is_not_ready_until_one_is_pushed() {
    let dir = temp();
    let repo_dir = dir.path().join("repo");
    std::fs::create_dir_all(repo_dir.join("policies")).unwrap();
    std::fs::write(
        repo_dir.join("policies/a.kdl"),
        "queue \"a\" { gpu quota=\"lots\" }\n",
    )
    .unwrap();
    let broken = git_commit_all(&repo_dir, "broken from the start");
    let branch = git2::Repository::open(&repo_dir)
        .unwrap()
        .head()
        .unwrap()
        .shorthand()
        .unwrap()
        .to_string();
    let url = format!("file://{}", repo_dir.display());
    let mut daemon = Daemon::start(dir.path(), &url, &["--poll", "200ms", "--branch", &branch]);

    let (p, _) = daemon.wait_policy(|p| p["rejected"]["commit"] == broken.as_str());
    assert_eq!(p["ready"], false);
    let (status, body) = daemon.get("/readyz");
    assert_eq!(status, 503);
    assert!(
        body.starts_with("not ready: no compilable policy: commit "),
        "{body}"
    );
    let line = daemon.wait_log(|l| l["level"] == "ERROR");
    assert!(
        line["fields"]["message"]
            .as_str()
            .unwrap()
            .starts_with("not ready, scheduling nothing"),
        "{line}"
    );

    // (support's commit stages new and changed files only: the broken file is emptied, not removed.)
    std::fs::write(repo_dir.join("policies/a.kdl"), "// moved to the example\n").unwrap();
    copy_example(&repo_dir);
    let good = git_commit_all(&repo_dir, "the example");
    let (p, took) = daemon.wait_policy(|p| p["ready"] == true);
    assert_eq!(p["commit"], good.as_str());
    assert!(
        took < Duration::from_secs(5),
        "a pushed commit took {took:?}"
    );
    assert_eq!(daemon.get("/readyz").0, 200);
    let (status, logs) = daemon.terminate();
    assert_eq!(status, 0, "{}", logs.join("\n"));
}

const TWO_QUEUES: &str = r#"
queue "a" {
    gpu quota=4
    namespaces "a"
}
queue "b" {
    gpu quota=4
    namespaces "b"
}
"#;

/// One 8-GPU node; queue b runs one pod (for a simulated day) and waits for one that can never
/// fit (16 GPUs).
const CLUSTER: &str = r#"
apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: Node
  metadata: {name: n1, creationTimestamp: '2026-11-21T08:00:00Z'}
  status:
    allocatable: {cpu: '64', memory: 512Gi, nvidia.com/gpu: '8', pods: '110'}
- apiVersion: v1
  kind: Pod
  metadata:
    name: run
    namespace: b
    creationTimestamp: '2026-11-21T08:00:00Z'
    labels: {kai.scheduler/queue: b}
    annotations: {kai-policy.io/simulated-duration: 24h}
  spec:
    schedulerName: kai-scheduler
    nodeName: n1
    containers:
    - name: main
      resources: {limits: {nvidia.com/gpu: '1'}, requests: {cpu: '1', memory: 4Gi}}
  status: {phase: Running, startTime: '2026-11-21T08:00:00Z'}
- apiVersion: v1
  kind: Pod
  metadata:
    name: big
    namespace: b
    creationTimestamp: '2026-11-21T08:00:00Z'
    labels: {kai.scheduler/queue: b}
  spec:
    schedulerName: kai-scheduler
    containers:
    - name: main
      resources: {limits: {nvidia.com/gpu: '16'}, requests: {cpu: '1', memory: 4Gi}}
"#;

#[test]
fn a_queue_removed_by_a_commit_keeps_its_running_pods_and_says_why_its_pending_ones_wait() {
    let dir = temp();
    let repo_dir = dir.path().join("repo");
    write_files(
        &repo_dir,
        &[
            ("policies/queues.kdl", TWO_QUEUES),
            ("cluster.yaml", CLUSTER),
        ],
    );
    git_commit_all(&repo_dir, "queues a and b");
    let cluster = repo_dir.join("cluster.yaml");
    let mut daemon = Daemon::start_on(dir.path(), repo_dir.to_str().unwrap(), &cluster, &[]);
    daemon.wait_policy(|p| p["ready"] == true);
    daemon.wait_log(|l| l["fields"]["message"] == "cycle");

    std::fs::write(
        repo_dir.join("policies/queues.kdl"),
        "queue \"a\" {\n    gpu quota=4\n    namespaces \"a\"\n}\n",
    )
    .unwrap();
    let removed = git_commit_all(&repo_dir, "queue b goes");
    daemon.wait_policy(|p| p["commit"] == removed.as_str());
    let expected = format!(
        "queue b no longer exists (removed in commit {})",
        &removed[..12]
    );
    let started = Instant::now();
    loop {
        let (_, body) = daemon.get("/pending");
        let doc: Value = serde_json::from_str(&body).unwrap();
        let big = doc["pending"]
            .as_array()
            .unwrap()
            .iter()
            .find(|j| j["job"] == "b/big")
            .cloned();
        if big
            .as_ref()
            .is_some_and(|j| j["reason"] == expected.as_str())
        {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "/pending is {doc}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let (_, metrics) = daemon.get("/metrics");
    assert_eq!(
        metric(&metrics, "kai_decisions_total{kind=\"evict\"}"),
        Some(0.0),
        "b's running pod is not evicted: {metrics}"
    );
    assert_eq!(daemon.terminate().0, 0);
}

// ---------------------------------------------------------------------------------------------
// `run` against Kubernetes: flags, and a fake API server on 127.0.0.1 (never a real cluster).

/// `kai-scheduler run` with `args` that must refuse to start: its exit status and stderr.
fn refused(cwd: &Path, args: &[&str], env: &[(&str, &str)]) -> (i32, String) {
    let mut command = Command::new(binary("kai-scheduler"));
    command
        .args(["run", "--policy-repo", "repo", "--listen", "127.0.0.1:0"])
        .args(args)
        .current_dir(cwd)
        .env("NO_COLOR", "1")
        .env("HOME", cwd)
        .env_remove("KUBECONFIG")
        .env_remove("KUBERNETES_SERVICE_HOST")
        .env_remove("KUBERNETES_SERVICE_PORT")
        .env_remove("POD_NAMESPACE")
        .env_remove("POD_NAME")
        .envs(env.iter().copied())
        .stdin(Stdio::null());
    let mut child = command
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kai-scheduler runs");
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            let mut err = String::new();
            child
                .stderr
                .take()
                .unwrap()
                .read_to_string(&mut err)
                .unwrap();
            return (status.code().unwrap_or(-1), err);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("kai-scheduler run {args:?} did not refuse to start");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn run_refuses_bad_cluster_flags_with_a_clear_error() {
    let dir = temp();
    let cwd = dir.path();
    std::fs::write(
        cwd.join("cluster.yaml"),
        "apiVersion: v1\nkind: List\nitems: []\n",
    )
    .unwrap();
    std::fs::write(cwd.join("kubeconfig"), "apiVersion: v1\nkind: Config\n").unwrap();
    std::fs::create_dir_all(cwd.join("empty-secret")).unwrap();
    // (flags, environment, what stderr says)
    type Case<'a> = (&'a [&'a str], &'a [(&'a str, &'a str)], &'a str);
    let cases: &[Case] = &[
        (
            &["--kubeconfig", "missing.yaml"],
            &[],
            "error: cannot read --kubeconfig missing.yaml: No such file or directory",
        ),
        (
            &["--cluster", "cluster.yaml", "--kubeconfig", "kubeconfig"],
            &[],
            "the argument '--cluster <FILE>' cannot be used with '--kubeconfig <FILE>'",
        ),
        (
            &["--cluster", "cluster.yaml", "--leader-elect-lease", "kai"],
            &[],
            "the argument '--cluster <FILE>' cannot be used with '--leader-elect-lease <NAME>'",
        ),
        (
            &["--kubeconfig", "kubeconfig", "--speed", "10"],
            &[],
            "error: --speed is for the simulated cluster: it needs --cluster FILE",
        ),
        (
            &["--pod-duration", "5m"],
            &[],
            "error: --pod-duration is for the simulated cluster: it needs --cluster FILE",
        ),
        (
            &["--cluster", "cluster.yaml", "--leader-elect-renew", "1s"],
            &[],
            "error: --leader-elect-renew is for leader election in a Kubernetes cluster",
        ),
        (
            &[
                "--kubeconfig",
                "kubeconfig",
                "--leader-elect-duration",
                "10s",
            ],
            &[],
            "--leader-elect-lease <NAME>",
        ),
        (
            &["--kubeconfig", "kubeconfig", "--leader-elect-lease", "kai"],
            &[],
            "error: --leader-elect-lease needs the Lease's namespace: give --leader-elect-namespace or set POD_NAMESPACE",
        ),
        (
            &[
                "--kubeconfig",
                "kubeconfig",
                "--leader-elect-lease",
                "kai",
                "--leader-elect-renew",
                "8s",
            ],
            &[("POD_NAMESPACE", "kai-system")],
            "error: --leader-elect-renew (8s) must be under half of --leader-elect-duration (15s)",
        ),
        (
            &["--cluster", "cluster.yaml", "--apply-queues"],
            &[],
            "error: --apply-queues writes Queue and PriorityClass objects to a Kubernetes cluster; the simulated cluster (--cluster) has none",
        ),
        (
            &[
                "--kubeconfig",
                "kubeconfig",
                "--git-credentials",
                "empty-secret",
            ],
            &[],
            "error: --git-credentials empty-secret holds neither `ssh-privatekey` nor `password`",
        ),
        (
            &[
                "--git-credentials",
                "empty-secret",
                "--git-token-file",
                "token",
            ],
            &[],
            "the argument '--git-credentials <DIR>' cannot be used with '--git-token-file <FILE>'",
        ),
        // No --cluster, no --kubeconfig, no $KUBECONFIG, no ~/.kube/config, not in a pod.
        (&[], &[], "error: no Kubernetes configuration: "),
        (
            &["--kubeconfig", "kubeconfig"],
            &[],
            "error: cannot read the kubeconfig kubeconfig: ",
        ),
    ];
    for (args, env, expected) in cases {
        let (status, stderr) = refused(cwd, args, env);
        assert_eq!(status, 2, "{args:?}: {stderr}");
        assert!(
            stderr.contains(expected),
            "{args:?}: expected {expected:?} in\n{stderr}"
        );
    }
}

/// A policy of one queue, `a`, for namespace `a`.
const QUEUE_A: &str = "queue \"a\" {\n    gpu quota=4\n    namespaces \"a\"\n}\n";

fn node(name: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": { "name": name, "uid": format!("uid-{name}"), "resourceVersion": "1",
                      "creationTimestamp": "2026-01-01T00:00:00Z" },
        "status": {
            "allocatable": { "cpu": "64", "memory": "512Gi", "nvidia.com/gpu": "8", "pods": "110" },
            "capacity": { "cpu": "64", "memory": "512Gi", "nvidia.com/gpu": "8", "pods": "110" },
            "conditions": [ { "type": "Ready", "status": "True" } ]
        }
    })
}

/// A pending pod of queue `a` asking for one GPU.
fn pending_pod(name: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": { "name": name, "namespace": "a", "uid": format!("uid-{name}"),
                      "resourceVersion": "1", "creationTimestamp": "2026-01-01T00:00:00Z",
                      "labels": { "kai.scheduler/queue": "a" } },
        "spec": {
            "schedulerName": "kai-scheduler",
            "containers": [ { "name": "main", "resources": {
                "limits": { "nvidia.com/gpu": "1" },
                "requests": { "cpu": "1", "memory": "1Gi" } } } ]
        },
        "status": { "phase": "Pending" }
    })
}

/// Waits (at most 20 s) until `done` holds.
fn eventually(what: &str, done: impl Fn() -> bool) {
    let started = Instant::now();
    while !done() {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "gave up waiting: {what}"
        );
        std::thread::sleep(Duration::from_millis(25));
    }
}

/// A policy repository (one queue) and a kubeconfig for `api`, in a temporary folder.
fn kube_setup(api: &FakeApi) -> (tempfile::TempDir, String) {
    let dir = temp();
    let repo_dir = dir.path().join("repo");
    write_files(&repo_dir, &[("policies/queues.kdl", QUEUE_A)]);
    git_commit_all(&repo_dir, "queue a");
    std::fs::write(dir.path().join("kubeconfig"), api.kubeconfig()).unwrap();
    let repo = repo_dir.to_str().unwrap().to_string();
    (dir, repo)
}

/// `kai-scheduler run` against the fake API server of `kube_setup`, scheduler name
/// `kai-scheduler`, once its caches have synced and it is ready.
fn kube_daemon(dir: &tempfile::TempDir, repo: &str) -> Daemon {
    let mut daemon = Daemon::spawn(
        dir.path(),
        repo,
        &[
            "--kubeconfig",
            "kubeconfig",
            "--scheduler-name",
            "kai-scheduler",
        ],
    );
    daemon.wait_log(|l| {
        l["fields"]["message"]
            == "watch caches synced (Nodes, Pods, PodGroups, PriorityClasses, owners of pods)"
    });
    eventually("/readyz 200", || daemon.get("/readyz").0 == 200);
    daemon
}

#[test]
fn run_against_a_fake_api_server_waits_for_the_caches_binds_survives_410_and_stops_when_the_lease_is_lost()
 {
    let api = FakeApi::start(vec![node("n1")], Vec::new());
    let state = api.state.clone();
    // Queue a exists in the cluster (applied by whoever applies the policy's Queues).
    state.queues.lock().unwrap().push(json!({
        "apiVersion": "scheduling.run.ai/v2", "kind": "Queue",
        "metadata": { "name": "a", "uid": "uid-queue-a", "resourceVersion": "1",
                      "creationTimestamp": "2026-01-01T00:00:00Z" },
        "spec": { "resources": { "gpu": { "quota": 4, "limit": -1, "overQuotaWeight": 1 } } }
    }));
    state
        .hold_lists
        .store(true, std::sync::atomic::Ordering::SeqCst);
    let (dir, repo) = kube_setup(&api);
    let mut daemon = Daemon::spawn(
        dir.path(),
        &repo,
        &[
            "--kubeconfig",
            "kubeconfig",
            "--scheduler-name",
            "kai-scheduler",
            "--leader-elect-lease",
            "kai-scheduler",
            "--leader-elect-namespace",
            "kai-system",
            "--leader-elect-identity",
            "replica-a",
            "--leader-elect-duration",
            "2s",
            "--leader-elect-renew",
            "300ms",
        ],
    );

    // The policy compiles, but the caches have not listed: not ready.
    daemon.wait_policy(|p| p["commit"].is_string());
    let (status, body) = daemon.get("/readyz");
    assert_eq!(status, 503, "{body}");
    assert!(
        body.starts_with("not ready: the cluster is not ready: the watch caches"),
        "{body}"
    );
    state
        .hold_lists
        .store(false, std::sync::atomic::Ordering::SeqCst);
    daemon.wait_log(|l| {
        l["fields"]["message"]
            == "watch caches synced (Nodes, Pods, PodGroups, PriorityClasses, owners of pods)"
    });
    eventually("/readyz 200", || daemon.get("/readyz").0 == 200);
    let (p, _) = daemon.wait_policy(|p| p["cluster"]["leading"] == "yes");
    assert_eq!(p["cluster"]["kind"], "kubernetes");
    assert_eq!(p["cluster"]["synced"], true);
    let lease = state
        .lease
        .lock()
        .unwrap()
        .clone()
        .expect("the Lease was created");
    assert_eq!(lease["metadata"]["name"], "kai-scheduler");
    assert_eq!(lease["metadata"]["namespace"], "kai-system");
    assert_eq!(lease["spec"]["holderIdentity"], "replica-a");
    assert_eq!(lease["spec"]["leaseDurationSeconds"], 2);

    // A pod appears that the watch never tells of; then the watch ends with 410 Gone. The
    // watcher lists again, finds the pod, and the daemon binds it.
    eventually("the pod watch is open", || {
        state
            .requests
            .lock()
            .unwrap()
            .iter()
            .any(|r| r.path == "/api/v1/pods" && r.query.contains("watch=true"))
    });
    let pod_lists = state.lists("/api/v1/pods");
    state.pods.lock().unwrap().push(pending_pod("p"));
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        state.bindings.lock().unwrap().is_empty(),
        "the caches cannot know of p yet"
    );
    state.expire_pod_watch();
    eventually("a binding", || !state.bindings.lock().unwrap().is_empty());
    assert!(
        state.lists("/api/v1/pods") > pod_lists,
        "the pods were listed again after 410"
    );
    let (pod, binding) = state.bindings.lock().unwrap()[0].clone();
    assert_eq!(pod, "a/p");
    assert_eq!(
        binding,
        json!({ "apiVersion": "v1", "kind": "Binding",
                "metadata": { "name": "p", "namespace": "a" },
                "target": { "apiVersion": "v1", "kind": "Node", "name": "n1" } })
    );
    // The bound pod came back through the watch: never bound twice.
    std::thread::sleep(Duration::from_millis(600));
    assert_eq!(state.bindings.lock().unwrap().len(), 1);
    let (_, metrics) = daemon.get("/metrics");
    assert_eq!(
        metric(
            &metrics,
            "kai_api_calls_total{call=\"bind\",outcome=\"done\"}"
        ),
        Some(1.0),
        "{metrics}"
    );
    // Queue a's status carries the cycle's numbers: p's GPU allocated and requested, and the
    // fair share; it is written to the Queue object.
    let patch = state
        .requests
        .lock()
        .unwrap()
        .iter()
        .rev()
        .find(|r| r.method == "PATCH" && r.path == "/apis/scheduling.run.ai/v2/queues/a/status")
        .map(|r| r.body.clone())
        .expect("a status patch of queue a");
    assert_eq!(
        patch["status"]["allocated"]["nvidia.com/gpu"], "1",
        "{patch}"
    );
    assert_eq!(
        patch["status"]["requested"]["nvidia.com/gpu"], "1",
        "{patch}"
    );
    assert_eq!(
        patch["status"]["conditions"][0]["type"], "OverQuota",
        "{patch}"
    );
    assert!(
        patch["status"]["conditions"][0]["message"]
            .as_str()
            .unwrap()
            .starts_with("fair share: "),
        "{patch}"
    );
    assert!(
        metric(
            &metrics,
            "kai_api_calls_total{call=\"queue-status\",outcome=\"done\"}"
        )
        .is_some_and(|n| n >= 1.0),
        "{metrics}"
    );
    assert_eq!(
        state.queues.lock().unwrap()[0]["status"]["allocated"]["nvidia.com/gpu"],
        "1"
    );

    // The Lease can no longer be renewed: the daemon stops leading within a renewal or two,
    // and a new pod is not bound while it does not lead.
    state
        .lease_fails
        .store(true, std::sync::atomic::Ordering::SeqCst);
    let (_, took) = daemon.wait_policy(|p| {
        p["cluster"]["leading"]
            .as_str()
            .is_some_and(|l| l.starts_with("no (the last Lease round failed"))
    });
    assert!(
        took < Duration::from_secs(1),
        "stopped leading after {took:?}"
    );
    state.add_pod(pending_pod("q"));
    std::thread::sleep(Duration::from_millis(1000));
    assert_eq!(
        state.bindings.lock().unwrap().len(),
        1,
        "a replica that does not lead binds nothing"
    );
    // The Lease answers again: leading again (its holder is still this replica), q is bound.
    state
        .lease_fails
        .store(false, std::sync::atomic::Ordering::SeqCst);
    daemon.wait_policy(|p| p["cluster"]["leading"] == "yes");
    eventually("q bound", || {
        state
            .bindings
            .lock()
            .unwrap()
            .iter()
            .any(|(p, _)| p == "a/q")
    });
    let (status, logs) = daemon.terminate();
    assert_eq!(status, 0, "{}", logs.join("\n"));
}

#[test]
fn a_replica_that_follows_another_holder_of_the_lease_binds_nothing() {
    let api = FakeApi::start(vec![node("n1")], vec![pending_pod("p")]);
    let state = api.state.clone();
    *state.lease.lock().unwrap() = Some(json!({
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": { "name": "kai-scheduler", "namespace": "kai-system", "resourceVersion": "7" },
        "spec": { "holderIdentity": "replica-b", "leaseDurationSeconds": 3600,
                  "renewTime": k8s_now(), "acquireTime": k8s_now(), "leaseTransitions": 0 }
    }));
    let (dir, repo) = kube_setup(&api);
    let daemon = Daemon::spawn(
        dir.path(),
        &repo,
        &[
            "--kubeconfig",
            "kubeconfig",
            "--leader-elect-lease",
            "kai-scheduler",
            "--leader-elect-namespace",
            "kai-system",
            "--leader-elect-identity",
            "replica-a",
        ],
    );
    daemon.wait_policy(|p| p["cluster"]["leading"] == "no (the Lease is held by replica-b)");
    // Ready (a follower is a healthy replica) and running cycles, but sending nothing.
    eventually("/readyz 200", || daemon.get("/readyz").0 == 200);
    eventually("cycles", || {
        metric(
            &daemon.get("/metrics").1,
            "kai_cycle_duration_seconds_count{action=\"cycle\"}",
        )
        .is_some_and(|n| n >= 3.0)
    });
    assert!(state.bindings.lock().unwrap().is_empty());
    let writes: Vec<String> = state
        .requests
        .lock()
        .unwrap()
        .iter()
        .filter(|r| r.method != "GET")
        .map(|r| format!("{} {}", r.method, r.path))
        .collect();
    assert!(writes.is_empty(), "a follower writes nothing: {writes:?}");
    assert_eq!(daemon.terminate().0, 0);
}

/// Now as a Kubernetes MicroTime (`2026-11-23T22:52:14.000000Z`).
fn k8s_now() -> String {
    let out = Command::new("date")
        .args(["-u", "+%Y-%m-%dT%H:%M:%S.000000Z"])
        .output()
        .unwrap();
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

#[test]
fn every_flag_the_chart_passes_to_run_exists() {
    let deployment =
        std::fs::read_to_string(repo_root().join("charts/kai-scheduler/templates/deployment.yaml"))
            .unwrap();
    let help = kai_scheduler(&repo_root(), &["run", "--help"]);
    assert_eq!(help.status, 0, "{}", help.stderr);
    let flags: Vec<&str> = deployment
        .lines()
        .filter_map(|l| l.trim().strip_prefix("- --"))
        .map(|f| f.split('=').next().unwrap())
        .collect();
    assert!(flags.len() >= 12, "{flags:?}");
    for flag in flags {
        assert!(
            help.stdout.contains(&format!("--{flag}")),
            "the chart passes --{flag}, which `kai-scheduler run` does not have"
        );
    }
}

#[test]
fn run_against_a_fake_api_server_writes_kais_stale_mark_on_a_gang_below_its_minimum() {
    // A gang of two of which one pod runs: stale from the first cycle. KAI keeps the time it
    // went stale on the PodGroup, so that a restart or a new leader goes on counting from it.
    let group = json!({
        "apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup",
        "metadata": { "name": "train", "namespace": "a", "uid": "uid-train",
                      "resourceVersion": "1", "creationTimestamp": "2026-01-01T00:00:00Z" },
        "spec": { "minMember": 2, "queue": "a" }
    });
    let mut running = pending_pod("train-0");
    running["metadata"]["annotations"] = json!({ "pod-group-name": "train" });
    running["spec"]["nodeName"] = json!("n1");
    running["status"] = json!({ "phase": "Running", "startTime": "2026-01-01T00:01:00Z" });
    let api = FakeApi::start_with_groups(vec![node("n1")], vec![running], vec![group]);
    let state = api.state.clone();
    let (dir, repo) = kube_setup(&api);
    let _daemon = Daemon::spawn(
        dir.path(),
        &repo,
        &[
            "--kubeconfig",
            "kubeconfig",
            "--scheduler-name",
            "kai-scheduler",
        ],
    );
    let path = "/apis/scheduling.run.ai/v2alpha2/namespaces/a/podgroups/train";
    eventually("the stale mark is written", || {
        state
            .requests
            .lock()
            .unwrap()
            .iter()
            .any(|r| r.method == "PATCH" && r.path == path)
    });
    let patch = state
        .requests
        .lock()
        .unwrap()
        .iter()
        .find(|r| r.method == "PATCH" && r.path == path)
        .unwrap()
        .body
        .clone();
    let mark = patch["metadata"]["annotations"]["kai.scheduler/stale-podgroup-timestamp"]
        .as_str()
        .unwrap_or_else(|| panic!("an RFC 3339 time: {patch}"))
        .to_string();
    // RFC 3339 in UTC to the second, as KAI writes and parses it (time.RFC3339).
    let shape: String = mark
        .chars()
        .map(|c| if c.is_ascii_digit() { '9' } else { c })
        .collect();
    assert_eq!(shape, "9999-99-99T99:99:99Z", "{mark}");
    assert!(
        mark.as_str() > "2026-01-01T00:01:00Z",
        "marked at the cycle, not {mark}"
    );
    // The cluster has no Queue objects: no status is tried for queue a (it would be a 404).
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        !state
            .requests
            .lock()
            .unwrap()
            .iter()
            .any(|r| r.path.starts_with("/apis/scheduling.run.ai/v2/queues/")),
        "no Queue status without a Queue object"
    );
    let stored = state.groups.lock().unwrap()[0].clone();
    assert_eq!(
        stored["metadata"]["annotations"]["kai.scheduler/stale-podgroup-timestamp"],
        json!(mark)
    );
}

/// A policy of a department with two teams, and a priority class.
const DEPARTMENT: &str = r#"priority-class "train" value=50 preemptible=#true
queue "dept" {
    gpu quota=8
    queue "a" {
        gpu quota=4
        namespaces "a"
    }
    queue "b" {
        gpu quota=4
        namespaces "b"
    }
}
"#;

/// The same department after a pull request: team b is gone, a has 6 GPUs, `train` is worth 60.
const DEPARTMENT_LATER: &str = r#"priority-class "train" value=60 preemptible=#true
queue "dept" {
    gpu quota=8
    queue "a" {
        gpu quota=6
        namespaces "a"
    }
}
"#;

fn labelled_queue(name: &str, parent: Option<&str>, managed: bool) -> Value {
    let mut q = json!({
        "apiVersion": "scheduling.run.ai/v2", "kind": "Queue",
        "metadata": { "name": name, "resourceVersion": "1", "labels": {} },
        "spec": { "resources": { "gpu": { "quota": 1, "limit": -1, "overQuotaWeight": 1 } } }
    });
    if managed {
        q["metadata"]["labels"]["app.kubernetes.io/managed-by"] = json!("kai-policy");
    }
    if let Some(parent) = parent {
        q["spec"]["parentQueue"] = json!(parent);
    }
    q
}

fn names(objects: &std::sync::Mutex<Vec<Value>>) -> Vec<String> {
    let mut names: Vec<String> = objects
        .lock()
        .unwrap()
        .iter()
        .map(|o| o["metadata"]["name"].as_str().unwrap().to_string())
        .collect();
    names.sort();
    names
}

#[test]
fn apply_queues_applies_the_policy_prunes_only_its_own_objects_and_follows_commits() {
    let api = FakeApi::start(vec![node("n1")], Vec::new());
    let state = api.state.clone();
    // In the cluster before: a department this scheduler applied once (two levels), and a
    // Queue someone made by hand, without the label.
    state.queues.lock().unwrap().extend([
        labelled_queue("old-dept", None, true),
        labelled_queue("old-team", Some("old-dept"), true),
        labelled_queue("hand-made", None, false),
    ]);
    let dir = temp();
    let repo_dir = dir.path().join("repo");
    write_files(&repo_dir, &[("policies/queues.kdl", DEPARTMENT)]);
    git_commit_all(&repo_dir, "a department");
    std::fs::write(dir.path().join("kubeconfig"), api.kubeconfig()).unwrap();
    let mut daemon = Daemon::spawn(
        dir.path(),
        repo_dir.to_str().unwrap(),
        &["--kubeconfig", "kubeconfig", "--apply-queues"],
    );
    eventually("the policy applied and the old department pruned", || {
        names(&state.queues) == ["a", "b", "dept", "hand-made"]
    });
    assert_eq!(names(&state.priority_classes), ["train"]);
    let requests = state.requests.lock().unwrap().clone();
    // Server-side apply with kai-policy as the field manager, conflicts forced.
    let applies: Vec<&Seen> = requests.iter().filter(|r| r.method == "PATCH").collect();
    assert_eq!(applies.len(), 4, "{applies:#?}");
    for r in &applies {
        assert!(r.query.contains("fieldManager=kai-policy"), "{}", r.query);
        assert!(r.query.contains("force=true"), "{}", r.query);
    }
    // The parent before its children; the objects are what `kai-policy build` writes.
    let order: Vec<&str> = applies.iter().map(|r| r.path.as_str()).collect();
    let at = |path: &str| order.iter().position(|p| *p == path).unwrap();
    assert!(
        at("/apis/scheduling.run.ai/v2/queues/dept") < at("/apis/scheduling.run.ai/v2/queues/a")
    );
    assert!(
        at("/apis/scheduling.run.ai/v2/queues/dept") < at("/apis/scheduling.run.ai/v2/queues/b")
    );
    let a = state
        .queues
        .lock()
        .unwrap()
        .iter()
        .find(|q| q["metadata"]["name"] == "a")
        .cloned()
        .unwrap();
    assert_eq!(a["spec"]["parentQueue"], "dept");
    assert_eq!(a["spec"]["resources"]["gpu"]["quota"], 4.0);
    assert_eq!(
        a["metadata"]["labels"]["app.kubernetes.io/managed-by"],
        "kai-policy"
    );
    // The pruned department went child first; the hand-made Queue was never touched.
    let deletes: Vec<&str> = requests
        .iter()
        .filter(|r| r.method == "DELETE")
        .map(|r| r.path.as_str())
        .collect();
    assert_eq!(
        deletes,
        [
            "/apis/scheduling.run.ai/v2/queues/old-team",
            "/apis/scheduling.run.ai/v2/queues/old-dept"
        ]
    );
    assert!(!requests.iter().any(|r| r.path.ends_with("/hand-made")));
    daemon.wait_log(|l| {
        l["fields"]["message"] == "applied the policy's Queues and PriorityClasses"
            && l["fields"]["complete"] == true
    });
    // Nothing changes: nothing is applied again (until the ten-minute resync).
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(
        state
            .requests
            .lock()
            .unwrap()
            .iter()
            .filter(|r| r.method == "PATCH")
            .count(),
        4
    );

    // A new commit: b is pruned, a's quota follows, and `train`'s new value (which the API
    // server refuses to change in place) is applied by recreating the class.
    write_files(&repo_dir, &[("policies/queues.kdl", DEPARTMENT_LATER)]);
    git_commit_all(&repo_dir, "b leaves, a grows");
    eventually("b pruned and train at 60", || {
        names(&state.queues) == ["a", "dept", "hand-made"]
            && state
                .priority_classes
                .lock()
                .unwrap()
                .first()
                .is_some_and(|c| c["value"] == 60)
    });
    let a = state
        .queues
        .lock()
        .unwrap()
        .iter()
        .find(|q| q["metadata"]["name"] == "a")
        .cloned()
        .unwrap();
    assert_eq!(a["spec"]["resources"]["gpu"]["quota"], 6.0);
    assert!(
        state
            .requests
            .lock()
            .unwrap()
            .iter()
            .any(|r| r.method == "DELETE"
                && r.path == "/apis/scheduling.k8s.io/v1/priorityclasses/train")
    );
    let (_, metrics) = daemon.get("/metrics");
    assert_eq!(
        metric(
            &metrics,
            "kai_api_calls_total{call=\"prune\",outcome=\"done\"}"
        ),
        Some(4.0),
        "old-team, old-dept, b, and train before its re-creation: {metrics}"
    );
    assert_eq!(daemon.terminate().0, 0);
}

#[test]
fn apply_queues_prunes_nothing_while_an_object_cannot_be_applied() {
    let api = FakeApi::start(vec![node("n1")], Vec::new());
    let state = api.state.clone();
    state
        .queues
        .lock()
        .unwrap()
        .push(labelled_queue("old", None, true));
    // Someone else's PriorityClass of the same name with another value: the apply fails (the
    // value cannot change, and it is not ours to delete and recreate).
    state.priority_classes.lock().unwrap().push(json!({
        "apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
        "metadata": { "name": "train", "resourceVersion": "1" }, "value": 1000
    }));
    let dir = temp();
    let repo_dir = dir.path().join("repo");
    write_files(&repo_dir, &[("policies/queues.kdl", DEPARTMENT)]);
    git_commit_all(&repo_dir, "a department");
    std::fs::write(dir.path().join("kubeconfig"), api.kubeconfig()).unwrap();
    let mut daemon = Daemon::spawn(
        dir.path(),
        repo_dir.to_str().unwrap(),
        &["--kubeconfig", "kubeconfig", "--apply-queues"],
    );
    let log = daemon.wait_log(|l| {
        l["fields"]["message"].as_str().is_some_and(|m| {
            m.starts_with("--apply-queues: apply PriorityClass train: failed (422)")
        })
    });
    assert_eq!(log["level"], "WARN", "{log}");
    daemon.wait_log(|l| {
        l["fields"]["message"]
            == "--apply-queues: not every object could be applied: nothing is pruned until they are"
    });
    // The queues were applied; the old one is kept; the other PriorityClass is untouched.
    eventually("the queues applied", || {
        names(&state.queues) == ["a", "b", "dept", "old"]
    });
    assert_eq!(state.priority_classes.lock().unwrap()[0]["value"], 1000);
    assert!(
        !state
            .requests
            .lock()
            .unwrap()
            .iter()
            .any(|r| r.method == "DELETE")
    );
    assert_eq!(daemon.terminate().0, 0);
}

/// A pod of queue `a` bound to `node`, running, asking for `gpus` GPUs.
fn running_pod(name: &str, node: &str, gpus: u32) -> Value {
    let mut pod = pending_pod(name);
    pod["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = json!(gpus.to_string());
    pod["spec"]["nodeName"] = json!(node);
    pod["status"] = json!({ "phase": "Running", "startTime": "2026-01-01T00:01:00Z" });
    pod
}

/// How many bindings of `pod` (`namespace/name`) were posted, accepted or not.
fn binds_of(state: &fake_apiserver::State, pod: &str) -> Vec<String> {
    state
        .bindings
        .lock()
        .unwrap()
        .iter()
        .filter(|(p, _)| p == pod)
        .map(|(_, b)| b["target"]["name"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn the_watches_carry_a_node_going_not_ready_a_deleted_pod_a_bind_conflict_and_a_server_away_and_back()
 {
    let api = FakeApi::start(
        vec![node("n1"), node("n2")],
        vec![running_pod("big", "n1", 8)],
    );
    let state = api.state.clone();
    let (dir, repo) = kube_setup(&api);
    let mut daemon = kube_daemon(&dir, &repo);

    // n2 goes NotReady (its kubelet stopped reporting); n1 is full: a new pod waits.
    state.change_node("n2", |n| {
        n["status"]["conditions"] = json!([{ "type": "Ready", "status": "Unknown" }]);
        n["spec"]["taints"] =
            json!([{ "key": "node.kubernetes.io/unreachable", "effect": "NoSchedule" }]);
    });
    std::thread::sleep(Duration::from_millis(300));
    state.add_pod(pending_pod("p1"));
    std::thread::sleep(Duration::from_millis(1500));
    assert!(
        binds_of(&state, "a/p1").is_empty(),
        "n2 is not ready and n1 is full"
    );

    // The pod that filled n1 is deleted: p1 goes to n1.
    state.delete_pod("a", "big");
    eventually("p1 bound", || !binds_of(&state, "a/p1").is_empty());
    assert_eq!(binds_of(&state, "a/p1"), ["n1"]);

    // p2 is bound by someone else before our bind arrives (the watch still shows it pending):
    // the bind gets 409 and is reported as a conflict; once the watch shows the pod bound,
    // nothing more is sent for it, and its GPU counts on n1.
    let mut p2 = running_pod("p2", "n1", 1);
    p2["metadata"]["resourceVersion"] = json!(state.next_version());
    state.pods.lock().unwrap().push(p2.clone());
    state.pod_event("ADDED", &pending_pod("p2"));
    eventually("a bind of p2", || !binds_of(&state, "a/p2").is_empty());
    eventually("the conflict counted", || {
        metric(
            &daemon.get("/metrics").1,
            "kai_api_calls_total{call=\"bind\",outcome=\"conflict\"}",
        )
        .is_some_and(|n| n >= 1.0)
    });
    state.pod_event("MODIFIED", &p2);
    std::thread::sleep(Duration::from_millis(500));
    let tries = binds_of(&state, "a/p2").len();
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(
        binds_of(&state, "a/p2").len(),
        tries,
        "no bind once the watch shows p2 bound"
    );

    // The API server goes away for a second; a pod created meanwhile is found when it comes
    // back (the watches list again) and bound. The daemon stays alive throughout. (Longer away
    // means longer to come back: kube-runtime's watcher backs off as client-go's reflector
    // does, 0.8 s doubling to 30 s, reset after 2 min without errors.)
    state.go_away();
    state.pods.lock().unwrap().push(pending_pod("p3"));
    std::thread::sleep(Duration::from_millis(1000));
    assert_eq!(daemon.get("/healthz").0, 200);
    state.come_back();
    eventually("p3 bound after the server came back", || {
        state
            .bindings
            .lock()
            .unwrap()
            .iter()
            .any(|(p, _)| p == "a/p3")
    });
    // n1 holds p1 and p2 (2 of 8) and n2 is still NotReady: p3 went to n1.
    assert_eq!(binds_of(&state, "a/p3"), ["n1"]);
    daemon.wait_log(|l| l["fields"]["message"] == "the Pod watch is back");
    let (status, logs) = daemon.terminate();
    assert_eq!(status, 0, "{}", logs.join("\n"));
    // Each watch says once that it failed, however many retries it took, and why; kube's own
    // context-free "failed with status 503" lines are not shown.
    let failed = logs
        .iter()
        .filter(|l| l.contains("the Pod watch failed, retrying with backoff"))
        .count();
    assert_eq!(failed, 1, "{}", logs.join("\n"));
    assert!(
        !logs.iter().any(|l| l.contains("\"failed with status")),
        "{}",
        logs.join("\n")
    );
}

fn replica(cwd: &Path, repo: &str, name: &str) -> Daemon {
    Daemon::spawn(
        cwd,
        repo,
        &[
            "--kubeconfig",
            "kubeconfig",
            "--scheduler-name",
            "kai-scheduler",
            "--leader-elect-lease",
            "kai-scheduler",
            "--leader-elect-namespace",
            "kai-system",
            "--leader-elect-identity",
            name,
            "--leader-elect-duration",
            "30s",
            "--leader-elect-renew",
            "300ms",
        ],
    )
}

#[test]
fn two_replicas_hand_over_the_lease_at_shutdown_and_never_bind_twice() {
    let api = FakeApi::start(vec![node("n1")], Vec::new());
    let state = api.state.clone();
    let (dir, repo) = kube_setup(&api);
    // Two replicas, each in a folder of its own (state, kubeconfig), one policy repository.
    let second = dir.path().join("second");
    std::fs::create_dir_all(&second).unwrap();
    std::fs::write(second.join("kubeconfig"), api.kubeconfig()).unwrap();
    let a = replica(dir.path(), &repo, "replica-a");
    a.wait_policy(|p| p["cluster"]["leading"] == "yes");
    let b = replica(&second, &repo, "replica-b");
    b.wait_policy(|p| p["cluster"]["leading"] == "no (the Lease is held by replica-a)");

    state.add_pod(pending_pod("p"));
    eventually("p bound", || !binds_of(&state, "a/p").is_empty());

    // a stops (a rolling update): it gives the Lease up, and b leads at its next round instead
    // of waiting out the Lease's 30 s.
    let stopped = Instant::now();
    let (status, logs) = a.terminate();
    assert_eq!(status, 0, "{}", logs.join("\n"));
    assert!(
        logs.iter()
            .any(|l| l.contains("released the Lease: another replica may lead at once")),
        "{}",
        logs.join("\n")
    );
    let (_, took) = b.wait_policy(|p| p["cluster"]["leading"] == "yes");
    assert!(
        stopped.elapsed() < Duration::from_secs(10),
        "b led {took:?} after a stopped"
    );
    let lease = state.lease.lock().unwrap().clone().unwrap();
    assert_eq!(lease["spec"]["holderIdentity"], "replica-b");
    assert_eq!(lease["spec"]["leaseTransitions"], 1);

    state.add_pod(pending_pod("q"));
    eventually("q bound by b", || !binds_of(&state, "a/q").is_empty());
    std::thread::sleep(Duration::from_millis(600));
    assert_eq!(binds_of(&state, "a/p").len(), 1, "p was bound once");
    assert_eq!(binds_of(&state, "a/q").len(), 1, "q was bound once");
    assert_eq!(b.terminate().0, 0);
}

/// A pending pod of the JobSet `train`'s first worker Job, as the JobSet controller makes it:
/// owned by the Job, labelled with its replica (and the queue, from the pod template).
fn jobset_worker(name: &str) -> Value {
    let mut pod = pending_pod(name);
    pod["metadata"]["labels"] = json!({
        "kai.scheduler/queue": "a",
        "jobset.sigs.k8s.io/replicatedjob-name": "workers",
        "jobset.sigs.k8s.io/job-index": "0"
    });
    pod["metadata"]["ownerReferences"] = json!([{ "apiVersion": "batch/v1", "kind": "Job",
        "name": "train-workers-0", "uid": "uid-job", "controller": true }]);
    pod
}

#[test]
fn owners_from_the_watches_make_a_jobsets_pods_one_gang_in_the_jobsets_queue() {
    // n1 has 8 GPUs, 7 of them held: one GPU free for the JobSet's two one-GPU workers.
    let api = FakeApi::start(
        vec![node("n1")],
        vec![
            running_pod("big", "n1", 7),
            jobset_worker("w0"),
            jobset_worker("w1"),
        ],
    );
    let state = api.state.clone();
    // JobSets are served (the CRD is installed) but hold nothing yet; the Kubeflow, Ray and
    // LeaderWorkerSet CRDs are not installed at all (their lists answer 404).
    state
        .others
        .lock()
        .unwrap()
        .insert("/apis/jobset.x-k8s.io/v1alpha2/jobsets".into(), Vec::new());
    let (dir, repo) = kube_setup(&api);
    // Kinds that are not installed do not hold readiness back.
    let mut daemon = kube_daemon(&dir, &repo);
    daemon.wait_log(|l| {
        l["fields"]["message"].as_str().is_some_and(|m| {
            m.starts_with("PyTorchJob (kubeflow.org/v1) is not served by this cluster")
        })
    });

    // The workers' Job is not listed yet (the watches carry objects one kind at a time): the
    // workers wait for it rather than go one by one (as a Job's pods of a group of one each,
    // one would take the free GPU).
    std::thread::sleep(Duration::from_millis(1000));
    assert!(binds_of(&state, "a/w0").is_empty() && binds_of(&state, "a/w1").is_empty());

    // The Job and its JobSet arrive. The two workers are one gang of two (the replica's
    // parallelism) and one GPU is free: nothing is bound.
    state.add_other(
        "/apis/batch/v1/jobs",
        json!({ "apiVersion": "batch/v1", "kind": "Job",
                "metadata": { "name": "train-workers-0", "namespace": "a", "uid": "uid-job",
                              "ownerReferences": [{ "apiVersion": "jobset.x-k8s.io/v1alpha2",
                                  "kind": "JobSet", "name": "train", "uid": "uid-train",
                                  "controller": true }] },
                "spec": { "parallelism": 2, "completions": 2 } }),
    );
    state.add_other(
        "/apis/jobset.x-k8s.io/v1alpha2/jobsets",
        json!({ "apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
                "metadata": { "name": "train", "namespace": "a", "uid": "uid-train",
                              "labels": { "kai.scheduler/queue": "a" } },
                "spec": { "replicatedJobs": [{ "name": "workers", "replicas": 1,
                    "template": { "spec": { "parallelism": 2, "completions": 2 } } }] } }),
    );
    eventually("w0 told why it waits", || {
        state
            .bodies("PATCH", "/api/v1/namespaces/a/pods/w0/status")
            .iter()
            .any(|b| b.to_string().contains("Unschedulable"))
    });
    std::thread::sleep(Duration::from_millis(600));
    assert!(
        binds_of(&state, "a/w0").is_empty() && binds_of(&state, "a/w1").is_empty(),
        "a gang of two on one free GPU"
    );

    // The big pod ends: both workers go in one cycle.
    state.delete_pod("a", "big");
    eventually("both workers bound", || {
        !binds_of(&state, "a/w0").is_empty() && !binds_of(&state, "a/w1").is_empty()
    });
    assert_eq!(binds_of(&state, "a/w0"), ["n1"]);
    assert_eq!(binds_of(&state, "a/w1"), ["n1"]);

    // The JobSet got its PodGroup, as KAI's pod-grouper makes one: owned by the JobSet, with
    // its queue and its replica as a sub-group of two; made once, then read from the watch.
    let created = || {
        state.bodies(
            "POST",
            "/apis/scheduling.run.ai/v2alpha2/namespaces/a/podgroups",
        )
    };
    eventually("the JobSet's PodGroup made", || !created().is_empty());
    std::thread::sleep(Duration::from_millis(1000));
    let made = created();
    assert_eq!(made.len(), 1, "{made:?}");
    let group = &made[0];
    assert_eq!(group["metadata"]["name"], "pg-train");
    assert_eq!(
        group["metadata"]["ownerReferences"],
        json!([{ "apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "name": "train",
                 "uid": "uid-train" }])
    );
    assert_eq!(group["spec"]["queue"], "a");
    assert_eq!(group["spec"]["minSubGroup"], 1);
    assert_eq!(
        group["spec"]["subGroups"],
        json!([{ "name": "workers", "minSubGroup": 1 },
               { "name": "workers-replica-0", "parent": "workers", "minMember": 2 }])
    );

    // The JobSet's replica is changed to run three pods at once: the PodGroup follows, once.
    state.change_other("/apis/jobset.x-k8s.io/v1alpha2/jobsets", "train", |j| {
        j["spec"]["replicatedJobs"][0]["template"]["spec"]["parallelism"] = json!(3);
    });
    // Patches of the spec (the stale mark is a patch of the same object, of its metadata).
    let updates = || -> Vec<Value> {
        let path = "/apis/scheduling.run.ai/v2alpha2/namespaces/a/podgroups/pg-train";
        let patches = state.bodies("PATCH", path).into_iter();
        patches.filter(|b| b["spec"].is_object()).collect()
    };
    eventually("the PodGroup updated", || !updates().is_empty());
    std::thread::sleep(Duration::from_millis(1000));
    let sent = updates();
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert_eq!(
        sent[0]["spec"]["subGroups"][1],
        json!({ "name": "workers-replica-0", "parent": "workers", "minMember": 3 })
    );
    let (status, logs) = daemon.terminate();
    assert_eq!(status, 0, "{}", logs.join("\n"));
}

// Against a real cluster. Not run here (no API server can run on the machines this project is
// built on); run them with a cluster whose kubeconfig you trust with a throw-away namespace:
//
//   kubectl apply -f charts/kai-scheduler/crds/      # unless KAI's CRDs are installed
//   KUBECONFIG=~/.kube/config cargo test -p kai-policy-e2e --test daemon_cli real_cluster -- --ignored --test-threads 1
//
// They need kubectl on the PATH and one node with 100m CPU free. They make a namespace of
// their own, use a scheduler name no other scheduler answers to, and delete the namespace at
// the end, also when they fail.

/// `kubectl` with `args` (and `stdin`), its stdout; panics with its stderr when it fails.
fn kubectl(args: &[&str], stdin: Option<&str>) -> String {
    let mut child = Command::new("kubectl")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kubectl is on the PATH");
    let mut input = child.stdin.take().unwrap();
    if let Some(text) = stdin {
        input.write_all(text.as_bytes()).unwrap();
    }
    drop(input);
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "kubectl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// A namespace deleted when dropped.
struct Namespace(String);

impl Drop for Namespace {
    fn drop(&mut self) {
        let _ = Command::new("kubectl")
            .args(["delete", "namespace", &self.0, "--wait=false"])
            .output();
    }
}

/// Waits (at most `seconds`) until `done` holds.
fn within(seconds: u64, what: &str, done: impl Fn() -> bool) {
    let started = Instant::now();
    while !done() {
        assert!(
            started.elapsed() < Duration::from_secs(seconds),
            "gave up waiting: {what}"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

#[test]
#[ignore = "needs a real cluster: see the comment above"]
fn real_cluster_binds_a_jobs_gang_makes_its_pod_group_and_says_why_a_pod_waits() {
    let kubeconfig = std::env::var("KUBECONFIG")
        .unwrap_or_else(|_| format!("{}/.kube/config", std::env::var("HOME").unwrap_or_default()));
    let id = std::process::id();
    let namespace = Namespace(format!("kai-policy-e2e-{id}"));
    let scheduler = format!("kai-policy-e2e-{id}");
    kubectl(&["create", "namespace", &namespace.0], None);

    let dir = temp();
    let repo_dir = dir.path().join("repo");
    let policy = format!(
        "queue \"e2e\" {{\n    cpu quota=1\n    namespaces \"{}\"\n}}\n",
        namespace.0
    );
    write_files(&repo_dir, &[("policies/queues.kdl", &policy)]);
    git_commit_all(&repo_dir, "queue e2e");
    let daemon = Daemon::spawn(
        dir.path(),
        repo_dir.to_str().unwrap(),
        &["--kubeconfig", &kubeconfig, "--scheduler-name", &scheduler],
    );
    within(120, "the daemon ready", || daemon.get("/readyz").0 == 200);

    // A Job of two pods that must start together; nothing names a queue: the namespace is the
    // queue's.
    let job = format!(
        r#"{{"apiVersion": "batch/v1", "kind": "Job",
  "metadata": {{"name": "pair", "namespace": "{ns}",
                "annotations": {{"kai.scheduler/batch-min-member": "2"}}}},
  "spec": {{"parallelism": 2, "completions": 2, "template": {{"spec": {{
    "schedulerName": "{scheduler}", "restartPolicy": "Never",
    "containers": [{{"name": "c", "image": "busybox", "command": ["true"],
                     "resources": {{"requests": {{"cpu": "10m", "memory": "16Mi"}}}}}}]}}}}}}}}"#,
        ns = namespace.0
    );
    kubectl(&["apply", "-f", "-"], Some(&job));
    let pods = || -> Vec<Value> {
        let text = kubectl(
            &[
                "get",
                "pods",
                "-n",
                &namespace.0,
                "-l",
                "job-name=pair",
                "-o",
                "json",
            ],
            None,
        );
        serde_json::from_str::<Value>(&text).unwrap()["items"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    };
    within(120, "both pods of the Job bound", || {
        let pods = pods();
        pods.len() == 2 && pods.iter().all(|p| p["spec"]["nodeName"].is_string())
    });

    // Its PodGroup, made by the scheduler, owned by the Job.
    let group: Value = serde_json::from_str(&kubectl(
        &[
            "get",
            "podgroups.scheduling.run.ai",
            "pg-pair",
            "-n",
            &namespace.0,
            "-o",
            "json",
        ],
        None,
    ))
    .unwrap();
    assert_eq!(group["metadata"]["ownerReferences"][0]["kind"], "Job");
    assert_eq!(group["spec"]["minMember"], 2);

    // A pod no node can hold waits, and says so where `kubectl describe pod` shows it.
    let big = format!(
        r#"{{"apiVersion": "v1", "kind": "Pod", "metadata": {{"name": "too-big", "namespace": "{ns}"}},
  "spec": {{"schedulerName": "{scheduler}", "containers": [{{"name": "c", "image": "busybox",
    "resources": {{"requests": {{"cpu": "100000"}}}}}}]}}}}"#,
        ns = namespace.0
    );
    kubectl(&["apply", "-f", "-"], Some(&big));
    within(60, "too-big told why it waits", || {
        let pod: Value = serde_json::from_str(&kubectl(
            &["get", "pod", "too-big", "-n", &namespace.0, "-o", "json"],
            None,
        ))
        .unwrap();
        pod["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|c| {
                c["type"] == "PodScheduled"
                    && c["reason"] == "Unschedulable"
                    && c["message"]
                        .as_str()
                        .is_some_and(|m| m.to_lowercase().contains("cpu"))
            })
    });
    let (status, logs) = daemon.terminate();
    assert_eq!(status, 0, "{}", logs.join("\n"));
}

#[test]
fn a_pod_group_our_types_cannot_read_holds_only_its_own_pods() {
    let in_group = |name: &str, group: &str| {
        let mut pod = pending_pod(name);
        pod["metadata"]["annotations"] = json!({ "pod-group-name": group });
        pod
    };
    let group = |name: &str, spec: Option<Value>| {
        let mut g = json!({ "apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup",
            "metadata": { "name": name, "namespace": "a", "uid": format!("uid-{name}"),
                          "resourceVersion": "1", "creationTimestamp": "2026-01-01T00:00:00Z" } });
        if let Some(spec) = spec {
            g["spec"] = spec;
        }
        g
    };
    // `bare` has no spec (KAI's CRD accepts that); `broken` has a minMember no type can read
    // (a CRD without a schema lets it in). A typed watch fails its whole list on `broken`.
    let api = FakeApi::start_with_groups(
        vec![node("n1")],
        vec![in_group("b0", "bare"), in_group("x0", "broken")],
        vec![
            group("bare", None),
            group("broken", Some(json!({ "minMember": "two", "queue": "a" }))),
        ],
    );
    let state = api.state.clone();
    let (dir, repo) = kube_setup(&api);
    let daemon = kube_daemon(&dir, &repo);
    eventually("b0 bound", || !binds_of(&state, "a/b0").is_empty());
    std::thread::sleep(Duration::from_millis(1000));
    assert!(
        binds_of(&state, "a/x0").is_empty(),
        "its PodGroup cannot be read"
    );
    let (status, logs) = daemon.terminate();
    assert_eq!(status, 0, "{}", logs.join("\n"));
}

/// A pending pod of queue `a` whose device comes through the ResourceClaim `claim` (made from a
/// template, as `status.resourceClaimStatuses` tells), asking no GPU of the device plugin.
fn dra_pod(name: &str, claim: &str) -> Value {
    let mut pod = pending_pod(name);
    pod["spec"]["containers"][0]["resources"] =
        json!({ "claims": [{ "name": "gpu" }], "requests": { "cpu": "1", "memory": "1Gi" } });
    pod["spec"]["resourceClaims"] =
        json!([{ "name": "gpu", "resourceClaimTemplateName": "one-gpu" }]);
    pod["status"]["resourceClaimStatuses"] = json!([{ "name": "gpu", "resourceClaimName": claim }]);
    pod
}

fn dra_claim(name: &str, pod: &str) -> Value {
    json!({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": { "name": name, "namespace": "a", "uid": format!("uid-{name}"),
                      "annotations": { "resource.kubernetes.io/pod-claim-name": "gpu" },
                      "ownerReferences": [{ "apiVersion": "v1", "kind": "Pod", "name": pod,
                                            "uid": format!("uid-{pod}"), "controller": true }] },
        "spec": { "devices": { "requests": [
            { "name": "gpu", "exactly": { "deviceClassName": "gpu.nvidia.com", "allocationMode": "ExactCount", "count": 1 } }
        ]}},
        "status": {}
    })
}

#[test]
fn run_with_numa_against_a_fake_api_server_records_a_pods_zones_before_binding_it() {
    // n1's NodeResourceTopology (as NFD's topology updater publishes it): single-numa-node, two
    // zones of 16 cores and 4 GPUs. Two Guaranteed pods of 12 cores and 2 GPUs take a zone
    // each, each recorded on the pod before it is bound; a third fits the node but no zone.
    let api = FakeApi::start(
        vec![node("n1")],
        ["first", "second", "third"]
            .iter()
            .enumerate()
            .map(|(i, name)| {
                let mut pod = pending_pod(name);
                let r = json!({ "cpu": "12", "memory": "8Gi", "nvidia.com/gpu": "2" });
                pod["spec"]["containers"][0]["resources"] = json!({ "requests": r, "limits": r });
                pod["status"]["qosClass"] = json!("Guaranteed");
                pod["metadata"]["creationTimestamp"] = json!(format!("2026-01-01T00:00:0{i}Z"));
                pod
            })
            .collect(),
    );
    let state = api.state.clone();
    let zone = |name: &str| {
        json!({ "name": name, "type": "Node", "resources": [
            { "name": "cpu", "capacity": "32", "allocatable": "16", "available": "16" },
            { "name": "memory", "capacity": "274877906944", "allocatable": "137438953472",
              "available": "137438953472" },
            { "name": "nvidia.com/gpu", "capacity": "4", "allocatable": "4", "available": "4" } ] })
    };
    state.add_other(
        "/apis/topology.node.k8s.io/v1alpha2/noderesourcetopologies",
        json!({ "apiVersion": "topology.node.k8s.io/v1alpha2", "kind": "NodeResourceTopology",
                "metadata": { "name": "n1" },
                "topologyPolicies": ["SingleNUMANodeContainerLevel"],
                "attributes": [ { "name": "topologyManagerPolicy", "value": "single-numa-node" },
                                { "name": "topologyManagerScope", "value": "container" } ],
                "zones": [zone("node-0"), zone("node-1")] }),
    );
    let (dir, repo) = kube_setup(&api);
    let daemon = Daemon::spawn(
        dir.path(),
        &repo,
        &[
            "--kubeconfig",
            "kubeconfig",
            "--scheduler-name",
            "kai-scheduler",
            "--numa",
        ],
    );
    eventually("/readyz 200", || daemon.get("/readyz").0 == 200);
    eventually("two pods are bound", || {
        binds_of(&state, "a/first") == ["n1"] && binds_of(&state, "a/second") == ["n1"]
    });
    let requests = state.requests.lock().unwrap().clone();
    let mut zones = Vec::new();
    for pod in ["first", "second"] {
        let path = format!("/api/v1/namespaces/a/pods/{pod}");
        let patched = requests
            .iter()
            .position(|r| r.method == "PATCH" && r.path == path)
            .expect("the pod is annotated");
        let bound = requests
            .iter()
            .position(|r| r.method == "POST" && r.path == format!("{path}/binding"))
            .unwrap();
        assert!(
            patched < bound,
            "{pod}: the zones are recorded before the binding"
        );
        let record = requests[patched].body["metadata"]["annotations"]
            ["kai.scheduler/numa-placement-predicted"]
            .as_str()
            .unwrap()
            .to_string();
        let record: Value = serde_json::from_str(&record).unwrap();
        assert_eq!(record[0]["amount"]["cpu"], "12", "{record}");
        assert_eq!(record[0]["amount"]["nvidia.com/gpu"], "2", "{record}");
        zones.push(record[0]["zone"].as_str().unwrap().to_string());
    }
    zones.sort();
    assert_eq!(zones, ["node-0", "node-1"]);
    // The third fits n1 (64 cores, 8 GPUs, 24 cores and 4 GPUs taken) but neither zone.
    std::thread::sleep(Duration::from_millis(1500));
    assert!(binds_of(&state, "a/third").is_empty());
    let conditions = state.bodies("PATCH", "/api/v1/namespaces/a/pods/third/status");
    let message = conditions
        .last()
        .map(|c| c["status"]["conditions"][0]["message"].to_string())
        .unwrap_or_default();
    assert!(message.contains("no NUMA zone with room"), "{message}");
    drop(daemon);
}

#[test]
fn run_against_a_fake_api_server_writes_a_dra_claims_devices_before_binding_its_pod() {
    // n1 has no device-plugin GPU; NVIDIA's DRA driver publishes one GPU on it. Two pods each
    // want one through a claim of their own: the first gets the device, its claim written
    // before the pod is bound (as KAI's binder does); the second has none left and waits.
    let mut n1 = node("n1");
    for list in ["allocatable", "capacity"] {
        n1["status"][list]
            .as_object_mut()
            .unwrap()
            .remove("nvidia.com/gpu");
    }
    let first = dra_pod("first", "first-gpu-x7k2p");
    let mut second = dra_pod("second", "second-gpu-m4q8z");
    second["metadata"]["creationTimestamp"] = json!("2026-01-01T00:00:10Z");
    let api = FakeApi::start(vec![n1], vec![first, second]);
    let state = api.state.clone();
    let (classes, slices, claims) = (
        "/apis/resource.k8s.io/v1/deviceclasses",
        "/apis/resource.k8s.io/v1/resourceslices",
        "/apis/resource.k8s.io/v1/resourceclaims",
    );
    state.add_other(
        classes,
        json!({ "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
                "metadata": { "name": "gpu.nvidia.com" },
                "spec": { "selectors": [{ "cel": { "expression":
                    "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'" } }] } }),
    );
    state.add_other(
        slices,
        json!({ "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
                "metadata": { "name": "n1-gpu.nvidia.com-2dlk7" },
                "spec": { "driver": "gpu.nvidia.com", "nodeName": "n1",
                          "pool": { "name": "n1", "generation": 1, "resourceSliceCount": 1 },
                          "devices": [{ "name": "gpu-0", "attributes": {
                              "type": { "string": "gpu" }, "index": { "int": 0 } } }] } }),
    );
    state.add_other(claims, dra_claim("first-gpu-x7k2p", "first"));
    state.add_other(claims, dra_claim("second-gpu-m4q8z", "second"));
    let (dir, repo) = kube_setup(&api);
    let daemon = kube_daemon(&dir, &repo);
    eventually("the first pod is bound", || {
        binds_of(&state, "a/first") == ["n1"]
    });
    let requests = state.requests.lock().unwrap().clone();
    let claim_path = "/apis/resource.k8s.io/v1/namespaces/a/resourceclaims/first-gpu-x7k2p/status";
    let patched = requests
        .iter()
        .position(|r| r.method == "PATCH" && r.path == claim_path)
        .expect("the claim's status is patched");
    let bound = requests
        .iter()
        .position(|r| r.method == "POST" && r.path == "/api/v1/namespaces/a/pods/first/binding")
        .unwrap();
    assert!(patched < bound, "the claim is written before the binding");
    let status = &requests[patched].body["status"];
    assert_eq!(
        status["reservedFor"],
        json!([{ "resource": "pods", "name": "first", "uid": "uid-first" }])
    );
    assert_eq!(
        status["allocation"]["devices"]["results"],
        json!([{ "request": "gpu", "driver": "gpu.nvidia.com", "pool": "n1", "device": "gpu-0" }])
    );
    assert_eq!(
        status["allocation"]["nodeSelector"]["nodeSelectorTerms"][0]["matchFields"][0]["values"],
        json!(["n1"])
    );
    // The second waits: n1's one GPU (its one DRA device, counted as KAI counts it) is taken.
    std::thread::sleep(Duration::from_millis(1500));
    assert!(binds_of(&state, "a/second").is_empty());
    let conditions = state.bodies("PATCH", "/api/v1/namespaces/a/pods/second/status");
    let message = conditions
        .last()
        .map(|c| c["status"]["conditions"][0]["message"].to_string())
        .unwrap_or_default();
    assert!(
        message.contains("0/1 nodes fit: 1 lacks 1 GPU (most free: 0)"),
        "{message}"
    );
    drop(daemon);
}
