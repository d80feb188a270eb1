//! The `github` format: GitHub Actions workflow commands, which annotate the pull request diff.

use super::{Diagnostic, Location, Severity};
use crate::source::SourceSet;

/// Renders one `::error …::message` (or `::warning`) line per diagnostic.
pub fn render_github(diagnostics: &[Diagnostic], sources: &SourceSet) -> String {
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
        out.push_str(&format!(
            "::{command} file={},line={},col={},endLine={},endColumn={},title={}::{}\n",
            escape_property(&at.file),
            at.line,
            at.column,
            at.end_line,
            at.end_column,
            d.code.id(),
            escape_data(&message),
        ));
    }
    out
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
