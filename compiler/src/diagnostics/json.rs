//! The `json` format: one document that scripts can read (the shape is in `cli.md`).

use serde::Serialize;

use super::{Diagnostic, Location, Summary};
use crate::source::SourceSet;

#[derive(Serialize)]
struct Document<'a> {
    diagnostics: Vec<JsonDiagnostic<'a>>,
    summary: JsonSummary,
}

#[derive(Serialize)]
struct JsonDiagnostic<'a> {
    code: &'static str,
    severity: &'static str,
    message: &'a str,
    help: Option<&'a str>,
    file: String,
    line: usize,
    column: usize,
    span: JsonSpan,
    related: Vec<JsonRelated<'a>>,
}

#[derive(Serialize)]
struct JsonSpan {
    offset: usize,
    length: usize,
}

#[derive(Serialize)]
struct JsonRelated<'a> {
    message: Option<&'a str>,
    file: String,
    line: usize,
    column: usize,
    span: JsonSpan,
}

#[derive(Serialize)]
struct JsonSummary {
    errors: usize,
    warnings: usize,
}

/// Renders the diagnostics as one pretty-printed JSON document.
pub fn render_json(diagnostics: &[Diagnostic], sources: &SourceSet) -> String {
    let diagnostics = &super::printable(diagnostics);
    let summary = Summary::of(diagnostics);
    let doc = Document {
        diagnostics: diagnostics
            .iter()
            .map(|d| {
                let at = Location::of(&d.primary, sources);
                JsonDiagnostic {
                    code: d.code.id(),
                    severity: d.severity.as_str(),
                    message: &d.message,
                    help: d.help.as_deref(),
                    file: at.file,
                    line: at.line,
                    column: at.column,
                    span: JsonSpan {
                        offset: d.primary.offset,
                        length: d.primary.len,
                    },
                    related: d
                        .secondary
                        .iter()
                        .map(|l| {
                            let at = Location::of(l, sources);
                            JsonRelated {
                                message: l.text.as_deref(),
                                file: at.file,
                                line: at.line,
                                column: at.column,
                                span: JsonSpan {
                                    offset: l.offset,
                                    length: l.len,
                                },
                            }
                        })
                        .collect(),
                }
            })
            .collect(),
        summary: JsonSummary {
            errors: summary.errors,
            warnings: summary.warnings,
        },
    };
    let mut out = serde_json::to_string_pretty(&doc).unwrap_or_default();
    out.push('\n');
    out
}
