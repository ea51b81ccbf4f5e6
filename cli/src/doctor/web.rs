//! `askbus doctor`'s check of the web UI: is an `askbus web` serving this bus (one of this
//! user's processes whose socket is this one, found in /proc, with the address it listens on),
//! how many browser tabs it has open (the stats frame's UIs that say `via: web`), and if none
//! runs, the command that starts one.

use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use super::{Report, Status};

/// The address `askbus web` listens on without `--listen`.
const DEFAULT_LISTEN: &str = "127.0.0.1:7870";

/// One `askbus web` process.
#[derive(Debug, PartialEq, Eq)]
struct Server {
    pid: u32,
    listen: String,
}

pub(super) fn web(r: &mut Report, socket: &Path, stats: Option<&Map<String, Value>>) {
    let tabs = stats.map(|s| {
        s.get("subscribers")
            .and_then(Value::as_array)
            .map_or(0, |a| {
                a.iter()
                    .filter(|s| s.get("via").and_then(Value::as_str) == Some("web"))
                    .count()
            })
    });
    let servers = servers(socket);
    let open = match tabs {
        Some(1) => ", 1 browser tab open".to_owned(),
        Some(n) => format!(", {n} browser tabs open"),
        None => String::new(),
    };
    if servers.is_empty() {
        match tabs {
            // Someone else's, or one run with another environment: the tabs say it is there.
            Some(n) if n > 0 => r.ok(
                "web",
                format!(
                    "a web UI is open ({n} browser tab{})",
                    if n == 1 { "" } else { "s" }
                ),
            ),
            _ => r.add(
                "web",
                Status::Ok,
                "askbus web is not running (a browser UI; optional)".into(),
                Some(
                    "`askbus web --open` serves it on http://127.0.0.1:7870/ and opens it signed \
                     in; from a phone, see docs/phone.md"
                        .into(),
                ),
            ),
        }
        return;
    }
    let list: Vec<String> = servers
        .iter()
        .map(|s| format!("http://{}/ (pid {})", s.listen, s.pid))
        .collect();
    r.add(
        "web",
        Status::Ok,
        format!("askbus web serves this bus at {}{open}", list.join(", ")),
        (tabs == Some(0)).then(|| {
            "no tab is open: press Enter in its terminal for a sign-in link, or start another \
             with `askbus web --open --listen 127.0.0.1:0`"
                .to_owned()
        }),
    );
}

/// This user's `askbus web` processes that serve `socket`.
fn servers(socket: &Path) -> Vec<Server> {
    let uid = askbus::trust::effective_uid();
    let own = std::process::id();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let want = canonical(socket);
    let mut found = Vec::new();
    for entry in dir.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        if pid == own || entry.metadata().map_or(true, |m| m.uid() != uid) {
            continue;
        }
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let args: Vec<OsString> = cmdline
            .split(|b| *b == 0)
            .filter(|a| !a.is_empty())
            .map(|a| OsString::from_vec(a.to_vec()))
            .collect();
        let Some(web) = parse_web(&args) else {
            continue;
        };
        let environ = std::fs::read(entry.path().join("environ")).unwrap_or_default();
        let cwd = std::fs::read_link(entry.path().join("cwd")).ok();
        let theirs = web
            .socket
            .map(|s| match (&cwd, s.is_relative()) {
                (Some(cwd), true) => cwd.join(s),
                _ => s,
            })
            .unwrap_or_else(|| default_socket(&environ));
        if canonical(&theirs) == want {
            // The address it really listens on (`--listen 127.0.0.1:0` picks a port).
            let listen = listening(&entry.path())
                .into_iter()
                .next()
                .unwrap_or(web.listen);
            found.push(Server { pid, listen });
        }
    }
    found.sort_by_key(|s| s.pid);
    found
}

/// What an `askbus web` command line says.
#[derive(Debug, PartialEq, Eq)]
struct WebArgs {
    socket: Option<PathBuf>,
    listen: String,
}

/// `args` as `askbus [--socket P] web [--listen A] …`, or None for any other command.
fn parse_web(args: &[OsString]) -> Option<WebArgs> {
    let program = Path::new(args.first()?);
    if program.file_name()? != "askbus" {
        return None;
    }
    let mut socket = None;
    let mut listen = None;
    let mut subcommand = None;
    let mut rest = args[1..].iter();
    while let Some(arg) = rest.next() {
        let text = arg.to_string_lossy();
        if text == "--" {
            break;
        }
        if let Some(value) = text.strip_prefix("--socket=") {
            socket = Some(PathBuf::from(value));
        } else if text == "--socket" {
            socket = rest.next().map(PathBuf::from);
        } else if let Some(value) = text.strip_prefix("--listen=") {
            listen = Some(value.to_owned());
        } else if text == "--listen" {
            listen = rest.next().map(|v| v.to_string_lossy().into_owned());
        } else if subcommand.is_none() && !text.starts_with('-') {
            subcommand = Some(text.into_owned());
        }
    }
    (subcommand.as_deref() == Some("web")).then(|| WebArgs {
        socket,
        listen: listen.unwrap_or_else(|| DEFAULT_LISTEN.to_owned()),
    })
}

/// The socket a client with this environment (NUL-separated `NAME=value`) uses by default,
/// as `askbus::client::default_socket_path` decides it.
fn default_socket(environ: &[u8]) -> PathBuf {
    let var = |name: &str| {
        environ.split(|b| *b == 0).find_map(|kv| {
            let value = kv.strip_prefix(name.as_bytes())?.strip_prefix(b"=")?;
            (!value.is_empty()).then(|| PathBuf::from(OsString::from_vec(value.to_vec())))
        })
    };
    if let Some(path) = var("ASKBUS_SOCKET") {
        return path;
    }
    if let Some(dir) = var("XDG_RUNTIME_DIR") {
        return dir.join("askbus.sock");
    }
    let uid = askbus::trust::effective_uid();
    if uid == 0 {
        PathBuf::from("/run/askbus/askbus.sock")
    } else {
        PathBuf::from(format!("/tmp/askbus-{uid}/askbus.sock"))
    }
}

/// The TCP addresses the process at `/proc/PID` listens on: its sockets' inodes, looked up in
/// its network namespace's tables.
fn listening(proc_dir: &Path) -> Vec<String> {
    let Ok(fds) = std::fs::read_dir(proc_dir.join("fd")) else {
        return Vec::new();
    };
    let inodes: Vec<String> = fds
        .flatten()
        .filter_map(|fd| {
            let target = std::fs::read_link(fd.path()).ok()?;
            let target = target.to_str()?;
            Some(
                target
                    .strip_prefix("socket:[")?
                    .strip_suffix(']')?
                    .to_owned(),
            )
        })
        .collect();
    let mut out = Vec::new();
    for table in ["net/tcp", "net/tcp6"] {
        let text = std::fs::read_to_string(proc_dir.join(table)).unwrap_or_default();
        out.extend(listeners(&text, &inodes));
    }
    out
}

/// The local addresses of the LISTEN rows (state 0A) of a /proc/net/tcp{,6} table whose
/// inode is one of `inodes`.
fn listeners(table: &str, inodes: &[String]) -> Vec<String> {
    table
        .lines()
        .skip(1)
        .filter_map(|row| {
            let f: Vec<&str> = row.split_whitespace().collect();
            if f.len() < 10 || f[3] != "0A" || !inodes.iter().any(|i| i == f[9]) {
                return None;
            }
            let (ip, port) = f[1].split_once(':')?;
            let port = u16::from_str_radix(port, 16).ok()?;
            // Each 32-bit word of the address is in host (little-endian) order.
            let words: Vec<u32> = (0..ip.len() / 8)
                .map(|i| u32::from_str_radix(&ip[i * 8..i * 8 + 8], 16).map(u32::from_be))
                .collect::<Result<_, _>>()
                .ok()?;
            let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_be_bytes()).collect();
            Some(match bytes.len() {
                4 => format!("{}.{}.{}.{}:{port}", bytes[0], bytes[1], bytes[2], bytes[3]),
                16 => {
                    let a: [u8; 16] = bytes.try_into().ok()?;
                    format!("[{}]:{port}", std::net::Ipv6Addr::from(a))
                }
                _ => return None,
            })
        })
        .collect()
}

fn canonical(p: &Path) -> PathBuf {
    p.canonicalize().unwrap_or_else(|_| p.to_path_buf())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(line: &[&str]) -> Vec<OsString> {
        line.iter().map(OsString::from).collect()
    }

    #[test]
    fn web_command_lines_are_read_with_their_socket_and_address() {
        assert_eq!(
            parse_web(&args(&["/usr/bin/askbus", "web", "--open"])),
            Some(WebArgs {
                socket: None,
                listen: DEFAULT_LISTEN.into()
            })
        );
        assert_eq!(
            parse_web(&args(&[
                "askbus",
                "--socket",
                "/s/a.sock",
                "web",
                "--listen=127.0.0.1:9000"
            ])),
            Some(WebArgs {
                socket: Some("/s/a.sock".into()),
                listen: "127.0.0.1:9000".into()
            })
        );
        assert_eq!(
            parse_web(&args(&[
                "askbus",
                "web",
                "--socket=/x",
                "--listen",
                "[::1]:1"
            ])),
            Some(WebArgs {
                socket: Some("/x".into()),
                listen: "[::1]:1".into()
            })
        );
        for other in [
            &["askbus", "ui"][..],
            &["askbus", "notify", "--web-url", "http://h/"],
            &["askbus", "ask", "--", "web"],
            &["/usr/bin/askbusd", "web"],
            &["vim", "web"],
        ] {
            assert_eq!(parse_web(&args(other)), None, "{other:?}");
        }
    }

    #[test]
    fn listening_rows_are_read_from_proc_net_tcp() {
        let v4 = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:1EBE 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 4242 1 0000000000000000 100 0 0 10 0
   1: 0100007F:1EBF 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 99 1 0000000000000000 100 0 0 10 0
   2: 0100007F:1EBE 0100007F:D431 01 00000000:00000000 00:00000000 00000000  1000        0 4242 1 0000000000000000 100 0 0 10 0";
        assert_eq!(listeners(v4, &["4242".into()]), ["127.0.0.1:7870"]);
        let v6 = "header
   0: 00000000000000000000000001000000:1EBE 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 7 1 0000000000000000 100 0 0 10 0";
        assert_eq!(listeners(v6, &["7".into()]), ["[::1]:7870"]);
    }

    #[test]
    fn the_default_socket_follows_the_environment() {
        assert_eq!(
            default_socket(b"A=1\0ASKBUS_SOCKET=/s/b.sock\0XDG_RUNTIME_DIR=/run/user/7\0"),
            PathBuf::from("/s/b.sock")
        );
        assert_eq!(
            default_socket(b"ASKBUS_SOCKET=\0XDG_RUNTIME_DIR=/run/user/7\0"),
            PathBuf::from("/run/user/7/askbus.sock")
        );
    }
}
