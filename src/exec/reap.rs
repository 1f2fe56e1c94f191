//! What an attempt leaves behind when its command exits: orphans and the rest of its process
//! group.
//!
//! `triage` makes itself the child subreaper of what it starts (Linux's
//! `PR_SET_CHILD_SUBREAPER`): a process whose parent exits is reparented to `triage`, not to
//! PID 1 — which in most containers never reaps, so its zombie kept an ended attempt's group
//! alive and `triage` waited on it until SIGKILL was due (issue 27: `--timeout 1s` returned
//! after 3 s). Such orphans are reaped here, but never a child whose status another part of
//! `triage` waits for: the attempts' own commands are registered while they are spawned (under
//! the lock the reaper takes), and a child in `triage`'s own process group is left to
//! whoever spawned it.
//!
//! [`end_leftovers`] ends what is still running in a group after its leader exited: a
//! grace period to finish on its own, then SIGTERM, then SIGKILL after the same grace.
//!
//! Elsewhere (macOS) there is no subreaper: orphans go to launchd, which reaps them, and the
//! leftovers of a group are still ended through the group.

use rustix::process::{kill_process_group, test_kill_process_group, Pid, Signal, WaitOptions};
use std::io;
use std::process::{Child, Command};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// How often a group is looked at while its leftovers are given time.
const STEP: Duration = Duration::from_millis(5);
/// Orphans are looked for at most this often (each look reads a file in /proc).
#[cfg(target_os = "linux")]
const SWEEP_EVERY: Duration = Duration::from_millis(50);
/// Reaping one group stops after this many children (a group can always be reaped again).
const REAP_AT_MOST: usize = 4096;

/// The children whose status is someone else's (the attempts' commands, each waited on by
/// its attempt), and when orphans were last looked for.
struct Owned {
    pids: Vec<Pid>,
    #[cfg(target_os = "linux")]
    swept: Option<Instant>,
}

fn owned() -> MutexGuard<'static, Owned> {
    static OWNED: Mutex<Owned> = Mutex::new(Owned {
        pids: Vec::new(),
        #[cfg(target_os = "linux")]
        swept: None,
    });
    OWNED
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A child registered as waited on by its spawner; unregistered when dropped, which must be
/// after its status was taken.
pub struct Registered(Pid);

impl Drop for Registered {
    fn drop(&mut self) {
        owned().pids.retain(|p| *p != self.0);
    }
}

/// Spawns `cmd` as a child whose status only the caller takes: registered before the reaper
/// can look at it. The first call makes this process the subreaper of its descendants.
pub fn spawn(cmd: &mut Command) -> io::Result<(Child, Registered)> {
    become_subreaper();
    let mut owned = owned();
    let child = cmd.spawn()?;
    let pid = Pid::from_child(&child);
    owned.pids.push(pid);
    Ok((child, Registered(pid)))
}

/// Makes this process the subreaper of its descendants (once; a failure leaves orphans to
/// PID 1, as before).
fn become_subreaper() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(crate::platform::become_subreaper);
}

/// Reaps the exited children in `group`, whose leader's status was taken already (until
/// then a wait on the group could take it). A group whose number is registered again (the
/// pid reused by a new attempt's command) is not touched.
pub fn reap_group(group: Pid) {
    let owned = owned();
    if owned.pids.contains(&group) {
        return;
    }
    for _ in 0..REAP_AT_MOST {
        match rustix::process::waitpgid(group, WaitOptions::NOHANG) {
            Ok(Some(_)) => {}
            Ok(None) | Err(_) => break,
        }
    }
}

/// Whether anyone is left in `group` (its leader reaped), once its zombies are reaped.
pub fn group_alive(group: Pid) -> bool {
    reap_group(group);
    test_kill_process_group(group).is_ok()
}

/// Reaps orphans that exited: children of this process that nobody registered and that are
/// not in its own process group. At most every SWEEP_EVERY; a no-op where there is no /proc
/// or no subreaper.
pub fn sweep() {
    #[cfg(target_os = "linux")]
    {
        if !proc_is_ours() {
            return;
        }
        let mut owned = owned();
        let now = Instant::now();
        if owned.swept.is_some_and(|t| now < t + SWEEP_EVERY) {
            return;
        }
        owned.swept = Some(now);
        // Orphans are reparented to the subreaper's first live thread: the main thread,
        // which lives as long as the process.
        let me = rustix::process::getpid();
        let path = format!("/proc/self/task/{}/children", me.as_raw_nonzero());
        let Ok(list) = std::fs::read_to_string(path) else {
            return;
        };
        // Groups are read from /proc: getpgid says 0 for a group outside our PID namespace
        // (ours, when triage runs in a new one), which rustix's `Pid` cannot hold.
        let Some(ours) = group_of("self") else {
            return;
        };
        for pid in list
            .split_ascii_whitespace()
            .filter_map(|p| p.parse::<i32>().ok())
            .filter_map(Pid::from_raw)
        {
            let group = group_of(&pid.as_raw_nonzero().to_string());
            if owned.pids.contains(&pid) || group.is_none_or(|g| g == ours) {
                continue;
            }
            let _ = rustix::process::waitpid(Some(pid), WaitOptions::NOHANG);
        }
    }
}

/// What [`end_leftovers`] ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Leftovers {
    /// How many were still running at SIGTERM (unknown without /proc).
    pub count: Option<usize>,
    /// Whether SIGKILL was needed.
    pub killed: bool,
}

impl Leftovers {
    /// A note for the attempt's record.
    pub fn describe(&self) -> String {
        let what = match self.count {
            Some(1) => "ended 1 process".to_string(),
            Some(n) => format!("ended {n} processes"),
            None => "ended the processes".to_string(),
        };
        let how = if self.killed {
            " (SIGTERM ignored, killed)"
        } else {
            ""
        };
        format!("{what} left running in its group after it exited{how}")
    }
}

/// Ends what is left of `group` after its leader exited and was reaped: `grace` to end on its
/// own (cut short when `hurry` says so: `triage` was interrupted), then SIGTERM, then SIGKILL
/// `grace` later. `None` when nothing was left running.
pub fn end_leftovers(group: Pid, grace: Duration, hurry: &dyn Fn() -> bool) -> Option<Leftovers> {
    let until = Instant::now() + grace;
    while group_alive(group) {
        if Instant::now() >= until || hurry() {
            return end(group, grace);
        }
        std::thread::sleep(STEP.min(until.saturating_duration_since(Instant::now())));
    }
    None
}

fn end(group: Pid, grace: Duration) -> Option<Leftovers> {
    let count = running(group);
    // Only zombies whose parents are still about (not ours to reap): nothing to end.
    if count == Some(0) {
        return None;
    }
    let mut ended = Leftovers {
        count,
        killed: false,
    };
    let _ = kill_process_group(group, Signal::TERM);
    let until = Instant::now() + grace;
    while group_alive(group) {
        if Instant::now() >= until {
            if running(group) != Some(0) {
                let _ = kill_process_group(group, Signal::KILL);
                ended.killed = true;
                reap_soon(group);
            }
            break;
        }
        std::thread::sleep(STEP.min(until.saturating_duration_since(Instant::now())));
    }
    Some(ended)
}

/// After SIGKILL: reaps the group's orphans as they die, for a moment.
fn reap_soon(group: Pid) {
    let until = Instant::now() + Duration::from_millis(50);
    while group_alive(group) && Instant::now() < until {
        std::thread::sleep(STEP);
    }
}

/// How many processes of `group` are running (not zombies); `None` without a /proc of our
/// own PID namespace.
fn running(group: Pid) -> Option<usize> {
    #[cfg(target_os = "linux")]
    {
        if !proc_is_ours() {
            return None;
        }
        let g = group.as_raw_nonzero().get();
        let dir = std::fs::read_dir("/proc").ok()?;
        let n = dir
            .filter_map(Result::ok)
            .filter(|e| {
                e.file_name()
                    .to_str()
                    .is_some_and(|n| n.parse::<u32>().is_ok())
            })
            .filter_map(|e| std::fs::read_to_string(e.path().join("stat")).ok())
            .filter(|stat| stat_in_group(stat, g))
            .count();
        Some(n)
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = group;
        None
    }
}

/// Whether /proc shows our PID namespace: a container may mount its host's, where our pids
/// mean other processes (or none).
#[cfg(target_os = "linux")]
fn proc_is_ours() -> bool {
    static OURS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *OURS.get_or_init(|| {
        let me = rustix::process::getpid().as_raw_nonzero().to_string();
        std::fs::read_to_string("/proc/self/stat")
            .is_ok_and(|stat| stat.split(' ').next() == Some(me.as_str()))
    })
}

/// The process group of `/proc/<pid>`, as /proc says (0 for one outside our PID namespace).
#[cfg(target_os = "linux")]
fn group_of(pid: &str) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_stat(&stat).map(|(_, g)| g)
}

/// The state and process group of a `/proc/PID/stat` line: `PID (COMM) STATE PPID PGRP ...`,
/// COMM being any bytes, so the fields are read after its last `)`.
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
fn parse_stat(stat: &str) -> Option<(&str, i32)> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_ascii_whitespace();
    let state = fields.next()?;
    let pgrp = fields.nth(1)?.parse::<i32>().ok()?;
    Some((state, pgrp))
}

/// Whether a `/proc/PID/stat` line is of a live (not zombie) process in group `g`.
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
fn stat_in_group(stat: &str, g: i32) -> bool {
    parse_stat(stat).is_some_and(|(state, pgrp)| pgrp == g && !matches!(state, "Z" | "X" | "x"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stat_line_is_read_after_the_last_parenthesis() {
        assert!(stat_in_group("42 (sleep) S 1 40 40 0 -1", 40));
        assert!(!stat_in_group("42 (sleep) S 1 40 40 0 -1", 42));
        assert!(!stat_in_group("42 (sleep) Z 1 40 40 0 -1", 40));
        // A command named to look like fields.
        assert!(stat_in_group("42 (a) S 1 9 (b) R 1 40 40 0", 40));
        assert!(!stat_in_group("42 (a) S 1 40 (b) R 1 9 9 0", 40));
        assert!(!stat_in_group("garbage", 40));
    }

    #[test]
    fn the_note_says_how_many_and_how() {
        let one = Leftovers {
            count: Some(1),
            killed: false,
        };
        assert_eq!(
            one.describe(),
            "ended 1 process left running in its group after it exited"
        );
        let two = Leftovers {
            count: Some(2),
            killed: true,
        };
        assert_eq!(
            two.describe(),
            "ended 2 processes left running in its group after it exited (SIGTERM ignored, killed)"
        );
    }
}
