//! First pass: one file's KDL nodes → spanned declarations, reporting every problem that can be
//! seen inside a single node (unknown names, wrong types, bad values, a setting given twice).

use kdl::{KdlDocument, KdlEntry, KdlNode, KdlValue};

use super::decl::*;
use crate::diagnostics::{Code, Diagnostic, Label};
use crate::model::{Bound, DefaultPlacement, MinRuntime, Oversubscription, PerResource, Strategy};
use crate::quantity::{self, Duration, QuantityError, ResourceKind};
use crate::source::FileId;

/// Deepest queue nesting the checker accepts (KAI trees are rarely deeper than 4).
pub const MAX_QUEUE_DEPTH: usize = 16;

/// Reads one parsed file into `out`, appending diagnostics.
pub(super) struct Reader<'a> {
    file: FileId,
    out: &'a mut Decls,
    diags: &'a mut Vec<Diagnostic>,
    /// How to name the positional arguments of the node whose entries were read last, for
    /// messages about them ("the name of `queue`").
    positional: String,
    /// The node whose entries were read last.
    node: String,
}

fn label(file: FileId, span: miette::SourceSpan) -> Label {
    Label::new(file, span.offset(), span.len())
}

/// The closest of `candidates` to `word`, if it is close enough to be a likely typo: a small
/// edit distance, or one word being the start of the other (`warning` → `warn`).
pub fn did_you_mean<'c>(
    word: &str,
    candidates: impl IntoIterator<Item = &'c str>,
) -> Option<&'c str> {
    candidates
        .into_iter()
        .filter_map(|c| {
            let allowed = (c.len().max(word.len()) / 3).max(1);
            let prefix =
                c.len().min(word.len()) >= 3 && (c.starts_with(word) || word.starts_with(c));
            // The edit distance is at least the difference in length: most candidates are ruled
            // out without computing it, which keeps hostile policies with thousands of unknown
            // names cheap.
            if !prefix && c.len().abs_diff(word.len()) > allowed {
                return None;
            }
            let distance = strsim::damerau_levenshtein(word, c);
            (distance <= allowed || prefix).then_some((distance, c))
        })
        .min_by_key(|&(d, c)| (d, c))
        .map(|(_, c)| c)
}

fn list(words: &[&str]) -> String {
    words
        .iter()
        .map(|w| format!("`{w}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// "`a`, `b` or `c`".
fn or_list(words: &[&str]) -> String {
    match words {
        [] => String::new(),
        [one] => format!("`{one}`"),
        [rest @ .., last] => format!("{} or `{last}`", list(rest)),
    }
}

/// What a node's positional arguments must be.
#[derive(Clone, Copy, PartialEq)]
enum Args {
    None,
    Name,
    One,
    Strings,
}

/// A node's properties after the unknown and repeated ones were reported.
struct Props<'n> {
    entries: Vec<(&'n str, &'n KdlEntry)>,
    /// A property written as a second argument (`priority-class "p" 5` for `value=5`): already
    /// reported with that suggestion, so it is not also reported as missing.
    meant: Option<&'static str>,
}

impl<'n> Props<'n> {
    fn get(&self, key: &str) -> Option<&'n KdlEntry> {
        self.entries
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, e)| *e)
    }
}

/// The property a node's second argument most likely stood for: the one its declarations are
/// rarely written without (`priority-class "p" 5` → `value`, `placement "x" "spread"` →
/// `strategy`).
fn property_for_second_argument(node: &str) -> Option<&'static str> {
    match node {
        "priority-class" => Some("value"),
        "placement" => Some("strategy"),
        _ => None,
    }
}

/// A value as it would be written after `key=`: a plain word without its quotes
/// (`strategy=spread`), anything else as written.
fn as_property_value(entry: &KdlEntry) -> String {
    match entry.value() {
        KdlValue::String(s)
            if s.starts_with(|c: char| c.is_ascii_alphabetic())
                && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
                && !matches!(s.as_str(), "true" | "false" | "null" | "inf" | "nan") =>
        {
            s.clone()
        }
        _ => written(entry),
    }
}

fn describe(entry: &KdlEntry) -> String {
    match entry.value() {
        // A literal beyond a float's range (`1e400`) reads as infinite: name it as written.
        KdlValue::Float(f) if !f.is_finite() && !is_keyword(entry) => {
            format!("the number {}", written(entry))
        }
        KdlValue::String(s) => format!("the string \"{s}\""),
        // As written (`1.0`, `0x1F`), so the user finds what the message quotes.
        KdlValue::Integer(_) => format!("the number {}", written(entry)),
        KdlValue::Float(f) if f.is_nan() => "#nan".to_string(),
        KdlValue::Float(f) if f.is_infinite() => {
            if *f > 0.0 {
                "#inf".into()
            } else {
                "#-inf".into()
            }
        }
        KdlValue::Float(_) => format!("the number {}", written(entry)),
        KdlValue::Bool(b) => format!("#{b}"),
        KdlValue::Null => "#null".to_string(),
    }
}

/// Whether the value is written as a keyword (`#inf`, `#nan`) rather than a literal: a number
/// literal too large for a float (`1e400`) also reads as infinite, but is not `#inf`.
fn is_keyword(entry: &KdlEntry) -> bool {
    written(entry).starts_with('#')
}

/// Whether a float literal has a non-zero digit before its exponent: `1e-400` is not 0, even
/// though it reads as 0.
fn is_nonzero_literal(entry: &KdlEntry) -> bool {
    let text = written(entry);
    let mantissa = text.split(['e', 'E']).next().unwrap_or("");
    mantissa.contains(|c: char| ('1'..='9').contains(&c))
}

/// The value as the author wrote it (`"960Gi"`, `1e3`, `#inf`).
fn written(entry: &KdlEntry) -> String {
    entry
        .format()
        .map(|f| f.value_repr.clone())
        .filter(|r| !r.is_empty())
        .unwrap_or_else(|| match entry.value() {
            KdlValue::String(s) => format!("\"{s}\""),
            KdlValue::Integer(i) => i.to_string(),
            KdlValue::Float(f) if f.is_nan() => "#nan".to_string(),
            KdlValue::Float(f) if f.is_infinite() => {
                if *f > 0.0 { "#inf" } else { "#-inf" }.to_string()
            }
            KdlValue::Float(f) => f.to_string(),
            KdlValue::Bool(b) => format!("#{b}"),
            KdlValue::Null => "#null".to_string(),
        })
}

impl<'a> Reader<'a> {
    /// A reader for one file.
    pub fn new(file: FileId, out: &'a mut Decls, diags: &'a mut Vec<Diagnostic>) -> Self {
        Reader {
            file,
            out,
            diags,
            positional: "the value".to_string(),
            node: String::new(),
        }
    }
}

impl Reader<'_> {
    fn at(&self, span: miette::SourceSpan) -> Label {
        label(self.file, span)
    }

    fn error(
        &mut self,
        code: Code,
        message: impl Into<String>,
        at: Label,
        help: impl Into<String>,
    ) {
        self.diags
            .push(Diagnostic::error(code, message, at).with_help(help));
    }

    /// How many errors have been reported so far; compare later to see whether a part of the
    /// file had problems.
    fn mark(&self) -> usize {
        self.diags.iter().filter(|d| d.is_error()).count()
    }

    fn failed_since(&self, mark: usize) -> bool {
        self.mark() > mark
    }

    /// How messages name an entry: "`quota`" for a property, "the name of `queue`" for an
    /// argument.
    fn subject(&self, entry: &KdlEntry) -> String {
        match entry.name() {
            Some(key) => format!("`{}`", key.value()),
            None => self.positional.clone(),
        }
    }

    /// The entry written with another value: `quota=8` or `queue "x"`.
    fn rewrite(&self, entry: &KdlEntry, value: &str) -> String {
        match entry.name() {
            Some(key) => format!("`{}={value}`", key.value()),
            None => format!("`{} {value}`", self.node),
        }
    }

    /// Checks a node's entries against what it takes and returns its arguments and properties.
    fn entries<'n>(
        &mut self,
        node: &'n KdlNode,
        args: Args,
        props: &[&str],
    ) -> (Vec<&'n KdlEntry>, Props<'n>) {
        let name = node.name().value();
        self.node = name.to_string();
        self.positional = match args {
            Args::Name => format!("the name of `{name}`"),
            Args::One | Args::None => format!("the value of `{name}`"),
            Args::Strings => format!("each value of `{name}`"),
        };
        let mut positional = Vec::new();
        let mut found: Vec<(&'n str, &'n KdlEntry)> = Vec::new();
        for entry in node.entries() {
            self.annotation(entry);
            match entry.name() {
                None => positional.push(entry),
                Some(key) => {
                    let key_str = key.value();
                    if !props.contains(&key_str) {
                        let help = match did_you_mean(key_str, props.iter().copied()) {
                            Some(s) => format!("did you mean `{s}`?"),
                            None if props.is_empty() => {
                                format!("`{name}` takes no properties; remove it")
                            }
                            None => format!("`{name}` takes {}", list(props)),
                        };
                        self.error(
                            Code::UnknownProperty,
                            format!("`{name}` has no property `{key_str}`"),
                            self.at(entry.span()).with_text("unknown property"),
                            help,
                        );
                    } else if let Some((_, first)) = found.iter().find(|(k, _)| *k == key_str) {
                        let first = self.at(first.span()).with_text("first set here");
                        self.diags.push(
                            Diagnostic::error(
                                Code::Duplicate,
                                format!("`{key_str}` is set twice on `{name}`"),
                                self.at(entry.span()).with_text("set again here"),
                            )
                            .with_secondary(first)
                            .with_help(format!("keep one `{key_str}=`")),
                        );
                    } else {
                        found.push((key_str, entry));
                    }
                }
            }
        }
        let name_at = self.at(node.name().span());
        let mut explained = None;
        match args {
            Args::None => {
                for extra in &positional {
                    let help = match props.first() {
                        None => "remove it".to_string(),
                        Some(first) if positional.len() == 1 => format!(
                            "`{name}` takes only properties ({}); did you mean `{name} {first}={}`?",
                            list(props),
                            written(extra)
                        ),
                        Some(_) => format!(
                            "`{name}` takes only properties ({}), written key=value",
                            list(props)
                        ),
                    };
                    self.error(
                        Code::UnexpectedArgument,
                        format!("`{name}` takes no arguments, but has {}", describe(extra)),
                        self.at(extra.span()).with_text("unexpected argument"),
                        help,
                    );
                }
            }
            Args::Name | Args::One => {
                let what = if args == Args::Name {
                    "a name"
                } else {
                    "a value"
                };
                if positional.is_empty() {
                    self.error(
                        Code::MissingValue,
                        format!("`{name}` needs {what}"),
                        name_at.with_text(format!("{what} is missing after this")),
                        format!("write it after the node name: `{name} \"…\"`"),
                    );
                }
                let meant = (args == Args::Name && positional.len() == 2)
                    .then(|| property_for_second_argument(name))
                    .flatten()
                    .filter(|key| props.contains(key) && !found.iter().any(|(k, _)| k == key));
                for extra in positional.iter().skip(1) {
                    let help = if let Some(key) = meant {
                        format!(
                            "`{name}` takes one name, then properties: did you mean `{key}={}`?",
                            as_property_value(extra)
                        )
                    } else if args == Args::Name {
                        format!(
                            "one `{name}` node declares one {name}: remove the extra argument, or write a separate `{name}` node for it"
                        )
                    } else {
                        "remove it".to_string()
                    };
                    self.error(
                        Code::UnexpectedArgument,
                        format!(
                            "`{name}` takes {what}, but has a second argument, {}",
                            describe(extra)
                        ),
                        self.at(extra.span()).with_text("extra argument"),
                        help,
                    );
                }
                positional.truncate(1);
                explained = meant;
            }
            Args::Strings => {
                if positional.is_empty() {
                    self.error(
                        Code::MissingValue,
                        format!("`{name}` needs at least one value"),
                        name_at.with_text("nothing listed"),
                        format!("list them after the node name: `{name} \"a\" \"b\"`"),
                    );
                }
            }
        }
        (
            positional,
            Props {
                entries: found,
                meant: explained,
            },
        )
    }

    /// Reports a type annotation on a value (`quota=(Gi)960`): KDL allows them, but the policy
    /// language gives them no meaning, and reading past one would hide a unit written as one.
    /// The value itself is still read.
    fn annotation(&mut self, entry: &KdlEntry) {
        let Some(ty) = entry.ty() else {
            return;
        };
        let annotation = ty.value();
        let value = written(entry);
        let with_unit = format!("{value}{annotation}");
        let is_number = matches!(entry.value(), KdlValue::Integer(_) | KdlValue::Float(_));
        // The key as written: a label key keeps its quotes (`"kai.scheduler/node-pool"=…`).
        let rewrite = |value: &str| match entry.name() {
            Some(key) => format!("`{}={value}`", key.repr().unwrap_or(key.value())),
            None => self.rewrite(entry, value),
        };
        // Rounded, so that any unit counts (`(m)500` is "500m", half a byte of memory).
        let unit_like = quantity::parse_rounded(&with_unit, 1000, quantity::Round::Up).is_ok();
        let help = if is_number && unit_like {
            let quoted = rewrite(&format!("\"{with_unit}\""));
            format!("a quantity with a unit is a string: did you mean {quoted}?")
        } else {
            format!("remove `({annotation})`: {}", rewrite(&value))
        };
        self.error(
            Code::InvalidValue,
            format!(
                "`({annotation})` is a type annotation, which is not part of the policy language"
            ),
            self.at(ty.span()).with_text("type annotation"),
            help,
        );
    }

    /// A node that holds one setting and no block: its entries, reporting any child nodes.
    fn setting<'n>(
        &mut self,
        node: &'n KdlNode,
        args: Args,
        props: &[&str],
    ) -> (Vec<&'n KdlEntry>, Props<'n>) {
        self.children(node, &[], props);
        self.entries(node, args, props)
    }

    /// The child nodes of `node` that it may have, reporting the others. `props` are the
    /// parent's own properties, to explain a property written as a child node.
    fn children<'n>(
        &mut self,
        node: &'n KdlNode,
        allowed: &[&str],
        props: &[&str],
    ) -> Vec<&'n KdlNode> {
        let Some(doc) = node.children() else {
            return Vec::new();
        };
        let parent = node.name().value();
        let mut out = Vec::new();
        for child in doc.nodes() {
            let name = child.name().value();
            if allowed.contains(&name) {
                out.push(child);
                continue;
            }
            let help = if props.contains(&name) {
                format!(
                    "`{name}` is a property of `{parent}`: write it on the `{parent}` line, as `{name}=…`"
                )
            } else if TOP_LEVEL.contains(&name) {
                // A near miss like `queue-label` would send a misplaced queue the wrong way.
                format!(
                    "`{name}` nodes belong at the top level of a file, not inside `{parent}`: move it after the block's closing `}}`"
                )
            } else {
                match did_you_mean(name, allowed.iter().copied()) {
                    Some(s) => format!("did you mean `{s}`?"),
                    None if allowed.is_empty() => {
                        format!("`{parent}` has no child nodes; remove the braces")
                    }
                    None => format!("inside `{parent}` you can write {}", list(allowed)),
                }
            };
            self.error(
                Code::UnknownNode,
                format!("`{name}` is not a setting of `{parent}`"),
                self.at(child.name().span()).with_text("unknown node"),
                help,
            );
        }
        out
    }

    /// Reports the second and later children named `name` (settings that may appear once);
    /// `within` names the block, like "`cluster`" or "queue \"research\"".
    fn once<'n>(&mut self, nodes: &[&'n KdlNode], name: &str, within: &str) -> Option<&'n KdlNode> {
        let mut matching = nodes.iter().filter(|n| n.name().value() == name);
        let first = matching.next().copied()?;
        for again in matching {
            let first_at = self.at(first.name().span()).with_text("first set here");
            self.diags.push(
                Diagnostic::error(
                    Code::Duplicate,
                    format!("`{name}` is set twice in {within}"),
                    self.at(again.name().span()).with_text("set again here"),
                )
                .with_secondary(first_at)
                .with_help(format!(
                    "keep one `{name}` node, and merge what the other one says into it"
                )),
            );
        }
        Some(first)
    }

    fn wrong_type(&mut self, entry: &KdlEntry, expected: &str, example: &str) {
        let what = self.subject(entry);
        let help = match (entry.value(), expected) {
            (KdlValue::String(s), "#true or #false") if s == "true" || s == "false" => {
                format!(
                    "KDL v2 writes booleans with #: {}",
                    self.rewrite(entry, &format!("#{s}"))
                )
            }
            (KdlValue::String(s), "a number" | "a whole number" | "a quantity")
                if s.trim().parse::<f64>().is_ok() =>
            {
                format!("remove the quotes: {}", self.rewrite(entry, s.trim()))
            }
            (KdlValue::Integer(_) | KdlValue::Float(_), "a string") => format!(
                "put it in quotes: {}",
                self.rewrite(entry, &format!("\"{}\"", written(entry)))
            ),
            _ => format!("write it like {example}"),
        };
        self.error(
            Code::WrongType,
            format!("{what} must be {expected}, not {}", describe(entry)),
            self.at(entry.span())
                .with_text(format!("expected {expected}")),
            help,
        );
    }

    fn string(&mut self, entry: &KdlEntry, example: &str) -> Option<String> {
        match entry.value() {
            KdlValue::String(s) => Some(s.clone()),
            _ => {
                self.wrong_type(entry, "a string", example);
                None
            }
        }
    }

    fn labelled_string(&mut self, entry: &KdlEntry, example: &str) -> Option<Named> {
        let value = self.string(entry, example)?;
        Some(Named {
            value,
            at: self.at(entry.span()),
        })
    }

    /// A whole number from `min` to `max`; `why` explains the range to the author.
    fn int(
        &mut self,
        entry: &KdlEntry,
        (min, max): (i64, i64),
        example: &str,
        why: Option<&str>,
    ) -> Option<i64> {
        match entry.value() {
            KdlValue::Integer(i) if (min as i128..=max as i128).contains(i) => Some(*i as i64),
            KdlValue::Integer(i) => {
                let (message, help) =
                    out_of_range(&self.subject(entry), &i.to_string(), (min, max), why);
                self.error(
                    Code::InvalidValue,
                    message,
                    self.at(entry.span()).with_text("out of range"),
                    help,
                );
                None
            }
            _ => {
                self.wrong_type(entry, "a whole number", example);
                None
            }
        }
    }

    fn bool(&mut self, entry: &KdlEntry) -> Option<bool> {
        match entry.value() {
            KdlValue::Bool(b) => Some(*b),
            _ => {
                let example = self.rewrite(entry, "#false");
                self.wrong_type(entry, "#true or #false", &example);
                None
            }
        }
    }

    fn number(&mut self, entry: &KdlEntry, example: &str) -> Option<f64> {
        let value = match entry.value() {
            KdlValue::Integer(i) => *i as f64,
            KdlValue::Float(f) => *f,
            _ => {
                self.wrong_type(entry, "a number", example);
                return None;
            }
        };
        if value == 0.0 && is_nonzero_literal(entry) {
            let what = self.subject(entry);
            let key = entry.name().map_or("value", |k| k.value());
            self.error(
                Code::InvalidQuantity,
                format!(
                    "{what} is {}, too small to be told apart from 0",
                    written(entry)
                ),
                self.at(entry.span()).with_text("too small"),
                format!("write `{key}=0` if 0 is meant, or a number of at least 1e-300"),
            );
            return None;
        }
        if !(0.0..=MAX_WEIGHT).contains(&value) {
            let (message, help) =
                weight_out_of_range(&self.subject(entry), &written(entry), example);
            self.error(
                Code::InvalidQuantity,
                message,
                self.at(entry.span()).with_text("out of range"),
                help,
            );
            return None;
        }
        Some(value)
    }

    /// A quantity of `kind`: a KDL number (read from its literal text, never through a float), a
    /// quantity string, or `#inf` where `unlimited_ok`. `what` names it: "gpu quota".
    fn quantity(
        &mut self,
        entry: &KdlEntry,
        kind: ResourceKind,
        what: &str,
        unlimited_ok: bool,
    ) -> Option<Bound> {
        let key = entry.name().map_or("value", |k| k.value());
        let invalid = |this: &mut Self, message: String, help: String| {
            this.error(
                Code::InvalidQuantity,
                message,
                this.at(entry.span()).with_text("invalid quantity"),
                help,
            );
            None
        };
        // Only the keywords mean unlimited or not-a-number: a literal such as `1e400` reads as
        // infinite too, and is read from its text below like any other number.
        let keyword = is_keyword(entry);
        let text = match entry.value() {
            KdlValue::Float(f) if keyword && f.is_infinite() && *f > 0.0 => {
                if unlimited_ok {
                    return Some(Bound::Unlimited);
                }
                return invalid(
                    self,
                    format!("the {what} cannot be unlimited"),
                    format!(
                        "give the real amount, like {}, or leave `{key}` out",
                        quantity_example(kind, key)
                    ),
                );
            }
            KdlValue::Float(f) if keyword && f.is_nan() => {
                return invalid(
                    self,
                    format!("the {what} cannot be #nan"),
                    format!("write an amount, like {}", quantity_example(kind, key)),
                );
            }
            KdlValue::Float(f) if keyword && f.is_infinite() => {
                let help = if unlimited_ok {
                    format!("write `{key}=#inf` for no bound, or an amount of 0 or more")
                } else {
                    "write an amount of 0 or more".to_string()
                };
                return invalid(self, format!("the {what} cannot be #-inf"), help);
            }
            KdlValue::Integer(i) => i.to_string(),
            KdlValue::Float(f) => entry
                .format()
                .map(|fmt| fmt.value_repr.replace('_', ""))
                .filter(|r| !r.is_empty())
                .unwrap_or_else(|| f.to_string()),
            KdlValue::String(s) => s.clone(),
            _ => {
                self.wrong_type(entry, "a quantity", &quantity_example(kind, key));
                return None;
            }
        };
        let shown = written(entry);
        // Kubernetes refuses spaces in a quantity (`" 1.5Gi"`), though our parser skips them:
        // the amount is judged without them, and the spaces are reported once it is valid.
        let bare = text.trim();
        let digits_end = bare
            .trim_start_matches(['-', '+'])
            .find(|c: char| !(c.is_ascii_digit() || c == '.'));
        let suffix = digits_end.map_or("", |i| &bare.trim_start_matches(['-', '+'])[i..]);
        if kind == ResourceKind::Gpu && BYTE_SUFFIXES.contains(&suffix) {
            let count = &bare[..bare.len() - suffix.len()];
            return invalid(
                self,
                format!(
                    "the {what} {shown} has a byte suffix, `{suffix}`, but GPUs are counted in devices"
                ),
                format!(
                    "write the number of GPUs, like `{key}={count}` (fractions such as `{key}=0.5` share a device)"
                ),
            );
        }
        let e = match quantity::parse_quantity(&text, kind) {
            Ok(_) if bare != text => {
                return invalid(
                    self,
                    format!("the {what} {shown} has spaces around the amount"),
                    format!(
                        "a Kubernetes quantity holds no spaces: did you mean `{key}=\"{bare}\"`?"
                    ),
                );
            }
            Ok(v) => {
                // An annotation (`(Gi)960`) was reported with its own help.
                if kind == ResourceKind::Memory
                    && suffix.is_empty()
                    && entry.ty().is_none()
                    && v > 0
                    && v < 1 << 20
                {
                    self.memory_without_unit(entry, what, key, &text);
                }
                return Some(Bound::Finite(v));
            }
            Err(e) => e,
        };
        let minus_one = text.trim().parse::<f64>() == Ok(-1.0);
        let (message, help) = match e {
            // KAI writes "unlimited" as -1; here that is `#inf` (and no limit is the default).
            QuantityError::Negative if minus_one && unlimited_ok => (
                format!("the {what} cannot be negative: {shown}"),
                if key == "limit" {
                    "KAI writes unlimited as -1; here write `limit=#inf`, or leave `limit` out (no limit is the default)".to_string()
                } else {
                    format!("KAI writes unlimited as -1; here write `{key}=#inf`")
                },
            ),
            QuantityError::Negative => negative(what, &shown),
            QuantityError::Unparsable(_) => (
                format!("the {what} {shown} is not a Kubernetes quantity"),
                match suggest_quantity(&text, kind) {
                    Some(s) => format!("did you mean `{key}=\"{s}\"`?"),
                    None => format!("write it like {}", quantity_example(kind, key)),
                },
            ),
            QuantityError::TooPrecise { resolution, .. } => (
                format!("the {what} {shown} is finer than the smallest step, {resolution}"),
                match kind {
                    ResourceKind::Gpu => "GPUs are counted in thousandths: keep at most 3 decimal places".to_string(),
                    ResourceKind::Cpu => "CPU is counted in millicores (\"1m\" is 0.001 CPU): round to a whole number of millicores".to_string(),
                    ResourceKind::Memory => match quantity::parse_rounded(bare, kind.scale(), quantity::Round::Up) {
                        Ok(bytes) => format!(
                            "memory is counted in whole bytes: did you mean `{key}=\"{}\"` (rounded up)?",
                            quantity::format_quantity(bytes, kind)
                        ),
                        Err(_) => "memory is counted in bytes: round to a whole number of bytes".to_string(),
                    },
                },
            ),
            QuantityError::TooLarge(_) => too_large(what, &shown, kind, key, unlimited_ok),
        };
        invalid(self, message, help)
    }

    /// `memory quota=12` is 12 bytes: almost certainly a unit was left out.
    fn memory_without_unit(&mut self, entry: &KdlEntry, what: &str, key: &str, text: &str) {
        let number = text.trim();
        self.diags.push(
            Diagnostic::warning(
                Code::BytesOfMemory,
                format!(
                    "the {what} {} has no unit, so it is {number} bytes",
                    written(entry)
                ),
                self.at(entry.span()).with_text("bytes"),
            )
            .with_help(memory_unit_help(key, number)),
        );
    }

    fn duration(&mut self, entry: &KdlEntry) -> Option<Duration> {
        let key = entry.name().map_or("value", |k| k.value()).to_string();
        if let KdlValue::Integer(n) = entry.value()
            && let Ok(seconds) = u64::try_from(*n)
        {
            self.duration_without_unit(entry, &key, seconds);
            return None;
        }
        let text = self.string(entry, &format!("`{key}=\"30m\"`"))?;
        match quantity::parse_duration(&text) {
            // The scheduler's readers trim what a cluster object holds; a policy, read by
            // people and diffed, has one spelling, as its quantities do.
            Ok(_) if text.trim() != text => {
                self.error(
                    Code::InvalidValue,
                    format!("`{key}` is \"{text}\", with spaces around the duration"),
                    self.at(entry.span()).with_text("spaces"),
                    format!("did you mean `{key}=\"{}\"`?", text.trim()),
                );
                None
            }
            Ok(d) => Some(d),
            Err(quantity::DurationError::TooLong(_)) => {
                self.error(
                    Code::InvalidValue,
                    format!(
                        "`{key}` is \"{text}\", longer than ten years, the longest duration a policy may state"
                    ),
                    self.at(entry.span()).with_text("too long"),
                    format!(
                        "write at most \"{}d\"; min-runtimes and fairness windows are far shorter",
                        quantity::MAX_DURATION.0 / 86_400
                    ),
                );
                None
            }
            Err(quantity::DurationError::UnitOrder { total, .. }) => {
                self.error(
                    Code::InvalidValue,
                    format!(
                        "`{key}` is \"{text}\", which repeats a unit or puts a smaller unit first"
                    ),
                    self.at(entry.span()).with_text("units out of order"),
                    format!(
                        "each unit comes once, largest first: did you mean `{key}=\"{}\"`?",
                        total.policy_form()
                    ),
                );
                None
            }
            Err(quantity::DurationError::Invalid(_)) => {
                let rule = "a duration is a number and a unit with no space (s, m, h, d or w), combined like \"1h30m\"";
                let help = match suggest_duration(&text) {
                    Some(s) => format!("did you mean `{key}=\"{s}\"`? {rule}"),
                    None => rule.to_string(),
                };
                self.error(
                    Code::InvalidValue,
                    format!("`{key}` is \"{text}\", which is not a duration"),
                    self.at(entry.span()).with_text("invalid duration"),
                    help,
                );
                None
            }
        }
    }

    /// `preempt=300`: a duration is a string with a unit, so suggest one that means what the
    /// number most likely does (seconds), also in its shortest spelling (`"5m"`).
    fn duration_without_unit(&mut self, entry: &KdlEntry, key: &str, seconds: u64) {
        let in_seconds = format!("{seconds}s");
        let shortest = Duration(seconds).to_string();
        let help = match quantity::parse_duration(&in_seconds) {
            Ok(_) if shortest != in_seconds => format!(
                "a duration is a string with a unit: did you mean `{key}=\"{in_seconds}\"`, which is `{key}=\"{shortest}\"`?"
            ),
            Ok(_) => format!(
                "a duration is a string with a unit: did you mean `{key}=\"{in_seconds}\"`?"
            ),
            Err(_) => "a duration is a string with a unit, like \"30s\", \"5m\" or \"24h\", of at most ten years".to_string(),
        };
        self.error(
            Code::WrongType,
            format!("`{key}` must be a string, not {}", describe(entry)),
            self.at(entry.span()).with_text("expected a string"),
            help,
        );
    }

    /// One of a fixed set of words; `what` names the set ("placement strategy").
    fn choice<T: Copy>(
        &mut self,
        entry: &KdlEntry,
        options: &[(&str, T)],
        what: &str,
    ) -> Option<T> {
        let words: Vec<&str> = options.iter().map(|(w, _)| *w).collect();
        let example = self.rewrite(entry, &format!("\"{}\"", words[0]));
        let text = self.string(entry, &example)?;
        if let Some((_, v)) = options.iter().find(|(w, _)| *w == text) {
            return Some(*v);
        }
        let help = match did_you_mean(&text, words.iter().copied()) {
            Some(s) => format!("did you mean {}?", self.rewrite(entry, &format!("\"{s}\""))),
            None => format!("use {}", or_list(&words)),
        };
        self.error(
            Code::InvalidValue,
            format!(
                "\"{text}\" is not {} {what}: expected {}",
                if what.starts_with(['a', 'e', 'i', 'o', 'u']) {
                    "an"
                } else {
                    "a"
                },
                or_list(&words)
            ),
            self.at(entry.span()).with_text(format!("unknown {what}")),
            help,
        );
        None
    }

    /// A name that must be a DNS-1123 subdomain (a Kubernetes object name). An invalid name is
    /// reported and still returned, so the rest of the declaration is checked too.
    fn object_name(&mut self, entry: &KdlEntry, what: &str) -> Option<Named> {
        let node = self.node.clone();
        let named = self.labelled_string(entry, &format!("`{node} \"my-name\"`"))?;
        if let Err(why) = check_dns_subdomain(&named.value) {
            let rule = format!(
                "{what} names become Kubernetes object names: lower-case letters, digits, '-' and '.', starting and ending with a letter or digit"
            );
            let help = match suggest_name(&named.value, 253) {
                Some(s) => format!("{rule}, like \"{s}\""),
                None if !named.value.is_ascii() => format!("{rule}; write the name in ASCII"),
                None => rule,
            };
            self.error(
                Code::InvalidName,
                format!("\"{}\" cannot be a {what} name: {why}", named.value),
                named.at.clone().with_text("invalid name"),
                help,
            );
        }
        Some(named)
    }

    fn label_key(&mut self, entry: &KdlEntry) -> Option<String> {
        let example = self.rewrite(entry, "\"topology.kubernetes.io/zone\"");
        let text = self.string(entry, &example)?;
        if let Err(why) = check_label_key(&text) {
            self.error(
                Code::InvalidValue,
                format!("\"{text}\" is not a Kubernetes label key: {why}"),
                self.at(entry.span()).with_text("invalid label key"),
                "label keys look like `nvidia.com/gpu.clique` or `topology.kubernetes.io/zone`",
            );
            return None;
        }
        Some(text)
    }
}

/// The values a priority class may have, and why not higher.
pub(super) const PRIORITY_CLASS_VALUES: (i64, i64) = (-2_147_483_648, 1_000_000_000);
pub(super) const PRIORITY_CLASS_WHY: &str =
    "Kubernetes keeps values above 1000000000 for its own system classes";
/// The values a queue's `priority` may have.
pub(super) const QUEUE_PRIORITIES: (i64, i64) = (-1_000_000_000, 1_000_000_000);
/// The values `max-gpus-per-node` may have.
pub(super) const GPUS_PER_NODE: (i64, i64) = (1, 1024);
/// The largest `weight` (and fairness `k`).
pub(super) const MAX_WEIGHT: f64 = 1e9;

/// Message and help for a whole number outside `min..=max`; `what` names the setting.
pub(super) fn out_of_range(
    what: &str,
    shown: &str,
    (min, max): (i64, i64),
    why: Option<&str>,
) -> (String, String) {
    (
        format!("{what} is {shown}, out of range: it must be from {min} to {max}"),
        match why {
            Some(why) => format!("use a whole number from {min} to {max}: {why}"),
            None => format!("use a whole number from {min} to {max}"),
        },
    )
}

/// Message and help for a weight outside 0..=1e9; `example` is like "`weight=2`".
pub(super) fn weight_out_of_range(what: &str, shown: &str, example: &str) -> (String, String) {
    (
        format!("{what} must be a number from 0 to 1e9, not {shown}"),
        format!("write a plain non-negative number, like {example}"),
    )
}

/// Message and help for a negative amount; `what` is like "gpu quota".
pub(super) fn negative(what: &str, shown: &str) -> (String, String) {
    (
        format!("the {what} cannot be negative: {shown}"),
        "quantities count resources: use 0 or more".to_string(),
    )
}

/// Message and help for an amount above the largest we store; `what` is like "gpu quota".
pub(super) fn too_large(
    what: &str,
    shown: &str,
    kind: ResourceKind,
    key: &str,
    unlimited_ok: bool,
) -> (String, String) {
    let max = quantity::MAX_AMOUNT / kind.scale() as i64 * kind.scale() as i64;
    let largest = quantity::format_quantity(max, kind);
    (
        format!("the {what} {shown} is too large"),
        if unlimited_ok {
            format!(
                "the largest {} amount is {largest}; write `{key}=#inf` for no bound",
                kind.name()
            )
        } else {
            format!("the largest {} amount is {largest}", kind.name())
        },
    )
}

/// Suffixes that scale bytes (or counts by thousands): never part of a GPU count. `m` (milli)
/// is not here: `"500m"` is half a GPU.
const BYTE_SUFFIXES: &[&str] = &[
    "Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "k", "K", "M", "G", "T", "P", "E", "B", "KB", "MB", "GB",
    "TB", "KiB", "MiB", "GiB", "TiB",
];

fn quantity_example(kind: ResourceKind, key: &str) -> String {
    match kind {
        ResourceKind::Gpu => format!("`{key}=8` or `{key}=0.5`"),
        ResourceKind::Cpu => format!("`{key}=16` or `{key}=\"500m\"`"),
        ResourceKind::Memory => format!("`{key}=\"960Gi\"` or `{key}=\"512M\"`"),
    }
}

/// A quantity the author probably meant: `960GB` → `960G`, `16 cores` → `16`.
fn suggest_quantity(text: &str, kind: ResourceKind) -> Option<String> {
    let compact: String = text.chars().filter(|c| !c.is_whitespace()).collect();
    let number_end = compact
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(compact.len());
    let (number, unit) = compact.split_at(number_end);
    let unit = match (kind, unit.to_ascii_lowercase().as_str()) {
        (ResourceKind::Memory, "b" | "bytes") => String::new(),
        (ResourceKind::Memory, u) if u.ends_with("ib") && u.len() == 3 => {
            format!("{}i", u[..1].to_ascii_uppercase())
        }
        (ResourceKind::Memory, u) if u.ends_with('b') && u.len() == 2 => {
            let prefix = &unit[..1];
            if prefix == "k" || prefix == "K" {
                "k".to_string()
            } else {
                prefix.to_ascii_uppercase()
            }
        }
        (ResourceKind::Cpu, "cores" | "core" | "cpu" | "cpus") => String::new(),
        (ResourceKind::Cpu, "millicores" | "millicore") => "m".to_string(),
        (ResourceKind::Gpu, "gpu" | "gpus") => String::new(),
        _ => return None,
    };
    let candidate = format!("{number}{unit}");
    (candidate != text && quantity::parse_quantity(&candidate, kind).is_ok()).then_some(candidate)
}

/// A duration the author probably meant: `5 min` → `5m`, `7 days` → `7d`.
fn suggest_duration(text: &str) -> Option<String> {
    let compact: String = text.chars().filter(|c| !c.is_whitespace()).collect();
    let mut out = String::new();
    let mut rest = compact.as_str();
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        if digits == 0 {
            return None;
        }
        out.push_str(&rest[..digits]);
        rest = &rest[digits..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit())
            .unwrap_or(rest.len());
        let unit = match rest[..unit_len].to_ascii_lowercase().as_str() {
            "s" | "sec" | "secs" | "second" | "seconds" => "s",
            "m" | "min" | "mins" | "minute" | "minutes" => "m",
            "h" | "hr" | "hrs" | "hour" | "hours" => "h",
            "d" | "day" | "days" => "d",
            "w" | "wk" | "wks" | "week" | "weeks" => "w",
            _ => return None,
        };
        out.push_str(unit);
        rest = &rest[unit_len..];
    }
    (out != text && quantity::parse_duration(&out).is_ok()).then_some(out)
}

/// Why `name` is not a DNS-1123 subdomain, if it is not: every dot-separated part is a label,
/// starting and ending with a letter or digit (`a..b` and `a.-b` are not names).
pub(crate) fn check_dns_subdomain(name: &str) -> Result<(), String> {
    check_dns_characters(name)?;
    let alnum = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
    match name
        .split('.')
        .find(|part| !(part.starts_with(alnum) && part.ends_with(alnum)))
    {
        Some("") => {
            Err("it has two dots in a row; each part between dots needs a letter or digit".into())
        }
        Some(part) => Err(format!(
            "its part \"{part}\" must start and end with a letter or digit, as each part between dots must"
        )),
        None => Ok(()),
    }
}

/// Why `name` is not lower-case letters, digits, `-` and `.` starting and ending with a letter
/// or digit, at most 253 characters, if it is not.
fn check_dns_characters(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("it is empty".into());
    }
    if name.len() > 253 {
        return Err(format!(
            "it is {} characters long; at most 253 are allowed",
            name.len()
        ));
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '-' || *c == '.'))
    {
        return Err(if c.is_uppercase() {
            format!("it contains the upper-case letter '{c}'")
        } else if c.is_whitespace() {
            "it contains a space".to_string()
        } else {
            format!("it contains {c:?}")
        });
    }
    let alnum = |c: Option<char>| c.is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    if !alnum(name.chars().next()) || !alnum(name.chars().last()) {
        return Err("it must start and end with a letter or digit".into());
    }
    Ok(())
}

/// Why `name` is not a DNS-1123 label (a namespace name), if it is not.
pub(crate) fn check_dns_label(name: &str) -> Result<(), String> {
    check_dns_characters(name)?;
    if name.contains('.') {
        return Err("it contains '.'".into());
    }
    if name.len() > 63 {
        return Err(format!(
            "it is {} characters long; at most 63 are allowed",
            name.len()
        ));
    }
    Ok(())
}

fn check_label_key(key: &str) -> Result<(), String> {
    let (prefix, name) = match key.rsplit_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    if let Some(p) = prefix {
        check_dns_subdomain(p).map_err(|e| format!("its prefix \"{p}\" is not a DNS name: {e}"))?;
    }
    let ok = |c: char| c.is_ascii_alphanumeric();
    if name.is_empty() || name.len() > 63 {
        return Err(format!(
            "its name part \"{name}\" must be 1 to 63 characters"
        ));
    }
    if !name.chars().all(|c| ok(c) || matches!(c, '-' | '_' | '.'))
        || !name.starts_with(ok)
        || !name.ends_with(ok)
    {
        return Err(format!(
            "its name part \"{name}\" may hold only letters, digits, '-', '_' and '.', and must start and end with a letter or digit"
        ));
    }
    Ok(())
}

/// Kubernetes' rule for label values: empty, or up to 63 characters of letters, digits, `-`, `_`
/// and `.`, starting and ending with a letter or digit.
fn check_label_value(value: &str) -> Result<(), String> {
    let ok = |c: char| c.is_ascii_alphanumeric();
    if value.is_empty() {
        return Ok(());
    }
    if value.len() > 63 {
        return Err(format!(
            "it is {} characters long; at most 63 are allowed",
            value.len()
        ));
    }
    if !value.chars().all(|c| ok(c) || matches!(c, '-' | '_' | '.'))
        || !value.starts_with(ok)
        || !value.ends_with(ok)
    {
        return Err("it may hold only letters, digits, '-', '_' and '.', and must start and end with a letter or digit".into());
    }
    Ok(())
}

/// A valid namespace name close to `name`, if it differs from `name`.
fn suggest_label(name: &str) -> Option<String> {
    let dashed = name.replace('.', "-");
    let s = suggest_name(&dashed, 63).unwrap_or(dashed);
    (s != name && check_dns_label(&s).is_ok()).then_some(s)
}

/// A valid name close to `name`, at most `max` characters long, if it differs from `name`.
/// Accented Latin letters lose their accents (`équipe` → `equipe`); a name with a letter that
/// has no plain ASCII form gets no suggestion, since dropping the letter (`ℌello` → `ello`)
/// would propose a different name.
fn suggest_name(name: &str, max: usize) -> Option<String> {
    let mut lowered = String::new();
    for c in name.to_lowercase().chars() {
        if c.is_ascii_alphanumeric() || c == '.' {
            lowered.push(c);
        } else if let Some(plain) = plain_latin(c) {
            lowered.push_str(plain);
        } else if c.is_alphanumeric() {
            return None;
        } else {
            lowered.push('-');
        }
    }
    let cut: String = lowered.chars().take(max).collect();
    // Each part between dots starts and ends with a letter or digit: `a.-b` → `a.b`.
    let trimmed = cut
        .split('.')
        .map(|part| part.trim_matches(|c: char| !c.is_ascii_alphanumeric()))
        .filter(|part| !part.is_empty())
        .collect::<Vec<_>>()
        .join(".");
    (!trimmed.is_empty() && trimmed != name).then_some(trimmed)
}

/// The plain ASCII spelling of a common accented or special lower-case Latin letter.
fn plain_latin(c: char) -> Option<&'static str> {
    Some(match c {
        'à' | 'á' | 'â' | 'ã' | 'ä' | 'å' | 'ā' | 'ă' | 'ą' => "a",
        'æ' => "ae",
        'ç' | 'ć' | 'ĉ' | 'ċ' | 'č' => "c",
        'ď' | 'đ' | 'ð' => "d",
        'è' | 'é' | 'ê' | 'ë' | 'ē' | 'ĕ' | 'ė' | 'ę' | 'ě' => "e",
        'ĝ' | 'ğ' | 'ġ' | 'ģ' => "g",
        'ĥ' | 'ħ' => "h",
        'ì' | 'í' | 'î' | 'ï' | 'ĩ' | 'ī' | 'ĭ' | 'į' | 'ı' => "i",
        'ĵ' => "j",
        'ķ' => "k",
        'ĺ' | 'ļ' | 'ľ' | 'ŀ' | 'ł' => "l",
        'ñ' | 'ń' | 'ņ' | 'ň' => "n",
        'ò' | 'ó' | 'ô' | 'õ' | 'ö' | 'ø' | 'ō' | 'ŏ' | 'ő' => "o",
        'œ' => "oe",
        'ŕ' | 'ŗ' | 'ř' => "r",
        'ś' | 'ŝ' | 'ş' | 'š' | 'ș' => "s",
        'ß' => "ss",
        'ţ' | 'ť' | 'ŧ' | 'ț' => "t",
        'þ' => "th",
        'ù' | 'ú' | 'û' | 'ü' | 'ũ' | 'ū' | 'ŭ' | 'ů' | 'ű' | 'ų' => "u",
        'ŵ' => "w",
        'ý' | 'ÿ' | 'ŷ' => "y",
        'ź' | 'ż' | 'ž' => "z",
        _ => return None,
    })
}

const TOP_LEVEL: &[&str] = &["cluster", "priority-class", "placement", "queue"];
const CLUSTER_CHILDREN: &[&str] = &[
    "scheduler-name",
    "queue-label",
    "capacity",
    "placement",
    "fairness",
    "min-runtime",
    "oversubscription",
];
const QUEUE_CHILDREN: &[&str] = &[
    "gpu",
    "cpu",
    "memory",
    "namespaces",
    "default-priority-class",
    "placement",
    "min-runtime",
    "labels",
    "annotations",
    "queue",
];
const QUEUE_PROPS: &[&str] = &["display-name", "priority", "parent"];
const PRIORITY_CLASS_PROPS: &[&str] = &["value", "preemptible", "description"];
const STRATEGIES: &[(&str, Strategy)] =
    &[("binpack", Strategy::Binpack), ("spread", Strategy::Spread)];
const STRATEGY: &str = "placement strategy";

impl Reader<'_> {
    /// Reads every top-level node of one file.
    pub fn document(&mut self, doc: &KdlDocument) {
        for node in doc.nodes() {
            match node.name().value() {
                "cluster" => self.cluster(node),
                "priority-class" => self.priority_class(node),
                "placement" => self.placement(node),
                "queue" => self.queue(node, None, 0),
                other => {
                    let help = if QUEUE_CHILDREN.contains(&other) {
                        format!(
                            "`{other}` goes inside a `queue` block: `queue \"team-a\" {{ {other} … }}`"
                        )
                    } else if CLUSTER_CHILDREN.contains(&other) {
                        format!(
                            "`{other}` goes inside the `cluster` block: `cluster \"gpu-prod\" {{ {other} … }}`"
                        )
                    } else {
                        match did_you_mean(other, TOP_LEVEL.iter().copied()) {
                            Some(s) => format!("did you mean `{s}`?"),
                            None => format!("a policy file holds {}", list(TOP_LEVEL)),
                        }
                    };
                    self.error(
                        Code::UnknownNode,
                        format!("`{other}` is not a node of the policy language"),
                        self.at(node.name().span()).with_text("unknown node"),
                        help,
                    );
                }
            }
        }
    }

    fn cluster(&mut self, node: &KdlNode) {
        let (args, _) = self.entries(node, Args::Name, &[]);
        let mut decl = ClusterDecl {
            name: args
                .first()
                .and_then(|e| self.string(e, "`cluster \"gpu-prod\"`")),
            at: self.at(node.name().span()),
            scheduler_name: None,
            queue_label: None,
            capacity: PerResource::default(),
            capacity_at: PerResource::default(),
            placement: DefaultPlacement::default(),
            fairness: None,
            min_runtime: MinRuntime::default(),
            oversubscription: Oversubscription::default(),
        };
        let within = "`cluster`";
        let children = self.children(node, CLUSTER_CHILDREN, &[]);
        if let Some(n) = self.once(&children, "scheduler-name", within) {
            let (args, _) = self.setting(n, Args::One, &[]);
            decl.scheduler_name = args
                .first()
                .and_then(|e| self.object_name(e, "scheduler"))
                .map(|n| n.value);
        }
        if let Some(n) = self.once(&children, "queue-label", within) {
            let (args, _) = self.setting(n, Args::One, &[]);
            decl.queue_label = args.first().and_then(|e| self.label_key(e));
        }
        if let Some(n) = self.once(&children, "capacity", within) {
            let (_, props) = self.setting(n, Args::None, &["gpu", "cpu", "memory"]);
            for kind in ResourceKind::ALL {
                if let Some(e) = props.get(kind.name()) {
                    let what = format!("{} capacity", kind.name());
                    if let Some(Bound::Finite(v)) = self.quantity(e, kind, &what, false) {
                        *decl.capacity.get_mut(kind) = Some(v);
                        *decl.capacity_at.get_mut(kind) = Some(self.at(e.span()));
                    }
                }
            }
        }
        if let Some(n) = self.once(&children, "placement", within) {
            let (_, props) = self.setting(n, Args::None, &["gpu", "cpu"]);
            if let Some(s) = props
                .get("gpu")
                .and_then(|e| self.choice(e, STRATEGIES, STRATEGY))
            {
                decl.placement.gpu = s;
            }
            if let Some(s) = props
                .get("cpu")
                .and_then(|e| self.choice(e, STRATEGIES, STRATEGY))
            {
                decl.placement.cpu = s;
            }
        }
        if let Some(n) = self.once(&children, "fairness", within) {
            let (_, props) = self.setting(n, Args::None, &["k", "window", "half-life"]);
            let mut f = FAIRNESS_DEFAULT;
            if let Some(k) = props.get("k").and_then(|e| self.number(e, "`k=1.0`")) {
                f.k = k;
            }
            if let Some(w) = props.get("window").and_then(|e| self.positive_duration(e)) {
                f.window = w;
            }
            if let Some(h) = props
                .get("half-life")
                .and_then(|e| self.positive_duration(e))
            {
                f.half_life = h;
            }
            decl.fairness = Some(f);
        }
        if let Some(n) = self.once(&children, "min-runtime", within) {
            decl.min_runtime = self.min_runtime(n);
        }
        if let Some(n) = self.once(&children, "oversubscription", within) {
            let (args, _) = self.setting(n, Args::One, &[]);
            let modes = [
                ("error", Oversubscription::Error),
                ("warn", Oversubscription::Warn),
                ("allow", Oversubscription::Allow),
            ];
            if let Some(m) = args
                .first()
                .and_then(|e| self.choice(e, &modes, "over-subscription mode"))
            {
                decl.oversubscription = m;
            }
        }
        self.out.clusters.push(decl);
    }

    fn positive_duration(&mut self, entry: &KdlEntry) -> Option<Duration> {
        let d = self.duration(entry)?;
        if d.0 == 0 {
            let what = self.subject(entry);
            self.error(
                Code::InvalidValue,
                format!("{what} must be longer than 0"),
                self.at(entry.span()).with_text("zero"),
                "give a length of time, like \"24h\"",
            );
            return None;
        }
        Some(d)
    }

    fn min_runtime(&mut self, node: &KdlNode) -> MinRuntime {
        let (_, props) = self.setting(node, Args::None, &["preempt", "reclaim"]);
        // An empty node is no default: it reads as if a min-runtime were set when none is. A node
        // with only a misspelt property is reported for that property alone.
        if node.entries().is_empty() {
            self.error(
                Code::MissingValue,
                "`min-runtime` sets neither `preempt` nor `reclaim`",
                self.at(node.name().span()).with_text("no preempt= or reclaim= here"),
                "give `preempt=`, `reclaim=` or both, like `min-runtime preempt=\"5m\" reclaim=\"10m\"`, or remove the line",
            );
        }
        MinRuntime {
            preempt: props.get("preempt").and_then(|e| self.duration(e)),
            reclaim: props.get("reclaim").and_then(|e| self.duration(e)),
        }
    }

    fn priority_class(&mut self, node: &KdlNode) {
        let (args, props) = self.setting(node, Args::Name, PRIORITY_CLASS_PROPS);
        let name = args
            .first()
            .and_then(|e| self.object_name(e, "priority class"));
        let value = match props.get("value") {
            Some(e) => self.int(
                e,
                PRIORITY_CLASS_VALUES,
                "`value=500`",
                Some(PRIORITY_CLASS_WHY),
            ),
            None if props.meant == Some("value") => None,
            None => {
                self.error(
                    Code::MissingValue,
                    "a priority class needs a `value`",
                    self.at(node.name().span()).with_text("no value= here"),
                    "add `value=N`: higher values run first; below 100 is preemptible by default",
                );
                None
            }
        };
        let preemptible = props.get("preemptible").and_then(|e| self.bool(e));
        let description = props
            .get("description")
            .and_then(|e| self.string(e, "`description=\"…\"`"));
        if let (Some(name), None) = (&name, value) {
            self.out.half_read.push(name.value.clone());
        }
        if let (Some(name), Some(value)) = (name, value) {
            self.out.priority_classes.push(PriorityClassDecl {
                name,
                value: value as i32,
                preemptible: preemptible.unwrap_or(value < 100),
                description,
                at: self.at(node.name().span()),
            });
        }
    }

    fn placement(&mut self, node: &KdlNode) {
        let (args, props) = self.entries(node, Args::Name, &["strategy"]);
        let name = args
            .first()
            .and_then(|e| self.labelled_string(e, "`placement \"training-pack\"`"));
        let strategy = props
            .get("strategy")
            .and_then(|e| self.choice(e, STRATEGIES, STRATEGY))
            .unwrap_or_default();
        let within = match &name {
            Some(n) => format!("placement \"{}\"", n.value),
            None => "`placement`".to_string(),
        };
        let children = self.children(node, &["max-gpus-per-node", "topology"], &["strategy"]);
        let mut decl_max = None;
        if let Some(n) = self.once(&children, "max-gpus-per-node", &within) {
            let (args, _) = self.setting(n, Args::One, &[]);
            decl_max = args
                .first()
                .and_then(|e| self.int(e, GPUS_PER_NODE, "`max-gpus-per-node 2`", None))
                .map(|v| v as u32);
        }
        let (mut required, mut preferred) = (None, None);
        if let Some(n) = self.once(&children, "topology", &within) {
            let (_, props) = self.setting(n, Args::None, &["required", "preferred"]);
            required = props.get("required").and_then(|e| self.label_key(e));
            preferred = props.get("preferred").and_then(|e| self.label_key(e));
            if props.entries.is_empty() {
                self.error(
                    Code::MissingValue,
                    "`topology` needs `required=` or `preferred=`",
                    self.at(n.name().span()).with_text("no label given"),
                    "name a node label, like `topology required=\"nvidia.com/gpu.clique\"`",
                );
            }
        }
        if let Some(name) = name {
            self.out.placements.push(PlacementDecl {
                name,
                strategy,
                max_gpus_per_node: decl_max,
                topology_required: required,
                topology_preferred: preferred,
                at: self.at(node.name().span()),
            });
        }
    }

    fn queue(&mut self, node: &KdlNode, nested_in: Option<usize>, depth: usize) {
        if depth >= MAX_QUEUE_DEPTH {
            let name = node
                .entries()
                .iter()
                .find(|e| e.name().is_none())
                .and_then(|e| e.value().as_string())
                .map_or(String::new(), |n| format!(" \"{n}\""));
            self.error(
                Code::PolicyTooLarge,
                format!(
                    "queue{name} is nested {} levels deep; at most {MAX_QUEUE_DEPTH} are allowed",
                    depth + 1
                ),
                self.at(node.name().span()).with_text("too deep"),
                "flatten the hierarchy; queue trees are rarely deeper than 4 levels",
            );
            // Its parent is not a leaf, even though this queue is not read.
            if let Some(parent) = nested_in {
                self.out.queues[parent].incomplete = true;
            }
            return;
        }
        let mark = self.mark();
        let (args, props) = self.entries(node, Args::Name, QUEUE_PROPS);
        let name = args.first().and_then(|e| self.object_name(e, "queue"));
        let display_name = props
            .get("display-name")
            .and_then(|e| self.string(e, "`display-name=\"Research\"`"));
        let priority = props
            .get("priority")
            .and_then(|e| self.int(e, QUEUE_PRIORITIES, "`priority=100`", None))
            .map_or(100, |p| p as i32);
        let parent = props
            .get("parent")
            .and_then(|e| self.labelled_string(e, "`parent=\"research\"`"));
        let within = match &name {
            Some(n) => format!("queue \"{}\"", n.value),
            None => "`queue`".to_string(),
        };
        let children = self.children(node, QUEUE_CHILDREN, QUEUE_PROPS);
        let mut decl = QueueDecl {
            // A queue without a name is still recorded, so that the queues nested in it are
            // not mistaken for top-level ones; the whole-policy rules skip it.
            name: name.clone().unwrap_or(Named {
                value: String::new(),
                at: self.at(node.name().span()),
            }),
            display_name,
            priority,
            parent_unreadable: props.get("parent").is_some() && parent.is_none(),
            parent,
            nested_in,
            resources: Default::default(),
            namespaces: Vec::new(),
            default_priority_class: None,
            placement: None,
            min_runtime: Default::default(),
            labels: Default::default(),
            annotations: Default::default(),
            incomplete: false,
        };
        for kind in ResourceKind::ALL {
            if let Some(n) = self.once(&children, kind.name(), &within) {
                decl.resources[kind as usize] = self.resource(n, kind);
            }
        }
        for n in children.iter().filter(|n| n.name().value() == "namespaces") {
            let (args, _) = self.setting(n, Args::Strings, &[]);
            for e in args {
                let Some(ns) = self.labelled_string(e, "`namespaces \"team-a\" \"team-a-dev\"`")
                else {
                    continue;
                };
                if ns.value != "*"
                    && let Err(why) = check_dns_label(&ns.value)
                {
                    let rule = "namespace names are lower-case letters, digits and '-', starting and ending with a letter or digit";
                    let help = match suggest_label(&ns.value) {
                        Some(s) => format!(
                            "{rule}, like \"{s}\"; \"*\" opens the queue to every namespace"
                        ),
                        None if !ns.value.is_ascii() => format!(
                            "{rule}; write the name in ASCII; \"*\" opens the queue to every namespace"
                        ),
                        None => format!("{rule}; \"*\" opens the queue to every namespace"),
                    };
                    self.error(
                        Code::InvalidName,
                        format!("\"{}\" is not a namespace name: {why}", ns.value),
                        ns.at.clone().with_text("invalid namespace"),
                        help,
                    );
                    continue;
                }
                decl.namespaces.push(ns);
            }
        }
        if let Some(n) = self.once(&children, "default-priority-class", &within) {
            let (args, _) = self.setting(n, Args::One, &[]);
            decl.default_priority_class = args
                .first()
                .and_then(|e| self.labelled_string(e, "`default-priority-class \"interactive\"`"));
        }
        if let Some(n) = self.once(&children, "placement", &within) {
            let (args, _) = self.setting(n, Args::One, &[]);
            decl.placement = args
                .first()
                .and_then(|e| self.labelled_string(e, "`placement \"training-pack\"`"));
        }
        if let Some(n) = self.once(&children, "min-runtime", &within) {
            decl.min_runtime = self.min_runtime(n);
        }
        if let Some(n) = self.once(&children, "labels", &within) {
            decl.labels = self.object_metadata(n, true);
        }
        if let Some(n) = self.once(&children, "annotations", &within) {
            decl.annotations = self.object_metadata(n, false);
        }
        // A queue with a mistake in it is not judged on what could be read (a misspelt
        // `namespace` must not also make it "unreachable").
        decl.incomplete = self.failed_since(mark);
        let index = self.out.queues.len();
        self.out.queues.push(decl);
        for child in children.iter().filter(|n| n.name().value() == "queue") {
            self.queue(child, Some(index), depth + 1);
        }
    }

    /// `labels "k"="v" …` (`labels`) or `annotations "k"="v" …`: metadata for the queue's
    /// Kubernetes object, such as KAI's `kai.scheduler/node-pool` label. Keys are Kubernetes
    /// label keys; label values follow Kubernetes' label-value rule, annotation values are any
    /// text.
    fn object_metadata(
        &mut self,
        node: &KdlNode,
        labels: bool,
    ) -> std::collections::BTreeMap<String, String> {
        let what = if labels { "label" } else { "annotation" };
        let node_name = node.name().value();
        let example = format!("`{node_name} \"kai.scheduler/node-pool\"=\"pool-a\"`");
        let mut out = std::collections::BTreeMap::new();
        if let Some(block) = node.children() {
            self.error(
                Code::UnexpectedArgument,
                format!("`{node_name}` takes no block"),
                self.at(block.span()).with_text("block"),
                format!("write the {what}s as key=value on the node: {example}"),
            );
        }
        let mut firsts: Vec<(&str, Label)> = Vec::new();
        for entry in node.entries() {
            self.annotation(entry);
            let Some(key) = entry.name() else {
                self.error(
                    Code::UnexpectedArgument,
                    format!(
                        "`{node_name}` takes only key=value pairs, but has {}",
                        describe(entry)
                    ),
                    self.at(entry.span()).with_text("not key=value"),
                    format!("write each {what} as \"key\"=\"value\": {example}"),
                );
                continue;
            };
            let key = key.value();
            let at = self.at(entry.span());
            if let Err(why) = check_label_key(key) {
                self.error(
                    Code::InvalidName,
                    format!("\"{key}\" is not a Kubernetes {what} key: {why}"),
                    at.with_text(format!("invalid {what} key")),
                    format!("{what} keys are an optional DNS prefix and a name, like \"kai.scheduler/node-pool\""),
                );
                continue;
            }
            if labels && key == crate::lower::objects::MANAGED_BY.0 {
                self.error(
                    Code::InvalidValue,
                    format!("the label \"{key}\" is kai-policy's own"),
                    at.with_text("reserved label"),
                    "kai-policy sets it on every object it writes, so that audits and `kubectl apply --prune` find them; remove it",
                );
                continue;
            }
            let Some(value) = entry.value().as_string() else {
                self.wrong_type(entry, "a string", &example);
                continue;
            };
            if labels && let Err(why) = check_label_value(value) {
                self.error(
                    Code::InvalidValue,
                    format!("\"{value}\" is not a Kubernetes label value: {why}"),
                    at.with_text("invalid label value"),
                    "label values are at most 63 letters, digits, '-', '_' and '.', starting and ending with a letter or digit (or empty); put longer text in `annotations`",
                );
                continue;
            }
            if let Some((_, first)) = firsts.iter().find(|(k, _)| *k == key) {
                self.diags.push(
                    Diagnostic::error(
                        Code::Duplicate,
                        format!("the {what} \"{key}\" is set twice"),
                        at.with_text("set again here"),
                    )
                    .with_secondary(first.clone().with_text("first set here"))
                    .with_help(format!("keep one \"{key}\"=")),
                );
                continue;
            }
            firsts.push((key, at));
            out.insert(key.to_string(), value.to_string());
        }
        out
    }

    /// A `gpu`, `cpu` or `memory` node; `None` if anything in it is wrong, so that the
    /// whole-policy rules do not build on half-read numbers.
    fn resource(&mut self, node: &KdlNode, kind: ResourceKind) -> Option<ResourceDecl> {
        let mark = self.mark();
        let props_allowed = &["quota", "limit", "weight"];
        let (_, props) = self.setting(node, Args::None, props_allowed);
        let quota_entry = props.get("quota");
        let limit_entry = props.get("limit");
        let quota = match quota_entry {
            Some(e) => self.quantity(e, kind, &format!("{} quota", kind.name()), true),
            None => Some(Bound::Finite(0)),
        };
        let limit = match limit_entry {
            Some(e) => self.quantity(e, kind, &format!("{} limit", kind.name()), true),
            None => Some(Bound::Unlimited),
        };
        let weight = match props.get("weight") {
            Some(e) => self.number(e, "`weight=2`"),
            None => Some(1.0),
        };
        if self.failed_since(mark) {
            return None;
        }
        Some(ResourceDecl {
            policy: crate::model::ResourcePolicy {
                quota: quota?,
                limit: limit?,
                weight: weight?,
            },
            at: self.at(node.name().span()),
            quota_at: quota_entry.map(|e| self.at(e.span())),
            limit_at: limit_entry.map(|e| self.at(e.span())),
            weight_at: props.get("weight").map(|e| self.at(e.span())),
        })
    }
}

/// The help for a memory amount written without a unit: the unit a person most likely left
/// out. A queue's memory is rarely above 64 TiB, so a larger number was more likely meant in
/// Mi (`524288` is 512 Gi), a smaller one in Gi.
fn memory_unit_help(key: &str, number: &str) -> String {
    let tail = "Less than 1Mi of memory cannot run a pod";
    match number.parse::<u64>() {
        Ok(n) if n > 65_536 && n % 1024 == 0 => format!(
            "memory amounts take a unit: did you mean `{key}=\"{number}Mi\"` (that is {}Gi)? {tail}",
            n / 1024
        ),
        Ok(n) if n > 65_536 => {
            format!("memory amounts take a unit: did you mean `{key}=\"{number}Mi\"`? {tail}")
        }
        _ => format!(
            "memory amounts take a unit: did you mean `{key}=\"{number}Gi\"` (or `\"{number}Mi\"`)? {tail}"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggestions_fix_common_slips() {
        assert_eq!(
            did_you_mean("warning", ["error", "warn", "allow"]),
            Some("warn")
        );
        assert_eq!(
            did_you_mean("qouta", ["quota", "limit", "weight"]),
            Some("quota")
        );
        assert_eq!(did_you_mean("budget", ["quota", "limit", "weight"]), None);
        assert_eq!(suggest_duration("7 days").as_deref(), Some("7d"));
        assert_eq!(suggest_duration("5min").as_deref(), Some("5m"));
        assert_eq!(
            suggest_duration("1 hour 30 minutes").as_deref(),
            Some("1h30m")
        );
        assert_eq!(suggest_duration("soon"), None);
        assert_eq!(
            suggest_quantity("960GB", ResourceKind::Memory).as_deref(),
            Some("960G")
        );
        assert_eq!(
            suggest_quantity("960GiB", ResourceKind::Memory).as_deref(),
            Some("960Gi")
        );
        assert_eq!(
            suggest_quantity("16 cores", ResourceKind::Cpu).as_deref(),
            Some("16")
        );
        assert_eq!(suggest_quantity("four", ResourceKind::Gpu), None);
        assert_eq!(
            suggest_name("Research_Team", 253).as_deref(),
            Some("research-team")
        );
        assert_eq!(suggest_name("ok", 253), None);
        assert_eq!(suggest_name("a..b", 253).as_deref(), Some("a.b"));
        assert_eq!(suggest_name("a.-b-.c", 253).as_deref(), Some("a.b.c"));
        assert!(check_dns_subdomain("team.ml-1.example").is_ok());
        for bad in ["a..b", "a.-b", "a-.b", "a.", ".a", "-a"] {
            assert!(
                check_dns_subdomain(bad).is_err(),
                "{bad} is not a subdomain"
            );
        }
        assert_eq!(suggest_name(&"a".repeat(70), 63), Some("a".repeat(63)));
        assert_eq!(suggest_label("research.ml").as_deref(), Some("research-ml"));
        assert_eq!(suggest_label("ok"), None);
        assert_eq!(
            suggest_name("Équipe-Données", 253).as_deref(),
            Some("equipe-donnees")
        );
        assert_eq!(suggest_name("straße", 253).as_deref(), Some("strasse"));
        assert_eq!(suggest_name("ℌello", 253), None);
        assert_eq!(suggest_label("équipe").as_deref(), Some("equipe"));
    }
}
