//! `askbus completions SHELL` and `askbus man`: shell completion scripts and a roff man page,
//! generated from the same clap definition that parses the command line, so they never drift.

use std::io::Write;
use std::path::PathBuf;

use anyhow::{Context, Result};
use clap_complete::Shell;

pub fn completions(shell: Shell, mut cmd: clap::Command) -> Result<()> {
    let mut buf = Vec::new();
    clap_complete::generate(shell, &mut cmd, "askbus", &mut buf);
    emit(&buf)
}

/// askbus.1 on stdout, or with `dir` every page: askbus.1 and askbus-COMMAND.1 for each
/// visible subcommand (askbus.1 refers to them as askbus-COMMAND(1)).
pub fn man(cmd: clap::Command, dir: Option<PathBuf>) -> Result<()> {
    // `help` is not a page of its own: `askbus help X` is `askbus X --help`.
    let cmd = cmd.disable_help_subcommand(true);
    match dir {
        Some(dir) => {
            std::fs::create_dir_all(&dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
            clap_mangen::generate_to(cmd, &dir)
                .with_context(|| format!("cannot write the pages into {}", dir.display()))?;
            Ok(())
        }
        None => {
            let mut buf = Vec::new();
            clap_mangen::Man::new(cmd).render(&mut buf)?;
            emit(&buf)
        }
    }
}

/// Writes to stdout; a reader that stopped early (`| head`) is not an error.
fn emit(bytes: &[u8]) -> Result<()> {
    let mut out = std::io::stdout().lock();
    match out.write_all(bytes).and_then(|()| out.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        r => Ok(r?),
    }
}
