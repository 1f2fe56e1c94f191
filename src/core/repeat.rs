//! The fingerprint of a failure, so that the hook can tell the same failure coming back in a
//! session (issue 29): the tool, what it was asked to do (its command or target) and the
//! error's signature (its kind and first error line), each normalized so that what changes
//! between two runs of the same failing command — numbers, line and column, timestamps,
//! process ids, hex ids and uuids, paths under temp folders — does not make them differ.

use crate::core::vocab::Kind;
use serde_json::Value;
use sha2::{Digest, Sha256};

/// How much of a normalized command or error line is kept: enough to tell two commands
/// apart, bounded so a hostile payload cannot make the fingerprint costly.
const KEEP_CHARS: usize = 400;

/// The prefixes of temp folders: what follows them up to the end of the word is a name made
/// up for one run.
const TEMP_PREFIXES: &[&str] = &[
    "/tmp/",
    "/var/tmp/",
    "/private/tmp/",
    "/var/folders/",
    "/private/var/folders/",
    "\\Temp\\",
    "\\TEMP\\",
    "\\tmp\\",
];

/// The fingerprint of a failure of `tool` called with `tool_input`, of `kind`, that printed
/// `error`: 16 hex digits.
pub fn fingerprint(
    tool: Option<&str>,
    tool_input: Option<&Value>,
    kind: Kind,
    error: Option<&str>,
) -> String {
    let mut h = Sha256::new();
    for part in [
        tool.unwrap_or("-"),
        &target(tool_input),
        kind.as_str(),
        &first_error_line(error.unwrap_or_default()),
    ] {
        h.update(part.as_bytes());
        h.update([0u8]);
    }
    h.finalize()
        .iter()
        .take(8)
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// What the tool was asked to do, normalized: its command, else the path, URL, pattern or
/// subagent type it was given, else the whole input.
fn target(input: Option<&Value>) -> String {
    let Some(input) = input else {
        return String::new();
    };
    for key in [
        "command",
        "file_path",
        "notebook_path",
        "path",
        "url",
        "pattern",
        "subagent_type",
    ] {
        if let Some(s) = input.get(key).and_then(Value::as_str) {
            return format!("{key}={}", normalize_command(s));
        }
    }
    normalize_command(&input.to_string())
}

/// A command or target with what a rerun of the same command changes replaced (temp paths,
/// hex ids and uuids of 8 digits or more); its other numbers stay (`file1.txt` is not
/// `file2.txt`, `head -5` not `head -50`).
pub fn normalize_command(text: &str) -> String {
    normalize_with(text, 8)
}

/// The first line of `error` that says something: not blank, not the client's `Exit code N`.
pub fn first_error_line(error: &str) -> String {
    error
        .lines()
        .map(str::trim)
        .find(|l| {
            !l.is_empty()
                && !l
                    .strip_prefix("Exit code")
                    .is_some_and(|rest| rest.trim().chars().all(|c| c.is_ascii_digit()))
        })
        .map(normalize)
        .unwrap_or_default()
}

/// `text` with what varies between two runs of the same thing replaced: paths under temp
/// folders by `<tmp>`, hex ids and uuids (a run of hex digits with a digit in it) and every
/// other number by `#`; runs of white space by one space. At most [`KEEP_CHARS`]
/// characters of the text are read.
pub fn normalize(text: &str) -> String {
    normalize_with(text, 0)
}

/// [`normalize`], replacing only hex runs of `min_hex` digits or more when `min_hex` > 0
/// (then other numbers stay).
fn normalize_with(text: &str, min_hex: usize) -> String {
    let text: String = text.chars().take(KEEP_CHARS).collect();
    let mut words = Vec::new();
    for word in text.split_whitespace() {
        let word = match TEMP_PREFIXES.iter().filter_map(|p| word.find(p)).min() {
            Some(at) => format!("{}<tmp>", &word[..at]),
            None => word.to_string(),
        };
        words.push(numbers_out(&word, min_hex));
    }
    words.join(" ")
}

/// Replaces each run of letters and digits that is a hex id (of `min_hex` digits or more) by
/// `#`, and, when `min_hex` is 0, each run of digits in the others by `#`.
fn numbers_out(word: &str, min_hex: usize) -> String {
    let mut out = String::with_capacity(word.len());
    let mut run = String::new();
    let flush = |run: &mut String, out: &mut String| {
        if run.is_empty() {
            return;
        }
        let hex_id = run.len() >= min_hex
            && run.chars().all(|c| c.is_ascii_hexdigit())
            && run.chars().any(|c| c.is_ascii_digit());
        if hex_id {
            out.push('#');
        } else if min_hex > 0 {
            out.push_str(run);
        } else {
            let mut in_digits = false;
            for c in run.chars() {
                if c.is_ascii_digit() {
                    if !in_digits {
                        out.push('#');
                    }
                    in_digits = true;
                } else {
                    out.push(c);
                    in_digits = false;
                }
            }
        }
        run.clear();
    };
    for c in word.chars() {
        if c.is_alphanumeric() {
            run.push(c);
        } else {
            flush(&mut run, &mut out);
            out.push(c);
        }
    }
    flush(&mut run, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn what_varies_between_runs_is_normalized_away() {
        assert_eq!(
            normalize("src/a.ts(12,5): error TS2322: Type 'x'"),
            "src/a.ts(#,#): error TS#: Type 'x'"
        );
        assert_eq!(
            normalize("at 2026-11-25T10:00:00Z pid 4242 in /tmp/jest-abc123/x.js"),
            "at #-#-#T#:#:#Z pid # in <tmp>"
        );
        assert_eq!(
            normalize("request 3f2a9c1b-0d4e-4b8a-9f00-1234567890ab failed, commit deadbeef42"),
            "request #-#-#-#-# failed, commit #"
        );
        assert_eq!(normalize("  npm   ERR!\tcode  "), "npm ERR! code");
        // Words are kept: a hex-looking word with no digit is a word.
        assert_eq!(normalize("added faced"), "added faced");
    }

    #[test]
    fn the_same_failure_gets_the_same_fingerprint_and_another_one_another() {
        let cmd = json!({"command": "npx jest src/sum.test.js"});
        let a = fingerprint(
            Some("Bash"),
            Some(&cmd),
            Kind::TestFailed,
            Some("Exit code 1\nFAIL src/sum.test.js (5.123 s)\n"),
        );
        let b = fingerprint(
            Some("Bash"),
            Some(&cmd),
            Kind::TestFailed,
            Some("Exit code 1\n\nFAIL src/sum.test.js (4.9 s)"),
        );
        assert_eq!(a, b);
        assert_eq!(a.len(), 16);
        let other_kind = fingerprint(Some("Bash"), Some(&cmd), Kind::Timeout, Some("FAIL"));
        let other_cmd = fingerprint(
            Some("Bash"),
            Some(&json!({"command": "npx jest src/mul.test.js"})),
            Kind::TestFailed,
            Some("FAIL src/sum.test.js (5 s)"),
        );
        // Two files are two commands, though a run's temp folder is not.
        assert_ne!(
            normalize_command("grep -q needle file1.txt"),
            normalize_command("grep -q needle file2.txt")
        );
        assert_eq!(
            normalize_command("cat /tmp/tmp.a1B2c3/out  | head -5"),
            "cat <tmp> | head -5"
        );
        assert_eq!(
            normalize_command("git show 3f2a9c1b0d4e"),
            normalize_command("git show 0d4e3f2a9c1b")
        );
        let other_tool = fingerprint(Some("Read"), Some(&cmd), Kind::TestFailed, Some("FAIL"));
        assert_ne!(a, other_kind);
        assert_ne!(a, other_cmd);
        assert_ne!(other_kind, other_tool);
    }

    #[test]
    fn the_first_error_line_skips_the_exit_code() {
        assert_eq!(first_error_line("Exit code 2\n\n  boom 42\nmore"), "boom #");
        assert_eq!(first_error_line("Exit code 1"), "");
        assert_eq!(first_error_line(""), "");
    }
}
