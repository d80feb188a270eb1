//! The checker: every policy file → one checked [`Policy`] and every diagnostic, in one run.
//!
//! It never stops at the first problem: each file is parsed on its own, each node is read on its
//! own, and the whole-policy rules run over whatever was read.

mod decl;
mod read;
mod resolve;
mod syntax;

pub use read::MAX_QUEUE_DEPTH;
pub(crate) use read::did_you_mean;
pub use resolve::MAX_QUEUES;

use kdl::KdlDocument;

use crate::diagnostics::{self, Code, Diagnostic, Label, Severity};
use crate::model::Policy;
use crate::source::{FileId, SourceSet};

/// Deepest `{` nesting handed to the KDL parser, whose recursion would otherwise overflow the
/// stack on hostile input.
pub const MAX_BRACE_DEPTH: usize = 64;

/// The outcome of checking a policy: the model when there is no error, and every diagnostic.
#[derive(Debug)]
pub struct Checked {
    /// The checked policy; `None` when any error was found.
    pub policy: Option<Policy>,
    /// Every problem found, sorted by file and position.
    pub diagnostics: Vec<Diagnostic>,
}

impl Checked {
    /// Whether any diagnostic is an error.
    pub fn has_errors(&self) -> bool {
        self.diagnostics
            .iter()
            .any(|d| d.severity == Severity::Error)
    }
}

/// Checks a whole policy. `earlier` carries diagnostics found while loading the files.
pub fn check(sources: &SourceSet, earlier: Vec<Diagnostic>) -> Checked {
    let mut diags = earlier;
    let mut decls = decl::Decls::default();
    let mut unread = Vec::new();
    for (id, file) in sources.iter() {
        // A file the loader could not decode holds only the text before the first bad byte:
        // parsing that would report the cut as syntax errors.
        let undecodable = diags
            .iter()
            .any(|d| d.code == Code::Syntax && d.primary.file == id);
        if undecodable {
            unread.push(file.text.as_str());
            continue;
        }
        match parse(id, &file.text, &mut diags) {
            Some(doc) => read::Reader::new(id, &mut decls, &mut diags).document(&doc),
            None => unread.push(file.text.as_str()),
        }
    }
    let policy = resolve::Resolver {
        decls: &decls,
        sources,
        unread: &unread,
        diags: &mut diags,
    }
    .run();
    let policy = if diags.iter().any(|d| d.is_error()) {
        None
    } else {
        policy
    };
    diagnostics::sort(&mut diags);
    Checked {
        policy,
        diagnostics: diags,
    }
}

/// Parses one file, turning the parser's errors into diagnostics.
fn parse(file: FileId, text: &str, diags: &mut Vec<Diagnostic>) -> Option<KdlDocument> {
    if let Some(offset) = too_deep(text) {
        diags.push(
            Diagnostic::error(
                Code::PolicyTooLarge,
                format!("blocks are nested more than {MAX_BRACE_DEPTH} levels deep"),
                Label::new(file, offset, 1).with_text("too deep"),
            )
            .with_help(
                "policies nest a few levels (cluster, queue, sub-queue); look for unbalanced `{`",
            ),
        );
        return None;
    }
    match text.parse::<KdlDocument>() {
        Ok(doc) => Some(doc),
        Err(err) => {
            syntax::report(file, text, err, diags);
            None
        }
    }
}

/// The offset of the first `{` nested deeper than [`MAX_BRACE_DEPTH`], skipping strings and
/// comments well enough that real policies never trip it.
fn too_deep(text: &str) -> Option<usize> {
    let bytes = text.as_bytes();
    let mut depth = 0usize;
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'"' => {
                i += 1;
                while i < bytes.len() && bytes[i] != b'"' {
                    i += if bytes[i] == b'\\' { 2 } else { 1 };
                }
            }
            b'/' if bytes.get(i + 1) == Some(&b'/') => {
                while i < bytes.len() && bytes[i] != b'\n' {
                    i += 1;
                }
            }
            b'/' if bytes.get(i + 1) == Some(&b'*') => {
                i += 2;
                while i + 1 < bytes.len() && !(bytes[i] == b'*' && bytes[i + 1] == b'/') {
                    i += 1;
                }
                i += 1;
            }
            b'{' => {
                depth += 1;
                if depth > MAX_BRACE_DEPTH {
                    return Some(i);
                }
            }
            b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
        i += 1;
    }
    None
}
