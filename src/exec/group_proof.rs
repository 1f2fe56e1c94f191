//! Which process groups `phase resume` may signal. A manifest names the process group each
//! running item had, but a manifest can come from a clone, a tarball or an editor, and a
//! process id is reused once its group has died: a bare number never justifies a signal. So
//! an item's attempt records a [`GroupProof`] when it starts (its leader's start time, the
//! boot, and a random token in the group's environment), and a group is signalled only
//! while /proc shows it is still that group ([`judge`]), checked again before every signal.
//!
//! Never signalled, whatever a manifest says: a group id of 1 or less (`kill(-1)` is every
//! process the caller may signal), triage's own process, group or session, a group started
//! in another boot, and any group where there is no /proc of our own PID namespace to check
//! (macOS, a container that mounts its host's /proc): those are left alone and reported.

use crate::core::phase::GroupProof;
use std::time::{Duration, Instant};

/// The environment variable that carries an item's token into its process group.
pub const TOKEN_VAR: &str = "TRIAGE_ITEM_TOKEN";

/// How often a group that was sent SIGTERM is looked at while it is given time to end.
const STEP: Duration = Duration::from_millis(10);

/// A fresh random token for an item's attempts (128 bits from the system's random source;
/// the clock and process id, mixed, where there is none).
pub fn new_token() -> String {
    let bytes = crate::platform::random_bytes(16).unwrap_or_else(|_| {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        (nanos ^ (u128::from(std::process::id()) << 64))
            .to_le_bytes()
            .to_vec()
    });
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The proof of the group `pid` leads, read as it starts (`None` where /proc cannot tell).
pub fn record(pid: u32, token: &str) -> Option<GroupProof> {
    let stat = read_stat(i32::try_from(pid).ok()?)?;
    Some(GroupProof {
        leader_start: stat.start,
        boot_id: boot_id()?,
        token: token.to_string(),
    })
}

/// What /proc shows of group `pgid` against the proof a manifest holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// It is the item's group, and someone in it still runs.
    Ours,
    /// Nobody of it runs any more (or the group has no live member at all).
    Gone,
    /// It cannot be shown to be the item's: left alone, for this reason.
    Unproven(String),
}

/// Whether group `pgid` may be signalled as the one `proof` describes.
pub fn judge(pgid: u32, proof: Option<&GroupProof>) -> Verdict {
    let unproven = |why: &str| Verdict::Unproven(why.to_string());
    let Some(group) = i32::try_from(pgid).ok().filter(|g| *g > 1) else {
        return unproven("a process group id of 1 or less is never signalled");
    };
    let Some(proof) = proof else {
        return unproven(
            "the manifest does not record what identifies the group (written by an older triage, or edited)",
        );
    };
    let Some(me) = read_stat_of("self") else {
        return unproven("there is no /proc of this PID namespace to check it by");
    };
    if !proc_is_ours(&me) {
        return unproven("/proc shows another PID namespace, where the group cannot be checked");
    }
    if group == me.pid || group == me.pgrp || group == me.session {
        return unproven("it is triage's own process, group or session");
    }
    if boot_id().as_deref() != Some(proof.boot_id.as_str()) {
        return unproven("it was started in another boot of this machine, or on another machine");
    }
    let members = members(group);
    let live: Vec<&Stat> = members.iter().filter(|m| !m.zombie).collect();
    if live.is_empty() {
        return Verdict::Gone;
    }
    if let Some(leader) = members.iter().find(|m| m.pid == group) {
        return if leader.start == proof.leader_start {
            Verdict::Ours
        } else {
            unproven("its leader is another process than the item's (the process id was reused)")
        };
    }
    // The leader exited: every member left must have started after it and carry its token.
    let needle = format!("{TOKEN_VAR}={}", proof.token);
    let all_ours = live
        .iter()
        .all(|m| m.start >= proof.leader_start && environ_has(m.pid, needle.as_bytes()));
    if all_ours {
        Verdict::Ours
    } else {
        unproven("its leader exited and the processes left in it do not carry the item's token")
    }
}

/// How stopping a recorded group went.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Stopped {
    /// It was the item's, and it was signalled until nobody was left (or SIGKILL was sent).
    Ended,
    /// Nobody of it was running.
    NothingLeft,
    /// It was left alone: it cannot be shown to be the item's.
    LeftAlone(String),
}

/// Stops what is left of the group an item started, when it can be shown to be that group:
/// SIGTERM, then SIGKILL after `grace`, judging the group again before each signal.
pub fn stop(pgid: u32, proof: Option<&GroupProof>, grace: Duration) -> Stopped {
    use rustix::process::{kill_process_group, Pid, Signal};
    match judge(pgid, proof) {
        Verdict::Gone => return Stopped::NothingLeft,
        Verdict::Unproven(why) => return Stopped::LeftAlone(why),
        Verdict::Ours => {}
    }
    let Some(group) = i32::try_from(pgid).ok().and_then(Pid::from_raw) else {
        return Stopped::NothingLeft;
    };
    let _ = kill_process_group(group, Signal::TERM);
    let until = Instant::now() + grace;
    loop {
        match judge(pgid, proof) {
            // Only zombies left: given the grace to be reaped by their parent, as a group
            // that is gone leaves nothing behind (nothing runs any more either way).
            Verdict::Gone if members(group.as_raw_nonzero().get()).is_empty() => {
                return Stopped::Ended
            }
            Verdict::Gone if Instant::now() >= until => return Stopped::Ended,
            Verdict::Gone => std::thread::sleep(STEP),
            Verdict::Unproven(_) => return Stopped::Ended,
            Verdict::Ours if Instant::now() >= until => {
                let _ = kill_process_group(group, Signal::KILL);
                return Stopped::Ended;
            }
            Verdict::Ours => std::thread::sleep(STEP),
        }
    }
}

/// The fields of a `/proc/PID/stat` line this module reads.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Stat {
    pid: i32,
    zombie: bool,
    pgrp: i32,
    session: i32,
    /// Start time, clock ticks since boot.
    start: u64,
}

/// Reads `PID (COMM) STATE PPID PGRP SESSION … STARTTIME …`, COMM being any bytes: the
/// fields are counted after its last `)`.
fn parse_stat(stat: &str) -> Option<Stat> {
    let pid = stat.split(' ').next()?.parse().ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_ascii_whitespace().collect();
    Some(Stat {
        pid,
        zombie: matches!(*fields.first()?, "Z" | "X" | "x"),
        pgrp: fields.get(2)?.parse().ok()?,
        session: fields.get(3)?.parse().ok()?,
        start: fields.get(19)?.parse().ok()?,
    })
}

fn read_stat_of(which: &str) -> Option<Stat> {
    let text = std::fs::read_to_string(format!("/proc/{which}/stat")).ok()?;
    parse_stat(&text)
}

fn read_stat(pid: i32) -> Option<Stat> {
    read_stat_of(&pid.to_string())
}

/// Whether /proc is of our PID namespace: its `self` is our own process id.
fn proc_is_ours(me: &Stat) -> bool {
    i32::try_from(std::process::id()).is_ok_and(|pid| pid == me.pid)
}

/// This boot's id, as the kernel gives it.
fn boot_id() -> Option<String> {
    let id = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
    Some(id.trim().to_string()).filter(|id| !id.is_empty())
}

/// Every process of group `group`, zombies included.
fn members(group: i32) -> Vec<Stat> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(read_stat)
        .filter(|s| s.pgrp == group)
        .collect()
}

/// Whether process `pid`'s environment holds the entry `needle` exactly.
fn environ_has(pid: i32, needle: &[u8]) -> bool {
    std::fs::read(format!("/proc/{pid}/environ"))
        .is_ok_and(|env| env.split(|b| *b == 0).any(|entry| entry == needle))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stat_line_gives_its_group_session_and_start_time_after_the_last_parenthesis() {
        let line = "42 (a) b) S 1 40 41 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 123456 1000 10";
        let s = parse_stat(line).unwrap();
        assert_eq!((s.pid, s.pgrp, s.session, s.start), (42, 40, 41, 123456));
        assert!(!s.zombie);
        assert!(parse_stat("42 (x) Z 1 40 41").is_none());
        assert!(parse_stat("garbage").is_none());
    }

    #[test]
    fn group_one_and_below_are_never_signalled_whatever_the_proof() {
        let proof = GroupProof {
            leader_start: 0,
            boot_id: boot_id().unwrap_or_default(),
            token: "t".into(),
        };
        for g in [0, 1] {
            assert!(matches!(judge(g, Some(&proof)), Verdict::Unproven(_)));
            assert!(matches!(stop(g, Some(&proof), STEP), Stopped::LeftAlone(_)));
        }
        assert!(matches!(
            judge(u32::MAX, Some(&proof)),
            Verdict::Unproven(_)
        ));
    }

    #[test]
    fn a_group_without_a_proof_is_left_alone() {
        assert!(matches!(judge(4242, None), Verdict::Unproven(_)));
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn our_own_group_is_never_signalled() {
        let me = read_stat_of("self").unwrap();
        let proof = record(std::process::id(), "t").unwrap();
        for g in [me.pid, me.pgrp, me.session] {
            let verdict = judge(u32::try_from(g).unwrap(), Some(&proof));
            assert!(matches!(verdict, Verdict::Unproven(_)), "{g}: {verdict:?}");
        }
    }

    #[test]
    fn tokens_are_fresh_and_hex() {
        let (a, b) = (new_token(), new_token());
        assert_eq!(a.len(), 32);
        assert!(a.bytes().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a, b);
    }
}
