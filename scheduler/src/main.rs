//! `kai-scheduler`: a thin binary over the scheduler library.
#![forbid(unsafe_code)]

fn main() -> std::process::ExitCode {
    std::process::ExitCode::from(kai_scheduler::cli::run())
}
