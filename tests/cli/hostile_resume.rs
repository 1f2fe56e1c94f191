//! `phase resume` after a runner killed outright or interrupted: an item with side effects
//! that may have begun its work is never started again without a person's decision (seed
//! 001, SPEC §6); it waits as `needs_decision` while everything else runs, and `phase resume
//! --rerun ID` or `phase decide --choice A` lets it run again. A second runner of a phase is
//! a busy resource: exit 75 with its JSON line.
//!
//! Each item appends a line to `ID.runs` every time it starts, so the tests count runs; an
//! item that must stay running blocks until the test creates `ID.release` (or it is
//! signalled), never on a long sleep.

use crate::common::{json_out, Sandbox};
use serde_json::{json, Value};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

/// No wait between retries, so nothing here waits on the retry schedule.
const POLICY: &str = "[retry]\nschedule = [\"0s\"]\nmax_attempts = 2\n";

/// How long any one command of these tests may take before the test fails instead of hanging.
const LIMIT: Duration = Duration::from_secs(60);

/// An item that counts its runs; on its first run it says it started and blocks until
/// `ID.release` exists (at most about 30 s), on later runs it ends at once. Sent SIGINT it
/// exits 130.
fn blocking(id: &str, extra: &str) -> String {
    format!(
        "[[items]]\nid = \"{id}\"\n{extra}command = \"echo run >> {id}.runs; trap 'exit 130' INT; if [ -e {id}.started ]; then echo {id}-again; else touch {id}.started; i=0; while [ ! -e {id}.release ] && [ $i -lt 1500 ]; do sleep 0.02; i=$((i+1)); done; echo {id}-out; fi\"\n"
    )
}

/// An item that counts its runs and ends at once.
fn quick(id: &str) -> String {
    format!("[[items]]\nid = \"{id}\"\ncommand = \"echo run >> {id}.runs; echo {id}-out\"\n")
}

fn runs(s: &Sandbox, id: &str) -> usize {
    std::fs::read_to_string(s.path().join(format!("{id}.runs")))
        .unwrap_or_default()
        .lines()
        .count()
}

fn manifest_path(s: &Sandbox, w: &str, n: &str) -> std::path::PathBuf {
    s.root().join(format!("workflows/{w}/phase-{n}.json"))
}

/// The manifest as its readers see it (`phase status`: the file and its journal).
fn manifest(s: &Sandbox, w: &str, n: &str) -> Value {
    status(s, w, n).unwrap_or_else(|| panic!("no manifest for phase {n} of {w}"))
}

fn status(s: &Sandbox, w: &str, n: &str) -> Option<Value> {
    let out = s
        .std_cmd(&["phase", "status", "--workflow", w, "--phase", n])
        .stderr(Stdio::null())
        .output()
        .ok()?;
    serde_json::from_slice(&out.stdout).ok()
}

fn state_of(m: &Value, id: &str) -> String {
    m["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["id"] == id)
        .map(|i| i["state"].as_str().unwrap_or("").to_string())
        .unwrap_or_default()
}

fn item<'a>(m: &'a Value, id: &str) -> &'a Value {
    m["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["id"] == id)
        .unwrap()
}

/// Polls the manifest (and the sandbox) until `ready` says so.
fn wait_until(s: &Sandbox, w: &str, n: &str, ready: impl Fn(&Value) -> bool) -> Value {
    let t0 = Instant::now();
    loop {
        assert!(t0.elapsed() < LIMIT, "the phase never got there");
        if let Some(m) = status(s, w, n) {
            if ready(&m) {
                return m;
            }
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// `phase run plan.toml --workflow W --phase N`, in the background.
fn spawn_run(s: &Sandbox, w: &str, n: &str) -> Child {
    s.std_cmd(&["phase", "run", "plan.toml", "--workflow", w, "--phase", n])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// `phase ARGS --workflow W --phase N` (and `--grace 2s` for a resume): exit status, stdout
/// and stderr.
fn phase(s: &Sandbox, args: &[&str], w: &str, n: &str) -> (i32, String, String) {
    let mut all: Vec<&str> = vec!["phase"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--workflow", w, "--phase", n]);
    if args.contains(&"resume") {
        all.extend_from_slice(&["--grace", "2s"]);
    }
    let out = s.cmd(&all).timeout(LIMIT).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn json(text: &str) -> Value {
    serde_json::from_str(text.trim()).unwrap_or_else(|e| panic!("not one JSON line ({e}): {text}"))
}

#[test]
fn kill_9_of_the_runner_holds_a_side_effecting_item_until_rerun_and_runs_everything_else() {
    let s = Sandbox::new();
    s.write(".triage.toml", POLICY);
    let plan = [
        quick("a"),
        blocking("mailer", "side_effects = true\n"),
        blocking("d", ""),
        quick("c"),
    ]
    .concat();
    s.write("plan.toml", &plan);
    let mut child = spawn_run(&s, "wk", "2");
    // Until a and c are complete and mailer and d run in their groups, on file.
    wait_until(&s, "wk", "2", |m| {
        state_of(m, "a") == "complete"
            && state_of(m, "c") == "complete"
            && ["mailer", "d"]
                .iter()
                .all(|id| state_of(m, id) == "running" && item(m, id)["pgid"].is_u64())
            && s.exists("mailer.started")
            && s.exists("d.started")
    });
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(runs(&s, "mailer"), 1);

    let (code, out, err) = phase(&s, &["resume"], "wk", "2");
    let doc = json(&out);
    assert_eq!(
        runs(&s, "mailer"),
        1,
        "resume ran the side-effecting item again"
    );
    assert_eq!(code, 1, "{doc:#} {err}");
    assert_eq!(doc["decision"], "stop");
    assert_eq!(doc["needs_decision"], json!(["mailer"]));
    assert_eq!(doc["resumed"]["runner_died"], true);
    assert_eq!(doc["resumed"]["needs_decision"], json!(["mailer"]));
    assert_eq!(doc["counts"]["needs_decision"], 1);
    assert_eq!(state_of(&doc, "mailer"), "needs_decision");
    let note = item(&doc, "mailer")["note"].as_str().unwrap_or_default();
    assert!(
        note.contains("was running when the runner died") && note.contains("--rerun mailer"),
        "{note}"
    );
    // Everything else finished: d (interrupted, no side effects) ran again, a and c kept.
    for id in ["a", "c", "d"] {
        assert_eq!(state_of(&doc, id), "complete", "{doc:#}");
    }
    assert_eq!((runs(&s, "a"), runs(&s, "c"), runs(&s, "d")), (1, 1, 2));
    assert!(
        err.contains("triage phase resume --workflow wk --phase 2 --rerun mailer"),
        "{err}"
    );
    let m = manifest(&s, "wk", "2");
    assert_eq!(state_of(&m, "mailer"), "needs_decision");
    assert_eq!(
        m["status"], "paused",
        "a phase with a question open is not decided"
    );

    // Asked again, it holds again; --text shows it.
    let (code, out, _) = phase(&s, &["--text", "resume"], "wk", "2");
    assert_eq!(code, 1);
    assert!(
        out.lines()
            .any(|l| l.trim_start().starts_with("mailer") && l.contains("needs_decision")),
        "{out}"
    );
    assert!(out.contains("--rerun mailer"), "{out}");
    assert_eq!(runs(&s, "mailer"), 1);

    // An id the phase does not have is refused before anything runs.
    let (code, _, err) = phase(&s, &["resume", "--rerun", "nobody"], "wk", "2");
    assert_eq!(code, 64, "{err}");
    assert!(err.contains("--rerun `nobody`"), "{err}");

    // A person's leave: it runs again, once, and the phase goes on.
    let (code, out, err) = phase(&s, &["resume", "--rerun", "mailer"], "wk", "2");
    let doc = json(&out);
    assert_eq!(code, 0, "{doc:#} {err}");
    assert_eq!(doc["decision"], "proceed");
    assert_eq!(runs(&s, "mailer"), 2);
    assert_eq!(state_of(&doc, "mailer"), "complete");
    assert_eq!(doc["resumed"]["rerun"], json!(["mailer"]));
    let m = manifest(&s, "wk", "2");
    assert_eq!(m["status"], "decided");
    assert!(item(&m, "mailer")["note"]
        .as_str()
        .unwrap_or_default()
        .starts_with("run again by `phase resume --rerun`"));
    assert!(
        item(&m, "mailer").get("rerun").is_none(),
        "the leave was used up"
    );
}

#[test]
fn sigint_holds_a_side_effecting_item_until_decide_says_retry() {
    let s = Sandbox::new();
    // Side effects from the agent's policy, not the plan.
    s.write(
        ".triage.toml",
        format!("{POLICY}\n[agents.mailer]\nside_effects = true\n"),
    );
    let plan = [
        "concurrency = 2\n".to_string(),
        blocking("mailer", ""),
        blocking("d", ""),
        quick("c"),
    ]
    .concat();
    s.write("plan.toml", &plan);
    let child = spawn_run(&s, "wi", "5");
    wait_until(&s, "wi", "5", |_| {
        s.exists("mailer.started") && s.exists("d.started")
    });
    std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130));
    let m = manifest(&s, "wi", "5");
    assert_eq!(m["status"], "paused");
    assert_eq!(state_of(&m, "c"), "not_started");

    let (code, out, err) = phase(&s, &["resume"], "wi", "5");
    let doc = json(&out);
    assert_eq!(
        runs(&s, "mailer"),
        1,
        "resume ran the side-effecting item again"
    );
    assert_eq!(code, 1, "{doc:#} {err}");
    assert_eq!(doc["needs_decision"], json!(["mailer"]));
    assert_eq!(state_of(&doc, "mailer"), "needs_decision");
    assert!(item(&doc, "mailer")["note"]
        .as_str()
        .unwrap_or_default()
        .starts_with("it was interrupted; it has side effects"));
    for id in ["c", "d"] {
        assert_eq!(state_of(&doc, id), "complete", "{doc:#}");
    }
    assert_eq!((runs(&s, "c"), runs(&s, "d")), (1, 2));
    assert_eq!(
        state_of(&manifest(&s, "wi", "5"), "mailer"),
        "needs_decision"
    );

    // `phase decide --choice A` is a person's leave too.
    let (code, out, err) = phase(&s, &["decide", "--choice", "A"], "wi", "5");
    assert_eq!(code, 0, "{err}");
    assert_eq!(json(&out)["rerun"], json!(["mailer"]));
    assert_eq!(runs(&s, "mailer"), 1);
    let (code, out, err) = phase(&s, &["resume"], "wi", "5");
    let doc = json(&out);
    assert_eq!(code, 0, "{doc:#} {err}");
    assert_eq!(runs(&s, "mailer"), 2);
    assert_eq!(state_of(&doc, "mailer"), "complete");
}

#[test]
fn a_manifest_read_from_its_bak_holds_side_effecting_items_it_says_never_started() {
    let s = Sandbox::new();
    s.write(".triage.toml", POLICY);
    s.write(
        "plan.toml",
        [quick("a"), blocking("mailer", "side_effects = true\n")].concat(),
    );
    let mut child = spawn_run(&s, "wb", "1");
    let m = wait_until(&s, "wb", "1", |m| {
        state_of(m, "mailer") == "running"
            && item(m, "mailer")["pgid"].is_u64()
            && s.exists("mailer.started")
    });
    child.kill().unwrap();
    child.wait().unwrap();
    // The newest version is torn; its .bak predates the write that filed mailer as running.
    let mut old = m.clone();
    for i in old["items"].as_array_mut().unwrap() {
        if i["id"] == "mailer" {
            i["state"] = json!("not_started");
        }
    }
    let path = manifest_path(&s, "wb", "1");
    std::fs::write(path.with_extension("json.bak"), old.to_string()).unwrap();
    std::fs::write(&path, "{\"workflow_id\": ").unwrap();
    let (code, out, err) = phase(&s, &["resume"], "wb", "1");
    let doc = json(&out);
    assert_eq!(
        runs(&s, "mailer"),
        1,
        "resume ran the side-effecting item again"
    );
    assert_eq!(code, 1, "{doc:#} {err}");
    assert_eq!(doc["resumed"]["read_from_backup"], true);
    assert_eq!(state_of(&doc, "mailer"), "needs_decision");
    // Its group outlived the runner and nobody recorded it: release it.
    s.write("mailer.release", "");
}

#[test]
fn a_second_runner_of_a_phase_is_refused_as_busy_with_its_json_line() {
    let s = Sandbox::new();
    s.write(".triage.toml", POLICY);
    s.write("plan.toml", blocking("slow", ""));
    let first = spawn_run(&s, "wr", "1");
    wait_until(&s, "wr", "1", |m| {
        state_of(m, "slow") == "running" && s.exists("slow.started")
    });
    for args in [
        &[
            "phase",
            "run",
            "plan.toml",
            "--workflow",
            "wr",
            "--phase",
            "1",
        ][..],
        &["phase", "resume", "--workflow", "wr", "--phase", "1"][..],
    ] {
        let out = s
            .cmd(args)
            .env("TRIAGE_LOCK_TIMEOUT", "100ms")
            .timeout(LIMIT)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(75), "{args:?}: {out:?}");
        assert_eq!(String::from_utf8_lossy(&out.stdout).lines().count(), 1);
        let doc = json_out(&out);
        assert_eq!(doc["refused"], "busy", "{doc}");
        assert_eq!(doc["exit_status"], 75);
        assert_eq!(doc["runner_pid"], first.id());
        assert_eq!(
            (&doc["workflow_id"], &doc["phase"]),
            (&json!("wr"), &json!("1"))
        );
        assert!(
            String::from_utf8_lossy(&out.stderr)
                .contains("triage phase: phase 1 of workflow wr is being run by another process"),
            "{out:?}"
        );
    }
    assert_eq!(runs(&s, "slow"), 1);
    s.write("slow.release", "");
    let out = first.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_eq!(json_out(&out)["decision"], "proceed");
}

#[test]
fn decide_b_goes_on_without_a_held_item_and_never_runs_it() {
    let s = Sandbox::new();
    s.write(".triage.toml", POLICY);
    s.write(
        "plan.toml",
        format!("{}{}side_effects = true\n", quick("a"), quick("mailer")),
    );
    let out = s
        .cmd(&[
            "phase",
            "run",
            "plan.toml",
            "--workflow",
            "wd",
            "--phase",
            "4",
        ])
        .timeout(LIMIT)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    // The manifest as an interrupted run leaves it: mailer partial, the phase paused.
    let mut m = manifest(&s, "wd", "4");
    m["status"] = json!("paused");
    for i in m["items"].as_array_mut().unwrap() {
        if i["id"] == "mailer" {
            i["state"] = json!("partial");
        }
    }
    std::fs::write(manifest_path(&s, "wd", "4"), m.to_string()).unwrap();
    let (code, out, err) = phase(&s, &["resume"], "wd", "4");
    assert_eq!(
        runs(&s, "mailer"),
        1,
        "resume ran the side-effecting item again"
    );
    assert_eq!(code, 1, "{out} {err}");
    assert_eq!(json(&out)["needs_decision"], json!(["mailer"]));

    let (code, out, err) = phase(&s, &["decide", "--choice", "B"], "wd", "4");
    assert_eq!(code, 0, "{err}");
    let doc = json(&out);
    assert_eq!(doc["skipped"], json!(["mailer"]));
    assert_eq!(
        doc["next"], "triage phase resume --workflow wd --phase 4",
        "{doc}"
    );
    let (code, out, err) = phase(&s, &["resume"], "wd", "4");
    let doc = json(&out);
    assert_eq!(code, 0, "{doc:#} {err}");
    // Going on without the skipped item: the phase proceeds, but it is not complete.
    assert_eq!(doc["decision"], "proceed_degraded");
    assert_eq!(state_of(&doc, "mailer"), "skipped");
    assert_eq!(manifest(&s, "wd", "4")["status"], "decided");
    assert_eq!(runs(&s, "mailer"), 1);
}

/// `run --side-effects` never starts its command a second time, whatever `--retries` and the
/// classifier say: a retryable failure (a reset connection) ran twice on 9aa153f, which had no
/// such flag.
#[test]
fn run_with_side_effects_never_runs_its_command_twice() {
    let s = Sandbox::new();
    let out = s
        .triage([
            "run",
            "--side-effects",
            "--retries",
            "3",
            "--delay",
            "0s",
            "--",
            "sh",
            "-c",
            "echo run >> sent.runs; echo 'connection reset by peer' >&2; exit 1",
        ])
        .run();
    assert_eq!(runs(&s, "sent"), 1, "{}", out.stderr());
    assert_ne!(out.code(), Some(0));
}

/// The adversary's round, in a PID namespace of the test's own: processes the test starts
/// (one in a group and session of its own, one in the caller's group, one started after the
/// item's group died, as a reused process id would be) must all survive `phase resume` of a
/// manifest whose running item names process group 1, a foreign group, a reused id, or a
/// group with nothing recorded to identify it; resume says it did not signal them. The
/// untouched manifest's own group is still ended.
#[test]
fn resume_signals_only_the_group_its_item_started_never_one_a_manifest_names() {
    if !crate::common::skip_unless_tool("unshare", "TRIAGE_REQUIRE_UNSHARE")
        || !crate::common::skip_unless_tool("jq", "TRIAGE_REQUIRE_JQ")
        || !crate::common::pid_namespace_allowed()
    {
        return;
    }
    let s = Sandbox::new();
    s.write(".triage.toml", POLICY);
    s.write(
        "plan.toml",
        "[[items]]\nid = \"job\"\nside_effects = true\ncommand = \"sleep 1000\"\n",
    );
    let script = r#"T="$1"; cd "$2" || exit 1
st() { "$T" phase status --workflow "$1" --phase 1 2>/dev/null; }
running() { st "$1" | jq '.items[0].state == "running" and (.items[0].pgid | type == "number")' 2>/dev/null | grep -q true; }
# Runs the plan as workflow $1 until its item runs, then kills the runner outright.
start() {
  "$T" phase run plan.toml --workflow "$1" --phase 1 >/dev/null 2>&1 &
  r=$!
  i=0
  until running "$1"; do
    i=$((i+1)); if [ $i -gt 3000 ]; then echo "the item of $1 never ran" >>fail; return 1; fi
    sleep 0.01
  done
  kill -9 $r; wait $r 2>/dev/null
  st "$1" | jq .items[0].pgid > "$1.pgid"
}
# Rewrites workflow $1's manifest through jq program $2 (the journal folded in and dropped).
tamper() {
  st "$1" | jq -c "del(.journal) | $2" > m.tmp &&
    mv m.tmp ".triage/workflows/$1/phase-1.json" && rm -f ".triage/workflows/$1/phase-1.json.journal"
}
resume() { "$T" phase resume --workflow "$1" --phase 1 --grace 1s >"$1.out" 2>"$1.err"; }
alive() { kill -0 "$1" 2>/dev/null; }
setsid sleep 1000 </dev/null >/dev/null 2>&1 &
v1=$!
sleep 1000 </dev/null >/dev/null 2>&1 &
v2=$!
start own && resume own
if alive -"$(cat own.pgid)"; then echo "the item's own group was not ended" >>fail; fi
start one && tamper one '.items[0].pgid = 1' && resume one
start foreign && tamper foreign ".items[0].pgid = $v1" && resume foreign
start ours && tamper ours ".items[0].pgid = $$" && resume ours
start bare && tamper bare 'del(.items[0].group)' && resume bare
start reused
kill -9 -"$(cat reused.pgid)"
i=0; while alive -"$(cat reused.pgid)" && [ $i -lt 3000 ]; do i=$((i+1)); sleep 0.01; done
setsid sleep 1000 </dev/null >/dev/null 2>&1 &
v3=$!
tamper reused ".items[0].pgid = $v3" && resume reused
for v in $v1 $v2 $v3; do alive $v || echo "victim $v was killed" >>fail; done
alive -"$(cat bare.pgid)" || echo "the group with nothing to identify it was signalled" >>fail
touch done"#;
    let mut cmd = std::process::Command::new("unshare");
    cmd.args([
        "-Urfp",
        "--mount-proc",
        "--kill-child",
        "sh",
        "-c",
        script,
        "sh",
    ])
    .arg(crate::common::bin())
    .arg(s.path())
    .env("XDG_CACHE_HOME", s.cache_dir())
    .env("XDG_STATE_HOME", s.cache_dir().join("state"))
    .stdin(Stdio::null())
    .stdout(Stdio::null())
    .stderr(Stdio::null());
    crate::common::clean_std_env(&mut cmd);
    let started = Instant::now();
    let mut ns = cmd.spawn().unwrap();
    while !s.exists("done") && started.elapsed() < LIMIT * 2 {
        if ns.try_wait().unwrap().is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    // Ends the namespace and all in it (--kill-child).
    let _ = ns.kill();
    let _ = ns.wait();
    assert!(
        s.exists("done"),
        "the scenario did not finish: {}",
        std::fs::read_to_string(s.path().join("fail")).unwrap_or_default()
    );
    let failed = std::fs::read_to_string(s.path().join("fail")).unwrap_or_default();
    assert!(failed.is_empty(), "{failed}");
    for w in ["one", "foreign", "ours", "bare", "reused"] {
        let err = s.read(&format!("{w}.err"));
        assert!(
            err.contains("not signalled: cannot show it is item job's"),
            "{w}: {err}"
        );
        let doc = json(&s.read(&format!("{w}.out")));
        assert_eq!(
            doc["resumed"]["not_signalled"],
            json!(["job"]),
            "{w}: {doc:#}"
        );
    }
    let own = json(&s.read("own.out"));
    assert_eq!(own["resumed"]["not_signalled"], json!([]), "{own:#}");
    assert!(
        item(&own, "job")["note"]
            .as_str()
            .unwrap_or_default()
            .contains("was still alive and was stopped"),
        "{own:#}"
    );
}

/// A phase whose item `b` blocks: run, then the runner killed outright while `b` runs.
fn killed_mid_phase(s: &Sandbox, w: &str) {
    s.write(".triage.toml", POLICY);
    s.write("plan.toml", [quick("a"), blocking("b", "")].concat());
    let mut child = spawn_run(s, w, "1");
    wait_until(s, w, "1", |m| {
        state_of(m, "a") == "complete" && state_of(m, "b") == "running" && s.exists("b.started")
    });
    child.kill().unwrap();
    child.wait().unwrap();
    s.write("b.release", "");
}

#[test]
fn resume_refuses_a_phase_whose_plan_file_changed_since_it_was_run() {
    let s = Sandbox::new();
    killed_mid_phase(&s, "pf");
    // Its own manifest: sealed, and what resume would run is shown.
    let out = s
        .cmd(&[
            "--text",
            "phase",
            "status",
            "--workflow",
            "pf",
            "--phase",
            "1",
        ])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("Resume would run:\n  b: sh -c") && text.contains("Sealed: yes"),
        "{text}"
    );
    assert!(
        !text.contains("\n  a: "),
        "a complete item is not run again: {text}"
    );
    let original = s.read("plan.toml");
    s.write("plan.toml", format!("{original}{}", quick("c")));
    let (code, out, err) = phase(&s, &["resume"], "pf", "1");
    assert_eq!(code, 64, "{out} {err}");
    assert!(
        err.contains("plan.toml changed since the phase was run") && err.contains("--fresh"),
        "{err}"
    );
    assert_eq!(runs(&s, "b"), 1, "nothing ran");
    // Put back as it was, the phase resumes.
    s.write("plan.toml", &original);
    let (code, out, err) = phase(&s, &["resume"], "pf", "1");
    assert_eq!(code, 0, "{out} {err}");
    assert_eq!(runs(&s, "b"), 2);
}

#[test]
fn resume_never_runs_commands_a_manifest_it_cannot_show_is_yours_brings_until_trusted() {
    let s = Sandbox::new();
    killed_mid_phase(&s, "sl");
    // The plan in the manifest edited to run something else, as a cloned `.triage/` could.
    let mut m = manifest(&s, "sl", "1");
    m["plan"]["items"][1]["command"] = json!("touch pwned; echo b-out");
    m.as_object_mut().unwrap().remove("journal");
    std::fs::write(manifest_path(&s, "sl", "1"), m.to_string()).unwrap();
    let _ = std::fs::remove_file(s.root().join("workflows/sl/phase-1.json.journal"));
    let (code, out, err) = phase(&s, &["resume"], "sl", "1");
    assert_eq!(code, 64, "{out} {err}");
    assert!(
        err.contains("cannot show this manifest is one you ran")
            && err.contains("phase status --workflow sl --phase 1 --text")
            && err.contains("--trust-plan"),
        "{err}"
    );
    assert!(
        !s.exists("pwned"),
        "resume ran a command the manifest brought"
    );
    // The person looks: the status shows the command resume would run, and that it is not
    // sealed as theirs.
    let out = s
        .cmd(&[
            "--text",
            "phase",
            "status",
            "--workflow",
            "sl",
            "--phase",
            "1",
        ])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("Resume would run:") && text.contains("b: sh -c 'touch pwned; echo b-out'"),
        "{text}"
    );
    assert!(text.contains("Sealed: no"), "{text}");
    // A manifest with no seal at all (an older triage, or stripped) is refused the same way.
    let mut bare = manifest(&s, "sl", "1");
    bare.as_object_mut().unwrap().remove("seal");
    std::fs::write(manifest_path(&s, "sl", "1"), bare.to_string()).unwrap();
    let (code, _, err) = phase(&s, &["resume"], "sl", "1");
    assert_eq!(code, 64, "{err}");
    assert!(err.contains("carries no seal"), "{err}");
    assert!(!s.exists("pwned"));
    // Told to trust it, resume runs it and seals it as the person's own.
    let (code, out, err) = phase(&s, &["resume", "--trust-plan"], "sl", "1");
    assert_eq!(code, 0, "{out} {err}");
    assert!(s.exists("pwned"));
    assert_eq!(manifest(&s, "sl", "1")["status"], "decided");
}

#[test]
fn a_phase_sealed_by_one_user_is_not_resumed_unasked_by_another() {
    let s = Sandbox::new();
    killed_mid_phase(&s, "ot");
    // The same project, another user's key (another state folder).
    let other = tempfile::tempdir().unwrap();
    let out = s
        .triage(["phase", "resume", "--workflow", "ot", "--phase", "1"])
        .env("XDG_STATE_HOME", other.path())
        .run();
    assert_eq!(out.code(), Some(64), "{}", out.stderr());
    assert!(
        out.stderr().contains("its seal is not yours"),
        "{}",
        out.stderr()
    );
    assert_eq!(runs(&s, "b"), 1);
}

/// An item of agent `worker` that counts its runs, writes its id to `order.log`, and always
/// fails.
fn failing(id: &str) -> String {
    format!(
        "[[items]]\nid = \"{id}\"\nagent = \"worker\"\ncriticality = \"optional\"\nbreaker_key = \"shared\"\ncommand = \"echo run >> {id}.runs; echo {id} >> order.log; echo 'connection reset by peer' >&2; exit 1\"\n"
    )
}

/// An item of agent `worker` that counts its runs, writes its id to `order.log`, and
/// succeeds.
fn healthy(id: &str) -> String {
    format!(
        "[[items]]\nid = \"{id}\"\nagent = \"worker\"\ncriticality = \"optional\"\nbreaker_key = \"shared\"\ncommand = \"echo run >> {id}.runs; echo {id} >> order.log; echo {id}-out\"\n"
    )
}

/// The adversary's 60-item phase in small: a resume runs the items that never started before
/// the items that already failed (which could otherwise open a shared breaker first), and the
/// summary counts items as they are, not the one breaker they share.
#[test]
fn resume_runs_what_never_ran_before_what_already_failed() {
    let s = Sandbox::new();
    // No cascade, abort threshold or breaker stops the first run after its failures.
    s.write(
        ".triage.toml",
        format!("{POLICY}[thresholds]\ncascade_agents = 100\nagent_failures = 0\nsession_failures = 100\n[breaker.\"shared\"]\nfailure_threshold = 100\n"),
    );
    let fails = ["f1", "f2", "f3", "f4"];
    let heals = ["h1", "h2", "h3", "h4", "h5", "h6"];
    let mut plan: String = fails.iter().map(|f| failing(f)).collect();
    plan.push_str(&blocking("gate", "criticality = \"optional\"\n"));
    plan.extend(heals.iter().map(|h| healthy(h)));
    s.write("plan.toml", &plan);
    // One at a time: the four failures, then the gate, which holds while the runner is
    // killed; the healthy items never started.
    let mut child = s
        .std_cmd(&[
            "phase",
            "run",
            "plan.toml",
            "--workflow",
            "ro",
            "--phase",
            "1",
            "--jobs",
            "1",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_until(&s, "ro", "1", |m| {
        fails.iter().all(|f| state_of(m, f) == "failed")
            && state_of(m, "gate") == "running"
            && s.exists("gate.started")
    });
    child.kill().unwrap();
    child.wait().unwrap();
    s.write("gate.release", "");
    std::fs::remove_file(s.path().join("order.log")).unwrap();

    let (_, out, err) = phase(&s, &["resume", "--jobs", "1"], "ro", "1");
    let doc = json(&out);
    for h in heals {
        assert_eq!(state_of(&doc, h), "complete", "{h}: {doc:#} {err}");
        assert_eq!(runs(&s, h), 1);
    }
    assert_eq!(state_of(&doc, "gate"), "complete", "{doc:#}");
    let mut order: Vec<String> = s.read("order.log").lines().map(str::to_string).collect();
    // Each failing item makes its two attempts in a row.
    order.dedup();
    assert_eq!(
        order,
        ["h1", "h2", "h3", "h4", "h5", "h6", "f1", "f2", "f3", "f4"],
        "never-started items first, the failed ones last"
    );
    assert_eq!(doc["counts"]["complete"], 7, "{doc:#}");
    let text = doc["degradation"]["text"].as_str().unwrap_or_default();
    assert!(text.contains("- 7 of 11 items completed"), "{text}");
}

/// An item an open breaker refuses never ran: it is not started (waiting for the breaker),
/// never failed, and the phase pauses saying so; a resume once the breaker lets it runs it.
#[test]
fn an_item_refused_by_an_open_breaker_waits_not_started_and_never_counts_as_failed() {
    let s = Sandbox::new();
    s.write(
        ".triage.toml",
        "[retry]\nschedule = [\"0s\"]\nmax_attempts = 1\n[breaker.\"shared\"]\nfailure_threshold = 1\ncooldown = \"30s\"\n",
    );
    s.write("plan.toml", [healthy("h1"), healthy("h2")].concat());
    s.triage(["record-error", "--agent", "x", "--breaker", "shared"])
        .env("TRIAGE_NOW", "2026-02-04T13:30:00Z")
        .stdin(r#"{"kind": "network_error", "detail": "connection reset by peer"}"#)
        .run()
        .status(0);
    let run = |args: &[&str]| {
        let mut all = vec!["phase"];
        all.extend_from_slice(args);
        all.extend_from_slice(&["--workflow", "bo", "--phase", "1"]);
        let out = s
            .triage(&all)
            .env("TRIAGE_NOW", "2026-02-04T13:30:10Z")
            .run();
        (out.code(), json(&out.stdout()))
    };
    let (code, doc) = run(&["run", "plan.toml"]);
    for h in ["h1", "h2"] {
        assert_eq!(state_of(&doc, h), "not_started", "{doc:#}");
        assert!(!s.exists(&format!("{h}.runs")));
        let note = item(&doc, h)["note"].as_str().unwrap_or_default();
        assert!(note.contains("breaker shared is open"), "{note}");
    }
    assert_eq!(doc["counts"]["failed"], 0, "{doc:#}");
    assert_eq!(doc["decision"], "paused", "{doc:#}");
    assert_eq!(code, Some(130));
    assert!(
        doc["reason"]
            .as_str()
            .unwrap_or_default()
            .contains("2 of 2 items not started: an open breaker refused them"),
        "{doc:#}"
    );
}
