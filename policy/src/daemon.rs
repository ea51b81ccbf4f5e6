//! The daemon's policy: the tiers in force (shipped, admin, each uid's own), compiled into one
//! engine per uid, reloaded when a file changes, and asked about each approval.
//!
//! A reload that finds a bad file keeps that file's previous rules in force (a typo must not
//! silently drop a deny) and reports the error. The engine is asked with askbus's stricter
//! compound check ([`Engine::check_strict`]), so a compound command is allowed only when each
//! of its parts would be.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::SystemTime;

use crate::engine::{Call, Engine, Matched, Options};
use crate::json::{self, JsValue};
use crate::loader::{load_shipped, toml_files, Decision, LoadError, Loaded, Mode, Rule, Tier};
use crate::safety::Place;

/// Where the tiers are read from.
#[derive(Debug, Clone)]
pub struct Sources {
    /// Load the reference's shipped defaults.
    pub defaults: bool,
    /// The admin directory (`/etc/askbus/policies`); its files must be owned by root.
    pub admin_dir: PathBuf,
    /// The owner the admin files must have (root; a test daemon names its own uid).
    pub admin_owner: u32,
}

/// One file as last loaded: its fingerprint and what it gave.
#[derive(Debug, Clone)]
struct FileState {
    stamp: (SystemTime, u64),
    loaded: Loaded,
}

#[derive(Debug, Default)]
struct TierState {
    files: HashMap<PathBuf, FileState>,
    /// The directory's fingerprint: names, mtimes and sizes.
    stamp: Vec<(PathBuf, SystemTime, u64)>,
    /// Errors of the last load (a bad file's previous rules stay in `files`).
    errors: Vec<LoadError>,
    loaded_once: bool,
    /// The directory's own mtime at the last refresh: a rule "allow always" writes lands by a
    /// rename, which changes it, so one stat per decision sees the new rule at once.
    dir_mtime: Option<SystemTime>,
}

fn dir_stamp(dir: &Path) -> Vec<(PathBuf, SystemTime, u64)> {
    toml_files(dir)
        .unwrap_or_default()
        .into_iter()
        .filter_map(|(_, p)| {
            let m = std::fs::metadata(&p).ok()?;
            Some((p, m.modified().ok()?, m.len()))
        })
        .collect()
}

fn dir_mtime(dir: &Path) -> Option<SystemTime> {
    std::fs::metadata(dir).and_then(|m| m.modified()).ok()
}

impl TierState {
    /// Reloads the directory if anything in it changed; true if it did.
    fn refresh(&mut self, dir: &Path, tier: Tier, owner: Option<u32>) -> bool {
        self.dir_mtime = dir_mtime(dir);
        let stamp = dir_stamp(dir);
        if stamp == self.stamp && self.loaded_once {
            return false;
        }
        self.loaded_once = true;
        self.stamp = stamp.clone();
        let mut files = HashMap::new();
        let mut errors = vec![];
        for (path, mtime, len) in stamp {
            let name = path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            if let Some(old) = self.files.get(&path).filter(|f| f.stamp == (mtime, len)) {
                errors.extend(old.loaded.errors.clone());
                files.insert(path, old.clone());
                continue;
            }
            let mut one = crate::tiers::load_tier_dir_file(&path, &name, tier, owner);
            drop_backtracking_traps(&mut one, &path, tier);
            let bad = one.errors.iter().any(|e| !e.warning);
            errors.extend(one.errors.clone());
            match (bad, self.files.get(&path)) {
                // A bad file: its previous rules stay in force.
                (true, Some(old)) => {
                    let mut kept = old.clone();
                    kept.loaded.errors = one.errors;
                    files.insert(path, kept);
                }
                _ => {
                    files.insert(
                        path,
                        FileState {
                            stamp: (mtime, len),
                            loaded: one,
                        },
                    );
                }
            }
        }
        self.files = files;
        self.errors = errors;
        true
    }

    fn rules(&self) -> Loaded {
        let mut paths: Vec<&PathBuf> = self.files.keys().collect();
        paths.sort_by(|a, b| a.file_name().cmp(&b.file_name()));
        let mut out = Loaded::default();
        for p in paths {
            let f = &self.files[p];
            out.rules.extend(f.loaded.rules.clone());
            out.checkers.extend(f.loaded.checkers.clone());
        }
        out.errors = self.errors.clone();
        out
    }
}

/// What the policy decided about an approval, when it decided without a person.
#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    /// `allow` or `deny`.
    pub decision: Decision,
    /// The rule, as the contract's JSON object (`decidedBy.rule`).
    pub rule: serde_json::Value,
    /// For a deny: the message the agent is told.
    pub message: Option<String>,
}

/// One approval, as the daemon sees it.
#[derive(Debug, Clone, Default)]
pub struct Approval<'a> {
    /// The producer's uid: whose user tier applies.
    pub uid: u32,
    /// `toolCall` as JSON text (`{"name", "args"}`).
    pub tool_call: &'a str,
    /// The MCP server.
    pub server: Option<&'a str>,
    /// `toolAnnotations` as JSON text.
    pub annotations: Option<&'a str>,
    /// The subagent.
    pub subagent: Option<&'a str>,
    /// The agent's working directory (the workspace).
    pub cwd: Option<&'a str>,
    /// The request's project (for rules scoped to one).
    pub project: Option<&'a str>,
    /// The agent's approval mode (default `default`).
    pub mode: Option<&'a str>,
    /// Whether the agent is interactive (default yes).
    pub interactive: Option<bool>,
    /// The agent (`context.agent`): Claude Code's and Codex's tool names and arguments are
    /// mapped onto the reference's ([`crate::tools::map_call`]) before the rules are asked.
    pub agent: Option<&'a str>,
}

struct State {
    system: TierState,
    users: HashMap<u32, (PathBuf, TierState)>,
    shipped: Loaded,
    engines: HashMap<u32, Arc<Engine>>,
    engine_errors: Vec<String>,
}

/// The daemon's policy set.
pub struct PolicySet {
    sources: Sources,
    user_dir_of: Box<dyn Fn(u32) -> Option<PathBuf> + Send + Sync>,
    state: RwLock<State>,
}

impl std::fmt::Debug for PolicySet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PolicySet")
            .field("sources", &self.sources)
            .finish_non_exhaustive()
    }
}

impl PolicySet {
    /// A policy set reading `sources`; `user_dir_of(uid)` is that uid's policy directory.
    pub fn new(
        sources: Sources,
        user_dir_of: impl Fn(u32) -> Option<PathBuf> + Send + Sync + 'static,
    ) -> PolicySet {
        let shipped = if sources.defaults {
            load_shipped()
        } else {
            Loaded::default()
        };
        let set = PolicySet {
            sources,
            user_dir_of: Box::new(user_dir_of),
            state: RwLock::new(State {
                system: TierState::default(),
                users: HashMap::new(),
                shipped,
                engines: HashMap::new(),
                engine_errors: vec![],
            }),
        };
        set.reload();
        set
    }

    /// Re-reads every tier whose files changed (the poller and SIGHUP call this); true if any did.
    pub fn reload(&self) -> bool {
        let mut st = self.state.write().unwrap_or_else(|e| e.into_inner());
        let mut changed = st.system.refresh(
            &self.sources.admin_dir,
            Tier::Admin,
            Some(self.sources.admin_owner),
        );
        let uids: Vec<u32> = st.users.keys().copied().collect();
        for uid in uids {
            let (dir, mut t) = st.users.remove(&uid).expect("listed");
            changed |= t.refresh(&dir, Tier::User, Some(uid));
            st.users.insert(uid, (dir, t));
        }
        if changed {
            st.engines.clear();
            st.engine_errors.clear();
        }
        changed
    }

    fn engine_for(&self, uid: u32) -> Option<Arc<Engine>> {
        {
            let st = self.state.read().unwrap_or_else(|e| e.into_inner());
            let fresh = st
                .users
                .get(&uid)
                .is_none_or(|(dir, t)| dir_mtime(dir) == t.dir_mtime);
            if let Some(e) = st.engines.get(&uid).filter(|_| fresh) {
                return Some(e.clone());
            }
        }
        let mut st = self.state.write().unwrap_or_else(|e| e.into_inner());
        // The user's directory changed (a rule written by "allow always"): re-read it now.
        if let Some((dir, mut t)) = st.users.remove(&uid) {
            if dir_mtime(&dir) != t.dir_mtime && t.refresh(&dir, Tier::User, Some(uid)) {
                st.engines.remove(&uid);
            }
            st.users.insert(uid, (dir, t));
        }
        let user_dir_of = &self.user_dir_of;
        st.users.entry(uid).or_insert_with(|| {
            let mut t = TierState::default();
            let dir = user_dir_of(uid);
            if let Some(d) = &dir {
                t.refresh(d, Tier::User, Some(uid));
            }
            (dir.unwrap_or_default(), t)
        });
        let mut loaded = st.users[&uid].1.rules();
        loaded.extend(st.system.rules());
        loaded.extend(st.shipped.clone());
        match Engine::new(
            loaded.rules,
            loaded.checkers,
            Options::default(),
            Place::default(),
        ) {
            Ok(e) => {
                let e = Arc::new(e);
                st.engines.insert(uid, e.clone());
                Some(e)
            }
            Err(err) => {
                st.engine_errors.push(format!("uid {uid}: {}", err.0));
                None
            }
        }
    }

    /// The load errors in force (admin tier and every user tier seen), and engine refusals.
    pub fn errors(&self) -> Vec<String> {
        let st = self.state.read().unwrap_or_else(|e| e.into_inner());
        let mut out: Vec<String> = st
            .system
            .errors
            .iter()
            .chain(st.users.values().flat_map(|(_, t)| t.errors.iter()))
            .map(|e| format!("{} ({} tier, {}): {}", e.path, e.tier, e.kind, e.message))
            .collect();
        out.extend(st.engine_errors.iter().cloned());
        out
    }

    /// Decides an approval by rule: `Some` for allow or deny, `None` to ask a person.
    /// Any failure (unparsable call, refused rules) asks a person: never an allow.
    pub fn decide(&self, a: &Approval<'_>) -> Option<Verdict> {
        // Bounded work per request: a call this large is asked of a person, not matched.
        if a.tool_call.len() > MAX_CALL_BYTES {
            return None;
        }
        let engine = self.engine_for(a.uid)?;
        let call = json::parse(a.tool_call).ok()?;
        let name = call.prop("name").and_then(JsValue::as_string)?;
        let args = call.prop("args").cloned();
        let annotations = a.annotations.and_then(|t| json::parse(t).ok());
        let options = Options {
            non_interactive: a.interactive == Some(false),
            mode: a.mode.and_then(Mode::parse).unwrap_or(Mode::Default),
            disable_always_allow: false,
            trusted: true,
        };
        let workspace = a
            .cwd
            .filter(|c| c.starts_with('/'))
            .unwrap_or("/nonexistent-askbus-workspace")
            .to_string();
        let place = Place {
            workspace,
            home: String::new(),
            hermetic: false,
        };
        let engine = engine.with(options, place);
        let q = Call {
            name: &name,
            args: args.as_ref(),
            server: a.server,
            annotations: annotations.as_ref(),
            subagent: a.subagent,
        };
        let native = engine.check_strict(&q);
        // Another agent's tool: decided as the reference's tool, unless a rule names the
        // agent's own tool (then that rule decides, as it would for a Gemini CLI call).
        let agent = crate::tools::agent_of_context(a.agent);
        // Gemini CLI's own calls are never mapped: their JSON is not read a second time.
        let mapped = (agent != crate::tools::Agent::Gemini)
            .then(|| serde_json::from_str::<serde_json::Value>(a.tool_call).ok())
            .flatten()
            .and_then(|v| {
                let args = v.get("args").cloned().unwrap_or(serde_json::Value::Null);
                crate::tools::map_call(agent, &name, &args)
            });
        let names_native = |o: &crate::engine::Outcome| {
            o.rule
                .as_ref()
                .and_then(|m| engine.rule(m))
                .is_some_and(|r| r.tool_name == name)
        };
        let out = match mapped {
            Some((mname, margs, mserver)) if !names_native(&native) => {
                let margs = json::parse(&margs.to_string()).ok();
                let q = Call {
                    name: &mname,
                    args: margs.as_ref(),
                    server: mserver.as_deref().or(a.server),
                    annotations: annotations.as_ref(),
                    subagent: a.subagent,
                };
                engine.check_strict(&q)
            }
            _ => native,
        };
        if out.decision == Decision::AskUser {
            return None;
        }
        // A non-interactive agent: the reference turns every ask_user into deny, as nobody is
        // at the agent's prompt. Through askbus a person is reachable, so such a deny asks one
        // instead; only a rule whose own decision is deny denies. (Deny becomes ask, never allow.)
        if out.decision == Decision::Deny && a.interactive == Some(false) {
            let own = out
                .rule
                .as_ref()
                .and_then(|m| engine.rule(m))
                .map(|r| r.decision);
            if own != Some(Decision::Deny) {
                return None;
            }
        }
        let rule_obj: Option<&Rule> = out.rule.as_ref().and_then(|m| engine.rule(m));
        // A rule scoped to another project does not decide here.
        if let (Some(r), Decision::Allow) = (rule_obj, out.decision) {
            if let Some(scope) = &r.project {
                if Some(scope.as_str()) != a.project {
                    return None;
                }
            }
        }
        let rule = match &out.rule {
            Some(m) => serde_json::from_str(&crate::question::rule_json(&engine, m))
                .unwrap_or(serde_json::Value::Null),
            None => serde_json::Value::Null,
        };
        let message = match (&out.decision, &out.rule) {
            (Decision::Deny, Some(Matched::Rule(_))) => {
                rule_obj.and_then(|r| r.deny_message.clone())
            }
            _ => None,
        }
        .or_else(|| {
            (out.decision == Decision::Deny).then(|| "Denied by a policy rule".to_string())
        });
        Some(Verdict {
            decision: out.decision,
            rule,
            message,
        })
    }
}

/// The largest `toolCall` the rules are matched against (larger ones are asked of a person):
/// with the pattern rules below it bounds the regex work of one decision.
pub const MAX_CALL_BYTES: usize = 64 * 1024;

/// The daemon matches under its one lock, so a pattern that backtracks exponentially would
/// stall every user's requests. The reference rejects nested quantifiers; the daemon also drops
/// an alternation under a quantifier (`(a|aa)*`), the other classic trap, and says so.
fn drop_backtracking_traps(loaded: &mut Loaded, path: &Path, tier: Tier) {
    thread_local! {
        static TRAP: crate::regex::JsRegex =
            crate::regex::JsRegex::new(r"\((?:[^()\\]|\\.)*\|(?:[^()\\]|\\.)*\)[*+{]")
                .expect("valid");
    }
    let mut dropped = vec![];
    loaded.rules.retain(|r| {
        let trap = r
            .args_pattern
            .as_ref()
            .is_some_and(|re| TRAP.with(|t| t.test(re.source())));
        if trap {
            dropped.push(
                r.args_pattern
                    .as_ref()
                    .map(|re| re.source().to_string())
                    .unwrap_or_default(),
            );
        }
        !trap
    });
    for pattern in dropped {
        loaded.errors.push(LoadError {
            file: path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
            path: path.to_string_lossy().into_owned(),
            tier: tier.name(),
            kind: "regex_compilation",
            message: "Unsafe regex pattern for askbusd (an alternation under a quantifier)".into(),
            warning: false,
            rule_index: None,
            details: Some(format!("Pattern: {pattern}")),
        });
    }
}

#[cfg(test)]
mod tests;
