//! `report` shows permits and retry budgets: every key the policy names or the store holds,
//! read through the store the `permit` and `budget` commands use, in JSON (new top-level
//! `permits` and `budgets`), in `--text` at 80 columns and in `--html`; nothing of them when
//! there are none.
//!
//! One suite for both backends, as `permits.rs`: the file store in the `cli` target, a real
//! Redis in the `fleet` target (which includes this file). On files time is pinned with
//! TRIAGE_NOW; a Redis judges leases by its own `TIME`, so there the times are checked to
//! within the test's run.

use crate::common::Sandbox;
use serde_json::Value;

/// Time pinned near the real clock's (a Redis key expires by the server's real clock, so a
/// lease taken at a time long past would be gone at once), to the second.
struct Clock(i64);

impl Clock {
    fn new() -> Clock {
        Clock(chrono::Utc::now().timestamp())
    }

    /// NOW plus `s` seconds, in RFC 3339 (milliseconds when `ms`).
    fn at(&self, s: i64, ms: bool) -> String {
        let t = chrono::DateTime::from_timestamp(self.0 + s, 0).unwrap();
        if ms {
            t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
        } else {
            t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
        }
    }
}

const POLICY: &str = "[permits.api]\nmax = 2\nlease = \"60s\"\n[permits.db]\nmax = 4\n\
                      [budget.api]\nmax_tokens = 4\ntoken_ratio = 0.5\n[budget.search]\nmax_tokens = 10\n";

/// `api`'s two permits held (busy, the first taken at NOW-10s frees 50 s after NOW), `db`
/// untouched; `api`'s budget spent by three failures (1 of 4 tokens left), `search` full.
fn busy_and_spent(s: &Sandbox, c: &Clock) -> Vec<String> {
    s.write(".triage.toml", POLICY);
    let mut leases = Vec::new();
    for at in [c.at(-10, false), c.at(-5, false)] {
        let r = s
            .triage(["permit", "acquire", "api"])
            .env("TRIAGE_NOW", at)
            .run()
            .status(0)
            .stdout_json();
        leases.push(r["lease"].as_str().unwrap().to_string());
    }
    for _ in 0..3 {
        s.triage(["budget", "record", "api", "--outcome", "failure"])
            .env("TRIAGE_NOW", c.at(0, false))
            .run()
            .status(0);
    }
    leases
}

fn report(s: &Sandbox, c: &Clock, args: &[&str]) -> crate::common::Run {
    s.triage(args)
        .env("TRIAGE_NOW", c.at(0, false))
        .env("TZ", "UTC")
        .env("COLUMNS", "80")
        .env("NO_COLOR", "1")
        .run()
        .status(0)
}

fn by_key<'a>(list: &'a Value, key: &str) -> &'a Value {
    list.as_array()
        .unwrap_or_else(|| panic!("not a list: {list}"))
        .iter()
        .find(|r| r["key"] == key)
        .unwrap_or_else(|| panic!("no `{key}` in {list}"))
}

#[test]
fn the_json_report_shows_each_permit_key_and_budget_as_the_commands_see_them() {
    let Some(b) = crate::backend::sandbox() else {
        return;
    };
    let s = &b.sandbox;
    let c = Clock::new();
    let leases = busy_and_spent(s, &c);
    let r = report(s, &c, &["report"]).stdout_json();
    // The report's other members are still there.
    assert!(r["breakers"].is_array(), "{r}");
    let api = by_key(&r["permits"], "api");
    assert_eq!(api["max"], 2, "{api}");
    assert_eq!(api["held"], 2, "{api}");
    assert_eq!(api["busy"], true, "{api}");
    if crate::backend::SERVER_CLOCK {
        // Taken a moment ago by the server's clock, for 60 s.
        let wait = api["next_free_in_s"].as_f64().unwrap();
        assert!((30.0..=60.0).contains(&wait), "{api}");
    } else {
        assert_eq!(api["next_free"], c.at(50, true), "{api}");
        assert_eq!(api["next_free_in_s"], 50.0, "{api}");
    }
    let held: Vec<&str> = api["leases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["lease"].as_str().unwrap())
        .collect();
    assert_eq!(held, leases, "{api}");
    if !crate::backend::SERVER_CLOCK {
        assert_eq!(api["leases"][1]["expires"], c.at(55, true), "{api}");
    }
    let db = by_key(&r["permits"], "db");
    assert_eq!(
        (db["held"].as_u64(), db["busy"].as_bool()),
        (Some(0), Some(false))
    );
    let spent = by_key(&r["budgets"], "api");
    assert_eq!(spent["tokens"], 1.0, "{spent}");
    assert_eq!(spent["max_tokens"], 4.0, "{spent}");
    assert_eq!(spent["token_ratio"], 0.5, "{spent}");
    assert_eq!(spent["retry_allowed"], false, "{spent}");
    let full = by_key(&r["budgets"], "search");
    assert_eq!(
        (full["tokens"].as_f64(), full["retry_allowed"].as_bool()),
        (Some(10.0), Some(true))
    );
    // Read through the same store as `permit status` and `budget status`.
    let st = s
        .triage(["permit", "status", "api"])
        .env("TRIAGE_NOW", c.at(0, false))
        .run()
        .status(0)
        .stdout_json();
    assert_eq!(api["backend"], st["permits"][0]["backend"], "{st}");
    assert_eq!(st["permits"][0]["held"], 2, "{st}");
    let bs = s
        .triage(["budget", "status", "api"])
        .env("TRIAGE_NOW", c.at(0, false))
        .run()
        .status(0)
        .stdout_json();
    assert_eq!(spent["backend"], bs["budgets"][0]["backend"], "{bs}");
    assert_eq!(spent["tokens"], bs["budgets"][0]["tokens"], "{bs}");
}

#[test]
fn report_text_lists_permits_and_budgets_within_80_columns_and_names_the_busy_and_spent() {
    let Some(b) = crate::backend::sandbox() else {
        return;
    };
    let s = &b.sandbox;
    let c = Clock::new();
    busy_and_spent(s, &c);
    let out = report(s, &c, &["report", "--text"]).stdout();
    for line in out.lines() {
        assert!(line.chars().count() <= 80, "{line:?}\n{out}");
    }
    let permits = out.find("\npermits\n").unwrap_or_else(|| panic!("{out}"));
    let budgets = out
        .find("\nretry budgets\n")
        .unwrap_or_else(|| panic!("{out}"));
    let (p, b) = (&out[permits..budgets], &out[budgets..]);
    let row = |block: &str, key: &str| -> String {
        block
            .lines()
            .find(|l| l.starts_with(&format!("{key} ")))
            .unwrap_or_else(|| panic!("no row of `{key}`:\n{out}"))
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
    };
    let api = row(p, "api");
    if crate::backend::SERVER_CLOCK {
        assert!(api.starts_with("api 2 of 2, busy in "), "{out}");
    } else {
        assert_eq!(api, "api 2 of 2, busy in 50s", "{out}");
    }
    assert_eq!(row(p, "db"), "db 0 of 4 -", "{out}");
    assert_eq!(
        row(b, "api"),
        "api 1 of 4 refused: spent +0.5 a success",
        "{out}"
    );
    assert_eq!(
        row(b, "search"),
        "search 10 of 10 allowed +0.1 a success",
        "{out}"
    );
}

#[test]
fn report_html_has_a_permits_and_budgets_section_marking_the_busy_key_and_the_spent_budget() {
    let Some(b) = crate::backend::sandbox() else {
        return;
    };
    let s = &b.sandbox;
    let c = Clock::new();
    busy_and_spent(s, &c);
    let page = report(s, &c, &["report", "--html", "-"]).stdout();
    let start = page
        .find("<section id=\"admission\"")
        .unwrap_or_else(|| panic!("no admission section"));
    let section = &page[start..start + page[start..].find("</section>").unwrap()];
    let rows: Vec<&str> = section.split("<tr").skip(1).collect();
    let row = |key: &str| -> &str {
        rows.iter()
            .find(|r| r.contains(&format!("<code>{key}</code>")) && !r.contains("<th>"))
            .unwrap_or_else(|| panic!("no row of `{key}`:\n{section}"))
    };
    let permits = &section[..section.find("class=\"budgets\"").unwrap()];
    let api_permits = permits
        .split("<tr")
        .find(|r| r.contains("<code>api</code>"))
        .unwrap();
    assert!(
        api_permits.contains("sev3") && api_permits.contains("busy"),
        "{api_permits}"
    );
    assert!(api_permits.contains("2/2"), "{api_permits}");
    assert!(!row("db").contains("sev3"), "{}", row("db"));
    let budgets = &section[section.find("class=\"budgets\"").unwrap()..];
    let api_budget = budgets
        .split("<tr")
        .find(|r| r.contains("<code>api</code>"))
        .unwrap();
    assert!(
        api_budget.contains("sev3") && api_budget.contains("refused"),
        "{api_budget}"
    );
    assert!(api_budget.contains("1/4"), "{api_budget}");
    assert!(!row("search").contains("sev3"), "{}", row("search"));
    // The summary names both.
    assert!(page.contains("Every permit held: api."), "summary");
    assert!(
        page.contains("Retry budget spent (retries refused): api."),
        "summary"
    );
}

#[test]
fn with_no_permit_or_budget_key_the_report_shows_nothing_of_them() {
    let Some(b) = crate::backend::sandbox() else {
        return;
    };
    let s = &b.sandbox;
    let c = Clock::new();
    s.write(".triage.toml", "[breaker.api]\nfailure_threshold = 3\n");
    let r = report(s, &c, &["report"]).stdout_json();
    assert_eq!(r["permits"], serde_json::json!([]), "{r}");
    assert_eq!(r["budgets"], serde_json::json!([]), "{r}");
    let text = report(s, &c, &["report", "--text"]).stdout();
    assert!(
        !text.contains("permits") && !text.contains("budget"),
        "{text}"
    );
    let page = report(s, &c, &["report", "--html", "-"]).stdout();
    assert!(!page.contains("id=\"admission\""), "an empty section");
}
