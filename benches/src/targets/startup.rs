//! Row 9 of the targets: the time from spawning askbusd to its socket accepting.

use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use crate::report::median;
use crate::spawn::{Kind, Target};

/// Row 9: spawn askbusd, poll connect() until its socket accepts; median ms of `starts`.
pub(super) fn start_to_ready(kind: &Kind, starts: usize) -> Result<(f64, Vec<f64>)> {
    let mut samples = Vec::with_capacity(starts);
    for _ in 0..starts {
        let t0 = Instant::now();
        let mut target = Target::spawn(kind)?;
        let socket = target.socket().to_owned();
        loop {
            if std::os::unix::net::UnixStream::connect(&socket).is_ok() {
                break;
            }
            if t0.elapsed() > Duration::from_secs(15) {
                target.check_alive()?;
                bail!("askbusd did not accept within 15 s");
            }
            // Short enough for a sub-millisecond reading, long enough not to take the
            // daemon's core on a small machine.
            std::thread::sleep(Duration::from_micros(50));
        }
        samples.push(t0.elapsed().as_secs_f64() * 1000.0);
        target
            .wait_ready()
            .context("askbusd accepted but never logged ready")?;
        target.stop()?;
    }
    Ok((median(samples.clone()), samples))
}
