//! Policy source files: loading a folder of `*.kdl` files with the limits that keep hostile input cheap.

use std::path::{Path, PathBuf};

use crate::diagnostics::{Code, Diagnostic, Label};

/// The largest policy file the checker reads (bytes); larger files are reported, not parsed.
pub const MAX_FILE_BYTES: usize = 4 * 1024 * 1024;
/// The most policy files one policy may have.
pub const MAX_FILES: usize = 10_000;

/// Index of a file inside a [`SourceSet`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FileId(pub u32);

/// One policy file: its display path (relative to the policy folder) and its text.
#[derive(Debug, Clone)]
pub struct SourceFile {
    /// Path shown to users: the policy folder as given on the command line joined with the file's
    /// path inside it, with `/` separators.
    pub path: String,
    /// The file's text.
    pub text: String,
    line_starts: Vec<usize>,
}

impl SourceFile {
    /// A file from its display path and text.
    pub fn new(path: impl Into<String>, text: impl Into<String>) -> Self {
        let text = text.into();
        let line_starts = std::iter::once(0)
            .chain(text.match_indices('\n').map(|(i, _)| i + 1))
            .collect();
        SourceFile {
            path: path.into(),
            text,
            line_starts,
        }
    }

    /// 1-based line and column (in characters) of a byte offset.
    pub fn line_col(&self, offset: usize) -> (usize, usize) {
        let offset = offset.min(self.text.len());
        let line = self.line_starts.partition_point(|&s| s <= offset) - 1;
        let start = self.line_starts[line];
        let column = self
            .text
            .get(start..offset)
            .map_or(offset - start, |s| s.chars().count());
        (line + 1, column + 1)
    }
}

/// Every file of one policy, in path order (the order the language merges them in).
#[derive(Debug, Clone, Default)]
pub struct SourceSet {
    files: Vec<SourceFile>,
}

impl SourceSet {
    /// A set from files given in any order; they are sorted by path.
    pub fn new(mut files: Vec<SourceFile>) -> Self {
        files.sort_by(|a, b| a.path.cmp(&b.path));
        SourceSet { files }
    }

    /// Appends a file after the policy's own (ids of the others do not change): the name of an
    /// output a diagnostic is about.
    pub fn push(&mut self, file: SourceFile) -> FileId {
        self.files.push(file);
        FileId(self.files.len() as u32 - 1)
    }

    /// The file behind an id.
    pub fn get(&self, id: FileId) -> &SourceFile {
        &self.files[id.0 as usize]
    }

    /// Every file with its id, in path order.
    pub fn iter(&self) -> impl Iterator<Item = (FileId, &SourceFile)> {
        self.files
            .iter()
            .enumerate()
            .map(|(i, f)| (FileId(i as u32), f))
    }

    /// How many files the policy has.
    pub fn len(&self) -> usize {
        self.files.len()
    }

    /// Whether the policy has no file at all.
    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }
}

/// Why a policy folder could not be read at all (the command cannot run: exit status 2).
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The path does not exist or cannot be read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The path that failed.
        path: PathBuf,
        /// What the operating system said.
        source: std::io::Error,
    },
    /// The folder holds no policy file.
    #[error("no *.kdl policy files under {0} (is this the policy folder?)")]
    Empty(PathBuf),
}

/// Reads every `*.kdl` file under `root` (recursively; `root` may also be one file).
///
/// Symbolic links to files and folders are followed (a folder reached twice, as through a link
/// loop, is read once). Files that break a limit or are not UTF-8 come back as diagnostics with
/// an empty text, so one bad file never hides the others; so does every path the walk could not
/// read (a broken link, a loop, a `*.kdl` that is not a file), as a `KP0025` warning that names it.
pub fn load_dir(root: &Path) -> Result<(SourceSet, Vec<Diagnostic>), LoadError> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| LoadError::Io { path, source }
    };
    let meta = std::fs::metadata(root).map_err(io(root))?;
    let mut walk = Walk::default();
    if meta.is_file() {
        walk.files.push(root.to_path_buf());
    } else {
        if let Ok(canonical) = root.canonicalize() {
            walk.visited.insert(canonical);
        }
        walk.collect(root)?;
    }
    if walk.files.is_empty() {
        return Err(LoadError::Empty(root.to_path_buf()));
    }
    let base = if meta.is_file() {
        root.parent().unwrap_or(Path::new(""))
    } else {
        root
    };
    let display = |p: &Path| display_path(&base.join(p.strip_prefix(base).unwrap_or(p)));
    // A skipped path stays in the set as an empty file, so its warning can name it.
    let mut named: Vec<(String, Result<PathBuf, String>)> = walk
        .files
        .into_iter()
        .map(|p| (display(&p), Ok(p)))
        .chain(
            walk.skipped
                .into_iter()
                .map(|(p, why)| (display(&p), Err(why))),
        )
        .collect();
    named.sort();
    let mut diagnostics = Vec::new();
    if named.len() > MAX_FILES {
        diagnostics.push(
            Diagnostic::error(
                Code::PolicyTooLarge,
                format!(
                    "the policy has {} files; at most {MAX_FILES} are read",
                    named.len()
                ),
                Label::new(FileId(0), 0, 0),
            )
            .with_help("merge small team files, or split the cluster into several policies"),
        );
        named.truncate(MAX_FILES);
    }
    let mut files = Vec::with_capacity(named.len());
    for (i, (display, path)) in named.into_iter().enumerate() {
        let id = FileId(i as u32);
        match path {
            Ok(path) => {
                let bytes = std::fs::read(&path).map_err(io(&path))?;
                let (text, problem) = admit(id, &display, bytes);
                files.push(SourceFile::new(display, text));
                diagnostics.extend(problem);
            }
            Err(why) => {
                diagnostics.push(skipped(id, &display, &why));
                files.push(SourceFile::new(display, String::new()));
            }
        }
    }
    Ok((SourceSet::new(files), diagnostics))
}

/// The KP0025 warning for a path under the policy folder that was not read (`file` is the
/// empty file that stands for it).
pub fn skipped(file: FileId, path: &str, why: &str) -> Diagnostic {
    Diagnostic::warning(
        Code::SkippedPath,
        format!("{path} was not read: {why}"),
        Label::new(file, 0, 0),
    )
    .with_help("fix or remove it; any policy it was meant to hold is missing from this check")
}

/// What a walk of the policy folder found.
#[derive(Default)]
struct Walk {
    files: Vec<PathBuf>,
    /// Paths not read, and why.
    skipped: Vec<(PathBuf, String)>,
    /// Folders already walked (canonical paths): the loop guard for symbolic links.
    visited: std::collections::HashSet<PathBuf>,
}

impl Walk {
    /// Walks `dir`; an error names the path that could not be read, so the user is sent to the
    /// folder deep inside the policy that is locked, not to the policy root.
    fn collect(&mut self, dir: &Path) -> Result<(), LoadError> {
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| LoadError::Io { path, source }
        };
        let mut entries: Vec<std::fs::DirEntry> = std::fs::read_dir(dir)
            .and_then(|entries| entries.collect::<Result<_, _>>())
            .map_err(io(dir))?;
        entries.sort_by_key(|e| e.file_name());
        for entry in entries {
            let path = entry.path();
            // Hidden folders (`.git`, editors' state) are not policy; hidden files neither.
            if entry.file_name().to_string_lossy().starts_with('.') {
                continue;
            }
            let is_kdl = path.extension().is_some_and(|e| e == "kdl");
            let mut kind = entry.file_type().map_err(io(&path))?;
            if kind.is_symlink() {
                match std::fs::metadata(&path) {
                    Ok(target) => kind = target.file_type(),
                    Err(e) => {
                        let target = display_path(&std::fs::read_link(&path).unwrap_or_default());
                        let why = match e.kind() {
                            std::io::ErrorKind::NotFound => {
                                format!("it is a symbolic link to `{target}`, which does not exist")
                            }
                            _ => format!(
                                "it is a symbolic link to `{target}`, which cannot be read ({e})"
                            ),
                        };
                        self.skipped.push((path, why));
                        continue;
                    }
                }
            }
            if kind.is_dir() {
                if self.visited.insert(path.canonicalize().map_err(io(&path))?) {
                    self.collect(&path)?;
                } else {
                    let why = "it leads to a folder that is already read (a symbolic link loop, \
                               or a second link to one folder)";
                    self.skipped.push((path, why.to_string()));
                }
            } else if is_kdl && kind.is_file() {
                self.files.push(path);
            } else if is_kdl {
                self.skipped
                    .push((path, "it is not a regular file".to_string()));
            }
        }
        Ok(())
    }
}

/// Applies the per-file limits to raw bytes: the text to parse and, if it broke a limit, why.
pub fn admit(file: FileId, path: &str, bytes: Vec<u8>) -> (String, Option<Diagnostic>) {
    if bytes.len() > MAX_FILE_BYTES {
        let d = Diagnostic::error(
            Code::PolicyTooLarge,
            format!(
                "{path} is {} bytes; policy files may be at most {MAX_FILE_BYTES} bytes",
                bytes.len()
            ),
            Label::new(file, 0, 0),
        )
        .with_help("split the file into one file per team under the policy folder");
        return (String::new(), Some(d));
    }
    match String::from_utf8(bytes) {
        Ok(text) => (text, None),
        Err(e) => {
            let at = e.utf8_error().valid_up_to();
            let mut bytes = e.into_bytes();
            bytes.truncate(at);
            let text = String::from_utf8(bytes).unwrap_or_default();
            let d = Diagnostic::error(
                Code::Syntax,
                "the file is not valid UTF-8 text",
                Label::new(file, at, 0).with_text("invalid byte here"),
            )
            .with_help("KDL files must be UTF-8; re-save the file as UTF-8");
            (text, Some(d))
        }
    }
}

/// The path as the user typed it (relative paths stay relative), with `/` separators and no `./`.
pub(crate) fn display_path(path: &Path) -> String {
    let text = path.to_string_lossy().replace('\\', "/");
    let mut text = text.as_str();
    while let Some(rest) = text.strip_prefix("./") {
        text = rest;
    }
    text.replace("/./", "/").replace("//", "/")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_and_column_count_characters_not_bytes() {
        let f = SourceFile::new("a.kdl", "é x\nsecond");
        assert_eq!(f.line_col(0), (1, 1));
        assert_eq!(f.line_col(3), (1, 3));
        assert_eq!(f.line_col(5), (2, 1));
        assert_eq!(f.line_col(100), (2, 7));
    }
}
