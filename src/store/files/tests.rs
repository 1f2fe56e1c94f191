use super::jsonl::MAX_READ_LINE;
use super::names::NAME_MAX;
use super::*;
use std::fs;
use std::os::unix::fs::{symlink, PermissionsExt};
use std::time::Duration;

#[test]
fn jsonl_reader_skips_and_counts_torn_and_invalid_lines() {
    let dir = tempfile::tempdir().expect("tempdir");
    let p = dir.path().join("log.jsonl");
    fs::write(&p, b"{\"a\":1}\r\n\nnot json\n{\"a\":2}\n{\"a\":").expect("write");
    let mut seen = 0;
    let stats = read_jsonl(&p, |line| {
        seen += 1;
        serde_json::from_slice::<serde_json::Value>(line).is_ok()
    })
    .expect("read");
    assert_eq!(
        stats,
        JsonlStats {
            valid: 2,
            skipped: 2
        }
    );
    assert_eq!(seen, 3);
}

#[test]
fn reading_from_an_offset_returns_where_the_whole_lines_end() {
    let dir = tempfile::tempdir().expect("tempdir");
    let p = dir.path().join("log.jsonl");
    fs::write(&p, b"{\"a\":1}\n{\"a\":2}\n{\"a\":").expect("write");
    let mut seen = Vec::new();
    let (stats, end) = read_jsonl_from(&p, 8, |l| {
        seen.push(l.to_vec());
        true
    })
    .expect("read");
    assert_eq!(seen, vec![b"{\"a\":2}".to_vec()]);
    assert_eq!(stats.skipped, 1);
    assert_eq!(end.map(|(s, e)| (s.len, e)), Some((21, 16)));
}

#[test]
fn the_next_appender_cuts_a_torn_line_off() {
    let dir = tempfile::tempdir().expect("tempdir");
    let p = dir.path().join("log.jsonl");
    fs::write(&p, b"{\"a\":1}\n{\"a\":").expect("write");
    append_line(&p, b"{\"a\":2}", Duration::from_secs(1)).expect("append");
    assert_eq!(fs::read(&p).expect("read"), b"{\"a\":1}\n{\"a\":2}\n");
    // A torn fragment larger than the backwards read's chunk, with no newline at all.
    fs::write(&p, vec![b'x'; 200_000]).expect("write");
    append_line(&p, b"{\"a\":3}", Duration::from_secs(1)).expect("append");
    assert_eq!(fs::read(&p).expect("read"), b"{\"a\":3}\n");
}

#[test]
fn an_append_without_the_lock_never_cuts() {
    let dir = tempfile::tempdir().expect("tempdir");
    let p = dir.path().join("log.jsonl");
    fs::write(&p, b"{\"a\":1}\n{\"a\":").expect("write");
    let held = lock(&p, Duration::from_secs(1)).expect("lock");
    append_line_best_effort(&p, b"{\"a\":2}", Duration::from_millis(5)).expect("append");
    drop(held);
    assert_eq!(
        fs::read(&p).expect("read"),
        b"{\"a\":1}\n{\"a\":\n{\"a\":2}\n"
    );
}

#[test]
fn a_line_over_the_limit_is_refused_whole() {
    let dir = tempfile::tempdir().expect("tempdir");
    let p = dir.path().join("log.jsonl");
    let long = vec![b'x'; MAX_LINE + 1];
    assert!(append_line(&p, &long, Duration::from_secs(1)).is_err());
    assert_eq!(fs::read(&p).map(|b| b.len()).unwrap_or(0), 0);
}

#[test]
fn replace_keeps_mode_and_backup() {
    let dir = tempfile::tempdir().expect("tempdir");
    let p = dir.path().join("state.json");
    fs::write(&p, b"old").expect("write");
    fs::set_permissions(&p, fs::Permissions::from_mode(0o640)).expect("chmod");
    let r = replace(&p, b"new", Backup::Keep).expect("replace");
    assert_eq!(r.backup, Some(with_suffix(&p, ".bak")));
    assert_eq!(fs::read(&p).expect("read"), b"new");
    assert_eq!(fs::read(with_suffix(&p, ".bak")).expect("read"), b"old");
    let mode = fs::metadata(&p).expect("stat").permissions().mode() & 0o777;
    assert_eq!(mode, 0o640);
}

#[test]
fn new_files_are_0600() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mode = |p: &Path| fs::metadata(p).expect("stat").permissions().mode() & 0o777;
    let a = dir.path().join("a.json");
    replace(&a, b"{}", Backup::Keep).expect("replace");
    let b = dir.path().join("b.jsonl");
    append_line(&b, b"{}", Duration::from_secs(1)).expect("append");
    let c = dir.path().join("c.md");
    create_new(&c, b"x").expect("create");
    for p in [&a, &b, &c, &with_suffix(&b, ".lock")] {
        assert_eq!(mode(p), 0o600, "{}", p.display());
    }
}

#[test]
fn stale_temps_are_removed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let p = dir.path().join("s.json");
    let stale = dir.path().join(".s.json.tmp-abcdefgh");
    fs::write(&stale, b"torn").expect("write");
    replace(&p, b"{}", Backup::Keep).expect("replace");
    assert!(!stale.exists());
}

#[test]
fn a_large_folder_is_listed_once_and_each_write_removes_its_own_stale_temps() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (a, b) = (dir.path().join("a.json"), dir.path().join("b.json"));
    let stale_b = dir.path().join(".b.json.tmp-abcdefgh");
    let bak_tmp_b = dir.path().join("b.json.bak.tmp");
    let other = dir.path().join("notes.tmp.txt");
    fs::write(&stale_b, b"torn").expect("write");
    fs::write(&bak_tmp_b, b"torn").expect("write");
    fs::write(&other, b"kept").expect("write");
    for i in 0..70 {
        fs::write(dir.path().join(format!("f{i}")), b"").expect("write");
    }
    // The first write lists the folder; b's temps are not a's to remove.
    replace(&a, b"{}", Backup::Keep).expect("replace a");
    assert!(stale_b.exists() && bak_tmp_b.exists());
    // b's first write removes what the listing saw, and nothing that is not a temp of b.
    replace(&b, b"{}", Backup::Keep).expect("replace b");
    assert!(!stale_b.exists() && !bak_tmp_b.exists());
    assert!(other.exists());
}

#[test]
fn lock_times_out_while_another_holds_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let p = dir.path().join("d");
    let held = lock(&p, Duration::from_secs(1)).expect("first lock");
    let err = lock(&p, Duration::from_millis(30)).expect_err("second lock");
    assert!(err.is_lock_timeout());
    drop(held);
    assert!(
        lock(&p, Duration::ZERO).is_ok(),
        "a free lock is taken at once"
    );
}

#[test]
fn links_are_never_followed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let outside = tempfile::tempdir().expect("tempdir");
    let secret = outside.path().join("secret");
    fs::write(&secret, b"{\"keep\":true}").expect("write");
    let p = dir.path().join("s.json");
    symlink(&secret, &p).expect("symlink");
    let refused = |r: Result<()>| {
        let e = r.expect_err("refused");
        assert!(e.is_refused(), "{e}");
        assert!(e.to_string().contains("symbolic link"), "{e}");
    };
    refused(read_optional(&p).map(|_| ()));
    refused(replace(&p, b"{}", Backup::Keep).map(|_| ()));
    refused(append_line(&p, b"{}", Duration::from_secs(1)));
    refused(overwrite_cache(&p, b"{}"));
    // Moving it aside moves the link itself.
    let moved = quarantine(&p, "x").expect("quarantine");
    assert!(fs::symlink_metadata(&moved)
        .expect("moved")
        .file_type()
        .is_symlink());
    symlink(&secret, &p).expect("symlink");
    // The lock's sidecar as a link to a file that does not exist yet: not created.
    let gone = outside.path().join("created-by-the-lock");
    symlink(&gone, dir.path().join("t.json.lock")).expect("symlink");
    refused(lock(&dir.path().join("t.json"), Duration::from_secs(1)).map(|_| ()));
    assert!(!gone.exists());
    assert_eq!(fs::read(&secret).expect("read"), b"{\"keep\":true}");
    // Removing a link removes the link, never what it points to.
    remove(&p).expect("remove");
    assert!(secret.exists());
}

#[test]
fn a_fifo_is_refused_without_blocking() {
    let dir = tempfile::tempdir().expect("tempdir");
    for name in ["s.json", "s.json.lock", "log.jsonl"] {
        // mkfifo(1): rustix has no mkfifoat on Apple's systems.
        let made = std::process::Command::new("mkfifo")
            .arg(dir.path().join(name))
            .status()
            .expect("mkfifo");
        assert!(made.success());
    }
    let p = dir.path().join("s.json");
    let e = read_optional(&p).expect_err("fifo");
    assert!(e.is_refused() && e.to_string().contains("FIFO"), "{e}");
    assert!(lock(&p, Duration::from_secs(5))
        .expect_err("fifo lock")
        .is_refused());
    let log = dir.path().join("log.jsonl");
    assert!(read_jsonl(&log, |_| true)
        .expect_err("fifo log")
        .is_refused());
    assert!(append_line_locked(&log, b"{}")
        .expect_err("fifo log")
        .is_refused());
    assert!(read_named(&log).expect_err("named fifo").is_refused());
    assert!(read_tail(&log, 10).expect_err("named fifo").is_refused());
}

#[test]
fn a_long_name_can_still_be_locked_backed_up_and_moved_aside() {
    let dir = tempfile::tempdir().expect("tempdir");
    for len in [231usize, 240, 245, 255] {
        let p = dir.path().join(format!("{}.json", "s".repeat(len - 5)));
        let _lock = lock(&p, Duration::from_secs(1)).expect("lock");
        replace(&p, b"{\"v\":1}", Backup::Keep).expect("first");
        replace(&p, b"{\"v\":2}", Backup::Keep).expect("second");
        assert_eq!(
            fs::read(with_suffix(&p, ".bak")).expect("bak"),
            b"{\"v\":1}"
        );
        let q = quarantine(&p, "20260102T030405Z").expect("quarantine");
        assert!(q.file_name().map_or(0, |n| n.len()) <= NAME_MAX);
        assert!(!p.exists() && q.exists());
        let q2 = {
            fs::write(&p, b"x").expect("write");
            quarantine(&p, "20260102T030405Z").expect("again")
        };
        assert_ne!(q, q2);
    }
}

#[test]
fn moving_no_lines_creates_no_archive() {
    let dir = tempfile::tempdir().expect("tempdir");
    let p = dir.path().join("log.jsonl");
    fs::write(&p, b"{\"a\":1}\n").expect("write");
    let to = dir.path().join("archive.jsonl");
    let m = move_lines(&p, &to, |_| false).expect("move");
    assert_eq!(m.moved, 0);
    assert!(!to.exists());
    let names: Vec<_> = fs::read_dir(dir.path())
        .expect("list")
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert_eq!(names.len(), 1, "{names:?}");
}

#[test]
fn a_jsonl_line_longer_than_the_read_bound_is_skipped_without_being_kept() {
    use std::io::Write;
    let dir = tempfile::tempdir().expect("tempdir");
    let p = dir.path().join("log.jsonl");
    fs::write(&p, b"{\"a\":1}\n").expect("write");
    let f = fs::OpenOptions::new().append(true).open(&p).expect("open");
    // A hole of zeros longer than the bound, then a newline and one more line.
    f.set_len(8 + MAX_READ_LINE as u64 + 10).expect("grow");
    let mut f = f;
    f.write_all(b"\n{\"a\":2}\n").expect("append");
    let mut longest = 0;
    let (stats, end) = read_jsonl_from(&p, 0, |line| {
        longest = longest.max(line.len());
        true
    })
    .expect("read");
    assert_eq!(
        stats,
        JsonlStats {
            valid: 2,
            skipped: 1
        }
    );
    assert_eq!(longest, 7);
    assert_eq!(
        end.map(|(_, e)| e),
        Some(fs::metadata(&p).expect("meta").len())
    );
    // Cut with no newline: a torn last line, skipped.
    let f = fs::OpenOptions::new().append(true).open(&p).expect("open");
    f.set_len(fs::metadata(&p).expect("meta").len() + 2 * MAX_READ_LINE as u64)
        .expect("grow");
    let stats = read_jsonl(&p, |_| true).expect("read");
    assert_eq!(
        stats,
        JsonlStats {
            valid: 2,
            skipped: 2
        }
    );
}

#[test]
fn a_file_over_its_bound_is_not_read_and_says_the_bound() {
    let dir = tempfile::tempdir().expect("tempdir");
    let p = dir.path().join("state.json");
    let f = fs::File::create(&p).expect("create");
    f.set_len(Bound::State.bytes() + 1).expect("grow");
    let e = read_optional(&p).expect_err("too large");
    assert!(e.is_too_large() && !e.is_refused(), "{e}");
    assert!(e.to_string().contains("more than the 16 MiB"), "{e}");
    // At the bound it is read.
    f.set_len(Bound::State.bytes()).expect("cut");
    assert_eq!(
        read_optional(&p).expect("read").map(|b| b.len() as u64),
        Some(Bound::State.bytes())
    );
    // A manifest may be larger.
    f.set_len(Bound::State.bytes() + 1).expect("grow");
    assert!(read_optional_within(&p, Bound::Manifest)
        .expect("read")
        .is_some());
}
