//! The diagnostic model: what went wrong, where, and how to fix it. Rendering lives in the
//! submodules, one per `--format`.

mod github;
mod human;
mod json;
mod sarif;

pub use github::render_github;
pub use human::{HumanStyle, render_human};
pub use json::render_json;
pub use sarif::render_sarif;

use crate::source::{FileId, SourceSet};

/// How bad a diagnostic is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Severity {
    /// The policy is rejected.
    Error,
    /// The policy compiles, but probably does not do what its author meant.
    Warning,
}

impl Severity {
    /// The lower-case word used by the JSON and SARIF renderers.
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
        }
    }
}

macro_rules! codes {
    ($($variant:ident = $id:literal, $slug:literal, $summary:literal;)*) => {
        /// A stable diagnostic code. The numbers never change meaning; retired codes are not reused.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum Code { $(#[doc = $summary] $variant,)* }

        impl Code {
            /// Every code, in numeric order.
            pub const ALL: &'static [Code] = &[$(Code::$variant,)*];

            /// The stable id, `KP0001`…
            pub fn id(self) -> &'static str { match self { $(Code::$variant => $id,)* } }

            /// A short kebab-case name for the rule.
            pub fn slug(self) -> &'static str { match self { $(Code::$variant => $slug,)* } }

            /// One sentence saying what the rule checks.
            pub fn summary(self) -> &'static str { match self { $(Code::$variant => $summary,)* } }
        }
    };
}

codes! {
    CannotRun = "KP0000", "cannot-run", "The command could not run: the policy path is missing or unreadable, holds no policy file, an input (a scenario, a revision, a cluster file) cannot be used, or an output could not be written.";
    Syntax = "KP0001", "syntax", "The file is not valid KDL v2.";
    UnknownNode = "KP0002", "unknown-node", "A node that the policy language does not have at that place.";
    UnknownProperty = "KP0003", "unknown-property", "A property that the node does not take.";
    InvalidValue = "KP0004", "invalid-value", "A value outside the allowed set (a strategy, a mode, a duration, a label).";
    MissingValue = "KP0005", "missing-value", "A required argument or property is missing.";
    WrongType = "KP0006", "wrong-type", "A value of the wrong type (a number where a string is expected, and so on).";
    Duplicate = "KP0007", "duplicate", "The same name or setting is defined twice.";
    UnknownParent = "KP0008", "unknown-parent", "`parent=` names a queue that does not exist.";
    ParentCycle = "KP0009", "parent-cycle", "Queues are each other's parents through `parent=`.";
    NestedWithParent = "KP0010", "nested-with-parent", "A nested queue also has `parent=`.";
    InvalidQuantity = "KP0011", "invalid-quantity", "A quantity that is negative, not a number, unparsable or too large.";
    LimitBelowQuota = "KP0012", "limit-below-quota", "A resource limit is below its quota.";
    ChildrenOverQuota = "KP0013", "children-over-quota", "Children's quotas add up to more than their parent's quota.";
    OverCapacity = "KP0014", "over-capacity", "Top-level quotas add up to more than the declared cluster capacity.";
    UnknownPriorityClass = "KP0015", "unknown-priority-class", "A reference to a priority class that is not defined.";
    UnknownPlacement = "KP0016", "unknown-placement", "A reference to a placement that is not defined.";
    NamespaceTwice = "KP0017", "namespace-default-twice", "A namespace is the default of two leaf queues.";
    UnreachableQueue = "KP0018", "unreachable-queue", "A leaf queue that no namespace can send work to.";
    QueueCannotRun = "KP0019", "queue-cannot-run", "A queue whose quota and over-quota weight are both 0 can never run anything.";
    NonPreemptibleWithoutQuota = "KP0020", "non-preemptible-without-quota", "A non-preemptible default priority class on a queue with no quota: its jobs can never start.";
    NamespacesOnParent = "KP0021", "namespaces-on-parent", "A parent queue lists namespaces, but only leaf queues accept work.";
    PolicyTooLarge = "KP0022", "policy-too-large", "The policy breaks a size limit (file size, nesting depth, number of queues or files).";
    InvalidName = "KP0023", "invalid-name", "A queue or namespace name that Kubernetes does not accept.";
    UnexpectedArgument = "KP0024", "unexpected-argument", "An argument that the node does not take.";
    SkippedPath = "KP0025", "skipped-path", "A path under the policy folder that was not read: a broken symbolic link, a link loop, or something that is neither a file nor a folder.";
    BytesOfMemory = "KP0026", "memory-without-unit", "A memory amount with no unit below 1Mi: it counts bytes, which is almost never what was meant.";
    ZeroLimit = "KP0027", "zero-limit", "A limit of 0: the queue can never run a pod that asks for that resource.";
}

/// A place in a policy file, with an optional label printed under it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Label {
    /// The file.
    pub file: FileId,
    /// Byte offset of the start.
    pub offset: usize,
    /// Length in bytes (0 for a point).
    pub len: usize,
    /// Text printed under the span.
    pub text: Option<String>,
}

impl Label {
    /// A span with no text.
    pub fn new(file: FileId, offset: usize, len: usize) -> Self {
        Label {
            file,
            offset,
            len,
            text: None,
        }
    }

    /// The same span with a text under it.
    pub fn with_text(mut self, text: impl Into<String>) -> Self {
        self.text = Some(text.into());
        self
    }
}

/// One problem found in a policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    /// Which rule found it.
    pub code: Code,
    /// Error or warning.
    pub severity: Severity,
    /// What is wrong, in the policy author's words.
    pub message: String,
    /// How to fix it.
    pub help: Option<String>,
    /// Where it is.
    pub primary: Label,
    /// Other places that explain it (the first definition of a duplicate, say).
    pub secondary: Vec<Label>,
}

impl Diagnostic {
    /// A new error.
    pub fn error(code: Code, message: impl Into<String>, primary: Label) -> Self {
        Self::new(code, Severity::Error, message, primary)
    }

    /// A new warning.
    pub fn warning(code: Code, message: impl Into<String>, primary: Label) -> Self {
        Self::new(code, Severity::Warning, message, primary)
    }

    /// A new diagnostic of the given severity.
    pub fn new(code: Code, severity: Severity, message: impl Into<String>, primary: Label) -> Self {
        Diagnostic {
            code,
            severity,
            message: message.into(),
            help: None,
            primary,
            secondary: Vec::new(),
        }
    }

    /// Adds the how-to-fix text.
    pub fn with_help(mut self, help: impl Into<String>) -> Self {
        self.help = Some(help.into());
        self
    }

    /// Adds another place that explains the problem.
    pub fn with_secondary(mut self, label: Label) -> Self {
        self.secondary.push(label);
        self
    }

    /// Whether this diagnostic rejects the policy.
    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }
}

/// Puts diagnostics in the order users read them: by file, then position, then code.
pub fn sort(diagnostics: &mut [Diagnostic]) {
    diagnostics.sort_by(|a, b| {
        (a.primary.file, a.primary.offset, a.code, &a.message).cmp(&(
            b.primary.file,
            b.primary.offset,
            b.code,
            &b.message,
        ))
    });
}

/// How many errors and warnings a run found.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Summary {
    /// Number of errors.
    pub errors: usize,
    /// Number of warnings.
    pub warnings: usize,
}

impl Summary {
    /// Counts the diagnostics by severity.
    pub fn of(diagnostics: &[Diagnostic]) -> Self {
        let errors = diagnostics.iter().filter(|d| d.is_error()).count();
        Summary {
            errors,
            warnings: diagnostics.len() - errors,
        }
    }
}

/// Whether a character would act on a terminal or reorder text instead of showing: C0 and C1
/// controls (but not tab or line feed) and Unicode's bidirectional controls.
fn is_control(c: char) -> bool {
    (c.is_control() && c != '\n' && c != '\t')
        || matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// Text from a policy file made safe to print: each control character becomes a visible
/// `\u{1b}` escape, so a hostile file cannot move the cursor, recolour or hide text.
pub fn escape_controls(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.chars().any(is_control) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if is_control(c) {
            out.push_str(&format!("\\u{{{:x}}}", c as u32));
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
}

/// Source text for a snippet: each control character becomes `?`, `·` or `�` — whichever has
/// its UTF-8 length — so every byte offset of a span still points at the same place.
pub(crate) fn mask_controls(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.chars().any(is_control) {
        return std::borrow::Cow::Borrowed(text);
    }
    text.chars()
        .map(|c| match (is_control(c), c.len_utf8()) {
            (false, _) => c,
            (true, 1) => '?',
            (true, 2) => '·',
            (true, _) => '\u{fffd}',
        })
        .collect::<String>()
        .into()
}

/// The diagnostics with every message, help and label text escaped for printing.
fn printable(diagnostics: &[Diagnostic]) -> Vec<Diagnostic> {
    let esc = |t: &str| escape_controls(t).into_owned();
    diagnostics
        .iter()
        .map(|d| {
            let label = |l: &Label| Label {
                text: l.text.as_deref().map(esc),
                ..l.clone()
            };
            Diagnostic {
                message: esc(&d.message),
                help: d.help.as_deref().map(esc),
                primary: label(&d.primary),
                secondary: d.secondary.iter().map(label).collect(),
                ..d.clone()
            }
        })
        .collect()
}

/// A label resolved to what users see: path, line and column (1-based; columns in characters).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Location {
    /// The file's display path.
    pub file: String,
    /// First line.
    pub line: usize,
    /// First column.
    pub column: usize,
    /// Last line (inclusive).
    pub end_line: usize,
    /// Column just past the end.
    pub end_column: usize,
}

impl Location {
    /// Resolves a label against the files it points into.
    pub fn of(label: &Label, sources: &SourceSet) -> Self {
        let file = sources.get(label.file);
        let (line, column) = file.line_col(label.offset);
        let (end_line, end_column) = file.line_col(label.offset + label.len);
        Location {
            file: escape_controls(&file.path).into_owned(),
            line,
            column,
            end_line,
            end_column,
        }
    }
}
