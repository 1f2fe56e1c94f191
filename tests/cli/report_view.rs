//! The operator's view in text: `report --text` at 80 columns keeps each kind beside its
//! count and writes every time one way; `report` and `breaker status` count open breakers
//! alike; `report --since/--until` bound every form of the report.

use crate::common::Sandbox;
use crate::text_output::{fixture, NOW};
use regex::Regex;

fn text(s: &Sandbox, args: &[&str], columns: usize) -> String {
    let out = s
        .triage(args)
        .env("TRIAGE_NOW", NOW)
        .env("TZ", "UTC")
        .env("COLUMNS", columns.to_string())
        .env_remove("NO_COLOR")
        .run()
        .status(0);
    out.stdout()
}

/// At 80 columns the KINDS column may be narrow, yet a kind never sits on one line and its
/// count on the next; and the times of the LAST ERROR column and the header share one format
/// (no "35 min ago" beside "13:55:00" beside "Feb 03 12:07").
#[test]
fn report_text_at_80_columns_keeps_kinds_beside_counts_and_one_time_format() {
    let s = fixture();
    let out = text(&s, &["report", "--text", "--since", "2d"], 80);
    for line in out.lines() {
        assert!(line.chars().count() <= 80, "{line:?}");
    }
    for kind in [
        "timeout",
        "rate_limited",
        "crash",
        "validation_failed",
        "overloaded",
    ] {
        let beside = Regex::new(&format!(r"{kind}[ \u{{a0}}]\d+")).unwrap();
        assert!(
            beside.is_match(&out),
            "{kind} is not beside its count:\n{out}"
        );
    }
    assert!(!out.contains(" ago"), "a relative time:\n{out}");
    let clock = Regex::new(r"\b\d\d:\d\d:\d\d\b").unwrap();
    assert!(!clock.is_match(&out), "a time of day alone:\n{out}");
    let stamp = Regex::new(r"\d{4}-\d\d-\d\d\s+\d\d:\d\d").unwrap();
    // The header's --since and one last error per agent.
    assert!(stamp.find_iter(&out).count() >= 6, "{out}");
}

/// `breaker status` says "N open"; `report --text` must say the same N: a half-open breaker
/// (which lets probes through) is named apart, not counted among the open.
#[test]
fn report_and_breaker_status_agree_on_how_many_breakers_are_open() {
    let s = fixture();
    // Forced open for a minute an hour ago: half-open now.
    s.triage(["breaker", "trip", "calculator", "--for", "1m"])
        .env("TRIAGE_NOW", "2026-02-04T14:00:00Z")
        .run()
        .status(0);
    let status = text(&s, &["breaker", "status", "--text"], 200);
    let report = text(&s, &["report", "--text"], 200);
    let n = |re: &str, t: &str| -> u64 {
        Regex::new(re)
            .unwrap()
            .captures(t)
            .unwrap_or_else(|| panic!("{re} in {t}"))[1]
            .parse()
            .unwrap()
    };
    let from_status = n(r"; (\d+) open", &status);
    let from_report = n(r"(\d+) open breakers?", &report);
    assert_eq!(from_status, 2, "{status}");
    assert_eq!(
        from_report, from_status,
        "report:\n{report}\nstatus:\n{status}"
    );
    assert!(report.contains("1 half-open: calculator"), "{report}");
}

/// `--until` bounds the report (inclusive, as `errors --until`), in JSON, text and HTML; a
/// `--since` after the `--until` is a usage error naming both.
#[test]
fn report_until_bounds_every_form() {
    let s = fixture();
    let all = s
        .triage(["report"])
        .env("TRIAGE_NOW", NOW)
        .run()
        .status(0)
        .stdout_json();
    let until = s
        .triage(["report", "--until", "2026-02-04T12:00:00Z"])
        .env("TRIAGE_NOW", NOW)
        .run()
        .status(0)
        .stdout_json();
    let both = s
        .triage(["report", "--since", "1d", "--until", "3h"])
        .env("TRIAGE_NOW", NOW)
        .run()
        .status(0)
        .stdout_json();
    let (a, u, b) = (
        all["records"].as_u64().unwrap(),
        until["records"].as_u64().unwrap(),
        both["records"].as_u64().unwrap(),
    );
    assert!(u > 0 && u < a, "{u} of {a}");
    assert!(b > 0 && b < u, "{b} of {u}");
    assert_eq!(until["filter"]["until"], "2026-02-04T12:00:00Z");
    // Every record the log holds up to 12:00, counted by hand.
    let by_hand = crate::text_output::fixture_log(60)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v.get("resolves").is_none())
        .filter(|v| v["timestamp"].as_str().unwrap() <= "2026-02-04T12:00:00Z")
        .count() as u64;
    assert_eq!(u, by_hand);
    let t = text(&s, &["report", "--text", "--until", "3h"], 200);
    assert!(t.contains("until 2026-02-04 12:00"), "{t}");
    let html = s
        .triage(["report", "--html", "-", "--until", "3h"])
        .env("TRIAGE_NOW", NOW)
        .env("TZ", "UTC")
        .run()
        .status(0)
        .stdout();
    assert!(
        html.contains("until 2026-02-04 12:00"),
        "the page names its range"
    );
    assert!(
        html.contains(&format!("{u} error records")),
        "the page counts {u}"
    );
    let bad = s
        .triage(["report", "--since", "1h", "--until", "2h"])
        .env("TRIAGE_NOW", NOW)
        .run()
        .status(64);
    assert!(bad
        .stderr()
        .contains("triage report: --since is later than --until"));
}

/// The report reads permits and budgets without changing the state root: a policy naming
/// keys never used creates no folder, lock or file (and no root where there was none).
#[test]
fn report_reads_permits_and_budgets_without_writing_anything() {
    let s = Sandbox::new();
    s.write(
        ".triage.toml",
        "[permits.api]\nmax = 2\n[budget.api]\nmax_tokens = 4\n",
    );
    let r = s.triage(["report"]).run().status(0).stdout_json();
    assert_eq!(r["permits"][0]["key"], "api", "{r}");
    assert_eq!(r["permits"][0]["held"], 0, "{r}");
    assert_eq!(r["budgets"][0]["tokens"], 4.0, "{r}");
    s.triage(["report", "--text"]).run().status(0);
    assert!(!s.exists(".triage"), "the report made a state root");
    // Taken and expired: the report sweeps nothing on disk either.
    s.triage(["permit", "acquire", "api"])
        .env("TRIAGE_NOW", "2026-02-04T14:00:00Z")
        .run()
        .status(0);
    let table = s.read(".triage/permits/api.json");
    let r = s
        .triage(["report"])
        .env("TRIAGE_NOW", NOW)
        .run()
        .status(0)
        .stdout_json();
    assert_eq!(r["permits"][0]["held"], 0, "the expired lease counted: {r}");
    assert_eq!(s.read(".triage/permits/api.json"), table);
}

/// A permits folder that cannot be read is a warning; the budgets and the rest of the report
/// are unchanged, and a planted lease that never runs out holds its slot no longer than one
/// lease time.
#[test]
fn an_unreadable_or_planted_permit_store_is_a_warning_and_the_rest_of_the_report_stands() {
    let s = Sandbox::new();
    s.write(
        ".triage.toml",
        "[permits.api]\nmax = 2\nlease = \"10s\"\n[budget.api]\nmax_tokens = 4\n",
    );
    s.write(".triage/permits", "not a folder");
    let r = s.triage(["report"]).run().status(0);
    assert!(
        r.stderr().contains("the permits were not read"),
        "{}",
        r.stderr()
    );
    let v = r.stdout_json();
    assert_eq!(v["permits"], serde_json::json!([]), "{v}");
    assert_eq!(v["budgets"][0]["key"], "api", "{v}");
    assert!(v["breakers"].is_array() && v["records"].is_number(), "{v}");
    std::fs::remove_file(s.path().join(".triage/permits")).unwrap();
    s.write(
        ".triage/permits/api.json",
        r#"{"key":"api","leases":[{"id":"x1","expires_ms":9223372036854775000}]}"#,
    );
    let v = s
        .triage(["report"])
        .env("TRIAGE_NOW", NOW)
        .run()
        .status(0)
        .stdout_json();
    assert_eq!(v["permits"][0]["held"], 1, "{v}");
    assert_eq!(v["permits"][0]["next_free_in_s"], 10.0, "{v}");
}
