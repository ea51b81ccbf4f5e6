//! askbus: the command-line client (the `askbus-cli` crate).
fn main() -> std::process::ExitCode {
    askbus_cli::main()
}
