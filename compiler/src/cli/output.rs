//! Writing build outputs so that a failure never leaves a half-written file behind, nor a
//! folder where some outputs are new and others old.

use std::io::Write;
use std::path::{Path, PathBuf};

use super::CliError;
use crate::lower::Artifacts;

/// Writes `queues.yaml`, `priorityclasses.yaml` and `scheduler-config.json` into `dir`, as one
/// set: either all three are the new ones, or all are as they were.
///
/// All three are written to temporary files first, and a target that cannot be replaced (a
/// folder in its place) stops the build before anything is. Each output is then renamed into
/// place after the one it replaces was linked aside; should a rename still fail, the files
/// already replaced get their old contents back.
pub fn write_artifacts(dir: &Path, artifacts: &Artifacts) -> Result<(), CliError> {
    let files = [
        ("queues.yaml", artifacts.queues_yaml()?),
        ("priorityclasses.yaml", artifacts.priority_classes_yaml()?),
        ("scheduler-config.json", artifacts.config.to_json()),
    ];
    std::fs::create_dir_all(dir).map_err(|source| CliError::Write {
        path: dir.to_path_buf(),
        source,
    })?;
    let mut staged: Vec<(PathBuf, PathBuf)> = Vec::new();
    let discard = |staged: &[(PathBuf, PathBuf)]| {
        for (temp, _) in staged {
            let _ = std::fs::remove_file(temp);
        }
    };
    for (name, text) in &files {
        let path = dir.join(name);
        match replaceable(&path).and_then(|()| stage(&path, text.as_bytes())) {
            Ok(temp) => staged.push((temp, path)),
            Err(e) => {
                discard(&staged);
                return Err(e);
            }
        }
    }
    // The outputs replaced so far, each with the link that keeps its old contents (none for a
    // file that did not exist).
    let mut replaced: Vec<(PathBuf, Option<PathBuf>)> = Vec::new();
    let mut failure = None;
    for (at, (temp, path)) in staged.iter().enumerate() {
        let kept = match keep_aside(path) {
            Ok(kept) => kept,
            Err(e) => {
                failure = Some((at, e));
                break;
            }
        };
        if let Err(source) = std::fs::rename(temp, path) {
            if let Some(kept) = kept {
                let _ = std::fs::remove_file(kept);
            }
            failure = Some((
                at,
                CliError::Write {
                    path: path.clone(),
                    source,
                },
            ));
            break;
        }
        replaced.push((path.clone(), kept));
    }
    match failure {
        None => {
            for kept in replaced.into_iter().filter_map(|(_, kept)| kept) {
                let _ = std::fs::remove_file(kept);
            }
            Ok(())
        }
        Some((at, e)) => {
            discard(&staged[at..]);
            for (path, kept) in replaced.into_iter().rev() {
                let _ = match kept {
                    Some(kept) => std::fs::rename(kept, &path),
                    None => std::fs::remove_file(&path),
                };
            }
            Err(e)
        }
    }
}

/// Fails when `path` names something a file cannot be renamed over (a folder).
fn replaceable(path: &Path) -> Result<(), CliError> {
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.is_dir() => Err(CliError::Write {
            path: path.to_path_buf(),
            source: std::io::Error::new(
                std::io::ErrorKind::IsADirectory,
                "a folder is in the way of the output file; move or remove it",
            ),
        }),
        _ => Ok(()),
    }
}

/// Links the file at `path` (if there is one) to a hidden name beside it, so that its contents
/// survive its replacement; returns that name.
fn keep_aside(path: &Path) -> Result<Option<PathBuf>, CliError> {
    if std::fs::symlink_metadata(path).is_err() {
        return Ok(None);
    }
    let kept = hidden_beside(path, "old");
    let _ = std::fs::remove_file(&kept);
    std::fs::hard_link(path, &kept)
        .or_else(|_| std::fs::copy(path, &kept).map(|_| ()))
        .map_err(|source| CliError::Write {
            path: path.to_path_buf(),
            source,
        })?;
    Ok(Some(kept))
}

/// Writes one file atomically (temporary file in the same folder, then rename). A file it
/// replaces keeps its permissions: `fmt` must not make a private policy file world-readable.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), CliError> {
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).map_err(|source| CliError::Write {
            path: parent.to_path_buf(),
            source,
        })?;
    }
    let temp = stage(path, bytes)?;
    std::fs::rename(&temp, path).map_err(|source| {
        let _ = std::fs::remove_file(&temp);
        CliError::Write {
            path: path.to_path_buf(),
            source,
        }
    })
}

/// `.NAME.PID.SUFFIX` beside `path`.
fn hidden_beside(path: &Path, suffix: &str) -> PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    path.with_file_name(format!(".{name}.{}.{suffix}", std::process::id()))
}

/// Writes `bytes` to a temporary file beside `path`, with the permissions of the file at
/// `path` if there is one; returns the temporary file's path.
fn stage(path: &Path, bytes: &[u8]) -> Result<PathBuf, CliError> {
    let temp = hidden_beside(path, "tmp");
    let write = || -> std::io::Result<()> {
        let mut file = std::fs::File::create(&temp)?;
        file.write_all(bytes)?;
        if let Ok(meta) = std::fs::metadata(path) {
            file.set_permissions(meta.permissions())?;
        }
        file.sync_all()
    };
    write().map_err(|source| {
        let _ = std::fs::remove_file(&temp);
        CliError::Write {
            path: path.to_path_buf(),
            source,
        }
    })?;
    Ok(temp)
}
