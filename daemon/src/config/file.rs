//! Reading the config file: its text parsed strictly into [`Options`], and errors that name
//! the file, the line and column, and the dotted key they are about.

use std::path::{Path, PathBuf};

use super::Options;

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    /// `key` is empty when the error is not about one key (a syntax error).
    #[error("{}:{line}:{column}: {}{message}", path.display(), key_prefix(key))]
    Invalid {
        path: PathBuf,
        line: usize,
        column: usize,
        key: String,
        message: String,
    },
}

fn key_prefix(key: &str) -> String {
    if key.is_empty() {
        String::new()
    } else {
        format!("{key}: ")
    }
}

impl ConfigError {
    /// The 1-based line the error is on, when it is about the file's contents.
    pub fn line(&self) -> Option<usize> {
        match self {
            ConfigError::Invalid { line, .. } => Some(*line),
            ConfigError::Read { .. } => None,
        }
    }

    pub fn key(&self) -> Option<&str> {
        match self {
            ConfigError::Invalid { key, .. } if !key.is_empty() => Some(key),
            _ => None,
        }
    }
}

/// Reads and parses a config file.
pub fn load(path: &Path) -> Result<Options, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
        path: path.to_owned(),
        source,
    })?;
    parse(&text, path)
}

/// Parses a config file's text; `path` only names it in errors.
pub fn parse(text: &str, path: &Path) -> Result<Options, ConfigError> {
    let invalid = |err: toml::de::Error, key: String| {
        let at = err.span().map_or(0, |s| s.start);
        let (line, column) = position(text, at);
        ConfigError::Invalid {
            path: path.to_owned(),
            line,
            column,
            key,
            message: err.message().trim_end().to_owned(),
        }
    };
    // The document's own structure first: it locates keys for the errors that follow.
    let doc = toml::de::DeTable::parse(text).map_err(|e| invalid(e, String::new()))?;
    toml::from_str::<Options>(text).map_err(|e| {
        let key = e
            .span()
            .and_then(|s| key_at(doc.get_ref(), s.start, ""))
            .unwrap_or_default();
        invalid(e, key)
    })
}

/// The dotted key whose name or value holds byte `pos`.
fn key_at(table: &toml::de::DeTable<'_>, pos: usize, prefix: &str) -> Option<String> {
    for (k, v) in table {
        let name = format!("{prefix}{}", k.get_ref());
        if k.span().contains(&pos) {
            return Some(name);
        }
        // A `[table]`'s own span may not cover its keys: look inside whatever it says.
        if let toml::de::DeValue::Table(t) = v.get_ref() {
            if let Some(inner) = key_at(t, pos, &format!("{name}.")) {
                return Some(inner);
            }
        }
        if v.span().contains(&pos) || v.span().start == pos {
            return Some(name);
        }
    }
    None
}

/// 1-based line and column of byte `at`.
fn position(text: &str, at: usize) -> (usize, usize) {
    let before = &text[..at.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let column = before.len() - before.rfind('\n').map_or(0, |i| i + 1) + 1;
    (line, column)
}
