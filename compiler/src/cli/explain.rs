//! `kai-policy explain [DIR] [--scenario FILE]`: every queue's fair share, and why.

use std::path::PathBuf;

use super::{
    CannotRun, EXIT_OK, Format, ReportFormat, load_and_check, markdown_failure, print_stdout,
    render, report_cannot_run, status_of,
};
use crate::diagnostics::{self, HumanStyle};
use crate::explain::{self, Report, ScenarioError};
use crate::fairshare::Demand;
use crate::model::Policy;
use crate::scenario::Scenario;

/// Arguments of `explain`.
#[derive(Debug, clap::Args)]
pub struct ExplainArgs {
    /// The policy folder.
    #[arg(default_value = "policies")]
    dir: PathBuf,
    /// Scenario file (YAML): capacity, per-queue demand and usage. Default: the declared
    /// capacity, with every leaf queue asking for all of it.
    #[arg(long)]
    scenario: Option<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = ReportFormat::Human)]
    format: ReportFormat,
}

/// The markdown headline of a run that could not explain anything.
const NOT_EXPLAINED: &str = "no fair share was computed";

/// Runs `explain`. A failure prints in the chosen format too (the policy's diagnostics, exit 1;
/// or why it could not run, KP0000, exit 2), so `--format json` always prints one document.
pub fn run(args: &ExplainArgs) -> Result<u8, super::CliError> {
    let (sources, checked) = match load_and_check(&args.dir) {
        Ok(loaded) => loaded,
        Err(e) => {
            let failure = CannotRun::of_error(&args.dir, &e);
            return Ok(report_cannot_run(args.format, NOT_EXPLAINED, &failure));
        }
    };
    let Some(policy) = &checked.policy else {
        let diagnostics = &checked.diagnostics;
        eprint!("{}", render(Format::Human, diagnostics, &sources));
        match args.format {
            ReportFormat::Human => {}
            ReportFormat::Json => print_stdout(&render(Format::Json, diagnostics, &sources)),
            ReportFormat::Markdown => print_stdout(&markdown_failure(
                &format!("the policy has errors, so {NOT_EXPLAINED}"),
                &diagnostics::render_human(diagnostics, &sources, HumanStyle::Plain),
            )),
        }
        return Ok(status_of(&checked, false));
    };
    let demand = match demand(policy, args) {
        Ok(demand) => demand,
        Err(failure) => return Ok(report_cannot_run(args.format, NOT_EXPLAINED, &failure)),
    };
    let report = Report::new(policy, &demand);
    print_stdout(&match args.format {
        ReportFormat::Human => explain::render_human(&report),
        ReportFormat::Markdown => explain::render_markdown(&report),
        ReportFormat::Json => explain::render_json(&report),
    });
    Ok(EXIT_OK)
}

/// The demand of the scenario file (or everyone busy), or why the file cannot be used.
fn demand(policy: &Policy, args: &ExplainArgs) -> Result<Demand, CannotRun> {
    let Some(path) = &args.scenario else {
        return Ok(explain::busy_demand(policy));
    };
    let (file, text, scenario) = read_scenario(path)?;
    explain::demand_from_scenario(policy, &scenario, &file, &text)
        .map_err(|errors| scenario_failure(&text, &errors))
}

/// A scenario file's name as shown, its text and what it says, or why it cannot be used.
pub(super) fn read_scenario(
    path: &std::path::Path,
) -> Result<(String, String, Scenario), CannotRun> {
    let text = std::fs::read_to_string(path).map_err(|source| {
        let e = super::CliError::Read {
            path: path.to_path_buf(),
            source,
        };
        CannotRun::of_error(path, &e)
    })?;
    let file = path.display().to_string();
    match explain::parse_scenario(&file, &text) {
        Ok(scenario) => Ok((file, text, scenario)),
        Err(e) => Err(scenario_failure(&text, &[e])),
    }
}

/// Scenario errors as KP0000 failures, each at its line of the scenario file.
pub(super) fn scenario_failure(text: &str, errors: &[ScenarioError]) -> CannotRun {
    let mut failure = CannotRun::default();
    for e in errors {
        failure.add_at_column(
            &e.file,
            text,
            e.line,
            e.column,
            e.to_string(),
            "fix the scenario file (its schema is scenario.schema.json, printed by `kai-policy \
             schema`); the policy itself has no errors",
        );
    }
    failure
}
