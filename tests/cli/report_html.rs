//! `report --html`: the page's structure against a golden outline (tags, ids, roles, headers
//! and how many marks each chart has — not its bytes), what makes it self-contained and
//! accessible, its size whatever the log, hostile text, and a real render in headless
//! Chromium: a screenshot that is not blank, in light and dark mode, with no console message.

use crate::common::Sandbox;
use crate::text_output::{fixture, NOW};
use regex::Regex;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

fn page(s: &Sandbox, args: &[&str]) -> String {
    let mut all = vec!["report", "--html", "-"];
    all.extend_from_slice(args);
    let out = s
        .triage(&all)
        .env("TRIAGE_NOW", NOW)
        .env("TZ", "UTC")
        .run()
        .status(0);
    String::from_utf8(out.stdout.clone()).unwrap()
}

/// The page's outline: landmark, heading, figure, chart and table elements with their id,
/// class, role and aria attributes, the text of table headers and figure captions' first
/// word; inside a chart or a table body, only how many of each element it holds.
fn outline(html: &str) -> String {
    let tag = Regex::new(r#"<(/?)([a-zA-Z][a-zA-Z0-9]*)((?:[^>"]|"[^"]*")*?)(/?)>"#).unwrap();
    let attr = Regex::new(r#"\b(id|class|role|aria-[a-z]+|lang)="([^"]*)""#).unwrap();
    let what = Regex::new(r#"(name|http-equiv|charset)="?([^" >]*)"#).unwrap();
    let kept = [
        "html",
        "head",
        "body",
        "header",
        "main",
        "footer",
        "section",
        "h1",
        "h2",
        "h3",
        "figure",
        "figcaption",
        "svg",
        "table",
        "thead",
        "th",
        "tbody",
        "ul",
        "p",
        "style",
        "meta",
    ];
    let void = ["meta", "link", "br", "img", "input"];
    let mut out = String::new();
    let mut depth = 0usize;
    let mut counting: Option<(String, BTreeMap<String, usize>, usize)> = None;
    for m in tag.captures_iter(html) {
        let closing = &m[1] == "/";
        let name = m[2].to_ascii_lowercase();
        let selfclosing = &m[4] == "/" || void.contains(&name.as_str());
        if let Some((inside, counts, nested)) = counting.as_mut() {
            if name == *inside {
                if closing && *nested == 0 {
                    let list: Vec<String> =
                        counts.iter().map(|(k, n)| format!("{k}×{n}")).collect();
                    out.push_str(&format!("{}[{}]\n", "  ".repeat(depth), list.join(", ")));
                    counting = None;
                    depth -= 1;
                    out.push_str(&format!("{}/{name}\n", "  ".repeat(depth)));
                } else if closing {
                    *nested -= 1;
                } else {
                    *nested += 1;
                }
                continue;
            }
            if !closing {
                *counts.entry(name).or_default() += 1;
            }
            continue;
        }
        if !kept.contains(&name.as_str()) {
            continue;
        }
        if closing {
            depth = depth.saturating_sub(1);
            continue;
        }
        let attrs: Vec<String> = attr
            .captures_iter(&m[3])
            .map(|a| format!("{}={}", &a[1], &a[2]))
            .collect();
        let mut line = format!("{}{name}", "  ".repeat(depth));
        if !attrs.is_empty() {
            line.push(' ');
            line.push_str(&attrs.join(" "));
        }
        if name == "th" {
            let end = m.get(0).unwrap().end();
            let text = html[end..].split('<').next().unwrap_or("");
            line.push_str(&format!(" \"{text}\""));
        }
        if name == "meta" {
            if let Some(w) = what.captures(&m[3]) {
                line.push_str(&format!(" {}={}", &w[1], &w[2]));
            }
        }
        out.push_str(&line);
        out.push('\n');
        if selfclosing {
            continue;
        }
        depth += 1;
        if name == "svg" || name == "tbody" {
            counting = Some((name, BTreeMap::new(), 0));
        }
    }
    out
}

#[test]
fn html_structure_matches_the_golden_outline() {
    let s = fixture();
    let html = page(&s, &[]);
    insta::assert_snapshot!("report_html_outline", outline(&html));
}

#[test]
fn html_is_self_contained_accessible_and_follows_the_colour_scheme() {
    let s = fixture();
    let html = page(&s, &[]);
    for banned in [
        "<script", "src=", "href=", "http://", "https://", "@import", "url(",
    ] {
        assert!(
            !html.contains(banned),
            "the page must load nothing: {banned}"
        );
    }
    assert!(html.contains(r#"http-equiv="Content-Security-Policy" content="default-src 'none'"#));
    assert!(html.contains("prefers-color-scheme:dark"));
    assert!(html.contains(r#"name="color-scheme" content="light dark""#));
    // Every chart is an image with a title and a description.
    let svgs = html.matches("<svg ").count();
    assert!(svgs >= 7, "{svgs} charts");
    assert_eq!(html.matches(r#"role="img""#).count(), svgs);
    assert_eq!(html.matches("<title id=").count(), svgs);
    assert_eq!(html.matches("<desc id=").count(), svgs);
    let ids: Vec<&str> = Regex::new(r#"\bid="([^"]+)""#)
        .unwrap()
        .captures_iter(&html)
        .map(|c| c.get(1).unwrap().as_str())
        .collect();
    let unique: std::collections::BTreeSet<&&str> = ids.iter().collect();
    assert_eq!(unique.len(), ids.len(), "ids are unique");
    // The written summary says what the charts show.
    let summary = html
        .split("<div class=\"summary\"><p>")
        .nth(1)
        .and_then(|r| r.split("</p>").next())
        .unwrap();
    for part in [
        "60 error records in 4 sessions and 2 workflows",
        "The agent that fails most is",
        "In the last 24 hours:",
        "Not closed: 2 breakers — researcher (open), statistician-consultant (forced-open).",
        "thresholds crossed: cascade ×2, session_failure_threshold ×4",
        "59 unresolved",
    ] {
        assert!(summary.contains(part), "{part:?} in {summary}");
    }
    // Unresolved errors carry the ids `--resolve` takes.
    let newest = crate::text_output::fixture_log(60);
    let last_id = newest
        .lines()
        .rev()
        .nth(1)
        .and_then(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .map(|v| v["error_id"].as_str().unwrap().to_string())
        .unwrap();
    let unresolved = html.split("id=\"unresolved\"").nth(1).unwrap();
    assert!(
        !unresolved.contains(&last_id),
        "the resolved record is not listed"
    );
    assert!(
        unresolved.matches("<code>err-").count() == 50,
        "the newest 50"
    );
}

#[test]
fn html_to_a_file_answers_in_json() {
    let s = fixture();
    let out = s
        .triage(["report", "--html", "out/page.html", "--agent", "researcher"])
        .env("TRIAGE_NOW", NOW)
        .run()
        .status(0);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["records"], 12);
    assert_eq!(v["filter"]["agent"], "researcher");
    let html = std::fs::read_to_string(s.path().join("out/page.html")).unwrap();
    assert_eq!(v["bytes"], html.len());
    assert!(html.contains("agent researcher"));
}

#[test]
fn hostile_text_stays_text() {
    let s = Sandbox::new();
    std::fs::create_dir_all(s.root().join("logs")).unwrap();
    let evil = r#"<script>alert(1)</script><img src=x onerror=alert(2)>"#;
    let line = serde_json::json!({"error_id": evil, "timestamp": NOW, "agent": evil,
        "kind": evil, "detail": evil, "severity": "\" onmouseover=\"x", "duration_ms": 5});
    std::fs::write(s.root().join("logs/errors.jsonl"), format!("{line}\n")).unwrap();
    let html = page(&s, &[]);
    assert!(
        !html.contains("<script") && !html.contains("<img"),
        "{html}"
    );
    assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
    assert!(!html.contains("\" onmouseover"));
}

#[test]
fn html_stays_small_whatever_the_log_holds() {
    // Many agents, kinds, texts, breakers and a long span: every list and chart is capped.
    let s = Sandbox::new();
    std::fs::create_dir_all(s.root().join("logs")).unwrap();
    let mut log = String::new();
    for i in 0..10_000u64 {
        let line = serde_json::json!({
            "error_id": format!("err-{i:08}"),
            "timestamp": chrono::DateTime::from_timestamp(1_700_000_000 + i as i64 * 997, 0).unwrap().to_rfc3339(),
            "session_id": format!("s{}", i % 2500),
            "workflow_id": format!("w{}", i % 1000),
            "phase": i % 7,
            "agent": format!("agent-{}", i % 2500),
            "kind": format!("kind-{}", i % 90),
            "detail": format!("a distinct error text number {i} {}", "x".repeat(200)),
            "duration_ms": i * 37 % 10_000_000,
        });
        log.push_str(&line.to_string());
        log.push('\n');
    }
    std::fs::write(s.root().join("logs/errors.jsonl"), log).unwrap();
    let mut events = String::new();
    for i in 0..20_000u64 {
        let e = serde_json::json!({"key": format!("tool-{}", i % 400),
            "from": "closed", "to": if i % 2 == 0 { "open" } else { "closed" },
            "at": chrono::DateTime::from_timestamp(1_700_000_000 + i as i64 * 60, 0).unwrap().to_rfc3339(),
            "reason": "x", "generation": i});
        events.push_str(&e.to_string());
        events.push('\n');
    }
    std::fs::write(s.root().join("logs/breaker-events.jsonl"), events).unwrap();
    let html = page(&s, &[]);
    assert!(html.len() < 1_000_000, "{} bytes", html.len());
    // 2000 agents are told apart, the rest share one slot; 8 get charts of their own.
    assert!(html.contains("1993 other agents"), "agents capped");
    assert!(html.contains("370 more not drawn"));
}

// ---------------------------------------------------------------------------------------------
// The real browser.

fn chromium() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("TRIAGE_TEST_CHROMIUM") {
        return Some(PathBuf::from(p));
    }
    ["/usr/bin/chromium", "/usr/bin/chromium-browser"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
}

/// Renders `page` in headless Chromium: the screenshot, and every console message.
fn render(browser: &Path, page: &Path, png: &Path, dark: bool, size: &str) -> Vec<String> {
    let profile = tempfile::tempdir().unwrap();
    let mut c = Command::new(browser);
    c.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--hide-scrollbars",
        "--enable-logging=stderr",
        "--v=0",
    ])
    .arg(format!("--user-data-dir={}", profile.path().display()))
    .arg(format!("--window-size={size}"))
    .arg(format!("--screenshot={}", png.display()));
    if dark {
        c.arg("--force-dark-mode");
    }
    c.arg(format!("file://{}", page.display()));
    let out = c.output().unwrap();
    assert!(
        png.exists(),
        "no screenshot: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The page's console messages (errors, CSP refusals) as Chromium logs them.
    String::from_utf8_lossy(&out.stderr)
        .lines()
        .filter(|l| l.contains(":CONSOLE"))
        .map(str::to_string)
        .collect()
}

/// Distinct colours, the share of pixels unlike the top-left one, and mean brightness.
fn look(png_path: &Path) -> (usize, f64, f64) {
    let decoder = png::Decoder::new(std::io::BufReader::new(
        std::fs::File::open(png_path).unwrap(),
    ));
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut buf).unwrap();
    let channels = info.color_type.samples();
    let px: Vec<&[u8]> = buf[..info.buffer_size()]
        .chunks(channels)
        .map(|p| &p[..3.min(p.len())])
        .collect();
    let bg = px[0];
    let colours: std::collections::HashSet<&[u8]> = px.iter().copied().collect();
    let differ = px.iter().filter(|p| **p != bg).count() as f64 / px.len() as f64;
    let bright = px
        .iter()
        .map(|p| p.iter().map(|v| f64::from(*v)).sum::<f64>() / 3.0)
        .sum::<f64>()
        / px.len() as f64;
    (colours.len(), differ, bright)
}

#[test]
fn renders_in_headless_chromium_without_console_messages() {
    let Some(browser) = chromium() else {
        crate::common::skip("chromium is not installed", "TRIAGE_REQUIRE_CHROMIUM");
        return;
    };
    let s = fixture();
    let html = page(&s, &[]);
    let file = s.path().join("page.html");
    std::fs::write(&file, &html).unwrap();
    // The console check sees what it must: a broken script and a refused load are reported.
    let control = s.path().join("control.html");
    std::fs::write(
        &control,
        "<!DOCTYPE html><html><head><meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; script-src 'unsafe-inline'\"></head>\
         <body><p>x</p><div style=\"background:url(http://example.invalid/a.png)\">y</div><script>console.error('boom'); nope();</script></body></html>",
    )
    .unwrap();
    let messages = render(
        &browser,
        &control,
        &s.path().join("control.png"),
        false,
        "400,300",
    );
    assert!(
        messages.iter().any(|m| m.contains("boom"))
            && messages.iter().any(|m| m.contains("nope is not defined"))
            && messages
                .iter()
                .any(|m| m.contains("Content Security Policy")),
        "the control page's errors were not seen: {messages:?}"
    );
    let light = s.path().join("light.png");
    let messages = render(&browser, &file, &light, false, "1100,1500");
    assert!(messages.is_empty(), "console: {messages:?}");
    let (colours, differ, light_bright) = look(&light);
    assert!(colours > 30, "{colours} colours: blank?");
    assert!(
        differ > 0.03,
        "{differ} of pixels differ from the background"
    );
    let dark = s.path().join("dark.png");
    let messages = render(&browser, &file, &dark, true, "1100,1500");
    assert!(messages.is_empty(), "console (dark): {messages:?}");
    let (colours, differ, dark_bright) = look(&dark);
    assert!(
        colours > 30 && differ > 0.03,
        "dark: {colours} colours, {differ}"
    );
    assert!(
        dark_bright < light_bright / 2.0,
        "dark mode is dark: {dark_bright} vs {light_bright}"
    );
    if std::env::var_os("UPDATE_DOCS").is_some() {
        let docs = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("docs");
        std::fs::create_dir_all(&docs).unwrap();
        render(
            &browser,
            &file,
            &docs.join("report.png"),
            false,
            "1100,1900",
        );
    }
}

/// Lays `page` out in headless Chromium in a window `width` px wide and measures it: the
/// page's scroll width, the window's inner width, and on how many lines the first id of the
/// unresolved table sits. The page admits no script, so a copy is measured whose policy lets
/// one inline script run; the script writes the numbers into the DOM that `--dump-dom` prints.
fn measure(browser: &Path, page: &str, dir: &Path, width: u32) -> (f64, f64, usize) {
    let policy = "default-src 'none'";
    assert!(page.contains(policy), "the page's policy changed");
    let page = page
        .replacen(policy, "default-src 'none'; script-src 'unsafe-inline'", 1)
        .replacen(
            "</body>",
            "<script>var id = document.querySelector('#unresolved tbody code');\
             var m = document.createElement('pre'); m.id = 'measured';\
             m.textContent = 'scroll=' + document.documentElement.scrollWidth + ' inner=' + innerWidth\
             + ' idlines=' + (id ? id.getClientRects().length : 0);\
             document.body.appendChild(m);</script></body>",
            1,
        );
    let file = dir.join("measure.html");
    std::fs::write(&file, page).unwrap();
    let profile = tempfile::tempdir().unwrap();
    let out = Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg(format!("--window-size={width},900"))
        .arg("--dump-dom")
        .arg(format!("file://{}", file.display()))
        .output()
        .unwrap();
    let dom = String::from_utf8_lossy(&out.stdout);
    let m = Regex::new(r"scroll=(\d+(?:\.\d+)?) inner=(\d+(?:\.\d+)?) idlines=(\d+)")
        .unwrap()
        .captures(&dom)
        .unwrap_or_else(|| {
            panic!(
                "no measure in the DOM: {}",
                String::from_utf8_lossy(&out.stderr)
            )
        });
    (
        m[1].parse().unwrap(),
        m[2].parse().unwrap(),
        m[3].parse().unwrap(),
    )
}

#[test]
fn a_long_unbroken_name_or_detail_stays_within_the_window_in_chromium() {
    let Some(browser) = chromium() else {
        if std::env::var_os("TRIAGE_REQUIRE_CHROMIUM").is_some() {
            panic!("TRIAGE_REQUIRE_CHROMIUM is set but chromium is not installed");
        }
        eprintln!("skipped: chromium is not installed (.ci/run installs Debian's chromium)");
        return;
    };
    // One 300-character token as an agent's name, a detail, a kind and a session (the scope
    // of a crossed threshold), beside ordinary records.
    let token = "A".repeat(300);
    let s = Sandbox::new();
    std::fs::create_dir_all(s.root().join("logs")).unwrap();
    let mut log = String::new();
    for i in 0..8 {
        let long = i % 2 == 0;
        let line = serde_json::json!({
            "error_id": format!("err-20260204T14{i:02}00000Z-{i:06}"),
            "timestamp": format!("2026-02-04T14:{i:02}:00Z"),
            "session_id": if long { token.clone() } else { "s1".into() },
            "agent": if long { token.clone() } else { "researcher".into() },
            "kind": if i == 0 { token.clone() } else { "timeout".into() },
            "detail": if long { token.clone() } else { "the search API did not answer".into() },
            "duration_ms": 1500 + i,
        });
        log.push_str(&format!("{line}\n"));
    }
    std::fs::write(s.root().join("logs/errors.jsonl"), log).unwrap();
    let html = page(&s, &[]);
    assert!(html.contains(&token), "the whole token is on the page");
    let (scroll, inner, id_lines) = measure(&browser, &html, s.path(), 1280);
    assert_eq!(inner, 1280.0, "the window is 1280 px wide");
    assert!(
        scroll <= 1.1 * inner,
        "the page is {scroll} px wide in a {inner} px window"
    );
    assert_eq!(id_lines, 1, "an error id stays on one line");
}

// ---------------------------------------------------------------------------------------------
// The operator's view: every open period visible at any range.

/// A log over three days (160 records, 27 min apart) and breakers that opened for seconds:
/// `search-api` twice (30 s; 45 s then 5 s half-open), `db` forced open for 10 s, `flappy`
/// 40 times in an hour, and `researcher` open now.
fn three_days() -> Sandbox {
    let s = Sandbox::new();
    std::fs::create_dir_all(s.root().join("logs")).unwrap();
    std::fs::write(
        s.root().join("logs/errors.jsonl"),
        crate::text_output::fixture_log(160),
    )
    .unwrap();
    let mut events = String::new();
    let mut e = |key: &str, to: &str, at: String| {
        events.push_str(
            &serde_json::json!({"key": key, "from": "x", "to": to, "at": at, "reason": "r",
                "generation": 1})
            .to_string(),
        );
        events.push('\n');
    };
    e("search-api", "open", "2026-02-01T16:00:00Z".into());
    e("search-api", "closed", "2026-02-01T16:00:30Z".into());
    e("search-api", "open", "2026-02-03T08:00:00Z".into());
    e("search-api", "half_open", "2026-02-03T08:00:45Z".into());
    e("search-api", "closed", "2026-02-03T08:00:50Z".into());
    e("db", "forced_open", "2026-02-03T20:00:00Z".into());
    e("db", "closed", "2026-02-03T20:00:10Z".into());
    for i in 0..40 {
        e("flappy", "open", format!("2026-02-02T09:{i:02}:00Z"));
        e("flappy", "closed", format!("2026-02-02T09:{i:02}:05Z"));
    }
    e("researcher", "open", "2026-02-04T14:59:30Z".into());
    std::fs::write(s.root().join("logs/breaker-events.jsonl"), events).unwrap();
    s
}

/// The bands of the breaker timeline: (class, x, width, title).
fn lane_rects(html: &str) -> Vec<(String, f64, f64, String)> {
    let svg = html
        .split("id=\"breaker-lanes\"")
        .nth(1)
        .and_then(|r| r.split("</svg>").next())
        .unwrap();
    Regex::new(r#"<rect class="([^"]+)" x="([\d.]+)" y="[\d.]+" width="([\d.]+)" height="[\d.]+"><title>([^<]*)</title>"#)
        .unwrap()
        .captures_iter(svg)
        .map(|c| {
            (
                c[1].to_string(),
                c[2].parse().unwrap(),
                c[3].parse().unwrap(),
                c[4].to_string(),
            )
        })
        .collect()
}

#[test]
fn every_open_period_of_three_days_is_drawn_at_least_three_units_wide_and_listed() {
    let s = three_days();
    let html = page(&s, &[]);
    let rects = lane_rects(&html);
    let not_closed: Vec<&(String, f64, f64, String)> =
        rects.iter().filter(|r| r.0 != "s-closed").collect();
    for r in &not_closed {
        assert!(r.2 >= 3.0, "a band {} units wide: {r:?}", r.2);
        assert!(r.1 + r.2 <= 792.01, "inside the drawing: {r:?}");
    }
    let of = |key: &str| {
        not_closed
            .iter()
            .filter(|r| r.3.starts_with(&format!("{key}: ")))
            .count()
    };
    // search-api's two outages (the second's open and half-open touch: one band), db's
    // forced 10 s, researcher's open now; flappy's 40 periods share a few bands.
    assert_eq!(of("search-api"), 2, "{not_closed:?}");
    assert_eq!(of("db"), 1);
    assert_eq!(of("researcher"), 1);
    assert!((1..=40).contains(&of("flappy")));
    assert!(not_closed
        .iter()
        .any(|r| r.0 == "s-forced_open" && r.3.starts_with("db: forced-open")));
    // The list beside: every period with its key, opened, closed or still open, how long,
    // forced or not.
    let table = html
        .split("<table id=\"outages\">")
        .nth(1)
        .and_then(|r| r.split("</table>").next())
        .unwrap();
    assert!(table.contains("Open periods (44)"), "{table}");
    let rows: Vec<&str> = table.split("<tr>").skip(2).collect();
    assert!(rows[0].contains("researcher") && rows[0].contains("still open"));
    assert!(rows.iter().any(|r| r.contains("<code>db</code>")
        && r.contains("2026-02-03 20:00")
        && r.contains(">10s<")
        && r.contains("forced")));
    assert!(rows.iter().any(|r| r.contains("<code>search-api</code>")
        && r.contains("2026-02-01 16:00")
        && r.contains(">30s<")
        && r.contains(">no<")));
    assert!(rows.iter().any(|r| r.contains("<code>search-api</code>")
        && r.contains("2026-02-03 08:00")
        && r.contains(">50s<")));
    // A range narrows the timeline: the same 10 s in the last day's range is wider still.
    let day = page(&s, &["--since", "1d"]);
    let db = lane_rects(&day)
        .into_iter()
        .find(|r| r.3.starts_with("db: forced-open"))
        .unwrap();
    assert!(db.2 >= 3.0 && db.1 > 180.0, "{db:?}");
}

/// Lays `page` out in Chromium `width` px wide with one inline script allowed, and returns
/// what the script `js` wrote into `#measured`.
fn measure_js(browser: &Path, page: &str, dir: &Path, width: u32, js: &str) -> String {
    let page = page
        .replacen(
            "default-src 'none'",
            "default-src 'none'; script-src 'unsafe-inline'",
            1,
        )
        .replacen(
            "</body>",
            &format!("<script>var m = document.createElement('pre'); m.id = 'measured'; m.textContent = 'MEA' + 'SURED[' + ({js}) + ']END'; document.body.appendChild(m);</script></body>"),
            1,
        );
    let file = dir.join("measure-js.html");
    std::fs::write(&file, page).unwrap();
    let profile = tempfile::tempdir().unwrap();
    let out = Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg(format!("--window-size={width},900"))
        .arg("--dump-dom")
        .arg(format!("file://{}", file.display()))
        .output()
        .unwrap();
    let dom = String::from_utf8_lossy(&out.stdout);
    Regex::new(r"MEASURED\[(.*?)\]END")
        .unwrap()
        .captures(&dom)
        .unwrap_or_else(|| panic!("no measure: {}", String::from_utf8_lossy(&out.stderr)))[1]
        .to_string()
}

#[test]
fn every_open_period_of_three_days_is_visible_at_1280_px_in_chromium() {
    let Some(browser) = chromium() else {
        crate::common::skip("chromium is not installed", "TRIAGE_REQUIRE_CHROMIUM");
        return;
    };
    let s = three_days();
    let html = page(&s, &[]);
    let expected = lane_rects(&html)
        .iter()
        .filter(|r| r.0 != "s-closed")
        .count();
    assert!(expected >= 5, "search-api ×2, db, researcher, flappy");
    let widths = measure_js(
        &browser,
        &html,
        s.path(),
        1280,
        "Array.from(document.querySelectorAll('#breaker-lanes rect:not(.s-closed)')).map(function (r) { var b = r.getBoundingClientRect(); return b.width.toFixed(2) + '@' + b.left.toFixed(1); }).join(' ')",
    );
    let drawn: Vec<(f64, f64)> = widths
        .split_whitespace()
        .map(|w| {
            let (w, x) = w.split_once('@').unwrap();
            (w.parse().unwrap(), x.parse().unwrap())
        })
        .collect();
    assert_eq!(drawn.len(), expected, "{widths}");
    for (w, x) in &drawn {
        assert!(*w >= 3.0, "an open period {w} px wide at x {x}: {widths}");
        assert!(*x >= 0.0 && x + w <= 1280.0, "{widths}");
    }
    // The groups' first and last seen are on the page as the browser lays it out.
    let groups = measure_js(
        &browser,
        &html,
        s.path(),
        1280,
        "Array.from(document.querySelectorAll('#groups tbody tr')).filter(function (r) { return r.getBoundingClientRect().height > 0; }).map(function (r) { return r.querySelector('.first').textContent + '|' + r.querySelector('.last').textContent; }).join(';')",
    );
    let rows: Vec<&str> = groups.split(';').filter(|r| !r.is_empty()).collect();
    assert_eq!(rows.len(), 5, "{groups}");
    let stamp = Regex::new(r"^\d{4}-\d\d-\d\d \d\d:\d\d\|\d{4}-\d\d-\d\d \d\d:\d\d$").unwrap();
    for r in rows {
        assert!(stamp.is_match(r), "{r}");
    }
}

/// The to-do list: one group per signature with its first and last seen (as the log says),
/// count, agents and sessions, trend, triage's advice for the kind and the commands that act
/// on it; a group whose agent's breaker is not closed comes first, with `breaker reset`.
#[test]
fn failures_are_grouped_with_first_last_seen_advice_and_commands() {
    let s = fixture();
    let html = page(&s, &[]);
    let table = html
        .split("<table class=\"groups\">")
        .nth(1)
        .and_then(|r| r.split("</table>").next())
        .unwrap();
    let rows: Vec<&str> = table.split("<tr class=").skip(1).collect();
    assert_eq!(rows.len(), 5, "five kinds, one message each: {table}");
    // By hand: the first and last timeout of the fixture's log.
    let times: Vec<String> = crate::text_output::fixture_log(60)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["kind"] == "timeout")
        .map(|v| v["timestamp"].as_str().unwrap().to_string())
        .collect();
    let fmt = |t: &str| {
        chrono::DateTime::parse_from_rfc3339(t)
            .unwrap()
            .format("%Y-%m-%d %H:%M")
            .to_string()
    };
    let first = fmt(times.iter().min().unwrap());
    let last = fmt(times.iter().max().unwrap());
    let top = rows[0];
    assert!(
        top.contains("<b>timeout</b>"),
        "the forced-open agent's first: {top}"
    );
    assert!(
        top.contains(&format!("<td class=\"nw first\">{first}</td>")),
        "{top}"
    );
    assert!(
        top.contains(&format!("<td class=\"nw last\">{last}</td>")),
        "{top}"
    );
    assert!(top.contains(&format!("<td class=\"n\">{}</td>", times.len())));
    assert!(top.contains("1: statistician-consultant"));
    assert!(
        top.contains("Retry with a longer timeout"),
        "classify's advice: {top}"
    );
    assert!(top.contains("triage breaker reset statistician-consultant"));
    assert!(top.contains("triage errors --kind timeout --agent statistician-consultant --since"));
    // Numbers in messages are blanked into one signature.
    assert!(top.contains("Agent exceeded # minute timeout"), "{top}");
    assert!(rows
        .iter()
        .all(|r| r.contains("class=\"spark\"") && r.contains(" in 24 h, ")));
    // researcher's breaker is open too: its group comes before the others with no breaker.
    let researcher = rows
        .iter()
        .position(|r| r.contains("1: researcher"))
        .unwrap();
    assert_eq!(researcher, 1, "{table}");
}

/// Durations: one chart, a panel per agent on one scale, each with its timeout marked —
/// not a chart per agent.
#[test]
fn durations_are_one_chart_of_small_multiples() {
    let s = fixture();
    let html = page(&s, &[]);
    let section = html
        .split("<section id=\"durations\"")
        .nth(1)
        .and_then(|r| r.split("</section>").next())
        .unwrap();
    assert_eq!(section.matches("<svg ").count(), 1, "{section}");
    assert_eq!(section.matches("class=\"panel\"").count(), 5);
    // The two agents with a timeout in the policy have their marker.
    assert_eq!(section.matches("class=\"marker\"").count(), 2);
    assert!(section.contains("timeout 5m") && section.contains("timeout 3m"));
    // One scale: the y label of every panel is the same maximum.
    let maxima: std::collections::BTreeSet<&str> = Regex::new(r#"text-anchor="end">(\d+)</text>"#)
        .unwrap()
        .captures_iter(section)
        .map(|c| c.get(1).unwrap().as_str())
        .collect();
    assert_eq!(maxima.len(), 1, "{maxima:?}");
}

/// The permits and budgets section as the browser lays it out: a busy key's row and a spent
/// budget's row carry the attention border that other rows do not, and a 200-character key
/// keeps the page within a 1280 px window.
#[test]
fn a_busy_permit_and_a_spent_budget_are_marked_in_chromium() {
    let Some(browser) = chromium() else {
        crate::common::skip("chromium is not installed", "TRIAGE_REQUIRE_CHROMIUM");
        return;
    };
    let s = Sandbox::new();
    let long = "k".repeat(200);
    s.write(
        ".triage.toml",
        format!("[permits.api]\nmax = 1\n[permits.{long}]\nmax = 4\n[budget.api]\nmax_tokens = 2\n[budget.ok]\nmax_tokens = 9\n"),
    );
    s.triage(["permit", "acquire", "api"])
        .env("TRIAGE_NOW", NOW)
        .run()
        .status(0);
    s.triage(["budget", "record", "api", "--outcome", "failure"])
        .env("TRIAGE_NOW", NOW)
        .run()
        .status(0);
    let html = page(&s, &[]);
    let got = measure_js(
        &browser,
        &html,
        s.path(),
        1280,
        "Array.from(document.querySelectorAll('#admission tbody tr')).map(function (r) { return r.querySelector('code').textContent.slice(0, 5) + '=' + getComputedStyle(r.firstElementChild).borderLeftWidth; }).join(' ') + ' scroll=' + document.documentElement.scrollWidth",
    );
    let marked: BTreeMap<&str, &str> = got
        .split_whitespace()
        .filter_map(|w| w.split_once('='))
        .collect();
    assert_eq!(
        marked
            .get("scroll")
            .map(|w| w.parse::<f64>().unwrap() <= 1280.0 * 1.1),
        Some(true),
        "{got}"
    );
    let rows: Vec<&str> = got
        .split_whitespace()
        .filter(|w| !w.starts_with("scroll="))
        .collect();
    assert_eq!(
        rows,
        ["api=4px", "kkkkk=0px", "api=4px", "ok=0px"],
        "permits api (busy), the long key; budgets api (spent), ok: {got}"
    );
}

/// `report --html > r.html`, as a person types it: with no FILE the page goes to stdout, the
/// same page `--html -` gives.
#[test]
fn html_with_no_file_writes_the_page_to_stdout() {
    let s = Sandbox::new();
    let bare = s.triage(["report", "--html"]).run().status(0).stdout();
    assert!(bare.starts_with("<!DOCTYPE html>"), "{bare}");
    let dash = s.triage(["report", "--html", "-"]).run().status(0).stdout();
    assert_eq!(bare.len(), dash.len());
}
