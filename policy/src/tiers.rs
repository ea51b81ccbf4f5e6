//! Where askbus keeps policy files, and the rules "allow always" writes.
//!
//! askbus reads three tiers, never a project's own files (a cloned repository must not be able
//! to allow its own commands, so the reference's workspace and extension tiers are not read
//! from disk):
//! - the reference's shipped defaults (tier 1), unless `--no-default-policies`;
//! - `/etc/askbus/policies/*.toml` as admin (tier 5), files owned by root only;
//! - `$XDG_CONFIG_HOME/askbus/policies/*.toml` (else `~/.config/askbus/policies`) as user
//!   (tier 4), per uid: a user's rules decide only that user's requests.

use std::fmt::Write as _;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use crate::loader::{load_shipped, load_text, toml_files, Decision, LoadError, Loaded, Tier};
use crate::regex::escape_regex;

/// The admin tier's directory.
pub const ADMIN_DIR: &str = "/etc/askbus/policies";

/// The file "allow always" and `askbus policy add` write, in the user's directory.
pub const USER_FILE: &str = "askbus-rules.toml";

/// A user's policy directory: `$XDG_CONFIG_HOME/askbus/policies`, else `~/.config/askbus/policies`.
pub fn user_dir(xdg_config_home: Option<&str>, home: &str) -> PathBuf {
    match xdg_config_home.filter(|x| !x.is_empty() && x.starts_with('/')) {
        Some(x) => Path::new(x).join("askbus/policies"),
        None => Path::new(home).join(".config/askbus/policies"),
    }
}

/// The calling process's user directory (from its environment).
pub fn own_user_dir() -> PathBuf {
    let home = std::env::var("HOME").unwrap_or_else(|_| "/".into());
    user_dir(std::env::var("XDG_CONFIG_HOME").ok().as_deref(), &home)
}

/// Loads a tier's directory; with `owner`, a file owned by anyone else is refused (an error,
/// and its rules are not loaded), so only root can write the admin tier.
pub fn load_tier_dir(dir: &Path, tier: Tier, owner: Option<u32>) -> Loaded {
    let mut out = Loaded::default();
    let files = match toml_files(dir) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return out,
        Err(e) => {
            out.errors.push(read_error(
                dir,
                tier,
                "Failed to read policy path",
                e.to_string(),
            ));
            return out;
        }
    };
    for (name, path) in files {
        out.extend(load_tier_dir_file(&path, &name, tier, owner));
    }
    out
}

/// One file of a tier directory, with the owner check.
pub fn load_tier_dir_file(path: &Path, name: &str, tier: Tier, owner: Option<u32>) -> Loaded {
    let mut out = Loaded::default();
    let meta = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(e) => {
            out.errors.push(read_error(
                path,
                tier,
                "Failed to read policy file",
                e.to_string(),
            ));
            return out;
        }
    };
    if let Some(uid) = owner {
        if meta.uid() != uid || meta.mode() & 0o022 != 0 {
            out.errors.push(read_error(
                path,
                tier,
                "Policy file ignored: not owned by the tier's owner, or writable by others",
                format!(
                    "owner uid {}, mode {:o}; expected uid {uid} and no group/other write",
                    meta.uid(),
                    meta.mode() & 0o7777
                ),
            ));
            return out;
        }
    }
    // A hostile file may be huge: 16 MiB is far beyond any real policy.
    if meta.len() > 16 << 20 {
        out.errors.push(read_error(
            path,
            tier,
            "Failed to read policy file",
            "larger than 16 MiB".into(),
        ));
        return out;
    }
    match std::fs::read(path) {
        Ok(bytes) => out.extend(load_text(
            &String::from_utf8_lossy(&bytes),
            name,
            &path.to_string_lossy(),
            tier,
        )),
        Err(e) => out.errors.push(read_error(
            path,
            tier,
            "Failed to read policy file",
            e.to_string(),
        )),
    }
    out
}

fn read_error(path: &Path, tier: Tier, message: &str, details: String) -> LoadError {
    LoadError {
        file: path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
        path: path.to_string_lossy().into_owned(),
        tier: tier.name(),
        kind: "file_read",
        message: message.into(),
        warning: false,
        rule_index: None,
        details: Some(details),
    }
}

/// The machine-wide tiers: shipped defaults (unless disabled) and the admin directory.
pub fn load_system(defaults: bool, admin_dir: &Path) -> Loaded {
    let mut out = load_tier_dir(admin_dir, Tier::Admin, Some(0));
    if defaults {
        out.extend(load_shipped());
    }
    out
}

/// The rule the reference writes for "allow always", as TOML text for the user tier.
///
/// A shell command: its root commands as `commandPrefix` (each part of a compound command
/// then needs one of them, by the daemon's compound check); an MCP tool: that server's tool
/// (`toolName` + `mcpName`); any other tool: the tool. Priority 950 in the user tier is the
/// reference's 4.95. The project scope is askbus's own key `askbusProject` (the reference's
/// loader ignores unknown keys); the daemon applies such a rule only to requests whose context
/// names that project.
pub fn always_allow_rule(
    tool: &str,
    server: Option<&str>,
    command_roots: Option<&[String]>,
    project: Option<&str>,
) -> String {
    let mut s = String::from("\n[[rule]]\n");
    let q = |v: &str| serde_json::to_string(v).expect("a string encodes");
    match server {
        Some(srv) => {
            let short = tool.strip_prefix(&format!("mcp_{srv}_")).unwrap_or(tool);
            let _ = writeln!(s, "toolName = {}", q(short));
            let _ = writeln!(s, "mcpName = {}", q(srv));
        }
        None => {
            let _ = writeln!(s, "toolName = {}", q(tool));
        }
    }
    match command_roots {
        Some([one]) => {
            let _ = writeln!(s, "commandPrefix = {}", q(one));
        }
        Some(roots) if !roots.is_empty() => {
            let list: Vec<String> = roots.iter().map(|r| q(r)).collect();
            let _ = writeln!(s, "commandPrefix = [{}]", list.join(", "));
        }
        _ => {}
    }
    let _ = writeln!(s, "decision = \"allow\"\npriority = 950");
    if let Some(p) = project {
        let _ = writeln!(s, "askbusProject = {}", q(p));
    }
    s
}

/// What "allow always" allows: the tool (Gemini CLI's "always allow", "always allow this
/// tool"), or every tool of the call's MCP server ("always allow this server").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AlwaysScope {
    /// The tool (a shell command: its root command).
    Tool,
    /// Every tool of the call's MCP server.
    Server,
}

/// The rule "allow always" writes for one approval, and what a UI shows before the tap.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AlwaysRule {
    /// The rule as TOML, for [`append_user_rule`].
    pub toml: String,
    /// One line saying what it allows, where: `run_shell_command commands starting "git" in
    /// project askbus`.
    pub summary: String,
}

/// The rule the reference writes for "allow always" of `tool_call` (`{"name", "args"}` as the
/// agent sent it; another agent's names mapped by [`crate::tools::map_call`] first, so the
/// rule also decides Gemini CLI's calls), scoped to `project` when one is given.
pub fn always_rule_for(
    tool_call: &serde_json::Value,
    server: Option<&str>,
    agent: Option<&str>,
    scope: AlwaysScope,
    project: Option<&str>,
) -> Option<AlwaysRule> {
    let name = tool_call.get("name")?.as_str()?;
    let args = tool_call
        .get("args")
        .cloned()
        .unwrap_or(serde_json::Value::Null);
    let agent = crate::tools::agent_of_context(agent);
    let (name, args, mapped_server) = crate::tools::map_call(agent, name, &args)
        .unwrap_or_else(|| (name.to_string(), args, None));
    let server = mapped_server
        .as_deref()
        .or(server)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .or_else(|| crate::tools::parse_mcp_tool_name(&name).map(|(s, _)| s.to_string()));
    let where_ = match project {
        Some(p) => format!(" in project {p}"),
        None => " in every project".to_string(),
    };
    if scope == AlwaysScope::Server {
        let srv = server?;
        let toml = always_allow_rule(&format!("mcp_{srv}_*"), None, None, project);
        return Some(AlwaysRule {
            toml,
            summary: format!("every tool of MCP server {srv}{where_}"),
        });
    }
    if crate::tools::SHELL_TOOL_NAMES.contains(&name.as_str()) {
        let command = args.get("command").and_then(serde_json::Value::as_str)?;
        let roots = command_roots(command)?;
        let said: Vec<String> = roots.iter().map(|r| format!("{r:?}")).collect();
        return Some(AlwaysRule {
            toml: always_allow_rule(&name, None, Some(&roots), project),
            summary: format!("{name} commands starting {}{where_}", said.join(" or ")),
        });
    }
    let toml = always_allow_rule(&name, server.as_deref(), None, project);
    let summary = match &server {
        Some(srv) => format!("{name} of MCP server {srv}{where_}"),
        None => format!("{name}{where_}"),
    };
    Some(AlwaysRule { toml, summary })
}

/// The root commands of a shell command (the reference's `getCommandRoots`, each once), for
/// "allow always".
pub fn command_roots(command: &str) -> Option<Vec<String>> {
    let units: Vec<u16> = command.encode_utf16().collect();
    let parsed = crate::shell::parse_command_details(&units)?;
    if parsed.has_error {
        return None;
    }
    let mut roots: Vec<String> = vec![];
    for d in &parsed.details {
        if !crate::shell::REDIRECTION_NAMES.contains(&d.name.as_str()) && !roots.contains(&d.name) {
            roots.push(d.name.clone());
        }
    }
    (!roots.is_empty()).then_some(roots)
}

/// Appends a rule to the user's file (creating the directory and file, mode 0600), after
/// checking that the file with it still loads without errors.
pub fn append_user_rule(dir: &Path, rule_toml: &str) -> std::io::Result<PathBuf> {
    use std::io::Write as _;
    std::fs::create_dir_all(dir)?;
    let path = dir.join(USER_FILE);
    let old = std::fs::read_to_string(&path).unwrap_or_default();
    let new = format!("{old}{rule_toml}");
    let check = load_text(&new, USER_FILE, &path.to_string_lossy(), Tier::User);
    if let Some(e) = check.errors.iter().find(|e| !e.warning) {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("{}: {}", e.message, e.details.clone().unwrap_or_default()),
        ));
    }
    let tmp = dir.join(format!(".{USER_FILE}.tmp"));
    {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode_0600()
            .open(&tmp)?;
        f.write_all(new.as_bytes())?;
        f.sync_all()?;
    }
    std::fs::rename(&tmp, &path)?;
    Ok(path)
}

trait Mode0600 {
    fn mode_0600(&mut self) -> &mut Self;
}

impl Mode0600 for std::fs::OpenOptions {
    fn mode_0600(&mut self) -> &mut Self {
        use std::os::unix::fs::OpenOptionsExt;
        self.mode(0o600)
    }
}

/// Removes the `n`th `[[rule]]` (1-based) of the user's file; returns the removed text.
pub fn remove_user_rule(dir: &Path, n: usize) -> std::io::Result<String> {
    let path = dir.join(USER_FILE);
    let text = std::fs::read_to_string(&path)?;
    let starts: Vec<usize> = text
        .match_indices("[[rule]]")
        .filter(|(i, _)| *i == 0 || text[..*i].ends_with('\n'))
        .map(|(i, _)| i)
        .collect();
    let Some(&start) = n.checked_sub(1).and_then(|i| starts.get(i)) else {
        return Err(std::io::Error::new(
            std::io::ErrorKind::NotFound,
            format!("no rule #{n} in {}", path.display()),
        ));
    };
    let end = starts
        .iter()
        .find(|&&s| s > start)
        .copied()
        .unwrap_or(text.len());
    let removed = text[start..end].to_string();
    let new = format!("{}{}", &text[..start], &text[end..]);
    std::fs::write(&path, new)?;
    Ok(removed)
}

/// A rule's text for `policy add`: tool, decision, priority and the optional matchers.
pub struct NewRule<'a> {
    /// The tool name.
    pub tool: &'a str,
    /// The decision.
    pub decision: Decision,
    /// 0..=999 within the user tier.
    pub priority: u16,
    /// `commandPrefix`.
    pub command_prefix: Option<&'a str>,
    /// `argsPattern`.
    pub args_pattern: Option<&'a str>,
    /// `mcpName`.
    pub mcp_name: Option<&'a str>,
    /// `denyMessage`.
    pub deny_message: Option<&'a str>,
    /// `modes`.
    pub modes: &'a [&'a str],
}

/// The TOML of a new rule.
pub fn rule_toml(r: &NewRule<'_>) -> String {
    let q = |v: &str| serde_json::to_string(v).expect("a string encodes");
    let mut s = format!(
        "\n[[rule]]\ntoolName = {}\ndecision = \"{}\"\npriority = {}\n",
        q(r.tool),
        r.decision.as_str(),
        r.priority
    );
    if let Some(v) = r.command_prefix {
        let _ = writeln!(s, "commandPrefix = {}", q(v));
    }
    if let Some(v) = r.args_pattern {
        let _ = writeln!(s, "argsPattern = {}", q(v));
    }
    if let Some(v) = r.mcp_name {
        let _ = writeln!(s, "mcpName = {}", q(v));
    }
    if let Some(v) = r.deny_message {
        let _ = writeln!(s, "denyMessage = {}", q(v));
    }
    if !r.modes.is_empty() {
        let list: Vec<String> = r.modes.iter().map(|m| q(m)).collect();
        let _ = writeln!(s, "modes = [{}]", list.join(", "));
    }
    s
}

/// `escapeRegex`, re-exported for rules written from a command.
pub fn escape(text: &str) -> String {
    escape_regex(text)
}
