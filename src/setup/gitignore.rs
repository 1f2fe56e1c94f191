//! The `.triage/` line init adds to `.gitignore`, and takes away again.

/// The line: the state root, ignored.
pub const GITIGNORE_LINE: &str = ".triage/";

/// `.gitignore` with `.triage/` added on a line of its own.
pub fn with_state_line(old: Option<&str>) -> String {
    let mut new = old.unwrap_or_default().to_string();
    if !new.is_empty() && !new.ends_with('\n') {
        new.push('\n');
    }
    new.push_str(GITIGNORE_LINE);
    new.push('\n');
    new
}

/// `.gitignore` without the line init added: the original bytes when nothing else changed,
/// else the file with that one line taken out (and the newline init added before it, when
/// the original had no final newline).
pub fn without_state_line(current: &str, original: Option<&str>, created: bool) -> Option<String> {
    if current == with_state_line(original) {
        return original
            .map(str::to_string)
            .filter(|_| !created || original.is_some());
    }
    let line = format!("{GITIGNORE_LINE}\n");
    if let Some(rest) = current.strip_suffix(&line) {
        let no_final_newline = original.is_some_and(|o| !o.is_empty() && !o.ends_with('\n'));
        let rest = match rest.strip_suffix('\n') {
            Some(r) if no_final_newline => r,
            _ => rest,
        };
        return Some(rest.to_string());
    }
    let mut out = String::new();
    let mut taken = false;
    for l in current.split_inclusive('\n') {
        if !taken && l.trim_end_matches('\n') == GITIGNORE_LINE {
            taken = true;
            continue;
        }
        out.push_str(l);
    }
    Some(out)
}

pub fn ignores_state(gitignore: &str) -> bool {
    gitignore
        .lines()
        .map(str::trim)
        .any(|l| matches!(l, ".triage" | ".triage/" | "/.triage" | "/.triage/"))
}
