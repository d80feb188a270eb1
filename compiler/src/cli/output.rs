//! Writing build outputs so that a failure never leaves a half-written file behind.

use std::io::Write;
use std::path::Path;

use super::CliError;
use crate::lower::Artifacts;

/// Writes `queues.yaml`, `priorityclasses.yaml` and `scheduler-config.json` into `dir`.
///
/// All three are rendered and written to temporary files first; only when every write succeeded
/// are they renamed into place, so a failed build leaves the previous outputs untouched.
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
    let mut staged = Vec::new();
    for (name, text) in &files {
        match stage(&dir.join(name), text.as_bytes()) {
            Ok(temp) => staged.push((temp, dir.join(name))),
            Err(e) => {
                for (temp, _) in staged {
                    let _ = std::fs::remove_file(temp);
                }
                return Err(e);
            }
        }
    }
    for (temp, path) in staged {
        std::fs::rename(&temp, &path).map_err(|source| CliError::Write { path, source })?;
    }
    Ok(())
}

/// Writes one file atomically (temporary file in the same folder, then rename).
pub fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), CliError> {
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).map_err(|source| CliError::Write {
            path: parent.to_path_buf(),
            source,
        })?;
    }
    let temp = stage(path, bytes)?;
    std::fs::rename(&temp, path).map_err(|source| CliError::Write {
        path: path.to_path_buf(),
        source,
    })
}

fn stage(path: &Path, bytes: &[u8]) -> Result<std::path::PathBuf, CliError> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let temp = path.with_file_name(format!(".{name}.{}.tmp", std::process::id()));
    let write = || -> std::io::Result<()> {
        let mut file = std::fs::File::create(&temp)?;
        file.write_all(bytes)?;
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
