//! KDL parse errors → diagnostics in the policy author's words.
//!
//! The `kdl` parser's own messages name grammar rules ("Expected identifier string"), some of
//! its spans start at the beginning of the document, and one mistake can produce several
//! errors. This module points at the place the parser stopped, rewrites the common messages
//! (with hints for KDL v1 habits and unquoted units), and keeps one error per line.

use kdl::KdlError;

use crate::diagnostics::{Code, Diagnostic, Label};
use crate::source::FileId;

const DEFAULT_HELP: &str = "policy files are KDL v2: strings in quotes, properties as key=value, \
     #true/#false/#inf/#null for keywords";

/// Bare words that KDL v1 read as keywords and KDL v2 rejects.
const V1_KEYWORDS: &[&str] = &["true", "false", "null", "inf", "-inf", "nan"];

/// One parser error, reworded.
struct Reworded {
    /// [`Code::Syntax`], unless the text is valid KDL the parser cannot hold (a huge number).
    code: Code,
    offset: usize,
    len: usize,
    message: String,
    label: String,
    help: String,
}

/// Turns the parser's errors for one file into diagnostics.
pub(super) fn report(file: FileId, text: &str, err: KdlError, diags: &mut Vec<Diagnostic>) {
    let unclosed_block = err
        .diagnostics
        .iter()
        .any(|d| d.message.as_deref() == Some("No closing '}' for child block"));
    let mut found: Vec<Reworded> = err
        .diagnostics
        .into_iter()
        .filter(|d| {
            // Always follows "No closing '}'" for the same block, with a span over its body.
            !(unclosed_block
                && d.message.as_deref() == Some("Closing '}' was not found after nodes"))
        })
        .map(|d| {
            reword(
                text,
                d.message.as_deref().unwrap_or("invalid KDL"),
                d.label.as_deref(),
                d.help,
                boundary(text, d.span.offset()),
                boundary(text, d.span.offset() + d.span.len()) - boundary(text, d.span.offset()),
            )
        })
        .collect();
    found.sort_by_key(|r| r.offset);
    // The parser stumbles on past a number it cannot hold (an argument's makes it see an
    // unclosed block and a stray `}`) or nesting it refuses: that is the mistake to report.
    if found.iter().any(|r| r.code != Code::Syntax) {
        found.retain(|r| r.code != Code::Syntax);
    }
    // One mistake often makes the parser stumble several times on the same line (a KDL v1 raw
    // string, say); the first report is the one that names the mistake.
    let mut last_line = None;
    for mut r in found {
        let end = boundary(text, r.offset + r.len);
        r.offset = boundary(text, r.offset);
        r.len = end.saturating_sub(r.offset);
        let line = line_of(text, r.offset);
        if last_line == Some(line) {
            continue;
        }
        last_line = Some(line);
        diags.push(
            Diagnostic::error(
                r.code,
                r.message,
                Label::new(file, r.offset, r.len).with_text(r.label),
            )
            .with_help(r.help),
        );
    }
}

/// `i`, moved back to the start of the character it falls in, and at most `text.len()`.
fn boundary(text: &str, i: usize) -> usize {
    let mut i = i.min(text.len());
    while !text.is_char_boundary(i) {
        i -= 1;
    }
    i
}

fn line_of(text: &str, offset: usize) -> usize {
    text.as_bytes()[..offset.min(text.len())]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
}

/// The end of the run of characters starting at `from` that cannot end a KDL value.
fn junk_end(text: &str, from: usize) -> usize {
    let from = boundary(text, from);
    text[from..]
        .find(|c: char| c.is_whitespace() || matches!(c, ';' | '{' | '}' | '(' | ')'))
        .map_or(text.len(), |i| from + i)
}

fn reword(
    text: &str,
    message: &str,
    label: Option<&str>,
    help: Option<String>,
    offset: usize,
    len: usize,
) -> Reworded {
    let end = boundary(text, offset + len);
    let spanned = &text[offset..end];
    let r = |offset: usize, len: usize, message: String, label: &str, help: String| Reworded {
        code: Code::Syntax,
        offset,
        len,
        message,
        label: label.to_string(),
        help,
    };
    match message {
        kdl::NESTED_TOO_DEEPLY => Reworded {
            code: Code::PolicyTooLarge,
            ..r(
                offset,
                len,
                format!(
                    "blocks are nested more than {} levels deep",
                    super::MAX_BRACE_DEPTH
                ),
                "too deep",
                "policies nest a few levels (cluster, queue, sub-queue); look for unbalanced `{`, \
                 or a string with a mistake before this place"
                    .into(),
            )
        },
        "No closing '}' for child block" => r(
            offset,
            len,
            "this block is never closed".into(),
            "`{` without a matching `}`",
            "add the `}` that ends this block; every `{` needs one".into(),
        ),
        "Expected end of document" if spanned.starts_with('}') => r(
            offset,
            1,
            "this `}` does not close any block".into(),
            "unmatched `}`",
            "remove it, or add the `{` it was meant to close".into(),
        ),
        "Expected end of document" => {
            // `max-gpus-per-node 1000…0`: an argument the parser could not read as a number.
            let word_start = offset + (spanned.len() - spanned.trim_start().len());
            let word = &text[word_start..junk_end(text, word_start)];
            if let Some(huge) = huge_integer(text, (word_start, word.len()), None, word) {
                return huge;
            }
            r(
                offset,
                junk_end(text, offset) - offset,
                "unexpected text after the end of a node".into(),
                "a new line or `;` is needed before this",
                "a node ends at the end of its line or at `;`: start the next node on a new line"
                    .into(),
            )
        }
        "Expected property value" => property_value(text, end, help),
        "Expected identifier string" => {
            let word = &text[offset..junk_end(text, offset)];
            bare_value(offset, word, help)
        }
        "Unexpected newline in single-line quoted string" => r(
            offset,
            len,
            "this string is not closed before the end of the line".into(),
            "unclosed string",
            "add the closing `\"`; text over several lines goes between `\"\"\"` lines".into(),
        ),
        "Expected closing of multi-line comment" => r(
            offset,
            2.min(len),
            "this `/*` comment is never closed".into(),
            "comment starts here",
            "add `*/` where the comment ends".into(),
        ),
        "Found invalid node name" => r(
            offset,
            spanned.chars().next().map_or(0, char::len_utf8),
            format!(
                "`{}` cannot start a node",
                spanned.chars().next().unwrap_or(' ')
            ),
            "expected a node name",
            "a node starts with its name, like `queue` or `gpu`: remove the stray character".into(),
        ),
        _ => {
            // Not one of the common cases: keep the parser's words, and point at the place it
            // stopped if its span reaches back over earlier lines.
            let (offset, len) = if spanned.contains('\n') {
                (end, 0)
            } else {
                (offset, len)
            };
            let label = match label.map(|l| l.strip_prefix("not ").unwrap_or(l)) {
                Some(what) => format!("expected {what}"),
                None => "here".to_string(),
            };
            r(
                offset,
                len,
                format!("KDL syntax error: {}", lower_first(message)),
                &label,
                help.unwrap_or_else(|| DEFAULT_HELP.to_string()),
            )
        }
    }
}

/// "Expected property value": the parser's span runs from the start of the node (or document)
/// to the place after `key=` where no value could be read. Point at `key=…` instead.
fn property_value(text: &str, stop: usize, help: Option<String>) -> Reworded {
    let stop = boundary(text, stop);
    let line_start = text[..stop].rfind('\n').map_or(0, |i| i + 1);
    // Step past the whole whitespace character: Unicode spaces are wider than one byte.
    let start = text[line_start..stop]
        .char_indices()
        .rev()
        .find(|(_, c)| c.is_whitespace())
        .map_or(line_start, |(i, c)| line_start + i + c.len_utf8());
    let end = junk_end(text, stop);
    let word = &text[start..end];
    let (key, value) = word.split_once('=').unwrap_or((word, ""));
    let value = value.trim_start();
    if let Some(huge) = huge_integer(text, (start, end - start), Some(key), value) {
        return huge;
    }
    let (message, label, help) = if value.is_empty() {
        (
            format!("`{key}=` has no value"),
            "value missing",
            "write the value right after `=`, like `quota=8`, `window=\"7d\"` or `preemptible=#true`"
                .to_string(),
        )
    } else if let Some(rest) = value.strip_prefix('=') {
        (
            format!("`{word}` has one `=` too many"),
            "two `=`",
            format!("write `{key}={rest}`"),
        )
    } else if value.starts_with('#') {
        (
            format!("`{value}` is not a KDL keyword"),
            "unknown keyword",
            help.unwrap_or_else(|| DEFAULT_HELP.to_string()),
        )
    } else if value.starts_with(|c: char| c.is_ascii_digit() || matches!(c, '.' | '+' | '-'))
        && value.contains(|c: char| c.is_ascii_alphabetic())
    {
        (
            format!("`{value}` is a number with a unit, which KDL only accepts as a string"),
            "unit outside quotes",
            format!("quantities with a unit are strings: write `{key}=\"{value}\"`"),
        )
    } else if let Some(v1) = V1_KEYWORDS.iter().find(|k| **k == value) {
        v1_keyword(v1)
    } else {
        (
            format!("`{value}` is not a KDL value"),
            "invalid value",
            format!(
                "values are numbers (`8`, `0.5`), strings in quotes (`\"{value}\"`) or keywords (`#true`, `#inf`)"
            ),
        )
    };
    Reworded {
        code: Code::Syntax,
        offset: start,
        len: end - start,
        message,
        label: label.to_string(),
        help,
    }
}

/// "Expected identifier string": a bare word that KDL v2 does not accept as a string.
fn bare_value(offset: usize, word: &str, help: Option<String>) -> Reworded {
    let value = word.split_once('=').map_or(word, |(_, v)| v);
    let (message, label, help) = if let Some(v1) = V1_KEYWORDS.iter().find(|k| **k == value) {
        v1_keyword(v1)
    } else if value.starts_with("r\"") || value.starts_with("r#") {
        (
            format!("`{value}` is a KDL v1 raw string"),
            "KDL v1 syntax",
            "KDL v2 writes raw strings as #\"…\"#; or use a quoted string, escaping `\\` as `\\\\`"
                .to_string(),
        )
    } else {
        (
            format!("`{value}` is not a valid value"),
            "invalid value",
            help.map(|h| {
                if h.starts_with("A valid value was partially parsed") {
                    "put strings that hold spaces, quotes or `=` in quotes: `\"…\"`".to_string()
                } else {
                    h
                }
            })
            .unwrap_or_else(|| DEFAULT_HELP.to_string()),
        )
    };
    Reworded {
        code: Code::Syntax,
        offset,
        len: word.len(),
        message,
        label: label.to_string(),
        help,
    }
}

/// Whether `word` is a KDL integer literal (`-12_345`, `0x1F`, `0o17`, `0b101`). The parser
/// holds integers in 128 bits and fails on longer ones, though they are valid KDL.
fn is_integer_literal(word: &str) -> bool {
    let unsigned = word.strip_prefix(['+', '-']).unwrap_or(word);
    let (digits, radix) = match unsigned.get(..2) {
        Some("0x") => (&unsigned[2..], 16),
        Some("0o") => (&unsigned[2..], 8),
        Some("0b") => (&unsigned[2..], 2),
        _ => (unsigned, 10),
    };
    digits.starts_with(|c: char| c.is_digit(radix))
        && digits.chars().all(|c| c.is_digit(radix) || c == '_')
}

/// An integer literal too long for the parser (`quota=1000…0`, beyond 128 bits), spanning
/// `(start, len)` in `text` as `key=word` (or an argument, with no key): reported as the checker reports a number
/// out of range for the setting it is written for, which the line's node name tells.
fn huge_integer(
    text: &str,
    (start, len): (usize, usize),
    key: Option<&str>,
    word: &str,
) -> Option<Reworded> {
    use super::read::{
        GPUS_PER_NODE, PRIORITY_CLASS_VALUES, PRIORITY_CLASS_WHY, QUEUE_PRIORITIES, negative,
        out_of_range, too_large, weight_out_of_range,
    };
    use crate::quantity::ResourceKind;
    if !is_integer_literal(word) {
        return None;
    }
    let line_start = text[..start].rfind('\n').map_or(0, |i| i + 1);
    let node = text[line_start..start]
        .rsplit(['{', ';'])
        .next()
        .and_then(|n| n.split_whitespace().next())
        .unwrap_or("");
    let kind = |name: &str| ResourceKind::ALL.into_iter().find(|k| k.name() == name);
    let negative_word = word.starts_with('-');
    let (code, label, (message, help)) = match (node, key) {
        (_, Some(key @ ("quota" | "limit"))) if kind(node).is_some() => {
            let what = format!("{node} {key}");
            if negative_word {
                (
                    Code::InvalidQuantity,
                    "invalid quantity",
                    negative(&what, word),
                )
            } else {
                let kind = kind(node)?;
                let r = too_large(&what, word, kind, key, true);
                (Code::InvalidQuantity, "invalid quantity", r)
            }
        }
        ("capacity", Some(key)) if kind(key).is_some() => {
            let what = format!("{key} capacity");
            if negative_word {
                (
                    Code::InvalidQuantity,
                    "invalid quantity",
                    negative(&what, word),
                )
            } else {
                let r = too_large(&what, word, kind(key)?, key, false);
                (Code::InvalidQuantity, "invalid quantity", r)
            }
        }
        (_, Some(key @ ("weight" | "k"))) => {
            let example = format!("`{key}=2`");
            let r = weight_out_of_range(&format!("`{key}`"), word, &example);
            (Code::InvalidQuantity, "out of range", r)
        }
        ("priority-class", Some("value")) => {
            let r = out_of_range(
                "`value`",
                word,
                PRIORITY_CLASS_VALUES,
                Some(PRIORITY_CLASS_WHY),
            );
            (Code::InvalidValue, "out of range", r)
        }
        ("queue", Some("priority")) => {
            let r = out_of_range("`priority`", word, QUEUE_PRIORITIES, None);
            (Code::InvalidValue, "out of range", r)
        }
        ("max-gpus-per-node", None) => {
            let what = "the value of `max-gpus-per-node`";
            (
                Code::InvalidValue,
                "out of range",
                out_of_range(what, word, GPUS_PER_NODE, None),
            )
        }
        _ => (
            Code::InvalidValue,
            "too large",
            (
                format!("the number {word} is too large: no setting takes a number this long"),
                "write the number that is meant; names and other text go in quotes".to_string(),
            ),
        ),
    };
    Some(Reworded {
        code,
        offset: start,
        len,
        message,
        label: label.to_string(),
        help,
    })
}

fn v1_keyword(word: &str) -> (String, &'static str, String) {
    (
        format!("`{word}` is not a value in KDL v2"),
        "keyword without #",
        format!("KDL v2 writes keywords with a `#`: `#{word}`"),
    )
}

fn lower_first(s: &str) -> String {
    let mut chars = s.chars();
    match chars.next() {
        Some(c) => c.to_lowercase().chain(chars).collect(),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn messages(text: &str) -> Vec<(usize, String)> {
        let mut diags = Vec::new();
        if let Err(err) = text.parse::<kdl::KdlDocument>() {
            report(FileId(0), text, err, &mut diags);
        }
        diags
            .into_iter()
            .map(|d| (d.primary.offset, d.message))
            .collect()
    }

    #[test]
    fn spans_point_at_the_mistake_not_the_start_of_the_file() {
        let text = "queue \"a\" {\n    gpu quota=\n}\n";
        let found = messages(text);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(&text[found[0].0..found[0].0 + 6], "quota=");
    }

    #[test]
    fn odd_text_never_panics() {
        for text in [
            "é=",
            "q é=é",
            "a x=1é",
            "\"é",
            "a {",
            "}",
            "/*é",
            "a b=#é",
            "a r\"é",
            "ü ü=ü\nü{",
            "a =",
            "=",
            "a x==",
            "\u{feff}a x=",
            "a\tx=\u{2028}",
        ] {
            let _ = messages(text);
        }
    }
}
