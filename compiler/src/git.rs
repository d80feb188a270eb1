//! Git at the edge: which commit a policy folder comes from, read with git2 (no `git` binary).

use std::path::Path;

use crate::lower::SourceInfo;

/// The commit checked out where `dir` lives, and whether the policy files under `dir` differ from
/// it. Outside a Git repository (or in one with no commit yet) the revision is `None`.
pub fn source_info(dir: &Path) -> SourceInfo {
    let Ok(repo) = git2::Repository::discover(dir) else {
        return SourceInfo::default();
    };
    let Ok(commit) = repo.head().and_then(|h| h.peel_to_commit()) else {
        return SourceInfo::default();
    };
    SourceInfo {
        revision: Some(commit.id().to_string()),
        dirty: is_dirty(&repo, dir),
    }
}

fn is_dirty(repo: &git2::Repository, dir: &Path) -> bool {
    let Some(workdir) = repo.workdir() else {
        return false;
    };
    let (Ok(workdir), Ok(dir)) = (workdir.canonicalize(), dir.canonicalize()) else {
        return false;
    };
    let mut options = git2::StatusOptions::new();
    options.include_untracked(true).recurse_untracked_dirs(true);
    if let Ok(relative) = dir.strip_prefix(&workdir)
        && !relative.as_os_str().is_empty()
    {
        options.pathspec(relative);
    }
    repo.statuses(Some(&mut options))
        .map(|s| {
            s.iter()
                .any(|e| e.path().is_ok_and(|p| p.ends_with(".kdl")))
        })
        .unwrap_or(false)
}

/// Why a policy could not be read at a revision.
#[derive(Debug, thiserror::Error)]
pub enum RevisionError {
    /// The folder is not inside a Git repository.
    #[error("{0} is not inside a Git repository")]
    NotARepository(std::path::PathBuf),
    /// The revision does not resolve to a commit.
    #[error("unknown revision `{rev}`: {message}")]
    UnknownRevision {
        /// What the user gave.
        rev: String,
        /// What libgit2 said.
        message: String,
    },
    /// The policy folder does not exist at that revision.
    #[error("{path} does not exist at revision `{rev}`")]
    NoPolicy {
        /// The folder, relative to the repository.
        path: String,
        /// The revision.
        rev: String,
    },
    /// Reading the object database failed.
    #[error("reading revision `{rev}`: {message}")]
    Git {
        /// The revision.
        rev: String,
        /// What libgit2 said.
        message: String,
    },
}

/// The policy files under `dir` as they are at `rev`, read from the object database (no
/// checkout, no temporary clone). Display paths are `dir` as given joined with each file's path,
/// as `load_dir` makes them, so diagnostics read the same at every revision.
pub fn sources_at(
    dir: &Path,
    rev: &str,
) -> Result<
    (
        crate::source::SourceSet,
        Vec<crate::diagnostics::Diagnostic>,
        String,
    ),
    RevisionError,
> {
    let repo = git2::Repository::discover(dir)
        .map_err(|_| RevisionError::NotARepository(dir.to_path_buf()))?;
    let commit = repo
        .revparse_single(rev)
        .and_then(|o| o.peel_to_commit())
        .map_err(|e| RevisionError::UnknownRevision {
            rev: rev.to_string(),
            message: e.message().to_string(),
        })?;
    let workdir = repo.workdir().and_then(|w| w.canonicalize().ok());
    let absolute = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
    let relative = workdir
        .as_ref()
        .and_then(|w| absolute.strip_prefix(w).ok())
        .map(|p| p.to_path_buf())
        .unwrap_or_default();
    let (sources, diagnostics) = sources_in_commit(&repo, &commit, &relative, dir, rev)?;
    Ok((sources, diagnostics, commit.id().to_string()))
}

/// The policy files under `relative` (a folder of the repository, empty for its root) in
/// `commit`'s tree, read from the object database. Display paths are `display` joined with each
/// file's path below the folder; errors name the commit as `rev`.
pub fn sources_in_commit(
    repo: &git2::Repository,
    commit: &git2::Commit<'_>,
    relative: &Path,
    display: &Path,
    rev: &str,
) -> Result<
    (
        crate::source::SourceSet,
        Vec<crate::diagnostics::Diagnostic>,
    ),
    RevisionError,
> {
    use crate::source::{FileId, SourceFile, SourceSet, admit};
    let git = |message: git2::Error| RevisionError::Git {
        rev: rev.to_string(),
        message: message.message().to_string(),
    };
    let root = commit.tree().map_err(git)?;
    let tree = if relative.as_os_str().is_empty() {
        root
    } else {
        let entry = root
            .get_path(relative)
            .map_err(|_| RevisionError::NoPolicy {
                path: relative.display().to_string(),
                rev: rev.to_string(),
            })?;
        entry
            .to_object(repo)
            .and_then(|o| o.peel_to_tree())
            .map_err(git)?
    };
    let mut walk = TreeWalk {
        repo,
        root: commit.tree().map_err(git)?,
        files: Vec::new(),
        skipped: Vec::new(),
        seen: std::collections::HashSet::from([relative.to_path_buf()]),
    };
    walk.walk(&tree, relative, "").map_err(git)?;
    // A skipped path stays in the set as an empty file, so its warning can name it (as
    // `load_dir` does in the working tree).
    let mut named: Vec<(String, Result<Vec<u8>, String>)> = walk
        .files
        .into_iter()
        .map(|(p, bytes)| (p, Ok(bytes)))
        .chain(walk.skipped.into_iter().map(|(p, why)| (p, Err(why))))
        .map(|(p, what)| (crate::source::display_path(&display.join(p)), what))
        .collect();
    named.sort();
    let mut files = Vec::new();
    let mut diagnostics = Vec::new();
    for (i, (path, what)) in named.into_iter().enumerate() {
        match what {
            Ok(bytes) => {
                let (text, problem) = admit(FileId(i as u32), &path, bytes);
                files.push(SourceFile::new(path, text));
                diagnostics.extend(problem);
            }
            Err(why) => {
                diagnostics.push(crate::source::skipped(FileId(i as u32), &path, &why));
                files.push(SourceFile::new(path, String::new()));
            }
        }
    }
    Ok((SourceSet::new(files), diagnostics))
}

/// A walk of the policy folder at a revision, following symbolic links (stored as blobs whose
/// text is the target) the way the working tree's walk does.
struct TreeWalk<'r> {
    repo: &'r git2::Repository,
    /// The commit's whole tree: link targets are resolved in it.
    root: git2::Tree<'r>,
    /// Path inside the policy folder, and content.
    files: Vec<(String, Vec<u8>)>,
    /// Path inside the policy folder, and why it was not read.
    skipped: Vec<(String, String)>,
    /// Folders already walked, by their path in the repository: the loop guard. (Not by tree
    /// id: two folders with the same files have one id and are both read.)
    seen: std::collections::HashSet<std::path::PathBuf>,
}

/// Git's mode for a symbolic link.
const LINK_MODE: i32 = 0o120000;

impl TreeWalk<'_> {
    /// Walks `tree`, which is at `at` in the repository and at `prefix` in the policy folder.
    fn walk(&mut self, tree: &git2::Tree, at: &Path, prefix: &str) -> Result<(), git2::Error> {
        for entry in tree.iter() {
            let name = entry.name().unwrap_or_default();
            if name.starts_with('.') {
                continue;
            }
            let here = format!("{prefix}{name}");
            let is_kdl = name.ends_with(".kdl");
            match entry.kind() {
                Some(git2::ObjectType::Tree) => {
                    let sub = entry.to_object(self.repo)?.peel_to_tree()?;
                    self.folder(&sub, &at.join(name), &here)?;
                }
                Some(git2::ObjectType::Blob) if entry.filemode() == LINK_MODE => {
                    let link = entry.to_object(self.repo)?.peel_to_blob()?;
                    let target = String::from_utf8_lossy(link.content()).into_owned();
                    self.follow(at, &here, &target, is_kdl)?;
                }
                Some(git2::ObjectType::Blob) if is_kdl => {
                    let blob = entry.to_object(self.repo)?.peel_to_blob()?;
                    self.files.push((here, blob.content().to_vec()));
                }
                _ => {}
            }
        }
        Ok(())
    }

    fn folder(&mut self, tree: &git2::Tree, at: &Path, here: &str) -> Result<(), git2::Error> {
        if self.seen.insert(at.to_path_buf()) {
            self.walk(tree, at, &format!("{here}/"))
        } else {
            self.skipped.push((
                here.to_string(),
                "it leads to a folder that is already read (a symbolic link loop, or a second link to one folder)".into(),
            ));
            Ok(())
        }
    }

    /// A link at `here` (in a folder that is at `at` in the repository) to `target`.
    fn follow(
        &mut self,
        at: &Path,
        here: &str,
        target: &str,
        is_kdl: bool,
    ) -> Result<(), git2::Error> {
        let missing = |why: &str| format!("it is a symbolic link to `{target}`, which {why}");
        let Some(resolved) = normalize(&at.join(target)) else {
            self.skipped
                .push((here.to_string(), missing("is outside the repository")));
            return Ok(());
        };
        let entry = match self.root.get_path(&resolved) {
            Ok(entry) => entry,
            Err(_) => {
                self.skipped
                    .push((here.to_string(), missing("does not exist at this revision")));
                return Ok(());
            }
        };
        match entry.kind() {
            Some(git2::ObjectType::Tree) => {
                let tree = entry.to_object(self.repo)?.peel_to_tree()?;
                self.folder(&tree, &resolved, here)
            }
            Some(git2::ObjectType::Blob) if entry.filemode() == LINK_MODE => {
                self.skipped.push((
                    here.to_string(),
                    missing("is itself a symbolic link (not followed at a revision)"),
                ));
                Ok(())
            }
            Some(git2::ObjectType::Blob) if is_kdl => {
                let blob = entry.to_object(self.repo)?.peel_to_blob()?;
                self.files.push((here.to_string(), blob.content().to_vec()));
                Ok(())
            }
            _ => Ok(()),
        }
    }
}

/// `a/b/../c` → `a/c`; `None` when `..` climbs above the repository.
fn normalize(path: &Path) -> Option<std::path::PathBuf> {
    let mut out = std::path::PathBuf::new();
    for part in path.components() {
        match part {
            std::path::Component::Normal(p) => out.push(p),
            std::path::Component::ParentDir => {
                if !out.pop() {
                    return None;
                }
            }
            std::path::Component::CurDir => {}
            _ => return None,
        }
    }
    Some(out)
}
