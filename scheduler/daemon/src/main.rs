//! `kai-scheduler`: simulate, bench, and the daemon that follows a policy in Git.
#![forbid(unsafe_code)]

mod cli;

fn main() -> std::process::ExitCode {
    std::process::ExitCode::from(cli::run())
}
