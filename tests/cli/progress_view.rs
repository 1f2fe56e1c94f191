//! The live view of `phase run` on a terminal (a pseudo-terminal made by `script(1)`): what
//! it writes to stderr, byte for byte.

use crate::common::{bin, skip_unless_tool, Sandbox};

/// `phase run` of `plan` under a pseudo-terminal: everything written to it (stdout dropped).
fn on_a_terminal(s: &Sandbox, plan: &str) -> String {
    s.write("plan.toml", plan);
    let cmd = format!(
        "'{}' phase run plan.toml --workflow w --phase 1 >/dev/null",
        bin().display()
    );
    let out = std::process::Command::new("script")
        .args(["-qec", &cmd, "/dev/null"])
        .current_dir(s.path())
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("TERM", "xterm")
        .env("COLUMNS", "100")
        .env("LINES", "40")
        .env("NO_COLOR", "1")
        .env("XDG_CACHE_HOME", s.cache_home.path())
        .output()
        .expect("script runs");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A warning written while the view is shown goes above it: the view is cleared first
/// (`ESC[J` just before the warning), then drawn again below it. Written into the view, the
/// next redraw moved the cursor up over it and stale lines piled up.
#[test]
fn a_warning_during_the_live_view_prints_above_it() {
    if !skip_unless_tool("script", "TRIAGE_REQUIRE_SCRIPT") {
        return;
    }
    let s = Sandbox::new();
    // A breaker_key that cannot be filled in: each item warns as it starts.
    s.write(
        ".triage.toml",
        "[agents.a]\nbreaker_key = \"{nope}\"\n[agents.b]\nbreaker_key = \"{nope}\"\n",
    );
    let tty = on_a_terminal(
        &s,
        "[[items]]\nid = \"a\"\ncommand = \"sleep 0.4\"\n\
         [[items]]\nid = \"b\"\ncommand = \"sleep 0.2\"\n",
    );
    let warning = "triage phase: warning: breaker_key of agent";
    let at: Vec<usize> = tty.match_indices(warning).map(|(i, _)| i).collect();
    assert_eq!(at.len(), 2, "{tty:?}");
    for i in at {
        let before = &tty[..i];
        let drawn_before = before.contains("running");
        assert!(
            !drawn_before || before.ends_with("\x1b[J"),
            "the warning is written into the view, not above it: {tty:?}"
        );
        if !drawn_before {
            continue;
        }
        // And the view comes back below it.
        let after = &tty[i..];
        let line_end = after.find('\n').unwrap_or(after.len());
        assert!(
            after[line_end..]
                .trim_start_matches(['\r', '\n'])
                .starts_with('a'),
            "the view is drawn again below the warning: {tty:?}"
        );
    }
}

/// An item between attempts reads as waiting, with the attempt that follows: not `running
/// attempt 1`, which has ended.
#[test]
fn an_item_waiting_to_retry_reads_as_waiting() {
    if !skip_unless_tool("script", "TRIAGE_REQUIRE_SCRIPT") {
        return;
    }
    let s = Sandbox::new();
    s.write(".triage.toml", "[retry]\nschedule = [\"1s\"]\n");
    let tty = on_a_terminal(
        &s,
        "[[items]]\nid = \"flaky\"\ncommand = \"[ -e done ] || { touch done; exit 1; }\"\n",
    );
    assert!(
        tty.contains("waiting 1s, then attempt 2 of 2"),
        "no waiting line: {tty:?}"
    );
    assert!(tty.contains("complete"), "{tty:?}");
}
