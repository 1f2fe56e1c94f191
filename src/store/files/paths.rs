//! Where files are: the state root and the user's own folders declared as anchors, every
//! folder below one opened from it without following a link ([`open_dir`]), a file's folder
//! and name ([`locate`]), and the folders themselves (made, listed, removed).

use super::dir::{Dir, Kind};
use super::names;
use super::{Result, StoreError};
use std::ffi::{OsStr, OsString};
use std::io;
use std::path::{Component, Path, PathBuf};
use std::sync::{Mutex, RwLock};

/// A folder paths are resolved from: below it, every folder is opened without following a
/// link and checked.
#[derive(Clone)]
struct Anchor {
    path: PathBuf,
    /// The anchor itself may be a link.
    follow: bool,
    /// The anchor itself is checked (owner, mode): the state root is; a folder the user
    /// named for a state file is theirs to choose.
    checked: bool,
    /// It is a state root, which carries a `.gitignore` of its own (see [`IGNORE_ALL`]).
    state_root: bool,
}

/// The `.gitignore` a state root carries, so that nothing in it ever shows up in `git status`
/// (nor is committed by a `git add -A`): written when the store makes the root, and into the
/// project's default root when a call writes there and finds none. Never over anything
/// already at that name.
pub const IGNORE_ALL: &str = "# triage's state: never committed (written by triage)\n*\n";

static ANCHORS: RwLock<Vec<Anchor>> = RwLock::new(Vec::new());

fn add_anchor(anchor: Anchor) {
    if let Ok(mut list) = ANCHORS.write() {
        list.retain(|a| a.path != anchor.path);
        list.push(anchor);
    }
}

/// Declares the state root of this process. Paths under it are resolved from the opened root
/// without following links; `follow` says whether the root itself may be a link (a root the
/// user named with `--dir` may be; the default `.triage` a cloned project could ship may not).
pub fn set_root(path: &Path, follow: bool) {
    add_anchor(Anchor {
        path: normal(path),
        follow,
        checked: true,
        state_root: true,
    });
}

/// Declares a folder of the user's own outside any project (the compiled-policy cache,
/// `~/.cache/triage`): checked like the state root (yours or root's, not writable by group or
/// others) and never a link itself, though the folders above it (`$XDG_CACHE_HOME`) are the
/// user's to choose. Created 0700 when a file is written in it.
pub fn set_private_dir(path: &Path) {
    add_anchor(Anchor {
        path: normal(path),
        follow: false,
        checked: true,
        state_root: false,
    });
}

/// Declares a folder the user named (the folder of a state file, a checkpoint folder given
/// with a flag): it is opened as named, links and all, but what the store derives below it
/// (`checkpoints/<file name>/`) is walked without following links, like the state root.
pub fn anchor(dir: &Path) {
    let path = normal(dir);
    let known = ANCHORS
        .read()
        .map(|list| list.iter().any(|a| path.starts_with(&a.path)))
        .unwrap_or(false);
    if !known {
        add_anchor(Anchor {
            path,
            follow: true,
            checked: false,
            state_root: false,
        });
    }
}

/// `path` without `.` components, so `./.triage/logs` and `.triage/logs` compare equal (the
/// current folder itself is the empty path, a prefix of every relative path).
fn normal(path: &Path) -> PathBuf {
    path.components()
        .filter(|c| !matches!(c, Component::CurDir))
        .collect()
}

/// A normalized path as it can be opened: the empty path is the current folder.
fn openable(path: &Path) -> &Path {
    if path.as_os_str().is_empty() {
        Path::new(".")
    } else {
        path
    }
}

/// The folder `dir`, opened: walked from the deepest anchor above it when there is one (see
/// [`set_root`], [`anchor`]), else as named. `create` makes what is missing (0700).
/// `Ok(None)`: it does not exist.
pub(super) fn open_dir(dir: &Path, create: bool) -> Result<Option<Dir>> {
    let dir = normal(dir);
    let found = ANCHORS.read().ok().and_then(|list| {
        list.iter()
            .filter_map(|a| {
                let rest = dir.strip_prefix(&a.path).ok()?;
                let parts: Option<Vec<OsString>> = rest
                    .components()
                    .map(|c| match c {
                        Component::Normal(n) => Some(n.to_os_string()),
                        _ => None,
                    })
                    .collect();
                Some((a.clone(), parts?))
            })
            .max_by_key(|(a, _)| a.path.components().count())
    });
    let Some((anchor, parts)) = found else {
        return open_named_held(openable(&dir), create);
    };
    let at = openable(&anchor.path);
    let opened = if anchor.checked {
        open_root_once(&anchor, at, create)?
    } else {
        open_named_held(at, create)?
    };
    let Some(mut d) = opened else {
        return Ok(None);
    };
    for (depth, part) in parts.into_iter().enumerate() {
        let next = if depth == 0 && anchor.checked {
            root_child(&anchor.path, &d, &part, create)?
        } else {
            d.sub(&part, create)?
        };
        match next {
            Some(next) => d = next,
            None => return Ok(None),
        }
    }
    Ok(Some(d))
}

thread_local! {
    /// The folders the user named that this thread has opened while [`hold_folders`] holds
    /// them, by path.
    static HELD: std::cell::RefCell<Option<Vec<(PathBuf, Dir)>>> =
        const { std::cell::RefCell::new(None) };
}

/// While the returned guard lives, a folder the user named (a state file's) is opened once
/// on this thread and reused: a command that locks, reads and replaces a file in it opens it
/// once, not at every step, and every step is then in the same folder even if its path is
/// made to name another one meanwhile. (Not for longer: a long-lived process must see a folder
/// removed and made again.)
pub fn hold_folders() -> HeldFolders {
    HELD.with(|h| {
        let mut h = h.borrow_mut();
        if h.is_none() {
            *h = Some(Vec::new());
        }
    });
    HeldFolders { _private: () }
}

/// See [`hold_folders`]: the folders are let go when it is dropped.
#[must_use = "the folders are held only while the guard lives"]
pub struct HeldFolders {
    _private: (),
}

impl Drop for HeldFolders {
    fn drop(&mut self) {
        HELD.with(|h| *h.borrow_mut() = None);
    }
}

/// [`Dir::open_named`], from the folders held on this thread when they are (see
/// [`hold_folders`]).
fn open_named_held(path: &Path, create: bool) -> Result<Option<Dir>> {
    let held = HELD.with(|h| {
        h.borrow()
            .as_ref()
            .map(|list| list.iter().find(|(p, _)| p == path).map(|(_, d)| d.clone()))
    });
    match held {
        None => Dir::open_named(path, create),
        Some(Some(d)) => Ok(Some(d)),
        Some(None) => {
            let opened = Dir::open_named(path, create)?;
            if let Some(d) = &opened {
                HELD.with(|h| {
                    if let Some(list) = h.borrow_mut().as_mut() {
                        list.push((path.to_path_buf(), d.clone()));
                    }
                });
            }
            Ok(opened)
        }
    }
}

/// A folder right below the state root (`logs`, `breakers`, `cache`, …), opened and checked
/// once per run like the root itself: a call touches the same few many times. (Deeper folders
/// are opened each time: a session's folder can be removed by another call meanwhile; these
/// never are.)
fn root_child(root: &Path, dir: &Dir, name: &OsStr, create: bool) -> Result<Option<Dir>> {
    static OPENED: Mutex<Vec<(PathBuf, OsString, Dir)>> = Mutex::new(Vec::new());
    let known = OPENED.lock().ok().and_then(|list| {
        list.iter()
            .find(|(r, n, _)| r == root && n == name)
            .map(|(_, _, d)| d.clone())
    });
    if let Some(d) = known {
        return Ok(Some(d));
    }
    let opened = dir.sub(name, create)?;
    if let (Some(d), Ok(mut list)) = (&opened, OPENED.lock()) {
        list.push((root.to_path_buf(), name.to_os_string(), d.clone()));
    }
    Ok(opened)
}

/// The state root, opened and checked once per run: every file of the run is then reached
/// from that one descriptor (and a root replaced meanwhile is never followed). At the first
/// call that may write (`create`), a state root gets its `.gitignore` ([`IGNORE_ALL`]) when
/// the store made it, or when it is the default one (a root the user named may be any folder
/// of theirs: it gets one only if triage made it).
fn open_root_once(anchor: &Anchor, at: &Path, create: bool) -> Result<Option<Dir>> {
    /// The roots opened, and whether their `.gitignore` has been seen to.
    static OPENED: Mutex<Vec<(PathBuf, Dir, bool)>> = Mutex::new(Vec::new());
    let known = OPENED.lock().ok().and_then(|list| {
        list.iter()
            .find(|(p, _, _)| *p == anchor.path)
            .map(|(_, d, ignored)| (d.clone(), *ignored))
    });
    let (d, created, ignored) = match known {
        Some((d, ignored)) => (d, false, ignored),
        None => {
            let Some((d, created)) = Dir::open_root(at, anchor.follow, create, anchor.state_root)?
            else {
                return Ok(None);
            };
            if let Ok(mut list) = OPENED.lock() {
                list.push((anchor.path.clone(), d.clone(), false));
            }
            (d, created, false)
        }
    };
    if create && anchor.state_root && !ignored {
        if created || !anchor.follow {
            // Best effort: a root that cannot take it still keeps the state.
            let _ = d.create_if_missing(OsStr::new(".gitignore"), IGNORE_ALL.as_bytes());
        }
        if let Ok(mut list) = OPENED.lock() {
            if let Some(entry) = list.iter_mut().find(|(p, _, _)| *p == anchor.path) {
                entry.2 = true;
            }
        }
    }
    Ok(Some(d))
}

/// The folder of `path`, opened, and the file's name in it.
pub(super) fn locate(path: &Path, create: bool) -> Result<Option<(Dir, OsString)>> {
    let name = match path.components().next_back() {
        Some(Component::Normal(n)) => n.to_os_string(),
        _ => {
            return Err(StoreError::refused(
                path,
                "it does not end in a file name".into(),
            ))
        }
    };
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    Ok(open_dir(parent, create)?.map(|d| (d, name)))
}

/// Like [`locate`], for a file that must be written: its folders are created.
pub(super) fn locate_for_write(path: &Path) -> Result<(Dir, OsString)> {
    locate(path, true)?.ok_or_else(|| {
        StoreError::io(
            "cannot open the folder of",
            path,
            io::Error::from(io::ErrorKind::NotFound),
        )
    })
}

/// Creates `dir` (and the folders above it, up to the state root) with mode 0700 if missing,
/// refusing links and loose folders under the state root.
pub fn ensure_dir(dir: &Path) -> Result<()> {
    open_dir(dir, true).map(|_| ())
}

/// Creates a folder and its missing parents, 0700 whatever the umask, for folders that belong
/// to the user rather than to the state root (`.claude/`): they are not checked.
pub fn create_dirs(dir: &Path) -> Result<()> {
    super::dir::create_all(dir)
}

/// `path` with `suffix` added to its file name, shortened with a hash when the result would
/// not fit in one file name: `state.json` + `.bak` = `state.json.bak`.
pub fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let name = path.file_name().unwrap_or(OsStr::new(""));
    path.with_file_name(names::derived(name, suffix, 0))
}

/// One entry of a folder listing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// The file name.
    pub name: OsString,
    /// What it is (links are not followed).
    pub kind: Kind,
}

/// The keys of a folder of `escape_key(KEY).json` files, sorted: regular files only, hidden
/// ones (temp files) and shortened names (which cannot be unescaped) left out.
pub fn keys_in(dir: &Path) -> Result<Vec<String>> {
    let mut keys: Vec<String> = list_dir(dir)?
        .into_iter()
        .filter(|e| e.kind == super::Kind::File)
        .filter_map(|e| {
            let name = e.name.to_string_lossy().into_owned();
            name.strip_suffix(".json")
                .filter(|s| !s.starts_with('.'))
                .and_then(super::unescape_key)
        })
        .collect();
    keys.sort();
    Ok(keys)
}

/// The entries of a folder (a missing folder is empty). Under the state root, the folder
/// and those above it must not be links.
pub fn list_dir(dir: &Path) -> Result<Vec<Entry>> {
    let Some(d) = open_dir(dir, false)? else {
        return Ok(Vec::new());
    };
    Ok(d.entries()?
        .into_iter()
        .map(|(name, kind)| Entry { name, kind })
        .collect())
}

/// Removes an empty folder; `false` when it is not empty, missing or cannot be removed.
pub fn remove_empty_dir(dir: &Path) -> bool {
    match locate(dir, false) {
        Ok(Some((parent, name))) => parent.remove_dir(&name).is_ok(),
        _ => false,
    }
}
