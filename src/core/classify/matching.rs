//! How the rule tables of [`super::rules`] are run against an error text: the text a rule may
//! look at (stack frames are not evidence), case folding, and the precedence within a table.
//! The matching itself is done by the automata built from the tables at build time
//! ([`mod@super::builtin`]); no regex is compiled.

use super::builtin;
use super::rules::{TextRule, API_TYPES, GENERIC, SPECIFIC, TOOL_EXIT};
use std::borrow::Cow;

/// The lines of an error that are evidence, and their ASCII-lowercased bytes for matching.
pub struct Evidence<'t> {
    /// The text without stack frames, in its own case (for the detail line).
    pub text: Cow<'t, str>,
    /// `text`, ASCII-lowercased.
    pub lower: Vec<u8>,
}

impl<'t> Evidence<'t> {
    /// The evidence in `text`.
    pub fn new(text: &'t str) -> Evidence<'t> {
        let text = without_frames(text);
        let lower = text.to_ascii_lowercase().into_bytes();
        // Every text the unit tests classify also checks the automata against the regexes.
        #[cfg(test)]
        super::builtin::tests::agree(&lower);
        Evidence { text, lower }
    }
}

/// `text` without the lines of a stack trace: JavaScript and Java `at …` frames, Python's
/// `Traceback` header, `File "…", line N` frames and the source line under each, Go and Rust
/// backtrace lines and caret markers. Their function and file names (`Timeout._onTimeout`,
/// `socketCloseListener`, `abortSignal`) say nothing about the error and must not decide it.
fn without_frames(text: &str) -> Cow<'_, str> {
    let mut after_py_file = false;
    let mut keep = Vec::new();
    let mut dropped = false;
    for line in text.lines() {
        let frame = is_frame(line, after_py_file) || is_echo(line);
        after_py_file = is_py_file(line.trim_start());
        if frame {
            dropped = true;
        } else {
            keep.push(line);
        }
    }
    if dropped {
        Cow::Owned(keep.join("\n"))
    } else {
        Cow::Borrowed(text)
    }
}

/// A shell prompt's echo of the command that was typed (`$ cmd`, `user@host:~/dir$ cmd`,
/// `[user@host dir]$ cmd`, `➜  dir cmd`, `PS C:\dir> cmd`): the command's own words (a
/// `--timeout 30`, `timeout 10 curl …`, a file named `error.log`) are what was asked, not what
/// went wrong, so they are not evidence; the lines it printed are.
fn is_echo(line: &str) -> bool {
    let t = line.trim_start();
    if ["$ ", "➜  "].iter().any(|p| t.starts_with(p)) {
        return true;
    }
    if let Some(rest) = t.strip_prefix("PS ") {
        return rest.get(1..3) == Some(":\\") && rest.contains("> ");
    }
    // `user@host:dir$ ` or `[user@host dir]# `: the prompt is one word, or one bracketed group.
    let Some(at) = t.find(['$', '#']) else {
        return false;
    };
    let (prompt, rest) = t.split_at(at);
    let one_word =
        !prompt.contains(char::is_whitespace) || (prompt.starts_with('[') && prompt.ends_with(']'));
    rest.get(1..2) == Some(" ") && prompt.contains('@') && prompt.len() <= 80 && one_word
}

fn is_py_file(t: &str) -> bool {
    t.starts_with("File \"") && t.contains("\", line ")
}

fn is_frame(line: &str, after_py_file: bool) -> bool {
    let t = line.trim_start();
    let indent = line.len() - t.len();
    if t.is_empty() {
        return false;
    }
    // Python: the frame, the source line below it (indented deeper), the header.
    if is_py_file(t) || (after_py_file && indent >= 4) || t == "Traceback (most recent call last):"
    {
        return true;
    }
    // A caret or tilde line pointing into the source line above.
    if indent > 0 && t.bytes().all(|b| matches!(b, b'^' | b'~' | b' ' | b'|')) {
        return true;
    }
    let t = t.trim_end();
    // JavaScript, Java, Bun, Rust's `at file:line:col`: `at name (file:line:col)` or `at file:line`.
    if indent > 0 && t.starts_with("at ") {
        let tail = t.rsplit(':').next().unwrap_or("");
        return t.ends_with(')') || (!tail.is_empty() && tail.bytes().all(|b| b.is_ascii_digit()));
    }
    // Go: `\t/path/main.go:12 +0x1d`.
    if indent > 0
        && t.contains(".go:")
        && (t.contains(" +0x") || t.ends_with(|c: char| c.is_ascii_digit()))
    {
        return true;
    }
    // Rust and V8 numbered backtrace lines: `  3: core::panicking::panic`, `10: 00007FF6…`.
    let digits = t.bytes().take_while(u8::is_ascii_digit).count();
    if digits > 0 && t[digits..].starts_with(": ") {
        let rest = &t[digits + 2..];
        let hex = rest
            .trim_start_matches("0x")
            .bytes()
            .take_while(u8::is_ascii_hexdigit)
            .count();
        return indent > 0 || hex >= 6;
    }
    false
}

/// The first rule of [`SPECIFIC`] that matches, and where its match starts.
pub fn specific(lower: &[u8]) -> Option<(&'static TextRule, usize)> {
    hit(SPECIFIC, builtin::SPECIFIC.first(lower))
}

/// The first rule of [`API_TYPES`] that matches.
pub fn api_type(lower: &[u8]) -> Option<(&'static TextRule, usize)> {
    hit(API_TYPES, builtin::API_TYPES.first(lower))
}

/// The rule of [`GENERIC`] that matches on the earliest line; on one line, the first in table
/// order.
pub fn generic(lower: &[u8]) -> Option<(&'static TextRule, usize)> {
    hit(GENERIC, builtin::GENERIC.earliest_line(lower))
}

/// [`TOOL_EXIT`], when it matches.
pub fn tool_exit(lower: &[u8]) -> Option<(&'static TextRule, usize)> {
    hit(
        std::slice::from_ref(&TOOL_EXIT),
        builtin::TOOL_EXIT.first(lower),
    )
}

fn hit(
    rules: &'static [TextRule],
    found: Option<(usize, usize)>,
) -> Option<(&'static TextRule, usize)> {
    let (n, at) = found?;
    Some((rules.get(n)?, at))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stack_frames_are_not_evidence() {
        let js = "Error: Request was aborted.\n    at Ho._createMessage (file:///cli.js:1373:6810)\n    at node:internal/main/run_main_module:28:49";
        assert_eq!(Evidence::new(js).text, "Error: Request was aborted.");
        let py = "Traceback (most recent call last):\n  File \"a.py\", line 3, in <module>\n    raise ReadTimeoutError('x')\nKeyError: 'x'";
        assert_eq!(Evidence::new(py).text, "KeyError: 'x'");
        let rust = "thread 'main' panicked at src/main.rs:2:5:\nboom\nstack backtrace:\n   0: rust_begin_unwind\n             at /rustc/x/panicking.rs:689:5";
        assert_eq!(
            Evidence::new(rust).text,
            "thread 'main' panicked at src/main.rs:2:5:\nboom\nstack backtrace:"
        );
        let v8 = "FATAL ERROR: heap out of memory\n 1: 0xb8d11b node::OOMErrorHandler\n10: 00007FF61C10DD3B v8::internal";
        assert_eq!(Evidence::new(v8).text, "FATAL ERROR: heap out of memory");
        // A wrapped message line that happens to begin with "at" is kept.
        let wrapped = "Your limit will reset\n     at 3pm (America/Santiago).";
        assert_eq!(Evidence::new(wrapped).text, wrapped);
        assert!(matches!(Evidence::new("plain").text, Cow::Borrowed(_)));
    }

    #[test]
    fn a_prompts_echo_of_the_command_is_not_evidence() {
        for echo in [
            "$ curl --max-time 5 https://x.invalid",
            "  $ npm test -- --timeout 30",
            "user@host:~/src/app$ tail error.log",
            "root@e62e48b00536:/# rg -l pattern",
            "[vagrant@box ~]$ docker stop tomcat",
            "➜  app git push origin main",
            "PS C:\\Users\\me> npm run build",
        ] {
            assert!(is_echo(echo), "{echo}");
        }
        for line in [
            "> a quoted line of an issue",
            "remote: error: GH006: Protected branch update failed",
            "Total: $ 5",
            "curl: (6) Could not resolve host: x.invalid",
            "mail me at a@b.c # later",
        ] {
            assert!(!is_echo(line), "{line}");
        }
        let text = "$ timeout 30 make\nmake: *** No rule to make target 'x'.  Stop.";
        assert_eq!(
            Evidence::new(text).text,
            "make: *** No rule to make target 'x'.  Stop."
        );
    }
}
