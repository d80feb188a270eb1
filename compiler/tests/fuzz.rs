//! Hostile input never breaks the checker: property-based fuzzing of `source::admit` + `check`.
//!
//! Three properties, each run for `KAI_FUZZ_CASES` cases (default 1,000; `PROPTEST_CASES`
//! raises it too):
//! - `arbitrary_bytes`: any bytes as a policy file;
//! - `kdl_soup`: files built from KDL and policy-language tokens, and small policies with a
//!   random queue tree (bad names, cycles, duplicates, extreme quantities, deep nesting);
//! - `mutated_policies`: the example policy in `policies/` and small generated policies, with
//!   random edits (deleted, inserted, duplicated or swapped byte ranges, numbers replaced by
//!   extreme values, runs of `{`, dropped quotes, lines spliced in from another file, names
//!   swapped for other names).
//!
//! For every input: `check` neither panics nor hangs (it runs on a worker thread with a 2 MiB
//! stack and a time limit), every label lies inside its file on character boundaries, every
//! renderer works (and JSON and SARIF parse), `policy` is present exactly when there is no
//! error, and checking the same input twice gives the same result.
//!
//! A failure prints the shrunk input. `KAI_FUZZ_SEED=N` replays a run (the seed is printed with
//! `--nocapture`); `KAI_FUZZ_HANG_SECS` changes the time limit (30 s). A million inputs, about
//! 80 minutes on two busy cores:
//! `KAI_FUZZ_CASES=340000 cargo test --release -p kai-policy-compiler --test fuzz -- --nocapture`.

use std::cell::RefCell;
use std::fmt::Write as _;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::Path;
use std::sync::OnceLock;
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, channel};
use std::time::{Duration, Instant};

use kai_policy_compiler::check::check;
use kai_policy_compiler::diagnostics::{
    Code, HumanStyle, Label, render_github, render_human, render_json, render_sarif,
};
use kai_policy_compiler::generate::{GenerateSpec, generate};
use kai_policy_compiler::source::{FileId, SourceFile, SourceSet, admit, load_dir};
use proptest::prelude::*;
use proptest::test_runner::{Config, RngAlgorithm, TestCaseError, TestError, TestRng, TestRunner};

/// One fuzz input: policy files as raw bytes, by path.
type Files = Vec<(String, Vec<u8>)>;

/// How long one input may take (both checks and all renderers) before it counts as a hang:
/// 30 s, or `KAI_FUZZ_HANG_SECS`.
fn hang_limit() -> Duration {
    Duration::from_secs(std::env::var("KAI_FUZZ_HANG_SECS").map_or(30, |v| {
        v.parse()
            .expect("KAI_FUZZ_HANG_SECS is a number of seconds")
    }))
}
/// The stack of the thread that runs `check`: Rust's default for spawned threads.
const STACK: usize = 2 * 1024 * 1024;

// ---------------------------------------------------------------------------------------------
// Running one input

/// Checks one input and everything the module docs promise about the result.
fn check_input(files: &Files) -> Result<(), String> {
    let mut files = files.clone();
    files.sort_by(|a, b| a.0.cmp(&b.0));
    let mut early = Vec::new();
    let mut sources = Vec::new();
    for (i, (path, bytes)) in files.into_iter().enumerate() {
        let (text, problem) = admit(FileId(i as u32), &path, bytes);
        early.extend(problem);
        sources.push(SourceFile::new(path, text));
    }
    let set = SourceSet::new(sources);
    let first = check(&set, early.clone());

    for d in &first.diagnostics {
        // The checker turns a panic inside the KDL parser (or the rewording of its errors) into
        // this diagnostic; it is still a bug.
        if d.message.starts_with("kai-policy could not read this file") {
            return Err(format!("the parser thread panicked: {d:#?}"));
        }
        for label in std::iter::once(&d.primary).chain(&d.secondary) {
            label_inside(label, &set).map_err(|why| format!("{why} in {d:#?}"))?;
        }
    }
    if first.policy.is_some() == first.has_errors() {
        return Err(format!(
            "policy is {} but has_errors() is {}",
            if first.policy.is_some() {
                "present"
            } else {
                "absent"
            },
            first.has_errors()
        ));
    }

    let d = &first.diagnostics;
    let human = render_human(d, &set, HumanStyle::Plain);
    let colour = render_human(d, &set, HumanStyle::Colour);
    let github = render_github(d, &set);
    let json = render_json(d, &set);
    let sarif = render_sarif(d, &set);
    if !d.is_empty() && (human.is_empty() || colour.is_empty() || github.is_empty()) {
        return Err("a renderer printed nothing for a non-empty list of diagnostics".into());
    }
    for (name, text) in [("json", &json), ("sarif", &sarif)] {
        serde_json::from_str::<serde_json::Value>(text)
            .map_err(|e| format!("the {name} renderer wrote invalid JSON ({e}):\n{text}"))?;
    }

    let second = check(&set, early);
    if second.diagnostics != first.diagnostics {
        return Err(format!(
            "checking twice gave different diagnostics:\n{:#?}\nthen\n{:#?}",
            first.diagnostics, second.diagnostics
        ));
    }
    if second.policy != first.policy {
        return Err("checking twice gave different policies".into());
    }
    if render_json(&second.diagnostics, &set) != json {
        return Err("rendering twice gave different JSON".into());
    }
    Ok(())
}

/// Why a label does not lie inside its file on character boundaries, if it does not.
fn label_inside(label: &Label, set: &SourceSet) -> Result<(), String> {
    let index = label.file.0 as usize;
    if index >= set.len() {
        return Err(format!("label points at file {index} of {}", set.len()));
    }
    let text = &set.get(label.file).text;
    let end = label
        .offset
        .checked_add(label.len)
        .ok_or("label end overflows")?;
    if end > text.len() {
        return Err(format!(
            "label {}..{end} ends past the end of the file ({} bytes)",
            label.offset,
            text.len()
        ));
    }
    if !text.is_char_boundary(label.offset) || !text.is_char_boundary(end) {
        return Err(format!("label {}..{end} splits a character", label.offset));
    }
    Ok(())
}

/// Runs inputs on a thread of its own, so that a hang is a test failure and not a stuck run.
struct Worker {
    job: fn(&Files) -> Result<(), String>,
    limit: Duration,
    jobs: Sender<Files>,
    results: Receiver<Result<(), String>>,
}

impl Worker {
    fn spawn(job: fn(&Files) -> Result<(), String>, limit: Duration) -> Self {
        let (jobs, job_rx) = channel::<Files>();
        let (result_tx, results) = channel();
        std::thread::Builder::new()
            .name("fuzz-check".into())
            .stack_size(STACK)
            .spawn(move || {
                for files in job_rx {
                    let outcome =
                        catch_unwind(AssertUnwindSafe(|| job(&files))).unwrap_or_else(|panic| {
                            Err(format!("panicked: {}", panic_message(&panic)))
                        });
                    if result_tx.send(outcome).is_err() {
                        break;
                    }
                }
            })
            .expect("spawn the fuzz worker");
        Worker {
            job,
            limit,
            jobs,
            results,
        }
    }

    /// Runs one input; a hang abandons this worker's thread and starts a fresh one.
    fn run(&mut self, files: Files) -> Result<(), String> {
        let restart = |w: &mut Worker| *w = Worker::spawn(w.job, w.limit);
        if self.jobs.send(files).is_err() {
            restart(self);
            return Err("the worker thread died".into());
        }
        match self.results.recv_timeout(self.limit) {
            Ok(outcome) => outcome,
            Err(RecvTimeoutError::Timeout) => {
                restart(self);
                Err(format!("hung: no result after {:?}", self.limit))
            }
            Err(RecvTimeoutError::Disconnected) => {
                restart(self);
                Err("the worker thread died".into())
            }
        }
    }
}

fn panic_message(panic: &Box<dyn std::any::Any + Send>) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "(no message)".to_string())
}

/// The files of an input, printable: paths and text with control and non-UTF-8 bytes escaped.
fn show(files: &Files) -> String {
    let mut out = String::new();
    for (path, bytes) in files {
        let _ = writeln!(
            out,
            "--- {path} ({} bytes)\n{}",
            bytes.len(),
            bytes.escape_ascii()
        );
    }
    out
}

fn cases() -> u32 {
    let own = match std::env::var("KAI_FUZZ_CASES") {
        Ok(v) => v
            .parse()
            .unwrap_or_else(|_| panic!("KAI_FUZZ_CASES must be a number, not {v:?}")),
        Err(_) => 1_000,
    };
    // `PROPTEST_CASES` raises every property in the workspace at once, these too.
    own.max(ProptestConfig::default().cases)
}

fn seed() -> u64 {
    static SEED: OnceLock<u64> = OnceLock::new();
    *SEED.get_or_init(|| match std::env::var("KAI_FUZZ_SEED") {
        Ok(v) => v
            .parse()
            .unwrap_or_else(|_| panic!("KAI_FUZZ_SEED must be a number, not {v:?}")),
        Err(_) => std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64),
    })
}

/// Runs `strategy` for [`cases`] cases through [`check_input`], and fails with the shrunk input.
fn fuzz<S>(name: &str, strategy: S, to_files: impl Fn(&S::Value) -> Files)
where
    S: Strategy,
{
    let cases = cases();
    let seed = seed();
    let mut bytes = [0u8; 32];
    bytes[..8].copy_from_slice(&seed.to_le_bytes());
    for (i, b) in name.bytes().enumerate() {
        bytes[8 + i % 24] ^= b;
    }
    let config = Config {
        cases,
        failure_persistence: None,
        max_shrink_iters: 4_000,
        max_shrink_time: 120_000,
        ..Config::default()
    };
    let mut runner =
        TestRunner::new_with_rng(config, TestRng::from_seed(RngAlgorithm::ChaCha, &bytes));
    let worker = RefCell::new(Worker::spawn(check_input, hang_limit()));
    let slowest = RefCell::new((Duration::ZERO, 0usize));
    let started = Instant::now();
    let result = runner.run(&strategy, |value| {
        let files = to_files(&value);
        let size = files.iter().map(|f| f.1.len()).sum();
        let start = Instant::now();
        let outcome = worker.borrow_mut().run(files.clone());
        let took = start.elapsed();
        let mut slow = slowest.borrow_mut();
        if took > slow.0 {
            *slow = (took, size);
        }
        outcome.map_err(|why| TestCaseError::fail(format!("{why}\n\ninput:\n{}", show(&files))))
    });
    let (slow, slow_size) = *slowest.borrow();
    eprintln!(
        "fuzz {name}: {cases} cases in {:.1} s (seed {seed}); slowest input took {:.1} ms ({slow_size} bytes)",
        started.elapsed().as_secs_f64(),
        slow.as_secs_f64() * 1e3
    );
    match result {
        Ok(()) => {}
        Err(TestError::Fail(why, _)) => {
            panic!("fuzz {name} failed (replay with KAI_FUZZ_SEED={seed}): {why}")
        }
        Err(TestError::Abort(why)) => panic!("fuzz {name} aborted: {why}"),
    }
}

// ---------------------------------------------------------------------------------------------
// Inputs

/// Tokens of KDL and of the policy language, with the awkward corners of both.
const TOKENS: &[&str] = &[
    "queue",
    "cluster",
    "priority-class",
    "placement",
    "gpu",
    "cpu",
    "memory",
    "namespaces",
    "default-priority-class",
    "min-runtime",
    "capacity",
    "fairness",
    "oversubscription",
    "topology",
    "max-gpus-per-node",
    "scheduler-name",
    "queue-label",
    "quota=",
    "limit=",
    "weight=",
    "parent=",
    "value=",
    "preemptible=",
    "strategy=",
    "display-name=",
    "priority=",
    "required=",
    "preempt=",
    "reclaim=",
    "k=",
    "window=",
    "half-life=",
    "\"a\"",
    "\"b\"",
    "\"research\"",
    "\"*\"",
    "\"\"",
    "\"500m\"",
    "\"960Gi\"",
    "\"30m\"",
    "\"é\"",
    "{",
    "}",
    "{",
    "}",
    ";",
    "\n",
    "\n",
    " ",
    " ",
    "\t",
    "=",
    "#inf",
    "#-inf",
    "#nan",
    "#true",
    "#false",
    "#null",
    "1e400",
    "-1",
    "0",
    "0.5",
    "99999999999999999999",
    "(u8)",
    "(",
    ")",
    "/-",
    "//",
    "/*",
    "*/",
    "\\",
    "\\\n",
    "r",
    "#",
    "#\"",
    "\"#",
    "##\"",
    "\"\"\"",
    "\"\"\"\n",
    "'",
    "\u{feff}",
    "\u{2028}",
    "\u{85}",
    "é",
    "🚀",
    "\r\n",
    "\r",
    "0x",
    "0xff",
    "0b101",
    "0o7",
    "1_000",
    ".5",
    "+",
    "-",
    "e",
    "E",
    "\u{0}",
    "\u{1b}",
    "\"\\u{10FFFF}\"",
    "\"\\u{D800}\"",
    "\"\\",
];

/// Values that quantities, integers and names must survive.
const EXTREMES: &[&str] = &[
    "-1",
    "1e400",
    "#nan",
    "99999999999999999999Ei",
    "\"99999999999999999999Ei\"",
    "#inf",
    "#-inf",
    "-0",
    "0",
    "1e-400",
    "0.0001",
    "18446744073709551616",
    "9223372036854775807",
    "-9223372036854775808",
    "340282366920938463463374607431768211456",
    "1_000_000",
    "0x7fffffffffffffff",
    "0b1",
    "0o777",
    "1.5e3",
    "\"-5\"",
    "\"1e400\"",
    "\"500m\"",
    "\"0.5Ki\"",
    "\"\"",
    "1.2.3",
    "#null",
    "#true",
    "\"#inf\"",
    "1e18",
    "9007199254740993",
    "\"9Ei\"",
    "\"8Ei\"",
    "2147483648",
    "-2147483649",
    "1000000001",
    "\"250u\"",
    "\"1e-3\"",
    "1.0e+9",
    "\"99999999999999d\"",
];

const NAMES: &[&str] = &[
    "a", "b", "c", "d", "research", "llm-team", "A", "a.b", "-x", "", "é", "x y", "*", "a_b",
];

fn raw_bytes() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        prop::collection::vec(any::<u8>(), 0..64),
        prop::collection::vec(any::<u8>(), 0..1024),
        // Mostly printable ASCII reaches further into the lexer than uniform bytes.
        prop::collection::vec(prop_oneof![9 => 0x20u8..0x7f, 1 => any::<u8>()], 0..1024),
    ]
}

fn token_soup() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(prop::sample::select(TOKENS), 0..160)
        .prop_map(|t| t.concat().into_bytes())
}

fn any_value() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(EXTREMES).prop_map(str::to_string),
        (0u32..200).prop_map(|n| n.to_string()),
        (0u32..2000).prop_map(|n| format!("{}.{}", n / 1000, n % 1000)),
        prop::sample::select(&["\"500m\"", "\"16Gi\"", "\"1.5\"", "#inf"][..])
            .prop_map(str::to_string),
    ]
}

fn name() -> impl Strategy<Value = String> {
    prop::sample::select(NAMES).prop_map(|n| format!("{n:?}"))
}

/// One node of a policy-shaped file, with hostile values.
fn policy_node() -> impl Strategy<Value = String> {
    let resource = (
        prop::sample::select(&["gpu", "cpu", "memory", "gpu", "gpu"][..]),
        any_value(),
        prop::option::of(any_value()),
        prop::option::of(any_value()),
    )
        .prop_map(|(kind, quota, limit, weight)| {
            let mut s = format!("{kind} quota={quota}");
            if let Some(l) = limit {
                let _ = write!(s, " limit={l}");
            }
            if let Some(w) = weight {
                let _ = write!(s, " weight={w}");
            }
            s
        });
    let queue_body = prop::collection::vec(
        prop_oneof![
            3 => resource,
            2 => name().prop_map(|n| format!("namespaces {n}")),
            1 => name().prop_map(|n| format!("default-priority-class {n}")),
            1 => name().prop_map(|n| format!("placement {n}")),
            1 => prop::sample::select(&["\"5m\"", "\"0s\"", "\"99999999999999d\"", "\"1h30m\"", "5"][..])
                .prop_map(|d| format!("min-runtime preempt={d} reclaim={d}")),
        ],
        0..5,
    )
    .prop_map(|lines| lines.join("\n    "));
    prop_oneof![
        6 => (name(), prop::option::of(name()), queue_body, 0usize..20, any_value()).prop_map(
            |(n, parent, body, nest, priority)| {
                let parent = parent.map_or(String::new(), |p| format!(" parent={p}"));
                let mut s = format!("queue {n}{parent} priority={priority} {{\n    {body}\n");
                for level in 0..nest {
                    let _ = writeln!(s, "queue \"n{level}\" {{ gpu quota=1; namespaces \"n{level}\"");
                }
                s.push_str(&"}\n".repeat(nest + 1));
                s
            }
        ),
        2 => (name(), any_value(), prop::sample::select(&["#true", "#false", "1", "\"yes\""][..]))
            .prop_map(|(n, v, p)| format!("priority-class {n} value={v} preemptible={p}")),
        1 => (name(), any_value(), any_value(), prop::sample::select(&["\"error\"", "\"warn\"", "\"allow\"", "\"nope\""][..]))
            .prop_map(|(n, g, c, mode)| format!("cluster {n} {{\n    capacity gpu={g} cpu={c} memory={c}\n    oversubscription {mode}\n    fairness k={g} window=\"7d\"\n}}")),
        1 => (name(), any_value(), name()).prop_map(|(n, max, label)| {
            format!("placement {n} strategy=spread {{\n    max-gpus-per-node {max}\n    topology required={label}\n}}")
        }),
    ]
}

fn queue_soup() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(policy_node(), 0..12).prop_map(|nodes| nodes.join("\n").into_bytes())
}

/// Policies that mutations start from: the example policy and small generated ones.
fn corpora() -> &'static [Vec<(String, String)>] {
    static CORPORA: OnceLock<Vec<Vec<(String, String)>>> = OnceLock::new();
    CORPORA.get_or_init(|| {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../policies");
        let (set, early) = load_dir(&dir).expect("the example policy loads");
        assert!(early.is_empty());
        // Paths as the CLI shows them when run from the repository: `policies/teams/llm.kdl`.
        let example = set
            .iter()
            .map(|(_, f)| {
                let inside = f
                    .path
                    .rsplit_once("policies/")
                    .map_or(f.path.as_str(), |(_, p)| p);
                (format!("policies/{inside}"), f.text.clone())
            })
            .collect();
        let generated = |spec: GenerateSpec| {
            generate(&spec)
                .into_iter()
                .map(|f| (f.path, f.text))
                .collect::<Vec<_>>()
        };
        vec![
            example,
            generated(GenerateSpec::with_shape(24, 4, 4)),
            generated(GenerateSpec {
                seed: 1,
                ..GenerateSpec::with_shape(20, 2, 7)
            }),
        ]
    })
}

/// One random edit. Numbers are reduced modulo the file's size when applied, so shrinking
/// towards 0 moves the edit to the start of the file.
#[derive(Debug, Clone)]
enum Mutation {
    Delete {
        file: u32,
        at: u32,
        len: u16,
    },
    Truncate {
        file: u32,
        at: u32,
    },
    Insert {
        file: u32,
        at: u32,
        bytes: Vec<u8>,
    },
    InsertTokens {
        file: u32,
        at: u32,
        tokens: Vec<usize>,
    },
    Duplicate {
        file: u32,
        from: u32,
        len: u16,
        to: u32,
    },
    Swap {
        file: u32,
        a: u32,
        b: u32,
        len: u16,
    },
    Number {
        file: u32,
        nth: u32,
        value: usize,
    },
    Braces {
        file: u32,
        at: u32,
        count: u16,
        open: bool,
    },
    DropQuote {
        file: u32,
        nth: u32,
    },
    Splice {
        file: u32,
        from_file: u32,
        line: u32,
        lines: u8,
        at_line: u32,
    },
    Rename {
        file: u32,
        nth: u32,
        other: u32,
    },
}

fn mutation() -> impl Strategy<Value = Mutation> {
    let f = any::<u32>;
    prop_oneof![
        1 => (f(), f(), 1u16..200).prop_map(|(file, at, len)| Mutation::Delete { file, at, len }),
        1 => (f(), f()).prop_map(|(file, at)| Mutation::Truncate { file, at }),
        1 => (f(), f(), prop::collection::vec(any::<u8>(), 1..16))
            .prop_map(|(file, at, bytes)| Mutation::Insert { file, at, bytes }),
        1 => (f(), f(), prop::collection::vec(0..TOKENS.len(), 1..8))
            .prop_map(|(file, at, tokens)| Mutation::InsertTokens { file, at, tokens }),
        1 => (f(), f(), 1u16..400, f()).prop_map(|(file, from, len, to)| Mutation::Duplicate { file, from, len, to }),
        1 => (f(), f(), f(), 1u16..200).prop_map(|(file, a, b, len)| Mutation::Swap { file, a, b, len }),
        3 => (f(), f(), 0..EXTREMES.len()).prop_map(|(file, nth, value)| Mutation::Number { file, nth, value }),
        1 => (f(), f(), prop_oneof![1u16..8, 60u16..70, 100u16..2000], any::<bool>())
            .prop_map(|(file, at, count, open)| Mutation::Braces { file, at, count, open }),
        1 => (f(), f()).prop_map(|(file, nth)| Mutation::DropQuote { file, nth }),
        1 => (f(), f(), f(), 1u8..6, f()).prop_map(|(file, from_file, line, lines, at_line)| Mutation::Splice {
            file,
            from_file,
            line,
            lines,
            at_line
        }),
        3 => (f(), f(), f()).prop_map(|(file, nth, other)| Mutation::Rename { file, nth, other }),
    ]
}

/// Byte ranges of the runs of ASCII digits (with a leading `-` or `.` part) in `text`.
fn numbers(text: &[u8]) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < text.len() {
        if text[i].is_ascii_digit() {
            let start = i;
            while i < text.len() && (text[i].is_ascii_digit() || text[i] == b'.' || text[i] == b'_')
            {
                i += 1;
            }
            out.push((start, i));
        } else {
            i += 1;
        }
    }
    out
}

/// Byte ranges of the quoted strings (quotes included) in `text`.
fn strings(text: &[u8]) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < text.len() {
        if text[i] == b'"' {
            let start = i;
            i += 1;
            while i < text.len() && text[i] != b'"' && text[i] != b'\n' {
                i += if text[i] == b'\\' { 2 } else { 1 };
            }
            if i < text.len() && text[i] == b'"' {
                out.push((start, i + 1));
            }
        }
        i += 1;
    }
    out
}

fn line_starts(text: &[u8]) -> Vec<usize> {
    std::iter::once(0)
        .chain(
            text.iter()
                .enumerate()
                .filter(|(_, b)| **b == b'\n')
                .map(|(i, _)| i + 1),
        )
        .collect()
}

impl Mutation {
    fn apply(&self, files: &mut Files) {
        let n = files.len() as u32;
        let pick = |file: u32| (file % n) as usize;
        let at = |text: &[u8], at: u32| at as usize % (text.len() + 1);
        match self {
            Mutation::Delete { file, at: a, len } => {
                let t = &mut files[pick(*file)].1;
                let start = at(t, *a);
                let end = (start + *len as usize).min(t.len());
                t.drain(start..end);
            }
            Mutation::Truncate { file, at: a } => {
                let t = &mut files[pick(*file)].1;
                let cut = at(t, *a);
                t.truncate(cut);
            }
            Mutation::Insert { file, at: a, bytes } => {
                let t = &mut files[pick(*file)].1;
                let p = at(t, *a);
                t.splice(p..p, bytes.iter().copied());
            }
            Mutation::InsertTokens {
                file,
                at: a,
                tokens,
            } => {
                let t = &mut files[pick(*file)].1;
                let p = at(t, *a);
                let text: String = tokens.iter().map(|&i| TOKENS[i]).collect();
                t.splice(p..p, text.bytes());
            }
            Mutation::Duplicate {
                file,
                from,
                len,
                to,
            } => {
                let t = &mut files[pick(*file)].1;
                let start = at(t, *from);
                let piece = t[start..(start + *len as usize).min(t.len())].to_vec();
                let p = at(t, *to);
                t.splice(p..p, piece);
            }
            Mutation::Swap { file, a, b, len } => {
                let t = &mut files[pick(*file)].1;
                let (x, y) = (at(t, *a), at(t, *b));
                let (x, y) = (x.min(y), x.max(y));
                let len = (*len as usize).min(y - x).min(t.len() - y);
                if len > 0 {
                    let first = t[x..x + len].to_vec();
                    let second = t[y..y + len].to_vec();
                    t[x..x + len].copy_from_slice(&second);
                    t[y..y + len].copy_from_slice(&first);
                }
            }
            Mutation::Number { file, nth, value } => {
                let t = &mut files[pick(*file)].1;
                let found = numbers(t);
                if let Some(&(s, e)) = found.get(*nth as usize % found.len().max(1)) {
                    t.splice(s..e, EXTREMES[*value].bytes());
                }
            }
            Mutation::Braces {
                file,
                at: a,
                count,
                open,
            } => {
                let t = &mut files[pick(*file)].1;
                let p = at(t, *a);
                let brace = if *open { b'{' } else { b'}' };
                t.splice(p..p, std::iter::repeat_n(brace, *count as usize));
            }
            Mutation::DropQuote { file, nth } => {
                let t = &mut files[pick(*file)].1;
                let quotes: Vec<usize> = t
                    .iter()
                    .enumerate()
                    .filter(|(_, b)| **b == b'"')
                    .map(|(i, _)| i)
                    .collect();
                if let Some(&q) = quotes.get(*nth as usize % quotes.len().max(1)) {
                    t.remove(q);
                }
            }
            Mutation::Splice {
                file,
                from_file,
                line,
                lines,
                at_line,
            } => {
                let source = files[pick(*from_file)].1.clone();
                let starts = line_starts(&source);
                let first = *line as usize % starts.len();
                let last = (first + *lines as usize).min(starts.len());
                let end = starts.get(last).copied().unwrap_or(source.len());
                let piece = source[starts[first]..end].to_vec();
                let t = &mut files[pick(*file)].1;
                let targets = line_starts(t);
                let p = targets[*at_line as usize % targets.len()];
                t.splice(p..p, piece);
            }
            Mutation::Rename { file, nth, other } => {
                // Any quoted string anywhere in the policy replaces one in this file: names
                // become duplicates, parents point at themselves or at each other.
                let all: Vec<Vec<u8>> = files
                    .iter()
                    .flat_map(|(_, t)| strings(t).into_iter().map(|(s, e)| t[s..e].to_vec()))
                    .collect();
                let t = &mut files[pick(*file)].1;
                let here = strings(t);
                if let (Some(&(s, e)), false) =
                    (here.get(*nth as usize % here.len().max(1)), all.is_empty())
                {
                    t.splice(s..e, all[*other as usize % all.len()].iter().copied());
                }
            }
        }
    }
}

fn mutated(corpus: usize, mutations: &[Mutation]) -> Files {
    let corpora = corpora();
    let mut files: Files = corpora[corpus % corpora.len()]
        .iter()
        .map(|(p, t)| (p.clone(), t.clone().into_bytes()))
        .collect();
    for m in mutations {
        m.apply(&mut files);
    }
    files
}

// ---------------------------------------------------------------------------------------------
// Properties

#[test]
fn arbitrary_bytes() {
    fuzz("arbitrary_bytes", raw_bytes(), |bytes| {
        vec![("fuzz.kdl".to_string(), bytes.clone())]
    });
}

#[test]
fn kdl_soup() {
    let strategy = prop_oneof![token_soup(), queue_soup()];
    fuzz("kdl_soup", strategy, |bytes| {
        vec![("fuzz.kdl".to_string(), bytes.clone())]
    });
}

#[test]
fn mutated_policies() {
    let strategy = (0usize..3, prop::collection::vec(mutation(), 1..6));
    fuzz("mutated_policies", strategy, |(corpus, mutations)| {
        mutated(*corpus, mutations)
    });
}

// ---------------------------------------------------------------------------------------------
// The harness itself

#[test]
fn the_unmutated_corpora_check_clean() {
    for (i, corpus) in corpora().iter().enumerate() {
        let files: Files = corpus
            .iter()
            .map(|(p, t)| (p.clone(), t.clone().into_bytes()))
            .collect();
        let set = SourceSet::new(
            corpus
                .iter()
                .map(|(p, t)| SourceFile::new(p.clone(), t.clone()))
                .collect(),
        );
        let checked = check(&set, Vec::new());
        assert!(
            checked.diagnostics.is_empty(),
            "corpus {i}: {:#?}",
            checked.diagnostics
        );
        assert_eq!(check_input(&files), Ok(()));
    }
}

#[test]
fn the_harness_catches_bad_spans_hangs_and_panics() {
    let set = SourceSet::new(vec![SourceFile::new("a.kdl", "é")]);
    let at = |offset, len| Label::new(FileId(0), offset, len);
    assert!(label_inside(&at(0, 2), &set).is_ok());
    assert!(label_inside(&at(0, 1), &set).is_err(), "splits é");
    assert!(label_inside(&at(2, 1), &set).is_err(), "past the end");
    assert!(
        label_inside(&Label::new(FileId(1), 0, 0), &set).is_err(),
        "no such file"
    );
    assert!(label_inside(&at(usize::MAX, 2), &set).is_err(), "overflow");

    // Panics and hangs come back as errors, and the worker keeps working after them.
    fn job(files: &Files) -> Result<(), String> {
        match files[0].1.as_slice() {
            b"panic" => panic!("boom"),
            b"hang" => {
                std::thread::sleep(Duration::from_secs(60));
                Ok(())
            }
            b"fail" => Err("failed".into()),
            _ => Ok(()),
        }
    }
    let input = |text: &str| vec![("a.kdl".to_string(), text.as_bytes().to_vec())];
    // Long enough for a panic's backtrace to be printed on a busy machine.
    let mut worker = Worker::spawn(job, Duration::from_secs(3));
    assert_eq!(worker.run(input("ok")), Ok(()));
    assert_eq!(
        worker.run(input("panic")),
        Err("panicked: boom".to_string())
    );
    assert_eq!(worker.run(input("fail")), Err("failed".to_string()));
    assert!(
        worker
            .run(input("hang"))
            .is_err_and(|e| e.starts_with("hung"))
    );
    assert_eq!(worker.run(input("ok")), Ok(()));
}

#[test]
fn mutations_change_the_policy() {
    // Each kind of edit really edits (so the fuzzer is not checking the same files over and over).
    let base = mutated(0, &[]);
    let edits = [
        Mutation::Delete {
            file: 0,
            at: 10,
            len: 5,
        },
        Mutation::Truncate { file: 0, at: 10 },
        Mutation::Insert {
            file: 0,
            at: 10,
            bytes: vec![b'{'],
        },
        Mutation::InsertTokens {
            file: 0,
            at: 10,
            tokens: vec![0, 1],
        },
        Mutation::Duplicate {
            file: 0,
            from: 10,
            len: 5,
            to: 0,
        },
        Mutation::Swap {
            file: 0,
            a: 0,
            b: 100,
            len: 5,
        },
        Mutation::Number {
            file: 0,
            nth: 0,
            value: 1,
        },
        Mutation::Braces {
            file: 0,
            at: 0,
            count: 3,
            open: true,
        },
        Mutation::DropQuote { file: 0, nth: 0 },
        Mutation::Splice {
            file: 0,
            from_file: 1,
            line: 3,
            lines: 2,
            at_line: 5,
        },
        Mutation::Rename {
            file: 0,
            nth: 0,
            other: 17,
        },
    ];
    for m in edits {
        assert_ne!(
            mutated(0, std::slice::from_ref(&m)),
            base,
            "{m:?} left the policy unchanged"
        );
    }
}

/// Files of hostile shapes that make the `kdl` crate recurse once per byte or so: each must come
/// back as diagnostics (the checker parses on a thread with a large stack), not abort the process.
#[test]
fn hostile_recursion_in_the_kdl_parser_is_contained() {
    // `KAI_FUZZ_HOSTILE_BYTES` tries other sizes (the file size limit is 4 MiB).
    let size: usize = std::env::var("KAI_FUZZ_HOSTILE_BYTES").map_or(64 * 1024, |v| {
        v.parse().expect("KAI_FUZZ_HOSTILE_BYTES is a number")
    });
    let shapes: [(&str, String); 8] = [
        ("unmatched }", "}".repeat(size)),
        ("a run of =", "=".repeat(size)),
        ("control characters in a node", "a \u{1}".repeat(size / 3)),
        (
            "a long block comment of stars",
            format!("/*{}*/", "*".repeat(size)),
        ),
        ("nested block comments", "/*".repeat(size / 2)),
        ("nested blocks", "a {".repeat(size / 3)),
        (
            "nested blocks after a stray quote",
            format!("x\"\" y\" {}\"z", "{".repeat(size)),
        ),
        (
            "nested blocks after a dropped quote",
            format!("a b=c\" {{\nq \"a\" {}\n", "{".repeat(size)),
        ),
    ];
    for (what, text) in shapes {
        let files: Files = vec![("hostile.kdl".to_string(), text.into_bytes())];
        let mut worker = Worker::spawn(check_input, hang_limit());
        let start = Instant::now();
        assert_eq!(worker.run(files), Ok(()), "{what}");
        eprintln!(
            "{what}: {size} bytes checked in {:.2} s",
            start.elapsed().as_secs_f64()
        );
    }
}

/// Hostile files beside an ordinary one, enough bytes in all for the parser's thread pool: a
/// file longer than the pool threads' stack is sized for is parsed on a thread of its own, and
/// every file still gets its own diagnostics.
#[test]
fn long_hostile_files_among_ordinary_ones_are_contained() {
    let ordinary = "cluster { gpu 8; }\n";
    let files: Files = vec![
        ("a-short.kdl".into(), "}".repeat(60 * 1024).into_bytes()),
        ("b-long.kdl".into(), "}".repeat(100 * 1024).into_bytes()),
        ("c-long.kdl".into(), "=".repeat(100 * 1024).into_bytes()),
        ("d-ordinary.kdl".into(), ordinary.as_bytes().to_vec()),
    ];
    let mut worker = Worker::spawn(check_input, hang_limit());
    assert_eq!(worker.run(files.clone()), Ok(()));

    let set = SourceSet::new(
        files
            .iter()
            .map(|(path, bytes)| SourceFile::new(path.clone(), String::from_utf8_lossy(bytes)))
            .collect(),
    );
    let checked = check(&set, Vec::new());
    for (id, file) in set.iter().take(3) {
        assert!(
            checked
                .diagnostics
                .iter()
                .any(|d| d.primary.file == id && d.code == Code::Syntax),
            "{} has no syntax error: {:#?}",
            file.path,
            checked.diagnostics
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Regressions: inputs the fuzzer found, minimised

fn regression(text: &[u8]) {
    let files: Files = vec![("fuzz.kdl".to_string(), text.to_vec())];
    let mut worker = Worker::spawn(check_input, hang_limit());
    assert_eq!(worker.run(files.clone()), Ok(()), "input: {}", show(&files));
}

/// `syntax::property_value` stepped one byte past a multi-byte whitespace character.
#[test]
fn regression_line_separator_before_a_property() {
    regression("é/*\u{2028}*/quota={".as_bytes());
}

/// A dropped `"` made the nesting pre-check read the rest of the file as strings, and 1,200
/// `{` then overflowed the parser's stack (the process aborted).
#[test]
fn regression_dropped_quote_then_a_run_of_braces() {
    let text = format!(
        "queue \"a\" display-name=Team A\" {{\n    gpu quota=1 limit=\"2\"\n    queue \"b\" di{}splay-name=\"B\" {{\n    }}\n}}\n",
        "{".repeat(1_213)
    );
    regression(text.as_bytes());
}
