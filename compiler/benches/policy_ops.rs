//! Benchmarks of the fair-share engine and of `diff`, on the generated 10,000-queue policy.
//!
//! `cargo bench -p kai-policy-compiler --bench policy_ops` prints a table; the goals (issue 3)
//! are fair share for 10,000 queues across three resources under 20 ms, and a diff between two
//! revisions of the policy under 2 s. Shape: `KAI_BENCH_QUEUES`, `KAI_BENCH_FILES`,
//! `KAI_BENCH_LEVELS`; iterations: `KAI_BENCH_ITERS`.

mod common;

use kai_policy_compiler::check::{ParseCache, check, check_with};
use kai_policy_compiler::diff::{self, Side};
use kai_policy_compiler::explain::busy_demand;
use kai_policy_compiler::fairshare;
use kai_policy_compiler::generate::generate;
use kai_policy_compiler::source::SourceSet;

use common::{iters_from_env, spec_from_env, time};

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
    let spec = spec_from_env();
    let iters = iters_from_env(30);
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
    let share = time(1, iters, || fairshare::compute(&policy, &demand));
    println!(
        "{:<44} {:>9.2} {:>9.2} {:>9.2}",
        "fair share, 3 resources (goal < 20 ms)", share.min, share.median, share.mean
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

    // What `kai-policy diff` does: both revisions through one parse cache.
    let run_diff = || {
        let cache = ParseCache::default();
        let side = |rev: &str| {
            let (sources, early, _) = kai_policy_compiler::git::sources_at(&dir, rev).unwrap();
            check_with(&sources, early, &cache)
                .policy
                .expect("compiles")
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
    let diffed = time(1, iters.min(10), run_diff);
    println!(
        "{:<44} {:>9.2} {:>9.2} {:>9.2}",
        "diff of two revisions, from Git (goal < 2 s)", diffed.min, diffed.median, diffed.mean
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
