//! The heavy suite: a phase of 10,000 items, with SIGTERM and `kill -9` in the middle of it.
//! Not part of plain `cargo test` (`test = false` in Cargo.toml); `.ci/run` runs it with
//! `cargo test --test heavy`. It takes a minute or two on two cores.
//!
//! Every item appends its id to `done.txt` (ignoring SIGTERM/SIGINT, so an item running when
//! the phase is interrupted ends as it would have, and is filed complete), so the tests count
//! how often each item ran.

use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

const ITEMS: usize = 10_000;

fn bin() -> PathBuf {
    std::env::var_os("TRIAGE_TEST_BIN")
        .filter(|b| !b.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_triage")))
}

struct Phase {
    dir: tempfile::TempDir,
    cache: tempfile::TempDir,
}

impl Phase {
    /// A folder with a plan of `n` items.
    fn new(n: usize) -> Phase {
        let p = Phase {
            dir: tempfile::tempdir().unwrap(),
            cache: tempfile::tempdir().unwrap(),
        };
        let mut plan = String::new();
        for i in 0..n {
            plan.push_str(&format!(
                "[[items]]\nid = \"i{i}\"\ncommand = \"trap '' TERM INT; echo i{i} >> done.txt\"\n"
            ));
        }
        std::fs::write(p.path().join("plan.toml"), plan).unwrap();
        p
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new(bin());
        c.args(args).current_dir(self.path());
        for (k, _) in std::env::vars_os() {
            let k = k.to_string_lossy().into_owned();
            if k.starts_with("TRIAGE_") || k.starts_with("CLAUDE_") || k == "NO_COLOR" {
                c.env_remove(&k);
            }
        }
        c.env("XDG_CACHE_HOME", self.cache.path())
            .env("XDG_STATE_HOME", self.cache.path().join("state"))
            .stdin(Stdio::null());
        c
    }

    fn run(&self, fault: Option<&str>) -> Child {
        let mut c = self.cmd(&[
            "phase",
            "run",
            "plan.toml",
            "--workflow",
            "w",
            "--phase",
            "1",
            "--jobs",
            "8",
            "--grace",
            "2s",
        ]);
        if let Some(f) = fault {
            c.env("TRIAGE_FAULT", f);
        }
        c.stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    }

    fn resume(&self) -> Output {
        self.cmd(&[
            "phase",
            "resume",
            "--workflow",
            "w",
            "--phase",
            "1",
            "--jobs",
            "8",
            "--grace",
            "2s",
        ])
        .output()
        .unwrap()
    }

    /// The manifest as its readers see it (the file and its journal).
    fn status(&self) -> Value {
        let out = self
            .cmd(&["phase", "status", "--workflow", "w", "--phase", "1"])
            .output()
            .unwrap();
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "phase status: {e}: {}",
                String::from_utf8_lossy(&out.stderr)
            )
        })
    }

    /// How often each item ran.
    fn runs(&self) -> BTreeMap<String, usize> {
        let mut n = BTreeMap::new();
        for l in std::fs::read_to_string(self.path().join("done.txt"))
            .unwrap_or_default()
            .lines()
        {
            *n.entry(l.to_string()).or_insert(0) += 1;
        }
        n
    }

    fn ran(&self) -> usize {
        std::fs::read_to_string(self.path().join("done.txt"))
            .map(|t| t.lines().count())
            .unwrap_or(0)
    }

    /// Waits until at least `n` item runs are on file.
    fn wait_for(&self, n: usize, child: &mut Child) {
        let t0 = Instant::now();
        while self.ran() < n {
            assert!(
                child.try_wait().unwrap().is_none(),
                "the phase ended before {n} items ran"
            );
            assert!(
                t0.elapsed() < Duration::from_secs(300),
                "the items never got going"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

fn ids(m: &Value, state: &str) -> BTreeSet<String> {
    m["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["state"] == state)
        .map(|i| i["id"].as_str().unwrap().to_string())
        .collect()
}

fn signal(child: &Child, sig: &str) {
    let ok = Command::new("kill")
        .args([sig, &child.id().to_string()])
        .status()
        .unwrap()
        .success();
    assert!(ok, "kill {sig} failed");
}

fn json(out: &[u8]) -> Value {
    serde_json::from_slice(out)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(out)))
}

/// After a resume: every item complete, and each ran once, except those the crashes may have
/// caught running (`may_twice`).
fn finished(p: &Phase, out: &Output, n: usize, may_twice: &BTreeSet<String>) {
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc = json(&out.stdout);
    assert_eq!(doc["decision"], "proceed");
    assert_eq!(doc["counts"]["complete"], n);
    let runs = p.runs();
    assert_eq!(runs.len(), n, "some items never ran");
    for (id, k) in &runs {
        assert!(
            *k == 1 || (*k == 2 && may_twice.contains(id)),
            "item {id} ran {k} times"
        );
    }
}

#[test]
fn sigterm_in_the_middle_of_10000_items_pauses_within_the_grace_and_resume_runs_the_rest_once() {
    let p = Phase::new(ITEMS);
    let mut child = p.run(None);
    p.wait_for(1_000, &mut child);
    let t0 = Instant::now();
    signal(&child, "-TERM");
    let out = child.wait_with_output().unwrap();
    let took = t0.elapsed();
    // The grace is 2 s; the items end at once. A generous bound for a loaded machine.
    assert!(took < Duration::from_secs(15), "SIGTERM took {took:?}");
    assert_eq!(
        out.status.code(),
        Some(130),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc = json(&out.stdout);
    assert_eq!(doc["decision"], "paused", "{}", doc["reason"]);
    assert_eq!(doc["interrupted_by"], 15);
    let done = doc["counts"]["complete"].as_u64().unwrap();
    assert!(done >= 1_000 && done < ITEMS as u64, "{done} complete");
    assert_eq!(p.status()["status"], "paused");
    let out = p.resume();
    finished(&p, &out, ITEMS, &BTreeSet::new());
}

#[test]
fn kill_9_in_the_middle_of_10000_items_then_resume_reruns_only_unfinished_items() {
    let p = Phase::new(ITEMS);
    let mut may_twice = BTreeSet::new();
    let mut child = p.run(None);
    for at in [800, 2_500, 5_000] {
        p.wait_for(at, &mut child);
        signal(&child, "-KILL");
        child.wait().unwrap();
        // What the manifest and its journal say now is what a resume trusts.
        let m = p.status();
        assert_eq!(m["status"], "running");
        let complete = ids(&m, "complete");
        assert!(!complete.is_empty());
        let runs = p.runs();
        for id in &complete {
            assert!(runs.contains_key(id), "{id} filed complete but never ran");
        }
        // Items not filed complete may have run (their end not on file yet): they run again.
        may_twice.extend(runs.keys().filter(|id| !complete.contains(*id)).cloned());
        child = p
            .cmd(&[
                "phase",
                "resume",
                "--workflow",
                "w",
                "--phase",
                "1",
                "--jobs",
                "8",
                "--grace",
                "2s",
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
    }
    let out = child.wait_with_output().unwrap();
    finished(&p, &out, ITEMS, &may_twice);
}

/// Kills the runner at `fault` (the first time it is reached), then checks that a resume
/// finishes the phase and runs again only what was not filed complete.
fn crash_at(fault: &str, n: usize) {
    let p = Phase::new(n);
    let child = p.run(Some(fault));
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.code().is_none() || err.contains("READY"),
        "{fault}: the fault was never reached: {:?} {err}",
        out.status
    );
    let m = p.status();
    let complete = ids(&m, "complete");
    let may_twice: BTreeSet<String> = p
        .runs()
        .into_keys()
        .filter(|id| !complete.contains(id))
        .collect();
    let out = p.resume();
    finished(&p, &out, n, &may_twice);
}

#[test]
fn the_journal_survives_a_crash_at_each_of_its_fault_points() {
    for fault in [
        "journal-compacted:abort",
        "journal-removed:abort",
        "journal-append:abort",
        "journal-appended:abort",
        "append-fsync:abort",
        "journal-final:abort",
    ] {
        crash_at(fault, 400);
    }
}
