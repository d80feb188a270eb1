//! kai-policy's compiler: KDL policy files → a checked [`model::Policy`] with every diagnostic →
//! KAI `Queue` objects, `PriorityClass` objects and the compiled scheduler config.
//!
//! Architecture invariant: the checker and the model do no I/O; reading files ([`source`]) and
//! Git ([`git`]) live at the edge, and the binary (`main.rs`) only wires them together.
#![forbid(unsafe_code)]

pub mod check;
pub mod cli;
pub mod diagnostics;
pub mod diff;
pub mod explain;
pub mod fairshare;
pub mod format;
pub mod generate;
pub mod git;
pub mod import;
pub mod lower;
pub mod model;
pub mod quantity;
pub mod scenario;
pub mod source;
pub mod yaml;

/// The JSON Schemas that `schemas/` holds: (file name, pretty JSON with a trailing newline).
pub fn schemas() -> Vec<(&'static str, String)> {
    let render = |schema: schemars::Schema| {
        let mut text = serde_json::to_string_pretty(&schema).unwrap_or_default();
        text.push('\n');
        text
    };
    vec![
        (
            "compiled-policy.schema.json",
            render(schemars::schema_for!(lower::CompiledPolicy)),
        ),
        (
            "scenario.schema.json",
            render(schemars::schema_for!(scenario::Scenario)),
        ),
    ]
}
