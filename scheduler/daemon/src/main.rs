//! `kai-scheduler`: simulate, bench, and the daemon that follows a policy in Git.
#![forbid(unsafe_code)]

mod cli;

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    std::process::ExitCode::from(cli::run())
}
