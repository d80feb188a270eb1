//! How long the checker takes on a large policy: 10,000 queues in 4 levels across 200 files
//! (the default [`GenerateSpec`]), in memory and end to end from disk as the CLI reads it.
//!
//! `cargo bench -p kai-policy-compiler --bench check` prints a plain-text table. Knobs:
//! `KAI_BENCH_ITERS` (timed iterations per case, default 30), `KAI_BENCH_QUEUES`,
//! `KAI_BENCH_FILES`, `KAI_BENCH_LEVELS` (the shape) and `KAI_BENCH_KEEP=DIR` (write the
//! generated policy to DIR and keep it, instead of a temporary folder).

mod common;

use std::path::Path;
use std::time::Instant;

use kai_policy_compiler::check::check;
use kai_policy_compiler::generate::generate;
use kai_policy_compiler::source::{SourceSet, load_dir};

use common::{Stats, iters_from_env, spec_from_env, time};

/// The goal the checker is measured against, in milliseconds.
const GOAL_MS: f64 = 500.0;
const WARM_UP: usize = 3;

fn main() {
    let spec = spec_from_env();
    let iters = iters_from_env(30);

    let started = Instant::now();
    let files = generate(&spec);
    let generated_in = started.elapsed();
    let bytes: usize = files.iter().map(|f| f.text.len()).sum();
    let lines: usize = files.iter().map(|f| f.text.lines().count()).sum();
    let sources = SourceSet::new(files.clone());

    // The generated policy must be clean, or the benchmark measures error paths.
    let checked = check(&sources, Vec::new());
    assert!(
        checked.diagnostics.is_empty(),
        "the generated policy has {} diagnostics; the first: {:?}",
        checked.diagnostics.len(),
        checked.diagnostics.first()
    );
    let queues = checked.policy.as_ref().map_or(0, |p| p.queues.len());
    assert_eq!(queues, spec.queues);

    let keep = std::env::var_os("KAI_BENCH_KEEP");
    let temp = tempfile::tempdir().expect("a temporary folder");
    let dir = keep
        .as_deref()
        .map_or(temp.path(), Path::new)
        .join("policies");
    for f in &files {
        let path = dir.join(&f.path);
        std::fs::create_dir_all(path.parent().expect("files live in a folder")).expect("mkdir");
        std::fs::write(&path, &f.text).expect("write a policy file");
    }

    let case = |f: &mut dyn FnMut()| time(WARM_UP, iters, f);
    let rows: [(&str, Stats); 4] = [
        (
            "check (in memory)",
            case(&mut || drop(check(&sources, Vec::new()))),
        ),
        (
            "  kdl parse only (all files)",
            case(&mut || {
                for f in &files {
                    drop(f.text.parse::<kdl::KdlDocument>());
                }
            }),
        ),
        (
            "load_dir only (no check)",
            case(&mut || drop(load_dir(&dir).expect("the policy folder loads"))),
        ),
        (
            "load_dir + check (from disk)",
            case(&mut || {
                let (set, early) = load_dir(&dir).expect("the policy folder loads");
                drop(check(&set, early));
            }),
        ),
    ];

    println!(
        "kai-policy check benchmark: {} queues, {} levels, {} files, {} lines, {:.2} MB of KDL (generated in {:.0} ms)",
        spec.queues,
        spec.levels,
        spec.files,
        lines,
        bytes as f64 / 1e6,
        generated_in.as_secs_f64() * 1e3
    );
    println!(
        "{} warm-up + {iters} timed iterations per case; policy written to {}",
        WARM_UP,
        dir.display()
    );
    println!();
    println!(
        "{:<32} {:>6} {:>10} {:>10} {:>10}",
        "case", "iters", "min ms", "median ms", "mean ms"
    );
    for (name, stats) in &rows {
        println!(
            "{name:<32} {iters:>6} {:>10.1} {:>10.1} {:>10.1}",
            stats.min, stats.median, stats.mean
        );
    }
    println!();
    for (what, stats) in [("check", &rows[0].1), ("load_dir + check", &rows[3].1)] {
        let verdict = if stats.median < GOAL_MS {
            "meets"
        } else {
            "MISSES"
        };
        println!(
            "{what}: median {:.1} ms {verdict} the goal of {GOAL_MS:.0} ms",
            stats.median
        );
    }
}
