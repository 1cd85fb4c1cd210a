//! The `actiongate` binary.

fn main() -> std::process::ExitCode {
    actiongate_server::cli::main()
}
