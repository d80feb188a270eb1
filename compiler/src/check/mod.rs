//! The checker: every policy file → one checked [`Policy`] and every diagnostic, in one run.
//!
//! It never stops at the first problem: each file is parsed on its own, each node is read on its
//! own, and the whole-policy rules run over whatever was read.

mod decl;
mod read;
mod resolve;
mod syntax;

pub use read::MAX_QUEUE_DEPTH;
pub use read::did_you_mean;
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
    // One check parses every file once: keeping copies of the documents would only cost.
    check_with(sources, earlier, &ParseCache { documents: None })
}

/// Documents already parsed, by file text: checking two revisions of one policy (as `diff`
/// does) parses each file that did not change once. Only documents that parsed are kept; a
/// document's spans are byte offsets in its own text, so it serves any file with that text.
/// The cache keeps copies rather than sharing the parser's documents: a copy is allocated to
/// size, while a fresh document carries its growth slack (sharing them took `diff` of the
/// 10,000-queue policy from 160 MB to 196 MB at its peak, at the same speed).
#[derive(Debug)]
pub struct ParseCache {
    documents: Option<std::sync::Mutex<std::collections::HashMap<String, KdlDocument>>>,
}

impl Default for ParseCache {
    /// An empty cache that keeps what is parsed through it.
    fn default() -> Self {
        ParseCache {
            documents: Some(Default::default()),
        }
    }
}

impl ParseCache {
    fn get(&self, text: &str) -> Option<KdlDocument> {
        self.documents.as_ref()?.lock().ok()?.get(text).cloned()
    }

    fn put(&self, text: &str, doc: &KdlDocument) {
        if let Some(Ok(mut documents)) = self.documents.as_ref().map(|d| d.lock()) {
            documents.insert(text.to_string(), doc.clone());
        }
    }
}

/// [`check`], reusing (and filling) a cache of parsed documents.
pub fn check_with(sources: &SourceSet, earlier: Vec<Diagnostic>, cache: &ParseCache) -> Checked {
    let mut diags = earlier;
    let mut decls = decl::Decls::default();
    let mut unread = Vec::new();
    // A file the loader could not decode holds only the text before the first bad byte:
    // parsing that would report the cut as syntax errors.
    let undecodable: std::collections::HashSet<FileId> = diags
        .iter()
        .filter(|d| d.code == Code::Syntax)
        .map(|d| d.primary.file)
        .collect();
    let files: Vec<(FileId, &str)> = sources
        .iter()
        .filter(|(id, _)| !undecodable.contains(id))
        .map(|(id, f)| (id, f.text.as_str()))
        .collect();
    for (_, file) in sources.iter().filter(|(id, _)| undecodable.contains(id)) {
        unread.push(file.text.as_str());
    }
    parse_each(&files, cache, |(id, text, parsed, parse_diags)| {
        diags.extend(parse_diags);
        match parsed {
            Some(doc) => read::Reader::new(id, &mut decls, &mut diags).document(&doc),
            None => unread.push(text),
        }
    });
    let policy = resolve::Resolver {
        decls: &decls,
        sources,
        unread: &unread,
        diags: &mut diags,
        suggestions: 0,
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

/// Below this many bytes in all, parsing on one thread is faster than starting more.
const PARALLEL_PARSE_BYTES: usize = 256 * 1024;

/// One parsed file: its id, its text, the document (if it parsed) and the parser's diagnostics.
type Parsed<'a> = (FileId, &'a str, Option<KdlDocument>, Vec<Diagnostic>);

/// Parses every file, on all cores when the policy is large (the KDL parser is most of the
/// checker's time), and hands each result to `each` on the calling thread in file order, so
/// output never depends on the threads.
///
/// Workers take files one at a time in file order and each result is read as soon as the files
/// before it are, so documents (several dozen times the size of their text) do not pile up
/// unless one file takes far longer than those after it; memory the parser does not keep is
/// memory the kernel need not hand out. The parser needs a deep stack (see [`parse_stack`]):
/// workers have one for files up to [`POOL_FILE_BYTES`] and parse a longer file on a thread of
/// its own, so one huge file does not make every worker reserve a huge stack.
fn parse_each<'a>(
    files: &[(FileId, &'a str)],
    cache: &ParseCache,
    mut each: impl FnMut(Parsed<'a>),
) {
    let total: usize = files.iter().map(|(_, t)| t.len()).sum();
    let threads = if total < PARALLEL_PARSE_BYTES {
        1
    } else {
        std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .min(files.len())
    };
    let longest = files.iter().map(|(_, t)| t.len()).max().unwrap_or(0);
    let stack = parse_stack(longest.min(POOL_FILE_BYTES));
    let next = std::sync::atomic::AtomicUsize::new(0);
    let (sender, results) = std::sync::mpsc::channel();
    std::thread::scope(|scope| {
        let mut failed = None;
        for _ in 0..threads {
            let (sender, next) = (sender.clone(), &next);
            let work = move || {
                while let Some(&(id, text)) =
                    files.get(next.fetch_add(1, std::sync::atomic::Ordering::Relaxed))
                {
                    let parsed = match cache.get(text) {
                        Some(doc) => (id, text, Some(doc), Vec::new()),
                        None => {
                            let (doc, diags) = if text.len() <= POOL_FILE_BYTES {
                                parse(id, text)
                            } else {
                                parse_on_own_thread(id, text)
                            };
                            if let Some(doc) = &doc {
                                cache.put(text, doc);
                            }
                            (id, text, doc, diags)
                        }
                    };
                    if sender.send(parsed).is_err() {
                        break;
                    }
                }
            };
            let spawned = std::thread::Builder::new()
                .name("kdl-parse".into())
                .stack_size(stack)
                .spawn_scoped(scope, work);
            if let Err(err) = spawned {
                failed = Some(err);
            }
        }
        drop(sender);
        // Results arrive about in file order (files are handed out in order); the few that
        // overtake wait here for the ones before them.
        let mut early = std::collections::BTreeMap::new();
        let mut want = 0;
        for parsed in results {
            early.insert(parsed.0, parsed);
            while let Some(parsed) = files.get(want).and_then(|(id, _)| early.remove(id)) {
                each(parsed);
                want += 1;
            }
        }
        // Files are left over only when no worker could start, or one died (its panic is
        // raised again when the scope ends); the files after a gap still go out in order.
        let why = failed.map_or_else(|| "no parser thread ran".to_string(), |e| e.to_string());
        for &(id, text) in &files[want..] {
            each(
                early
                    .remove(&id)
                    .unwrap_or_else(|| (id, text, None, vec![parser_failed(id, &why)])),
            );
        }
    });
}

/// Runs `work`, which parses KDL text of about `len` bytes, on a thread with a stack sized for
/// it (see [`parse_stack`]): anything outside the checker that parses a user's file goes
/// through here. `Err` says why it could not run or did not finish.
pub(crate) fn on_parse_stack<T: Send>(
    len: usize,
    work: impl FnOnce() -> T + Send,
) -> Result<T, String> {
    std::thread::scope(|scope| {
        std::thread::Builder::new()
            .name("kdl-parse-large".into())
            .stack_size(parse_stack(len))
            .spawn_scoped(scope, work)
            .map_err(|err| err.to_string())
            .and_then(|worker| worker.join().map_err(|_| "it panicked".to_string()))
    })
}

/// Longest file the parse workers' own stack is sized for; see [`parse_each`].
const POOL_FILE_BYTES: usize = 64 * 1024;

/// [`parse`] on a thread with a stack sized for this file.
fn parse_on_own_thread(file: FileId, text: &str) -> (Option<KdlDocument>, Vec<Diagnostic>) {
    on_parse_stack(text.len(), || parse(file, text))
        .unwrap_or_else(|why| (None, vec![parser_failed(file, &why)]))
}

/// Parses one file on a parse worker. A panic (in the parser or in rewording its errors)
/// becomes a diagnostic for that file, and the other files go on.
fn parse(file: FileId, text: &str) -> (Option<KdlDocument>, Vec<Diagnostic>) {
    let mut diags = Vec::new();
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        parse_guarded(file, text, &mut diags)
    })) {
        Ok(doc) => (doc, diags),
        Err(_) => (None, vec![parser_failed(file, &"it panicked")]),
    }
}

/// Parses one file, turning the parser's errors into diagnostics.
fn parse_guarded(file: FileId, text: &str, diags: &mut Vec<Diagnostic>) -> Option<KdlDocument> {
    let too_deep_here = |offset, len| {
        Diagnostic::error(
            Code::PolicyTooLarge,
            format!("blocks are nested more than {MAX_BRACE_DEPTH} levels deep"),
            Label::new(file, offset, len).with_text(if len == 0 {
                "in this file"
            } else {
                "too deep"
            }),
        )
        .with_help(
            "policies nest a few levels (cluster, queue, sub-queue); look for unbalanced `{`",
        )
    };
    if let Some(offset) = too_deep(text) {
        diags.push(too_deep_here(offset, 1));
        return None;
    }
    match text.parse::<KdlDocument>() {
        Ok(doc) if doc_depth(&doc) > MAX_BRACE_DEPTH => {
            diags.push(too_deep_here(0, 0));
            None
        }
        Ok(doc) => Some(doc),
        Err(mut err) => {
            // One junk character can be one error: rewording is linear in the file per error.
            err.diagnostics.truncate(MAX_SYNTAX_ERRORS);
            syntax::report(file, text, err, diags);
            None
        }
    }
}

/// The diagnostic for a file the KDL parser could not be run on, or failed on.
fn parser_failed(file: FileId, why: &dyn std::fmt::Display) -> Diagnostic {
    Diagnostic::error(
        Code::Syntax,
        format!("kai-policy could not read this file: its KDL parser failed ({why})"),
        Label::new(file, 0, 0).with_text("in this file"),
    )
    .with_help("this is a bug in kai-policy; please report it with this file")
}

/// The most parser errors reworded per file; the first ones are the ones that matter.
const MAX_SYNTAX_ERRORS: usize = 100;

/// Stack of the thread that runs the KDL parser on a file of `len` bytes. The `kdl` crate
/// recurses once per `{` level, per nested `/*` (both bounded by [`too_deep`]), per `*` or `/` in a
/// block comment and per character it skips while recovering from an error (at most ~0.7 KiB a
/// byte), and running out of stack aborts the process: 4 KiB of `}` overflow a default 2 MiB
/// thread. Only the pages the parser touches are ever used.
fn parse_stack(len: usize) -> usize {
    (16 << 20) + len.saturating_mul(1024)
}

/// How deeply a parsed document's child blocks nest.
fn doc_depth(doc: &KdlDocument) -> usize {
    doc.nodes()
        .iter()
        .filter_map(|n| n.children())
        .map(|c| 1 + doc_depth(c))
        .max()
        .unwrap_or(0)
}

/// The offset of the first block `{` (or `/*`) nested deeper than [`MAX_BRACE_DEPTH`].
///
/// Braces inside strings, raw strings, multi-line strings and comments are text, not blocks, and
/// are skipped; these are tracked as KDL v2 has them (escaped quotes, any number of `#`, nested
/// block comments), and a single-line string also ends at the line's end. Where a mistake makes
/// the parser read a string differently (it resumes inside a string with a bad escape), it may
/// nest deeper than this count: the vendored parser bounds its own nesting for that (see
/// `vendor/kdl/PATCHES.md`), so the scan need not be conservative.
fn too_deep(text: &str) -> Option<usize> {
    #[derive(PartialEq)]
    enum In {
        Code,
        Str,
        MultiStr,
        Raw { hashes: usize, multi: bool },
        LineComment,
        BlockComment(usize),
    }
    let b = text.as_bytes();
    let at = |i: usize, s: &[u8]| b[i..].starts_with(s);
    let (mut depth, mut i, mut mode) = (0usize, 0usize, In::Code);
    while i < b.len() {
        if mode == In::Code {
            match b[i] {
                b'{' => {
                    depth += 1;
                    if depth > MAX_BRACE_DEPTH {
                        return Some(i);
                    }
                }
                b'}' => depth = depth.saturating_sub(1),
                _ => {}
            }
        }
        let (next, end) = match mode {
            In::Code => {
                let hashes = match b[i] {
                    b'#' => b[i..].iter().take_while(|&&c| c == b'#').count(),
                    _ => 0,
                };
                if at(i, b"\"\"\"") {
                    (Some(In::MultiStr), 3)
                } else if b[i] == b'"' {
                    (Some(In::Str), 1)
                } else if hashes > 0 && at(i + hashes, b"\"") {
                    let multi = at(i + hashes, b"\"\"\"");
                    (
                        Some(In::Raw { hashes, multi }),
                        hashes + if multi { 3 } else { 1 },
                    )
                } else if hashes > 0 {
                    (None, hashes)
                } else if at(i, b"//") {
                    (Some(In::LineComment), 2)
                } else if at(i, b"/*") {
                    (Some(In::BlockComment(1)), 2)
                } else {
                    (None, 1)
                }
            }
            In::Str => match b[i] {
                b'\\' if matches!(b.get(i + 1), Some(b'"' | b'\\')) => (None, 2),
                b'\\' => {
                    // `\` then whitespace (newlines too) continues the string.
                    let ws = b[i + 1..]
                        .iter()
                        .take_while(|c| c.is_ascii_whitespace())
                        .count();
                    (None, 1 + ws)
                }
                b'"' | b'\n' => (Some(In::Code), 1),
                _ => (None, 1),
            },
            In::MultiStr if b[i] == b'\\' && matches!(b.get(i + 1), Some(b'"' | b'\\')) => {
                (None, 2)
            }
            In::MultiStr if at(i, b"\"\"\"") => (Some(In::Code), 3),
            In::Raw { hashes, multi } => {
                let quote: &[u8] = if multi { b"\"\"\"" } else { b"\"" };
                let closes = at(i, quote)
                    && b[i + quote.len()..]
                        .iter()
                        .take(hashes)
                        .take_while(|&&c| c == b'#')
                        .count()
                        == hashes;
                if closes {
                    (Some(In::Code), quote.len() + hashes)
                } else if !multi && b[i] == b'\n' {
                    (Some(In::Code), 1)
                } else {
                    (None, 1)
                }
            }
            In::LineComment if b[i] == b'\n' => (Some(In::Code), 1),
            In::BlockComment(n) if at(i, b"/*") => {
                if n + 1 > MAX_BRACE_DEPTH {
                    return Some(i);
                }
                (Some(In::BlockComment(n + 1)), 2)
            }
            In::BlockComment(1) if at(i, b"*/") => (Some(In::Code), 2),
            In::BlockComment(n) if at(i, b"*/") => (Some(In::BlockComment(n - 1)), 2),
            _ => (None, 1),
        };
        if let Some(next) = next {
            mode = next;
        }
        // No step of more than one byte passes over a brace.
        i += end;
    }
    None
}
