//! `kai-policy diff --base REV [--head REV] [DIR]`: preview what a policy change does.

use std::path::{Path, PathBuf};

use super::{
    CannotRun, CliError, EXIT_FAILURE, EXIT_OK, EXIT_PROBLEMS, Format, ReportFormat,
    markdown_failure, print_stdout, render, report_cannot_run, with_failure,
};
use crate::diagnostics::{self, Diagnostic, HumanStyle};
use crate::diff::{self, PolicyDiff, Side};
use crate::explain;
use crate::fairshare::Demand;
use crate::git::RevisionError;
use crate::model::Policy;
use crate::scenario::Scenario;
use crate::source::{self, SourceFile, SourceSet};

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

/// The markdown headline of a run that could not preview the change.
const NOT_PREVIEWED: &str = "this change could not be previewed";

/// Why `diff` previews nothing (exit 2).
enum Failure {
    /// A revision, the policy folder or the scenario could not be read.
    CannotRun(CannotRun),
    /// The policy at a revision has errors.
    DoesNotCompile {
        label: String,
        sources: SourceSet,
        diagnostics: Vec<Diagnostic>,
    },
}

impl From<CannotRun> for Failure {
    fn from(failure: CannotRun) -> Self {
        Failure::CannotRun(failure)
    }
}

/// Runs `diff`: 0 no change, 1 changes, 2 error (including a revision that does not compile).
/// A failure prints in the chosen format too, so `--format json` always prints one document.
pub fn run(args: &DiffArgs) -> Result<u8, CliError> {
    let report = match preview(args) {
        Ok(report) => report,
        Err(Failure::CannotRun(failure)) => {
            return Ok(report_cannot_run(args.format, NOT_PREVIEWED, &failure));
        }
        Err(Failure::DoesNotCompile {
            label,
            sources,
            diagnostics,
        }) => {
            let headline =
                format!("the policy at {label} does not compile, so it cannot be previewed");
            let plain = diagnostics::render_human(&diagnostics, &sources, HumanStyle::Plain);
            eprint!("error: {headline}:\n\n{plain}");
            match args.format {
                ReportFormat::Human => {}
                ReportFormat::Json => {
                    // The KP0000 says which revision the diagnostics are of, and why exit 2.
                    let (sources, all) = with_failure(
                        sources,
                        diagnostics,
                        &args.dir,
                        headline,
                        "fix the errors above in the policy at that revision; nothing was compared",
                    );
                    print_stdout(&render(Format::Json, &all, &sources));
                }
                ReportFormat::Markdown => print_stdout(&markdown_failure(&headline, &plain)),
            }
            return Ok(EXIT_FAILURE);
        }
    };
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

/// Compiles both revisions and compares them.
fn preview(args: &DiffArgs) -> Result<PolicyDiff, Failure> {
    let cache = crate::check::ParseCache::default();
    let base = revision(&args.dir, Some(&args.base), &cache, true)?;
    let head = revision(&args.dir, args.head.as_deref(), &cache, false)?;
    let scenario = match &args.scenario {
        None => None,
        Some(path) => Some(super::explain::read_scenario(path)?),
    };
    let (base_demand, head_demand) = match (demand(&base.0, &scenario), demand(&head.0, &scenario))
    {
        (Ok(b), Ok(h)) => (b, h),
        (b, h) => {
            let errors: Vec<_> = b.err().into_iter().chain(h.err()).flatten().collect();
            let text = scenario.as_ref().map_or("", |(_, text, _)| text.as_str());
            return Err(super::explain::scenario_failure(text, &errors).into());
        }
    };
    diff::compare(
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
    )
    .map_err(|e| CannotRun::of_error(&args.dir, &CliError::Render(e)).into())
}

/// The checked policy at a revision (`None`: the working tree) and its label, or why it cannot
/// be previewed.
fn revision(
    dir: &Path,
    rev: Option<&str>,
    cache: &crate::check::ParseCache,
    is_base: bool,
) -> Result<(Policy, String), Failure> {
    let folder = source::display_path(dir);
    let (sources, early, label): (SourceSet, _, String) = match rev {
        Some(rev) => match crate::git::sources_at(dir, rev) {
            Ok((sources, early, commit)) => (
                sources,
                early,
                format!("{rev} ({})", &commit[..commit.len().min(12)]),
            ),
            // The change that adds the policy folder: every queue is new, which is what its
            // pull request should preview, not an error.
            Err(RevisionError::NoPolicy { .. }) if is_base => {
                eprintln!(
                    "note: {folder} does not exist at `{rev}`: compared with an empty policy, so \
                     every queue is added"
                );
                let empty = SourceSet::new(vec![SourceFile::new(folder.clone(), "")]);
                (empty, Vec::new(), format!("{rev} (no {folder})"))
            }
            Err(e) => {
                let mut failure = CannotRun::default();
                failure.add(&folder, e.to_string(), revision_help(&e));
                return Err(failure.into());
            }
        },
        None => {
            let (sources, early) =
                source::load_dir(dir).map_err(|e| CannotRun::of_error(dir, &e.into()))?;
            (sources, early, "working tree".to_string())
        }
    };
    if sources.is_empty() {
        let mut failure = CannotRun::default();
        failure.add(
            &folder,
            format!("no *.kdl policy files under {} at {label}", dir.display()),
            "give the policy folder (default `policies`) as it is named at that revision",
        );
        return Err(failure.into());
    }
    let checked = crate::check::check_with(&sources, early, cache);
    match checked.policy {
        Some(policy) => Ok((policy, label)),
        None => Err(Failure::DoesNotCompile {
            label,
            sources,
            diagnostics: checked.diagnostics,
        }),
    }
}

/// How to fix a revision that cannot be read.
fn revision_help(e: &RevisionError) -> &'static str {
    match e {
        RevisionError::NotARepository(_) => {
            "run `diff` inside the Git repository that holds the policy, or give the policy \
             folder's path inside it"
        }
        RevisionError::UnknownRevision { .. } => {
            "check the branch, tag or commit name; a branch of a remote may need `git fetch` first"
        }
        RevisionError::NoPolicy { .. } => "give the policy folder as it is named at that revision",
        RevisionError::Git { .. } => "check the repository (`git fsck`) and its permissions",
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
