//! Reload latency: a commit to the policy repository until `/policy` shows it active, with the
//! 10,000-queue generated policy, for a watched local checkout, for a `file://` remote
//! fetched every second, and for git-sync's layout (a link swapped to a new worktree). Runs the real binary (`kai-scheduler run`), as an operator would.
//!
//! `cargo bench -p kai-scheduler-daemon --bench reload` (`KAI_BENCH_RELOADS=N`: commits per
//! origin, default 5).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use git2::{Repository, RepositoryInitOptions, Signature};
use kai_policy_compiler::generate::{GenerateSpec, generate};

fn commit_all(repo: &Repository, message: &str) -> String {
    let mut index = repo.index().expect("index");
    index
        .add_all(["*"], git2::IndexAddOption::DEFAULT, None)
        .expect("add");
    index.write().expect("index written");
    let tree = repo
        .find_tree(index.write_tree().expect("tree"))
        .expect("tree");
    let sig = Signature::now("Bench", "bench@example.invalid").expect("signature");
    let parent = repo.head().ok().and_then(|h| h.peel_to_commit().ok());
    let parents: Vec<&git2::Commit> = parent.iter().collect();
    repo.commit(Some("HEAD"), &sig, &sig, message, &tree, &parents)
        .expect("commit")
        .to_string()
}

fn get(address: &str, path: &str) -> String {
    let Ok(mut stream) = TcpStream::connect(address) else {
        return String::new();
    };
    let _ = write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: b\r\nConnection: close\r\n\r\n"
    );
    let mut response = String::new();
    let _ = stream.read_to_string(&mut response);
    response
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default()
}

fn active_commit(address: &str) -> Option<String> {
    let doc: serde_json::Value = serde_json::from_str(&get(address, "/policy")).ok()?;
    doc["commit"].as_str().map(str::to_string)
}

fn start(dir: &Path, origin: &str, poll: &str) -> (Child, String) {
    let cluster = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/cluster.yaml");
    let mut child = Command::new(env!("CARGO_BIN_EXE_kai-scheduler"))
        .args(["run", "--policy-repo", origin, "--poll", poll, "--cluster"])
        .arg(cluster)
        .args([
            "--listen",
            "127.0.0.1:0",
            "--period",
            "1s",
            "--log-format",
            "json",
        ])
        .args(["--state-dir", "state"])
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kai-scheduler runs");
    let stderr = child.stderr.take().expect("stderr");
    let mut lines = BufReader::new(stderr).lines();
    let address = loop {
        let line = lines.next().expect("the daemon logs").expect("a log line");
        let v: serde_json::Value = serde_json::from_str(&line).unwrap_or_default();
        if v["fields"]["message"] == "listening" {
            break v["fields"]["address"]
                .as_str()
                .unwrap_or_default()
                .to_string();
        }
    };
    std::thread::spawn(move || for _ in lines {});
    (child, address)
}

fn wait_for(address: &str, commit: &str, limit: Duration) -> Duration {
    let started = Instant::now();
    while active_commit(address).as_deref() != Some(commit) {
        assert!(
            started.elapsed() < limit,
            "{commit} not active after {limit:?}"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
    started.elapsed()
}

/// How the daemon is pointed at the policy repository.
#[derive(Clone, Copy, PartialEq)]
enum Source {
    /// The working checkout itself, watched.
    Local,
    /// `file://` to it, polled every second.
    Remote,
    /// git-sync's layout: a link to a worktree, swapped to a fresh clone at each commit (timed
    /// from the swap).
    GitSync,
}

fn measure(name: &str, source: Source, reloads: usize) {
    let dir = tempfile::tempdir().expect("temporary folder");
    let work = dir.path().join("repo");
    let mut init = RepositoryInitOptions::new();
    init.initial_head("main");
    let repo = Repository::init_opts(&work, &init).expect("repository");
    for file in generate(&GenerateSpec::default()) {
        let path = work.join("policies").join(&file.path);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("folder");
        std::fs::write(path, &file.text).expect("policy file");
    }
    let first = commit_all(&repo, "10,000 queues");
    let link = dir.path().join("git").join("policy");
    let worktree = |n: usize| {
        let at = dir.path().join("git/.worktrees").join(n.to_string());
        Repository::clone(&format!("file://{}", work.display()), &at).expect("worktree");
        let staged = dir.path().join("git/policy.tmp");
        std::os::unix::fs::symlink(&at, &staged).expect("link");
        std::fs::rename(&staged, &link).expect("swap");
    };
    let origin = match source {
        Source::Remote => format!("file://{}", work.display()),
        Source::Local => work.display().to_string(),
        Source::GitSync => {
            worktree(0);
            link.display().to_string()
        }
    };
    let poll = if source == Source::Remote {
        "1s"
    } else {
        "30s"
    };
    let (mut child, address) = start(dir.path(), &origin, poll);
    wait_for(&address, &first, Duration::from_secs(120));
    let mut times = Vec::new();
    for i in 0..reloads {
        // A new top-level queue: the digest changes, the policy stays valid.
        std::fs::write(
            work.join("policies/zz-bench.kdl"),
            format!("queue \"bench-{i}\" {{\n    gpu quota=0\n}}\n"),
        )
        .expect("policy file");
        let commit = commit_all(&repo, "one more queue");
        if source == Source::GitSync {
            worktree(i + 1);
        }
        times.push(wait_for(&address, &commit, Duration::from_secs(60)));
        if source == Source::GitSync {
            // git-sync deletes the worktree it swapped away from.
            let old = dir.path().join("git/.worktrees").join(i.to_string());
            std::fs::remove_dir_all(old).expect("old worktree");
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    times.sort();
    let ms = |d: &Duration| d.as_secs_f64() * 1000.0;
    println!(
        "{name}: commit -> active, 10,000 queues: median {:.0} ms, fastest {:.0} ms, slowest {:.0} ms ({} commits)",
        ms(&times[times.len() / 2]),
        ms(&times[0]),
        ms(&times[times.len() - 1]),
        times.len()
    );
}

fn main() {
    let reloads = std::env::var("KAI_BENCH_RELOADS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5usize)
        .max(1);
    measure("watched local checkout", Source::Local, reloads);
    measure("file:// remote, --poll 1s", Source::Remote, reloads);
    measure(
        "git-sync link swap (timed from the swap)",
        Source::GitSync,
        reloads,
    );
}
