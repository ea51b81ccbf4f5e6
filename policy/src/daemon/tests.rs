//! The policy set's tests: tiers loaded, reloaded and asked as the daemon does.

use super::*;

fn set_with(dir: &Path) -> PolicySet {
    let d = dir.to_path_buf();
    let uid = nix_uid(dir);
    PolicySet::new(
        Sources {
            defaults: true,
            admin_dir: dir.join("no-admin"),
            admin_owner: 0,
        },
        move |u| (u == uid).then(|| d.clone()),
    )
}

fn nix_uid(p: &Path) -> u32 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(p).expect("dir").uid()
}

fn shell(command: &str) -> String {
    serde_json::json!({"name": "run_shell_command", "args": {"command": command}}).to_string()
}

#[test]
fn other_agents_tools_are_decided_as_the_reference_s() {
    let dir = tempfile::tempdir().expect("tmp");
    let uid = nix_uid(dir.path());
    std::fs::write(
        dir.path().join("rules.toml"),
        "[[rule]]\ntoolName = \"run_shell_command\"\ncommandPrefix = \"git status\"\ndecision = \"allow\"\npriority = 10\n\n\
         [[rule]]\ntoolName = \"mcp_github_create_issue\"\ndecision = \"deny\"\ndenyMessage = \"no issues\"\npriority = 10\n\n\
         [[rule]]\ntoolName = \"Bash\"\ncommandPrefix = \"make\"\ndecision = \"deny\"\ndenyMessage = \"not make\"\npriority = 10\n",
    )
    .expect("write");
    let set = set_with(dir.path());
    let ask = |agent: &str, call: serde_json::Value| {
        let text = call.to_string();
        set.decide(&Approval {
            uid,
            tool_call: &text,
            agent: Some(agent),
            ..Approval::default()
        })
        .map(|v| (v.decision, v.message))
    };
    let bash =
        |c: &str| serde_json::json!({"name": "Bash", "args": {"command": c, "description": "d"}});
    for agent in ["claude-code", "codex"] {
        assert_eq!(
            ask(agent, bash("git status")),
            Some((Decision::Allow, None))
        );
        // A rule naming the agent's own tool still decides.
        assert_eq!(
            ask(agent, bash("make all")),
            Some((Decision::Deny, Some("not make".into())))
        );
        assert_eq!(ask(agent, bash("rm -rf /tmp/x")), None);
        assert_eq!(
            ask(
                agent,
                serde_json::json!({"name": "mcp__github__create_issue", "args": {}})
            ),
            Some((Decision::Deny, Some("no issues".into())))
        );
    }
    // Claude Code's Read is the reference's read_file, allowed by the shipped defaults.
    let read = serde_json::json!({"name": "Read", "args": {"file_path": "/tmp/x"}});
    assert_eq!(
        ask("claude-code/2.0.1", read.clone()),
        Some((Decision::Allow, None))
    );
    // Gemini CLI's own names are not mapped: a tool it does not have stays unknown.
    assert_eq!(ask("gemini-cli", read), None);
    // Codex's argv form.
    let argv = serde_json::json!({"name": "exec_command",
        "args": {"command": ["bash", "-lc", "git status"]}});
    assert_eq!(ask("codex", argv), Some((Decision::Allow, None)));
}

// Bounded work shows as this test finishing: a backtracking trap or a quadratic load would
// not. No wall-clock bound here (timing belongs in the benches, not in a test under load).
#[test]
fn hostile_files_cost_bounded_work() {
    let dir = tempfile::tempdir().expect("tmp");
    let uid = nix_uid(dir.path());
    // 100k rules in one file; a 3,000-character pattern; exponential backtracking traps.
    let mut big = String::new();
    for i in 0..100_000 {
        big.push_str(&format!(
            "[[rule]]\ntoolName = \"tool_{i}\"\ndecision = \"deny\"\npriority = 1\n"
        ));
    }
    std::fs::write(dir.path().join("a-big.toml"), big).expect("write");
    std::fs::write(
        dir.path().join("b-regex.toml"),
        format!(
            "[[rule]]\ntoolName = \"run_shell_command\"\nargsPattern = \"{}\"\ndecision = \"allow\"\npriority = 5\n\n\
             [[rule]]\ntoolName = \"run_shell_command\"\nargsPattern = \"(a|aa)*c\"\ndecision = \"allow\"\npriority = 6\n\n\
             [[rule]]\ntoolName = \"run_shell_command\"\nargsPattern = \"(a+)+c\"\ndecision = \"allow\"\npriority = 7\n",
            "x".repeat(3000)
        ),
    )
    .expect("write");
    let set = set_with(dir.path());
    let call = shell(&format!("python3 {}", "a".repeat(5000)));
    let v = set.decide(&Approval {
        uid,
        tool_call: &call,
        ..Approval::default()
    });
    assert_eq!(v, None, "none of the hostile rules may allow");
    let errors = set.errors().join("\n");
    assert!(
        errors.contains("Unsafe regex pattern (potential ReDoS)"),
        "{errors}"
    );
    assert!(
        errors.contains("an alternation under a quantifier"),
        "{errors}"
    );
    // The 100k rules loaded and decide.
    let call = serde_json::json!({"name": "tool_99999", "args": {}}).to_string();
    let v = set
        .decide(&Approval {
            uid,
            tool_call: &call,
            ..Approval::default()
        })
        .expect("a rule denies");
    assert_eq!(v.decision, Decision::Deny);
    // A huge call is not matched at all.
    let call = shell(&"a".repeat(MAX_CALL_BYTES));
    assert_eq!(
        set.decide(&Approval {
            uid,
            tool_call: &call,
            ..Approval::default()
        }),
        None
    );
}
