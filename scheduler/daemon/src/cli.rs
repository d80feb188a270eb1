//! The `kai-scheduler` command line (edge): clap parses plain arguments, each command runs
//! against the library, and [`run`] maps every outcome to an exit status in one place:
//! 0 ok, 1 the policy has errors (its diagnostics are printed), 2 the command could not run
//! (bad flags, an unreadable policy folder, an unreadable or invalid cluster file).

use std::io::{IsTerminal, Read, Write};
use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};
use k8s_openapi::jiff::Timestamp;
use kai_policy_compiler::check;
use kai_policy_compiler::diagnostics::{self, HumanStyle};
use kai_policy_compiler::source;

use kai_scheduler::bench::{self, BenchArgs, BenchFormat, Scenario};
use kai_scheduler::ingest::{self, Options};
use kai_scheduler::simulate::{self, DEFAULT_CYCLES};

/// Exit statuses: the same contract as kai-policy's (cli.md).
pub use kai_policy_compiler::cli::{EXIT_FAILURE, EXIT_OK, EXIT_PROBLEMS};

/// kai-scheduler: KAI Scheduler's semantics, driven by a kai-policy policy.
#[derive(Debug, Parser)]
#[command(name = "kai-scheduler", version, about)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run scheduling cycles in memory over a cluster file and print every decision.
    Simulate(SimulateArgs),
    /// Generate a synthetic cluster and time scheduling cycles.
    Bench(BenchCli),
}

/// Output formats of `simulate`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// Decisions per cycle and the queue table.
    Human,
    /// One JSON document.
    Json,
}

#[derive(Debug, clap::Args)]
struct SimulateArgs {
    /// The policy folder (or one .kdl file).
    #[arg(long, default_value = "policies")]
    policy: PathBuf,
    /// The cluster file: what `kubectl get nodes,pods,podgroups.scheduling.run.ai -A -o yaml`
    /// prints (`-`: standard input).
    #[arg(long)]
    cluster: PathBuf,
    /// At most this many cycles, one simulated minute apart (fewer when nothing changes).
    #[arg(long, default_value_t = DEFAULT_CYCLES, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    cycles: u32,
    /// When the first cycle runs (RFC 3339) [default: the latest creation or start time in the
    /// cluster file].
    #[arg(long, value_parser = parse_time)]
    now: Option<Timestamp>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Human)]
    format: Format,
}

/// Parses the command line, runs the command, and returns the process exit status.
pub fn run() -> u8 {
    let cli: Cli = match kai_policy_compiler::cli::parse_args() {
        Ok(cli) => cli,
        Err(status) => return status,
    };
    let result = match cli.command {
        Command::Simulate(args) => simulate_command(&args),
        Command::Bench(args) => bench::run(&args.into()).map(|out| {
            print_stdout(&out);
            EXIT_OK
        }),
    };
    match result {
        Ok(status) => status,
        Err(e) => {
            eprintln!("error: {e}");
            EXIT_FAILURE
        }
    }
}

/// `kai-scheduler bench`'s flags (the bench itself, [`BenchArgs`], lives in the library).
#[derive(Debug, clap::Args)]
struct BenchCli {
    /// Nodes, 8 GPUs each [default: 5000; reclaim: 1000].
    #[arg(long)]
    nodes: Option<usize>,
    /// Pending pods [default: 10 per node; reclaim: a gang of 250].
    #[arg(long)]
    pods: Option<usize>,
    /// Queues in a 3-level tree [default: one per 5 nodes, at least 3; reclaim: 100].
    #[arg(long)]
    queues: Option<usize>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Human)]
    format: Format,
    /// Cycles (and first-fit passes) to time; the median is reported.
    #[arg(long, default_value_t = 3)]
    cycles: usize,
    /// Seed of the cluster generator.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// What to time.
    #[arg(long, value_enum, default_value_t = ScenarioArg::Allocate)]
    scenario: ScenarioArg,
}

/// The bench scenarios, as flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum ScenarioArg {
    /// Empty nodes, many pending gangs: the allocate action at scale.
    Allocate,
    /// Full nodes, one pending gang of a starved queue: the reclaim action.
    Reclaim,
}

impl From<BenchCli> for BenchArgs {
    fn from(a: BenchCli) -> Self {
        BenchArgs {
            nodes: a.nodes,
            pods: a.pods,
            queues: a.queues,
            format: match a.format {
                Format::Human => BenchFormat::Human,
                Format::Json => BenchFormat::Json,
            },
            cycles: a.cycles,
            seed: a.seed,
            scenario: match a.scenario {
                ScenarioArg::Allocate => Scenario::Allocate,
                ScenarioArg::Reclaim => Scenario::Reclaim,
            },
        }
    }
}

fn parse_time(text: &str) -> Result<Timestamp, String> {
    text.parse()
        .map_err(|e| format!("not an RFC 3339 time like 2026-11-21T10:00:00Z: {e}"))
}

fn human_style() -> HumanStyle {
    let colour = std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
        && std::io::stderr().is_terminal();
    if colour {
        HumanStyle::Colour
    } else {
        HumanStyle::Plain
    }
}

fn simulate_command(args: &SimulateArgs) -> Result<u8, String> {
    let (sources, early) = source::load_dir(&args.policy).map_err(|e| e.to_string())?;
    let checked = check::check(&sources, early);
    // Diagnostics go to stderr so that stdout stays one JSON document with `--format json`.
    if !checked.diagnostics.is_empty() {
        eprint!(
            "{}",
            diagnostics::render_human(&checked.diagnostics, &sources, human_style())
        );
    }
    let Some(policy) = checked.policy.as_ref().filter(|_| !checked.has_errors()) else {
        return Ok(EXIT_PROBLEMS);
    };
    let options = Options::for_policy(policy);
    let file = if args.cluster.as_os_str() == "-" {
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .map_err(|e| format!("cannot read the cluster from standard input: {e}"))?;
        ingest::parse_cluster("-", &text, &options)
    } else {
        ingest::read_cluster(&args.cluster, &options)
    }
    .map_err(|e| e.to_string())?;
    for note in &file.notes {
        eprintln!("note: {}: {note}", args.cluster.display());
    }
    let start = match (args.now, file.origin) {
        (None, _) => file.taken,
        (Some(_), None) => 0,
        (Some(now), Some(origin)) => {
            let seconds = now.as_second() - origin.as_second();
            let start = u64::try_from(seconds).unwrap_or(0);
            if start < file.taken {
                return Err(format!(
                    "--now {now} is before the latest creation or start time in {} ({})",
                    args.cluster.display(),
                    Timestamp::from_second(origin.as_second() + file.taken as i64)
                        .map_or_else(|_| file.taken.to_string(), |t| t.to_string())
                ));
            }
            start
        }
    };
    let options = simulate::Options {
        cycles: args.cycles as usize,
        start,
        ..simulate::Options::default()
    };
    let snapshot = &file.snapshot;
    let pending = snapshot.pods.iter().filter(|p| p.node.is_none()).count();
    let header = format!(
        "{} pods ({pending} pending) on {} nodes; cycle 1 runs at {}, then one every simulated minute\n\n",
        snapshot.pods.len(),
        snapshot.nodes.len(),
        file.origin
            .and_then(|o| Timestamp::from_second(o.as_second() + start as i64).ok())
            .map_or_else(
                || "the cluster file's time 0".to_string(),
                |t| t.to_string()
            )
    );
    let sim = simulate::simulate(file.snapshot, policy, &options);
    print_stdout(&match args.format {
        Format::Human => header + &simulate::render_human(&sim, policy),
        Format::Json => simulate::render_json(&sim, policy),
    });
    Ok(EXIT_OK)
}

/// Writes to stdout, ignoring a closed pipe (`kai-scheduler simulate … | head`).
fn print_stdout(text: &str) {
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(text.as_bytes()).and_then(|_| out.flush());
}
