//! The `sarif` format: SARIF 2.1.0, for code-scanning upload.

use serde_json::{Value, json};

use super::{Code, Diagnostic, Label, Location};
use crate::source::SourceSet;

/// Renders a SARIF 2.1.0 log with one run, every rule described and one result per diagnostic.
pub fn render_sarif(diagnostics: &[Diagnostic], sources: &SourceSet) -> String {
    let diagnostics = &super::printable(diagnostics);
    let rules: Vec<Value> = Code::ALL
        .iter()
        .map(|c| {
            json!({
                "id": c.id(),
                "name": c.slug(),
                "shortDescription": { "text": c.summary() },
                "fullDescription": { "text": format!("{} See docs/diagnostics.md#{} in the kai-policy repository.", c.summary(), c.id().to_lowercase()) },
            })
        })
        .collect();
    let results: Vec<Value> = diagnostics
        .iter()
        .map(|d| {
            let mut text = d.message.clone();
            if let Some(help) = &d.help {
                text.push_str("\nhelp: ");
                text.push_str(help);
            }
            let rule_index = Code::ALL.iter().position(|c| *c == d.code).unwrap_or(0);
            json!({
                "ruleId": d.code.id(),
                "ruleIndex": rule_index,
                "level": d.severity.as_str(),
                "message": { "text": text },
                "locations": [location(&d.primary, sources)],
                "relatedLocations": d.secondary.iter().enumerate().map(|(i, l)| {
                    let mut loc = location(l, sources);
                    loc["id"] = json!(i);
                    if let Some(t) = &l.text { loc["message"] = json!({ "text": t }); }
                    loc
                }).collect::<Vec<_>>(),
            })
        })
        .collect();
    let log = json!({
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{
            "tool": { "driver": {
                "name": "kai-policy",
                "version": env!("CARGO_PKG_VERSION"),
                "rules": rules,
            }},
            "results": results,
        }],
    });
    let mut out = serde_json::to_string_pretty(&log).unwrap_or_default();
    out.push('\n');
    out
}

fn location(label: &Label, sources: &SourceSet) -> Value {
    let at = Location::of(label, sources);
    json!({
        "physicalLocation": {
            "artifactLocation": { "uri": at.file },
            "region": {
                "startLine": at.line,
                "startColumn": at.column,
                "endLine": at.end_line,
                "endColumn": at.end_column
            }
        }
    })
}
