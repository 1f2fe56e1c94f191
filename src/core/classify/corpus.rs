//! The breadth test: real error texts from public issue threads (tests/data/real_errors.toml),
//! each with the kinds a careful reader would accept. The table of [`super::cases`] pins exact
//! answers; this one measures how often the classifier gives an acceptable one, prints the
//! figure, and requires at least 97 %.

use super::*;
use serde_json::json;

#[derive(Deserialize)]
struct Corpus {
    case: Vec<Case>,
}

#[derive(Deserialize)]
struct Case {
    source: String,
    accept: Vec<String>,
    text: String,
    #[serde(default)]
    tool: Option<String>,
}

const DATA: &str = include_str!("../../../tests/data/real_errors.toml");

fn corpus() -> Vec<Case> {
    toml::from_str::<Corpus>(DATA)
        .expect("tests/data/real_errors.toml parses")
        .case
}

/// The input a case stands for: the text alone, or Claude Code's PostToolUseFailure payload.
fn input(c: &Case) -> Value {
    let text = c.text.trim_end_matches('\n');
    match &c.tool {
        Some(tool) => json!({"hook_event_name": "PostToolUseFailure", "tool_name": tool,
            "tool_input": {}, "error": text}),
        None => Value::String(text.to_string()),
    }
}

#[test]
fn the_corpus_is_well_formed() {
    let cases = corpus();
    assert!(cases.len() >= 250, "only {} cases", cases.len());
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
    }
}

#[test]
fn real_errors_get_an_acceptable_kind() {
    let cases = corpus();
    let mut wrong = Vec::new();
    for c in &cases {
        let e = classify(&input(c), &Overrides::default(), &Policy::default(), 1);
        if !c.accept.iter().any(|k| k == e.kind.as_str()) {
            let first = c.text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
            wrong.push(format!(
                "  {} by {} (accept {}): {} — {}",
                e.kind,
                e.matched_rule,
                c.accept.join("|"),
                first.chars().take(90).collect::<String>(),
                c.source
            ));
        }
    }
    let ok = cases.len() - wrong.len();
    let pct = 100.0 * ok as f64 / cases.len() as f64;
    println!(
        "real error corpus: {ok} of {} acceptable ({pct:.1} %)",
        cases.len()
    );
    for w in &wrong {
        println!("{w}");
    }
    assert!(
        pct >= 97.0,
        "{pct:.1} % acceptable, below 97 %; not acceptable:\n{}",
        wrong.join("\n")
    );
}
