//! `kai-policy`: a thin binary over the compiler library.
#![forbid(unsafe_code)]

fn main() -> std::process::ExitCode {
    std::process::ExitCode::from(kai_policy_compiler::cli::run())
}
