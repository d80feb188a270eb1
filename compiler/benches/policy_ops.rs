//! Benchmarks of the fair-share engine and of `diff`, on the generated 10,000-queue policy.
//!
//! `cargo bench -p kai-policy-compiler --bench policy_ops` prints a table; the goals (issue 3)
//! are fair share for 10,000 queues across three resources under 20 ms, and a diff between two
//! revisions of the policy under 2 s. Shape: `KAI_BENCH_QUEUES`, `KAI_BENCH_FILES`,
//! `KAI_BENCH_LEVELS`; iterations: `KAI_BENCH_ITERS`.

use std::time::{Duration, Instant};

use kai_policy_compiler::check::check;
use kai_policy_compiler::diff::{self, Side};
use kai_policy_compiler::explain::busy_demand;
use kai_policy_compiler::fairshare;
use kai_policy_compiler::generate::{GenerateSpec, generate};
use kai_policy_compiler::source::SourceSet;

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn stats(mut samples: Vec<Duration>) -> (f64, f64, f64) {
    samples.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let mean = samples.iter().map(|d| ms(*d)).sum::<f64>() / samples.len() as f64;
    (ms(samples[0]), ms(samples[samples.len() / 2]), mean)
}

fn time<T>(iters: usize, mut f: impl FnMut() -> T) -> (f64, f64, f64) {
    std::hint::black_box(f());
    let samples = (0..iters)
        .map(|_| {
            let t = Instant::now();
            std::hint::black_box(f());
            t.elapsed()
        })
        .collect();
    stats(samples)
}

fn commit_all(repo: &git2::Repository, message: &str) -> String {
    let mut index = repo.index().unwrap();
    index
        .add_all(["*"], git2::IndexAddOption::DEFAULT, None)
        .unwrap();
    index.update_all(["*"], None).unwrap();
    index.write().unwrap();
    let tree = repo.find_tree(index.write_tree().unwrap()).unwrap();
    let sig = git2::Signature::now("bench", "bench@example.invalid").unwrap();
    let parent = repo.head().ok().and_then(|h| h.peel_to_commit().ok());
    let parents: Vec<&git2::Commit> = parent.iter().collect();
    repo.commit(Some("HEAD"), &sig, &sig, message, &tree, &parents)
        .unwrap()
        .to_string()
}

fn main() {
    let defaults = GenerateSpec::default();
    let spec = GenerateSpec::with_shape(
        env_usize("KAI_BENCH_QUEUES", defaults.queues),
        env_usize("KAI_BENCH_FILES", defaults.files),
        env_usize("KAI_BENCH_LEVELS", defaults.levels),
    );
    let iters = env_usize("KAI_BENCH_ITERS", 30).max(1);
    let files = generate(&spec);
    let checked = check(&SourceSet::new(files.clone()), Vec::new());
    let policy = checked.policy.expect("the generated policy checks clean");
    let demand = busy_demand(&policy);
    println!(
        "policy: {} queues, {} levels, {} files",
        policy.queues.len(),
        spec.levels,
        files.len()
    );
    println!(
        "{:<44} {:>9} {:>9} {:>9}",
        "operation", "min ms", "median", "mean"
    );
    let (min, median, mean) = time(iters, || fairshare::compute(&policy, &demand));
    println!(
        "{:<44} {min:>9.2} {median:>9.2} {mean:>9.2}",
        "fair share, 3 resources (goal < 20 ms)"
    );

    // Two revisions in a real Git repository: the second changes one team's weight.
    let temp = tempfile::tempdir().unwrap();
    let repo = git2::Repository::init(temp.path()).unwrap();
    let dir = temp.path().join("policies");
    for f in &files {
        let path = dir.join(&f.path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, &f.text).unwrap();
    }
    let base = commit_all(&repo, "base");
    let team = files
        .iter()
        .find(|f| f.path.starts_with("teams/") && f.text.contains("weight="))
        .expect("a team file with a weight");
    let edited = edit_weight(&team.text);
    std::fs::write(dir.join(&team.path), edited).unwrap();
    let head = commit_all(&repo, "head");

    let run_diff = || {
        let side = |rev: &str| {
            let (sources, early, _) = kai_policy_compiler::git::sources_at(&dir, rev).unwrap();
            check(&sources, early).policy.expect("compiles")
        };
        let (b, h) = (side(&base), side(&head));
        let (bd, hd) = (busy_demand(&b), busy_demand(&h));
        let report = diff::compare(
            &Side {
                policy: &b,
                demand: &bd,
                label: "base".into(),
            },
            &Side {
                policy: &h,
                demand: &hd,
                label: "head".into(),
            },
        )
        .unwrap();
        assert!(!report.is_empty());
        diff::render_markdown(&report)
    };
    let (min, median, mean) = time(iters.min(10), run_diff);
    println!(
        "{:<44} {min:>9.2} {median:>9.2} {mean:>9.2}",
        "diff of two revisions, from Git (goal < 2 s)"
    );
}

/// Raises the first over-quota weight in a team file by 1: always valid, and it moves fair shares.
fn edit_weight(text: &str) -> String {
    let at = text.find("weight=").expect("the team file sets a weight") + "weight=".len();
    let end = at
        + text[at..]
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(text.len() - at);
    let weight: f64 = text[at..end].parse().expect("a numeric weight");
    format!("{}{}{}", &text[..at], weight + 1.0, &text[end..])
}
