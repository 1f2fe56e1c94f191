//! The breadth test: real error texts from public issue threads, each with the kinds a careful
//! reader would accept. `tests/data/real_errors.toml` holds the texts the rules were first
//! written from; `tests/data/real_errors_2026.toml` the families a held-out sample showed
//! short (billing, the client's denials, hooks, dependency resolution, checks, locks, hangs,
//! stream breaks …) and ordinary work failures, each also marked `work` or `trouble`. The
//! table of [`super::cases`] pins exact answers; this one measures how often the classifier
//! gives an acceptable one, prints the figures (per file and per family of the new texts), and
//! requires at least 97 % of all of them. It also checks the work/trouble line ([`class_of`])
//! on every text that says its class.

use super::*;
use crate::core::vocab::{Class, Family};
use serde_json::json;

#[derive(Deserialize)]
struct Corpus {
    case: Vec<Case>,
}

#[derive(Deserialize)]
pub(super) struct Case {
    pub(super) source: String,
    pub(super) accept: Vec<String>,
    text: String,
    #[serde(default)]
    tool: Option<String>,
    /// The Bash command the text is the failure of (the hook payload's `tool_input.command`).
    #[serde(default)]
    command: Option<String>,
    /// `work` or `trouble`, where the case says.
    #[serde(default)]
    class: Option<String>,
    /// For a trouble text from one of the work families (a test runner that crashed, a
    /// compiler the OOM killer ended): that family, so each family is tested both ways.
    #[serde(default)]
    family: Option<String>,
    /// The `# --- …` section the case is in (set while reading, not a field of the file).
    #[serde(skip)]
    section: String,
}

const FILES: [(&str, &str); 2] = [
    (
        "real_errors.toml",
        include_str!("../../../tests/data/real_errors.toml"),
    ),
    (
        "real_errors_2026.toml",
        include_str!("../../../tests/data/real_errors_2026.toml"),
    ),
];

/// The cases of one file, each with the `# --- …` section it is in.
pub(super) fn cases(data: &str) -> Vec<Case> {
    let mut cases = toml::from_str::<Corpus>(data)
        .expect("the corpus parses")
        .case;
    let mut sections = Vec::new();
    let mut section = String::new();
    for line in data.lines() {
        if let Some(title) = line.strip_prefix("# --- ") {
            section = title.trim_end_matches(['-', ' ']).to_string();
        }
        if line.trim() == "[[case]]" {
            sections.push(section.clone());
        }
    }
    assert_eq!(sections.len(), cases.len(), "a [[case]] line per case");
    for (c, s) in cases.iter_mut().zip(sections) {
        c.section = s;
    }
    cases
}

fn all() -> Vec<(&'static str, Case)> {
    FILES
        .iter()
        .flat_map(|(name, data)| cases(data).into_iter().map(move |c| (*name, c)))
        .collect()
}

/// The input a case stands for: the text alone, or Claude Code's PostToolUseFailure payload.
pub(super) fn input(c: &Case) -> Value {
    let text = c.text.trim_end_matches('\n');
    match &c.tool {
        Some(tool) => {
            let mut tool_input = json!({});
            if let Some(cmd) = &c.command {
                tool_input["command"] = Value::from(cmd.as_str());
            }
            json!({"hook_event_name": "PostToolUseFailure", "tool_name": tool,
                "tool_input": tool_input, "error": text})
        }
        None => Value::String(text.to_string()),
    }
}

fn run(c: &Case) -> ErrorObject {
    classify(&input(c), &Overrides::default(), &Policy::default(), 1)
}

/// [`run`] with the learned fallback on.
fn run_with_model(c: &Case) -> ErrorObject {
    let o = Overrides {
        model_fallback: true,
        ..Overrides::default()
    };
    classify(&input(c), &o, &Policy::default(), 1)
}

fn first_line(c: &Case) -> String {
    let first = c.text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
    first.chars().take(90).collect()
}

#[test]
fn the_corpus_is_well_formed() {
    for (name, data) in FILES {
        let cases = cases(data);
        let least = if name == "real_errors.toml" { 250 } else { 100 };
        assert!(cases.len() >= least, "{name}: only {} cases", cases.len());
        for c in &cases {
            assert!(
                c.source.starts_with("https://"),
                "a case needs the address it was quoted from: {}",
                c.source
            );
            assert!(!c.text.trim().is_empty(), "{}", c.source);
            assert!(!c.accept.is_empty(), "{}", c.source);
            for k in &c.accept {
                assert!(k.parse::<Kind>().is_ok(), "{}: unknown kind {k}", c.source);
            }
            if let Some(class) = &c.class {
                assert!(class.parse::<Class>().is_ok(), "{}: {class}", c.source);
            }
            if let Some(f) = &c.family {
                assert!(f.parse::<Family>().is_ok(), "{}: {f}", c.source);
            }
            assert!(
                c.command.is_none() || c.tool.is_some(),
                "{}: a command needs its tool",
                c.source
            );
        }
    }
    // Every text of the 2026 file says its class.
    assert!(cases(FILES[1].1).iter().all(|c| c.class.is_some()));
}

#[test]
fn real_errors_get_an_acceptable_kind() {
    let mut wrong = Vec::new();
    // Per file, and per section of the 2026 file: (acceptable, all).
    let mut per_file = std::collections::BTreeMap::<&str, (usize, usize)>::new();
    let mut per_section = Vec::<(String, usize, usize)>::new();
    for (name, c) in all() {
        let e = run(&c);
        let ok = c.accept.iter().any(|k| k == e.kind.as_str());
        let f = per_file.entry(name).or_default();
        f.1 += 1;
        f.0 += usize::from(ok);
        if name == FILES[1].0 {
            match per_section.last_mut() {
                Some((s, good, n)) if *s == c.section => {
                    *good += usize::from(ok);
                    *n += 1;
                }
                _ => per_section.push((c.section.clone(), usize::from(ok), 1)),
            }
        }
        if !ok {
            wrong.push(format!(
                "  {} by {} (accept {}): {} — {}",
                e.kind,
                e.matched_rule,
                c.accept.join("|"),
                first_line(&c),
                c.source
            ));
        }
    }
    let pct = |ok: usize, n: usize| 100.0 * ok as f64 / n.max(1) as f64;
    for (name, (ok, n)) in &per_file {
        println!("{name}: {ok} of {n} acceptable ({:.1} %)", pct(*ok, *n));
    }
    for (section, ok, n) in &per_section {
        println!("  {ok:3} of {n:3}  {section}");
    }
    let (ok, n) = per_file
        .values()
        .fold((0, 0), |(a, b), (ok, n)| (a + ok, b + n));
    let all = pct(ok, n);
    println!("real error corpus: {ok} of {n} acceptable ({all:.1} %)");
    for w in &wrong {
        println!("{w}");
    }
    assert!(
        all >= 97.0,
        "{all:.1} % acceptable, below 97 %; not acceptable:\n{}",
        wrong.join("\n")
    );
}

/// The work/trouble line on real texts: each text that says its class gets it (from the kind
/// the classifier gives and the tool that failed, [`class_of`]); every family of the table is
/// met both ways (a work text, and a trouble text from the same kind of command: a test runner
/// that crashed, a compiler the OOM killer ended). Where the kind is the one the case aims for
/// (its first `accept`), the class must be right; where it is only an acceptable second
/// choice, the kind may carry the other class (a hook's output that is not JSON, read without
/// the hook around it, is an `invalid_input` the agent would own), and the figure counts it.
#[test]
fn real_texts_fall_on_the_right_side_of_the_work_trouble_line() {
    let mut wrong = Vec::new();
    let mut second_choice = Vec::new();
    let mut checked = 0;
    let mut work = std::collections::BTreeMap::<Family, usize>::new();
    let mut trouble = std::collections::BTreeMap::<Family, usize>::new();
    for (_, c) in all() {
        let Some(want) = c.class.as_deref().and_then(|s| s.parse::<Class>().ok()) else {
            continue;
        };
        checked += 1;
        let e = run(&c);
        let family = family_of(e.kind, c.tool.as_deref());
        match want {
            Class::Work => *work.entry(family).or_default() += 1,
            Class::Trouble => {
                let named = c.family.as_deref().and_then(|f| f.parse::<Family>().ok());
                *trouble.entry(named.unwrap_or(family)).or_default() += 1;
            }
        }
        if e.class != want {
            let line = format!(
                "  {} ({}, by {}) for a {want} text: {} — {}",
                e.class,
                e.kind,
                e.matched_rule,
                first_line(&c),
                c.source
            );
            if c.accept.first().map(String::as_str) == Some(e.kind.as_str()) {
                wrong.push(line);
            } else {
                second_choice.push(line);
            }
        }
    }
    let right = checked - wrong.len() - second_choice.len();
    println!("work/trouble line: {right} of {checked} right");
    for f in Family::ALL {
        println!(
            "  {:<13} work {:3}  trouble {:3}",
            f.as_str(),
            work.get(f).unwrap_or(&0),
            trouble.get(f).unwrap_or(&0)
        );
    }
    for w in &second_choice {
        println!("{w}");
    }
    assert!(checked >= 150, "only {checked} texts say their class");
    for f in Family::ALL.iter().filter(|f| **f != Family::Other) {
        assert!(work.get(f).is_some_and(|n| *n > 0), "no work text of {f}");
        assert!(
            trouble.get(f).is_some_and(|n| *n > 0),
            "no trouble text of {f}"
        );
    }
    assert!(
        wrong.is_empty(),
        "{} texts on the wrong side with the kind they aim for:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
    assert!(
        100 * right >= 97 * checked,
        "{right} of {checked} texts on the right side, below 97 %"
    );
}

/// The gathered real texts (`real_errors_2026b/c/d.toml`), each file split by source thread
/// before any rule was written from it (`tests/data/holdout/split.py`, `split_many.py`): the
/// training parts the rules may be written from, and the held-out parts in
/// `tests/data/holdout/`.
const SPLIT: [(&str, &str); 6] = [
    (
        "training",
        include_str!("../../../tests/data/real_errors_2026b.toml"),
    ),
    (
        "training",
        include_str!("../../../tests/data/real_errors_2026c.toml"),
    ),
    (
        "training",
        include_str!("../../../tests/data/real_errors_2026d.toml"),
    ),
    (
        "held-out",
        include_str!("../../../tests/data/holdout/real_errors_2026b.toml"),
    ),
    (
        "held-out",
        include_str!("../../../tests/data/holdout/real_errors_2026c.toml"),
    ),
    (
        "held-out",
        include_str!("../../../tests/data/holdout/real_errors_2026d.toml"),
    ),
];

/// (acceptable kinds, right classes, texts) of one part, with the lines of the misses; with
/// `model`, the learned fallback decides what no rule knows.
fn score(data: &str, model: bool) -> (usize, usize, usize, Vec<String>) {
    let (mut kinds, mut classes, mut misses) = (0, 0, Vec::new());
    let cases = cases(data);
    for c in &cases {
        let e = if model { run_with_model(c) } else { run(c) };
        let kind_ok = c.accept.iter().any(|k| k == e.kind.as_str());
        let want = c.class.as_deref().and_then(|s| s.parse::<Class>().ok());
        let class_ok = want == Some(e.class);
        kinds += usize::from(kind_ok);
        classes += usize::from(class_ok);
        if !kind_ok || !class_ok {
            misses.push(format!(
                "  {} {} by {} (accept {}, {}): {} — {}",
                e.kind,
                e.class,
                e.matched_rule,
                c.accept.join("|"),
                c.class.as_deref().unwrap_or("?"),
                first_line(c),
                c.source
            ));
        }
    }
    (kinds, classes, cases.len(), misses)
}

/// The held-out floors: the share of held-out texts whose kind is acceptable, and whose class
/// is right. The rules are written from the training part only; these figures say how they
/// generalize. The bars are 93 % for kinds and 95 % for classes; the floors are the figures
/// reached (so a change that loses ground fails): 71.1 % and 86.4 % of 235 held-out texts when
/// the third and fourth batches were split, 93.2 % and 95.7 % after the rules written from the
/// training part for the families it holds.
const HELD_OUT_KIND_FLOOR: f64 = 93.1;
const HELD_OUT_CLASS_FLOOR: f64 = 95.6;

/// Both figures of each part, rules alone and with the learned fallback; the floors hold for
/// both (the fallback may only add answers, never lose the rules' own).
#[test]
fn held_out_real_errors_get_acceptable_kinds_and_classes() {
    use std::io::Write;
    let pct = |ok: usize, n: usize| 100.0 * ok as f64 / n.max(1) as f64;
    let mut held = Vec::new();
    for part in ["training", "held-out"] {
        for (how, model) in [("rules only", false), ("rules + model", true)] {
            let (mut kinds, mut classes, mut n, mut misses) = (0, 0, 0, Vec::new());
            for (_, data) in SPLIT.iter().filter(|(p, _)| *p == part) {
                let (k, c, m, miss) = score(data, model);
                (kinds, classes, n) = (kinds + k, classes + c, n + m);
                misses.extend(miss);
            }
            // The model was trained on the training part: its figure there is not a measure.
            let note = if model && part == "training" {
                " (in-sample)"
            } else {
                ""
            };
            // Straight to stderr, past the test harness's capture: `cargo test` shows the
            // figures whether the test passes or not.
            let _ = writeln!(
                std::io::stderr(),
                "real errors {part}, {how}{note}: kind {kinds} of {n} acceptable ({:.1} %), class {classes} of {n} right ({:.1} %)",
                pct(kinds, n),
                pct(classes, n)
            );
            // Only the training part's misses are shown (the rules' own): the rules are
            // written from those alone.
            if part == "training" && !model {
                for m in &misses {
                    println!("{m}");
                }
            }
            if part == "held-out" {
                held.push((how, pct(kinds, n), pct(classes, n)));
            }
        }
    }
    for (how, kinds, classes) in held {
        assert!(
            kinds >= HELD_OUT_KIND_FLOOR,
            "held-out kinds ({how}) {kinds:.1} % below {HELD_OUT_KIND_FLOOR} %"
        );
        assert!(
            classes >= HELD_OUT_CLASS_FLOOR,
            "held-out classes ({how}) {classes:.1} % below {HELD_OUT_CLASS_FLOOR} %"
        );
    }
}

#[test]
fn the_split_files_are_well_formed_and_disjoint_by_thread() {
    let mut seen = std::collections::BTreeMap::<String, &str>::new();
    for (part, data) in SPLIT {
        let text: toml::Value = toml::from_str(data).expect("the split file parses");
        let cases = text["case"].as_array().expect("cases");
        for c in cases {
            let thread = c["thread"].as_str().expect("each text names its thread");
            let source = c["source"].as_str().expect("source");
            assert!(source.starts_with("https://"), "{source}");
            assert!(c["class"].as_str().is_some(), "{source}: a class");
            if let Some(other) = seen.insert(thread.to_string(), part) {
                assert_eq!(other, part, "thread {thread} is on both sides");
            }
        }
    }
    assert!(seen.len() >= 800, "only {} threads", seen.len());
}
