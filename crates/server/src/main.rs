//! The `actiongate` binary.

/// jemalloc with its background thread purges freed memory on a timer
/// (10 s decay), whichever thread freed it: after a burst (10,000 long-polls
/// that came and went) the idle RSS comes back down. glibc's malloc kept
/// it fragmented across its arenas, and mimalloc kept what idle threads
/// had freed (bench/memory/README.md).
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> std::process::ExitCode {
    actiongate_server::cli::main()
}
