//! Helpers for end-to-end tests: run the real binaries in temporary folders and Git repositories.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// The repository root.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Path of a workspace binary, built first so a test never runs a stale one (cargo builds
/// another package's binaries only for a whole-workspace run, not for `--test NAME`).
pub fn binary(name: &str) -> PathBuf {
    static BUILT: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
    let exe = std::env::current_exe().expect("test executable path");
    let dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("target/<profile>");
    let mut built = BUILT.lock().unwrap_or_else(|e| e.into_inner());
    if !built.iter().any(|b| b == name) {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
        let mut build = Command::new(cargo);
        build
            .args(["build", "--quiet", "--bin", name])
            .current_dir(repo_root());
        if dir.file_name().is_some_and(|p| p == "release") {
            build.arg("--release");
        }
        let status = build.status().expect("cargo runs");
        assert!(status.success(), "building {name} failed");
        built.push(name.to_string());
    }
    dir.join(format!("{name}{}", std::env::consts::EXE_SUFFIX))
}

/// One run of a binary: its exit status and output as text.
#[derive(Debug)]
pub struct Run {
    /// Exit status code.
    pub status: i32,
    /// Standard output.
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
}

impl From<Output> for Run {
    fn from(o: Output) -> Self {
        Run {
            status: o.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
        }
    }
}

/// Runs the workspace binary `name` with `args` in `cwd`, colour off as in CI, with `stdin` (if
/// any) written to its standard input.
pub fn run_binary(name: &str, cwd: &Path, args: &[&str], stdin: Option<&[u8]>) -> Run {
    let mut child = Command::new(binary(name))
        .args(args)
        .current_dir(cwd)
        .env("NO_COLOR", "1")
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{name} runs: {e}"));
    // Written from another thread, so a child that answers before it has read everything
    // cannot block both sides on full pipes.
    let input = child.stdin.take();
    std::thread::scope(|scope| {
        if let (Some(mut pipe), Some(bytes)) = (input, stdin) {
            scope.spawn(move || pipe.write_all(bytes).expect("the child reads its input"));
        }
        child.wait_with_output().expect("the child finishes").into()
    })
}

/// Runs `kai-policy` with `args` in `cwd`, colour off as in CI.
pub fn kai_policy(cwd: &Path, args: &[&str]) -> Run {
    run_binary("kai-policy", cwd, args, None)
}

/// Runs `kai-scheduler` with `args` in `cwd`, colour off as in CI.
pub fn kai_scheduler(cwd: &Path, args: &[&str]) -> Run {
    run_binary("kai-scheduler", cwd, args, None)
}

/// A temporary folder, removed when dropped.
pub fn temp() -> tempfile::TempDir {
    tempfile::tempdir().expect("a temporary folder")
}

/// Writes `files` (relative path, text) under `dir`.
pub fn write_files(dir: &Path, files: &[(&str, &str)]) {
    for (path, text) in files {
        let path = dir.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
}

/// Copies the bundled example policy into `dir/policies`.
pub fn copy_example(dir: &Path) {
    fn copy(from: &Path, to: &Path) {
        std::fs::create_dir_all(to).unwrap();
        for entry in std::fs::read_dir(from).unwrap() {
            let entry = entry.unwrap();
            let target = to.join(entry.file_name());
            if entry.file_type().unwrap().is_dir() {
                copy(&entry.path(), &target);
            } else {
                std::fs::copy(entry.path(), target).unwrap();
            }
        }
    }
    copy(&repo_root().join("policies"), &dir.join("policies"));
}

/// Initialises a Git repository in `dir` and commits everything in it; returns the commit id.
pub fn git_commit_all(dir: &Path, message: &str) -> String {
    let repo = git2::Repository::open(dir)
        .or_else(|_| git2::Repository::init(dir))
        .unwrap();
    let mut index = repo.index().unwrap();
    index
        .add_all(["*"], git2::IndexAddOption::DEFAULT, None)
        .unwrap();
    index.write().unwrap();
    let tree = repo.find_tree(index.write_tree().unwrap()).unwrap();
    let sig = git2::Signature::now("Test", "test@example.invalid").unwrap();
    let parent = repo.head().ok().and_then(|h| h.peel_to_commit().ok());
    let parents: Vec<&git2::Commit> = parent.iter().collect();
    repo.commit(Some("HEAD"), &sig, &sig, message, &tree, &parents)
        .unwrap()
        .to_string()
}

/// Runs `kai-policy` as a user whom file permissions apply to, or returns `None` when no such
/// user is at hand (a test of unreadable paths then has nothing to show): the current user when
/// permissions already bind it, otherwise (root ignores them) `nobody` through `setpriv`. `cwd`
/// is opened to everybody so that `nobody` can reach it.
pub fn kai_policy_unprivileged(cwd: &Path, args: &[&str]) -> Option<Run> {
    use std::os::unix::fs::PermissionsExt as _;
    let probe = cwd.join(".permission-probe");
    std::fs::write(&probe, "").ok()?;
    std::fs::set_permissions(&probe, std::fs::Permissions::from_mode(0o000)).ok()?;
    let bound = std::fs::read(&probe).is_err();
    let _ = std::fs::remove_file(&probe);
    let mut command = if bound {
        Command::new(binary("kai-policy"))
    } else {
        let setpriv = ["/usr/bin/setpriv", "/bin/setpriv"]
            .into_iter()
            .find(|p| Path::new(p).exists())?;
        std::fs::set_permissions(cwd, std::fs::Permissions::from_mode(0o755)).ok()?;
        let mut c = Command::new(setpriv);
        c.args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
            .arg(binary("kai-policy"));
        c
    };
    let output = command
        .args(args)
        .current_dir(cwd)
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .output()
        .ok()?;
    Some(output.into())
}
