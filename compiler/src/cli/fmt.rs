//! `kai-policy fmt [DIR] [--check]`: rewrites policy files in the canonical layout.

use std::path::PathBuf;

use super::{CliError, EXIT_FAILURE, EXIT_OK, EXIT_PROBLEMS, human_style, output, print_stdout};
use crate::diagnostics;
use crate::format::{self, FormatError};
use crate::source;

/// Arguments of `fmt`.
#[derive(Debug, clap::Args)]
pub struct FmtArgs {
    /// The policy folder (or one .kdl file).
    #[arg(default_value = "policies")]
    dir: PathBuf,
    /// Change nothing: list the files that are not in the canonical layout, and exit 1 if any.
    #[arg(long)]
    check: bool,
}

/// Runs `fmt`: every file is formatted first, and files are written only when all of them
/// could be read, so a syntax error anywhere leaves every file untouched.
pub fn run(args: &FmtArgs) -> Result<u8, CliError> {
    let (sources, mut problems) = source::load_dir(&args.dir)?;
    let mut changed = Vec::new();
    let mut internal = Vec::new();
    for (id, file) in sources.iter() {
        // A file over the size limit or not UTF-8 was not read whole: never rewrite it.
        if problems.iter().any(|d| d.primary.file == id) {
            continue;
        }
        match format::format_file(id, &file.text) {
            Ok(text) if text != file.text => changed.push((file.path.as_str(), text)),
            Ok(_) => {}
            Err(FormatError::Syntax(found)) => problems.extend(found),
            Err(e @ FormatError::Unstable(_)) => internal.push(format!("{}: {e}", file.path)),
        }
    }
    diagnostics::sort(&mut problems);
    let (errors, notes): (Vec<_>, Vec<_>) = problems.into_iter().partition(|d| d.is_error());
    if !notes.is_empty() {
        // A path the walk skipped: said, but it does not stop the files that were read.
        eprint!(
            "{}",
            diagnostics::render_human(&notes, &sources, human_style())
        );
    }
    let problems = errors;
    if !problems.is_empty() {
        print_stdout(&diagnostics::render_human(
            &problems,
            &sources,
            human_style(),
        ));
        eprintln!("no file was written: fix the errors above first");
        return Ok(EXIT_PROBLEMS);
    }
    if !internal.is_empty() {
        for e in internal {
            eprintln!("error: {e}");
        }
        return Ok(EXIT_FAILURE);
    }
    let mut listing = String::new();
    for (path, text) in &changed {
        if !args.check {
            // Through a symbolic link, the file it points to is rewritten; the link stays.
            let target = std::fs::canonicalize(path).unwrap_or_else(|_| PathBuf::from(path));
            output::write_atomically(&target, text.as_bytes())?;
        }
        listing.push_str(path);
        listing.push('\n');
    }
    print_stdout(&listing);
    if args.check && !changed.is_empty() {
        eprintln!(
            "{} file{} not in the canonical layout: run `kai-policy fmt {}`",
            changed.len(),
            if changed.len() == 1 { " is" } else { "s are" },
            args.dir.display()
        );
        return Ok(EXIT_PROBLEMS);
    }
    Ok(EXIT_OK)
}
