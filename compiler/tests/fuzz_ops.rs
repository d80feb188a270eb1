//! Property-based fuzzing of `fmt`, `import` and `diff` (the checker has its own, in `fuzz.rs`).
//!
//! - `fmt_fuzz`: any bytes, and the example policy with random edits, through `format_file`:
//!   never a panic; what it formats, it formats again unchanged; and a policy that compiles
//!   compiles to the same Kubernetes objects and the same compiled config after formatting.
//! - `import_fuzz`: any bytes, and KAI Queue YAML with random edits, through `import`: never a
//!   panic; an error names the input; a result is in `fmt`'s layout and can be checked.
//! - `diff_fuzz`: pairs of example policies with random edits that change what they mean
//!   (numbers, strategies, flags, namespaces moved between queues): a policy compared with
//!   itself shows nothing; when `diff` shows nothing, the two compile to the same objects and
//!   the same compiled config (nothing that changes scheduling goes unreported).
//!
//! Each runs `PROPTEST_CASES` cases (default 256; see `docs/testing.md` for long runs).

use std::path::Path;

use kai_policy_compiler::check::check;
use kai_policy_compiler::diff::{Side, compare};
use kai_policy_compiler::explain::busy_demand;
use kai_policy_compiler::format::{format, format_file};
use kai_policy_compiler::import::import;
use kai_policy_compiler::lower::{Artifacts, SourceInfo};
use kai_policy_compiler::model::Policy;
use kai_policy_compiler::source::{FileId, SourceFile, SourceSet, load_dir};
use proptest::prelude::*;

/// The example policy's files, as (path, text).
fn example() -> Vec<(String, String)> {
    let (sources, _) =
        load_dir(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../policies")).expect("example");
    sources
        .iter()
        .map(|(_, f)| (f.path.clone(), f.text.clone()))
        .collect()
}

fn compile(files: &[(String, String)]) -> Option<Policy> {
    let set = SourceSet::new(
        files
            .iter()
            .map(|(p, t)| SourceFile::new(p.clone(), t.clone()))
            .collect(),
    );
    check(&set, Vec::new()).policy
}

/// What a policy compiles to: its objects and its compiled config.
fn compiled(policy: &Policy) -> (String, String) {
    let a = Artifacts::new(policy, SourceInfo::default());
    (a.objects_yaml().expect("renders"), a.config.to_json())
}

/// One edit of a policy text: which occurrence (modulo how many there are) of a pattern to
/// replace by which of its alternatives.
#[derive(Debug, Clone)]
struct Edit {
    file: usize,
    kind: usize,
    at: usize,
    pick: usize,
}

fn edit() -> impl Strategy<Value = Edit> {
    (any::<usize>(), 0..7usize, any::<usize>(), any::<usize>()).prop_map(
        |(file, kind, at, pick)| Edit {
            file,
            kind,
            at,
            pick,
        },
    )
}

/// Replaces one token of `text` as `edit` says; a text without that kind of token is unchanged.
fn apply(text: &str, edit: &Edit) -> String {
    const WORDS: &[&[&str]] = &[
        &["binpack", "spread"],
        &["#true", "#false"],
        &["\"error\"", "\"warn\"", "\"allow\""],
        &["\"5m\"", "\"10m\"", "\"30m\"", "\"1h\""],
        &[
            "\"research-llm\"",
            "\"research-vision\"",
            "\"ds-analytics\"",
            "\"infra-ci\"",
        ],
        &["\"training-pack\"", "\"inference-spread\""],
    ];
    if edit.kind == WORDS.len() {
        // A number: replaced by another small one.
        let spans: Vec<(usize, usize)> = number_spans(text);
        if spans.is_empty() {
            return text.to_string();
        }
        let (start, end) = spans[edit.at % spans.len()];
        let value = ["0", "1", "2", "4", "8", "15", "24.5", "100", "1000"][edit.pick % 9];
        return format!("{}{value}{}", &text[..start], &text[end..]);
    }
    let words = WORDS[edit.kind];
    let found: Vec<(usize, &str)> = words
        .iter()
        .flat_map(|w| text.match_indices(w).collect::<Vec<_>>())
        .collect();
    if found.is_empty() {
        return text.to_string();
    }
    let (start, word) = found[edit.at % found.len()];
    let other = words[edit.pick % words.len()];
    format!("{}{other}{}", &text[..start], &text[start + word.len()..])
}

/// Byte spans of the number values (after `=` or a space) in a text.
fn number_spans(text: &str) -> Vec<(usize, usize)> {
    let bytes = text.as_bytes();
    let mut spans = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i].is_ascii_digit() && i > 0 && matches!(bytes[i - 1], b'=' | b' ') {
            let start = i;
            while i < bytes.len() && (bytes[i].is_ascii_digit() || bytes[i] == b'.') {
                i += 1;
            }
            spans.push((start, i));
        } else {
            i += 1;
        }
    }
    spans
}

fn edited(files: &[(String, String)], edits: &[Edit]) -> Vec<(String, String)> {
    let mut files = files.to_vec();
    for e in edits {
        let i = e.file % files.len();
        files[i].1 = apply(&files[i].1, e);
    }
    files
}

/// Every file's text, one after another.
fn all_text(files: &[(String, String)]) -> String {
    files.iter().map(|(_, t)| t.as_str()).collect()
}

/// Text a fuzzer may throw at a parser: arbitrary bytes, or valid text with bytes spliced in.
fn hostile(valid: String) -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        prop::collection::vec(any::<u8>(), 0..512),
        (
            any::<usize>(),
            prop::collection::vec(any::<u8>(), 0..16),
            0..64usize
        )
            .prop_map(move |(at, insert, cut)| {
                let mut bytes = valid.clone().into_bytes();
                let at = at % (bytes.len() + 1);
                let end = (at + cut).min(bytes.len());
                bytes.splice(at..end, insert);
                bytes
            }),
    ]
}

const KAI_QUEUES: &str = "apiVersion: v1\nkind: List\nitems:\n- apiVersion: scheduling.run.ai/v2\n  kind: Queue\n  metadata: {name: research, labels: {kai.scheduler/node-pool: a}}\n  spec:\n    displayName: Research\n    priority: 150\n    preemptMinRuntime: 5m0s\n    resources:\n      gpu: {quota: 16, limit: 24, overQuotaWeight: 2}\n      cpu: {quota: -1, limit: -1, overQuotaWeight: 1}\n      memory: {quota: 1030792.15104, limit: -1, overQuotaWeight: 1}\n- apiVersion: scheduling.run.ai/v2\n  kind: Queue\n  metadata: {name: team-a}\n  spec:\n    parentQueue: research\n    resources:\n      gpu: {quota: 8, limit: -1, overQuotaWeight: 1}\n";

proptest! {
    #![proptest_config(ProptestConfig {
        // PROPTEST_CASES raises it (proptest reads it into the default config).
        cases: ProptestConfig::default().cases.max(256),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn fmt_fuzz(
        bytes in hostile(all_text(&example())),
        edits in prop::collection::vec(edit(), 0..6),
    ) {
        // Hostile bytes in one file.
        let text = String::from_utf8_lossy(&bytes).into_owned();
        if let Ok(once) = format_file(FileId(0), &text) {
            prop_assert_eq!(format(&once).ok(), Some(once.clone()), "not idempotent:\n{}", once);
        }
        // The example with edits: formatting never changes what it compiles to.
        let files = edited(&example(), &edits);
        let formatted: Vec<(String, String)> = files
            .iter()
            .map(|(p, t)| (p.clone(), format(t).unwrap_or_else(|_| t.clone())))
            .collect();
        match (compile(&files), compile(&formatted)) {
            (Some(a), Some(b)) => prop_assert_eq!(compiled(&a), compiled(&b)),
            (None, None) => {}
            (a, b) => prop_assert!(false, "formatting changed whether it compiles: {} → {}", a.is_some(), b.is_some()),
        }
    }

    #[test]
    fn import_fuzz(bytes in hostile(KAI_QUEUES.to_string())) {
        let text = String::from_utf8_lossy(&bytes).into_owned();
        match import(&[("queues.yaml", &text)]) {
            Ok(imported) => {
                prop_assert_eq!(format(&imported.kdl).ok(), Some(imported.kdl.clone()));
                let set = SourceSet::new(vec![SourceFile::new("imported.kdl", imported.kdl.clone())]);
                let _ = check(&set, Vec::new());
            }
            Err(errors) => {
                prop_assert!(!errors.is_empty());
                for e in errors {
                    prop_assert!(e.file.contains("queues.yaml") && !e.message.is_empty(), "{e:?}");
                }
            }
        }
    }

    #[test]
    fn diff_fuzz(
        base_edits in prop::collection::vec(edit(), 0..4),
        head_edits in prop::collection::vec(edit(), 0..4),
    ) {
        let base_files = edited(&example(), &base_edits);
        let head_files = edited(&base_files, &head_edits);
        let (Some(base), Some(head)) = (compile(&base_files), compile(&head_files)) else {
            return Ok(());
        };
        let side = |p: &Policy, label: &str| (busy_demand(p), label.to_string());
        let (bd, bl) = side(&base, "base");
        let (hd, hl) = side(&head, "head");
        let same = compare(
            &Side { policy: &base, demand: &bd, label: bl.clone() },
            &Side { policy: &base, demand: &bd, label: bl.clone() },
        ).expect("renders");
        prop_assert!(same.is_empty(), "a policy differs from itself: {:?}", same.changes);
        let diff = compare(
            &Side { policy: &base, demand: &bd, label: bl },
            &Side { policy: &head, demand: &hd, label: hl },
        ).expect("renders");
        if diff.is_empty() {
            prop_assert_eq!(compiled(&base), compiled(&head), "diff saw no change");
            prop_assert_eq!(base.cluster.oversubscription, head.cluster.oversubscription);
        }
    }
}
