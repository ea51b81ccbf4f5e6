//! `askbus completions SHELL` and `askbus man`: shell completion scripts and a roff man page,
//! generated from the same clap definition that parses the command line, so they never drift.

use std::io::Write;

use anyhow::Result;
use clap_complete::Shell;

pub fn completions(shell: Shell, mut cmd: clap::Command) -> Result<()> {
    let mut buf = Vec::new();
    clap_complete::generate(shell, &mut cmd, "askbus", &mut buf);
    emit(&buf)
}

pub fn man(cmd: clap::Command) -> Result<()> {
    let mut buf = Vec::new();
    clap_mangen::Man::new(cmd).render(&mut buf)?;
    emit(&buf)
}

/// Writes to stdout; a reader that stopped early (`| head`) is not an error.
fn emit(bytes: &[u8]) -> Result<()> {
    let mut out = std::io::stdout().lock();
    match out.write_all(bytes).and_then(|()| out.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        r => Ok(r?),
    }
}
