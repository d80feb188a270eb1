//! How long the checker takes on a large policy: 10,000 queues in 4 levels across 200 files
//! (the default [`GenerateSpec`]), in memory and end to end from disk as the CLI reads it.
//!
//! `cargo bench -p kai-policy-compiler --bench check` prints a plain-text table. Knobs:
//! `KAI_BENCH_ITERS` (timed iterations per case, default 30), `KAI_BENCH_QUEUES`,
//! `KAI_BENCH_FILES`, `KAI_BENCH_LEVELS` (the shape) and `KAI_BENCH_KEEP=DIR` (write the
//! generated policy to DIR and keep it, instead of a temporary folder).

use std::hint::black_box;
use std::path::Path;
use std::time::{Duration, Instant};

use kai_policy_compiler::check::check;
use kai_policy_compiler::generate::{GenerateSpec, generate};
use kai_policy_compiler::source::{SourceSet, load_dir};

/// The goal the checker is measured against, in milliseconds.
const GOAL_MS: f64 = 500.0;
const WARM_UP: usize = 3;

fn env_usize(name: &str, default: usize) -> usize {
    match std::env::var(name) {
        Ok(v) => v
            .parse()
            .unwrap_or_else(|_| panic!("{name} must be a whole number, not {v:?}")),
        Err(_) => default,
    }
}

struct Row {
    name: &'static str,
    times: Vec<Duration>,
}

impl Row {
    fn ms(&self) -> (f64, f64, f64) {
        let mut ms: Vec<f64> = self.times.iter().map(|t| t.as_secs_f64() * 1e3).collect();
        ms.sort_by(f64::total_cmp);
        let median = if ms.len() % 2 == 1 {
            ms[ms.len() / 2]
        } else {
            (ms[ms.len() / 2 - 1] + ms[ms.len() / 2]) / 2.0
        };
        let mean = ms.iter().sum::<f64>() / ms.len() as f64;
        (ms[0], median, mean)
    }
}

/// Runs `f` `WARM_UP` times untimed, then `iters` times timed.
fn time<T>(name: &'static str, iters: usize, mut f: impl FnMut() -> T) -> Row {
    for _ in 0..WARM_UP {
        black_box(f());
    }
    let times = (0..iters)
        .map(|_| {
            let start = Instant::now();
            black_box(f());
            start.elapsed()
        })
        .collect();
    Row { name, times }
}

fn main() {
    let defaults = GenerateSpec::default();
    let spec = GenerateSpec::with_shape(
        env_usize("KAI_BENCH_QUEUES", defaults.queues),
        env_usize("KAI_BENCH_FILES", defaults.files),
        env_usize("KAI_BENCH_LEVELS", defaults.levels),
    );
    let iters = env_usize("KAI_BENCH_ITERS", 30).max(1);

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

    let mut rows = Vec::new();
    rows.push(time("check (in memory)", iters, || {
        check(&sources, Vec::new())
    }));
    rows.push(time("  kdl parse only (all files)", iters, || {
        files
            .iter()
            .map(|f| f.text.parse::<kdl::KdlDocument>().map(|d| d.nodes().len()))
            .collect::<Vec<_>>()
    }));
    rows.push(time("load_dir only (no check)", iters, || {
        load_dir(&dir).expect("the policy folder loads")
    }));
    rows.push(time("load_dir + check (from disk)", iters, || {
        let (set, early) = load_dir(&dir).expect("the policy folder loads");
        check(&set, early)
    }));

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
    for row in &rows {
        let (min, median, mean) = row.ms();
        println!(
            "{:<32} {:>6} {:>10.1} {:>10.1} {:>10.1}",
            row.name,
            row.times.len(),
            min,
            median,
            mean
        );
    }
    let (_, check_median, _) = rows[0].ms();
    let (_, e2e_median, _) = rows[3].ms();
    println!();
    for (what, median) in [("check", check_median), ("load_dir + check", e2e_median)] {
        let verdict = if median < GOAL_MS { "meets" } else { "MISSES" };
        println!("{what}: median {median:.1} ms {verdict} the goal of {GOAL_MS:.0} ms");
    }
}
