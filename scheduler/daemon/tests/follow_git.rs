//! Following a policy in real Git repositories made with git2: as a `file://` remote (cloned
//! into the state dir, fetched) and as a local checkout. A good commit loads, a broken one is
//! rejected once with its diagnostics, a later good one loads, a force-push back loads the old
//! tip again, a deleted branch and an unreachable remote are reported without losing anything.

use std::path::{Path, PathBuf};

use git2::{Repository, RepositoryInitOptions, Signature};
use kai_policy_compiler::check::check;
use kai_policy_compiler::lower::{CompiledPolicy, SourceInfo};
use kai_policy_compiler::source::{SourceFile, SourceSet, load_dir};
use kai_scheduler_daemon::follow::{Credentials, FollowOptions, Follower, Origin, Outcome};

fn example_policy() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../policies")
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

/// A repository on branch `main` holding the example policy under `policies/`.
fn repo_with_example(dir: &Path) -> Repository {
    let mut init = RepositoryInitOptions::new();
    init.initial_head("main");
    let repo = Repository::init_opts(dir, &init).unwrap();
    copy_dir(&example_policy(), &dir.join("policies"));
    commit_all(&repo, "the example policy");
    repo
}

/// Commits the whole work tree on the current branch; returns the commit id.
fn commit_all(repo: &Repository, message: &str) -> String {
    let mut index = repo.index().unwrap();
    index
        .add_all(["*"], git2::IndexAddOption::DEFAULT, None)
        .unwrap();
    index.update_all(["*"], None).unwrap();
    index.write().unwrap();
    let tree = repo.find_tree(index.write_tree().unwrap()).unwrap();
    let sig = Signature::now("Test", "test@example.invalid").unwrap();
    let parent = repo.head().ok().and_then(|h| h.peel_to_commit().ok());
    let parents: Vec<&git2::Commit> = parent.iter().collect();
    repo.commit(Some("HEAD"), &sig, &sig, message, &tree, &parents)
        .unwrap()
        .to_string()
}

fn write(dir: &Path, path: &str, text: &str) {
    let file = dir.join(path);
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    std::fs::write(file, text).unwrap();
}

/// The digest `kai-policy build policies` gives the policy folder as it is in the work tree now,
/// run from the repository root (files named `policies/…`, as the follower names them).
fn digest_of(dir: &Path) -> String {
    let (sources, early) = load_dir(&dir.join("policies")).unwrap();
    let prefix = format!("{}/", dir.display());
    let relative: Vec<SourceFile> = sources
        .iter()
        .map(|(_, f)| SourceFile::new(f.path.strip_prefix(&prefix).unwrap(), f.text.clone()))
        .collect();
    let checked = check(&SourceSet::new(relative), early);
    assert!(!checked.has_errors());
    CompiledPolicy::new(&checked.policy.unwrap(), SourceInfo::default()).digest
}

fn follower(origin: Origin, state: &Path, path: &str) -> Follower {
    Follower::new(FollowOptions {
        origin,
        branch: "main".to_string(),
        path: path.to_string(),
        state_dir: state.to_path_buf(),
        credentials: Credentials::default(),
    })
}

fn loaded(outcome: Outcome) -> (String, String) {
    match outcome {
        Outcome::Loaded(a) => (a.commit.clone(), a.digest.clone()),
        other => panic!("expected a loaded policy, got {other:?}"),
    }
}

const BROKEN: &str = "queue \"research\" {\n    gpu quota=\"lots\"\n}\n";

/// Good, broken (rejected once, not retried), good again, force-pushed back: for either origin.
fn follows_commits(origin: impl Fn(&Path) -> Origin) {
    let work = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    let repo = repo_with_example(work.path());
    let first = repo.head().unwrap().target().unwrap().to_string();
    let mut f = follower(origin(work.path()), state.path(), "policies");

    let (commit, digest) = loaded(f.check());
    assert_eq!(commit, first);
    assert_eq!(digest, digest_of(work.path()));
    assert!(matches!(f.check(), Outcome::Unchanged));

    write(work.path(), "policies/research.kdl", BROKEN);
    let broken = commit_all(&repo, "a typo");
    match f.check() {
        Outcome::Rejected(r) => {
            assert_eq!(r.commit, broken);
            assert!(r.message.contains("does not compile"), "{}", r.message);
            let errors = r.diagnostics["summary"]["errors"].as_u64().unwrap();
            assert!(errors >= 1, "{}", r.diagnostics);
            let files: Vec<&str> = r.diagnostics["diagnostics"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(|d| d["file"].as_str())
                .collect();
            assert!(
                files.iter().any(|f| f.ends_with("research.kdl")),
                "diagnostics name the file: {files:?}"
            );
        }
        other => panic!("expected a rejection, got {other:?}"),
    }
    assert!(
        matches!(f.check(), Outcome::Unchanged),
        "a rejected tip is not retried until the branch moves"
    );

    std::fs::remove_file(work.path().join("policies/research.kdl")).unwrap();
    let fixed = commit_all(&repo, "remove the broken file");
    let (commit, digest) = loaded(f.check());
    assert_eq!(commit, fixed);
    assert_eq!(digest, digest_of(work.path()));

    // Force-push: the branch goes back to the first commit.
    let target = repo
        .find_commit(git2::Oid::from_str(&first).unwrap())
        .unwrap();
    repo.reset(target.as_object(), git2::ResetType::Hard, None)
        .unwrap();
    let (commit, _) = loaded(f.check());
    assert_eq!(commit, first, "a branch moved back is a new tip");
}

#[test]
fn a_file_remote_is_cloned_and_fetched_through_good_broken_and_force_pushed_commits() {
    follows_commits(|dir| Origin::Remote(format!("file://{}", dir.display())));
}

#[test]
fn a_local_checkout_is_followed_through_good_broken_and_force_pushed_commits() {
    follows_commits(|dir| Origin::Local(dir.to_path_buf()));
}

#[test]
fn a_deleted_branch_and_an_unreachable_remote_are_reported_and_retried() {
    let work = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    let repo = repo_with_example(work.path());
    let url = format!("file://{}", work.path().display());
    let mut f = follower(Origin::Remote(url.clone()), state.path(), "policies");
    let (first, _) = loaded(f.check());

    // The branch disappears: reported, the follower keeps going.
    let head = repo.head().unwrap().peel_to_commit().unwrap();
    repo.branch("other", &head, false).unwrap();
    repo.set_head("refs/heads/other").unwrap();
    repo.find_reference("refs/heads/main")
        .unwrap()
        .delete()
        .unwrap();
    match f.check() {
        Outcome::Unreachable(why) => {
            assert_eq!(why, format!("branch main does not exist in {url}"))
        }
        other => panic!("expected the branch to be missing, got {other:?}"),
    }
    // It comes back at the same commit: nothing new to load.
    repo.branch("main", &head, false).unwrap();
    assert!(matches!(f.check(), Outcome::Unchanged));

    // The remote itself goes away, then comes back.
    let moved = work.path().with_extension("moved");
    std::fs::rename(work.path(), &moved).unwrap();
    match f.check() {
        Outcome::Unreachable(why) => {
            assert!(why.starts_with(&format!("cannot fetch {url}")), "{why}")
        }
        other => panic!("expected an unreachable remote, got {other:?}"),
    }
    std::fs::rename(&moved, work.path()).unwrap();
    assert!(matches!(f.check(), Outcome::Unchanged));
    assert!(!first.is_empty());

    let mut nowhere = follower(
        Origin::Remote("file:///nonexistent/kai-policy.git".to_string()),
        state.path(),
        "policies",
    );
    assert!(matches!(nowhere.check(), Outcome::Unreachable(_)));
}

#[test]
fn the_path_may_name_a_compiled_config_which_is_verified_by_its_digest() {
    let work = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    let repo = repo_with_example(work.path());
    let (sources, early) = load_dir(&work.path().join("policies")).unwrap();
    let config = CompiledPolicy::new(
        &check(&sources, early).policy.unwrap(),
        SourceInfo::default(),
    );
    write(work.path(), "dist/scheduler-config.json", &config.to_json());
    commit_all(&repo, "the compiled config");
    let mut f = follower(
        Origin::Local(work.path().to_path_buf()),
        state.path(),
        "dist/scheduler-config.json",
    );
    let (_, digest) = loaded(f.check());
    assert_eq!(digest, config.digest);

    let tampered = config
        .to_json()
        .replacen("\"priority\": 100", "\"priority\": 7", 1);
    write(work.path(), "dist/scheduler-config.json", &tampered);
    let commit = commit_all(&repo, "edit the config by hand");
    match f.check() {
        Outcome::Rejected(r) => {
            assert_eq!(r.commit, commit);
            assert!(
                r.message.contains("does not match the content"),
                "{}",
                r.message
            );
            assert_eq!(r.diagnostics["summary"]["errors"], 1);
        }
        other => panic!("expected a rejection, got {other:?}"),
    }
}
