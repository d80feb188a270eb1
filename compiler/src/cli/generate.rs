//! `kai-policy generate`: writes a large synthetic policy, so anyone can repeat the benchmarks.

use std::path::PathBuf;

use super::output::write_atomically;
use super::{CliError, EXIT_FAILURE, EXIT_OK};
use crate::generate::{GenerateSpec, generate};

/// Arguments of `generate`.
#[derive(Debug, clap::Args)]
pub struct GenerateArgs {
    /// Total number of queues, departments included.
    #[arg(long, default_value_t = 10_000)]
    queues: usize,
    /// Number of files (`cluster.kdl` plus team files).
    #[arg(long, default_value_t = 200)]
    files: usize,
    /// Depth of the queue tree.
    #[arg(long, default_value_t = 4)]
    levels: usize,
    /// Seed for quotas and notations (the shape does not depend on it).
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Folder to write the policy into; it must not exist yet, or be empty.
    #[arg(long)]
    out: PathBuf,
}

/// Runs `generate`.
pub fn run(args: &GenerateArgs) -> Result<u8, CliError> {
    let spec = GenerateSpec {
        seed: args.seed,
        ..GenerateSpec::with_shape(args.queues, args.files, args.levels)
    };
    if let Err(why) = spec.validate() {
        eprintln!("error: cannot generate that policy: {why}");
        return Ok(EXIT_FAILURE);
    }
    let occupied = std::fs::read_dir(&args.out).is_ok_and(|mut entries| entries.next().is_some());
    if occupied {
        eprintln!(
            "error: {} is not empty; generate writes into a new or empty folder",
            args.out.display()
        );
        return Ok(EXIT_FAILURE);
    }
    let files = generate(&spec);
    let bytes: usize = files.iter().map(|f| f.text.len()).sum();
    for file in &files {
        write_atomically(&args.out.join(&file.path), file.text.as_bytes())?;
    }
    eprintln!(
        "wrote {} queues in {} levels across {} files ({bytes} bytes) to {}",
        spec.queues,
        spec.levels,
        files.len(),
        args.out.display()
    );
    Ok(EXIT_OK)
}
