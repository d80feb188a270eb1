//! Where things are in a YAML file the user wrote (scenario files, Queue objects), so that
//! every complaint about one names its line and column and quotes the user's own text, and
//! YAML errors in the user's words rather than the parser's.

use std::fmt;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_saphyr::{MessageFormatter, Spanned, UserMessageFormatter};

/// A place in a YAML text: 1-based line and column, and the bytes of the node written there.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Place {
    /// 1-based line.
    pub line: usize,
    /// 1-based column.
    pub column: usize,
    /// Byte offset and length of the node, when known.
    pub bytes: Option<(usize, usize)>,
}

impl Place {
    fn of(location: &serde_saphyr::Location) -> Self {
        let span = location.span();
        let bytes = span
            .byte_offset()
            .zip(span.byte_len())
            .and_then(|(o, l)| Some((usize::try_from(o).ok()?, usize::try_from(l).ok()?)));
        Place {
            line: usize::try_from(location.line()).unwrap_or(0),
            column: usize::try_from(location.column()).unwrap_or(0),
            bytes,
        }
    }

    /// The text of the node as the user wrote it in `source`.
    pub fn text<'t>(&self, source: &'t str) -> Option<&'t str> {
        let (offset, len) = self.bytes?;
        source.get(offset..offset + len).map(str::trim)
    }
}

/// A YAML node with the place of every key and value below it.
#[derive(Debug, Clone, PartialEq)]
pub enum Node {
    /// A scalar other than a mapping or list; its text is read from the source by place.
    Scalar,
    /// A list.
    List(Vec<Located>),
    /// A mapping: each key (as text) with its place, and its value.
    Map(Vec<(String, Place, Located)>),
}

/// A node and where it is.
#[derive(Debug, Clone, PartialEq)]
pub struct Located {
    /// The node.
    pub node: Node,
    /// Where it is.
    pub place: Place,
}

impl Located {
    /// The value under `key`, and the key's own place.
    pub fn get(&self, key: &str) -> Option<(Place, &Located)> {
        match &self.node {
            Node::Map(entries) => entries
                .iter()
                .find(|(k, _, _)| k == key)
                .map(|(_, p, v)| (*p, v)),
            _ => None,
        }
    }

    /// The place of the value at `path` (keys, or list indexes as numbers), or of the deepest
    /// part of the path that exists.
    pub fn place_of(&self, path: &[&str]) -> Place {
        let mut at = self;
        for step in path {
            let next = match (&at.node, step.parse::<usize>()) {
                (Node::List(items), Ok(i)) => items.get(i),
                _ => at.get(step).map(|(_, v)| v),
            };
            match next {
                Some(n) => at = n,
                None => break,
            }
        }
        at.place
    }

    /// The place of the key that ends `path`, falling back to its parent's.
    pub fn key_place(&self, path: &[&str]) -> Place {
        let Some((last, parent)) = path.split_last() else {
            return self.place;
        };
        let mut at = self;
        for step in parent {
            match at.get(step) {
                Some((_, v)) => at = v,
                None => return at.place,
            }
        }
        at.get(last).map_or(at.place, |(p, _)| p)
    }
}

struct Raw(Node);

impl<'de> Deserialize<'de> for Raw {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(RawVisitor)
    }
}

struct RawVisitor;

macro_rules! scalar {
    ($($name:ident: $ty:ty),*) => {
        $(fn $name<E: de::Error>(self, _: $ty) -> Result<Raw, E> { Ok(Raw(Node::Scalar)) })*
    };
}

impl<'de> Visitor<'de> for RawVisitor {
    type Value = Raw;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any YAML value")
    }

    scalar!(visit_bool: bool, visit_i64: i64, visit_u64: u64, visit_i128: i128,
        visit_u128: u128, visit_f64: f64, visit_str: &str);

    fn visit_unit<E: de::Error>(self) -> Result<Raw, E> {
        Ok(Raw(Node::Scalar))
    }

    fn visit_none<E: de::Error>(self) -> Result<Raw, E> {
        Ok(Raw(Node::Scalar))
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Raw, D::Error> {
        Raw::deserialize(d)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Raw, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element::<Spanned<Raw>>()? {
            items.push(located(item));
        }
        Ok(Raw(Node::List(items)))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Raw, A::Error> {
        let mut entries = Vec::new();
        while let Some(key) = map.next_key::<Spanned<KeyText>>()? {
            let value = map.next_value::<Spanned<Raw>>()?;
            entries.push((key.value.0, Place::of(&key.referenced), located(value)));
        }
        Ok(Raw(Node::Map(entries)))
    }
}

fn located(s: Spanned<Raw>) -> Located {
    Located {
        node: s.value.0,
        place: Place::of(&s.referenced),
    }
}

/// A mapping key as text (YAML allows numbers and booleans as keys too).
struct KeyText(String);

impl<'de> Deserialize<'de> for KeyText {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let value = serde_json::Value::deserialize(d)?;
        Ok(KeyText(match value {
            serde_json::Value::String(s) => s,
            other => other.to_string(),
        }))
    }
}

/// Why a YAML text could not be read: where, and what, in the user's words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct YamlError {
    /// 1-based line, when the parser knows it.
    pub line: Option<usize>,
    /// 1-based column, when the parser knows it.
    pub column: Option<usize>,
    /// What is wrong.
    pub message: String,
}

/// A parser error in the user's words: no option names, no Rust types, no `<input>`.
pub fn yaml_error(e: &serde_saphyr::Error) -> YamlError {
    let place = e.location().map(|l| Place::of(&l));
    let message = match e.without_snippet() {
        serde_saphyr::Error::DuplicateMappingKey { key: Some(k), .. } => {
            format!("`{k}` appears twice in the same mapping; keep one")
        }
        serde_saphyr::Error::DuplicateMappingKey { .. } => {
            "a key appears twice in the same mapping; keep one".to_string()
        }
        serde_saphyr::Error::NonFiniteFloat { value, .. } => {
            format!("`{value}` is not a finite number (too large, or not a number)")
        }
        serde_saphyr::Error::NullIntoString { .. } => {
            "a value is missing here (write one, or remove the key)".to_string()
        }
        other => plain(&UserMessageFormatter.format_message(other)),
    };
    YamlError {
        line: place.map(|p| p.line).filter(|&l| l > 0),
        column: place.map(|p| p.column).filter(|&c| c > 0),
        message,
    }
}

/// serde's own wording names Rust types (`f64`, `Option<String>`); say it as YAML would.
fn plain(message: &str) -> String {
    message
        .replace("; use Option<String>", "")
        .replace("a sequence", "a list")
        .replace("f64", "a number")
        .replace("i64", "a whole number")
        .replace("u64", "a whole number")
}

/// Every document of a YAML stream with the places of its nodes.
pub fn locate_all(text: &str, options: serde_saphyr::Options) -> Result<Vec<Located>, YamlError> {
    let docs: Vec<Spanned<Raw>> =
        serde_saphyr::from_multiple_with_options(text, options).map_err(|e| yaml_error(&e))?;
    Ok(docs.into_iter().map(located).collect())
}

/// One YAML document with the places of its nodes.
pub fn locate(text: &str) -> Result<Located, YamlError> {
    let doc: Spanned<Raw> = serde_saphyr::from_str(text).map_err(|e| yaml_error(&e))?;
    Ok(located(doc))
}
