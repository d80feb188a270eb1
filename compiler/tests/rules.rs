//! The rule suite: every folder under `tests/fixtures/` is a small policy, and the reviewed
//! snapshots beside it (`human.snap`, `json.snap`) are what `kai-policy check` must say about it.
//!
//! A fixture's folder name is part of its specification:
//! - `KP0013-children-over-quota-warn/` must produce at least one KP0013 diagnostic;
//! - `valid-every-feature/` must produce no diagnostic at all, and compile.
//!
//! Every diagnostic code must be produced by at least one fixture, so a new rule cannot land
//! without a fixture that shows what its message looks like.
//!
//! To accept changed output: `INSTA_UPDATE=always cargo test -p kai-policy-compiler --test rules`,
//! then review the diff of the `.snap` files.

use std::collections::BTreeSet;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};

use kai_policy_compiler::check::{Checked, MAX_QUEUES, check};
use kai_policy_compiler::diagnostics::{Code, HumanStyle, render_human, render_json};
use kai_policy_compiler::source::{MAX_FILE_BYTES, MAX_FILES, SourceSet, load_dir};

const FIXTURES: &str = "tests/fixtures";

/// One fixture folder, loaded and checked.
struct Fixture {
    name: String,
    sources: SourceSet,
    checked: Checked,
}

impl Fixture {
    fn codes(&self) -> BTreeSet<&'static str> {
        self.checked
            .diagnostics
            .iter()
            .map(|d| d.code.id())
            .collect()
    }

    fn human(&self) -> String {
        render_human(&self.checked.diagnostics, &self.sources, HumanStyle::Plain)
    }

    fn json(&self) -> String {
        render_json(&self.checked.diagnostics, &self.sources)
    }
}

/// Every fixture folder, sorted by name. Paths stay relative (`tests/fixtures/NAME/…`) so that
/// the file names in the snapshots do not depend on where the repository is checked out.
fn fixtures() -> Vec<Fixture> {
    let mut names: Vec<String> = std::fs::read_dir(FIXTURES)
        .expect("tests/fixtures exists (cargo runs integration tests from the crate folder)")
        .map(|entry| entry.expect("readable fixture folder"))
        .filter(|entry| entry.file_type().is_ok_and(|t| t.is_dir()))
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert!(!names.is_empty(), "no fixtures under {FIXTURES}");
    names
        .into_iter()
        .map(|name| {
            let dir = format!("{FIXTURES}/{name}");
            let (sources, early) = load_dir(Path::new(&dir))
                .unwrap_or_else(|e| panic!("fixture {name} cannot be loaded: {e}"));
            let checked = check(&sources, early);
            Fixture {
                name,
                sources,
                checked,
            }
        })
        .collect()
}

/// The code a fixture's name promises (`KP0013-…` → `KP0013`), if any.
fn promised_code(name: &str) -> Option<&str> {
    let id = name.get(..6)?;
    (id.starts_with("KP") && name[6..].starts_with('-')).then_some(id)
}

/// Compares both renderings of every fixture with its snapshots, reporting every mismatch
/// (insta writes a `.snap.new` beside each) before failing.
#[test]
fn fixtures_match_their_snapshots() {
    let mut failed = Vec::new();
    for fixture in fixtures() {
        let (human, json) = (fixture.human(), fixture.json());
        let dir = PathBuf::from("fixtures").join(&fixture.name);
        let result = catch_unwind(AssertUnwindSafe(|| {
            insta::with_settings!({
                snapshot_path => dir,
                prepend_module_to_snapshot => false,
                omit_expression => true,
                description => format!("kai-policy check {FIXTURES}/{}", fixture.name),
            }, {
                insta::assert_snapshot!("human", human);
                insta::assert_snapshot!("json", json);
            });
        }));
        if result.is_err() {
            failed.push(fixture.name);
        }
    }
    assert!(failed.is_empty(), "snapshots differ for: {failed:?}");
}

#[test]
fn fixture_names_are_specifications() {
    for fixture in fixtures() {
        let name = &fixture.name;
        let codes = fixture.codes();
        if name.starts_with("valid-") {
            assert!(
                fixture.checked.diagnostics.is_empty(),
                "{name} must produce no diagnostic, but produced {codes:?}:\n{}",
                fixture.human()
            );
            assert!(fixture.checked.policy.is_some(), "{name} must compile");
        } else if let Some(id) = promised_code(name) {
            assert!(
                Code::ALL.iter().any(|c| c.id() == id),
                "{name} names {id}, which is not a diagnostic code"
            );
            assert!(
                codes.contains(id),
                "{name} must produce {id}, but produced {codes:?}:\n{}",
                fixture.human()
            );
            let rejected = fixture.checked.diagnostics.iter().any(|d| d.is_error());
            assert_eq!(
                fixture.checked.policy.is_none(),
                rejected,
                "{name}: a policy is returned exactly when there is no error"
            );
        } else {
            panic!(
                "fixture {name} must be named `valid-…` or after the code it shows (`KP0007-…`)"
            );
        }
    }
}

/// Codes no policy produces: KP0000 is the command's own failure (a missing folder, an output
/// that cannot be written), shown end to end in `tests/policy_cli.rs`.
const NOT_FROM_A_POLICY: &[&str] = &["KP0000"];

#[test]
fn every_code_is_shown_by_a_fixture() {
    let produced: BTreeSet<&str> = fixtures().iter().flat_map(|f| f.codes()).collect();
    let missing: Vec<String> = Code::ALL
        .iter()
        .filter(|c| !produced.contains(c.id()) && !NOT_FROM_A_POLICY.contains(&c.id()))
        .map(|c| format!("{} ({})", c.id(), c.slug()))
        .collect();
    assert!(
        missing.is_empty(),
        "no fixture under {FIXTURES} produces {missing:?}; add one named after the code"
    );
}

/// A policy in a temporary folder, for inputs too large or too odd to commit as fixtures. The
/// folder's path is replaced by `[tmp]` in the output so that snapshots stay stable.
fn check_temp(files: &[(&str, Vec<u8>)]) -> (String, String, Checked) {
    let dir = tempfile::tempdir().expect("temporary folder");
    for (name, bytes) in files {
        std::fs::write(dir.path().join(name), bytes).expect("write policy file");
    }
    let (sources, early) = load_dir(dir.path()).expect("temporary policy loads");
    let checked = check(&sources, early);
    let root = dir.path().to_string_lossy().replace('\\', "/");
    let human =
        render_human(&checked.diagnostics, &sources, HumanStyle::Plain).replace(&root, "[tmp]");
    let json = render_json(&checked.diagnostics, &sources).replace(&root, "[tmp]");
    (human, json, checked)
}

/// A file over the size limit is reported and not parsed, and the files beside it are still
/// checked.
#[test]
fn a_file_over_the_size_limit_is_reported_not_read() {
    let mut big = b"// padding\n".repeat(MAX_FILE_BYTES / 11 + 1);
    big.extend_from_slice(b"queue \"hidden\" { gpu quota=-1; }\n");
    assert!(big.len() > MAX_FILE_BYTES);
    let good = b"queue \"team\" {\n    gpu quota=4 limit=2\n    namespaces \"team\"\n}\n".to_vec();
    let (human, json, checked) = check_temp(&[("big.kdl", big), ("team.kdl", good)]);
    assert!(checked.policy.is_none());
    insta::assert_snapshot!("file_too_large_human", human);
    insta::assert_snapshot!("file_too_large_json", json);
}

/// A file that is not UTF-8 is reported where the first bad byte is, without a cascade of
/// syntax errors from the readable part, and the files beside it are still checked.
#[test]
fn a_file_that_is_not_utf8_is_reported_not_read() {
    let mut latin1 = b"queue \"caf".to_vec();
    latin1.push(0xE9); // 'é' in Latin-1
    latin1.extend_from_slice(b"\" {\n    gpu quota=1\n    namespaces \"cafe\"\n}\n");
    let good = b"queue \"team\" {\n    gpu quota=4 limit=2\n    namespaces \"team\"\n}\n".to_vec();
    let (human, json, checked) = check_temp(&[("latin1.kdl", latin1), ("team.kdl", good)]);
    assert!(checked.policy.is_none());
    insta::assert_snapshot!("not_utf8_human", human);
    insta::assert_snapshot!("not_utf8_json", json);
}

/// One queue more than the checker accepts: one diagnostic, not one per queue.
#[test]
fn a_policy_with_too_many_queues_is_reported_once() {
    let mut text = String::new();
    for i in 0..=MAX_QUEUES {
        text.push_str(&format!("queue \"q{i}\" {{ namespaces \"*\"; }}\n"));
    }
    let (human, json, checked) = check_temp(&[("many.kdl", text.into_bytes())]);
    assert!(checked.policy.is_none());
    insta::assert_snapshot!("too_many_queues_human", human);
    insta::assert_snapshot!("too_many_queues_json", json);
}

/// One file more than the checker reads: reported, and the files it did read are checked.
#[test]
fn a_policy_with_too_many_files_is_reported() {
    let files: Vec<(String, Vec<u8>)> = (0..=MAX_FILES)
        .map(|i| {
            let text = format!("queue \"q{i:05}\" {{ namespaces \"*\"; }}\n");
            (format!("q{i:05}.kdl"), text.into_bytes())
        })
        .collect();
    let borrowed: Vec<(&str, Vec<u8>)> =
        files.iter().map(|(n, b)| (n.as_str(), b.clone())).collect();
    let (human, json, checked) = check_temp(&borrowed);
    assert!(checked.policy.is_none());
    insta::assert_snapshot!("too_many_files_human", human);
    insta::assert_snapshot!("too_many_files_json", json);
}

/// `docs/diagnostics.md` has a section for every code (anchored by its lower-case id), and the
/// example in each section produces that code.
#[test]
fn the_diagnostics_reference_shows_every_code() {
    // The limits need inputs far too large to show; the section has a table instead. KP0000
    // and KP0025 are about paths, not policy text.
    const WITHOUT_EXAMPLE: &[&str] = &["KP0000", "KP0022", "KP0025"];
    let doc = std::fs::read_to_string("../docs/diagnostics.md").expect("docs/diagnostics.md");
    for code in Code::ALL {
        let heading = format!("## {}\n", code.id().to_lowercase());
        let start = doc
            .find(&heading)
            .unwrap_or_else(|| panic!("docs/diagnostics.md has no `{}`", heading.trim()));
        let section = &doc[start + heading.len()..];
        let section = &section[..section.find("\n## ").unwrap_or(section.len())];
        let example = section
            .split_once("```kdl\n")
            .and_then(|(_, rest)| rest.split_once("```"))
            .map(|(kdl, _)| kdl);
        match example {
            None => assert!(
                WITHOUT_EXAMPLE.contains(&code.id()),
                "the {} section has no ```kdl example",
                code.id()
            ),
            Some(kdl) => {
                let (human, _, checked) = check_temp(&[("example.kdl", kdl.as_bytes().to_vec())]);
                assert!(
                    checked.diagnostics.iter().any(|d| d.code == *code),
                    "the {} example does not produce {}:\n{human}",
                    code.id(),
                    code.id()
                );
            }
        }
    }
}

/// The brace-depth limit is about blocks: 100,000 real `{` are refused before parsing, at once
/// and without overflowing the parser's stack.
#[test]
fn a_hundred_thousand_nested_blocks_are_refused_quickly() {
    let text = "a{".repeat(100_000).into_bytes();
    let started = std::time::Instant::now();
    let (_, _, checked) = check_temp(&[("deep.kdl", text)]);
    assert!(started.elapsed() < std::time::Duration::from_secs(5));
    let codes: Vec<_> = checked.diagnostics.iter().map(|d| d.code).collect();
    assert_eq!(codes, [Code::PolicyTooLarge]);
}

/// A string the parser cannot read (a bad escape) makes it resume inside the string, where the
/// braces or `/*` the depth scan skipped become nesting: the parser bounds that itself, so these
/// are errors, never a stack overflow (which aborts the process).
#[test]
fn nesting_inside_a_broken_string_cannot_overflow_the_stack() {
    for inner in ["{", "a{", "/*"] {
        let text = format!("a \"\\q {}\"\n", inner.repeat(100_000));
        let (_, _, checked) = check_temp(&[("broken.kdl", text.into_bytes())]);
        assert!(checked.has_errors(), "{inner}: the file must be rejected");
    }
}
