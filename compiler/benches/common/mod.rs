//! What the compiler's benchmarks share: the allocator the `kai-policy` binary uses, the
//! benchmark policy's shape from `KAI_BENCH_*`, and timing.

use std::hint::black_box;
use std::time::{Duration, Instant};

use kai_policy_compiler::generate::GenerateSpec;

// Measure what users run: the binary's allocator, not the system's.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// A whole number from the environment, or `default` when it is not set.
pub fn env_usize(name: &str, default: usize) -> usize {
    match std::env::var(name) {
        Ok(v) => v
            .parse()
            .unwrap_or_else(|_| panic!("{name} must be a whole number, not {v:?}")),
        Err(_) => default,
    }
}

/// The generated policy's shape: the default (10,000 queues, 4 levels, 200 files) unless
/// `KAI_BENCH_QUEUES`, `KAI_BENCH_FILES` or `KAI_BENCH_LEVELS` say otherwise.
pub fn spec_from_env() -> GenerateSpec {
    let defaults = GenerateSpec::default();
    GenerateSpec::with_shape(
        env_usize("KAI_BENCH_QUEUES", defaults.queues),
        env_usize("KAI_BENCH_FILES", defaults.files),
        env_usize("KAI_BENCH_LEVELS", defaults.levels),
    )
}

/// Timed iterations per case: `KAI_BENCH_ITERS`, or `default`.
pub fn iters_from_env(default: usize) -> usize {
    env_usize("KAI_BENCH_ITERS", default).max(1)
}

/// Minimum, median and mean of a case, in milliseconds.
pub struct Stats {
    pub min: f64,
    pub median: f64,
    pub mean: f64,
}

/// Runs `f` `warm_up` times untimed, then `iters` times timed.
pub fn time<T>(warm_up: usize, iters: usize, mut f: impl FnMut() -> T) -> Stats {
    for _ in 0..warm_up {
        black_box(f());
    }
    let mut ms: Vec<f64> = (0..iters.max(1))
        .map(|_| {
            let start = Instant::now();
            black_box(f());
            millis(start.elapsed())
        })
        .collect();
    ms.sort_by(f64::total_cmp);
    let mid = ms.len() / 2;
    let median = if ms.len() % 2 == 1 {
        ms[mid]
    } else {
        (ms[mid - 1] + ms[mid]) / 2.0
    };
    Stats {
        min: ms[0],
        median,
        mean: ms.iter().sum::<f64>() / ms.len() as f64,
    }
}

fn millis(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}
