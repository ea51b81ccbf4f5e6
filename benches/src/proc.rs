//! What /proc says about the bench's target process: CPU time (utime + stime, in clock ticks
//! and milliseconds) and memory (VmRSS now, VmHWM the peak).

use anyhow::{anyhow, Context, Result};

/// Clock ticks per second (`sysconf(_SC_CLK_TCK)`), the unit of utime and stime.
pub fn ticks_per_second() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if hz > 0 {
        hz as u64
    } else {
        100
    }
}

/// utime + stime of every thread of `pid` so far, in clock ticks.
pub fn cpu_ticks(pid: u32) -> Result<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .with_context(|| format!("cannot read /proc/{pid}/stat"))?;
    parse_cpu_ticks(&stat).ok_or_else(|| anyhow!("unexpected /proc/{pid}/stat: {stat:?}"))
}

/// The comm field may hold spaces and parentheses, so fields are counted after the last ')'.
fn parse_cpu_ticks(stat: &str) -> Option<u64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    // After the comm: state is field 3, utime field 14 and stime field 15 (proc(5)).
    let utime: u64 = fields.nth(11)?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some(utime + stime)
}

pub fn ticks_to_ms(ticks: u64) -> f64 {
    ticks as f64 * 1000.0 / ticks_per_second() as f64
}

/// Resident memory of a process, in KiB.
#[derive(Debug, Clone, Copy)]
pub struct Memory {
    pub rss_kib: u64,
    pub peak_kib: u64,
}

pub fn memory(pid: u32) -> Result<Memory> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .with_context(|| format!("cannot read /proc/{pid}/status"))?;
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .ok_or_else(|| anyhow!("no {name} in /proc/{pid}/status"))
    };
    Ok(Memory {
        rss_kib: field("VmRSS:")?,
        peak_kib: field("VmHWM:")?,
    })
}

/// Raises this process's open-file limit to its hard limit (children inherit it), so
/// thousands of connections fit on both ends.
pub fn raise_nofile() -> Result<u64> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit with a valid resource and a pointer to a live rlimit.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) != 0 {
            return Err(std::io::Error::last_os_error()).context("getrlimit(RLIMIT_NOFILE)");
        }
        if lim.rlim_cur < lim.rlim_max {
            lim.rlim_cur = lim.rlim_max;
            if libc::setrlimit(libc::RLIMIT_NOFILE, &lim) != 0 {
                return Err(std::io::Error::last_os_error()).context("setrlimit(RLIMIT_NOFILE)");
            }
        }
    }
    Ok(lim.rlim_cur)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_comm_with_spaces_and_parens() {
        let stat = "42 (a) b (c)) S 1 42 42 0 -1 4194560 100 0 0 0 7 5 0 0 20 0 3 0 1 2 3";
        assert_eq!(parse_cpu_ticks(stat), Some(12));
    }

    #[test]
    fn reads_this_process() {
        let me = std::process::id();
        cpu_ticks(me).unwrap();
        let mem = memory(me).unwrap();
        assert!(mem.rss_kib > 0 && mem.peak_kib >= mem.rss_kib);
        assert!(ticks_per_second() > 0);
    }
}
