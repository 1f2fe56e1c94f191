//! `triage check-output`: catch the silent failures (seeds 001, 004) — an agent that
//! "succeeds" with an empty, short, malformed or BLOCKED output. Reads `{agent, output,
//! status, files}` (or `--raw` text, or a hook payload with `--hook`), resolves the agent's
//! rules from the policy and the flags, and hands them to [`crate::core::output_check`]
//! (through [`crate::store::project_files::judge`], which looks the files up).
//!
//! The stop-hook answer and its loop guard live in [`crate::hook::check_output`]; `triage
//! hook` calls it in-process.

use crate::context::{Answer, Context};
use crate::core::hook_payload::Payload;
use crate::core::output_check::{self, Input, Verdict};
use crate::core::policy::{OutputFormat, OutputRules};
use crate::exit::Failure;
use crate::store::project_files;
use serde_json::Value;
use std::path::{Path, PathBuf};

/// Arguments of `triage check-output`.
#[derive(clap::Args, Debug, Default)]
#[command(after_help = "Examples:\n  \
    echo '{\"agent\": \"researcher\", \"output\": \"too short\"}' | triage check-output --min-chars 500 -e\n  \
    triage check-output --raw --agent fact-checker --require-any Verified --require-any 'Issues found' < review.md\n  \
    echo '{\"output\": {\"agent\": \"a\", \"phase\": 2}}' | triage check-output --format json --required-key status --jq '.evidence_count > 0'\n  \
    triage check-output --hook < payload.json")]
pub struct Args {
    /// The agent whose rules apply ([agents.NAME.output] in the policy, globs allowed)
    #[arg(long, value_name = "NAME")]
    pub agent: Option<String>,
    /// Stdin is the output text itself, not a JSON object
    #[arg(long, conflicts_with = "hook")]
    pub raw: bool,
    /// The status the agent reported (`error` and `BLOCKED` fail)
    #[arg(long, value_name = "STATUS")]
    pub status: Option<String>,
    /// A file the agent wrote, relative to the project: must exist and not be empty (repeatable)
    #[arg(long = "file", value_name = "PATH")]
    pub files: Vec<String>,
    /// The original the output edits: the output must not be shorter than it
    #[arg(long, value_name = "FILE")]
    pub original: Option<PathBuf>,
    /// Fewest characters
    #[arg(long, value_name = "N")]
    pub min_chars: Option<u64>,
    /// A regex that must match (repeatable; all must match)
    #[arg(long, value_name = "REGEX")]
    pub require_all: Vec<String>,
    /// A regex of which one must match (repeatable)
    #[arg(long, value_name = "REGEX")]
    pub require_any: Vec<String>,
    /// A regex that must not match (repeatable)
    #[arg(long, value_name = "REGEX")]
    pub forbid: Vec<String>,
    /// The format the output must have
    #[arg(long, value_name = "FORMAT", value_parser = ["json", "yaml", "markdown", "text"])]
    pub format: Option<String>,
    /// A dotted path that must be present and not null, for JSON or YAML (repeatable)
    #[arg(long = "required-key", value_name = "KEY")]
    pub required_keys: Vec<String>,
    /// A jq predicate that must yield true (repeatable)
    #[arg(long, value_name = "FILTER")]
    pub jq: Vec<String>,
    /// A glob, relative to the project, that must match non-empty files (repeatable)
    #[arg(long, value_name = "GLOB")]
    pub files_exist: Vec<String>,
    /// Stop-hook blocks before the agent is let go [default: 3]
    #[arg(long, value_name = "N")]
    pub max_rejections: Option<u32>,
    /// Fewest tool calls the agent must have made (the input's `tool_uses`, or the hook's transcript)
    #[arg(long, value_name = "N")]
    pub min_tool_uses: Option<u32>,
    /// Save a rejected output as DIR/<agent>_partial.md, never overwriting an earlier one
    #[arg(long, value_name = "DIR")]
    pub preserve_partial: Option<PathBuf>,
    /// Read a Claude Code hook payload (SubagentStop, Stop, PostToolUse on Agent/Task)
    #[arg(long)]
    pub hook: bool,
    /// With --hook: block by exiting 2 with the reason on stderr, instead of JSON
    #[arg(long, requires = "hook")]
    pub block_with_exit_2: bool,
}

/// Runs `triage check-output`.
pub fn run(args: &Args, cx: &Context) -> Result<Answer, Failure> {
    let flags = flag_rules(args)?;
    if args.hook {
        let payload = Payload::redacted(cx.read_json()?.unwrap_or(Value::Null), cx.redactor());
        let response = crate::hook::check_output::answer(cx, &payload, &flags)?;
        if args.block_with_exit_2 && response.decision.as_deref() == Some("block") {
            say!("{}", response.reason.as_deref().unwrap_or_default());
            return Ok(Answer {
                block: true,
                ..Answer::nothing()
            });
        }
        return Ok(Answer::hook(&response));
    }
    let mut input = read_input(args, cx)?;
    if let Some(path) = &args.original {
        let bytes = std::fs::read(path)
            .map_err(|e| Failure::io(format!("--original {}: cannot read: {e}", path.display())))?;
        input.original = Some(String::from_utf8_lossy(&bytes).into_owned());
    }
    let (mut verdict, _, _) = project_files::judge(&cx.ground(), cx.policy()?, &input, &flags);
    if let (false, Some(dir)) = (verdict.ok, &args.preserve_partial) {
        preserve(cx, dir, &input, &mut verdict);
    }
    let negative = !verdict.ok;
    if cx.global.text {
        return Ok(Answer::text(render_text(&verdict)).negative(negative));
    }
    Ok(Answer::json(&verdict).negative(negative))
}

/// The rules given as flags; a regex or jq filter that does not compile is a usage error.
fn flag_rules(args: &Args) -> Result<OutputRules, Failure> {
    let list = |v: &Vec<String>| (!v.is_empty()).then(|| v.clone());
    for (flag, list) in [
        ("--require-all", &args.require_all),
        ("--require-any", &args.require_any),
        ("--forbid", &args.forbid),
    ] {
        for p in list {
            // Through the policy cache: a flag given on every call compiles once per policy.
            crate::core::pattern::matcher(p).check().map_err(|why| {
                Failure::usage(format!("{flag} `{p}` is not a valid regex: {why}"))
            })?;
        }
    }
    for code in &args.jq {
        crate::core::jq::Filter::compile(code).map_err(|e| Failure::usage(format!("--jq: {e}")))?;
    }
    let format = match args.format.as_deref() {
        Some("json") => Some(OutputFormat::Json),
        Some("yaml") => Some(OutputFormat::Yaml),
        Some("markdown") => Some(OutputFormat::Markdown),
        Some("text") => Some(OutputFormat::Text),
        _ => None,
    };
    Ok(OutputRules {
        min_chars: args.min_chars,
        require_all: list(&args.require_all),
        require_any: list(&args.require_any),
        forbid: list(&args.forbid),
        format,
        required_keys: list(&args.required_keys),
        jq: list(&args.jq),
        files_exist: list(&args.files_exist),
        max_rejections: args.max_rejections,
        min_tool_uses: args.min_tool_uses,
    })
}

/// Stdin as `{agent, output, status, files}` (or raw text), with the flags over its fields.
fn read_input(args: &Args, cx: &Context) -> Result<Input, Failure> {
    let mut input = if args.raw {
        let bytes = cx.read_stdin()?.unwrap_or_default();
        let text = String::from_utf8_lossy(&bytes);
        Input {
            output: Some(Value::String(cx.redactor().text(&text).into_owned())),
            ..Input::default()
        }
    } else {
        match cx.read_json()? {
            None => Input::default(),
            Some(mut v) => {
                cx.redactor().value(&mut v);
                Input::from_json(v).map_err(Failure::data)?
            }
        }
    };
    if args.agent.is_some() {
        input.agent.clone_from(&args.agent);
    }
    if args.status.is_some() {
        input.status.clone_from(&args.status);
    }
    input.files.extend(args.files.iter().cloned());
    Ok(input)
}

/// Seed 001: "If skill N has partial output, save with `_partial` suffix" — never over an
/// earlier one. A failure to save is a warning: the verdict stands.
fn preserve(cx: &Context, dir: &Path, input: &Input, verdict: &mut Verdict) {
    let Some(output) = input.output.as_ref().filter(|o| !o.is_null()) else {
        return;
    };
    let text = output_check::text_of(output);
    if text.trim().is_empty() {
        return;
    }
    let name = crate::store::files::escape_key(input.agent.as_deref().unwrap_or("agent"));
    if let Err(e) = crate::store::files::ensure_dir(dir) {
        cx.warn(&format!("--preserve-partial: {e}"));
        return;
    }
    for n in 1..1000 {
        let file = match n {
            1 => format!("{name}_partial.md"),
            n => format!("{name}_partial-{n}.md"),
        };
        let path = dir.join(file);
        if path.exists() {
            continue;
        }
        match crate::store::files::create_new(&path, text.as_bytes()) {
            Ok(()) => {
                if let Some(e) = verdict.error.as_mut() {
                    e.preserved_outputs.push(path.display().to_string());
                }
                return;
            }
            Err(_) if path.exists() => continue,
            Err(e) => {
                cx.warn(&format!("--preserve-partial: {e}"));
                return;
            }
        }
    }
    cx.warn("--preserve-partial: 999 partial outputs already saved; not saving another");
}

fn render_text(v: &Verdict) -> String {
    let who = v.agent.as_deref().unwrap_or("output");
    let head = match &v.error {
        None => format!("{who}: ok"),
        Some(e) => format!("{who}: rejected ({})", e.kind),
    };
    let width = v.checks.iter().map(|c| c.check.len()).max().unwrap_or(0);
    let mut lines = vec![head];
    for c in &v.checks {
        let mark = if c.ok { "ok  " } else { "FAIL" };
        lines.push(format!("  {mark}  {:<width$}  {}", c.check, c.detail));
    }
    if let Some(p) = v.error.as_ref().and_then(|e| e.preserved_outputs.first()) {
        lines.push(format!("  saved as {p}"));
    }
    lines.join("\n")
}
