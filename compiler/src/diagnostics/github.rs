//! The `github` format: GitHub Actions workflow commands, which annotate the pull request diff.

use super::{Diagnostic, Location, Severity};
use crate::source::SourceSet;

/// Renders one `::error …::message` (or `::warning`) line per diagnostic, and one more for each
/// other file its related places are in, so every file a diagnostic names is annotated (the team file a pull request
/// changed, not only the department's file the rule reports on).
pub fn render_github(diagnostics: &[Diagnostic], sources: &SourceSet) -> String {
    let diagnostics = &super::printable(diagnostics);
    let mut out = String::new();
    for d in diagnostics {
        let at = Location::of(&d.primary, sources);
        let command = match d.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
        };
        let mut message = d.message.clone();
        if let Some(help) = &d.help {
            message.push_str("\nhelp: ");
            message.push_str(help);
        }
        annotate(&mut out, command, &at, d.code.id(), &message);
        let mut annotated = vec![d.primary.file];
        for related in &d.secondary {
            // One more annotation per other file; places in an annotated file are in its text.
            if annotated.contains(&related.file) {
                continue;
            }
            annotated.push(related.file);
            let here = Location::of(related, sources);
            let what = related.text.as_deref().unwrap_or("related");
            let text = format!(
                "{what}: {} (reported at {}:{})",
                d.message, at.file, at.line
            );
            let title = format!("{} (related)", d.code.id());
            annotate(&mut out, command, &here, &title, &text);
        }
    }
    out
}

fn annotate(out: &mut String, command: &str, at: &Location, title: &str, message: &str) {
    out.push_str(&format!(
        "::{command} file={},line={},col={},endLine={},endColumn={},title={}::{}\n",
        escape_property(&at.file),
        at.line,
        at.column,
        at.end_line,
        at.end_column,
        escape_property(title),
        escape_data(message),
    ));
}

// The runner's own escaping rules: data escapes %, CR and LF; properties also `:` and `,`.
fn escape_data(s: &str) -> String {
    s.replace('%', "%25")
        .replace('\r', "%0D")
        .replace('\n', "%0A")
}

fn escape_property(s: &str) -> String {
    escape_data(s).replace(':', "%3A").replace(',', "%2C")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_and_paths_are_escaped_the_way_the_runner_reads_them() {
        assert_eq!(escape_data("50%\nnext"), "50%25%0Anext");
        assert_eq!(escape_property("a,b:c.kdl"), "a%2Cb%3Ac.kdl");
    }
}
