//! First pass: one file's KDL nodes → spanned declarations, reporting every problem that can be
//! seen inside a single node (unknown names, wrong types, bad values, a setting given twice).

use kdl::{KdlDocument, KdlEntry, KdlNode, KdlValue};

use super::decl::*;
use crate::diagnostics::{Code, Diagnostic, Label};
use crate::model::{Bound, DefaultPlacement, MinRuntime, Oversubscription, PerResource, Strategy};
use crate::quantity::{self, Duration, ResourceKind};
use crate::source::FileId;

/// Deepest queue nesting the checker accepts (KAI trees are rarely deeper than 4).
pub const MAX_QUEUE_DEPTH: usize = 16;

/// Reads one parsed file into `out`, appending diagnostics.
pub(super) struct Reader<'a> {
    pub file: FileId,
    pub out: &'a mut Decls,
    pub diags: &'a mut Vec<Diagnostic>,
}

fn label(file: FileId, span: miette::SourceSpan) -> Label {
    Label::new(file, span.offset(), span.len())
}

/// The closest of `candidates` to `word`, if it is close enough to be a likely typo.
pub(crate) fn did_you_mean<'c>(word: &str, candidates: impl IntoIterator<Item = &'c str>) -> Option<&'c str> {
    candidates
        .into_iter()
        .map(|c| (strsim::damerau_levenshtein(word, c), c))
        .filter(|&(d, c)| d <= (c.len().max(word.len()) / 3).max(1))
        .min_by_key(|&(d, c)| (d, c))
        .map(|(_, c)| c)
}

fn list(words: &[&str]) -> String {
    words.iter().map(|w| format!("`{w}`")).collect::<Vec<_>>().join(", ")
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
}

impl<'n> Props<'n> {
    fn get(&self, key: &str) -> Option<&'n KdlEntry> {
        self.entries.iter().find(|(k, _)| *k == key).map(|(_, e)| *e)
    }
}

fn describe(value: &KdlValue) -> String {
    match value {
        KdlValue::String(s) => format!("the string \"{s}\""),
        KdlValue::Integer(i) => format!("the number {i}"),
        KdlValue::Float(f) if f.is_nan() => "#nan".to_string(),
        KdlValue::Float(f) if f.is_infinite() => {
            if *f > 0.0 { "#inf".into() } else { "#-inf".into() }
        }
        KdlValue::Float(f) => format!("the number {f}"),
        KdlValue::Bool(b) => format!("#{b}"),
        KdlValue::Null => "#null".to_string(),
    }
}

impl Reader<'_> {
    fn at(&self, span: miette::SourceSpan) -> Label {
        label(self.file, span)
    }

    fn error(&mut self, code: Code, message: impl Into<String>, at: Label, help: impl Into<String>) {
        self.diags.push(Diagnostic::error(code, message, at).with_help(help));
    }

    /// Checks a node's entries against what it takes and returns its arguments and properties.
    fn entries<'n>(&mut self, node: &'n KdlNode, args: Args, props: &[&str]) -> (Vec<&'n KdlEntry>, Props<'n>) {
        let name = node.name().value();
        let mut positional = Vec::new();
        let mut found: Vec<(&'n str, &'n KdlEntry)> = Vec::new();
        for entry in node.entries() {
            match entry.name() {
                None => positional.push(entry),
                Some(key) => {
                    let key_str = key.value();
                    if !props.contains(&key_str) {
                        let help = match did_you_mean(key_str, props.iter().copied()) {
                            Some(s) => format!("did you mean `{s}`?"),
                            None if props.is_empty() => format!("`{name}` takes no properties; remove it"),
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
        match args {
            Args::None => {
                for extra in &positional {
                    let help = if props.is_empty() {
                        format!("`{name}` takes no arguments; remove it")
                    } else {
                        format!("`{name}` takes properties ({}), written key=value", list(props))
                    };
                    self.error(
                        Code::UnexpectedArgument,
                        format!("`{name}` does not take the argument {}", describe(extra.value())),
                        self.at(extra.span()).with_text("unexpected argument"),
                        help,
                    );
                }
            }
            Args::Name | Args::One => {
                if positional.is_empty() {
                    let what = if args == Args::Name { "a name" } else { "a value" };
                    self.error(
                        Code::MissingValue,
                        format!("`{name}` needs {what}"),
                        name_at.with_text(format!("{what} is missing after this")),
                        format!("write it after the node name: `{name} \"…\"`"),
                    );
                }
                for extra in positional.iter().skip(1) {
                    self.error(
                        Code::UnexpectedArgument,
                        format!("`{name}` takes one argument, but {} follows it", describe(extra.value())),
                        self.at(extra.span()).with_text("extra argument"),
                        "remove it, or write it as a property (key=value) if that was meant",
                    );
                }
                positional.truncate(1);
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
        (positional, Props { entries: found })
    }

    fn children<'n>(&mut self, node: &'n KdlNode, allowed: &[&str]) -> Vec<&'n KdlNode> {
        let Some(doc) = node.children() else { return Vec::new() };
        let parent = node.name().value();
        let mut out = Vec::new();
        for child in doc.nodes() {
            let name = child.name().value();
            if allowed.contains(&name) {
                out.push(child);
                continue;
            }
            let help = match did_you_mean(name, allowed.iter().copied()) {
                Some(s) => format!("did you mean `{s}`?"),
                None if allowed.is_empty() => format!("`{parent}` has no children; remove the braces"),
                None => format!("inside `{parent}` you can write {}", list(allowed)),
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

    /// Reports the second and later children named `name` (settings that may appear once).
    fn once<'n>(&mut self, nodes: &[&'n KdlNode], name: &str) -> Option<&'n KdlNode> {
        let mut matching = nodes.iter().filter(|n| n.name().value() == name);
        let first = matching.next().copied()?;
        for again in matching {
            let first_at = self.at(first.name().span()).with_text("first set here");
            self.diags.push(
                Diagnostic::error(
                    Code::Duplicate,
                    format!("`{name}` is set twice"),
                    self.at(again.name().span()).with_text("set again here"),
                )
                .with_secondary(first_at)
                .with_help(format!("keep one `{name}`")),
            );
        }
        Some(first)
    }

    fn wrong_type(&mut self, entry: &KdlEntry, expected: &str, example: &str) {
        let what = entry.name().map_or("the value".to_string(), |k| format!("`{}`", k.value()));
        self.error(
            Code::WrongType,
            format!("{what} must be {expected}, not {}", describe(entry.value())),
            self.at(entry.span()).with_text(format!("expected {expected}")),
            format!("write it like {example}"),
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
        Some(Named { value, at: self.at(entry.span()) })
    }

    fn int(&mut self, entry: &KdlEntry, min: i64, max: i64, example: &str) -> Option<i64> {
        match entry.value() {
            KdlValue::Integer(i) if (min as i128..=max as i128).contains(i) => Some(*i as i64),
            KdlValue::Integer(i) => {
                self.error(
                    Code::InvalidValue,
                    format!("{i} is out of range: it must be between {min} and {max}"),
                    self.at(entry.span()).with_text("out of range"),
                    format!("use a whole number from {min} to {max}"),
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
                self.wrong_type(entry, "#true or #false", "`preemptible=#false` (KDL v2 writes booleans with #)");
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
        if !value.is_finite() || value < 0.0 || value > 1e9 {
            self.error(
                Code::InvalidQuantity,
                format!("{} is not allowed here: it must be a finite number from 0 to 1e9", describe(entry.value())),
                self.at(entry.span()).with_text("out of range"),
                format!("write a plain non-negative number, like {example}"),
            );
            return None;
        }
        Some(value)
    }

    /// A quantity of `kind`: a KDL number (read from its literal text, never through a float), a
    /// quantity string, or `#inf` where `unlimited_ok`.
    fn quantity(&mut self, entry: &KdlEntry, kind: ResourceKind, unlimited_ok: bool) -> Option<Bound> {
        let key = entry.name().map_or("value", |k| k.value());
        let text = match entry.value() {
            KdlValue::Float(f) if f.is_infinite() && *f > 0.0 => {
                if unlimited_ok {
                    return Some(Bound::Unlimited);
                }
                self.error(
                    Code::InvalidQuantity,
                    format!("`{key}` cannot be unlimited"),
                    self.at(entry.span()).with_text("#inf is not allowed here"),
                    "give a finite amount",
                );
                return None;
            }
            KdlValue::Float(f) if f.is_nan() => "#nan".to_string(),
            KdlValue::Float(f) if f.is_infinite() => "-inf".to_string(),
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
        match quantity::parse_quantity(&text, kind) {
            Ok(v) => Some(Bound::Finite(v)),
            Err(e) => {
                let help = match e {
                    quantity::QuantityError::Negative => "quantities count resources and cannot be below 0".to_string(),
                    quantity::QuantityError::TooLarge(_) => format!(
                        "the largest amount is {} in {}",
                        quantity::format_quantity(quantity::MAX_AMOUNT, kind),
                        kind.name()
                    ),
                    _ => format!("write it like {}", quantity_example(kind, key)),
                };
                self.error(
                    Code::InvalidQuantity,
                    format!("invalid {} {key}: {e}", kind.name()),
                    self.at(entry.span()).with_text("invalid quantity"),
                    help,
                );
                None
            }
        }
    }

    fn duration(&mut self, entry: &KdlEntry) -> Option<Duration> {
        let key = entry.name().map_or("value", |k| k.value()).to_string();
        let text = self.string(entry, &format!("`{key}=\"30m\"`"))?;
        match quantity::parse_duration(&text) {
            Ok(d) => Some(d),
            Err(e) => {
                self.error(
                    Code::InvalidValue,
                    format!("invalid `{key}`: {e}"),
                    self.at(entry.span()).with_text("invalid duration"),
                    "units are s, m, h, d and w; combine them like \"1h30m\"",
                );
                None
            }
        }
    }

    fn choice<T: Copy>(&mut self, entry: &KdlEntry, options: &[(&str, T)]) -> Option<T> {
        let words: Vec<&str> = options.iter().map(|(w, _)| *w).collect();
        let text = self.string(entry, &format!("\"{}\"", words[0]))?;
        if let Some((_, v)) = options.iter().find(|(w, _)| *w == text) {
            return Some(*v);
        }
        let help = match did_you_mean(&text, words.iter().copied()) {
            Some(s) => format!("did you mean `{s}`?"),
            None => format!("use one of {}", list(&words)),
        };
        let what = entry.name().map_or("value".to_string(), |k| format!("`{}`", k.value()));
        self.error(
            Code::InvalidValue,
            format!("\"{text}\" is not a valid {what}; expected one of {}", list(&words)),
            self.at(entry.span()).with_text("unknown value"),
            help,
        );
        None
    }

    /// A name that must be a DNS-1123 subdomain (a Kubernetes object name). An invalid name is
    /// reported and still returned, so the rest of the declaration is checked too.
    fn object_name(&mut self, entry: &KdlEntry, what: &str) -> Option<Named> {
        let named = self.labelled_string(entry, &format!("`{what} \"my-name\"`"))?;
        if let Err(why) = check_dns_subdomain(&named.value) {
            self.error(
                Code::InvalidName,
                format!("\"{}\" cannot be a {what} name: {why}", named.value),
                named.at.clone().with_text("invalid name"),
                format!("{what} names become Kubernetes object names: lower-case letters, digits, '-' and '.', starting and ending with a letter or digit, like \"{}\"", suggest_name(&named.value)),
            );
        }
        Some(named)
    }

    fn label_key(&mut self, entry: &KdlEntry) -> Option<String> {
        let text = self.string(entry, "`\"topology.kubernetes.io/zone\"`")?;
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

fn quantity_example(kind: ResourceKind, key: &str) -> String {
    match kind {
        ResourceKind::Gpu => format!("`{key}=8` or `{key}=0.5`"),
        ResourceKind::Cpu => format!("`{key}=16` or `{key}=\"500m\"`"),
        ResourceKind::Memory => format!("`{key}=\"960Gi\"` or `{key}=\"512M\"`"),
    }
}

/// Why `name` is not a DNS-1123 subdomain, if it is not.
pub(crate) fn check_dns_subdomain(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("it is empty".into());
    }
    if name.len() > 253 {
        return Err(format!("it is {} characters long; at most 253 are allowed", name.len()));
    }
    if let Some(c) = name.chars().find(|c| !(c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '-' || *c == '.')) {
        return Err(format!("it contains {c:?}"));
    }
    let alnum = |c: Option<char>| c.is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    if !alnum(name.chars().next()) || !alnum(name.chars().last()) {
        return Err("it must start and end with a letter or digit".into());
    }
    Ok(())
}

/// Why `name` is not a DNS-1123 label (a namespace name), if it is not.
pub(crate) fn check_dns_label(name: &str) -> Result<(), String> {
    check_dns_subdomain(name)?;
    if name.contains('.') {
        return Err("it contains '.'".into());
    }
    if name.len() > 63 {
        return Err(format!("it is {} characters long; at most 63 are allowed", name.len()));
    }
    Ok(())
}

fn check_label_key(key: &str) -> Result<(), String> {
    let (prefix, name) = match key.rsplit_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    if let Some(p) = prefix {
        check_dns_subdomain(p).map_err(|e| format!("its prefix {e}"))?;
    }
    let ok = |c: char| c.is_ascii_alphanumeric();
    if name.is_empty() || name.len() > 63 {
        return Err("its name part must be 1 to 63 characters".into());
    }
    if !name.chars().all(|c| ok(c) || matches!(c, '-' | '_' | '.'))
        || !name.starts_with(ok)
        || !name.ends_with(ok)
    {
        return Err("its name part may hold letters, digits, '-', '_' and '.', and must start and end with a letter or digit".into());
    }
    Ok(())
}

fn suggest_name(name: &str) -> String {
    let lowered: String = name
        .to_lowercase()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '.' { c } else { '-' })
        .collect();
    let trimmed = lowered.trim_matches(|c: char| !c.is_ascii_alphanumeric());
    if trimmed.is_empty() { "team-a".to_string() } else { trimmed.to_string() }
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
    "queue",
];
const STRATEGIES: &[(&str, Strategy)] = &[("binpack", Strategy::Binpack), ("spread", Strategy::Spread)];

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
                    let help = match did_you_mean(other, TOP_LEVEL.iter().copied()) {
                        Some(s) => format!("did you mean `{s}`?"),
                        None => format!("a policy file holds {}", list(TOP_LEVEL)),
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
            name: args.first().and_then(|e| self.string(e, "`cluster \"gpu-prod\"`")),
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
        let children = self.children(node, CLUSTER_CHILDREN);
        if let Some(n) = self.once(&children, "scheduler-name") {
            let (args, _) = self.entries(n, Args::One, &[]);
            decl.scheduler_name = args.first().and_then(|e| self.object_name(e, "scheduler")).map(|n| n.value);
        }
        if let Some(n) = self.once(&children, "queue-label") {
            let (args, _) = self.entries(n, Args::One, &[]);
            decl.queue_label = args.first().and_then(|e| self.label_key(e));
        }
        if let Some(n) = self.once(&children, "capacity") {
            let (_, props) = self.entries(n, Args::None, &["gpu", "cpu", "memory"]);
            for kind in ResourceKind::ALL {
                if let Some(e) = props.get(kind.name()) {
                    if let Some(Bound::Finite(v)) = self.quantity(e, kind, false) {
                        *decl.capacity.get_mut(kind) = Some(v);
                        *decl.capacity_at.get_mut(kind) = Some(self.at(e.span()));
                    }
                }
            }
        }
        if let Some(n) = self.once(&children, "placement") {
            let (_, props) = self.entries(n, Args::None, &["gpu", "cpu"]);
            if let Some(s) = props.get("gpu").and_then(|e| self.choice(e, STRATEGIES)) {
                decl.placement.gpu = s;
            }
            if let Some(s) = props.get("cpu").and_then(|e| self.choice(e, STRATEGIES)) {
                decl.placement.cpu = s;
            }
        }
        if let Some(n) = self.once(&children, "fairness") {
            let (_, props) = self.entries(n, Args::None, &["k", "window", "half-life"]);
            let mut f = FAIRNESS_DEFAULT;
            if let Some(k) = props.get("k").and_then(|e| self.number(e, "`k=1.0`")) {
                f.k = k;
            }
            if let Some(w) = props.get("window").and_then(|e| self.positive_duration(e)) {
                f.window = w;
            }
            if let Some(h) = props.get("half-life").and_then(|e| self.positive_duration(e)) {
                f.half_life = h;
            }
            decl.fairness = Some(f);
        }
        if let Some(n) = self.once(&children, "min-runtime") {
            decl.min_runtime = self.min_runtime(n);
        }
        if let Some(n) = self.once(&children, "oversubscription") {
            let (args, _) = self.entries(n, Args::One, &[]);
            let modes = [
                ("error", Oversubscription::Error),
                ("warn", Oversubscription::Warn),
                ("allow", Oversubscription::Allow),
            ];
            if let Some(m) = args.first().and_then(|e| self.choice(e, &modes)) {
                decl.oversubscription = m;
            }
        }
        self.out.clusters.push(decl);
    }

    fn positive_duration(&mut self, entry: &KdlEntry) -> Option<Duration> {
        let d = self.duration(entry)?;
        if d.0 == 0 {
            self.error(
                Code::InvalidValue,
                "this duration must be longer than 0",
                self.at(entry.span()).with_text("zero"),
                "give a length of time, like \"24h\"",
            );
            return None;
        }
        Some(d)
    }

    fn min_runtime(&mut self, node: &KdlNode) -> MinRuntime {
        let (_, props) = self.entries(node, Args::None, &["preempt", "reclaim"]);
        MinRuntime {
            preempt: props.get("preempt").and_then(|e| self.duration(e)),
            reclaim: props.get("reclaim").and_then(|e| self.duration(e)),
        }
    }

    fn priority_class(&mut self, node: &KdlNode) {
        self.children(node, &[]);
        let (args, props) = self.entries(node, Args::Name, &["value", "preemptible", "description"]);
        let name = args.first().and_then(|e| self.object_name(e, "priority class"));
        let value = match props.get("value") {
            Some(e) => self.int(e, -2_147_483_648, 1_000_000_000, "`value=500`"),
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
        let description = props.get("description").and_then(|e| self.string(e, "`description=\"…\"`"));
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
        let name = args.first().and_then(|e| self.labelled_string(e, "`placement \"training-pack\"`"));
        let strategy = props.get("strategy").and_then(|e| self.choice(e, STRATEGIES)).unwrap_or_default();
        let children = self.children(node, &["max-gpus-per-node", "topology"]);
        let mut decl_max = None;
        if let Some(n) = self.once(&children, "max-gpus-per-node") {
            let (args, _) = self.entries(n, Args::One, &[]);
            decl_max = args.first().and_then(|e| self.int(e, 1, 1024, "`max-gpus-per-node 2`")).map(|v| v as u32);
        }
        let (mut required, mut preferred) = (None, None);
        if let Some(n) = self.once(&children, "topology") {
            let (_, props) = self.entries(n, Args::None, &["required", "preferred"]);
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
            self.error(
                Code::PolicyTooLarge,
                format!("queues are nested more than {MAX_QUEUE_DEPTH} levels deep"),
                self.at(node.name().span()).with_text("too deep"),
                "flatten the hierarchy; queue trees are rarely deeper than 4 levels",
            );
            return;
        }
        let (args, props) = self.entries(node, Args::Name, &["display-name", "priority", "parent"]);
        let name = args.first().and_then(|e| self.object_name(e, "queue"));
        let display_name = props.get("display-name").and_then(|e| self.string(e, "`display-name=\"Research\"`"));
        let priority = props
            .get("priority")
            .and_then(|e| self.int(e, -1_000_000_000, 1_000_000_000, "`priority=100`"))
            .map_or(100, |p| p as i32);
        let parent = props.get("parent").and_then(|e| self.labelled_string(e, "`parent=\"research\"`"));
        let children = self.children(node, QUEUE_CHILDREN);
        let mut decl = QueueDecl {
            name: name.clone().unwrap_or(Named {
                value: String::new(),
                at: self.at(node.name().span()),
            }),
            display_name,
            priority,
            parent,
            nested_in,
            resources: Default::default(),
            namespaces: Vec::new(),
            default_priority_class: None,
            placement: None,
            min_runtime: Default::default(),
        };
        for kind in ResourceKind::ALL {
            if let Some(n) = self.once(&children, kind.name()) {
                decl.resources[kind as usize] = self.resource(n, kind);
            }
        }
        for n in children.iter().filter(|n| n.name().value() == "namespaces") {
            let (args, _) = self.entries(n, Args::Strings, &[]);
            for e in args {
                let Some(ns) = self.labelled_string(e, "`namespaces \"team-a\" \"team-a-dev\"`") else { continue };
                if ns.value != "*" {
                    if let Err(why) = check_dns_label(&ns.value) {
                        self.error(
                            Code::InvalidName,
                            format!("\"{}\" is not a namespace name: {why}", ns.value),
                            ns.at.clone().with_text("invalid namespace"),
                            format!("namespace names are lower-case letters, digits and '-', like \"{}\"; \"*\" opens the queue to every namespace", suggest_name(&ns.value).replace('.', "-")),
                        );
                        continue;
                    }
                }
                decl.namespaces.push(ns);
            }
        }
        if let Some(n) = self.once(&children, "default-priority-class") {
            let (args, _) = self.entries(n, Args::One, &[]);
            decl.default_priority_class = args.first().and_then(|e| self.labelled_string(e, "`default-priority-class \"interactive\"`"));
        }
        if let Some(n) = self.once(&children, "placement") {
            let (args, _) = self.entries(n, Args::One, &[]);
            decl.placement = args.first().and_then(|e| self.labelled_string(e, "`placement \"training-pack\"`"));
        }
        if let Some(n) = self.once(&children, "min-runtime") {
            decl.min_runtime = self.min_runtime(n);
        }
        let index = self.out.queues.len();
        let named = name.is_some();
        if named {
            self.out.queues.push(decl);
        }
        for child in children.iter().filter(|n| n.name().value() == "queue") {
            self.queue(child, named.then_some(index), depth + 1);
        }
    }

    fn resource(&mut self, node: &KdlNode, kind: ResourceKind) -> Option<ResourceDecl> {
        self.children(node, &[]);
        let (_, props) = self.entries(node, Args::None, &["quota", "limit", "weight"]);
        let quota_entry = props.get("quota");
        let limit_entry = props.get("limit");
        let quota = match quota_entry {
            Some(e) => self.quantity(e, kind, true)?,
            None => Bound::Finite(0),
        };
        let limit = match limit_entry {
            Some(e) => self.quantity(e, kind, true)?,
            None => Bound::Unlimited,
        };
        let weight = match props.get("weight") {
            Some(e) => self.number(e, "`weight=2`")?,
            None => 1.0,
        };
        Some(ResourceDecl {
            policy: crate::model::ResourcePolicy { quota, limit, weight },
            at: self.at(node.name().span()),
            quota_at: quota_entry.map(|e| self.at(e.span())),
            limit_at: limit_entry.map(|e| self.at(e.span())),
            weight_at: props.get("weight").map(|e| self.at(e.span())),
        })
    }
}
