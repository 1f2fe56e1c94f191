//! A realistic coding session on the current client, scripted through the fake API: a TDD
//! loop (a failing test, an edit, the test passes) three times, a grep with no match, a lint
//! failure, an npm resolution error, the same failing build three times, one 529 mid-session
//! (retried by the client), a subagent whose answer is an API error, one that says nothing,
//! and an undefined agent type. The project's tools are small scripts that print what the real
//! ones print and exit as they do.
//!
//! Asserted from what the model received (the hook texts the client put into later requests)
//! and from `.triage/`: nothing injected for the TDD loop, the grep and the lint failure; the
//! third identical failure gets the change-approach line, once; the API-error subagent and the
//! empty one are recorded and reach the model; the undefined type charges no breaker; the words
//! triage injects over the whole session are printed and bounded.
//!
//! Everything the model reads in the session is also compared with a golden file,
//! `tests/e2e/golden/session.txt`: each hook text as the client wrote it into the requests
//! (additional context, deny and block reasons with the client's own label and command prefix,
//! SessionStart), in order, under the call it followed, with the scenario's folder, the triage
//! binary's path, the port, ids and times normalised. A change fails with a diff of that file;
//! when the change is intended, review it and rerun with `TRIAGE_E2E_BLESS=1` (and
//! `TRIAGE_E2E_CLIENT=2.1.332`, the scenario's client) to rewrite it.

use crate::client::Project;
use crate::server::{FakeApi, Reply, Request};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

type Outcome = Result<(), String>;

macro_rules! ensure {
    ($cond:expr, $($fmt:tt)*) => {
        if !$cond {
            return Err(format!($($fmt)*));
        }
    };
}

const MARKER: &str = "E2E-SESSION";
/// The line the third identical failure gets (issue 29).
const CHANGE_APPROACH: &str = "the same command failed the same way 3 times";
/// At most this many words injected by triage over the whole session.
const WORD_BOUND: usize = 250;

const JEST: &str = r#"#!/bin/sh
# jest, as it reports one test file.
f=$(basename "$1" .test.js)
if [ -f "src/$f.js" ]; then
  echo "PASS src/$f.test.js"
  echo "  $f"
  echo "    ✓ returns the total (3 ms)"
  echo
  echo "Tests:       4 passed, 4 total"
  echo "Time:        0.412 s"
  exit 0
fi
cat >&2 <<END
FAIL src/$f.test.js
  ● $f › returns the total

    expect(received).toBe(expected) // Object.is equality

    Expected: 6
    Received: undefined

      3 | test('returns the total', () => {
    > 4 |   expect($f([1, 2, 3])).toBe(6);
        |                         ^
      5 | });

      at Object.<anonymous> (src/$f.test.js:4:25)

Test Suites: 1 failed, 1 total
Tests:       1 failed, 3 passed, 4 total
Time:        0.538 s
Ran all test suites matching /src\/$f.test.js/i.
END
exit 1
"#;

const ESLINT: &str = r#"#!/bin/sh
cat <<END

$PWD/src/total.js
  3:7   error  'unused' is assigned a value but never used  no-unused-vars
  11:1  error  Expected indentation of 2 spaces but found 4   indent

✖ 2 problems (2 errors, 0 warnings)
  1 error and 0 warnings potentially fixable with the \`--fix\` option.

END
exit 1
"#;

const TSC: &str = r#"#!/bin/sh
cat <<END
src/total.ts(12,5): error TS2322: Type 'string' is not assignable to type 'number'.

12     total = row.amount;
       ~~~~~


Found 1 error in src/total.ts:12

END
exit 2
"#;

const NPM_INSTALL: &str = r#"#!/bin/sh
cat >&2 <<END
npm ERR! code ERESOLVE
npm ERR! ERESOLVE unable to resolve dependency tree
npm ERR!
npm ERR! While resolving: shop@1.0.0
npm ERR! Found: react@18.3.1
npm ERR! node_modules/react
npm ERR!   react@"^18.3.1" from the root project
npm ERR!
npm ERR! Could not resolve dependency:
npm ERR! peer react@"^16.8.5 || ^17.0.0" from react-beautiful-dnd@13.1.1
npm ERR! node_modules/react-beautiful-dnd
npm ERR!   react-beautiful-dnd@"^13.1.1" from the root project
npm ERR!
npm ERR! Fix the upstream dependency conflict, or retry
npm ERR! this command with --force or --legacy-peer-deps
npm ERR! to accept an incorrect (and potentially broken) dependency resolution.
npm ERR!
npm ERR! For a full report see:
npm ERR! $HOME/.npm/_logs/2026-11-25T10_14_03_221Z-eresolve-report.txt

npm ERR! A complete log of this run can be found in: $HOME/.npm/_logs/2026-11-25T10_14_03_221Z-debug-0.log
END
exit 1
"#;

/// The project: its tools, and a source tree to search.
fn project() -> Project {
    let p = Project::new("session");
    for (path, text, exec) in [
        ("node_modules/.bin/jest", JEST, true),
        ("node_modules/.bin/eslint", ESLINT, true),
        ("node_modules/.bin/tsc", TSC, true),
        ("scripts/npm-install.sh", NPM_INSTALL, true),
        (
            "src/total.js",
            "export function total(rows) {\n  return rows.reduce((a, r) => a + r.amount, 0);\n}\n",
            false,
        ),
        (
            "package.json",
            "{\"name\": \"shop\", \"version\": \"1.0.0\", \"scripts\": {\"test\": \"jest\"}}\n",
            false,
        ),
    ] {
        let file = p.dir.join(path);
        std::fs::create_dir_all(file.parent().unwrap_or(&p.dir)).expect("mkdir");
        std::fs::write(&file, text).expect("write");
        if exec {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        }
    }
    p
}

fn bash(command: &str) -> Reply {
    Reply::tool("Bash", json!({"command": command, "description": "run it"}))
}

fn agent(subagent_type: &str, prompt: &str) -> Reply {
    Reply::tool(
        "Agent",
        json!({"description": "one small task", "prompt": prompt,
               "subagent_type": subagent_type, "run_in_background": false}),
    )
}

/// The main agent's turns, by how many tool calls it has made: calls 0 to 8 are the TDD loop
/// (test, write, test) for each of these.
const TDD: [&str; 3] = ["feature1", "feature2", "feature3"];
const GREP: usize = 9;
const LINT: usize = 10;
const NPM: usize = 11;
const BUILD: [usize; 3] = [12, 13, 14];
const API_ERROR_AGENT: usize = 15;
const EMPTY_AGENT: usize = 16;
const UNDEFINED_AGENT: usize = 17;
/// A subagent that "finishes" with the client's API error text as its answer (claude-code
/// issue 64177), where call 15's API failure ends its subagent as a failed tool call.
const API_TEXT_AGENT: usize = 18;
const CALLS: usize = 19;

const API_ERROR_TEXT: &str = "API Error: 429 {\"type\":\"error\",\"error\":{\"type\":\"rate_limit_error\",\"message\":\"Rate limited. Please try again later.\"}}";

fn script(dir: String, overloaded_once: Arc<AtomicBool>) -> impl Fn(&Request) -> Reply {
    move |r: &Request| {
        if r.is("SUBTASK-APIERR") {
            return Reply::Error(529, "overloaded_error", "Overloaded".into());
        }
        if r.is("SUBTASK-EMPTY") {
            return Reply::empty();
        }
        if r.is("SUBTASK-APITEXT") {
            return Reply::text(API_ERROR_TEXT);
        }
        let n = r.tool_calls();
        // One 529 mid-session; the client retries the request.
        if n == GREP && !overloaded_once.swap(true, Ordering::SeqCst) {
            return Reply::Error(529, "overloaded_error", "Overloaded".into());
        }
        match n {
            0..=8 => {
                let f = TDD[n / 3];
                if n % 3 == 1 {
                    Reply::tool(
                        "Write",
                        json!({"file_path": format!("{dir}/src/{f}.js"),
                               "content": format!("export const {f} = (xs) => xs.reduce((a, b) => a + b, 0);\n")}),
                    )
                } else {
                    bash(&format!("./node_modules/.bin/jest src/{f}.test.js"))
                }
            }
            GREP => bash("grep -rn 'TODO(release)' src"),
            LINT => bash("./node_modules/.bin/eslint src"),
            NPM => bash("./scripts/npm-install.sh react-beautiful-dnd@13.1.1"),
            12..=14 => bash("./node_modules/.bin/tsc --noEmit"),
            API_ERROR_AGENT => agent(
                "general-purpose",
                "SUBTASK-APIERR: summarize CHANGELOG.md in three lines",
            ),
            EMPTY_AGENT => agent(
                "general-purpose",
                "SUBTASK-EMPTY: list the flaky tests in src/",
            ),
            UNDEFINED_AGENT => agent("code-reviewer", "SUBTASK-REVIEW: review the diff"),
            // Another type: general-purpose's breaker is open by now (two failures).
            API_TEXT_AGENT => agent(
                "Explore",
                "SUBTASK-APITEXT: check the release notes for typos",
            ),
            _ => Reply::text(
                "Done: three features in; the build error and the dependency conflict are left for you.",
            ),
        }
    }
}

/// Where a hook's words start in a text the client sent, by how the client labels them.
const LABELS: &[&str] = &[
    "hook additional context: ",
    "hook error: ",
    "hook feedback:\n",
    "blocked by hook: ",
    "hook blocking error",
];

/// Hook events, as the client names them before a label (`PostToolUse:Bash hook ...`).
const EVENTS: &[&str] = &[
    "Stop",
    "SubagentStop",
    "PreToolUse",
    "PostToolUse",
    "PostToolUseFailure",
    "UserPromptSubmit",
    "SessionStart",
];

/// The client's own reminders that may share a text with a hook's words.
const CLIENT_TAILS: &[&str] = &["</system-reminder>", "\n\nThe user hasn't heard from you"];

/// One hook text found in a string the client sent: `full`, as the model reads it (the
/// client's event label, `PostToolUse:Bash hook blocking error from command: "...": `, and
/// triage's words), and `words`, triage's words alone.
struct Segment {
    full: String,
    words: String,
}

/// The hook texts in one string: each runs from the end of its label to the next label (or a
/// client reminder, or the end); `words` without the client's `from command: "...": ` prefix,
/// `full` with it and with the event that leads the label.
fn segments(s: &str) -> Vec<Segment> {
    let mut at: Vec<(usize, usize)> = LABELS
        .iter()
        .flat_map(|l| s.match_indices(l).map(|(i, _)| (i, i + l.len())))
        .collect();
    at.sort_unstable();
    // A label inside another's span ("Stop hook feedback" within "SubagentStop hook ...").
    at.dedup_by(|b, a| b.0 < a.1);
    let offset = |sub: &str| sub.as_ptr() as usize - s.as_ptr() as usize;
    let mut out = Vec::new();
    for (n, &(label, start)) in at.iter().enumerate() {
        let end = at.get(n + 1).map_or(s.len(), |next| next.0);
        let mut text = &s[start..end];
        for tail in CLIENT_TAILS {
            if let Some(i) = text.find(tail) {
                text = &text[..i];
            }
        }
        let mut text = text.trim_start_matches([':', ' ']);
        if let Some(rest) = text.strip_prefix("from command: \"") {
            // The command ends at `": ` (it holds no such sequence itself).
            text = rest.split_once("\": ").map_or(rest, |(_, after)| after);
        }
        // The event name that leads the next label ("\n\nSubagentStop hook ...").
        let mut text = text.trim();
        if let Some((head, last)) = text.rsplit_once(char::is_whitespace) {
            if EVENTS.iter().any(|e| last.ends_with(e)) {
                text = head;
            }
        }
        let text = text.trim();
        if text.is_empty() {
            continue;
        }
        // The full text starts at the event that leads its label (`PostToolUse:Bash hook ...`).
        let before = s[..label].trim_end();
        let event = before.rfind(char::is_whitespace).map_or(0, |i| i + 1);
        let first = if EVENTS
            .iter()
            .any(|e| before[event..].split(':').next() == Some(*e))
        {
            event
        } else {
            label
        };
        out.push(Segment {
            full: s[first..offset(text) + text.len()].to_string(),
            words: text.to_string(),
        });
    }
    out
}

/// Every hook text in this request, in order, from every string of the messages.
fn segments_of(req: &Request) -> Vec<Segment> {
    fn walk(v: &Value, out: &mut Vec<Segment>) {
        match v {
            Value::String(s) => out.extend(segments(s)),
            Value::Array(a) => a.iter().for_each(|x| walk(x, out)),
            Value::Object(o) => o.values().for_each(|x| walk(x, out)),
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(&req.body["messages"], &mut out);
    out
}

/// Every text triage put into this request (its words alone), in order.
fn injected(req: &Request) -> Vec<String> {
    segments_of(req).into_iter().map(|t| t.words).collect()
}

/// Every text triage put into this request as the model reads it, label and all, in order.
fn injected_full(req: &Request) -> Vec<String> {
    segments_of(req).into_iter().map(|t| t.full).collect()
}

/// What is in `later` and not in `earlier` (as a multiset).
fn added(earlier: &[String], later: &[String]) -> Vec<String> {
    let mut left: BTreeMap<&str, usize> = BTreeMap::new();
    for e in earlier {
        *left.entry(e.as_str()).or_default() += 1;
    }
    later
        .iter()
        .filter(|t| match left.get_mut(t.as_str()) {
            Some(n) if *n > 0 => {
                *n -= 1;
                false
            }
            _ => true,
        })
        .cloned()
        .collect()
}

fn words(texts: &[String]) -> usize {
    texts.iter().map(|t| t.split_whitespace().count()).sum()
}

/// The golden file of what the model reads in this session.
fn golden_path() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/e2e/golden/session.txt")
}

/// What the main agent's call `k` was.
fn call_name(k: usize) -> String {
    match k {
        0..=8 if k % 3 == 1 => format!("write src/{}.js", TDD[k / 3]),
        0..=8 => format!("jest src/{}.test.js", TDD[k / 3]),
        GREP => "grep with no match".into(),
        LINT => "eslint, 2 errors".into(),
        NPM => "npm install, ERESOLVE".into(),
        12..=14 => format!("tsc, the same error ({} of 3)", k - 11),
        API_ERROR_AGENT => "general-purpose subagent, the API answers 529".into(),
        EMPTY_AGENT => "general-purpose subagent, an empty answer".into(),
        UNDEFINED_AGENT => "an undefined agent type".into(),
        API_TEXT_AGENT => "Explore subagent, answers with an API error text".into(),
        _ => String::new(),
    }
}

/// `text` with what changes from run to run made fixed: the scenario's folder, the triage
/// binary's path, the fake API's port, session and agent ids, record ids and times.
fn normalise(text: &str, root: &std::path::Path) -> String {
    let bin = crate::client::triage_bin();
    let mut t = text.replace(&bin.display().to_string(), "<triage>");
    if let Some(dir) = bin.parent() {
        t = t.replace(&dir.display().to_string(), "<triage-dir>");
    }
    t = t.replace(&root.display().to_string(), "<tmp>");
    for (pattern, with) in [
        (r"127\.0\.0\.1:\d+", "127.0.0.1:<port>"),
        (
            r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}",
            "<uuid>",
        ),
        (r"\ba[0-9a-f]{16}\b", "<agent-id>"),
        (r"toolu_[A-Za-z0-9_]+", "<tool-use-id>"),
        (r"err-\d{8}T\d{9}Z-p\d+x[0-9a-f]{8}", "<record-id>"),
        (
            r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?( UTC)?",
            "<time>",
        ),
    ] {
        let re = regex::Regex::new(pattern).expect("a valid pattern");
        t = re.replace_all(&t, with).into_owned();
    }
    t
}

/// The golden text: each text triage put in front of the model, as the client wrote it into
/// the requests, under the moment it arrived.
fn golden_text(
    before: &[String],
    after_calls: &[Vec<String>],
    subagents: &[(&str, Vec<String>)],
    root: &std::path::Path,
) -> String {
    let mut out = String::from(
        "# Everything triage put in front of the model in tests/e2e/session.rs's session, on the\n\
         # current client: each hook text as the client wrote it into the requests the API received,\n\
         # in order, with paths, ports, ids and times normalised. A change here is a change to what\n\
         # the model reads: review it, then `TRIAGE_E2E_BLESS=1 TRIAGE_E2E_CLIENT=2.1.332 cargo test\n\
         # --test e2e a_realistic_coding_session` rewrites this file.\n",
    );
    let mut section = |title: String, texts: &[String]| {
        if texts.is_empty() {
            return;
        }
        out.push_str(&format!("\n## {title}\n"));
        for t in texts {
            out.push_str(&format!("\n{}\n", normalise(t, root)));
        }
    };
    section("before the first call (the main agent)".into(), before);
    for (k, texts) in after_calls.iter().enumerate() {
        section(format!("after call {k}: {}", call_name(k)), texts);
    }
    for (sub, texts) in subagents {
        section(format!("to the subagent {sub}"), texts);
    }
    out
}

/// Compares `text` with the golden file (or rewrites it under `TRIAGE_E2E_BLESS=1`): `Err`
/// with a readable diff when they differ.
fn compare_golden(text: &str) -> Result<(), String> {
    let path = golden_path();
    if std::env::var_os("TRIAGE_E2E_BLESS").is_some_and(|v| !v.is_empty() && v != "0") {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        }
        std::fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))?;
        println!("session: wrote {}", path.display());
        return Ok(());
    }
    let want = std::fs::read_to_string(&path).map_err(|e| {
        format!(
            "the golden file {} cannot be read ({e}); TRIAGE_E2E_BLESS=1 writes it",
            path.display()
        )
    })?;
    if want == text {
        return Ok(());
    }
    let diff = similar::TextDiff::from_lines(want.as_str(), text)
        .unified_diff()
        .context_radius(3)
        .header("tests/e2e/golden/session.txt", "this run")
        .to_string();
    Err(format!(
        "what the model reads changed (if that is intended, review and rerun with TRIAGE_E2E_BLESS=1):\n{diff}"
    ))
}

pub fn a_realistic_coding_session_on_the_current_client() -> Outcome {
    if !crate::client_at_least(crate::CURRENT_CLIENT) {
        println!(
            "session: skipped on {}: written for the current client, {} (TRIAGE_E2E_CLIENT)",
            crate::client_version(),
            crate::CURRENT_CLIENT
        );
        return Ok(());
    }
    let p = project();
    let dir = p.dir.display().to_string();
    let api = FakeApi::start(script(dir, Arc::new(AtomicBool::new(false))));
    let prompt = format!("{MARKER}: add feature1 to feature3 test first, then tidy up");
    // One retry: the 529 mid-session is retried; the subagent's 529s never end.
    let run = p.claude(&api, &prompt, &[("CLAUDE_CODE_MAX_RETRIES", "1")]);
    ensure!(
        !run.timed_out && run.status == Some(0),
        "the client did not finish well ({:?})\nstderr: {}\n{}",
        run.status,
        run.stderr,
        run.debug_tail()
    );
    let bad = run.failed_hooks();
    ensure!(bad.is_empty(), "hooks that did not end well: {bad:#?}");

    // The scenario itself: every call made, the 529 retried, both subagents ran.
    let all = api.messages();
    let main: Vec<&Request> = all.iter().filter(|r| r.is(MARKER)).collect();
    // The last request after each number of tool calls (a retried one counts once).
    let mut after: BTreeMap<usize, &Request> = BTreeMap::new();
    for r in &main {
        after.insert(r.tool_calls(), r);
    }
    ensure!(
        after.keys().copied().eq(0..=CALLS),
        "the main agent did not make its {CALLS} calls: {:?}\n{}",
        after.keys().collect::<Vec<_>>(),
        run.debug_tail()
    );
    let retried = main.iter().filter(|r| r.tool_calls() == GREP).count();
    ensure!(
        retried == 2,
        "the 529 was not retried once: {retried} requests"
    );
    for sub in ["SUBTASK-APIERR", "SUBTASK-EMPTY", "SUBTASK-APITEXT"] {
        ensure!(all.iter().any(|r| r.is(sub)), "{sub} never ran");
    }

    // What triage put into the model's context after each call (the result of call k is in
    // the request after k + 1 calls).
    let said: Vec<Vec<String>> = (0..CALLS)
        .map(|k| added(&injected(after[&k]), &injected(after[&(k + 1)])))
        .collect();
    let in_main = injected(after[&CALLS]);
    let mut subagents: Vec<String> = Vec::new();
    for sub in ["SUBTASK-APIERR", "SUBTASK-EMPTY", "SUBTASK-APITEXT"] {
        if let Some(r) = all.iter().rev().find(|r| r.is(sub)) {
            // The client renders a SubagentStop block twice (as feedback, and again in a
            // reminder): triage's words are counted once.
            for t in injected(r) {
                if !subagents.contains(&t) {
                    subagents.push(t);
                }
            }
        }
    }
    // Each text once: what reached the model before the first call (SessionStart,
    // UserPromptSubmit) and after each call, summed.
    let said_words: usize =
        words(&injected(after[&0])) + said.iter().map(|s| words(s)).sum::<usize>();
    ensure!(
        said_words == words(&in_main),
        "the texts after each call ({said_words} words) are not those of the whole conversation ({} words)",
        words(&in_main)
    );
    // The same texts as the model reads them, label and all, for the golden file.
    let said_full: Vec<Vec<String>> = (0..CALLS)
        .map(|k| added(&injected_full(after[&k]), &injected_full(after[&(k + 1)])))
        .collect();
    let mut to_subagents: Vec<(&str, Vec<String>)> = Vec::new();
    for sub in ["SUBTASK-APIERR", "SUBTASK-EMPTY", "SUBTASK-APITEXT"] {
        let mut texts: Vec<String> = Vec::new();
        if let Some(r) = all.iter().rev().find(|r| r.is(sub)) {
            // Each text once, as counted above.
            let mut seen: Vec<String> = Vec::new();
            for t in segments_of(r) {
                if !seen.contains(&t.words) {
                    seen.push(t.words);
                    texts.push(t.full);
                }
            }
        }
        to_subagents.push((sub, texts));
    }
    let root = p.dir.parent().unwrap_or(&p.dir).to_path_buf();
    let golden = compare_golden(&golden_text(
        &injected_full(after[&0]),
        &said_full,
        &to_subagents,
        &root,
    ));
    let total = words(&in_main) + words(&subagents);
    println!(
        "session: triage injected {total} words ({} into the main agent's context, {} into its subagents')",
        words(&in_main),
        words(&subagents)
    );
    for (k, s) in said.iter().enumerate() {
        if !s.is_empty() {
            println!("  after call {k}: {s:?}");
        }
    }
    for s in &subagents {
        println!("  to a subagent: {s:?}");
    }

    // The acceptance of issue 29, each assertion reported.
    let mut failed: Vec<String> = Vec::new();
    let mut check = |ok: bool, what: String| {
        if !ok {
            failed.push(what);
        }
    };
    for (k, s) in said.iter().enumerate().take(9) {
        check(
            s.is_empty(),
            format!("TDD loop, call {k}: something was injected: {s:?}"),
        );
    }
    check(
        said[GREP].is_empty(),
        format!("the grep with no match: {:?}", said[GREP]),
    );
    check(
        said[LINT].is_empty(),
        format!("the lint failure: {:?}", said[LINT]),
    );
    let lines = |s: &[String]| {
        s.iter()
            .filter(|t| t.to_lowercase().contains(CHANGE_APPROACH))
            .count()
    };
    check(
        lines(&said[BUILD[2]]) == 1 && lines(&said[BUILD[0]]) == 0 && lines(&said[BUILD[1]]) == 0,
        format!(
            "the third identical build failure gets the change-approach line (the first two do not): {:?}",
            &said[BUILD[0]..=BUILD[2]]
        ),
    );
    check(
        lines(&in_main) == 1,
        format!(
            "the change-approach line reached the model {} times, not once",
            lines(&in_main)
        ),
    );
    let recs = p.records();
    let general: Vec<&Value> = recs
        .iter()
        .filter(|r| r["agent"] == "general-purpose")
        .collect();
    check(
        recs.iter()
            .any(|r| r["agent"] == "Explore" && r["kind"] == "rate_limited"),
        format!(
            "the subagent that answered with an API error text is not recorded as rate_limited: {:?}",
            recs.iter()
                .filter(|r| r["agent"] == "Explore")
                .collect::<Vec<_>>()
        ),
    );
    check(
        !said[API_TEXT_AGENT].is_empty(),
        "the subagent that answered with an API error text did not reach the model as a failure"
            .to_string(),
    );
    check(
        general.iter().any(|r| {
            ["overloaded", "rate_limited"]
                .iter()
                .any(|k| r["kind"] == *k)
        }),
        format!("the API-error subagent is not recorded as an API failure: {general:#?}"),
    );
    check(
        !said[API_ERROR_AGENT].is_empty(),
        "the API-error subagent's failure did not reach the model (nothing injected after it)"
            .to_string(),
    );
    check(
        general.iter().any(|r| {
            ["validation_failed", "output_missing"]
                .iter()
                .any(|k| r["kind"] == *k)
        }),
        format!("the empty subagent is not recorded: {general:#?}"),
    );
    check(
        !said[EMPTY_AGENT].is_empty(),
        "the empty subagent's failure did not reach the model (nothing injected after it)"
            .to_string(),
    );
    let reviewer = p.breaker("code-reviewer", None);
    let charged = reviewer["totals"]["failures"].as_u64().unwrap_or(0)
        + reviewer["consecutive_failures"].as_u64().unwrap_or(0);
    check(
        charged == 0,
        format!("the undefined agent type charged a breaker: {reviewer}"),
    );
    check(
        total <= WORD_BOUND,
        format!("triage injected {total} words over the session, more than {WORD_BOUND}"),
    );
    if let Err(diff) = golden {
        check(false, diff);
    }
    println!(
        "  (the npm resolution error, call {NPM}: {:?}; the undefined type, call {UNDEFINED_AGENT}: {:?})",
        said[NPM], said[UNDEFINED_AGENT]
    );
    if failed.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "{} of the session's assertions failed:\n- {}",
            failed.len(),
            failed.join("\n- ")
        ))
    }
}
