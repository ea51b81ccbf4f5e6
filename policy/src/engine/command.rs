//! Shell commands: the reference's splitting of a command into parts, each part checked on its
//! own, the redirection downgrade and the safety heuristics for what no rule pinned down.

use super::*;

impl Engine {
    pub(super) fn should_downgrade_for_redirection(
        &self,
        command: &[u16],
        allow_redirection: Option<bool>,
    ) -> bool {
        if allow_redirection == Some(true) {
            return false;
        }
        if !shell::has_redirection(command) {
            return false;
        }
        !matches!(self.options.mode, Mode::AutoEdit | Mode::Yolo)
    }

    pub(super) fn apply_shell_heuristics(
        &self,
        command: &str,
        decision: Decision,
        dir_path: Option<&JsValue>,
        trace: &mut Trace,
    ) -> Decision {
        if decision == Decision::Deny {
            return Decision::Deny;
        }
        let Ok(words) = shellquote::words(command) else {
            return decision;
        };
        let workspace = self.place.workspace.as_str();
        let effective_cwd = match dir_path {
            Some(d) if d.truthy() => match d {
                JsValue::String(s) => paths::resolve(workspace, &String::from_utf16_lossy(s)),
                // path.resolve throws on a non-string: the reference's catch keeps the decision.
                _ => return decision,
            },
            _ => workspace.to_string(),
        };
        let inside =
            effective_cwd == workspace || paths::is_subpath(workspace, workspace, &effective_cwd);
        if !inside && self.options.mode != Mode::Yolo {
            trace.notes.push(format!(
                "the working directory {effective_cwd} is outside the workspace: ask"
            ));
            return Decision::AskUser;
        }
        let git = safety::contains_git_command(&words);
        if git && !self.options.trusted {
            trace
                .notes
                .push("a git command in an untrusted folder: ask".into());
            return Decision::AskUser;
        }
        if safety::is_dangerous_command(&words) {
            if self.options.mode == Mode::Yolo {
                return decision;
            }
            trace
                .notes
                .push(format!("`{}` is a dangerous command: ask", words.join(" ")));
            return Decision::AskUser;
        }
        if decision == Decision::AskUser
            && safety::is_known_safe_command(&self.place, &words, &effective_cwd)
        {
            if !inside {
                return Decision::AskUser;
            }
            if git && !self.options.trusted {
                return Decision::AskUser;
            }
            trace.notes.push(format!(
                "`{}` is a known read-only command: allow",
                words.join(" ")
            ));
            return Decision::Allow;
        }
        decision
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn check_shell_command(
        &self,
        call: &Call<'_>,
        command: Option<&[u16]>,
        rule_decision: Decision,
        server: Option<&str>,
        dir_path: Option<&JsValue>,
        allow_redirection: Option<bool>,
        rule: Option<usize>,
        trace: &mut Trace,
        depth: usize,
    ) -> Outcome {
        let rule_m = rule.map(Matched::Rule);
        let Some(command) = command.filter(|c| !c.is_empty()) else {
            return Outcome {
                decision: rule_decision,
                rule: rule_m,
                trace: trace.clone(),
            };
        };
        let parsed = shell::parse_command_details(command);
        let (details, has_error) = match &parsed {
            Some(p) => (p.details.as_slice(), p.has_error),
            None => (&[][..], false),
        };
        if details.is_empty() || has_error {
            if rule_decision == Decision::Deny {
                return Outcome {
                    decision: Decision::Deny,
                    rule: rule_m,
                    trace: trace.clone(),
                };
            }
            if self.options.mode == Mode::Yolo {
                if rule.is_some_and(|i| self.rules[i].args_pattern.is_some()) {
                    trace.notes.push(
                        "the command does not parse and the rule restricts its arguments: deny"
                            .into(),
                    );
                    return Outcome {
                        decision: Decision::Deny,
                        rule: rule_m,
                        trace: trace.clone(),
                    };
                }
                return Outcome {
                    decision: Decision::Allow,
                    rule: rule_m,
                    trace: trace.clone(),
                };
            }
            trace
                .notes
                .push("the command does not parse: the default decision".into());
            return Outcome {
                decision: self.default_decision,
                rule: rule_m,
                trace: trace.clone(),
            };
        }
        if rule_decision == Decision::Deny {
            return Outcome {
                decision: Decision::Deny,
                rule: rule_m,
                trace: trace.clone(),
            };
        }
        if details.len() > 1 && depth == 0 {
            trace.parts = details
                .iter()
                .filter(|d| !REDIRECTION_NAMES.contains(&d.name.as_str()))
                .map(|d| String::from_utf16_lossy(&d.text))
                .collect();
        }
        let mut aggregate = rule_decision;
        let mut responsible: Option<Matched> = match rule {
            Some(i) if self.rules[i].decision == rule_decision => Some(Matched::Rule(i)),
            _ => None,
        };
        if self.should_downgrade_for_redirection(command, allow_redirection)
            && aggregate == Decision::Allow
        {
            trace
                .notes
                .push("the command redirects: allow becomes ask".into());
            aggregate = Decision::AskUser;
            responsible = None;
        }
        for d in details {
            if REDIRECTION_NAMES.contains(&d.name.as_str()) {
                continue;
            }
            let sub = js_trim_utf16(&d.text).to_vec();
            let atomic = sub == command || (d.start == 0 && d.text.len() == command.len());
            let stripped = shell::strip_shell_wrapper(&sub);
            if stripped != sub {
                let r = self.check_sub(call, &stripped, dir_path, server, trace, depth);
                if r.decision == Decision::Deny {
                    return r;
                }
                if r.decision == Decision::AskUser {
                    // Allow: the part is now to blame; otherwise the first to blame stays.
                    if aggregate == Decision::Allow || responsible.is_none() {
                        responsible = r.rule.clone();
                    }
                    aggregate = Decision::AskUser;
                }
            }
            if !atomic {
                let r = self.check_sub(call, &sub, dir_path, server, trace, depth);
                if r.decision == Decision::Deny {
                    return r;
                }
                if r.decision == Decision::AskUser {
                    // Allow: the part is now to blame; otherwise the first to blame stays.
                    if aggregate == Decision::Allow || responsible.is_none() {
                        responsible = r.rule.clone();
                    }
                    aggregate = Decision::AskUser;
                }
                if r.decision == Decision::Allow
                    && self.should_downgrade_for_redirection(&sub, allow_redirection)
                    && aggregate == Decision::Allow
                {
                    aggregate = Decision::AskUser;
                    responsible = None;
                }
            }
        }
        let rule_out = if aggregate == rule_decision {
            rule_m
        } else {
            responsible
        };
        Outcome {
            decision: aggregate,
            rule: rule_out,
            trace: trace.clone(),
        }
    }

    pub(super) fn check_sub(
        &self,
        call: &Call<'_>,
        command: &[u16],
        dir_path: Option<&JsValue>,
        server: Option<&str>,
        trace: &mut Trace,
        depth: usize,
    ) -> Outcome {
        let mut entries = vec![(
            "command".encode_utf16().collect::<Vec<u16>>(),
            JsValue::String(command.to_vec()),
        )];
        if let Some(d) = dir_path {
            entries.push(("dir_path".encode_utf16().collect(), d.clone()));
        }
        let args = JsValue::Object(entries);
        let sub = Call {
            name: call.name,
            args: Some(&args),
            server,
            annotations: call.annotations,
            subagent: call.subagent,
        };
        let mut sub_trace = Trace::default();
        let out = self.check_inner(&sub, true, &mut sub_trace, depth + 1);
        let label = String::from_utf16_lossy(command);
        trace
            .notes
            .push(format!("part `{label}`: {}", out.decision.as_str()));
        for n in out.trace.notes.iter() {
            trace.notes.push(format!("  {n}"));
        }
        out
    }
}
