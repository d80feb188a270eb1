//! The watch on a local checkout that wakes the policy follower: its files and `.git`; the
//! folder holding the path, or, when the path is a symlink (git-sync's `--link`), the folders
//! holding each link on the way to the checkout, where git-sync swaps the link to a new
//! worktree. When the path comes to name another folder (a link swapped, a checkout replaced),
//! that folder is watched instead.

use std::path::{Path, PathBuf};

use notify::{self, Event, EventKind, RecommendedWatcher, RecursiveMode, Watcher};

/// Links followed at most from the path given to the checkout.
const MAX_LINKS: usize = 8;

/// A watch on a local checkout; dropping it stops the watch.
pub struct CheckoutWatch {
    watcher: RecommendedWatcher,
    path: PathBuf,
    /// The folder the checkout's watch was set on (device and inode), while it is watched:
    /// none while the path does not exist yet.
    tree: Option<(u64, u64)>,
    /// Why the checkout could not be watched, when it could not: reported once.
    failed: Option<String>,
}

impl CheckoutWatch {
    /// Watches `path`, calling `wake` on every change that may move the checkout's `HEAD`:
    /// anything written under it, and a link on the way to it created, renamed or removed.
    /// Opening and reading files wakes nothing (the follower's own reads would otherwise wake
    /// it again for ever).
    pub fn new(path: &Path, wake: impl Fn() + Send + 'static) -> Result<CheckoutWatch, String> {
        // `a/b/` would follow the link `b` before it is looked at; events name absolute paths.
        let path: PathBuf = path.components().collect();
        let path = std::path::absolute(&path).unwrap_or(path);
        let cannot =
            |at: &Path, e: &dyn std::fmt::Display| format!("cannot watch {}: {e}", at.display());
        let links = links_to(&path);
        let (root, names) = (path.clone(), links.clone());
        let mut watcher = notify::recommended_watcher(move |event: notify::Result<Event>| {
            let Ok(event) = event else {
                wake();
                return;
            };
            // An overflowed queue may have hidden a change: look.
            if event.need_rescan() {
                wake();
                return;
            }
            if matches!(event.kind, EventKind::Access(_)) {
                return;
            }
            if event
                .paths
                .iter()
                .any(|p| p.starts_with(&root) || names.contains(p))
            {
                wake();
            }
        })
        .map_err(|e| cannot(&path, &e))?;
        // The path's own folder sees it replaced, or made; a link's, the link swapped.
        let mut folders: Vec<&Path> = links.iter().map(|l| folder_of(l)).collect();
        if links.is_empty() {
            folders.push(folder_of(&path));
        }
        folders.dedup();
        for folder in folders {
            watcher
                .watch(folder, RecursiveMode::NonRecursive)
                .map_err(|e| cannot(folder, &e))?;
        }
        let mut watch = CheckoutWatch {
            watcher,
            path,
            tree: None,
            failed: None,
        };
        watch.refresh();
        match &watch.failed {
            Some(why) if links.is_empty() => Err(cannot(&watch.path, why)),
            _ => Ok(watch),
        }
    }

    /// Watches the checkout if it was missing until now (a git-sync link made after start), or
    /// if the path names another folder than the one watched: a link swapped to a new worktree,
    /// a checkout moved away and another put in its place. Cheap when nothing changed: one
    /// `stat`.
    pub fn refresh(&mut self) {
        use std::os::unix::fs::MetadataExt;
        let now = std::fs::metadata(&self.path)
            .ok()
            .map(|m| (m.dev(), m.ino()));
        if self.tree.is_some() && self.tree == now {
            return;
        }
        if self.tree.take().is_some() {
            // The watches on the old folder go; an error only says they were gone already.
            let _ = self.watcher.unwatch(&self.path);
        }
        match self.watcher.watch(&self.path, RecursiveMode::Recursive) {
            Ok(()) => {
                self.tree = now;
                self.failed = None;
            }
            Err(e) => {
                let why = e.to_string();
                if self.failed.as_ref() != Some(&why) {
                    tracing::warn!("cannot watch {} yet: {why}", self.path.display());
                    self.failed = Some(why);
                }
            }
        }
    }
}

/// The folder holding `path` (`.` for a bare name).
fn folder_of(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

/// The links on the way from `path` to what it finally names, `path` first; a path that does
/// not exist yet counts as one (git-sync makes its link after its first sync).
fn links_to(path: &Path) -> Vec<PathBuf> {
    let mut links = Vec::new();
    let mut at = path.to_path_buf();
    while links.len() < MAX_LINKS {
        match std::fs::symlink_metadata(&at) {
            Ok(m) if m.file_type().is_symlink() => {
                let Ok(target) = std::fs::read_link(&at) else {
                    break;
                };
                // `a/b/` would be followed before it is looked at, as for the path given.
                let next: PathBuf = folder_of(&at).join(target).components().collect();
                links.push(at);
                at = next;
            }
            Ok(_) => break,
            Err(_) => {
                links.push(at);
                break;
            }
        }
    }
    links
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc;
    use std::time::Duration;

    use super::*;

    fn watch(path: &Path) -> (CheckoutWatch, mpsc::Receiver<()>) {
        let (tx, rx) = mpsc::channel();
        let watch = CheckoutWatch::new(path, move || {
            let _ = tx.send(());
        })
        .unwrap();
        (watch, rx)
    }

    fn woken(rx: &mpsc::Receiver<()>) -> bool {
        let woke = rx.recv_timeout(Duration::from_millis(300)).is_ok();
        // The rest of the same change's events, which may still be on their way.
        std::thread::sleep(Duration::from_millis(100));
        while rx.try_recv().is_ok() {}
        woke
    }

    #[test]
    fn reading_the_checkout_wakes_nothing_and_writing_it_does() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join(".git")).unwrap();
        std::fs::write(dir.path().join(".git/HEAD"), "ref: refs/heads/main\n").unwrap();
        let (_watch, rx) = watch(dir.path());
        for _ in 0..3 {
            std::fs::read_to_string(dir.path().join(".git/HEAD")).unwrap();
        }
        assert!(!woken(&rx), "reads woke the follower");
        std::fs::write(dir.path().join(".git/HEAD"), "0123\n").unwrap();
        assert!(woken(&rx), "a write did not wake the follower");
    }

    #[test]
    fn a_link_swapped_wakes_and_its_folder_otherwise_does_not() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("git");
        for tree in ["a", "b"] {
            std::fs::create_dir_all(root.join(".worktrees").join(tree)).unwrap();
        }
        std::os::unix::fs::symlink(root.join(".worktrees/a"), root.join("policy")).unwrap();
        // Given through a second link, both the path and that link's target with a trailing
        // slash: still the same links.
        let target = PathBuf::from(format!("{}/", root.join("policy").display()));
        std::os::unix::fs::symlink(target, dir.path().join("current")).unwrap();
        let given = PathBuf::from(format!("{}/", dir.path().join("current").display()));
        let (_watch, rx) = watch(&given);
        std::fs::write(root.join("unrelated.log"), "busy\n").unwrap();
        assert!(!woken(&rx), "a file beside the link woke the follower");
        std::os::unix::fs::symlink(root.join(".worktrees/b"), root.join("policy.tmp")).unwrap();
        std::fs::rename(root.join("policy.tmp"), root.join("policy")).unwrap();
        assert!(woken(&rx), "the swap did not wake the follower");
    }

    #[test]
    fn a_link_made_after_start_is_watched_once_it_exists() {
        let dir = tempfile::tempdir().unwrap();
        let link = dir.path().join("policy");
        let (mut watch, rx) = watch(&link);
        std::fs::create_dir_all(dir.path().join("tree")).unwrap();
        std::os::unix::fs::symlink(dir.path().join("tree"), &link).unwrap();
        assert!(woken(&rx), "the link's creation did not wake the follower");
        watch.refresh();
        std::fs::write(dir.path().join("tree/HEAD"), "0123\n").unwrap();
        assert!(
            woken(&rx),
            "a write in the new checkout did not wake the follower"
        );
    }

    #[test]
    fn a_write_in_the_worktree_a_link_was_swapped_to_wakes_the_follower() {
        let dir = tempfile::tempdir().unwrap();
        for tree in ["a", "b"] {
            std::fs::create_dir_all(dir.path().join(tree)).unwrap();
        }
        let link = dir.path().join("policy");
        std::os::unix::fs::symlink(dir.path().join("a"), &link).unwrap();
        let (mut watch, rx) = watch(&link);
        std::os::unix::fs::symlink(dir.path().join("b"), dir.path().join("policy.tmp")).unwrap();
        std::fs::rename(dir.path().join("policy.tmp"), &link).unwrap();
        assert!(woken(&rx), "the swap did not wake the follower");
        // The follower looks again after each wake.
        watch.refresh();
        std::fs::write(dir.path().join("b/HEAD"), "0123\n").unwrap();
        assert!(
            woken(&rx),
            "a write in the new worktree did not wake the follower"
        );
        std::fs::write(dir.path().join("a/HEAD"), "0123\n").unwrap();
        assert!(
            !woken(&rx),
            "a write in the old worktree still woke the follower"
        );
    }

    #[test]
    fn a_checkout_folder_replaced_by_another_is_watched_in_its_place() {
        let dir = tempfile::tempdir().unwrap();
        let checkout = dir.path().join("policy");
        std::fs::create_dir_all(&checkout).unwrap();
        let (mut watch, rx) = watch(&checkout);
        std::fs::rename(&checkout, dir.path().join("policy.old")).unwrap();
        assert!(
            woken(&rx),
            "moving the checkout away did not wake the follower"
        );
        watch.refresh();
        std::fs::create_dir_all(&checkout).unwrap();
        assert!(
            woken(&rx),
            "the new checkout's folder did not wake the follower"
        );
        watch.refresh();
        std::fs::write(checkout.join("HEAD"), "0123\n").unwrap();
        assert!(
            woken(&rx),
            "a write in the new checkout did not wake the follower"
        );
        std::fs::write(dir.path().join("unrelated.log"), "busy\n").unwrap();
        assert!(!woken(&rx), "a file beside the checkout woke the follower");
    }
}
