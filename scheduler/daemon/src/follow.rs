//! Following a policy in Git (edge): a remote cloned once into a cache and fetched on every
//! poll, or a local checkout (kept fresh by a git-sync sidecar) read where it is. Each new tip is
//! compiled here, off the scheduling thread; the daemon swaps the result in between two cycles.
//!
//! A tip is examined once: a commit that does not compile is reported and not retried until the
//! branch moves (a force-push back to an older commit counts as moving).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

use git2::{FetchOptions, Oid, RemoteCallbacks, Repository};
use kai_policy_compiler::check;
use kai_policy_compiler::diagnostics::render_json;
use kai_policy_compiler::lower::{CompiledPolicy, SourceInfo, config};
use kai_policy_compiler::model::Policy;
use serde_json::{Value, json};

/// Where the policy repository is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// A URL (`https://`, `ssh://`, `file://`, or `user@host:path`): cloned and fetched.
    Remote(String),
    /// A local checkout: its `HEAD` is followed.
    Local(PathBuf),
}

impl Origin {
    /// A URL is remote; anything else is a local path.
    pub fn parse(text: &str) -> Origin {
        let remote = text.contains("://")
            || (text.contains('@') && text.contains(':') && !Path::new(text).exists());
        if remote {
            Origin::Remote(text.to_string())
        } else {
            Origin::Local(PathBuf::from(text))
        }
    }
}

/// How to reach a private remote. Tried in order: the SSH agent, the key file, the token.
#[derive(Debug, Clone, Default)]
pub struct Credentials {
    /// A private SSH key file (`--ssh-key`).
    pub ssh_key: Option<PathBuf>,
    /// A token for HTTPS (from `--git-token-file`, `--git-credentials` or
    /// `KAI_POLICY_GIT_TOKEN`).
    pub token: Option<String>,
    /// The user name that goes with the token (`--git-credentials`'s `username`) when the URL
    /// names none [default: `x-access-token`].
    pub username: Option<String>,
}

/// What to follow.
#[derive(Debug, Clone)]
pub struct FollowOptions {
    /// The repository.
    pub origin: Origin,
    /// The branch of a remote (a local checkout follows its `HEAD`).
    pub branch: String,
    /// The policy folder, or a compiled `scheduler-config.json`, relative to the repository root.
    pub path: String,
    /// Where the clone of a remote is cached.
    pub state_dir: PathBuf,
    /// For private remotes.
    pub credentials: Credentials,
}

/// A compiled policy, ready to schedule with. Immutable: a reload makes a new one.
#[derive(Debug)]
pub struct Active {
    /// The checked policy the cycle takes.
    pub policy: Policy,
    /// `sha256:` digest of its compiled config.
    pub digest: String,
    /// The commit it comes from.
    pub commit: String,
    /// When it was compiled.
    pub loaded_at: SystemTime,
}

impl Active {
    /// The commit's first 12 hex digits, as logs and reasons name it.
    pub fn short(&self) -> &str {
        &self.commit[..12.min(self.commit.len())]
    }
}

/// A tip that did not compile.
#[derive(Debug, Clone)]
pub struct Rejected {
    /// The commit.
    pub commit: String,
    /// One line: why.
    pub message: String,
    /// Its diagnostics, in the JSON diagnostic format of `kai-policy check --format json`.
    pub diagnostics: Value,
    /// When it was examined.
    pub at: SystemTime,
}

/// The result of one look at the repository.
#[derive(Debug)]
pub enum Outcome {
    /// The tip is the one examined last time.
    Unchanged,
    /// A new tip compiled.
    Loaded(Arc<Active>),
    /// A new tip did not compile.
    Rejected(Rejected),
    /// The repository or the branch could not be read; the next look tries again.
    Unreachable(String),
}

/// Follows one branch of one repository.
pub struct Follower {
    options: FollowOptions,
    last: Option<Oid>,
}

impl Follower {
    /// A follower that has examined nothing yet.
    pub fn new(options: FollowOptions) -> Self {
        Follower {
            options,
            last: None,
        }
    }

    /// What it follows.
    pub fn options(&self) -> &FollowOptions {
        &self.options
    }

    /// Fetches (a remote) or reads `HEAD` (a local checkout), and compiles the tip if it moved.
    pub fn check(&mut self) -> Outcome {
        let (repo, tip) = match self.tip() {
            Ok(found) => found,
            Err(why) => return Outcome::Unreachable(why),
        };
        if self.last == Some(tip) {
            return Outcome::Unchanged;
        }
        self.last = Some(tip);
        let commit = tip.to_string();
        match compile(&repo, tip, &self.options.path) {
            Ok((policy, digest)) => Outcome::Loaded(Arc::new(Active {
                policy,
                digest,
                commit,
                loaded_at: SystemTime::now(),
            })),
            Err((message, diagnostics)) => Outcome::Rejected(Rejected {
                commit,
                message,
                diagnostics,
                at: SystemTime::now(),
            }),
        }
    }

    fn tip(&self) -> Result<(Repository, Oid), String> {
        match &self.options.origin {
            Origin::Local(path) => {
                let repo = Repository::discover(path).map_err(|e| {
                    format!("{} is not a Git checkout: {}", path.display(), e.message())
                })?;
                let head = repo.head().and_then(|h| h.peel_to_commit()).map_err(|e| {
                    format!("{}: no commit checked out: {}", path.display(), e.message())
                })?;
                let id = head.id();
                drop(head);
                Ok((repo, id))
            }
            Origin::Remote(url) => {
                let repo = self.fetch(url)?;
                let name = format!("refs/remotes/origin/{}", self.options.branch);
                let id = repo.refname_to_id(&name).map_err(|_| {
                    format!("branch {} does not exist in {url}", self.options.branch)
                })?;
                Ok((repo, id))
            }
        }
    }

    /// Opens (or creates) the bare cache of `url` and fetches the branch into it, force-pushes
    /// and deletions included.
    fn fetch(&self, url: &str) -> Result<Repository, String> {
        let cache = self.options.state_dir.join("git").join(cache_name(url));
        let repo = match Repository::open_bare(&cache) {
            Ok(repo) => repo,
            Err(_) => {
                std::fs::create_dir_all(&cache)
                    .map_err(|e| format!("cannot create {}: {e}", cache.display()))?;
                let repo = Repository::init_bare(&cache)
                    .map_err(|e| format!("cannot create {}: {}", cache.display(), e.message()))?;
                repo.remote("origin", url)
                    .map_err(|e| format!("{url}: {}", e.message()))?;
                repo
            }
        };
        {
            let mut remote = repo
                .find_remote("origin")
                .map_err(|e| format!("{}: {}", cache.display(), e.message()))?;
            let branch = &self.options.branch;
            let refspec = format!("+refs/heads/{branch}:refs/remotes/origin/{branch}");
            let mut options = FetchOptions::new();
            options
                .remote_callbacks(callbacks(&self.options.credentials))
                .prune(git2::FetchPrune::On)
                .download_tags(git2::AutotagOption::None);
            remote
                .fetch(&[&refspec], Some(&mut options), None)
                .map_err(|e| format!("cannot fetch {url}: {}", e.message()))?;
            // An explicit refspec is not pruned when its branch is deleted: ask what the remote has.
            let listed = remote.list().map(|heads| {
                heads
                    .iter()
                    .any(|h| h.name() == format!("refs/heads/{branch}"))
            });
            if listed == Ok(false)
                && let Ok(mut r) = repo.find_reference(&format!("refs/remotes/origin/{branch}"))
            {
                let _ = r.delete();
            }
        }
        Ok(repo)
    }
}

/// A file name for the cache of `url` (FNV-1a of the URL: stable, no characters to escape).
fn cache_name(url: &str) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for b in url.bytes() {
        hash = (hash ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    format!("{hash:016x}.git")
}

/// Credentials for libgit2, tried once each: it calls back again after every failure.
fn callbacks(credentials: &Credentials) -> RemoteCallbacks<'_> {
    let mut callbacks = RemoteCallbacks::new();
    let mut tried = 0u32;
    callbacks.credentials(move |_url, username, allowed| {
        tried += 1;
        let user = username.unwrap_or("git");
        if allowed.contains(git2::CredentialType::SSH_KEY) {
            if tried == 1 {
                return git2::Cred::ssh_key_from_agent(user);
            }
            if let (2, Some(key)) = (tried, &credentials.ssh_key) {
                return git2::Cred::ssh_key(user, None, key, None);
            }
        }
        if allowed.contains(git2::CredentialType::USER_PASS_PLAINTEXT)
            && tried <= 3
            && let Some(token) = &credentials.token
        {
            let user = username
                .or(credentials.username.as_deref())
                .unwrap_or("x-access-token");
            return git2::Cred::userpass_plaintext(user, token);
        }
        Err(git2::Error::from_str(
            "no credentials accepted (SSH agent, --ssh-key, KAI_POLICY_GIT_TOKEN or --git-token-file)",
        ))
    });
    callbacks
}

/// Compiles the policy at `path` in `tip`'s tree: a folder of `.kdl` files, or a compiled
/// `scheduler-config.json` (verified by its digest). On failure: one line and the diagnostics.
fn compile(repo: &Repository, tip: Oid, path: &str) -> Result<(Policy, String), (String, Value)> {
    let short = &tip.to_string()[..12];
    let fail = |message: String| {
        let doc = json!({
            "diagnostics": [{
                "code": "policy-source",
                "severity": "error",
                "message": message,
                "help": null,
                "file": path,
                "line": 0,
                "column": 0,
                "span": {"offset": 0, "length": 0},
                "related": [],
            }],
            "summary": {"errors": 1, "warnings": 0},
        });
        (message, doc)
    };
    let commit = repo
        .find_commit(tip)
        .map_err(|e| fail(format!("commit {short}: {}", e.message())))?;
    let tree = commit
        .tree()
        .map_err(|e| fail(format!("commit {short}: {}", e.message())))?;
    let relative = Path::new(path.trim_matches('/'));
    let is_file = !relative.as_os_str().is_empty()
        && tree
            .get_path(relative)
            .map_err(|_| fail(format!("commit {short} has no {path}")))?
            .kind()
            == Some(git2::ObjectType::Blob);
    if is_file {
        let blob = tree
            .get_path(relative)
            .and_then(|e| e.to_object(repo))
            .and_then(|o| o.peel_to_blob())
            .map_err(|e| fail(format!("commit {short}: {path}: {}", e.message())))?;
        let text = std::str::from_utf8(blob.content())
            .map_err(|_| fail(format!("commit {short}: {path} is not UTF-8 text")))?;
        let (config, policy) = config::parse(path, text).map_err(|e| fail(e.to_string()))?;
        return Ok((policy, config.digest));
    }
    let (sources, early) =
        kai_policy_compiler::git::sources_in_commit(repo, &commit, relative, relative, short)
            .map_err(|e| fail(e.to_string()))?;
    let checked = check::check(&sources, early);
    let failed = checked.has_errors();
    match checked.policy.filter(|_| !failed) {
        Some(policy) => {
            let info = SourceInfo {
                revision: Some(tip.to_string()),
                dirty: false,
            };
            let digest = CompiledPolicy::new(&policy, info).digest;
            Ok((policy, digest))
        }
        None => {
            let errors = checked.diagnostics.iter().filter(|d| d.is_error()).count();
            let first = checked
                .diagnostics
                .iter()
                .find(|d| d.is_error())
                .map_or(String::new(), |d| format!(": {}", d.message));
            let doc = serde_json::from_str(&render_json(&checked.diagnostics, &sources))
                .unwrap_or(Value::Null);
            let noun = if errors == 1 { "error" } else { "errors" };
            Err((
                format!("commit {short} does not compile ({errors} {noun}{first})"),
                doc,
            ))
        }
    }
}
