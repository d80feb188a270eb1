//! `kai-policy`: a thin binary over the compiler library.
#![forbid(unsafe_code)]

// The checker allocates many small, short-lived values; with mimalloc, `check` of the
// 10,000-queue benchmark policy took 0.36-0.39 s against 0.41-0.50 s with the system allocator.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    std::process::ExitCode::from(kai_policy_compiler::cli::run())
}
