//! Where init writes: the project as a Claude Code session started here would see it, Claude
//! Code's and the user's config folders; and whether `triage` is on PATH.

use crate::context::Context;
use crate::exit::Failure;
use std::path::{Path, PathBuf};

/// The project folder, as a Claude Code session started here would see it.
pub fn project_root(cx: &Context) -> Result<PathBuf, Failure> {
    if let Some(dir) = &cx.project_dir {
        return Ok(dir.clone());
    }
    let cwd = std::env::current_dir()
        .map_err(|e| Failure::io(format!("cannot read the current folder: {e}")))?;
    // Only within a git work tree: above it is someone else's folder (and $HOME/.claude is
    // the user's own config, not a project).
    let Some(top) = cwd.ancestors().find(|d| d.join(".git").exists()) else {
        return Ok(cwd);
    };
    let has_settings = |d: &Path| {
        let dot = d.join(".claude");
        dot.join("settings.json").is_file() || dot.join("settings.local.json").is_file()
    };
    Ok(cwd
        .ancestors()
        .take_while(|d| d.starts_with(top))
        .find(|d| has_settings(d))
        .unwrap_or(top)
        .to_path_buf())
}

pub fn home() -> Result<PathBuf, Failure> {
    std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
        .ok_or_else(|| Failure::usage("--user needs HOME to be set"))
}

/// Claude Code's own config folder: `$CLAUDE_CONFIG_DIR`, else `~/.claude`.
pub fn claude_config_dir() -> Result<PathBuf, Failure> {
    match std::env::var_os("CLAUDE_CONFIG_DIR").filter(|d| !d.is_empty()) {
        Some(d) => Ok(PathBuf::from(d)),
        None => Ok(home()?.join(".claude")),
    }
}

/// The user's config folder: `$XDG_CONFIG_HOME`, else `~/.config`.
pub fn user_config_dir() -> Result<PathBuf, Failure> {
    match std::env::var_os("XDG_CONFIG_HOME").filter(|d| !d.is_empty()) {
        Some(d) => Ok(PathBuf::from(d)),
        None => Ok(home()?.join(".config")),
    }
}

/// Whether `program` is found on PATH's absolute entries, as the hook command finds it (a
/// relative entry names a folder of the project, never searched).
pub fn on_path(program: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|paths| {
        std::env::split_paths(&paths).any(|d| {
            d.is_absolute()
                && std::fs::metadata(d.join(program)).is_ok_and(|m| {
                    m.is_file()
                        && std::os::unix::fs::PermissionsExt::mode(&m.permissions()) & 0o111 != 0
                })
        })
    })
}

/// The repository's own ignore file, `info/exclude` of the git folder of the work tree that
/// holds `project` (ignored for this clone only, never committed): `None` outside git. A
/// `.git` file (a linked work tree, a submodule) names its git folder; a linked work tree's
/// `info/` is the main repository's (`commondir`).
pub fn git_exclude(project: &Path) -> Option<PathBuf> {
    let dot_git = project
        .ancestors()
        .map(|d| d.join(".git"))
        .find(|g| g.exists())?;
    let meta = std::fs::metadata(&dot_git).ok()?;
    if meta.is_dir() {
        return Some(dot_git.join("info").join("exclude"));
    }
    let text = std::fs::read_to_string(&dot_git).ok()?;
    let named = text.lines().find_map(|l| l.strip_prefix("gitdir:"))?.trim();
    let base = dot_git.parent()?;
    let git_dir = base.join(named);
    let common = std::fs::read_to_string(git_dir.join("commondir"))
        .ok()
        .map(|c| git_dir.join(c.trim()))
        .unwrap_or(git_dir);
    common.is_dir().then(|| common.join("info").join("exclude"))
}

/// The installed Claude Code's version, from `claude --version` (found on PATH's absolute
/// entries, as the hooks will be); `Err` says why it cannot be told. Bounded: a client that
/// does not answer within `wait` is stopped.
pub fn claude_version(wait: std::time::Duration) -> Result<String, String> {
    use std::io::Read;
    if !on_path("claude") {
        return Err("`claude` is not on PATH".into());
    }
    let mut child = std::process::Command::new("claude")
        .arg("--version")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .map_err(|e| format!("`claude --version` could not be run: {e}"))?;
    let until = std::time::Instant::now() + wait;
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if std::time::Instant::now() < until => {
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "`claude --version` did not answer within {} s",
                    wait.as_secs()
                ));
            }
        }
    }
    let mut out = String::new();
    if let Some(so) = child.stdout.take() {
        let _ = so.take(4096).read_to_string(&mut out);
    }
    crate::settings::client_version(&out)
        .ok_or_else(|| format!("`claude --version` said {:?}, not a version", out.trim()))
}
