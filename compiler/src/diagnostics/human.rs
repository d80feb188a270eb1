//! The `human` format: miette's graphical reports, with source snippets.

use std::fmt;

use miette::{
    GraphicalReportHandler, GraphicalTheme, LabeledSpan, MietteError, MietteSpanContents,
    NamedSource, SourceCode, SourceSpan, SpanContents,
};

use super::{Diagnostic, Label, Severity, Summary};
use crate::source::SourceSet;

/// Whether the human renderer may use colour.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HumanStyle {
    /// ANSI colours and Unicode box drawing (a terminal without `NO_COLOR`).
    Colour,
    /// Unicode box drawing, no colour: pipes, files and snapshot tests.
    Plain,
}

/// Renders every diagnostic as a miette report, then a one-line summary.
pub fn render_human(diagnostics: &[Diagnostic], sources: &SourceSet, style: HumanStyle) -> String {
    let diagnostics = &super::printable(diagnostics);
    let theme = match style {
        HumanStyle::Colour => GraphicalTheme::unicode(),
        HumanStyle::Plain => GraphicalTheme::unicode_nocolor(),
    };
    // Plain output goes to files and CI logs: keep each message on one line so it can be
    // searched for; a terminal gets it wrapped to 100 columns.
    let handler = GraphicalReportHandler::new_themed(theme)
        .with_width(100)
        .with_wrap_lines(style == HumanStyle::Colour)
        .with_links(false);
    let mut out = String::new();
    for d in diagnostics {
        let report = Report::new(d, sources);
        if handler.render_report(&mut out, &report).is_err() {
            out.push_str(&format!("{}: {}\n", d.code.id(), d.message));
        }
        out.push('\n');
    }
    out.push_str(&summary_line(Summary::of(diagnostics)));
    out.push('\n');
    out
}

/// "2 errors, 1 warning" or "no problems found".
pub fn summary_line(summary: Summary) -> String {
    let plural = |n: usize, word: &str| format!("{n} {word}{}", if n == 1 { "" } else { "s" });
    match (summary.errors, summary.warnings) {
        (0, 0) => "no problems found".to_string(),
        (e, w) => format!("{}, {}", plural(e, "error"), plural(w, "warning")),
    }
}

/// A diagnostic seen through miette's trait: the labels of one file, with the other files'
/// labels as related reports so each snippet shows its own source.
#[derive(Debug)]
struct Report {
    code: &'static str,
    severity: miette::Severity,
    message: String,
    help: Option<String>,
    source: NamedSource<CharColumns>,
    labels: Vec<LabeledSpan>,
    related: Vec<Report>,
}

impl Report {
    fn new(d: &Diagnostic, sources: &SourceSet) -> Self {
        let severity = match d.severity {
            Severity::Error => miette::Severity::Error,
            Severity::Warning => miette::Severity::Warning,
        };
        let (same, other): (Vec<&Label>, Vec<&Label>) =
            d.secondary.iter().partition(|l| l.file == d.primary.file);
        let mut labels = vec![labeled(&d.primary, true)];
        labels.extend(same.into_iter().map(|l| labeled(l, false)));
        let related = other
            .into_iter()
            .map(|l| Report {
                code: d.code.id(),
                severity: miette::Severity::Advice,
                message: l.text.clone().unwrap_or_else(|| "related".to_string()),
                help: None,
                source: named(sources, l),
                labels: vec![labeled(l, true)],
                related: Vec::new(),
            })
            .collect();
        Report {
            code: d.code.id(),
            severity,
            message: d.message.clone(),
            help: d.help.clone(),
            source: named(sources, &d.primary),
            labels,
            related,
        }
    }
}

fn named(sources: &SourceSet, label: &Label) -> NamedSource<CharColumns> {
    let file = sources.get(label.file);
    let mut text = super::mask_controls(&file.text).into_owned();
    // miette draws nothing for a point at the very end of the text (an unclosed block, the
    // first byte that is not UTF-8): give it a column to stand on.
    if label.offset >= text.len() {
        text.push(' ');
    }
    NamedSource::new(super::escape_controls(&file.path), CharColumns(text))
}

/// Source text whose spans report their column in characters. miette counts the column of a
/// report's `file:line:column` header in bytes, but the json, github and sarif formats, editors
/// and GitHub count characters: after `"日本語"` the two differ, and every format must agree.
#[derive(Debug)]
struct CharColumns(String);

impl SourceCode for CharColumns {
    fn read_span<'a>(
        &'a self,
        span: &SourceSpan,
        context_lines_before: usize,
        context_lines_after: usize,
    ) -> Result<Box<dyn SpanContents<'a> + 'a>, MietteError> {
        let contents = self
            .0
            .read_span(span, context_lines_before, context_lines_after)?;
        // With context lines the contents start at a line's start (column 0 either way); only
        // a bare span, as read for the header, starts inside a line.
        let offset = span.offset().min(self.0.len());
        let Some(before) = self.0.get(..offset).filter(|_| context_lines_before == 0) else {
            return Ok(contents);
        };
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        let column = before[line_start..].chars().count();
        Ok(Box::new(MietteSpanContents::new(
            contents.data(),
            *contents.span(),
            contents.line(),
            column,
            contents.line_count(),
        )))
    }
}

fn labeled(label: &Label, primary: bool) -> LabeledSpan {
    let span = SourceSpan::new(label.offset.into(), label.len);
    if primary {
        LabeledSpan::new_primary_with_span(label.text.clone(), span)
    } else {
        LabeledSpan::new_with_span(label.text.clone(), span)
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Report {}

impl miette::Diagnostic for Report {
    fn code<'a>(&'a self) -> Option<Box<dyn fmt::Display + 'a>> {
        Some(Box::new(self.code))
    }

    fn severity(&self) -> Option<miette::Severity> {
        Some(self.severity)
    }

    fn help<'a>(&'a self) -> Option<Box<dyn fmt::Display + 'a>> {
        self.help
            .as_ref()
            .map(|h| Box::new(h) as Box<dyn fmt::Display>)
    }

    fn source_code(&self) -> Option<&dyn miette::SourceCode> {
        Some(&self.source)
    }

    fn labels(&self) -> Option<Box<dyn Iterator<Item = LabeledSpan> + '_>> {
        Some(Box::new(self.labels.iter().cloned()))
    }

    fn related<'a>(&'a self) -> Option<Box<dyn Iterator<Item = &'a dyn miette::Diagnostic> + 'a>> {
        if self.related.is_empty() {
            return None;
        }
        Some(Box::new(
            self.related.iter().map(|r| r as &dyn miette::Diagnostic),
        ))
    }
}
