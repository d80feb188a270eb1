//! `kai-policy fmt`'s library half: the canonical layout, kept comments, idempotence, and never a
//! change of meaning, over a messy file, the example policy and generated documents.

use std::path::{Path, PathBuf};

use kai_policy_compiler::format::{FormatError, format, same_document};
use proptest::prelude::*;

fn example_files() -> Vec<(PathBuf, String)> {
    fn walk(dir: &Path, out: &mut Vec<(PathBuf, String)>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "kdl") {
                let text = std::fs::read_to_string(&path).unwrap();
                out.push((path, text));
            }
        }
    }
    let mut out = Vec::new();
    walk(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("../policies"),
        &mut out,
    );
    out.sort();
    assert!(out.len() >= 5, "the example policy has its files");
    out
}

/// A team file written in a hurry: CRLF line ends, a byte-order mark, tabs, `;`, odd spacing,
/// trailing spaces (`<SP>`), and comments of every kind.
fn messy() -> String {
    let text = r#"// A team file written in a hurry.


queue   "research"  display-name = "Research"   priority=100{
<TAB>gpu quota=50 limit = 80 weight=2 ; cpu quota=300 // cores<SP>
  memory   quota="2400Gi"


      /* a block comment
         over two lines<SP>
       */
  queue "llm-team" { gpu quota=30 weight=2; namespaces "research-llm" \
        "research-llm-dev"; min-runtime /* why */ reclaim="30m" }
  /-queue "old" {
      gpu quota=1
  }
  queue "vision-team" /-display-name="Vision" {
        gpu quota=(devices)20 /-limit=40<SP>
        namespaces "research-vision"

  }
}
queue "empty" {
}
// the end

"#;
    let text = text.replace("<TAB>", "\t").replace("<SP>", "   ");
    format!("\u{feff}{}", text.replace('\n', "\r\n"))
}

#[test]
fn a_messy_file_gets_the_canonical_layout_with_every_comment() {
    let messy = messy();
    let out = format(&messy).unwrap();
    insta::assert_snapshot!("messy", out);
    assert!(same_document(&messy, &out));
    assert_eq!(format(&out).unwrap(), out, "idempotent");
}

#[test]
fn the_example_policy_is_already_canonical() {
    for (path, text) in example_files() {
        let out = format(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert_eq!(
            out,
            text,
            "{} is not canonical: run `kai-policy fmt`",
            path.display()
        );
    }
}

#[test]
fn a_file_that_does_not_parse_is_refused_with_its_syntax_diagnostics() {
    let err = format("queue \"a\" {\n    gpu quota=1 limit=\n}\n").unwrap_err();
    let FormatError::Syntax(diagnostics) = err else {
        panic!("expected syntax diagnostics, got {err:?}");
    };
    assert!(!diagnostics.is_empty());
    assert!(diagnostics.iter().all(|d| d.code.id() == "KP0001"));
    assert!(format("queue \"a\" }").is_err());
    assert!(format("queue \"unterminated").is_err());
}

/// KDL v2 lets `/-` comment out a node ended by `;` (the vendored parser's patch 5): its `;`
/// becomes a line break like any other.
#[test]
fn a_slashdashed_node_ended_by_a_semicolon_is_formatted() {
    let text = "/-queue \"z\";\nqueue \"j\" { namespaces \"j\"; /-gpu quota=2; }\n";
    let out = format(text).unwrap();
    assert_eq!(
        out,
        "/-queue \"z\"\nqueue \"j\" {\n    namespaces \"j\"\n    /-gpu quota=2\n}\n"
    );
    assert!(same_document(text, &out));
    assert_eq!(format(&out).unwrap(), out, "idempotent");
}

/// Junk that makes the KDL parser recurse about once per byte: `fmt` parses it on a stack sized
/// for the file, as `check` does, and refuses it instead of overflowing the stack.
#[test]
fn hostile_junk_is_refused_not_a_crash() {
    for junk in ["}".repeat(64 * 1024), "=".repeat(64 * 1024)] {
        let err = format(&junk).unwrap_err();
        assert!(matches!(err, FormatError::Syntax(_)), "{err:?}");
        assert!(!same_document(&junk, &junk));
    }
}

#[test]
fn formatting_ignores_what_the_checker_would_reject() {
    // Layout only: unknown nodes and bad values are the checker's business, not fmt's.
    assert_eq!(format("nonsense   1 2;x").unwrap(), "nonsense 1 2\nx\n");
}

/// A generated KDL node, rendered below with random layout.
#[derive(Debug, Clone)]
struct Node {
    slashdash: bool,
    name: String,
    entries: Vec<(bool, Option<String>, String)>,
    children: Option<Vec<Node>>,
    comment: Option<String>,
}

fn value() -> impl Strategy<Value = String> {
    prop::sample::select(vec![
        "1",
        "24.5",
        "-3",
        "1_000",
        "0x1F",
        "1e3",
        "\"960Gi\"",
        "\"a  b\"",
        "\"esc \\\" \\\\ \\n\"",
        "#inf",
        "#true",
        "#null",
        "binpack",
        "(u8)7",
        "#\"raw \"q\" // not a comment\"#",
        "\"\"\"\n  multi  \n  line\n  \"\"\"",
    ])
    .prop_map(str::to_string)
}

fn node() -> impl Strategy<Value = Node> {
    let name = prop::sample::select(vec![
        "queue",
        "gpu",
        "cpu",
        "memory",
        "namespaces",
        "\"q n\"",
    ]);
    let entry = (
        prop::bool::weighted(0.1),
        prop::option::of(prop::sample::select(vec!["quota", "limit", "weight", "k"])),
        value(),
    )
        .prop_map(|(s, k, v)| (s, k.map(str::to_string), v));
    let comment = prop::option::of(prop::sample::select(vec![
        "// note",
        "/* note */",
        "/* two\n   lines */",
    ]));
    let leaf = (
        prop::bool::weighted(0.1),
        name,
        prop::collection::vec(entry, 0..4),
        comment,
    )
        .prop_map(|(slashdash, name, entries, comment)| Node {
            slashdash,
            name: name.to_string(),
            entries,
            children: None,
            comment: comment.map(str::to_string),
        });
    leaf.prop_recursive(4, 40, 5, |inner| {
        (inner.clone(), prop::collection::vec(inner, 0..5)).prop_map(|(mut n, c)| {
            n.children = Some(c);
            n
        })
    })
}

struct Noise<'a>(&'a [u8], usize);

impl Noise<'_> {
    fn pick<'s>(&mut self, options: &[&'s str]) -> &'s str {
        let n = self
            .0
            .get(self.1 % self.0.len().max(1))
            .copied()
            .unwrap_or(0);
        self.1 += 1;
        options[n as usize % options.len()]
    }
}

fn render(nodes: &[Node], noise: &mut Noise<'_>, out: &mut String) {
    for node in nodes {
        out.push_str(noise.pick(&["", "", "  ", "\t", "\n", "\n\n"]));
        if let Some(c) = &node.comment {
            out.push_str(c);
            out.push('\n');
        }
        if node.slashdash {
            out.push_str(noise.pick(&["/-", "/- ", "/-\n"]));
        }
        out.push_str(&node.name);
        for (slashdash, key, value) in &node.entries {
            out.push_str(noise.pick(&[" ", "  ", "\t", " /* c */ ", " \\\n    ", " \\ // why\n "]));
            if *slashdash {
                out.push_str("/-");
            }
            if let Some(key) = key {
                out.push_str(key);
                out.push_str(noise.pick(&["=", " = ", "= "]));
            }
            out.push_str(value);
        }
        if let Some(children) = &node.children {
            out.push_str(noise.pick(&[" {", "{", "  {", " /-{ x } {"]));
            out.push_str(noise.pick(&["\n", " ", " // open\n"]));
            render(children, noise, out);
            out.push_str(noise.pick(&["\n", " ", ""]));
            out.push('}');
        }
        let end = noise.pick(&[
            "\n",
            ";",
            "; // after\n",
            "\r\n",
            " // trailing\n",
            "\n\n\n",
        ]);
        out.push_str(end);
    }
}

fn assert_canonical(text: &str) -> Result<(), TestCaseError> {
    let once = format(text).map_err(|e| TestCaseError::fail(format!("{e:?}\n{text}")))?;
    prop_assert!(
        same_document(text, &once),
        "meaning changed:\n{text}\n---\n{once}"
    );
    let twice = format(&once).map_err(|e| TestCaseError::fail(format!("{e:?}\n{once}")))?;
    prop_assert_eq!(&twice, &once, "not idempotent; input:\n{}", text);
    if !once.is_empty() {
        prop_assert!(once.ends_with('\n') && !once.ends_with("\n\n"), "{once:?}");
    }
    prop_assert!(!once.contains('\r') && !once.contains('\t'), "{once:?}");
    // Trailing spaces only inside the generated multi-line strings, whose spaces are content.
    for line in once.lines().filter(|l| !l.contains("multi")) {
        prop_assert_eq!(line, line.trim_end(), "trailing space in {:?}", once);
        let indent = line.len() - line.trim_start().len();
        prop_assert!(
            indent % 4 == 0 || line.trim_start().starts_with(['l', '"']),
            "{once:?}"
        );
    }
    let comments = |s: &str| s.matches("//").count() + s.matches("/*").count();
    prop_assert_eq!(comments(text), comments(&once));
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig {
        // PROPTEST_CASES raises it (proptest reads it into the default config).
        cases: ProptestConfig::default().cases.max(256),
        // Integration tests have no lib.rs beside them for proptest's regression files.
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn generated_documents_format_idempotently_without_changing_meaning(
        nodes in prop::collection::vec(node(), 0..6),
        noise in prop::collection::vec(any::<u8>(), 1..64),
    ) {
        let mut text = String::new();
        render(&nodes, &mut Noise(&noise, 0), &mut text);
        prop_assert!(same_document(&text, &text), "the generator wrote invalid KDL:\n{text}");
        assert_canonical(&text)?;
    }

    #[test]
    fn the_example_files_stay_canonical_under_layout_noise(
        file in 0usize..7,
        noise in prop::collection::vec(any::<u8>(), 1..64),
    ) {
        let files = example_files();
        let (_, text) = &files[file % files.len()];
        // Re-space the file: random indentation and spacing around `=`, `;` before line ends.
        let mut n = Noise(&noise, 0);
        let messy: String = text
            .lines()
            .map(|line| {
                let code = !line.trim().is_empty()
                    && !line.contains("//")
                    && !line.ends_with('{');
                let indent = n.pick(&["", "  ", "\t", "        "]);
                let end = if code { n.pick(&["\n", ";\n", "; \n", " \t\n"]) } else { "\n" };
                let line = line.trim().replace('=', n.pick(&["=", " = ", "= ", "\t=  "]));
                format!("{indent}{line}{end}")
            })
            .collect();
        prop_assert!(same_document(text, &messy), "the noise changed the document:\n{messy}");
        prop_assert_eq!(format(&messy).unwrap(), text.clone(), "from:\n{}", messy);
    }
}
