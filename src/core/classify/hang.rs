//! A hang, told by a status line: the spinner a client or a tool shows while it waits, with
//! the time elapsed since it started (`✽ Infusing… (1h 57m 55s · ↓ 153.5k tokens)`, Gemini
//! CLI's `⠹ Finalizing (esc to cancel, 5055s)`). Quoted as the failure, a spinner that has run
//! longer than any tool call may is the sign of a hang, whatever the command above it was.
//! Read by hand, not by a pattern: the elapsed time is parsed and compared.

/// Past this, a spinner is a hang: Claude Code's Bash tool runs a command for at most 10
/// minutes (its longest `timeout`), so a call still spinning after that is stuck.
pub const HANG_AFTER_S: f64 = 600.0;

/// The line (byte offset of its start) and elapsed seconds of the longest-running status line
/// in `text` whose elapsed time is at least [`HANG_AFTER_S`].
pub fn stalled(text: &str) -> Option<(usize, f64)> {
    let mut best: Option<(usize, f64)> = None;
    let mut at = 0;
    for line in text.split_inclusive('\n') {
        if let Some(s) = elapsed(line) {
            if s >= HANG_AFTER_S && best.is_none_or(|(_, b)| s > b) {
                best = Some((at, s));
            }
        }
        at += line.len();
    }
    best
}

/// The elapsed seconds a status line shows: a parenthesised group at the end of the line
/// whose parts (split at `·` or `,`) hold a duration, on a line that is a status (the group
/// also says `esc to …` or counts tokens, or the text before it ends in an ellipsis).
pub fn elapsed(line: &str) -> Option<f64> {
    let line = line.trim_end();
    let body = line.strip_suffix(')')?;
    let open = body.rfind('(')?;
    let (before, group) = (&body[..open], &body[open + 1..]);
    let parts: Vec<&str> = group.split(['·', ',']).map(str::trim).collect();
    let status = before.trim_end().ends_with('…')
        || before.trim_end().ends_with("...")
        || parts.iter().any(|p| {
            let p = p.to_ascii_lowercase();
            p.starts_with("esc to ") || p.ends_with(" tokens")
        });
    if !status {
        return None;
    }
    parts.iter().filter_map(|p| duration(p)).reduce(f64::max)
}

/// `1h 57m 55s`, `10m 9s`, `5055s`, `2.5s`: whitespace-separated numbers each with a unit
/// (`h`, `m`, `s`), summed. Anything else in the part, and it is not a duration.
fn duration(part: &str) -> Option<f64> {
    let mut total = 0.0;
    let mut any = false;
    for token in part.split_whitespace() {
        let unit = token.chars().last()?;
        let scale = match unit {
            'h' => 3600.0,
            'm' => 60.0,
            's' => 1.0,
            _ => return None,
        };
        let number = &token[..token.len() - 1];
        if number.is_empty() || !number.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
            return None;
        }
        let n: f64 = number.parse().ok()?;
        total += n * scale;
        any = true;
    }
    any.then_some(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_lines_give_their_elapsed_time() {
        // https://github.com/anthropics/claude-code/issues/63100
        assert_eq!(
            elapsed("✽ Infusing… (1h 57m 55s · ↓ 153.5k tokens)"),
            Some(7075.0)
        );
        // https://github.com/anthropics/claude-code/issues/43769
        assert_eq!(elapsed("✶ Seasoning… (10m 9s · ↑ 198 tokens)"), Some(609.0));
        // https://github.com/google-gemini/gemini-cli/issues/4074
        assert_eq!(
            elapsed("⠹ Finalizing Code Implementation (esc to cancel, 5055s)"),
            Some(5055.0)
        );
        assert_eq!(
            elapsed("✻ Thinking… (esc to interrupt · 2.5s)  "),
            Some(2.5)
        );
    }

    #[test]
    fn other_parentheses_are_not_status_lines() {
        for line in [
            // A test's own duration, a retry's attempt count, a token count without a time.
            "--- FAIL: TestResolver-4 (0.00s)",
            "API Error (Request timed out.) · Retrying in 37 seconds… (attempt 7/10)",
            "✽ Infusing… (↓ 153.5k tokens)",
            "Compiling (10m)", // no status sign
            "✻ Thinking… (esc to interrupt · 10 minutes)",
            "✻ Thinking… (esc to interrupt · 1x5s)",
            "no parentheses…",
        ] {
            assert_eq!(elapsed(line), None, "{line}");
        }
    }

    #[test]
    fn a_hang_is_a_status_line_past_the_longest_tool_call() {
        let text =
            "● Bash(pytest -q)\n  ⎿  Waiting…\n\n✽ Infusing… (1h 57m 55s · ↓ 153.5k tokens)\n";
        let (at, s) = stalled(text).expect("stalled");
        assert_eq!(s, 7075.0);
        assert!(text[at..].starts_with("✽ Infusing"));
        // Under ten minutes: still working.
        assert_eq!(stalled("✶ Seasoning… (9m 59s · ↑ 198 tokens)"), None);
        assert!(stalled("✶ Seasoning… (10m 0s · ↑ 198 tokens)").is_some());
    }
}
