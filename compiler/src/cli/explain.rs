//! `kai-policy explain [DIR] [--scenario FILE]`: every queue's fair share, and why.

use std::path::PathBuf;

use super::{
    CliError, EXIT_FAILURE, EXIT_OK, PolicyArgs, ReportFormat, load_and_check, print_stdout,
    render, status_of,
};
use crate::explain::{self, Report};

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

/// Runs `explain`.
pub fn run(args: &ExplainArgs) -> Result<u8, CliError> {
    let policy_args = PolicyArgs {
        dir: args.dir.clone(),
        format: super::Format::Human,
        deny_warnings: false,
    };
    let (sources, checked) = load_and_check(&policy_args.dir)?;
    let Some(policy) = &checked.policy else {
        eprint!(
            "{}",
            render(super::Format::Human, &checked.diagnostics, &sources)
        );
        return Ok(status_of(&checked, false));
    };
    let demand = match &args.scenario {
        None => explain::busy_demand(policy),
        Some(path) => {
            let text = std::fs::read_to_string(path).map_err(|source| CliError::Read {
                path: path.clone(),
                source,
            })?;
            let file = path.display().to_string();
            let scenario = match explain::parse_scenario(&file, &text) {
                Ok(s) => s,
                Err(e) => {
                    eprintln!("error: {e}");
                    return Ok(EXIT_FAILURE);
                }
            };
            match explain::demand_from_scenario(policy, &scenario, &file, &text) {
                Ok(d) => d,
                Err(errors) => {
                    for e in errors {
                        eprintln!("error: {e}");
                    }
                    return Ok(EXIT_FAILURE);
                }
            }
        }
    };
    let report = Report::new(policy, &demand);
    print_stdout(&match args.format {
        ReportFormat::Human => explain::render_human(&report),
        ReportFormat::Markdown => explain::render_markdown(&report),
        ReportFormat::Json => explain::render_json(&report),
    });
    Ok(EXIT_OK)
}
