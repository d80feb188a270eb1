//! `kai-policy import FILE...`: existing KAI Queue objects as a KDL policy on stdout.

use std::io::Read;
use std::path::PathBuf;

use super::{CliError, EXIT_FAILURE, EXIT_OK, print_stdout};
use crate::check;
use crate::diagnostics::{self, HumanStyle, Summary, escape_controls};
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
/// left out) and what `check` says about the result to stderr. 0 the policy was printed (also
/// when `check` finds errors in it: cli.md allows `import` only 0 and 2); 2 the input cannot be
/// imported.
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
            // Notes and errors quote the input's names, which may hold terminal controls.
            for note in &imported.notes {
                eprintln!("note: {}", escape_controls(note));
            }
            print_stdout(&imported.kdl);
            verdict(&imported.kdl);
            Ok(EXIT_OK)
        }
        Err(errors) => {
            for e in &errors {
                eprintln!("error: {}", escape_controls(&e.to_string()));
            }
            Ok(EXIT_FAILURE)
        }
    }
}

/// Checks the imported policy as `check` would: its diagnostics go to stderr (lines are those of
/// the policy on stdout), and an error is said loudly, so a policy that would not pass `check`
/// never looks ready to use; the import itself worked, though (exit 0).
fn verdict(kdl: &str) {
    let sources = SourceSet::new(vec![SourceFile::new(IMPORTED, kdl)]);
    let checked = check::check(&sources, Vec::new());
    if checked.diagnostics.is_empty() {
        return;
    }
    eprint!(
        "{}",
        diagnostics::render_human(&checked.diagnostics, &sources, HumanStyle::Plain)
    );
    if checked.has_errors() {
        let errors = Summary::of(&checked.diagnostics).errors;
        let plural = if errors == 1 { "error" } else { "errors" };
        eprintln!(
            "note: the imported policy does not pass `check` ({errors} {plural} above, in the policy printed on stdout and named {IMPORTED}): fix them before you use it; `kai-policy check` and `build` reject it until then"
        );
    } else {
        eprintln!("note: `check` passes the imported policy with the warnings above");
    }
}

/// How diagnostics name the policy `import` prints.
const IMPORTED: &str = "<imported policy>";
