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
    let mut found: Vec<(String, Vec<u8>)> = Vec::new();
    let mut failure = None;
    tree.walk(git2::TreeWalkMode::PreOrder, |prefix, entry| {
        let name = entry.name().unwrap_or_default();
        if entry.kind() == Some(git2::ObjectType::Tree) && name.starts_with('.') {
            return git2::TreeWalkResult::Skip;
        }
        if entry.kind() == Some(git2::ObjectType::Blob) && name.ends_with(".kdl") {
            match entry.to_object(repo).and_then(|o| o.peel_to_blob()) {
                Ok(blob) => found.push((format!("{prefix}{name}"), blob.content().to_vec())),
                Err(e) => failure = Some(e),
            }
        }
        git2::TreeWalkResult::Ok
    })
    .map_err(git)?;
    if let Some(e) = failure {
        return Err(git(e));
    }
    let mut named: Vec<(String, Vec<u8>)> = found
        .into_iter()
        .map(|(p, bytes)| (crate::source::display_path(&display.join(p)), bytes))
        .collect();
    named.sort();
    let mut files = Vec::new();
    let mut diagnostics = Vec::new();
    for (i, (path, bytes)) in named.into_iter().enumerate() {
        let (text, problem) = admit(FileId(i as u32), &path, bytes);
        files.push(SourceFile::new(path, text));
        diagnostics.extend(problem);
    }
    Ok((SourceSet::new(files), diagnostics))
}
