//! The parse cache `diff` uses: checking with it gives exactly what checking without it gives,
//! even when a cached document serves a file at another position in another policy.

use std::path::Path;

use kai_policy_compiler::check::{ParseCache, check, check_with};
use kai_policy_compiler::source::{SourceFile, SourceSet, load_dir};

#[test]
fn a_cached_check_equals_a_fresh_one() {
    let (sources, early) = load_dir(Path::new("../policies")).unwrap();
    let fresh = check(&sources, early.clone());
    let cache = ParseCache::default();
    for _ in 0..2 {
        let cached = check_with(&sources, early.clone(), &cache);
        assert_eq!(cached.policy, fresh.policy);
        assert_eq!(cached.diagnostics, fresh.diagnostics);
    }
}

#[test]
fn a_cached_document_serves_the_same_text_in_another_file_and_broken_files_are_not_kept() {
    let shared = "queue \"a\" { gpu quota=1; namespaces \"a\" }\nqueue \"b\" { gpu quota=2 limit=1; namespaces \"b\" }\n";
    let broken = "queue \"c\" { gpu quota= }\n";
    let first = SourceSet::new(vec![
        SourceFile::new("x/team.kdl", shared),
        SourceFile::new("y/bad.kdl", broken),
    ]);
    let second = SourceSet::new(vec![
        SourceFile::new("a/other.kdl", broken),
        SourceFile::new("b/team.kdl", shared),
    ]);
    let cache = ParseCache::default();
    for sources in [&first, &second, &first] {
        let cached = check_with(sources, Vec::new(), &cache);
        let fresh = check(sources, Vec::new());
        assert_eq!(cached.diagnostics, fresh.diagnostics);
        assert!(
            cached.diagnostics.iter().any(|d| d.code.id() == "KP0012"),
            "limit below quota in the shared file"
        );
        assert!(
            cached.diagnostics.iter().any(|d| d.code.id() == "KP0001"),
            "the broken file is parsed (and reported) every time"
        );
    }
}
