//! The manual: one page per command at every depth (`triage(1)`, `triage-breaker(1)`,
//! `triage-breaker-check(1)`, …) rendered from the clap definitions, and `triage.toml(5)`
//! rendered from the policy's own definitions ([`policy_page()`]). `triage man` prints a page or
//! installs them all; `install-links` installs them beside the binary; `man/` in the
//! repository holds the same pages and a test fails when it is stale.
//!
//! clap_mangen renders the name, synopsis, description, options and subcommands; this module
//! adds what a manual needs and clap does not know: examples shown verbatim (no fill, no
//! hyphenation), notes, EXIT STATUS, ENVIRONMENT, FILES and SEE ALSO.

pub mod policy_page;

pub use policy_page::policy_page;

use crate::exit::Failure;
use clap::Command;
use std::fmt::Write;
use std::path::{Path, PathBuf};

/// One page: its file name (`triage-classify.1`) and its roff text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Page {
    /// The file name, with its section as extension.
    pub file: String,
    /// The section: 1 or 5.
    pub section: u8,
    /// The roff source.
    pub body: String,
}

/// [`roff_text`] for a quoted macro argument (`.SH "..."`): a double quote inside one would
/// end it, so it is written `\(dq`.
pub fn roff_quoted(text: &str) -> String {
    format!("\"{}\"", roff_text(text).replace('"', "\\(dq"))
}

/// Text for a roff line: backslashes and hyphens escaped (a `-` in a command stays a plain
/// ASCII hyphen-minus), and a line that starts with `.` or `'` is not taken for a request.
pub fn roff_text(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 8);
    if text.starts_with('.') || text.starts_with('\'') {
        out.push_str("\\&");
    }
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\e"),
            '-' => out.push_str("\\-"),
            c => out.push(c),
        }
    }
    out
}

/// Every page of `tree` (the command line's definition, `Cli::command()`), the policy's
/// included, in a stable order.
pub fn pages(tree: clap::Command) -> Vec<Page> {
    // The long version names the commit: it would change every page with every commit.
    let mut cmd = tree.long_version(None);
    cmd.build();
    let mut pages = Vec::new();
    walk(&cmd, None, &mut pages);
    pages.push(Page {
        file: "triage.toml.5".into(),
        section: 5,
        body: policy_page(),
    });
    pages.sort_by(|a, b| a.file.cmp(&b.file));
    pages
}

fn display_name(cmd: &Command) -> String {
    cmd.get_display_name()
        .unwrap_or_else(|| cmd.get_name())
        .to_string()
}

fn walk(cmd: &Command, parent: Option<&str>, pages: &mut Vec<Page>) {
    let name = display_name(cmd);
    pages.push(Page {
        file: format!("{name}.1"),
        section: 1,
        body: render(cmd, &name, parent),
    });
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        walk(sub, Some(&name), pages);
    }
}

fn clap_part(
    man: &clap_mangen::Man,
    part: fn(&clap_mangen::Man, &mut Vec<u8>) -> std::io::Result<()>,
) -> String {
    let mut buf = Vec::new();
    if part(man, &mut buf).is_err() {
        return String::new();
    }
    String::from_utf8_lossy(&buf).into_owned()
}

fn render(cmd: &Command, name: &str, parent: Option<&str>) -> String {
    let version = cmd
        .get_version()
        .map(str::to_string)
        .unwrap_or_else(|| env!("CARGO_PKG_VERSION").to_string());
    // Without the after-help: its examples are rendered verbatim below instead of reflowed.
    let bare = cmd.clone().after_help("").after_long_help("");
    let man = clap_mangen::Man::new(bare)
        .title(name)
        .section("1")
        .source(format!("triage {version}"))
        .manual("triage manual");
    // The title by hand: an empty date must stay an argument ("") or the source and manual
    // shift into its place.
    let mut out = format!(
        ".TH \"{}\" 1 \"\" \"triage {version}\" \"triage manual\"\n",
        roff_text(name)
    );
    // No hyphenation anywhere: commands and paths must read as typed.
    out.push_str(".nh\n");
    out.push_str(&clap_part(&man, |m, w| m.render_name_section(w)));
    out.push_str(&clap_part(&man, |m, w| m.render_synopsis_section(w)));
    out.push_str(&clap_part(&man, |m, w| m.render_description_section(w)));
    let has_args = cmd
        .get_arguments()
        .any(|a| !a.is_hide_set() && a.get_id() != "help" && a.get_id() != "version")
        || cmd.get_arguments().next().is_some();
    if has_args {
        out.push_str(&clap_part(&man, |m, w| m.render_options_section(w)));
    }
    if cmd.get_subcommands().any(|s| !s.is_hide_set()) {
        out.push_str(&clap_part(&man, |m, w| m.render_subcommands_section(w)));
    }
    let after = cmd
        .get_after_long_help()
        .or_else(|| cmd.get_after_help())
        .map(|s| s.to_string())
        .unwrap_or_default();
    out.push_str(&examples_and_notes(&after));
    out.push_str(&common_sections(cmd, name, parent));
    out
}

/// The after-help: `Examples:` blocks verbatim (no fill), the rest as paragraphs.
fn examples_and_notes(after: &str) -> String {
    let mut examples = Vec::new();
    let mut notes = Vec::new();
    for block in after
        .split("\n\n")
        .map(str::trim_end)
        .filter(|b| !b.trim().is_empty())
    {
        let mut lines = block.lines();
        let first = lines.next().unwrap_or("").trim();
        if first.starts_with("Example") && first.ends_with(':') {
            examples.extend(lines.map(|l| l.strip_prefix("  ").unwrap_or(l).to_string()));
        } else {
            notes.push(block.split_whitespace().collect::<Vec<_>>().join(" "));
        }
    }
    let mut out = String::new();
    if !examples.is_empty() {
        out.push_str(".SH EXAMPLES\n.RS 4\n.nf\n");
        for e in &examples {
            out.push_str(&roff_text(e));
            out.push('\n');
        }
        out.push_str(".fi\n.RE\n");
    }
    if !notes.is_empty() {
        out.push_str(".SH NOTES\n");
        for n in &notes {
            let _ = writeln!(out, ".PP\n{}", roff_text(n));
        }
    }
    out
}

fn tp(out: &mut String, term: &str, text: &str) {
    let _ = writeln!(out, ".TP\n\\fB{}\\fR\n{}", roff_text(term), roff_text(text));
}

fn common_sections(cmd: &Command, name: &str, parent: Option<&str>) -> String {
    let mut out = String::from(".SH \"EXIT STATUS\"\n");
    if name == "triage-run" {
        tp(&mut out, "the command's status", "triage run ends with the status of the command it ran; 75 when the agent's breaker is open and the command was not run; 64 for a usage error.");
    }
    for (status, text) in [
        ("0", "The job was done; or, by default, it could not be done (I/O error, lock timeout, corrupt file, bad input) and a warning went to standard error and logs/triage.log: best effort."),
        ("1", "Only with -e/--exit-status: the verdict was negative (output invalid, breaker open, not retryable, state invalid)."),
        ("2", if name == "triage-hook" {
            "Never from triage hook: it blocks in its JSON answer (decision: block) and exits 0."
        } else {
            "Only from check-output --hook --block-with-exit-2: the exit-2 blocking form of the hook protocol."
        }),
        ("64", if name == "triage-hook" {
            "Never from triage hook: a usage error (an unknown flag, a bad argument) is said on standard error and the hook exits 0, so a mistyped hook command never blocks the agent."
        } else {
            "Usage error: an unknown flag or a bad argument."
        }),
        ("65, 74, 75", "Only with --strict (or TRIAGE_STRICT=1): bad input data, an I/O error, a lock not obtained in time."),
    ] {
        tp(&mut out, status, text);
    }
    out.push_str(".SH ENVIRONMENT\n");
    for (var, text) in [
        ("TRIAGE_DIR", "The state root, as --dir. Default: $CLAUDE_PROJECT_DIR/.triage, else ./.triage."),
        ("TRIAGE_CONFIG", "The policy file, as --config. Default: .triage.toml in $CLAUDE_PROJECT_DIR, else in the current folder, else the built-in defaults; see triage.toml(5)."),
        ("TRIAGE_STRICT", "When true, operational failures exit non-zero, as --strict."),
        ("TRIAGE_NOW", "The current time, RFC 3339 or Unix seconds; for tests and replays."),
        ("TRIAGE_LOCK_TIMEOUT", "How long to wait for a lock (default 2s)."),
        ("TRIAGE_MAX_INPUT", "The largest standard input accepted, in bytes (default 16 MiB)."),
        ("TRIAGE_LOG", "debug writes the decision trace, as -v: each decision (classify: the rule, family and pattern that matched, the kind, tier and retryable, and what the policy overrode; the retry decision: attempt n of m and why a retry is made or not; the breaker: its state before and after, failures against the threshold, why it opened, closed or stayed) as a line of level debug in STATE/logs/triage.log. info, warning, error and off (the default) write no trace. Another value is a warning and ignored. The trace is not written once triage.log is over 16 MiB."),
        ("TRIAGE_STORE", "Where breakers and the error log are shared: redis://host:port/db (or rediss://) for a fleet's Redis, over the policy's [store] url; file for the local files. When Redis cannot be reached in time, a call uses the local files with a warning; triage store sync pushes what was written meanwhile."),
        ("TRIAGE_REDIS_PASSWORD", "The Redis password, when the store URL has none."),
        ("CLAUDE_PROJECT_DIR", "The project folder Claude Code runs hooks in."),
        ("COLUMNS", "The width --text output fits, when set; else the terminal's, else 80."),
        ("NO_COLOR", "When set and not empty, --text output has no colour (colour is only ever used when standard output is a terminal)."),
    ] {
        tp(&mut out, var, text);
    }
    out.push_str(".PP\nBoolean values accept 1/0, true/false, yes/no, on/off in any case; an empty value means unset.\n");
    out.push_str(".SH FILES\n");
    for (file, text) in [
        (".triage.toml", "The policy; see triage.toml(5)."),
        (
            "STATE/logs/errors.jsonl",
            "Error records, one JSON object per line, appended under logs/errors.jsonl.lock.",
        ),
        (
            "STATE/logs/breaker-events.jsonl",
            "One line per breaker state change.",
        ),
        ("STATE/logs/triage.log", "The tool's own diagnostics, one JSON object per line (at, subcommand, level, pid, message); with -v or TRIAGE_LOG=debug, the decision trace too (level debug)."),
        ("STATE/logs/archive/", "Records moved by report prune."),
        (
            "STATE/breakers/KEY.json",
            "Breaker states, replaced atomically under KEY.json.lock.",
        ),
    ] {
        tp(&mut out, file, text);
    }
    out.push_str(".PP\nSTATE is the state root (--dir). Locks are flock(2) on a NAME.lock file beside the data, shareable with flock(1).\n");
    out.push_str(".SH \"SEE ALSO\"\n");
    let mut see: Vec<String> = Vec::new();
    if name != "triage" {
        see.push("triage(1)".into());
    }
    if let Some(p) = parent.filter(|p| *p != "triage") {
        see.push(format!("{p}(1)"));
    }
    if name == "triage" {
        see.extend(
            cmd.get_subcommands()
                .filter(|s| !s.is_hide_set())
                .map(|s| format!("{}(1)", display_name(s))),
        );
    }
    see.push("triage.toml(5)".into());
    if name == "triage" {
        see.extend(["jq(1)".to_string(), "flock(1)".to_string()]);
    }
    out.push_str(&roff_text(&see.join(", ")));
    out.push('\n');
    out
}

/// Writes every page of `tree` under `dir` (`man1/`, `man5/`), readable by all as man pages
/// are.
pub fn install(tree: clap::Command, dir: &Path) -> Result<Vec<PathBuf>, Failure> {
    let mut written = Vec::new();
    for Page {
        file,
        section,
        body,
    } in pages(tree)
    {
        let folder = dir.join(format!("man{section}"));
        create_readable_dirs(&folder)
            .map_err(|e| Failure::io(format!("cannot create {}: {e}", folder.display())))?;
        let path = folder.join(&file);
        let tmp = folder.join(format!(".{file}.tmp-{}", std::process::id()));
        write_readable(&tmp, body.as_bytes())
            .and_then(|()| std::fs::rename(&tmp, &path))
            .map_err(|e| {
                let _ = std::fs::remove_file(&tmp);
                Failure::io(format!("cannot write {}: {e}", path.display()))
            })?;
        written.push(path);
    }
    Ok(written)
}

/// Mode of a man page, whatever the umask: readable by all, as man pages are.
const PAGE_MODE: u32 = 0o644;
/// Mode of a folder of man pages that `install` makes, whatever the umask.
const PAGE_DIR_MODE: u32 = 0o755;

/// Creates `dir` and its missing parents, each made [`PAGE_DIR_MODE`] whatever the umask.
fn create_readable_dirs(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    if dir.is_dir() {
        return Ok(());
    }
    if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
        create_readable_dirs(parent)?;
    }
    match std::fs::create_dir(dir) {
        Ok(()) => std::fs::set_permissions(dir, std::fs::Permissions::from_mode(PAGE_DIR_MODE)),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(e),
    }
}

/// Writes a new file `path`, [`PAGE_MODE`] whatever the umask.
fn write_readable(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(PAGE_MODE)
        .open(path)?;
    f.set_permissions(std::fs::Permissions::from_mode(PAGE_MODE))?;
    f.write_all(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn every_referenced_page_exists() {
        let pages = pages(crate::cli::Cli::command());
        let names: Vec<&str> = pages.iter().map(|p| p.file.as_str()).collect();
        let reference = regex::Regex::new(r"(triage[a-z\\-]*)\((\d)\)").expect("regex");
        for p in &pages {
            for c in reference.captures_iter(&p.body) {
                let file = format!("{}.{}", c[1].replace("\\-", "-"), &c[2]);
                assert!(names.contains(&file.as_str()), "{} names {file}", p.file);
            }
        }
        assert!(names.contains(&"triage-breaker-check.1"));
        assert!(names.contains(&"triage-saga-begin.1"));
    }

    #[test]
    fn examples_are_verbatim_and_sections_present() {
        let pages = pages(crate::cli::Cli::command());
        let report = pages
            .iter()
            .find(|p| p.file == "triage-report.1")
            .expect("report page");
        let body = &report.body;
        assert!(body.contains(".nh\n"));
        assert!(
            body.contains(".SH EXAMPLES\n.RS 4\n.nf\ntriage report \\-\\-by agent \\-\\-text\n"),
            "{body}"
        );
        for section in [
            ".SH \"EXIT STATUS\"",
            ".SH ENVIRONMENT",
            ".SH FILES",
            ".SH \"SEE ALSO\"",
        ] {
            assert!(body.contains(section), "{section}");
        }
        assert_eq!(roff_text(".x -y \\z"), "\\&.x \\-y \\ez");
    }
}
