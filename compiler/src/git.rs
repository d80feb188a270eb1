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
