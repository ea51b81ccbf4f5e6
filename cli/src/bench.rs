//! `askbus bench`: an external subcommand. The load generator, its baselines (a relay, raw
//! NATS, JetStream) and the performance targets are the `askbus-bench` package, kept out of
//! what ships; this file owns finding that binary (next to the running `askbus`, else on
//! PATH) and handing it the command line.

use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, ExitCode};

use crate::fail::exit;

/// The bench binary's name.
const BENCH: &str = "askbus-bench";

/// Replaces this process with `askbus-bench [--socket PATH] ARGS…`; returns only on failure.
pub fn exec(socket: Option<PathBuf>, args: Vec<OsString>) -> ExitCode {
    let Some(bin) = find() else {
        eprintln!(
            "askbus bench: no {BENCH} next to this askbus or on PATH; build it with \
             `cargo build -p askbus-bench` (`--release` for figures, beside the release askbusd)"
        );
        return ExitCode::from(exit::FAILURE);
    };
    let mut cmd = Command::new(&bin);
    if let Some(socket) = socket {
        cmd.arg("--socket").arg(socket);
    }
    let e = cmd.args(args).exec();
    eprintln!("askbus bench: cannot run {}: {e}", bin.display());
    ExitCode::from(exit::FAILURE)
}

/// `askbus-bench` beside this executable (a build's target dir, an install's bin dir), else
/// the first on PATH.
fn find() -> Option<PathBuf> {
    let beside = std::env::current_exe()
        .ok()
        .map(|me| me.with_file_name(BENCH))
        .filter(|p| p.is_file());
    beside.or_else(|| {
        std::env::split_paths(&std::env::var_os("PATH")?)
            .map(|dir| dir.join(BENCH))
            .find(|p| p.is_file())
    })
}
