//! The fast readers of a cluster file: the objects of a `kubectl get -o yaml` or `-o json`
//! file one at a time, never the whole file as one tree.
//!
//! YAML is read with the event parser that serde-saphyr itself uses (granit-parser), and each
//! List item's events are turned into a [`Value`] and then into a typed object on a second
//! thread while the parser goes on. JSON is split into its List items as borrowed slices of the
//! text (`RawValue`), each parsed on its own.
//!
//! These readers give up ([`GiveUp`]) on anything whose meaning they would have to guess —
//! anchors and aliases, tags, duplicate keys, nesting deeper than 128, a document with `items`
//! that is not a List — and the caller then reads the file the slow way (serde-saphyr over the
//! whole file, with its budgets), so such a file reads exactly as before. A plain scalar that
//! may be something else than a string (numbers, booleans, null) is resolved as serde-saphyr
//! resolves it.

use std::collections::{BTreeMap, HashSet};
use std::sync::mpsc;

use granit_parser::{Event, Parser, ScalarStyle};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

/// The fast reader cannot read this file with certainty; read it the slow way.
#[derive(Debug)]
pub struct GiveUp;

/// Where an object is in the file: how it is counted (`document 2, item 5`), and the line and
/// column (1-based) it starts at when the reader knows them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct At {
    /// The document and List item it is.
    pub label: String,
    /// Where its text starts.
    pub line_column: Option<(usize, usize)>,
}

impl At {
    /// A place known by its count only.
    pub fn counted(label: String) -> Self {
        At {
            label,
            line_column: None,
        }
    }
}

/// One object (or document) to read, where it is in the file.
pub enum Work<'a> {
    /// A YAML node's events.
    Events(At, Vec<Event<'a>>),
    /// A value already built.
    Value(At, Value),
    /// A JSON value's text.
    Json(At, &'a str),
}

impl Work<'_> {
    /// The value, with where it is.
    pub fn into_value(self) -> Result<(At, Value), GiveUp> {
        match self {
            Work::Value(at, v) => Ok((at, v)),
            Work::Json(at, text) => Ok((at, serde_json::from_str(text).map_err(|_| GiveUp)?)),
            Work::Events(at, events) => {
                let mut i = 0;
                let v = build(&events, &mut i, 0)?;
                Ok((at, v))
            }
        }
    }
}

const MAX_DEPTH: usize = 128;

/// Splits a YAML stream into work, in file order.
pub fn yaml<'a>(text: &'a str, send: &mut dyn FnMut(Work<'a>)) -> Result<(), GiveUp> {
    let mut parser = Parser::new_from_str(text);
    // Where the event `next` gave last starts: line and column, 1-based.
    let start = std::cell::Cell::new((1, 1));
    let mut next = || -> Result<Option<Event<'a>>, GiveUp> {
        loop {
            match parser.next_event() {
                None => return Ok(None),
                Some(Err(_)) => return Err(GiveUp),
                Some(Ok((event, span))) => match event {
                    Event::Alias(_) | Event::Anchor(..) | Event::UnresolvedAlias(_) => {
                        return Err(GiveUp);
                    }
                    Event::Scalar(_, _, anchor, tag)
                    | Event::SequenceStart(_, anchor, tag)
                    | Event::MappingStart(_, anchor, tag)
                        if anchor != 0 || tag.is_some() =>
                    {
                        return Err(GiveUp);
                    }
                    Event::Scalar(..)
                    | Event::SequenceStart(..)
                    | Event::SequenceEnd
                    | Event::MappingStart(..)
                    | Event::MappingEnd
                    | Event::StreamStart
                    | Event::StreamEnd
                    | Event::DocumentStart(..)
                    | Event::DocumentEnd => {
                        start.set((span.start.line(), span.start.col() + 1));
                        return Ok(Some(event));
                    }
                    _ => continue,
                },
            }
        }
    };
    let here = |label: String| At {
        label,
        line_column: Some(start.get()),
    };
    let mut documents = 0usize;
    while let Some(event) = next()? {
        match event {
            Event::StreamStart | Event::DocumentEnd | Event::DocumentStart(..) => continue,
            Event::StreamEnd => break,
            Event::Scalar(ref text, style, ..) => {
                // serde-saphyr skips empty and null-like documents: they get no number.
                let value = scalar(text, style)?;
                if style == ScalarStyle::Plain && value.is_null() {
                    continue;
                }
                documents += 1;
                send(Work::Value(here(format!("document {documents}")), value));
            }
            Event::MappingStart(..) => {
                documents += 1;
                let at = here(format!("document {documents}"));
                let mut top = Map::new();
                let mut keys = HashSet::new();
                let mut items_streamed = false;
                loop {
                    let key = match next()?.ok_or(GiveUp)? {
                        Event::MappingEnd => break,
                        Event::Scalar(key, style, ..) => map_key(&key, style)?,
                        _ => return Err(GiveUp),
                    };
                    if !keys.insert(key.clone()) {
                        return Err(GiveUp);
                    }
                    let first = next()?.ok_or(GiveUp)?;
                    if key == "items" && matches!(first, Event::SequenceStart(..)) {
                        items_streamed = true;
                        let mut item = 0usize;
                        loop {
                            let first = next()?.ok_or(GiveUp)?;
                            if let Event::SequenceEnd = first {
                                break;
                            }
                            item += 1;
                            let item_at = here(format!("{}, item {item}", at.label));
                            let events = node(first, &mut next)?;
                            send(Work::Events(item_at, events));
                        }
                    } else {
                        let events = node(first, &mut next)?;
                        let mut i = 0;
                        top.insert(key, build(&events, &mut i, 1)?);
                    }
                }
                if items_streamed {
                    // Only a List's items are objects of their own.
                    let list = top
                        .get("kind")
                        .and_then(Value::as_str)
                        .is_some_and(|k| k.ends_with("List"));
                    if !list {
                        return Err(GiveUp);
                    }
                } else {
                    send(Work::Value(at, Value::Object(top)));
                }
            }
            first @ Event::SequenceStart(..) => {
                documents += 1;
                let at = here(format!("document {documents}"));
                let events = node(first, &mut next)?;
                send(Work::Events(at, events));
            }
            _ => return Err(GiveUp),
        }
    }
    Ok(())
}

/// The events of one node whose first event is `first`.
fn node<'a>(
    first: Event<'a>,
    next: &mut dyn FnMut() -> Result<Option<Event<'a>>, GiveUp>,
) -> Result<Vec<Event<'a>>, GiveUp> {
    let mut depth = match first {
        Event::SequenceStart(..) | Event::MappingStart(..) => 1usize,
        Event::Scalar(..) => 0,
        _ => return Err(GiveUp),
    };
    let mut events = vec![first];
    while depth > 0 {
        let event = next()?.ok_or(GiveUp)?;
        match event {
            Event::SequenceStart(..) | Event::MappingStart(..) => depth += 1,
            Event::SequenceEnd | Event::MappingEnd => depth -= 1,
            Event::Scalar(..) => {}
            _ => return Err(GiveUp),
        }
        if depth > MAX_DEPTH {
            return Err(GiveUp);
        }
        events.push(event);
    }
    Ok(events)
}

/// A value from a node's events.
fn build(events: &[Event<'_>], i: &mut usize, depth: usize) -> Result<Value, GiveUp> {
    if depth > MAX_DEPTH {
        return Err(GiveUp);
    }
    let event = events.get(*i).ok_or(GiveUp)?;
    *i += 1;
    match event {
        Event::Scalar(text, style, ..) => scalar(text, *style),
        Event::SequenceStart(..) => {
            let mut items = Vec::new();
            loop {
                if let Some(Event::SequenceEnd) = events.get(*i) {
                    *i += 1;
                    return Ok(Value::Array(items));
                }
                items.push(build(events, i, depth + 1)?);
            }
        }
        Event::MappingStart(..) => {
            let mut map = Map::new();
            loop {
                let key = match events.get(*i).ok_or(GiveUp)? {
                    Event::MappingEnd => {
                        *i += 1;
                        return Ok(Value::Object(map));
                    }
                    Event::Scalar(key, style, ..) => map_key(key, *style)?,
                    _ => return Err(GiveUp),
                };
                *i += 1;
                let value = build(events, i, depth + 1)?;
                if map.insert(key, value).is_some() {
                    return Err(GiveUp);
                }
            }
        }
        _ => Err(GiveUp),
    }
}

/// A mapping key: a plain key that reads as null, a boolean or a number gives up, so that the
/// whole-file reader decides what it means (it refuses a null key, as a Kubernetes object
/// never has one).
fn map_key(text: &str, style: ScalarStyle) -> Result<String, GiveUp> {
    match scalar(text, style)? {
        Value::String(s) => Ok(s),
        _ => Err(GiveUp),
    }
}

/// A scalar as serde-saphyr reads it into a value: quoted and block scalars are strings; a
/// plain one may be null, a boolean or a number. Plain scalars that cannot be any of those are
/// strings at once; the rest are resolved by serde-saphyr itself, and one it refuses (`.inf`)
/// gives up, since serde-saphyr refuses the file for it.
fn scalar(text: &str, style: ScalarStyle) -> Result<Value, GiveUp> {
    if style != ScalarStyle::Plain {
        return Ok(Value::String(text.to_string()));
    }
    let t = text;
    if t.is_empty() || t == "~" || t == "null" {
        return Ok(Value::Null);
    }
    let bytes = t.as_bytes();
    let digits = |b: &[u8]| {
        !b.is_empty() && b.iter().all(u8::is_ascii_digit) && (b.len() == 1 || b[0] != b'0')
    };
    if digits(bytes)
        && let Ok(n) = t.parse::<u64>()
    {
        return Ok(Value::from(n));
    }
    if let Some(rest) = bytes.strip_prefix(b"-")
        && digits(rest)
        && let Ok(n) = t.parse::<i64>()
    {
        return Ok(Value::from(n));
    }
    let word = t.len() <= 5
        && matches!(
            t.to_ascii_lowercase().as_str(),
            "true" | "false" | "yes" | "no" | "y" | "n" | "on" | "off" | "null"
        );
    let numeric = bytes
        .iter()
        .all(|b| b.is_ascii_hexdigit() || b"xXoO_+-.:eEinfINFaA".contains(b));
    if !(word || numeric) {
        return Ok(Value::String(t.to_string()));
    }
    match serde_saphyr::from_str::<Value>(t) {
        Ok(v @ (Value::Null | Value::Bool(_) | Value::Number(_) | Value::String(_))) => Ok(v),
        _ => Err(GiveUp),
    }
}

/// Splits a JSON stream (`kubectl get -o json`: one List, or objects one after another) into
/// work, in file order.
pub fn json<'a>(text: &'a str, send: &mut dyn FnMut(Work<'a>)) -> Result<(), GiveUp> {
    let documents = serde_json::Deserializer::from_str(text)
        .into_iter::<&RawValue>()
        .collect::<Result<Vec<&RawValue>, _>>()
        .map_err(|_| GiveUp)?;
    let mut lines = Lines::new(text);
    for (d, raw) in documents.into_iter().enumerate() {
        let at = At {
            label: format!("document {}", d + 1),
            line_column: lines.at(raw.get()),
        };
        let whole = || {
            serde_json::from_str::<Value>(raw.get())
                .map(|v| Work::Value(at.clone(), v))
                .map_err(|_| GiveUp)
        };
        if !raw.get().starts_with('{') {
            send(whole()?);
            continue;
        }
        // Keys as serde_json's map keeps them: the last of a repeated key wins.
        let fields: BTreeMap<String, &RawValue> =
            serde_json::from_str(raw.get()).map_err(|_| GiveUp)?;
        let field = |name: &str| fields.get(name).copied();
        let kind: Option<String> = field("kind").and_then(|k| serde_json::from_str(k.get()).ok());
        let items = field("items").filter(|i| i.get().starts_with('['));
        match (kind, items) {
            (Some(kind), Some(items)) if kind.ends_with("List") => {
                let items: Vec<&RawValue> =
                    serde_json::from_str(items.get()).map_err(|_| GiveUp)?;
                for (i, item) in items.into_iter().enumerate() {
                    let item_at = At {
                        label: format!("{}, item {}", at.label, i + 1),
                        line_column: lines.at(item.get()),
                    };
                    send(Work::Json(item_at, item.get()));
                }
            }
            _ => send(whole()?),
        }
    }
    Ok(())
}

/// Lines and columns of slices of one text, met in order: counted from the last one met, so a
/// whole file costs one pass.
struct Lines<'a> {
    text: &'a str,
    /// Byte offset, line and the byte offset of that line's start, of the last slice met.
    offset: usize,
    line: usize,
    line_start: usize,
}

impl<'a> Lines<'a> {
    fn new(text: &'a str) -> Self {
        Lines {
            text,
            offset: 0,
            line: 1,
            line_start: 0,
        }
    }

    /// The line and column (1-based, in characters) where `part`, a slice of the text at or
    /// after the last one met, starts.
    fn at(&mut self, part: &str) -> Option<(usize, usize)> {
        let offset = (part.as_ptr() as usize).checked_sub(self.text.as_ptr() as usize)?;
        if offset < self.offset || offset > self.text.len() {
            return None;
        }
        // Counted in bulk (this pass runs on the splitter, ahead of the readers): the count
        // vectorises, and only the last line's start is looked for.
        let between = self.text.as_bytes().get(self.offset..offset)?;
        let newlines = between.iter().filter(|&&b| b == b'\n').count();
        if newlines > 0 {
            self.line += newlines;
            self.line_start = self.offset + between.iter().rposition(|&b| b == b'\n')? + 1;
        }
        self.offset = offset;
        let column = self.text.get(self.line_start..offset)?.chars().count() + 1;
        Some((self.line, column))
    }
}

/// Runs a splitter on this thread and reads each piece of work with `read` on two more
/// threads, in batches; returns what `read` made, in file order.
pub fn pipeline<'a, T: Send>(
    split: impl FnOnce(&mut dyn FnMut(Work<'a>)) -> Result<(), GiveUp>,
    read: impl Fn(Work<'a>) -> Result<Vec<T>, GiveUp> + Sync,
) -> Result<Vec<T>, GiveUp> {
    const BATCH: usize = 32;
    const READERS: usize = 2;
    std::thread::scope(|scope| {
        let read = &read;
        let mut senders = Vec::new();
        let mut readers = Vec::new();
        for _ in 0..READERS {
            // Few batches in flight: the events of a batch are larger than its objects.
            let (send, receive) = mpsc::sync_channel::<Vec<Work<'a>>>(4);
            senders.push(send);
            readers.push(scope.spawn(move || -> Result<Vec<Vec<T>>, GiveUp> {
                let mut out = Vec::new();
                for batch in receive {
                    let mut made = Vec::new();
                    for work in batch {
                        made.extend(read(work)?);
                    }
                    out.push(made);
                }
                Ok(out)
            }));
        }
        let mut batch = Vec::with_capacity(BATCH);
        let mut sent = 0usize;
        let mut failed = false;
        let flush = |batch: Vec<Work<'a>>, sent: &mut usize, failed: &mut bool| {
            *failed |= senders[*sent % READERS].send(batch).is_err();
            *sent += 1;
        };
        let outcome = split(&mut |work| {
            if failed {
                return;
            }
            batch.push(work);
            if batch.len() == BATCH {
                let full = std::mem::replace(&mut batch, Vec::with_capacity(BATCH));
                flush(full, &mut sent, &mut failed);
            }
        });
        if !batch.is_empty() && !failed {
            flush(batch, &mut sent, &mut failed);
        }
        drop(senders);
        let mut made: Vec<std::vec::IntoIter<Vec<T>>> = Vec::new();
        for reader in readers {
            made.push(reader.join().unwrap_or(Err(GiveUp))?.into_iter());
        }
        outcome?;
        // Batches went to the readers in turn: take them back in the same turn.
        let mut out = Vec::new();
        for n in 0..sent {
            out.extend(made[n % READERS].next().into_iter().flatten());
        }
        Ok(out)
    })
}
