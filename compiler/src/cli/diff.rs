//! `kai-policy diff --base REV [--head REV] [DIR]`: preview what a policy change does.

use std::path::{Path, PathBuf};

use super::{CliError, EXIT_FAILURE, EXIT_OK, EXIT_PROBLEMS, ReportFormat, print_stdout};
use crate::diagnostics::{self, HumanStyle};
use crate::diff::{self, Side};
use crate::explain;
use crate::fairshare::Demand;
use crate::model::Policy;
use crate::scenario::Scenario;
use crate::source::{self, SourceSet};

/// Arguments of `diff`.
#[derive(Debug, clap::Args)]
pub struct DiffArgs {
    /// The policy folder (inside a Git repository).
    #[arg(default_value = "policies")]
    dir: PathBuf,
    /// The revision to compare against (a branch, tag or commit).
    #[arg(long)]
    base: String,
    /// The revision to preview; default: the working tree.
    #[arg(long)]
    head: Option<String>,
    /// Scenario file for fair shares; default: the declared capacity with every leaf asking for all of it.
    #[arg(long)]
    scenario: Option<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = ReportFormat::Human)]
    format: ReportFormat,
}

/// Runs `diff`: 0 no change, 1 changes, 2 error (including a revision that does not compile).
pub fn run(args: &DiffArgs) -> Result<u8, CliError> {
    let cache = crate::check::ParseCache::default();
    let base = match revision(&args.dir, Some(&args.base), &cache)? {
        Ok(policy) => policy,
        Err(status) => return Ok(status),
    };
    let head = match revision(&args.dir, args.head.as_deref(), &cache)? {
        Ok(policy) => policy,
        Err(status) => return Ok(status),
    };
    let scenario = match &args.scenario {
        None => None,
        Some(path) => {
            let text = std::fs::read_to_string(path).map_err(|source| CliError::Read {
                path: path.clone(),
                source,
            })?;
            match explain::parse_scenario(&path.display().to_string(), &text) {
                Ok(s) => Some((path.display().to_string(), text, s)),
                Err(e) => {
                    eprintln!("error: {e}");
                    return Ok(EXIT_FAILURE);
                }
            }
        }
    };
    let (base_demand, head_demand) = match (demand(&base.0, &scenario), demand(&head.0, &scenario))
    {
        (Ok(b), Ok(h)) => (b, h),
        (b, h) => {
            for e in b.err().into_iter().chain(h.err()).flatten() {
                eprintln!("error: {e}");
            }
            return Ok(EXIT_FAILURE);
        }
    };
    let report = diff::compare(
        &Side {
            policy: &base.0,
            demand: &base_demand,
            label: base.1,
        },
        &Side {
            policy: &head.0,
            demand: &head_demand,
            label: head.1,
        },
    )?;
    print_stdout(&match args.format {
        ReportFormat::Human => diff::render_human(&report),
        ReportFormat::Markdown => diff::render_markdown(&report),
        ReportFormat::Json => diff::render_json(&report),
    });
    Ok(if report.is_empty() {
        EXIT_OK
    } else {
        EXIT_PROBLEMS
    })
}

/// The checked policy at a revision (`None`: the working tree) and its label, or the exit status
/// after reporting why it cannot be previewed.
fn revision(
    dir: &Path,
    rev: Option<&str>,
    cache: &crate::check::ParseCache,
) -> Result<Result<(Policy, String), u8>, CliError> {
    let (sources, early, label): (SourceSet, _, String) = match rev {
        Some(rev) => match crate::git::sources_at(dir, rev) {
            Ok((sources, early, commit)) => (
                sources,
                early,
                format!("{rev} ({})", &commit[..commit.len().min(12)]),
            ),
            Err(e) => {
                eprintln!("error: {e}");
                return Ok(Err(EXIT_FAILURE));
            }
        },
        None => {
            let (sources, early) = source::load_dir(dir)?;
            (sources, early, "working tree".to_string())
        }
    };
    if sources.is_empty() {
        eprintln!(
            "error: no *.kdl policy files under {} at {label}",
            dir.display()
        );
        return Ok(Err(EXIT_FAILURE));
    }
    let checked = crate::check::check_with(&sources, early, cache);
    match checked.policy {
        Some(policy) => Ok(Ok((policy, label))),
        None => {
            eprintln!(
                "error: the policy at {label} does not compile, so it cannot be previewed:\n"
            );
            eprint!(
                "{}",
                diagnostics::render_human(&checked.diagnostics, &sources, HumanStyle::Plain)
            );
            Ok(Err(EXIT_FAILURE))
        }
    }
}

/// The demand for one side: the scenario (its queues that this side has), or everyone busy.
fn demand(
    policy: &Policy,
    scenario: &Option<(String, String, Scenario)>,
) -> Result<Demand, Vec<explain::ScenarioError>> {
    match scenario {
        None => Ok(explain::busy_demand(policy)),
        Some((file, text, scenario)) => {
            // A queue added or removed by the change exists on one side only.
            let mut own = scenario.clone();
            own.demand.retain(|name, _| policy.queue(name).is_some());
            own.usage.retain(|name, _| policy.queue(name).is_some());
            explain::demand_from_scenario(policy, &own, file, text)
        }
    }
}
