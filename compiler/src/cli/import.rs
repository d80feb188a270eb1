//! `kai-policy import FILE...`: existing KAI Queue objects as a KDL policy on stdout.

use std::io::Read;
use std::path::PathBuf;

use super::{CliError, EXIT_FAILURE, EXIT_OK, EXIT_PROBLEMS, print_stdout};
use crate::check;
use crate::diagnostics::{self, HumanStyle};
use crate::import;
use crate::source::{SourceFile, SourceSet};

/// Arguments of `import`.
#[derive(Debug, clap::Args)]
pub struct ImportArgs {
    /// YAML files of Queue objects, as `kubectl get queues -o yaml` prints them (a `List` or a
    /// multi-document stream); `-` reads standard input.
    #[arg(required = true)]
    files: Vec<PathBuf>,
}

/// Runs `import`: the policy goes to stdout, notes (skipped objects, rounded amounts, fields
/// left out) and what `check` says about the result to stderr. 0 imported and passes `check`;
/// 1 imported but `check` finds errors; 2 the input cannot be imported.
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
            Ok(verdict(&imported.kdl))
        }
        Err(e) => {
            eprintln!("error: {e}");
            Ok(EXIT_FAILURE)
        }
    }
}

/// Checks the imported policy as `check` would: its diagnostics go to stderr (lines are those of
/// the policy on stdout), and an error makes the import fail, so a policy that would not pass
/// `check` never looks like a success.
fn verdict(kdl: &str) -> u8 {
    let sources = SourceSet::new(vec![SourceFile::new(IMPORTED, kdl)]);
    let checked = check::check(&sources, Vec::new());
    if checked.diagnostics.is_empty() {
        return EXIT_OK;
    }
    eprint!(
        "{}",
        diagnostics::render_human(&checked.diagnostics, &sources, HumanStyle::Plain)
    );
    if checked.has_errors() {
        eprintln!(
            "error: the imported policy (printed on stdout, named {IMPORTED} above) does not pass `check`; fix the errors above in it"
        );
        EXIT_PROBLEMS
    } else {
        eprintln!("note: `check` passes the imported policy with the warnings above");
        EXIT_OK
    }
}

/// How diagnostics name the policy `import` prints.
const IMPORTED: &str = "<imported policy>";
