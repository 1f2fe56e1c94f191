//! An opened folder, and the files in it reached relative to its descriptor (`openat`,
//! `renameat`, `unlinkat`…): a name is resolved once, a link is never followed, and only a
//! regular file is ever read or written — a FIFO or a device is refused before it can block.
//!
//! Each folder is checked when it is opened: a link is refused, and so is a folder owned by
//! another user or writable by group or others (as ssh refuses a loose `~/.ssh`), since
//! whoever can write in it can swap what the store is about to open.

use super::names::{self, TEMP_RANDOM};
use super::{Result, StoreError};
use rustix::fs::{self as rfs, AtFlags, FileType, Mode, OFlags};
use rustix::io::Errno;
use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Mode of every file the store creates, whatever the umask.
pub const FILE_MODE: u32 = 0o600;
/// Mode of every folder the store creates, whatever the umask.
pub const DIR_MODE: u32 = 0o700;

/// [`DIR_MODE`] as rustix takes it (whose mode type is 16 bits wide on Apple's systems).
fn dir_mode() -> Mode {
    Mode::RWXU
}

/// [`FILE_MODE`] as rustix takes it.
fn file_mode() -> Mode {
    Mode::RUSR | Mode::WUSR
}

/// The permission bits of an `st_mode` (a `u32` on Linux, a `u16` on Apple's systems).
#[allow(clippy::useless_conversion)]
fn permission_bits(st_mode: impl Into<u32>) -> u32 {
    st_mode.into() & 0o7777
}

/// An opened, checked folder.
#[derive(Clone, Debug)]
pub struct Dir {
    /// Shared, so an opened state root can be kept for the whole run.
    fd: Arc<OwnedFd>,
    path: PathBuf,
    /// A folder of the state root's tree: one of the user's own that only its group may
    /// write is repaired rather than refused (see [`check_folder`]).
    repairs: bool,
}

/// What is at a name in a folder, without following a link.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A regular file.
    File,
    /// A folder.
    Dir,
    /// A symbolic link.
    Link,
    /// A FIFO, socket or device.
    Other,
}

fn kind_of(t: FileType) -> Kind {
    match t {
        FileType::RegularFile => Kind::File,
        FileType::Directory => Kind::Dir,
        FileType::Symlink => Kind::Link,
        _ => Kind::Other,
    }
}

fn type_word(t: FileType) -> &'static str {
    match t {
        FileType::RegularFile => "a regular file",
        FileType::Directory => "a folder",
        FileType::Symlink => "a symbolic link",
        FileType::Fifo => "a FIFO",
        FileType::Socket => "a socket",
        FileType::CharacterDevice => "a character device",
        FileType::BlockDevice => "a block device",
        _ => "not a regular file",
    }
}

fn io_err(e: Errno) -> io::Error {
    io::Error::from(e)
}

/// The user the store works for: the effective uid.
fn me() -> u32 {
    // Asked once: every folder and file check compares with it.
    static ME: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
    *ME.get_or_init(|| rustix::process::geteuid().as_raw())
}

/// Refuses a folder that another user could change under us. With `repair` (the state root
/// and the folders in it), one of the user's own that is writable by its group but not by
/// others (as an older triage made them under a umask such as 002) is made 0700 instead,
/// with a notice (see [`super::notice`]).
fn check_folder(fd: &OwnedFd, path: &Path, repair: bool) -> Result<()> {
    let st = rfs::fstat(fd).map_err(|e| StoreError::io("cannot stat", path, io_err(e)))?;
    if FileType::from_raw_mode(st.st_mode) != FileType::Directory {
        return Err(StoreError::refused(path, "it is not a folder".into()));
    }
    let owner = st.st_uid;
    let mode = permission_bits(st.st_mode);
    if repair && owner == me() && mode & 0o022 == 0o020 && rfs::fchmod(fd, dir_mode()).is_ok() {
        super::notice(&format!(
            "{} was writable by its group (mode {mode:04o}, as an older triage left it under a umask such as 002); made it {DIR_MODE:04o}",
            path.display()
        ));
        return Ok(());
    }
    if owner != me() && owner != 0 {
        return Err(StoreError::refused(
            path,
            format!(
                "it is owned by uid {owner}, not by you (uid {}); use a state root of your own (--dir, TRIAGE_DIR)",
                me()
            ),
        ));
    }
    if mode & 0o022 != 0 {
        return Err(StoreError::refused(
            path,
            format!(
                "it is writable by {} (mode {mode:04o}); run `chmod go-w {}`",
                if mode & 0o002 != 0 {
                    "others"
                } else {
                    "its group"
                },
                path.display()
            ),
        ));
    }
    Ok(())
}

/// Why opening `path` failed, as a refusal when something other than a regular file (or a
/// folder, when `want_dir`) is there.
fn open_failure(dir: Option<&Dir>, name: &OsStr, path: &Path, e: Errno, what: &str) -> StoreError {
    if matches!(e, Errno::LOOP | Errno::NXIO | Errno::ISDIR | Errno::NOTDIR) {
        let st = match dir {
            Some(d) => rfs::statat(&d.fd, name, AtFlags::SYMLINK_NOFOLLOW),
            None => rfs::statat(rfs::CWD, path, AtFlags::SYMLINK_NOFOLLOW),
        };
        if let Ok(st) = st {
            let t = FileType::from_raw_mode(st.st_mode);
            return StoreError::refused(path, format!("it is {}", type_word(t)));
        }
    }
    StoreError::io(what, path, io_err(e))
}

/// A random name part for temp files: the pid, the time and a counter, mixed.
fn random_part() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let mut z = nanos
        ^ (u64::from(std::process::id()) << 32)
        ^ COUNTER
            .fetch_add(1, Ordering::Relaxed)
            .wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    let s = format!("{:016x}", z ^ (z >> 31));
    s[..TEMP_RANDOM].to_string()
}

impl Dir {
    /// The folder's path, for messages.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The path of `name` in this folder, for messages.
    pub fn child(&self, name: &OsStr) -> PathBuf {
        self.path.join(name)
    }

    /// A folder the user named: links in `path` are followed (the user chose them) and it is
    /// not checked. `create` makes it and its parents (0700). `Ok(None)`: it does not exist.
    pub fn open_named(path: &Path, create: bool) -> Result<Option<Dir>> {
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
        // Opened first, made only when missing: the folder usually exists, and asking first
        // whether it does costs a call every time.
        let mut opened = rfs::openat(rfs::CWD, path, flags, Mode::empty());
        if create && matches!(opened, Err(Errno::NOENT)) {
            create_all(path)?;
            opened = rfs::openat(rfs::CWD, path, flags, Mode::empty());
        }
        match opened {
            Ok(fd) => Ok(Some(Dir {
                fd: Arc::new(fd),
                path: path.to_path_buf(),
                repairs: false,
            })),
            Err(Errno::NOENT) => Ok(None),
            Err(e) => Err(open_failure(
                None,
                path.as_os_str(),
                path,
                e,
                "cannot open folder",
            )),
        }
    }

    /// The state root (or the user's cache folder): checked (owner, mode, a folder that only
    /// its group may write repaired when `repair`), and, unless `follow`, not a link itself.
    /// `create` makes it 0700 (and its missing parents); `true` beside it when it was made.
    pub fn open_root(
        path: &Path,
        follow: bool,
        create: bool,
        repair: bool,
    ) -> Result<Option<(Dir, bool)>> {
        let mut flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
        if !follow {
            flags |= OFlags::NOFOLLOW;
        }
        let mut created = false;
        let fd = loop {
            match rfs::openat(rfs::CWD, path, flags, Mode::empty()) {
                Ok(fd) => break fd,
                Err(Errno::NOENT) if create && !created => {
                    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
                        create_all(parent)?;
                    }
                    match rfs::mkdirat(rfs::CWD, path, dir_mode()) {
                        Ok(()) | Err(Errno::EXIST) => created = true,
                        Err(e) => {
                            return Err(StoreError::io("cannot create folder", path, io_err(e)))
                        }
                    }
                }
                Err(Errno::NOENT) => return Ok(None),
                Err(e) => {
                    return Err(open_failure(
                        None,
                        path.as_os_str(),
                        path,
                        e,
                        "cannot open folder",
                    ))
                }
            }
        };
        if created {
            let _ = rfs::fchmod(&fd, dir_mode());
        }
        check_folder(&fd, path, repair)?;
        Ok(Some((
            Dir {
                fd: Arc::new(fd),
                path: path.to_path_buf(),
                repairs: repair,
            },
            created,
        )))
    }

    /// Writes the new file `name` holding `bytes` (0600 whatever the umask), unless something
    /// is there already (`Ok(false)`: never replaced, whatever it is, a link included).
    pub fn create_if_missing(&self, name: &OsStr, bytes: &[u8]) -> Result<bool> {
        let path = self.child(name);
        let flags = OFlags::WRONLY
            | OFlags::CREATE
            | OFlags::EXCL
            | OFlags::NOFOLLOW
            | OFlags::NONBLOCK
            | OFlags::CLOEXEC
            | OFlags::NOCTTY;
        let fd = match rfs::openat(&*self.fd, name, flags, file_mode()) {
            Ok(fd) => fd,
            Err(Errno::EXIST) => return Ok(false),
            Err(e) => return Err(StoreError::io("cannot create", &path, io_err(e))),
        };
        let _ = rfs::fchmod(&fd, file_mode());
        let mut f = File::from(fd);
        io::Write::write_all(&mut f, bytes)
            .map_err(|e| StoreError::io("cannot write", &path, e))?;
        Ok(true)
    }

    /// The folder `name` in this one: never a link, checked like the root. `create` makes it
    /// (0700). `Ok(None)`: it does not exist.
    pub fn sub(&self, name: &OsStr, create: bool) -> Result<Option<Dir>> {
        let path = self.child(name);
        if !names::is_plain(name) {
            return Err(StoreError::refused(
                &path,
                "it is not a plain folder name".into(),
            ));
        }
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let mut created = false;
        let fd = loop {
            match rfs::openat(&*self.fd, name, flags, Mode::empty()) {
                Ok(fd) => break fd,
                Err(Errno::NOENT) if create && !created => {
                    match rfs::mkdirat(&*self.fd, name, dir_mode()) {
                        Ok(()) => created = true,
                        Err(Errno::EXIST) => created = true,
                        Err(e) => {
                            return Err(StoreError::io("cannot create folder", &path, io_err(e)))
                        }
                    }
                }
                Err(Errno::NOENT) => return Ok(None),
                Err(e) => {
                    return Err(open_failure(
                        Some(self),
                        name,
                        &path,
                        e,
                        "cannot open folder",
                    ))
                }
            }
        };
        if created {
            let _ = rfs::fchmod(&fd, dir_mode());
        }
        check_folder(&fd, &path, self.repairs)?;
        Ok(Some(Dir {
            fd: Arc::new(fd),
            path,
            repairs: self.repairs,
        }))
    }

    /// Opens the file `name` with `access` (read, write, append…), never following a link and
    /// never blocking on a FIFO; anything but a regular file is refused. With `create`, a
    /// missing file is made 0600 whatever the umask. `Ok(None)`: it does not exist.
    pub fn open(&self, name: &OsStr, access: OFlags, create: bool) -> Result<Option<File>> {
        Ok(self.open_sized(name, access, create)?.map(|(f, _)| f))
    }

    /// [`Dir::open`], with the file's length when it was opened (from the same `fstat`).
    pub fn open_sized(
        &self,
        name: &OsStr,
        access: OFlags,
        create: bool,
    ) -> Result<Option<(File, u64)>> {
        let path = self.child(name);
        if !names::is_plain(name) {
            return Err(StoreError::refused(
                &path,
                "it is not a plain file name".into(),
            ));
        }
        let flags = access | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC | OFlags::NOCTTY;
        let mode = file_mode();
        // The file usually exists (a lock, a log): open it first, and create it (exclusively,
        // so a file made here is known and made 0600) only when it is missing.
        let mut created = false;
        let fd = loop {
            match rfs::openat(&*self.fd, name, flags, Mode::empty()) {
                Ok(fd) => break fd,
                Err(Errno::NOENT) if create && !created => {}
                Err(Errno::NOENT) => return Ok(None),
                Err(e) => return Err(open_failure(Some(self), name, &path, e, "cannot open")),
            }
            match rfs::openat(&*self.fd, name, flags | OFlags::CREATE | OFlags::EXCL, mode) {
                Ok(f) => {
                    let _ = rfs::fchmod(&f, mode);
                    break f;
                }
                // Made meanwhile by another process: open that one.
                Err(Errno::EXIST) => created = true,
                Err(e) => return Err(open_failure(Some(self), name, &path, e, "cannot create")),
            }
        };
        let st = rfs::fstat(&fd).map_err(|e| StoreError::io("cannot stat", &path, io_err(e)))?;
        let t = FileType::from_raw_mode(st.st_mode);
        if t != FileType::RegularFile {
            return Err(StoreError::refused(
                &path,
                format!("it is {}", type_word(t)),
            ));
        }
        Ok(Some((
            File::from(fd),
            u64::try_from(st.st_size).unwrap_or(0),
        )))
    }

    /// What is at `name`, without following a link; `None` when nothing is.
    pub fn kind(&self, name: &OsStr) -> Result<Option<(Kind, u32)>> {
        match rfs::statat(&*self.fd, name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) => Ok(Some((
                kind_of(FileType::from_raw_mode(st.st_mode)),
                permission_bits(st.st_mode),
            ))),
            Err(Errno::NOENT) => Ok(None),
            Err(e) => Err(StoreError::io("cannot stat", &self.child(name), io_err(e))),
        }
    }

    /// Refuses `name` when something other than a regular file is there.
    pub fn expect_file(&self, name: &OsStr) -> Result<Option<u32>> {
        match self.kind(name)? {
            None => Ok(None),
            Some((Kind::File, mode)) => Ok(Some(mode)),
            Some((_, _)) => {
                let st = rfs::statat(&*self.fd, name, AtFlags::SYMLINK_NOFOLLOW)
                    .map_err(|e| StoreError::io("cannot stat", &self.child(name), io_err(e)))?;
                Err(StoreError::refused(
                    &self.child(name),
                    format!("it is {}", type_word(FileType::from_raw_mode(st.st_mode))),
                ))
            }
        }
    }

    /// A new temp file for replacing `name`, 0600 whatever the umask (a caller keeping another
    /// file's mode sets it).
    pub fn create_temp(&self, name: &OsStr) -> Result<(OsString, File)> {
        let prefix = names::temp_prefix(name);
        let mut last = None;
        for _ in 0..64 {
            let mut tmp = prefix.clone();
            tmp.push(random_part());
            let flags =
                OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
            match rfs::openat(&*self.fd, &tmp, flags, file_mode()) {
                Ok(fd) => {
                    // 0600 whatever the umask took away.
                    let _ = rfs::fchmod(&fd, file_mode());
                    return Ok((tmp, File::from(fd)));
                }
                Err(Errno::EXIST) => last = Some(Errno::EXIST),
                Err(e) => {
                    return Err(StoreError::io(
                        "cannot create a temp file in",
                        &self.path,
                        io_err(e),
                    ))
                }
            }
        }
        Err(StoreError::io(
            "cannot create a temp file in",
            &self.path,
            io_err(last.unwrap_or(Errno::EXIST)),
        ))
    }

    /// Renames `from` to `to` within this folder (replacing `to`).
    pub fn rename(&self, from: &OsStr, to: &OsStr) -> io::Result<()> {
        rfs::renameat(&*self.fd, from, &*self.fd, to).map_err(io_err)
    }

    /// Swaps the names `a` and `b` within this folder atomically (both must exist): `Ok(false)`
    /// where the file system cannot (the caller renames instead).
    pub fn exchange(&self, a: &OsStr, b: &OsStr) -> io::Result<bool> {
        match rfs::renameat_with(&*self.fd, a, &*self.fd, b, rfs::RenameFlags::EXCHANGE) {
            Ok(()) => Ok(true),
            Err(Errno::INVAL | Errno::NOSYS | Errno::OPNOTSUPP) => Ok(false),
            Err(e) => Err(io_err(e)),
        }
    }

    /// Renames `from` to `to` within this folder, failing if `to` exists.
    pub fn rename_new(&self, from: &OsStr, to: &OsStr) -> io::Result<()> {
        match rfs::renameat_with(&*self.fd, from, &*self.fd, to, rfs::RenameFlags::NOREPLACE) {
            Ok(()) => Ok(()),
            // A file system without RENAME_NOREPLACE: a hard link never replaces either.
            Err(Errno::INVAL | Errno::NOSYS | Errno::OPNOTSUPP) => {
                rfs::linkat(&*self.fd, from, &*self.fd, to, AtFlags::empty()).map_err(io_err)?;
                rfs::unlinkat(&*self.fd, from, AtFlags::empty()).map_err(io_err)
            }
            Err(e) => Err(io_err(e)),
        }
    }

    /// A second name `to` for the file `from` in this folder (never following a link).
    pub fn hard_link(&self, from: &OsStr, to: &OsStr) -> io::Result<()> {
        rfs::linkat(&*self.fd, from, &*self.fd, to, AtFlags::empty()).map_err(io_err)
    }

    /// Removes the name `name` (a link is removed itself, never what it points to).
    pub fn unlink(&self, name: &OsStr) -> io::Result<()> {
        rfs::unlinkat(&*self.fd, name, AtFlags::empty()).map_err(io_err)
    }

    /// Removes the empty folder `name`.
    pub fn remove_dir(&self, name: &OsStr) -> io::Result<()> {
        rfs::unlinkat(&*self.fd, name, AtFlags::REMOVEDIR).map_err(io_err)
    }

    /// fsyncs the folder, so a rename or a new file in it survives a crash.
    pub fn sync(&self) -> Result<()> {
        rfs::fsync(&*self.fd)
            .map_err(|e| StoreError::io("cannot fsync folder", &self.path, io_err(e)))
    }

    /// Which folder this is (device and inode), for a memo that must not confuse a folder
    /// with another made at the same path.
    pub fn identity(&self) -> Option<(u64, u64)> {
        let st = rfs::fstat(self.fd.as_ref()).ok()?;
        // The field types differ by platform (macOS's st_dev is an i32): only equality matters.
        #[allow(clippy::unnecessary_cast)]
        Some((st.st_dev as u64, st.st_ino as u64))
    }

    /// The names in this folder (without `.` and `..`) and what each is.
    pub fn entries(&self) -> Result<Vec<(OsString, Kind)>> {
        let fail = |e: Errno| StoreError::io("cannot list", &self.path, io_err(e));
        // A descriptor of its own (the listing moves its offset), opened as `Dir::read_from`
        // would but without asking the folder's flags first: they are known.
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
        let fd = rfs::openat(self.fd.as_ref(), ".", flags, Mode::empty()).map_err(fail)?;
        let mut dir = rfs::Dir::new(fd).map_err(fail)?;
        let mut out = Vec::new();
        while let Some(entry) = dir.read() {
            let entry = entry.map_err(fail)?;
            let name = OsStr::from_bytes(entry.file_name().to_bytes());
            if name == "." || name == ".." {
                continue;
            }
            let kind = match entry.file_type() {
                FileType::Unknown => match self.kind(name)? {
                    Some((k, _)) => k,
                    None => continue,
                },
                t => kind_of(t),
            };
            out.push((name.to_os_string(), kind));
        }
        Ok(out)
    }
}

use std::os::unix::ffi::OsStrExt;

/// Creates `path` and its missing parents, 0700 whatever the umask (folders the user named).
pub(super) fn create_all(path: &Path) -> Result<()> {
    if path.is_dir() {
        return Ok(());
    }
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        create_all(parent)?;
    }
    match rfs::mkdirat(rfs::CWD, path, dir_mode()) {
        Ok(()) => {
            // The umask may have taken bits away: set the mode on the folder just made,
            // opened without following a link.
            let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
            if let Ok(fd) = rfs::openat(rfs::CWD, path, flags, Mode::empty()) {
                let _ = rfs::fchmod(&fd, dir_mode());
            }
            Ok(())
        }
        Err(Errno::EXIST) => Ok(()),
        Err(e) => Err(StoreError::io("cannot create folder", path, io_err(e))),
    }
}
