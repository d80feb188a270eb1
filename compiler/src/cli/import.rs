//! `kai-policy import FILE...`: existing KAI Queue objects as a KDL policy on stdout.

use std::io::Read;
use std::path::PathBuf;

use super::{CliError, EXIT_FAILURE, EXIT_OK, print_stdout};
use crate::import;

/// Arguments of `import`.
#[derive(Debug, clap::Args)]
pub struct ImportArgs {
    /// YAML files of Queue objects, as `kubectl get queues -o yaml` prints them (a `List` or a
    /// multi-document stream); `-` reads standard input.
    #[arg(required = true)]
    files: Vec<PathBuf>,
}

/// Runs `import`: the policy goes to stdout, notes (skipped objects, rounded amounts) to stderr.
pub fn run(args: &ImportArgs) -> Result<u8, CliError> {
    let mut inputs = Vec::new();
    for path in &args.files {
        let read = |path: &PathBuf| -> std::io::Result<String> {
            if path.as_os_str() == "-" {
                let mut text = String::new();
                std::io::stdin().read_to_string(&mut text)?;
                Ok(text)
            } else {
                std::fs::read_to_string(path)
            }
        };
        let text = read(path).map_err(|source| CliError::Read {
            path: path.clone(),
            source,
        })?;
        inputs.push((path.display().to_string(), text));
    }
    let inputs: Vec<(&str, &str)> = inputs
        .iter()
        .map(|(name, text)| (name.as_str(), text.as_str()))
        .collect();
    match import::import(&inputs) {
        Ok(imported) => {
            for note in &imported.notes {
                eprintln!("note: {note}");
            }
            print_stdout(&imported.kdl);
            Ok(EXIT_OK)
        }
        Err(e) => {
            eprintln!("error: {e}");
            Ok(EXIT_FAILURE)
        }
    }
}
