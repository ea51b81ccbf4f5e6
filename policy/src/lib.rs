//! askbus's policy engine: Gemini CLI's TOML policy rules, decided exactly as the reference
//! (`@google/gemini-cli-core` 0.61.0, `dist/src/policy/`) decides them.
//!
//! - [`loader`] reads policy files as its `loadPoliciesFromToml` does (TOML 0.5 by
//!   [`toml05`], the schema, the errors), and ships its `policies/*.toml` as the default tier.
//! - [`engine`] is its `PolicyEngine.check`: priorities, shell splitting ([`shell`], by
//!   tree-sitter-bash 0.25.0), redirection, the safety heuristics ([`safety`], reading words
//!   as [`shellquote`] does), build-file protection; plus askbus's stricter compound check.
//! - [`regex`] runs the rules' JavaScript regular expressions over UTF-16, against the args'
//!   stable stringification ([`json`]).
//! - [`tools`] knows the reference's tool names and maps other agents' names onto them.
//! - [`tiers`] is where askbus keeps policy files (shipped, admin, per-user) and the "allow
//!   always" rules it writes.
//!
//! Safety checkers (`[[safety_checker]]`) are parsed and validated as the reference does, never
//! run; the rules Gemini CLI derives from its settings are out of scope.

pub mod daemon;
pub mod engine;
pub mod json;
pub mod loader;
pub mod paths;
pub mod question;
pub mod regex;
pub mod safety;
pub mod shell;
pub mod shellquote;
pub mod tiers;
pub mod toml05;
pub mod tools;

pub use engine::{Call, Engine, EngineError, Matched, Options, Outcome};
pub use loader::{Decision, LoadError, Loaded, Mode, Rule, Tier};
