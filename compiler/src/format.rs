//! `kai-policy fmt`: one canonical layout for a policy file, comments kept.
//!
//! The formatter works on tokens, not on the parsed document, so that every token of the file
//! (strings, numbers as the user wrote them, comments, `/-` slashdashed items) comes out exactly
//! as it went in; only the space between tokens changes:
//!
//! - one node per line, indented by four spaces per level; `;` separators become line breaks;
//! - a children block opens with ` {` at the end of its node's line and closes with `}` on a line
//!   of its own (an empty block stays `{}`);
//! - one space between entries, none around `=` (`quota=24`) or inside type annotations;
//! - comments stay where they were: on their own line (re-indented) or after the code on the same
//!   line; `/-` is glued to what it comments out;
//! - at most one blank line in a row, none at the start or end of a file or block;
//! - no trailing spaces (except inside multi-line strings, where they are content), `\n` line
//!   ends, and a single newline at the end of the file.
//!
//! A line continuation (`\`) inside a node is kept, and the continued line is indented one level
//! deeper. Pure: text in, text out. Before returning, the result is parsed again and compared with
//! the input (the documents with formatting cleared, and every token but the layout), so a bug in
//! the formatter can never change what a policy means or drop a comment: it reports instead.

use kdl::KdlDocument;

use crate::check::{self, MAX_BRACE_DEPTH};
use crate::diagnostics::{Code, Diagnostic};
use crate::source::{FileId, SourceFile, SourceSet};

const INDENT: &str = "    ";

/// Why a file was not formatted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FormatError {
    /// The file is not valid KDL (or is nested too deeply to read): the checker's diagnostics.
    Syntax(Vec<Diagnostic>),
    /// The formatter's own result failed its self-check; the file must be left as it is.
    Unstable(String),
}

impl std::fmt::Display for FormatError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FormatError::Syntax(d) => write!(f, "the file has {} syntax error(s)", d.len()),
            FormatError::Unstable(why) => write!(
                f,
                "internal error: the formatted text would differ from the original ({why}); the file was left unchanged, please report this"
            ),
        }
    }
}

impl std::error::Error for FormatError {}

/// Formats one policy file. Diagnostics, if any, point into a one-file [`SourceSet`] (file 0).
pub fn format(text: &str) -> Result<String, FormatError> {
    format_file(FileId(0), text)
}

/// Formats one policy file whose diagnostics should point at `file`.
pub fn format_file(file: FileId, text: &str) -> Result<String, FormatError> {
    // The KDL parser recurses about once per byte of some junk: it needs the checker's stack.
    crate::check::on_parse_stack(text.len(), || format_checked(file, text)).unwrap_or_else(|why| {
        Err(FormatError::Unstable(format!(
            "the KDL parser could not run ({why})"
        )))
    })
}

fn format_checked(file: FileId, text: &str) -> Result<String, FormatError> {
    let tokens = match lex(text) {
        Ok(tokens) if depth(&tokens) <= MAX_BRACE_DEPTH => tokens,
        _ => return Err(syntax_errors(file, text)),
    };
    let Ok(before) = text.parse::<KdlDocument>() else {
        return Err(syntax_errors(file, text));
    };
    let out = Printer::default().print(&tokens);
    // Self-check: the same document, and the same tokens apart from layout.
    let after = out
        .parse::<KdlDocument>()
        .map_err(|e| FormatError::Unstable(format!("the result does not parse: {e}")))?;
    if cleared(before) != cleared(after) {
        return Err(FormatError::Unstable(
            "the result parses to a different document".into(),
        ));
    }
    let again = lex(&out).map_err(|at| {
        FormatError::Unstable(format!("the result cannot be read again at byte {at}"))
    })?;
    if significant(&tokens) != significant(&again) {
        return Err(FormatError::Unstable(
            "a comment or value would change".into(),
        ));
    }
    Ok(out)
}

/// Whether two policy texts parse to the same KDL document once formatting (whitespace and
/// comments) is ignored. `false` when either does not parse.
pub fn same_document(a: &str, b: &str) -> bool {
    crate::check::on_parse_stack(a.len().max(b.len()), || {
        match (a.parse::<KdlDocument>(), b.parse::<KdlDocument>()) {
            (Ok(a), Ok(b)) => cleared(a) == cleared(b),
            _ => false,
        }
    })
    .unwrap_or(false)
}

fn cleared(mut doc: KdlDocument) -> KdlDocument {
    doc.clear_format_recursive();
    doc
}

/// The checker's own diagnostics for a file that cannot be read: KDL syntax errors, or nesting
/// too deep to hand to the parser.
fn syntax_errors(file: FileId, text: &str) -> FormatError {
    let sources = SourceSet::new(vec![SourceFile::new("policy.kdl", text)]);
    let mut found: Vec<Diagnostic> = check::check(&sources, Vec::new())
        .diagnostics
        .into_iter()
        .filter(|d| d.is_error() && matches!(d.code, Code::Syntax | Code::PolicyTooLarge))
        .collect();
    if found.is_empty() {
        return FormatError::Unstable("the formatter cannot read a file that parses".into());
    }
    for d in &mut found {
        d.primary.file = file;
        for label in &mut d.secondary {
            label.file = file;
        }
    }
    FormatError::Syntax(found)
}

/// One lexical token of KDL v2. Whitespace is dropped; everything else is kept verbatim.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tok<'a> {
    /// An identifier, number, keyword or string (quoted, raw or multi-line), as written.
    Word(&'a str),
    Eq,
    LParen,
    RParen,
    LBrace,
    RBrace,
    Semi,
    Slashdash,
    /// `// …` without its line end.
    LineComment(&'a str),
    /// `/* … */`, nested comments included.
    BlockComment(&'a str),
    /// A line continuation, `\`.
    Escline,
    Newline,
}

const NEWLINES: [char; 7] = [
    '\r', '\n', '\u{85}', '\u{0B}', '\u{0C}', '\u{2028}', '\u{2029}',
];
const SPACES: [char; 18] = [
    '\u{09}', '\u{20}', '\u{A0}', '\u{1680}', '\u{2000}', '\u{2001}', '\u{2002}', '\u{2003}',
    '\u{2004}', '\u{2005}', '\u{2006}', '\u{2007}', '\u{2008}', '\u{2009}', '\u{200A}', '\u{202F}',
    '\u{205F}', '\u{3000}',
];

fn is_word_char(c: char) -> bool {
    !(NEWLINES.contains(&c)
        || SPACES.contains(&c)
        || "\\/(){}[];\"#=".contains(c)
        || matches!(c,
            '\u{0}'..='\u{8}' | '\u{E}'..='\u{1F}' | '\u{7F}' | '\u{200E}'..='\u{200F}'
            | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' | '\u{FEFF}'))
}

/// Splits KDL text into tokens; `Err(offset)` where it finds something that is not KDL.
/// Iterative, so nesting depth costs no stack.
fn lex(text: &str) -> Result<Vec<Tok<'_>>, usize> {
    let mut tokens = Vec::new();
    let mut i = text.strip_prefix('\u{FEFF}').map_or(0, |_| 3);
    let at = |i: usize| text[i..].chars().next();
    while let Some(c) = at(i) {
        let rest = &text[i..];
        let (token, len) = match c {
            c if SPACES.contains(&c) => (None, c.len_utf8()),
            '\r' if rest.starts_with("\r\n") => (Some(Tok::Newline), 2),
            c if NEWLINES.contains(&c) => (Some(Tok::Newline), c.len_utf8()),
            '/' if rest.starts_with("//") => {
                let end = rest.find(NEWLINES).unwrap_or(rest.len());
                (Some(Tok::LineComment(rest[..end].trim_end())), end)
            }
            '/' if rest.starts_with("/*") => {
                let end = block_comment_end(rest).ok_or(i)?;
                (Some(Tok::BlockComment(&rest[..end])), end)
            }
            '/' if rest.starts_with("/-") => (Some(Tok::Slashdash), 2),
            '\\' => (Some(Tok::Escline), 1),
            '=' => (Some(Tok::Eq), 1),
            '(' => (Some(Tok::LParen), 1),
            ')' => (Some(Tok::RParen), 1),
            '{' => (Some(Tok::LBrace), 1),
            '}' => (Some(Tok::RBrace), 1),
            ';' => (Some(Tok::Semi), 1),
            '"' => {
                let end = quoted_end(rest).ok_or(i)?;
                (Some(Tok::Word(&rest[..end])), end)
            }
            '#' => {
                let hashes = rest.len() - rest.trim_start_matches('#').len();
                let after = &rest[hashes..];
                let end = if after.starts_with('"') {
                    let quotes = if after.starts_with("\"\"\"") { 3 } else { 1 };
                    let close = format!("{}{}", "\"".repeat(quotes), "#".repeat(hashes));
                    hashes + quotes + after[quotes..].find(&close).ok_or(i)? + close.len()
                } else {
                    hashes + after.find(|c| !is_word_char(c)).unwrap_or(after.len())
                };
                (Some(Tok::Word(&rest[..end])), end)
            }
            c if is_word_char(c) => {
                let end = rest.find(|c| !is_word_char(c)).unwrap_or(rest.len());
                (Some(Tok::Word(&rest[..end])), end)
            }
            _ => return Err(i),
        };
        tokens.extend(token);
        i += len;
    }
    Ok(tokens)
}

/// Length of a `/* … */` comment at the start of `text`, nested comments included.
fn block_comment_end(text: &str) -> Option<usize> {
    let bytes = text.as_bytes();
    let (mut depth, mut i) = (0usize, 0);
    while i + 1 < bytes.len() {
        match (bytes[i], bytes[i + 1]) {
            (b'/', b'*') => {
                depth += 1;
                i += 2;
            }
            (b'*', b'/') => {
                depth -= 1;
                i += 2;
                if depth == 0 {
                    return Some(i);
                }
            }
            _ => i += 1,
        }
    }
    None
}

/// Length of a quoted string (`"…"` or `"""…"""`) at the start of `text`.
fn quoted_end(text: &str) -> Option<usize> {
    let (open, close) = if text.starts_with("\"\"\"") {
        (3, "\"\"\"")
    } else {
        (1, "\"")
    };
    let mut chars = text[open..].char_indices();
    while let Some((i, c)) = chars.next() {
        if c == '\\' {
            chars.next();
        } else if text[open + i..].starts_with(close) {
            return Some(open + i + close.len());
        }
    }
    None
}

/// The deepest `{` nesting of a token stream.
fn depth(tokens: &[Tok<'_>]) -> usize {
    let (mut depth, mut max) = (0usize, 0);
    for t in tokens {
        match t {
            Tok::LBrace => {
                depth += 1;
                max = max.max(depth);
            }
            Tok::RBrace => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    max
}

/// A comment's text without trailing spaces on any of its lines (they are never meaningful).
fn trim_comment(text: &str) -> String {
    text.split('\n')
        .map(str::trim_end)
        .collect::<Vec<_>>()
        .join("\n")
}

/// The tokens that layout must not change: all but line ends and `;` (both end a node), and line
/// continuations (layout by definition); comments compared without trailing spaces.
fn significant(tokens: &[Tok<'_>]) -> Vec<String> {
    tokens
        .iter()
        .filter_map(|t| match t {
            Tok::Newline | Tok::Semi | Tok::Escline => None,
            Tok::Word(w) => Some(w.to_string()),
            Tok::LineComment(c) | Tok::BlockComment(c) => Some(trim_comment(c)),
            other => Some(format!("{other:?}")),
        })
        .collect()
}

/// What the line being written holds so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum Line {
    /// Nothing: the next token starts a line.
    #[default]
    Empty,
    /// Only comments: a node may still follow on this line.
    Lead,
    /// A node whose entries or children may follow.
    Node,
    /// A node ended by `;`: only a trailing comment may follow on this line.
    Done,
    /// A `{` (and maybe comments after it): the block's first node goes on the next line.
    Brace,
}

#[derive(Debug, Default)]
struct Printer {
    lines: Vec<String>,
    current: String,
    line: Line,
    depth: usize,
    /// No space before the next token (after `(`, `)`, `=`, `/-`, or at a line's start).
    glue: bool,
    /// Inside a `/-` and before the item it comments out: line ends do not end anything.
    after_slashdash: bool,
    /// A `\` inside a node: the next line end continues the node.
    continuation: bool,
    /// A `\` between nodes, dropped: its line end is dropped too.
    skip_newline: bool,
    /// A blank line was seen since the last line was written.
    blank: bool,
    /// Nothing written yet in the innermost block.
    block_start: bool,
    /// The innermost block holds nothing at all, not even a comment.
    block_empty: bool,
}

impl Printer {
    fn print(mut self, tokens: &[Tok<'_>]) -> String {
        for &token in tokens {
            self.token(token);
        }
        // A `\` at the very end leaves an empty continued line: nothing to write for it.
        if self.line != Line::Empty && !self.current.trim().is_empty() {
            self.finish_line();
        }
        if self.lines.is_empty() {
            return String::new();
        }
        let mut out = self.lines.join("\n");
        out.push('\n');
        out
    }

    fn finish_line(&mut self) {
        let line = self.current.trim_end().to_string();
        self.lines.push(line);
        self.current.clear();
        self.line = Line::Empty;
    }

    /// Starts a line at the current depth, after a blank line if the input had one here.
    fn begin_line(&mut self) {
        if self.line != Line::Empty {
            self.finish_line();
        }
        if self.blank && !self.block_start && !self.lines.is_empty() {
            self.lines.push(String::new());
        }
        self.blank = false;
        self.block_start = false;
        self.current = INDENT.repeat(self.depth);
        self.glue = true;
    }

    /// Writes a token with one space before it unless glued.
    fn put(&mut self, text: &str) {
        if !self.glue {
            self.current.push(' ');
        }
        self.current.push_str(text);
        self.glue = false;
    }

    fn token(&mut self, token: Tok<'_>) {
        if !matches!(token, Tok::Newline) {
            self.skip_newline = false;
        }
        if !matches!(token, Tok::Newline | Tok::Escline | Tok::RBrace) {
            self.block_empty = false;
        }
        match token {
            Tok::Newline => self.newline(),
            Tok::LineComment(text) | Tok::BlockComment(text) => {
                let text = trim_comment(text);
                if self.line == Line::Empty {
                    self.begin_line();
                    self.line = Line::Lead;
                }
                self.put(&text);
                if matches!(token, Tok::LineComment(_)) && self.after_slashdash {
                    // `/- // note` then the item: the item goes on the next line.
                    let line = self.line;
                    self.finish_line();
                    self.current = INDENT.repeat(self.depth + 1);
                    self.line = line;
                    self.glue = true;
                }
            }
            Tok::Escline => {
                if self.line == Line::Node && !self.after_slashdash {
                    self.put("\\");
                    self.continuation = true;
                } else {
                    self.skip_newline = true;
                }
            }
            Tok::Semi => {
                if self.line == Line::Node {
                    self.line = Line::Done;
                }
            }
            Tok::LBrace => {
                self.after_slashdash = false;
                self.put("{");
                self.depth += 1;
                self.line = Line::Brace;
                self.block_start = true;
                self.block_empty = true;
            }
            Tok::RBrace => {
                self.after_slashdash = false;
                self.depth = self.depth.saturating_sub(1);
                self.blank = false;
                if std::mem::take(&mut self.block_empty) {
                    // `{` and `}` with nothing between: `{}` on the node's line.
                    if self.line == Line::Empty {
                        self.current = self.lines.pop().unwrap_or_default();
                    }
                    self.current.push('}');
                } else {
                    self.block_start = false;
                    self.begin_line();
                    self.current.push('}');
                }
                self.block_start = false;
                self.line = Line::Node;
                self.glue = false;
            }
            Tok::Eq | Tok::RParen => {
                self.current
                    .push_str(if token == Tok::Eq { "=" } else { ")" });
                self.glue = true;
            }
            Tok::Slashdash | Tok::Word(_) | Tok::LParen => {
                let was_slashdash = self.after_slashdash;
                self.after_slashdash = token == Tok::Slashdash;
                match self.line {
                    Line::Empty | Line::Done | Line::Brace => {
                        self.begin_line();
                        self.line = Line::Node;
                    }
                    Line::Lead => self.line = Line::Node,
                    Line::Node => {}
                }
                if was_slashdash {
                    self.glue = true;
                }
                match token {
                    Tok::Word(w) => self.put(w),
                    Tok::LParen => {
                        self.put("(");
                        self.glue = true;
                    }
                    _ => {
                        self.put("/-");
                        self.glue = true;
                    }
                }
            }
        }
    }

    fn newline(&mut self) {
        if self.after_slashdash || std::mem::take(&mut self.skip_newline) {
            return;
        }
        if std::mem::take(&mut self.continuation) {
            self.finish_line();
            self.current = INDENT.repeat(self.depth + 1);
            self.line = Line::Node;
            self.glue = true;
            return;
        }
        if self.line == Line::Empty {
            self.blank = true;
        } else {
            self.finish_line();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fmt(text: &str) -> String {
        format(text).unwrap_or_else(|e| panic!("{e}: {e:?}"))
    }

    #[test]
    fn semicolons_and_one_line_blocks_become_lines() {
        assert_eq!(
            fmt("queue \"a\"{gpu quota = 2;namespaces \"x\" ; }"),
            "queue \"a\" {\n    gpu quota=2\n    namespaces \"x\"\n}\n"
        );
    }

    #[test]
    fn a_continuation_at_the_end_of_the_file_formats_the_same_twice() {
        // Found by `fmt_fuzz` at 1,000,000 inputs: `$\` became `$ \` + newline, which then
        // gained an empty continued line on every pass.
        assert_eq!(fmt("$\\"), "$ \\\n");
        assert_eq!(fmt("$ \\\n"), "$ \\\n");
        assert_eq!(fmt("a \\\n"), "a \\\n");
    }

    #[test]
    fn empty_blocks_and_empty_files() {
        assert_eq!(fmt("a {   }"), "a {}\n");
        assert_eq!(fmt("a {\n\n}\nb { c {\n}\n}"), "a {}\nb {\n    c {}\n}\n");
        assert_eq!(fmt(""), "");
        assert_eq!(fmt("\n\n  \n"), "");
        assert_eq!(fmt("// only\n\n\n"), "// only\n");
    }

    #[test]
    fn comments_stay_where_they_were() {
        let text = "a { // after brace\n  b 1 /* inline */ 2; // after semicolon\n\n\n  /* own line */ c\n}\n";
        assert_eq!(
            fmt(text),
            "a { // after brace\n    b 1 /* inline */ 2 // after semicolon\n\n    /* own line */ c\n}\n"
        );
    }

    #[test]
    fn slashdash_is_glued_to_what_it_comments_out() {
        assert_eq!(
            fmt("/-  \n  a 1\nb /- 2 3 /- {\n c\n} {\n d }"),
            "/-a 1\nb /-2 3 /-{\n    c\n} {\n    d\n}\n"
        );
    }

    #[test]
    fn line_continuations_are_kept_and_indented() {
        assert_eq!(
            fmt("a {\n b 1 \\ // why\n       2\n}"),
            "a {\n    b 1 \\ // why\n        2\n}\n"
        );
    }

    #[test]
    fn strings_and_numbers_are_kept_as_written() {
        let text = "a \"x  y\" #\"raw \"quoted\"\"# 1_000 0x1F 1.50 k=(u8)#true\n";
        assert_eq!(fmt(text), text);
        let multi = "a \"\"\"\n    two  \n    lines\n    \"\"\"\n";
        assert_eq!(fmt(multi), multi);
    }

    #[test]
    fn broken_files_are_refused_with_the_checkers_diagnostics() {
        let Err(FormatError::Syntax(d)) = format("queue \"a\" {\n  gpu quota=1\n") else {
            panic!("must refuse");
        };
        assert!(d.iter().all(|d| d.code == Code::Syntax), "{d:?}");
        let deep = "a {".repeat(MAX_BRACE_DEPTH + 1) + &"}".repeat(MAX_BRACE_DEPTH + 1);
        let Err(FormatError::Syntax(d)) = format(&deep) else {
            panic!("must refuse");
        };
        assert_eq!(d[0].code, Code::PolicyTooLarge);
    }
}
