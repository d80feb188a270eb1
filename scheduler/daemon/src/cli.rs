//! The `kai-scheduler` command line (edge): clap parses plain arguments, each command runs
//! against the library, and [`run`] maps every outcome to an exit status in one place:
//! 0 ok, 1 the policy has errors (its diagnostics are printed), 2 the command could not run
//! (bad flags, an unreadable policy folder, an unreadable or invalid cluster file or compiled
//! config, a daemon that cannot start or stops on a fatal error).

use std::io::{IsTerminal, Read};
use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};
use k8s_openapi::jiff::Timestamp;
use kai_policy_compiler::check;
use kai_policy_compiler::cli::{CannotRun, CliError, print_stdout};
use kai_policy_compiler::diagnostics::{self, HumanStyle};
use kai_policy_compiler::lower::config;
use kai_policy_compiler::model::Policy;
use kai_policy_compiler::source;

use kai_scheduler::bench::{self, BenchArgs, BenchFormat, Scenario};
use kai_scheduler::ingest::{self, Options};
use kai_scheduler::simulate::{self, DEFAULT_CYCLES};
use kai_scheduler_daemon::daemon::{self, ClusterOptions, DaemonOptions};
use kai_scheduler_daemon::follow::{Credentials, FollowOptions, Origin};
use kai_scheduler_daemon::kubernetes::KubeOptions;
use kai_scheduler_daemon::sim::SimOptions;
use kai_scheduler_kube::client::Limits;
use kai_scheduler_kube::lease::Election;

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
    /// Schedule continuously with the policy of a Git repository, reloading it as it changes:
    /// a Kubernetes cluster (--kubeconfig, or the in-cluster service account), or the in-memory
    /// simulator over a cluster file (--cluster, development and demo mode).
    Run(Box<RunArgs>),
}

#[derive(Debug, clap::Args)]
struct RunArgs {
    /// The policy repository: a URL (https://, ssh://, file://) to clone and fetch, or a local
    /// checkout to watch (kept fresh by a git-sync sidecar).
    #[arg(long, value_name = "URL|PATH")]
    policy_repo: String,
    /// The branch to follow (a local checkout follows what it has checked out).
    #[arg(long, default_value = "main")]
    branch: String,
    /// The policy folder, or a compiled scheduler-config.json, inside the repository.
    #[arg(long, default_value = "policies")]
    path: String,
    /// How often a remote is fetched (and a local checkout re-read even without a change).
    #[arg(long, default_value = "30s", value_parser = parse_interval)]
    poll: std::time::Duration,
    /// Schedule the in-memory simulated cluster that starts from this cluster file (same format
    /// as `simulate`) instead of a Kubernetes cluster.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["kubeconfig", "scheduler_name", "leader_elect_lease"])]
    cluster: Option<PathBuf>,
    /// The kubeconfig of the cluster to schedule [default: $KUBECONFIG, ~/.kube/config, else
    /// the in-cluster service account].
    #[arg(long, value_name = "FILE")]
    kubeconfig: Option<PathBuf>,
    /// The scheduler name pods ask for in spec.schedulerName [default: the policy's
    /// `cluster { scheduler-name }`]. Kubernetes only.
    #[arg(long, value_name = "NAME")]
    scheduler_name: Option<String>,
    /// Compete for this coordination.k8s.io Lease and schedule only while holding it (for
    /// more than one replica) [default: no election; this replica always schedules].
    #[arg(long, value_name = "NAME")]
    leader_elect_lease: Option<String>,
    /// The Lease's namespace [default: $POD_NAMESPACE].
    #[arg(long, value_name = "NAMESPACE", requires = "leader_elect_lease")]
    leader_elect_namespace: Option<String>,
    /// This replica's name in the Lease and in events [default: $POD_NAME, else the host name].
    #[arg(long, value_name = "NAME")]
    leader_elect_identity: Option<String>,
    /// How long a leader's claim lasts without renewal [default: 15s].
    #[arg(long, value_parser = parse_interval, requires = "leader_elect_lease")]
    leader_elect_duration: Option<std::time::Duration>,
    /// How often the leader renews the Lease (and a follower tries to take it); under half of
    /// --leader-elect-duration. A leader that cannot renew stops scheduling within one renewal
    /// [default: 5s].
    #[arg(long, value_parser = parse_interval, requires = "leader_elect_lease")]
    leader_elect_renew: Option<std::time::Duration>,
    /// Server-side apply the policy's Queues and PriorityClasses (field manager kai-policy) when
    /// it changes, and delete the ones this scheduler applied that the policy no longer has
    /// (only objects labelled app.kubernetes.io/managed-by=kai-policy).
    #[arg(long)]
    apply_queues: bool,
    /// NUMA alignment, as KAI's opt-in numa plugin: follow the nodes' NodeResourceTopology
    /// objects, keep pods off nodes whose kubelet Topology Manager would refuse them, and
    /// record each bound pod's predicted zones on it (kai.scheduler/numa-placement-predicted).
    #[arg(long)]
    numa: bool,
    /// Resources NUMA alignment leaves out, comma-separated (KAI's ignoreList: `memory`
    /// without the kubelet's Memory Manager, `cpu` without its static CPU manager).
    #[arg(long, value_delimiter = ',', requires = "numa")]
    numa_ignore: Vec<String>,
    /// Where the HTTP server listens (/healthz, /readyz, /policy, /pending, /metrics).
    #[arg(long, default_value = "0.0.0.0:8080")]
    listen: std::net::SocketAddr,
    /// Time between the starts of two scheduling cycles.
    #[arg(long, default_value = "1s", value_parser = parse_interval)]
    period: std::time::Duration,
    /// Where the clone of a remote and the usage history are kept.
    #[arg(long, default_value = ".kai-scheduler")]
    state_dir: PathBuf,
    /// Simulated seconds per wall-clock second (--cluster only) [default: 1].
    #[arg(long, value_parser = parse_speed)]
    speed: Option<f64>,
    /// How long a simulated pod runs once bound, unless its kai-policy.io/simulated-duration
    /// annotation says otherwise (--cluster only) [default: 10m].
    #[arg(long, value_parser = parse_interval)]
    pod_duration: Option<std::time::Duration>,
    /// When the simulated clock starts (RFC 3339); pods created later arrive as it passes
    /// their creation time [default: the latest creation or start time in the cluster file]
    /// (--cluster only).
    #[arg(long, value_parser = parse_time)]
    start: Option<Timestamp>,
    /// A private SSH key for ssh:// remotes (the SSH agent is tried first).
    #[arg(long, value_name = "FILE")]
    ssh_key: Option<PathBuf>,
    /// A file holding a token for https:// remotes [default: $KAI_POLICY_GIT_TOKEN].
    #[arg(long, value_name = "FILE")]
    git_token_file: Option<PathBuf>,
    /// A folder of Git credentials, as a Kubernetes Secret mounts them: `ssh-privatekey` (SSH),
    /// or `password` (an HTTPS token) with an optional `username`.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["ssh_key", "git_token_file"])]
    git_credentials: Option<PathBuf>,
    /// Log format: `human`, one line per event as people read it, or `json`, one JSON object
    /// per line for a log collector.
    #[arg(long, value_enum, default_value_t = Format::Human, hide_possible_values = true)]
    log_format: Format,
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
    /// A compiled config (`scheduler-config.json`, from `kai-policy build`) instead of a policy
    /// folder; its digest and format version are verified.
    #[arg(long, conflicts_with = "policy")]
    config: Option<PathBuf>,
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
        Command::Run(args) => run_command(*args),
        Command::Bench(args) => bench::run(&args.into()).map(|out| {
            print_stdout(&out);
            EXIT_OK
        }),
    };
    kai_policy_compiler::cli::finish(match result {
        Ok(status) => status,
        Err(e) => {
            eprintln!("error: {e}");
            EXIT_FAILURE
        }
    })
}

/// `kai-scheduler bench`'s flags (the bench itself, [`BenchArgs`], lives in the library).
#[derive(Debug, clap::Args)]
struct BenchCli {
    /// Nodes, 8 GPUs each [default: 5000; reclaim: 1000; steady: 4000].
    #[arg(long)]
    nodes: Option<usize>,
    /// Pending pods [default: 10 per node; reclaim: a gang of 250; steady: 35 per node in all,
    /// a seventh of them pending].
    #[arg(long)]
    pods: Option<usize>,
    /// Queues in a 3-level tree [default: one per 5 nodes, at least 3; reclaim: 100; steady:
    /// 1000].
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
    /// 4,000 mostly full nodes, 140,000 pods, a backlog across 1,000 queues: every action.
    Steady,
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
                ScenarioArg::Steady => Scenario::Steady,
            },
        }
    }
}

/// How long a simulated pod runs without the annotation: 10 minutes.
const DEFAULT_POD_DURATION: u64 = 600;

/// `500ms`, or a duration of the policy language (`30s`, `5m`, `1h`).
fn parse_interval(text: &str) -> Result<std::time::Duration, String> {
    let parsed = match text.strip_suffix("ms") {
        Some(ms) => ms
            .parse::<u64>()
            .map(std::time::Duration::from_millis)
            .map_err(|e| e.to_string()),
        None => kai_policy_compiler::quantity::parse_duration(text)
            .map(|d| std::time::Duration::from_secs(d.0))
            .map_err(|e| e.to_string()),
    };
    match parsed {
        Ok(d) if !d.is_zero() => Ok(d),
        Ok(_) => Err("must be more than zero".to_string()),
        Err(e) => Err(format!("not a duration like 500ms, 30s or 5m: {e}")),
    }
}

fn parse_speed(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(v) if v > 0.0 && v.is_finite() => Ok(v),
        _ => Err("must be a number above zero (simulated seconds per second)".to_string()),
    }
}

fn run_command(args: RunArgs) -> Result<u8, String> {
    use tracing_subscriber::prelude::*;
    // kube-client logs every refused request as a bare "failed with status N" error; the
    // backend reports each call's outcome (and each watch's failure) itself, with what it was.
    let quiet = tracing_subscriber::filter::filter_fn(|meta| {
        !meta.target().starts_with("kube_client::client::builder")
            && meta.level() <= &tracing::Level::INFO
    });
    let logs = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_target(false)
        .with_ansi(human_style() == HumanStyle::Colour);
    match args.log_format {
        Format::Json => tracing_subscriber::registry()
            .with(logs.json().with_filter(quiet))
            .init(),
        Format::Human => tracing_subscriber::registry()
            .with(logs.with_filter(quiet))
            .init(),
    }
    let credentials = credentials(&args)?;
    let cluster = cluster_options(&args)?;
    let options = DaemonOptions {
        follow: FollowOptions {
            origin: Origin::parse(&args.policy_repo),
            branch: args.branch,
            path: args.path,
            state_dir: args.state_dir,
            credentials,
        },
        poll: args.poll,
        period: args.period,
        listen: args.listen,
        cluster,
    };
    daemon::run(options)?;
    Ok(EXIT_OK)
}

/// The Git credentials of `--git-credentials`, `--ssh-key`, `--git-token-file` or
/// `$KAI_POLICY_GIT_TOKEN`.
fn credentials(args: &RunArgs) -> Result<Credentials, String> {
    let read = |file: &std::path::Path, flag: &str| {
        std::fs::read_to_string(file)
            .map(|t| t.trim().to_string())
            .map_err(|e| format!("cannot read {flag} {}: {e}", file.display()))
    };
    if let Some(dir) = &args.git_credentials {
        if !dir.is_dir() {
            return Err(format!(
                "--git-credentials {} is not a folder (a mounted Secret with `ssh-privatekey`, or `password` and `username`)",
                dir.display()
            ));
        }
        let key = dir.join("ssh-privatekey");
        let password = dir.join("password");
        let username = dir.join("username");
        let credentials = Credentials {
            ssh_key: key.is_file().then_some(key),
            token: if password.is_file() {
                Some(read(&password, "--git-credentials")?)
            } else {
                None
            },
            username: if username.is_file() {
                Some(read(&username, "--git-credentials")?).filter(|u| !u.is_empty())
            } else {
                None
            },
        };
        if credentials.ssh_key.is_none() && credentials.token.is_none() {
            return Err(format!(
                "--git-credentials {} holds neither `ssh-privatekey` nor `password`",
                dir.display()
            ));
        }
        return Ok(credentials);
    }
    let token = match &args.git_token_file {
        Some(file) => Some(read(file, "--git-token-file")?),
        None => std::env::var("KAI_POLICY_GIT_TOKEN")
            .ok()
            .filter(|t| !t.is_empty()),
    };
    Ok(Credentials {
        ssh_key: args.ssh_key.clone(),
        token,
        username: None,
    })
}

/// The cluster to schedule: `--cluster` (simulated) or Kubernetes.
fn cluster_options(args: &RunArgs) -> Result<ClusterOptions, String> {
    // (clap's `requires` is not enforced when the required argument conflicts with one given,
    // so these combinations are checked here.)
    let lease_flags = [
        (
            "--leader-elect-namespace",
            args.leader_elect_namespace.is_some(),
        ),
        (
            "--leader-elect-identity",
            args.leader_elect_identity.is_some(),
        ),
        (
            "--leader-elect-duration",
            args.leader_elect_duration.is_some(),
        ),
        ("--leader-elect-renew", args.leader_elect_renew.is_some()),
    ];
    let sim_flags = [
        ("--speed", args.speed.is_some()),
        ("--pod-duration", args.pod_duration.is_some()),
        ("--start", args.start.is_some()),
    ];
    if let Some(path) = &args.cluster {
        if args.apply_queues {
            return Err(
                "--apply-queues writes Queue and PriorityClass objects to a Kubernetes cluster; the simulated cluster (--cluster) has none"
                    .to_string(),
            );
        }
        if args.numa {
            return Err(
                "--numa follows a Kubernetes cluster's NodeResourceTopology objects; the simulated cluster (--cluster) aligns to those its file holds without it"
                    .to_string(),
            );
        }
        if let Some((flag, _)) = lease_flags.iter().find(|(_, given)| *given) {
            return Err(format!(
                "{flag} is for leader election in a Kubernetes cluster; the simulated cluster (--cluster) has none"
            ));
        }
        return Ok(ClusterOptions::File {
            path: path.clone(),
            sim: SimOptions {
                speed: args.speed.unwrap_or(1.0),
                default_duration: args
                    .pod_duration
                    .map_or(DEFAULT_POD_DURATION, |d| d.as_secs()),
                start: args.start,
            },
        });
    }
    if let Some((flag, _)) = sim_flags.iter().find(|(_, given)| *given) {
        return Err(format!(
            "{flag} is for the simulated cluster: it needs --cluster FILE (without it, the daemon schedules Kubernetes)"
        ));
    }
    if let Some(file) = &args.kubeconfig
        && let Err(e) = std::fs::metadata(file)
    {
        return Err(format!("cannot read --kubeconfig {}: {e}", file.display()));
    }
    let env = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    let identity = args
        .leader_elect_identity
        .clone()
        .or_else(|| env("POD_NAME"))
        .or_else(|| env("HOSTNAME"))
        .or_else(|| {
            std::fs::read_to_string("/etc/hostname")
                .ok()
                .map(|h| h.trim().to_string())
                .filter(|h| !h.is_empty())
        })
        .unwrap_or_else(|| format!("kai-scheduler-{}", std::process::id()));
    let election = match &args.leader_elect_lease {
        None => None,
        Some(name) => {
            let namespace = args
                .leader_elect_namespace
                .clone()
                .or_else(|| env("POD_NAMESPACE"))
                .ok_or(
                    "--leader-elect-lease needs the Lease's namespace: give --leader-elect-namespace or set POD_NAMESPACE",
                )?;
            let duration = args
                .leader_elect_duration
                .unwrap_or(std::time::Duration::from_secs(15));
            let renew = args
                .leader_elect_renew
                .unwrap_or(std::time::Duration::from_secs(5));
            if renew * 2 >= duration {
                return Err(format!(
                    "--leader-elect-renew ({}) must be under half of --leader-elect-duration ({}): a leader stops scheduling within one renewal of losing the Lease, and must stop before another replica may take it",
                    humantime(renew),
                    humantime(duration)
                ));
            }
            Some(Election {
                namespace,
                name: name.clone(),
                identity: identity.clone(),
                duration,
                period: renew,
            })
        }
    };
    Ok(ClusterOptions::Kube(KubeOptions {
        kubeconfig: args.kubeconfig.clone(),
        scheduler_name: args.scheduler_name.clone(),
        election,
        instance: identity,
        limits: Limits::default(),
        apply_queues: args.apply_queues,
        numa: args.numa.then(|| {
            args.numa_ignore
                .iter()
                .map(|r| kai_scheduler::numa::normalize(r.trim()))
                .filter(|r| !r.is_empty())
                .collect()
        }),
    }))
}

/// `5s`, `1500ms`.
fn humantime(d: std::time::Duration) -> String {
    if d.subsec_millis() == 0 {
        format!("{}s", d.as_secs())
    } else {
        format!("{}ms", d.as_millis())
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

/// The checked policy of a folder (diagnostics printed to stderr, and with `--format json` as
/// the one document on stdout; `None` when it has errors).
fn policy_from_folder(
    folder: &std::path::Path,
    format: Format,
) -> Result<Option<Policy>, CannotRun> {
    let (sources, early) =
        source::load_dir(folder).map_err(|e| CannotRun::of_error(folder, &CliError::Load(e)))?;
    let checked = check::check(&sources, early);
    // Diagnostics go to stderr so that stdout stays one JSON document with `--format json`.
    if !checked.diagnostics.is_empty() {
        eprint!(
            "{}",
            diagnostics::render_human(&checked.diagnostics, &sources, human_style())
        );
    }
    let failed = checked.has_errors();
    if failed && format == Format::Json {
        print_stdout(&diagnostics::render_json(&checked.diagnostics, &sources));
    }
    Ok(checked.policy.filter(|_| !failed))
}

/// Why `simulate` could not run, about `file`: stderr shows it as people read it, and with
/// `--format json` it is the KP0000 document on stdout, so stdout is one JSON document also then.
fn failure(file: &str, message: String, help: &str) -> CannotRun {
    let mut failure = CannotRun::default();
    failure.add(file, message, help);
    failure
}

/// How to fix a cluster file that cannot be used.
const CLUSTER_HELP: &str = "check the path and its permissions; the cluster file is what `kubectl \
     get nodes,pods,podgroups.scheduling.run.ai -A -o yaml` prints";

fn simulate_command(args: &SimulateArgs) -> Result<u8, String> {
    match simulate_cluster(args) {
        Ok(status) => Ok(status),
        Err(failure) => {
            eprint!("{}", failure.human());
            if args.format == Format::Json {
                print_stdout(&failure.json());
            }
            Ok(EXIT_FAILURE)
        }
    }
}

fn simulate_cluster(args: &SimulateArgs) -> Result<u8, CannotRun> {
    let policy =
        match &args.config {
            Some(path) => config::load(path)
                .map_err(|e| {
                    failure(
                        &path.display().to_string(),
                        e.to_string(),
                        "check the path and its permissions, or rebuild it with `kai-policy build`",
                    )
                })?
                .1,
            None => match policy_from_folder(&args.policy, args.format)? {
                Some(policy) => policy,
                None => return Ok(EXIT_PROBLEMS),
            },
        };
    let policy = &policy;
    let options = Options::for_policy(policy);
    let file = if args.cluster.as_os_str() == "-" {
        let mut text = String::new();
        std::io::stdin().read_to_string(&mut text).map_err(|e| {
            failure(
                "-",
                format!("cannot read the cluster from standard input: {e}"),
                CLUSTER_HELP,
            )
        })?;
        ingest::parse_cluster("-", &text, &options)
    } else {
        ingest::read_cluster(&args.cluster, &options)
    }
    .map_err(|e| failure(&e.file, e.to_string(), CLUSTER_HELP))?;
    for note in &file.notes {
        eprintln!(
            "note: {}",
            note.in_file(&args.cluster.display().to_string())
        );
    }
    if file.snapshot.nodes.is_empty() && file.snapshot.pods.is_empty() {
        // Nothing to schedule on and nothing to schedule: an empty file, or one that is not a
        // cluster at all. Running cycles over it would only print an empty table.
        return Err(failure(
            &args.cluster.display().to_string(),
            format!("{} holds no nodes and no pods", args.cluster.display()),
            "give the cluster as `kubectl get nodes,pods,podgroups.scheduling.run.ai -A -o yaml` prints it (a List, or documents with kind Node and Pod); the notes above say what was skipped",
        ));
    }
    let start = match (args.now, file.origin) {
        (None, _) => file.taken,
        (Some(_), None) => 0,
        (Some(now), Some(origin)) => {
            let seconds = now.as_second() - origin.as_second();
            let start = u64::try_from(seconds).unwrap_or(0);
            if start < file.taken {
                return Err(failure(
                    &args.cluster.display().to_string(),
                    format!(
                        "--now {now} is before the latest creation or start time in {} ({})",
                        args.cluster.display(),
                        Timestamp::from_second(origin.as_second() + file.taken as i64)
                            .map_or_else(|_| file.taken.to_string(), |t| t.to_string())
                    ),
                    "give a --now at or after that time, or leave it out to start there",
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
    let plural =
        |n: usize, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
    let header = format!(
        "{} ({pending} pending) on {}; cycle 1 runs at {}, then one every simulated minute\n\n",
        plural(snapshot.pods.len(), "pod", "pods"),
        plural(snapshot.nodes.len(), "node", "nodes"),
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
