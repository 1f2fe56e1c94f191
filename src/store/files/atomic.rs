//! Writing whole files: atomic replacement (temp file, fsync, `.bak`, rename, the folder's
//! fsync, and the lighter forms for files that can be rebuilt), new files that never
//! overwrite, caches and spools, and moving aside or removing.

use super::dir::{Dir, Kind, FILE_MODE};
use super::paths::{locate, locate_for_write, open_dir};
use super::{fault, names};
use super::{Result, StoreError};
use rustix::fs::OFlags;
use std::ffi::{OsStr, OsString};
use std::io::{self, Write};
use std::os::unix::fs::{FileExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// What [`replace`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Replaced {
    /// Where the previous version was kept, if there was one.
    pub backup: Option<PathBuf>,
}

/// Whether [`replace`] keeps the previous version as `NAME.bak`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backup {
    /// Keep it.
    Keep,
    /// Do not (the previous version is corrupt and was quarantined, or is not worth keeping).
    Skip,
}

/// Removes temp files a killed writer left beside `name`. Called under the file's lock.
///
/// A folder of many names is listed once per process, at its first write: what looked like a temp file
/// then (any name with `.tmp` in it) is remembered, and each write takes from that list the
/// ones of its own name. Listing at every write made a runner that writes a file per item
/// into one folder do work in the square of the items. A temp of this name seen at the
/// listing and still there now is stale: its writer held the lock then or earlier, and the
/// lock is ours now. One a writer leaves after the listing is the next process's to remove.
pub(super) fn remove_temps_in(dir: &Dir, name: &OsStr) {
    /// Folders with fewer names are listed at every write.
    const MEMO_FROM: usize = 64;
    use std::collections::BTreeMap;
    use std::os::unix::ffi::OsStrExt;
    use std::sync::Mutex;
    type Seen = BTreeMap<(PathBuf, u64, u64), Vec<OsString>>;
    static SEEN: Mutex<Seen> = Mutex::new(BTreeMap::new());
    let prefix = names::temp_prefix(name);
    let bak_tmp = names::derived(name, ".bak.tmp", 0);
    let is_stale = |entry: &OsStr| {
        let stale = entry.as_bytes().starts_with(prefix.as_bytes())
            && entry.len() == prefix.len() + names::TEMP_RANDOM;
        stale || entry == bak_tmp
    };
    let mut seen = match SEEN.lock() {
        Ok(s) => s,
        Err(poisoned) => poisoned.into_inner(),
    };
    // By path and inode: a folder removed and made again at the same path, or another
    // folder given a freed inode, is not taken for the one listed. The identity is asked
    // only once some large folder is remembered: until then every folder is listed anyway.
    let id = |dir: &Dir| {
        dir.identity()
            .map(|(dev, ino)| (dir.path().to_path_buf(), dev, ino))
    };
    let known = match seen.is_empty() {
        true => None,
        false => id(dir).filter(|k| seen.contains_key(k)),
    };
    let temps = match known.and_then(|k| seen.get_mut(&k)) {
        Some(temps) => temps,
        None => {
            let Ok(entries) = dir.entries() else {
                return;
            };
            if entries.len() < MEMO_FROM {
                // Small: listed again next time (a folder removed and made again may reuse
                // the inode; a large one in one process is not worth that care).
                for (entry, kind) in entries {
                    if kind != Kind::Dir && is_stale(&entry) {
                        let _ = dir.unlink(&entry);
                    }
                }
                return;
            }
            let Some(k) = id(dir) else {
                return;
            };
            seen.entry(k).or_insert(
                entries
                    .into_iter()
                    .filter(|(e, kind)| {
                        *kind != Kind::Dir && e.as_bytes().windows(4).any(|w| w == b".tmp")
                    })
                    .map(|(e, _)| e)
                    .collect(),
            )
        }
    };
    temps.retain(|entry| {
        if is_stale(entry) {
            let _ = dir.unlink(entry);
            false
        } else {
            true
        }
    });
}

/// Replaces `target` with `bytes` atomically. The caller holds the target's lock.
///
/// Temp file in the same folder, write, fsync, keep the old version as `.bak` (a hard link,
/// or a copy where links fail), rename over the target, fsync the folder. The target's mode
/// is kept (a new file is 0600). On any failure before the rename, the target and its `.bak`
/// are as they were. A target that is a link, a folder or a FIFO is refused.
pub fn replace(target: &Path, bytes: &[u8], backup: Backup) -> Result<Replaced> {
    replace_in(target, bytes, backup, Durability::Full)
}

/// [`replace`] without the folder's fsync: the file is written and fsynced before the rename,
/// so it is never seen torn, but after a power loss the folder may still name the previous
/// version. For a caller that fsyncs the folder once for many files with [`sync_dir`] before
/// anything that names them is made durable.
pub fn replace_deferred(target: &Path, bytes: &[u8], backup: Backup) -> Result<Replaced> {
    replace_in(target, bytes, backup, Durability::DirLater)
}

/// [`replace`] with no fsync at all: as atomic as a rename is for every other process, but a
/// power loss may keep the previous version, or (on a filesystem that does not order a
/// rename after the data it names) leave the file torn. Only for a version whose loss is
/// harmless, read by a reader that rebuilds a torn file.
pub fn replace_unsynced(target: &Path, bytes: &[u8], backup: Backup) -> Result<Replaced> {
    replace_in(target, bytes, backup, Durability::None)
}

/// Fsyncs a folder: the renames [`replace_deferred`] made in it become durable.
pub fn sync_dir(dir: &Path) -> Result<()> {
    match open_dir(dir, false)? {
        Some(d) => d.sync(),
        None => Ok(()),
    }
}

/// How much of [`replace`]'s durability a write asks for.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Durability {
    /// The file, then the folder.
    Full,
    /// The file; the caller fsyncs the folder.
    DirLater,
    /// Neither.
    None,
}

fn replace_in(
    target: &Path,
    bytes: &[u8],
    backup: Backup,
    durability: Durability,
) -> Result<Replaced> {
    let (dir, name) = locate_for_write(target)?;
    let old_mode = dir.expect_file(&name)?;
    remove_temps_in(&dir, &name);
    let (tmp, mut file) = dir.create_temp(&name)?;
    let tmp_path = dir.child(&tmp);
    let result = (|| {
        let step =
            |what: &str, r: io::Result<()>| r.map_err(|e| StoreError::io(what, &tmp_path, e));
        // The temp file is 0600 already; a replaced file keeps its own mode.
        if let Some(mode) = old_mode.filter(|m| *m != FILE_MODE) {
            step(
                "cannot set the mode of",
                file.set_permissions(std::fs::Permissions::from_mode(mode)),
            )?;
        }
        step("cannot write", file.write_all(bytes))?;
        step("cannot write", fault::at("after-temp-write"))?;
        // An empty file has no data to flush: its inode is made in the same journal
        // transaction as its name, which the folder's fsync makes durable.
        if durability != Durability::None && !bytes.is_empty() {
            step(
                "cannot fsync",
                fault::at("fsync").and_then(|()| file.sync_all()),
            )?;
        }
        let kept = match (backup, old_mode) {
            (Backup::Keep, Some(_)) => {
                // A link (or FIFO, folder) planted as the backup is refused, not replaced.
                dir.expect_file(&names::derived(&name, ".bak", 0))?;
                Some(keep_backup(&dir, &name)?)
            }
            _ => None,
        };
        fault::at("before-rename").map_err(|e| StoreError::io("cannot rename onto", target, e))?;
        let rename_err = |e| StoreError::io("cannot rename onto", target, e);
        // With no fsync asked for, an existing target is swapped with the temp file rather
        // than renamed over: ext4 flushes the new file's data on a rename that replaces a
        // file (its `auto_da_alloc`), and frees the old file's blocks (a discard where the
        // file system is mounted so) at once; an exchange does neither, and the old version,
        // left under the temp name, is removed after. Readers see the old file or the new.
        if durability == Durability::None
            && old_mode.is_some()
            && dir.exchange(&tmp, &name).map_err(rename_err)?
        {
            // Killed here, the old version stays under the temp name until the next write's
            // `remove_temps_in`; the target is already the new version.
            let _ = fault::at("after-exchange");
            let _ = dir.unlink(&tmp);
        } else {
            dir.rename(&tmp, &name).map_err(rename_err)?;
        }
        Ok(kept)
    })();
    let kept = match result {
        Ok(kept) => kept,
        Err(e) => {
            let _ = dir.unlink(&tmp);
            return Err(e);
        }
    };
    if durability == Durability::Full {
        fault::at("before-dir-fsync")
            .map_err(|e| StoreError::io("cannot fsync folder", dir.path(), e))?;
        dir.sync()?;
    }
    Ok(Replaced {
        backup: kept.map(|b| dir.child(&b)),
    })
}

/// Makes `NAME.bak` the current version of `name`: a hard link (no copy; the old inode
/// becomes the backup), or a copy + fsync where links fail. Replaced by rename, so a reader
/// never sees a half-written `.bak`.
fn keep_backup(dir: &Dir, name: &OsStr) -> Result<OsString> {
    let bak = names::derived(name, ".bak", 0);
    let bak_tmp = names::derived(name, ".bak.tmp", 0);
    let _ = dir.unlink(&bak_tmp);
    if dir.hard_link(name, &bak_tmp).is_err() {
        copy_synced(dir, name, &bak_tmp)?;
    }
    dir.rename(&bak_tmp, &bak).map_err(|e| {
        let _ = dir.unlink(&bak_tmp);
        StoreError::io("cannot rename backup onto", &dir.child(&bak), e)
    })?;
    Ok(bak)
}

fn copy_synced(dir: &Dir, from: &OsStr, to: &OsStr) -> Result<()> {
    let to_path = dir.child(to);
    let result = (|| {
        let mut src = dir.open(from, OFlags::RDONLY, false)?.ok_or_else(|| {
            StoreError::io(
                "cannot open",
                &dir.child(from),
                io::ErrorKind::NotFound.into(),
            )
        })?;
        let mode = src
            .metadata()
            .map(|m| m.permissions().mode() & 0o7777)
            .unwrap_or(FILE_MODE);
        let _ = dir.unlink(to);
        let mut dst = dir.open(to, OFlags::WRONLY, true)?.ok_or_else(|| {
            StoreError::io("cannot create", &to_path, io::ErrorKind::NotFound.into())
        })?;
        io::copy(&mut src, &mut dst)
            .and_then(|_| dst.set_permissions(std::fs::Permissions::from_mode(mode)))
            .and_then(|()| dst.sync_all())
            .map_err(|e| StoreError::io("cannot copy a backup to", &to_path, e))
    })();
    if result.is_err() {
        let _ = dir.unlink(to);
    }
    result
}

/// Writes `bytes` to a new file `target` atomically (0600), failing if it already exists.
/// Used for copies that must never overwrite an earlier one (checkpoints, partial outputs).
pub fn create_new(target: &Path, bytes: &[u8]) -> Result<()> {
    let (dir, name) = locate_for_write(target)?;
    let (tmp, mut f) = dir.create_temp(&name)?;
    let written = f
        .write_all(bytes)
        .and_then(|()| f.sync_all())
        .and_then(|()| dir.rename_new(&tmp, &name));
    if let Err(e) = written {
        let _ = dir.unlink(&tmp);
        return Err(StoreError::io("cannot create", target, e));
    }
    dir.sync()
}

/// Moves a corrupt file aside as `NAME.corrupt-<stamp>` (shortened to fit one file name),
/// never deleting it. Whatever is at the name is moved itself (a link, not what it points
/// to), and only within a folder the store has checked, never through a linked one.
pub fn quarantine(path: &Path, stamp: &str) -> Result<PathBuf> {
    let (dir, name) = locate(path, false)?
        .ok_or_else(|| StoreError::io("cannot move aside", path, io::ErrorKind::NotFound.into()))?;
    let mut n = 0u32;
    loop {
        let suffix = match n {
            0 => format!(".corrupt-{stamp}"),
            n => format!(".corrupt-{stamp}-{n}"),
        };
        let dest = names::derived(&name, &suffix, 0);
        match dir.rename_new(&name, &dest) {
            Ok(()) => {
                dir.sync()?;
                return Ok(dir.child(&dest));
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists && n < 10_000 => n += 1,
            Err(e) => return Err(StoreError::io("cannot move aside", path, e)),
        }
    }
}

/// Removes a file and fsyncs its folder; a file already gone is not an error. A link is
/// removed itself (never what it points to); a folder is refused.
pub fn remove(path: &Path) -> Result<()> {
    let Some((dir, name)) = locate(path, false)? else {
        return Ok(());
    };
    if let Some((Kind::Dir, _)) = dir.kind(&name)? {
        return Err(StoreError::refused(path, "it is a folder".into()));
    }
    match dir.unlink(&name) {
        Ok(()) => dir.sync(),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(StoreError::io("cannot remove", path, e)),
    }
}

/// Overwrites a cache file (one that can be rebuilt from other data) in place, without
/// fsync and without a rename: replace-by-rename makes ext4 flush the data first
/// (`auto_da_alloc`), which costs milliseconds on every call. Safe because the caller holds the
/// lock that guards the file, so no reader sees it half-written, and a crash mid-write leaves
/// bytes that no longer parse (a cut JSON text, or new JSON followed by the old tail), which
/// the caller detects and rebuilds from.
pub fn overwrite_cache(target: &Path, bytes: &[u8]) -> Result<()> {
    let (dir, name) = locate_for_write(target)?;
    let f = dir
        .open(&name, OFlags::WRONLY, true)?
        .ok_or_else(|| StoreError::io("cannot open", target, io::ErrorKind::NotFound.into()))?;
    f.write_all_at(bytes, 0)
        .and_then(|()| f.set_len(bytes.len() as u64))
        .map_err(|e| StoreError::io("cannot write", target, e))
}

/// Writes a file that can be rebuilt from other data (a cache), replacing it atomically: a
/// 0600 temp file renamed over it, so a reader sees the old bytes or the new ones. No fsync:
/// a cache lost to a power cut is rebuilt, and a reader checks what it reads anyway.
pub fn write_cache(target: &Path, bytes: &[u8]) -> Result<()> {
    let (dir, name) = locate_for_write(target)?;
    dir.expect_file(&name)?;
    let (tmp, mut f) = dir.create_temp(&name)?;
    let written = f
        .write_all(bytes)
        .and_then(|()| fault::at("cache-before-rename"))
        .and_then(|()| dir.rename(&tmp, &name));
    if let Err(e) = written {
        let _ = dir.unlink(&tmp);
        return Err(StoreError::io("cannot write", target, e));
    }
    Ok(())
}

/// Writes `bytes` as the new file `target`, failing if it exists, without fsync (a spool
/// file: losing it to a power cut is as bad as losing the log line it stands for, no worse).
/// Written to a temp file and renamed, so a reader never sees it half-written.
pub fn spool(target: &Path, bytes: &[u8]) -> Result<()> {
    let (dir, name) = locate_for_write(target)?;
    let (tmp, mut f) = dir.create_temp(&name)?;
    let written = f
        .write_all(bytes)
        .and_then(|()| dir.rename_new(&tmp, &name));
    if let Err(e) = written {
        let _ = dir.unlink(&tmp);
        return Err(StoreError::io("cannot write", target, e));
    }
    Ok(())
}
