//! Node's POSIX `path` functions and the reference's path helpers (`isSubpath`,
//! `resolveToRealPath`), which decide whether a command or a file stays in the workspace.
//!
//! They touch the real file system where the reference does (symlinks are followed), so a
//! link inside the workspace that points out of it is seen as the reference sees it.

use std::path::Path;

/// `path.isAbsolute`.
pub fn is_absolute(p: &str) -> bool {
    p.starts_with('/')
}

/// `path.normalize`'s core for an absolute path: resolves `.` and `..`, drops empty segments.
fn normalize_abs(p: &str) -> String {
    let mut parts: Vec<&str> = vec![];
    for seg in p.split('/') {
        match seg {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            s => parts.push(s),
        }
    }
    format!("/{}", parts.join("/"))
}

/// `path.resolve(base, p)` (base is absolute).
pub fn resolve(base: &str, p: &str) -> String {
    if is_absolute(p) {
        normalize_abs(p)
    } else if p.is_empty() {
        normalize_abs(base)
    } else {
        normalize_abs(&format!("{base}/{p}"))
    }
}

/// `path.basename`.
pub fn basename(p: &str) -> &str {
    let t = p.trim_end_matches('/');
    if t.is_empty() {
        return "";
    }
    match t.rfind('/') {
        Some(i) => &t[i + 1..],
        None => t,
    }
}

/// `path.dirname` of an absolute, normalized path.
pub fn dirname(p: &str) -> String {
    match p.rfind('/') {
        Some(0) | None => "/".into(),
        Some(i) => p[..i].into(),
    }
}

/// `path.extname`.
pub fn extname(p: &str) -> &str {
    let base = basename(p);
    match base.rfind('.') {
        Some(0) | None => "",
        Some(i) => &base[i..],
    }
}

/// The reference's `isSubpath(parent, child)` (both resolved against `cwd`).
pub fn is_subpath(cwd: &str, parent: &str, child: &str) -> bool {
    let p = resolve(cwd, parent);
    let c = resolve(cwd, child);
    p == "/" || c == p || c.starts_with(&format!("{p}/"))
}

/// ENOENT, EISDIR, ENAMETOOLONG, ENOTDIR: the errors the reference resolves around.
fn benign(e: &std::io::Error) -> bool {
    matches!(e.raw_os_error(), Some(2 | 21 | 36 | 20))
}

fn robust_realpath(p: &str, visited: &mut Vec<String>) -> Option<String> {
    if visited.iter().any(|v| v == p) {
        return None;
    }
    visited.push(p.to_string());
    match std::fs::canonicalize(p) {
        Ok(r) => Some(r.to_string_lossy().into_owned()),
        Err(e) if benign(&e) => {
            match std::fs::symlink_metadata(p) {
                Ok(m) if m.file_type().is_symlink() => {
                    let target = std::fs::read_link(p).ok()?;
                    let resolved = resolve(&dirname(p), &target.to_string_lossy());
                    return robust_realpath(&resolved, visited);
                }
                Ok(_) => {}
                Err(e) if benign(&e) => {}
                Err(_) => return None,
            }
            let parent = dirname(p);
            if parent == p {
                return Some(p.to_string());
            }
            let base = basename(p).to_string();
            let rp = robust_realpath(&parent, visited)?;
            Some(if rp == "/" {
                format!("/{base}")
            } else {
                format!("{rp}/{base}")
            })
        }
        Err(_) => None,
    }
}

/// `decodeURIComponent`, or `None` where it throws.
pub fn decode_uri_component(s: &str) -> Option<String> {
    let b = s.as_bytes();
    let mut out: Vec<u8> = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = |j: usize| -> Option<u8> {
                let h = b.get(j..j + 2)?;
                u8::from_str_radix(std::str::from_utf8(h).ok()?, 16).ok()
            };
            let first = hex(i + 1)?;
            if first < 0x80 {
                out.push(first);
                i += 3;
                continue;
            }
            let n = if first & 0xE0 == 0xC0 {
                2
            } else if first & 0xF0 == 0xE0 {
                3
            } else if first & 0xF8 == 0xF0 {
                4
            } else {
                return None;
            };
            let mut bytes = vec![first];
            for k in 1..n {
                let j = i + 3 * k;
                if b.get(j) != Some(&b'%') {
                    return None;
                }
                let v = hex(j + 1)?;
                if v & 0xC0 != 0x80 {
                    return None;
                }
                bytes.push(v);
            }
            std::str::from_utf8(&bytes).ok()?;
            out.extend(bytes);
            i += 3 * n;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// The reference's `resolveToRealPath` (`None` where it throws).
pub fn resolve_to_real_path(cwd: &str, p: &str) -> Option<String> {
    if p.contains('\0') {
        return None;
    }
    let mut resolved = p.to_string();
    // `try { fileURLToPath; decodeURIComponent } catch {}`: a throw keeps what was done so far.
    'attempt: {
        if resolved.starts_with("file://") {
            match file_url_to_path(&resolved) {
                Some(x) => resolved = x,
                None => break 'attempt,
            }
        }
        if let Some(x) = decode_uri_component(&resolved) {
            resolved = x;
        }
    }
    if resolved.contains('\0') {
        return None;
    }
    robust_realpath(&resolve(cwd, &resolved), &mut vec![])
}

/// Node's `fileURLToPath` on POSIX (`None` where it throws).
fn file_url_to_path(url: &str) -> Option<String> {
    let rest = url.strip_prefix("file://")?;
    let path = if rest.starts_with('/') {
        rest
    } else {
        rest.strip_prefix("localhost")
            .filter(|r| r.starts_with('/'))?
    };
    let path = path.split(['?', '#']).next().unwrap_or("");
    if path.to_ascii_lowercase().contains("%2f") {
        return None;
    }
    decode_uri_component(path)
}

/// `fs.lstatSync(p, {throwIfNoEntry: false})` is defined.
pub fn lstat_exists(p: &str) -> bool {
    std::fs::symlink_metadata(Path::new(p)).is_ok()
}

/// A symlink (by `lstat`).
pub fn is_symlink(p: &str) -> bool {
    std::fs::symlink_metadata(Path::new(p)).is_ok_and(|m| m.file_type().is_symlink())
}

/// `fs.realpathSync`.
pub fn realpath(p: &str) -> Option<String> {
    std::fs::canonicalize(p)
        .ok()
        .map(|r| r.to_string_lossy().into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_path() {
        assert_eq!(resolve("/w", "../x/./y/"), "/x/y");
        assert_eq!(resolve("/w", "/a//b/.."), "/a");
        assert_eq!(basename("/a/git/"), "git");
        assert_eq!(extname("x.BZL"), ".BZL");
        assert_eq!(extname(".bazelrc"), "");
        assert!(is_subpath("/", "/w", "/w/..x"));
        assert!(!is_subpath("/", "/w", "/wx"));
        assert_eq!(decode_uri_component("a%2Fb%C3%A9"), Some("a/bé".into()));
        assert_eq!(decode_uri_component("%E0%A4%A"), None);
    }
}
