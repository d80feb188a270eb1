//! The `kai-policy` command line: clap parses plain arguments, each command runs against the
//! library, and [`run`] maps every outcome to the exit statuses of `cli.md` in one place.

mod diff;
mod explain;
mod fmt;
mod generate;
mod import;
mod output;

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};

use clap::{Parser, Subcommand, ValueEnum};

use crate::check::{self, Checked};
use crate::diagnostics::{self, Code, Diagnostic, HumanStyle, Label, Summary, escape_controls};
use crate::lower::Artifacts;
use crate::source::{self, SourceFile, SourceSet};

/// Exit status: success (no errors; or, for `diff`, no change).
pub const EXIT_OK: u8 = 0;
/// Exit status: the policy has errors (or warnings with `--deny-warnings`).
pub const EXIT_PROBLEMS: u8 = 1;
/// Exit status: the command itself could not run (bad flags, unreadable path, failed write).
pub const EXIT_FAILURE: u8 = 2;

/// kai-policy: check, build and preview GPU queue policies for KAI Scheduler.
#[derive(Debug, Parser)]
#[command(name = "kai-policy", version, about)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Parse and validate the policy, reporting every problem.
    Check(CheckArgs),
    /// Check, then write queues.yaml, priorityclasses.yaml and scheduler-config.json.
    Build(BuildArgs),
    /// Print the JSON Schemas of the compiled config and the scenario file.
    Schema(SchemaArgs),
    /// Compute every queue's fair share for a scenario and explain each number.
    Explain(explain::ExplainArgs),
    /// Compare the policy at two Git revisions: queues, fair shares and rendered objects.
    Diff(diff::DiffArgs),
    /// Write a large synthetic policy (for benchmarks): 10,000 queues in 4 levels across 200
    /// files by default.
    Generate(generate::GenerateArgs),
    /// Rewrite policy files in the canonical layout, keeping comments (`--check`: change nothing).
    Fmt(fmt::FmtArgs),
    /// Turn KAI Queue YAML (`kubectl get queues -o yaml`) into a KDL policy on stdout.
    Import(import::ImportArgs),
}

#[derive(Debug, clap::Args)]
struct PolicyArgs {
    /// The policy folder (or one .kdl file).
    #[arg(default_value = "policies")]
    dir: PathBuf,
    /// How to report diagnostics.
    #[arg(long, value_enum, default_value_t = Format::Human)]
    format: Format,
    /// Treat warnings as errors (exit 1).
    #[arg(long)]
    deny_warnings: bool,
}

#[derive(Debug, clap::Args)]
struct CheckArgs {
    #[command(flatten)]
    policy: PolicyArgs,
}

#[derive(Debug, clap::Args)]
struct BuildArgs {
    #[command(flatten)]
    policy: PolicyArgs,
    /// Output folder, or `-` to print the Kubernetes objects as one YAML stream.
    #[arg(long)]
    out: PathBuf,
}

#[derive(Debug, clap::Args)]
struct SchemaArgs {
    /// Write one file per schema into this folder instead of printing them.
    #[arg(long)]
    out: Option<PathBuf>,
}

/// Diagnostic output formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// miette reports with source snippets.
    Human,
    /// One JSON document.
    Json,
    /// GitHub Actions workflow commands.
    Github,
    /// SARIF 2.1.0.
    Sarif,
}

/// Formats of reports (`explain`, `diff`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ReportFormat {
    /// Tables and sentences for a terminal.
    Human,
    /// Markdown for a pull-request comment.
    Markdown,
    /// One JSON document.
    Json,
}

/// Why a command could not run (exit status 2).
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// The policy folder could not be read.
    #[error(transparent)]
    Load(#[from] source::LoadError),
    /// An input file could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// Where.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// Output could not be written.
    #[error("cannot write {path}: {source}")]
    Write {
        /// Where.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// Rendering failed.
    #[error(transparent)]
    Render(#[from] crate::lower::RenderError),
}

impl CliError {
    /// The path the error is about, when it names one: what a KP0000 diagnostic points at.
    pub fn path(&self) -> Option<&Path> {
        match self {
            CliError::Load(source::LoadError::Io { path, .. } | source::LoadError::Empty(path))
            | CliError::Read { path, .. }
            | CliError::Write { path, .. } => Some(path),
            CliError::Render(_) => None,
        }
    }

    /// How to fix it: the help line of its KP0000 diagnostic, in every format.
    pub fn help(&self) -> &'static str {
        match self {
            CliError::Load(_) => {
                "check the path and its permissions; the policy itself was not checked"
            }
            CliError::Read { .. } => "check the path and its permissions",
            CliError::Write { .. } => {
                "check that the path can be written (permissions, free space) and that no file \
                 stands where a folder is needed: `--out` names a folder, created if missing"
            }
            CliError::Render(_) => {
                "this is a bug in kai-policy: please report it with the policy that causes it"
            }
        }
    }
}

/// What stderr says when a command could not run: the error, then how to fix it (the human form
/// of its KP0000 diagnostic).
fn human_failure(message: &str, help: &str) -> String {
    format!(
        "error: {}\nhelp: {}\n",
        escape_controls(message),
        escape_controls(help)
    )
}

/// Why a command could not run (KP0000), about the files it names. A report command (`explain`,
/// `diff`, `kai-scheduler simulate`) prints it in place of its report, so that a script reading
/// stdout always gets one valid document, as `check` prints.
#[derive(Debug, Default)]
pub struct CannotRun {
    sources: SourceSet,
    diagnostics: Vec<Diagnostic>,
}

impl CannotRun {
    /// A command error, naming its own path or else `path`.
    pub fn of_error(path: &Path, error: &CliError) -> Self {
        let mut failure = Self::default();
        failure.add_error(path, error);
        failure
    }

    /// Adds a failure about `file`, at its first line.
    pub fn add(&mut self, file: &str, message: impl Into<String>, help: &str) -> &mut Self {
        self.add_at(file, "", None, message, help)
    }

    /// Adds a failure about `file` (whose text is `text`), at `line` when it is known.
    pub fn add_at(
        &mut self,
        file: &str,
        text: &str,
        line: Option<usize>,
        message: impl Into<String>,
        help: &str,
    ) -> &mut Self {
        self.add_at_column(file, text, line, None, message, help)
    }

    /// Adds a failure about `file` (whose text is `text`), at `line` and 1-based character
    /// `column` when they are known.
    pub fn add_at_column(
        &mut self,
        file: &str,
        text: &str,
        line: Option<usize>,
        column: Option<usize>,
        message: impl Into<String>,
        help: &str,
    ) -> &mut Self {
        // The text only places the line; a file without a known line needs none of it.
        let (text, offset) = match line {
            Some(line) => {
                let start: usize = text
                    .split_inclusive('\n')
                    .take(line.saturating_sub(1))
                    .map(str::len)
                    .sum();
                let within = text[start..]
                    .char_indices()
                    .nth(column.unwrap_or(1).saturating_sub(1))
                    .map_or(0, |(i, _)| i);
                (text, start + within)
            }
            None => ("", 0),
        };
        let id = self.sources.push(SourceFile::new(file, text));
        self.diagnostics.push(
            Diagnostic::error(Code::CannotRun, message, Label::new(id, offset, 0)).with_help(help),
        );
        self
    }

    /// Adds a command error, naming its own path or else `path`.
    pub fn add_error(&mut self, path: &Path, error: &CliError) -> &mut Self {
        let file = source::display_path(error.path().unwrap_or(path));
        self.add(&file, error.to_string(), error.help())
    }

    /// The failures as stderr shows them: each error, then each way to fix them (once).
    pub fn human(&self) -> String {
        let mut out = String::new();
        let mut helps: Vec<&str> = Vec::new();
        for d in &self.diagnostics {
            out.push_str(&format!("error: {}\n", escape_controls(&d.message)));
            if let Some(help) = d.help.as_deref().filter(|h| !helps.contains(h)) {
                helps.push(help);
            }
        }
        for help in helps {
            out.push_str(&format!("help: {}\n", escape_controls(help)));
        }
        out
    }

    /// The failures as one document of a machine-readable `format`.
    pub fn render(&self, format: Format) -> String {
        render(format, &self.diagnostics, &self.sources)
    }

    /// The failures as one JSON document (`check --format json`'s shape).
    pub fn json(&self) -> String {
        self.render(Format::Json)
    }
}

/// A report command's pull-request comment when it has no report: a headline, and the text the
/// terminal shows in a code block (fenced longer than any run of backticks in it, so policy
/// text cannot end the block).
fn markdown_failure(headline: &str, body: &str) -> String {
    let longest = body.split(|c| c != '`').map(str::len).max().unwrap_or(0);
    let fence = "`".repeat(longest.max(2) + 1);
    let body = body.trim_end_matches('\n');
    format!("**kai-policy:** {headline}\n\n{fence}text\n{body}\n{fence}\n")
}

/// Prints a report command's failure in `format` (the human text to stderr, a machine-readable
/// document or a comment to stdout) and returns its exit status.
fn report_cannot_run(format: ReportFormat, headline: &str, failure: &CannotRun) -> u8 {
    let human = failure.human();
    eprint!("{human}");
    match format {
        ReportFormat::Human => {}
        ReportFormat::Json => print_stdout(&failure.json()),
        ReportFormat::Markdown => print_stdout(&markdown_failure(headline, &human)),
    }
    EXIT_FAILURE
}

/// Parses a command line, or returns the exit status once clap has printed why it will not run
/// (`--help` and `--version` exit 0, bad flags 2). Both binaries parse through it.
pub fn parse_args<T: Parser>() -> Result<T, u8> {
    T::try_parse().map_err(|e| {
        let _ = e.print();
        if !e.use_stderr() {
            return EXIT_OK;
        }
        let args: Vec<String> = std::env::args_os()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        if let Some(document) = bad_command_line(&args, &e) {
            print_stdout(&document);
        }
        EXIT_FAILURE
    })
}

/// What a command line clap refused prints on stdout when it asks for a machine-readable
/// `--format`: the KP0000 document (or pull-request comment) every other failure of such a
/// command prints, so a script that reads stdout gets one document also then. Its file is the
/// command line itself, its column the argument clap names. `None` for a human format, or when
/// the format is what clap refused.
fn bad_command_line(args: &[String], error: &clap::Error) -> Option<String> {
    use clap::error::{ContextKind, ContextValue};
    let named = |kind| match error.get(kind) {
        Some(ContextValue::String(s)) => Some(s.as_str()),
        _ => None,
    };
    let refused = named(ContextKind::InvalidArg);
    if refused.is_some_and(|a| a.starts_with("--format")) {
        return None;
    }
    let mut format = None;
    for (i, arg) in args.iter().enumerate().skip(1) {
        if arg == "--format" {
            format = args.get(i + 1).map(String::as_str);
        } else if let Some(value) = arg.strip_prefix("--format=") {
            format = Some(value);
        }
    }
    let program = args
        .first()
        .map(|a| {
            Path::new(a)
                .file_name()
                .map_or(a.clone(), |n| n.to_string_lossy().into())
        })
        .unwrap_or_default();
    let mut line = program.clone();
    let mut column = None;
    for arg in args.iter().skip(1) {
        line.push(' ');
        // The argument clap names, or the value it names of a flag written `--flag=value`.
        let names = |r: &str| {
            arg == r
                || r.strip_prefix(arg.as_str())
                    .is_some_and(|rest| arg.starts_with('-') && rest.starts_with(' '))
        };
        if column.is_none() && refused.is_some_and(names) {
            column = Some(line.chars().count() + 1);
        }
        line.push_str(arg);
    }
    let rendered = error.render().to_string();
    let message = rendered
        .lines()
        .next()
        .unwrap_or("the command line cannot be read")
        .trim_start_matches("error: ")
        .to_string();
    let tips: Vec<&str> = rendered
        .lines()
        .filter_map(|l| l.trim().strip_prefix("tip: "))
        .collect();
    let help = if tips.is_empty() {
        format!("run `{program} --help` (or `{program} COMMAND --help`) for the flags it takes")
    } else {
        tips.join("; ")
    };
    let mut failure = CannotRun::default();
    failure.add_at_column("command line", &line, Some(1), column, message, &help);
    match format? {
        "json" => Some(failure.render(Format::Json)),
        "sarif" => Some(failure.render(Format::Sarif)),
        "github" => Some(failure.render(Format::Github)),
        "markdown" => Some(markdown_failure(
            "the command line could not be read",
            &failure.human(),
        )),
        _ => None,
    }
}

/// Parses the command line, runs the command, and returns the process exit status.
pub fn run() -> u8 {
    let cli: Cli = match parse_args() {
        Ok(cli) => cli,
        Err(status) => return status,
    };
    let result = match cli.command {
        Command::Check(args) => check_command(&args.policy),
        Command::Build(args) => build_command(&args),
        Command::Schema(args) => schema_command(&args),
        Command::Explain(args) => explain::run(&args),
        Command::Diff(args) => diff::run(&args),
        Command::Generate(args) => generate::run(&args),
        Command::Fmt(args) => fmt::run(&args),
        Command::Import(args) => import::run(&args),
    };
    finish(match result {
        Ok(status) => status,
        Err(e) => {
            eprint!("{}", human_failure(&e.to_string(), e.help()));
            EXIT_FAILURE
        }
    })
}

/// Loads and checks a policy folder.
fn load_and_check(dir: &Path) -> Result<(SourceSet, Checked), CliError> {
    let (sources, early) = source::load_dir(dir)?;
    let checked = check::check(&sources, early);
    Ok((sources, checked))
}

fn human_style() -> HumanStyle {
    let colour = std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
        && std::io::stdout().is_terminal();
    if colour {
        HumanStyle::Colour
    } else {
        HumanStyle::Plain
    }
}

/// Renders diagnostics in the chosen format.
fn render(format: Format, d: &[Diagnostic], sources: &SourceSet) -> String {
    match format {
        Format::Human => diagnostics::render_human(d, sources, human_style()),
        Format::Json => diagnostics::render_json(d, sources),
        Format::Github => diagnostics::render_github(d, sources),
        Format::Sarif => diagnostics::render_sarif(d, sources),
    }
}

/// Exit status for a checked policy: 1 on errors, or on warnings when they are denied.
fn status_of(checked: &Checked, deny_warnings: bool) -> u8 {
    let summary = Summary::of(&checked.diagnostics);
    if summary.errors > 0 || denied(checked, deny_warnings) {
        EXIT_PROBLEMS
    } else {
        EXIT_OK
    }
}

/// Whether the run fails only because warnings are denied (the policy itself has no error).
fn denied(checked: &Checked, deny_warnings: bool) -> bool {
    let summary = Summary::of(&checked.diagnostics);
    deny_warnings && summary.errors == 0 && summary.warnings > 0
}

/// The sentence that says why a policy without errors fails.
fn denied_sentence(checked: &Checked) -> String {
    let n = Summary::of(&checked.diagnostics).warnings;
    let plural = if n == 1 { "warning" } else { "warnings" };
    format!(
        "error: failing because warnings are denied (--deny-warnings): {n} {plural}, no errors; \
         fix them, or drop --deny-warnings to let warnings pass"
    )
}

/// A policy's `diagnostics` (of `sources`) and one KP0000 more about `path`: a run that failed
/// after the policy was read reports both in its one document.
fn with_failure(
    mut sources: SourceSet,
    mut diagnostics: Vec<Diagnostic>,
    path: &Path,
    message: String,
    help: &str,
) -> (SourceSet, Vec<Diagnostic>) {
    let id = sources.push(SourceFile::new(source::display_path(path), ""));
    diagnostics
        .push(Diagnostic::error(Code::CannotRun, message, Label::new(id, 0, 0)).with_help(help));
    (sources, diagnostics)
}

/// A command error (exit 2) as one diagnostic of the chosen machine-readable format, naming the
/// path it is about (the one the error names, such as an unreadable folder inside the policy,
/// else `path`), so a CI step that uploads the output always gets a valid document.
fn failure_document(format: Format, path: &Path, error: &CliError) -> String {
    CannotRun::of_error(path, error).render(format)
}

fn check_command(args: &PolicyArgs) -> Result<u8, CliError> {
    let (sources, checked) = match load_and_check(&args.dir) {
        Ok(loaded) => loaded,
        Err(e) if args.format != Format::Human => {
            print_stdout(&failure_document(args.format, &args.dir, &e));
            eprint!("{}", human_failure(&e.to_string(), e.help()));
            return Ok(EXIT_FAILURE);
        }
        Err(e) => return Err(e),
    };
    print_stdout(&render(args.format, &checked.diagnostics, &sources));
    if denied(&checked, args.deny_warnings) {
        eprintln!("{}", denied_sentence(&checked));
    }
    Ok(status_of(&checked, args.deny_warnings))
}

fn build_command(args: &BuildArgs) -> Result<u8, CliError> {
    let format = args.policy.format;
    let to_stdout = args.out.as_os_str() == "-";
    // With `--out -` stdout is the YAML stream, so diagnostics go to stderr. With an output
    // folder a machine-readable document goes to stdout, as `check`'s does (a CI step redirects
    // it to the file it uploads); human reports stay on stderr beside the summary of what was
    // written. A machine-readable format gets exactly one document, also when the command
    // cannot run.
    let report = |text: &str| {
        if to_stdout || format == Format::Human {
            eprint!("{text}");
        } else {
            print_stdout(text);
        }
    };
    let (sources, checked) = match load_and_check(&args.policy.dir) {
        Ok(loaded) => loaded,
        Err(e) if format != Format::Human => {
            report(&failure_document(format, &args.policy.dir, &e));
            return Ok(EXIT_FAILURE);
        }
        Err(e) => return Err(e),
    };
    let status = status_of(&checked, args.policy.deny_warnings);
    let diagnostics = &checked.diagnostics;
    let (Some(policy), EXIT_OK) = (&checked.policy, status) else {
        report(&render(format, diagnostics, &sources));
        if denied(&checked, args.policy.deny_warnings) && format == Format::Human {
            eprintln!("{}", denied_sentence(&checked));
        }
        return Ok(EXIT_PROBLEMS);
    };
    let artifacts = Artifacts::new(policy, crate::git::source_info(&args.policy.dir));
    let written = if to_stdout {
        artifacts
            .objects_yaml()
            .map(|yaml| print_stdout(&yaml))
            .map_err(CliError::from)
    } else {
        output::write_artifacts(&args.out, &artifacts)
    };
    match written {
        Ok(()) if diagnostics.is_empty() && format == Format::Human => {}
        Ok(()) => report(&render(format, diagnostics, &sources)),
        Err(e) if format == Format::Human => {
            // Warnings still matter; "no problems found" just before a write error would not.
            if !diagnostics.is_empty() {
                report(&render(format, diagnostics, &sources));
            }
            return Err(e);
        }
        Err(e) => {
            // The write error joins the policy's diagnostics in the one document.
            let (sources, all) = with_failure(
                sources,
                diagnostics.clone(),
                &args.out,
                e.to_string(),
                e.help(),
            );
            report(&render(format, &all, &sources));
            return Ok(EXIT_FAILURE);
        }
    }
    if to_stdout {
        return Ok(EXIT_OK);
    }
    if format == Format::Human {
        eprintln!(
            "wrote {} queues, {} priority classes and scheduler-config.json ({}) to {}",
            artifacts.queues.len(),
            artifacts.priority_classes.len(),
            artifacts.config.digest,
            args.out.display()
        );
    }
    Ok(EXIT_OK)
}

fn schema_command(args: &SchemaArgs) -> Result<u8, CliError> {
    let schemas = crate::schemas();
    match &args.out {
        Some(dir) => {
            for (name, text) in &schemas {
                output::write_atomically(&dir.join(name), text.as_bytes())?;
            }
        }
        None => {
            let all: serde_json::Map<String, serde_json::Value> = schemas
                .iter()
                .map(|(name, text)| {
                    (
                        name.to_string(),
                        serde_json::from_str(text).unwrap_or_default(),
                    )
                })
                .collect();
            print_stdout(&format!(
                "{}\n",
                serde_json::to_string_pretty(&all).unwrap_or_default()
            ));
        }
    }
    Ok(EXIT_OK)
}

/// Why standard output could not be written, once a write to it failed.
static STDOUT_FAILURE: std::sync::Mutex<Option<String>> = std::sync::Mutex::new(None);

/// Writes to stdout. A closed pipe is fine (`kai-policy check | head` must not fail), but any
/// other failure (a full disk behind `> out.yaml`) is remembered: the command then exits 2
/// ([`finish`]), so a script never takes a truncated or empty file for the output.
pub fn print_stdout(text: &str) {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|_| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            let mut failure = STDOUT_FAILURE.lock().unwrap_or_else(|p| p.into_inner());
            failure.get_or_insert_with(|| e.to_string());
        }
        _ => {}
    }
}

/// The exit status of a command that returned `status`, once its output is known to be
/// whole: a failed write to stdout turns it into 2 with the reason on stderr. Both binaries
/// end every command through it.
pub fn finish(status: u8) -> u8 {
    let failure = STDOUT_FAILURE
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .take();
    match failure {
        Some(why) => {
            eprintln!(
                "error: cannot write to standard output: {why}; what was printed is incomplete. \
                 Make room where the output goes (is the disk full?), or write to a file elsewhere"
            );
            EXIT_FAILURE
        }
        None => status,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The end-to-end test needs a user that permissions bind (root ignores them); this holds
    /// wherever the tests run: the document names the path the error names, not the root given.
    #[test]
    fn a_failure_names_the_path_that_could_not_be_read() {
        let denied = || std::io::Error::from(std::io::ErrorKind::PermissionDenied);
        for locked in ["ud2/a/b", "ud2/teams/llm.kdl"] {
            let e = CliError::Load(source::LoadError::Io {
                path: PathBuf::from(locked),
                source: denied(),
            });
            let doc: serde_json::Value =
                serde_json::from_str(&failure_document(Format::Json, Path::new("ud2"), &e))
                    .unwrap();
            assert_eq!(doc["diagnostics"][0]["file"], locked);
            let message = doc["diagnostics"][0]["message"].as_str().unwrap();
            assert!(
                message.starts_with(&format!("cannot read {locked}: ")),
                "{message}"
            );
        }
    }

    #[test]
    fn a_markdown_failure_keeps_policy_text_inside_its_code_block() {
        let comment = markdown_failure("no fair share was computed", "error: ```` `x`\n");
        assert!(comment.starts_with("**kai-policy:** no fair share was computed\n\n`````text\n"));
        assert!(comment.ends_with("\n`````\n"), "{comment}");
    }
}
