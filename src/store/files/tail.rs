//! Reading a JSONL log from its end: newest line first ([`read_jsonl_rev_to`]), and following it
//! as it grows ([`Follower`]), across a prune that replaces the file by rename and across a
//! truncation in place.

use super::{Result, StoreError};
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};

/// How much is read from the end at a time.
const CHUNK: usize = 256 * 1024;

/// Reads a JSONL log newest line first, from byte `end` rather than the end of the file (a
/// follower's start, so that no line is both listed and followed).
pub fn read_jsonl_rev_to(
    path: &Path,
    end: Option<u64>,
    mut visit: impl FnMut(&[u8]) -> bool,
) -> Result<()> {
    // Never through a link, only a regular file: the store's own reader.
    let Some(file) = super::open_read(path)? else {
        return Ok(());
    };
    let size = file
        .metadata()
        .map_err(|e| StoreError::io("cannot stat", path, e))?
        .len();
    let len = end.map_or(size, |e| e.min(size));
    // `pending` holds the bytes after the last newline found so far, in file order.
    let mut pending: Vec<u8> = Vec::new();
    let mut end = len;
    let mut first = true;
    while end > 0 {
        let start = end.saturating_sub(CHUNK as u64);
        let mut buf = vec![0; usize::try_from(end - start).unwrap_or(0)];
        file.read_exact_at(&mut buf, start)
            .map_err(|e| StoreError::io("cannot read", path, e))?;
        buf.extend_from_slice(&pending);
        pending.clear();
        // Lines end at each newline; the bytes before the first newline of this chunk may
        // continue in the previous chunk.
        let mut stop = buf.len();
        if first {
            // The bytes after the last newline are a torn or unfinished line.
            stop = buf.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
            if stop == 0 && start > 0 {
                pending = Vec::new();
                end = start;
                continue;
            }
            first = false;
        }
        let mut line_end = stop;
        let mut cursor = stop;
        while cursor > 0 {
            match buf[..cursor - 1].iter().rposition(|&b| b == b'\n') {
                Some(nl) => {
                    if !emit(&buf[nl + 1..line_end], &mut visit) {
                        return Ok(());
                    }
                    line_end = nl + 1;
                    cursor = nl + 1;
                }
                None => break,
            }
        }
        if start == 0 {
            if !emit(&buf[..line_end], &mut visit) {
                return Ok(());
            }
        } else {
            pending = buf[..line_end].to_vec();
        }
        end = start;
    }
    Ok(())
}

/// Hands one line (with its newline) to `visit` without the newline; blank lines are skipped.
fn emit(line: &[u8], visit: &mut impl FnMut(&[u8]) -> bool) -> bool {
    let mut body = line.strip_suffix(b"\n").unwrap_or(line);
    if body.last() == Some(&b'\r') {
        body = &body[..body.len() - 1];
    }
    if body.iter().all(u8::is_ascii_whitespace) {
        return true;
    }
    visit(body)
}

/// An open file, its inode and its length.
type Opened = (File, u64, u64);

/// How much of the file's start, and of the last line read, the follower keeps to recognise
/// the file it is reading.
const KEPT: usize = 4096;

/// What became of the bytes a follower read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Seen {
    /// Still there.
    Kept,
    /// The unfinished last line is gone: a writer cut it off as torn.
    Torn,
    /// The file was cut (and perhaps written again): read it from its start.
    Cut,
}

/// Follows a JSONL file as lines are appended, like `tail -f`, and across its replacement: a
/// prune renames a new file over it, holding the lines it kept. The follower then finishes the
/// old file, finds in the new one the last line it had read, and goes on after it, so no line
/// is shown twice and none is lost (when the last line read was pruned too, every line in
/// the new file is newer).
///
/// A file cut in place (same inode) is told apart from one that only grew by more than its
/// size, which a truncation followed by enough appends between two polls hides: the start of
/// the file and the last line read must still be where they were. When they are not, the file
/// is read again from its start. A torn last line that a writer cut off and wrote again is not
/// a truncation: it is read again from where it began.
pub struct Follower {
    path: PathBuf,
    file: Option<File>,
    id: Option<u64>,
    offset: u64,
    partial: Vec<u8>,
    last: Vec<u8>,
    /// The file's first bytes, up to [`KEPT`], all of complete lines already read.
    head: Vec<u8>,
}

impl Follower {
    /// Starts at the current end of the file (or at its start once it appears).
    pub fn at_end(path: &Path) -> Result<Follower> {
        let mut f = Follower {
            path: path.to_path_buf(),
            file: None,
            id: None,
            offset: 0,
            partial: Vec::new(),
            last: Vec::new(),
            head: Vec::new(),
        };
        if let Some((file, id, len)) = f.open()? {
            // Start after the last complete line; an unfinished one is read when it ends.
            let mut tail = vec![0; usize::try_from(len.min(64 * 1024)).unwrap_or(0)];
            let from = len - tail.len() as u64;
            file.read_exact_at(&mut tail, from)
                .map_err(|e| StoreError::io("cannot read", path, e))?;
            let keep = tail.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
            f.offset = len - (tail.len() - keep) as u64;
            if keep > 0 {
                let body = &tail[..keep - 1];
                let begin = body.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
                f.last = body[begin..].to_vec();
            }
            f.head = vec![0; usize::try_from(f.offset.min(KEPT as u64)).unwrap_or(0)];
            file.read_exact_at(&mut f.head, 0)
                .map_err(|e| StoreError::io("cannot read", path, e))?;
            f.file = Some(file);
            f.id = Some(id);
        }
        Ok(f)
    }

    /// The file, its inode and its length; `None` while it does not exist. Opened as the
    /// store opens its files: never through a link, only a regular file.
    fn open(&self) -> Result<Option<Opened>> {
        let Some(file) = super::open_read(&self.path)? else {
            return Ok(None);
        };
        let m = file
            .metadata()
            .map_err(|e| StoreError::io("cannot stat", &self.path, e))?;
        Ok(Some((file, m.ino(), m.len())))
    }

    /// Where the next line will be read from.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// Hands every line completed since the last call to `visit`, oldest first.
    pub fn poll(&mut self, mut visit: impl FnMut(&[u8])) -> Result<()> {
        let now = super::stamp(&self.path)?;
        if let (Some(s), Some(id), Some(file)) = (now, self.id, self.file.as_ref()) {
            // The same file, shorter than what was read of it: cut, though not yet grown
            // back past the offset (which the reads below would notice themselves).
            let done = self.offset.saturating_sub(self.partial.len() as u64);
            if s.ino == id {
                let seen = if s.len < done {
                    Seen::Cut
                } else {
                    self.verify(file)?
                };
                self.recover(seen);
            }
        }
        self.drain(&mut visit)?;
        let replaced = match (now, self.id) {
            (Some(s), Some(id)) => s.ino != id,
            (Some(_), None) => true,
            (None, _) => false,
        };
        if !replaced {
            return Ok(());
        }
        let Some((mut file, id, _)) = self.open()? else {
            return Ok(());
        };
        // Skip what the new file kept of the old one: up to the last line read. Streamed, one
        // line in memory at a time, however large the file.
        let mut resume = 0u64;
        if !self.last.is_empty() {
            let mut reader = std::io::BufReader::with_capacity(256 * 1024, &mut file);
            let mut line = Vec::new();
            let mut at = 0u64;
            loop {
                line.clear();
                let n = std::io::BufRead::read_until(&mut reader, b'\n', &mut line)
                    .map_err(|e| StoreError::io("cannot read", &self.path, e))?;
                if n == 0 || line.last() != Some(&b'\n') {
                    break;
                }
                at += n as u64;
                if line.strip_suffix(b"\n") == Some(self.last.as_slice()) {
                    resume = at;
                }
            }
        }
        self.offset = resume;
        self.partial.clear();
        if resume == 0 {
            self.last.clear();
        }
        self.head = vec![0; usize::try_from(resume.min(KEPT as u64)).unwrap_or(0)];
        file.read_exact_at(&mut self.head, 0)
            .map_err(|e| StoreError::io("cannot read", &self.path, e))?;
        self.id = Some(id);
        file.seek(SeekFrom::Start(self.offset))
            .map_err(|e| StoreError::io("cannot seek", &self.path, e))?;
        self.file = Some(file);
        self.drain(&mut visit)
    }

    /// Whether what was read of `file` is still there: its start and the last line read
    /// unchanged, else the file was cut (and perhaps written again past the offset); and the
    /// unfinished line read so far unchanged, else it was a torn line that a writer cut off.
    fn verify(&self, file: &File) -> Result<Seen> {
        let done = self.offset.saturating_sub(self.partial.len() as u64);
        if !self.holds(file, 0, &self.head)? {
            return Ok(Seen::Cut);
        }
        if !self.last.is_empty() {
            // The last line read ends where the complete lines read end.
            let mut tail = self.last[self.last.len().saturating_sub(KEPT)..].to_vec();
            tail.push(b'\n');
            if let Some(at) = done.checked_sub(tail.len() as u64) {
                if !self.holds(file, at, &tail)? {
                    return Ok(Seen::Cut);
                }
            }
        }
        let unfinished = &self.partial[self.partial.len().saturating_sub(KEPT)..];
        let at = self.offset - unfinished.len() as u64;
        if !unfinished.is_empty() && !self.holds(file, at, unfinished)? {
            return Ok(Seen::Torn);
        }
        Ok(Seen::Kept)
    }

    /// Goes back to where [`Follower::verify`] says the file must be read again from.
    fn recover(&mut self, seen: Seen) {
        match seen {
            Seen::Kept => {}
            Seen::Torn => {
                self.offset -= self.partial.len() as u64;
                self.partial.clear();
            }
            Seen::Cut => {
                self.offset = 0;
                self.partial.clear();
                self.last.clear();
                self.head.clear();
            }
        }
    }

    /// Whether `file` holds `bytes` at `at` (false when it ends before them).
    fn holds(&self, file: &File, at: u64, bytes: &[u8]) -> Result<bool> {
        let mut buf = vec![0; bytes.len()];
        match file.read_exact_at(&mut buf, at) {
            Ok(()) => Ok(buf == bytes),
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => Ok(false),
            Err(e) => Err(StoreError::io("cannot read", &self.path, e)),
        }
    }

    /// Reads the current file from the offset to its end.
    fn drain(&mut self, visit: &mut impl FnMut(&[u8])) -> Result<()> {
        let Some(mut file) = self.file.take() else {
            return Ok(());
        };
        let read = self.drain_from(&mut file, visit);
        self.file = Some(file);
        read
    }

    fn drain_from(&mut self, file: &mut File, visit: &mut impl FnMut(&[u8])) -> Result<()> {
        // A chunk at a time: a burst of appends never has to fit in memory at once.
        let mut buf = vec![0u8; CHUNK];
        let mut at = None;
        loop {
            if at != Some(self.offset) {
                file.seek(SeekFrom::Start(self.offset))
                    .map_err(|e| StoreError::io("cannot seek", &self.path, e))?;
            }
            let n = file
                .read(&mut buf)
                .map_err(|e| StoreError::io("cannot read", &self.path, e))?;
            if n == 0 {
                return Ok(());
            }
            // Checked after the read, before a line is shown: a file cut and written again
            // at any moment before the read (even while this loop shows what it read before,
            // and a reader of that output acts on it) is seen here.
            let seen = self.verify(file)?;
            if seen != Seen::Kept {
                self.recover(seen);
                at = None;
                continue;
            }
            self.offset += n as u64;
            at = Some(self.offset);
            self.partial.extend_from_slice(&buf[..n]);
            let Some(i) = self.partial.iter().rposition(|&b| b == b'\n') else {
                continue;
            };
            let lines: Vec<u8> = self.partial.drain(..=i).collect();
            // Where these lines start in the file: the start of the file is kept as read.
            let start = self.offset - (lines.len() + self.partial.len()) as u64;
            if start == self.head.len() as u64 && self.head.len() < KEPT {
                let more = (KEPT - self.head.len()).min(lines.len());
                self.head.extend_from_slice(&lines[..more]);
            }
            for line in lines.split_inclusive(|&b| b == b'\n') {
                let body = line.strip_suffix(b"\n").unwrap_or(line);
                self.last.clear();
                self.last.extend_from_slice(body);
                let body = body.strip_suffix(b"\r").unwrap_or(body);
                if !body.iter().all(u8::is_ascii_whitespace) {
                    visit(body);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rev(text: &[u8]) -> Vec<String> {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("log");
        std::fs::write(&p, text).expect("write");
        let mut out = Vec::new();
        read_jsonl_rev_to(&p, None, |l| {
            out.push(String::from_utf8_lossy(l).into_owned());
            true
        })
        .expect("read");
        out
    }

    #[test]
    fn reads_lines_newest_first_skipping_a_torn_tail() {
        assert_eq!(rev(b"a\nb\n\nc\ntorn"), ["c", "b", "a"]);
        assert_eq!(rev(b"only"), Vec::<String>::new());
        assert_eq!(rev(b""), Vec::<String>::new());
        // Lines longer than a chunk, across chunk boundaries.
        let long: String = "x".repeat(CHUNK + 10);
        let text = format!("1\n{long}\n2\n{long}y\n");
        let got = rev(text.as_bytes());
        assert_eq!(got.len(), 4);
        assert_eq!(got[0], format!("{long}y"));
        assert_eq!(got[1], "2");
        assert_eq!(got[2], long);
        assert_eq!(got[3], "1");
    }

    #[test]
    fn stops_when_asked() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("log");
        std::fs::write(&p, b"1\n2\n3\n").expect("write");
        let mut seen = Vec::new();
        read_jsonl_rev_to(&p, None, |l| {
            seen.push(l.to_vec());
            seen.len() < 2
        })
        .expect("read");
        assert_eq!(seen, [b"3".to_vec(), b"2".to_vec()]);
    }

    #[test]
    fn follows_appends_and_a_replacement_without_repeats() {
        use std::io::Write;
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("log");
        std::fs::write(&p, b"old1\nold2\n").expect("write");
        let mut f = Follower::at_end(&p).expect("follow");
        let mut seen: Vec<String> = Vec::new();
        let poll = |f: &mut Follower, seen: &mut Vec<String>| {
            f.poll(|l| seen.push(String::from_utf8_lossy(l).into_owned()))
                .expect("poll");
        };
        poll(&mut f, &mut seen);
        assert!(seen.is_empty());
        let mut a = std::fs::OpenOptions::new()
            .append(true)
            .open(&p)
            .expect("open");
        a.write_all(b"new1\nnew").expect("append");
        poll(&mut f, &mut seen);
        assert_eq!(seen, ["new1"]);
        a.write_all(b"2\n").expect("append");
        // A prune: the old lines go, the rest is renamed over the log, then one more line.
        let tmp = dir.path().join("tmp");
        std::fs::write(&tmp, b"old2\nnew1\nnew2\nnew3\n").expect("write");
        std::fs::rename(&tmp, &p).expect("rename");
        poll(&mut f, &mut seen);
        assert_eq!(seen, ["new1", "new2", "new3"]);
        // Everything pruned, then new lines: all are shown.
        std::fs::write(&tmp, b"new4\n").expect("write");
        std::fs::rename(&tmp, &p).expect("rename");
        poll(&mut f, &mut seen);
        assert_eq!(seen, ["new1", "new2", "new3", "new4"]);
    }

    fn collect(f: &mut Follower) -> Vec<String> {
        let mut seen = Vec::new();
        f.poll(|l| seen.push(String::from_utf8_lossy(l).into_owned()))
            .expect("poll");
        seen
    }

    /// Rewrites the file in place: same inode, new bytes.
    fn rewrite(p: &Path, bytes: &[u8]) {
        use std::io::Write;
        let mut w = std::fs::OpenOptions::new()
            .write(true)
            .truncate(true)
            .open(p)
            .expect("open");
        w.write_all(bytes).expect("write");
    }

    #[test]
    fn a_log_cut_and_grown_past_the_offset_between_polls_is_read_from_its_start() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("log");
        std::fs::write(&p, b"old1\nold2\n").expect("write");
        let mut f = Follower::at_end(&p).expect("follow");
        let ino = std::fs::metadata(&p).expect("stat").ino();
        rewrite(&p, b"new1\nnew2\nnew3\n");
        assert_eq!(std::fs::metadata(&p).expect("stat").ino(), ino);
        assert_eq!(collect(&mut f), ["new1", "new2", "new3"]);
        // Cut to nothing and seen so; then new lines, all of them.
        rewrite(&p, b"");
        assert!(collect(&mut f).is_empty());
        std::fs::write(&p, b"new4\n").expect("write");
        assert_eq!(collect(&mut f), ["new4"]);
    }

    #[test]
    fn a_long_log_rewritten_after_its_first_bytes_is_read_from_its_start() {
        // The first 4 KiB stay the same; the last line read is gone.
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("log");
        let start: String = (0..500).map(|i| format!("line {i:04}\n")).collect();
        assert!(start.len() > KEPT);
        std::fs::write(&p, format!("{start}old\n")).expect("write");
        let mut f = Follower::at_end(&p).expect("follow");
        rewrite(&p, format!("{start}new1\nnew2\n").as_bytes());
        let seen = collect(&mut f);
        assert_eq!(seen.len(), 502, "read again from the start");
        assert_eq!(&seen[500..], ["new1", "new2"]);
        // Appends are only appends.
        std::fs::write(&p, format!("{start}new1\nnew2\nnew3\n")).expect("write");
        assert_eq!(collect(&mut f), ["new3"]);
    }

    #[test]
    fn a_torn_line_cut_off_and_written_again_is_read_whole() {
        use std::io::Write;
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("log");
        std::fs::write(&p, b"a\n").expect("write");
        let mut f = Follower::at_end(&p).expect("follow");
        let mut w = std::fs::OpenOptions::new()
            .append(true)
            .open(&p)
            .expect("open");
        w.write_all(b"{\"torn").expect("append");
        assert!(collect(&mut f).is_empty());
        // The next writer cuts the fragment off under the lock and appends whole lines.
        w.set_len(2).expect("cut");
        w.write_all(b"{\"b\":1}\n{\"c\":2}\n").expect("append");
        assert_eq!(collect(&mut f), [r#"{"b":1}"#, r#"{"c":2}"#]);
    }

    #[test]
    fn follows_a_log_that_does_not_exist_yet() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("log");
        let mut f = Follower::at_end(&p).expect("follow");
        let mut seen: Vec<String> = Vec::new();
        f.poll(|l| seen.push(String::from_utf8_lossy(l).into_owned()))
            .expect("poll");
        assert!(seen.is_empty());
        std::fs::write(&p, b"first\nsecond\n").expect("write");
        f.poll(|l| seen.push(String::from_utf8_lossy(l).into_owned()))
            .expect("poll");
        assert_eq!(seen, ["first", "second"]);
    }
}
