//! The learned fallback's behaviour through the classifier (kept apart from `model.rs`, whose
//! changes make the committed weights stale).

use super::*;
use crate::core::classify::{classify, DecidedBy, ErrorObject, Overrides};
use crate::core::policy::Policy;
use crate::core::vocab::Class;
use serde_json::{json, Value};

/// A denial in words no rule is written for (the rules know "does not have permission", not
/// "lacks permission").
const GOOGLE: &str = "Error: the caller lacks permission to write to the bucket";
/// A connect timeout: the rules say `timeout`, the model alone `network_error`.
const ETIMEDOUT: &str =
    "{ [Error: connect ETIMEDOUT] code: 'ETIMEDOUT', errno: 'ETIMEDOUT', syscall: 'connect' }";

fn run(input: Value, model_fallback: bool) -> ErrorObject {
    let o = Overrides {
        model_fallback,
        ..Overrides::default()
    };
    classify(&input, &o, &Policy::default(), 1)
}

#[test]
fn the_model_decides_a_text_no_rule_knows() {
    let rules = run(Value::from(GOOGLE), false);
    assert_eq!(rules.kind, Kind::Unknown);
    assert_eq!(rules.decided_by, DecidedBy::Rule);
    assert_eq!(rules.confidence, None);
    let e = run(Value::from(GOOGLE), true);
    assert_eq!(e.kind, Kind::PermissionDenied);
    assert_eq!(e.class, Class::Trouble);
    assert_eq!(e.decided_by, DecidedBy::Model);
    assert_eq!(e.matched_rule, "model:naive-bayes");
    let c = e.confidence.expect("a confidence");
    assert!(c >= threshold() && c <= 1.0, "{c}");
    // The advice is the kind's own: a denial is not retried.
    assert!(!e.retryable);
    let json = serde_json::to_value(&e).expect("json");
    assert_eq!(json["decided_by"], "model");
    assert_eq!(
        serde_json::to_value(&rules).expect("json")["decided_by"],
        "rule"
    );
}

#[test]
fn the_trace_features_are_the_words_that_weighed_most() {
    let e = run(Value::from(GOOGLE), true);
    assert!(!e.model_features.is_empty() && e.model_features.len() <= TOP_FEATURES);
    assert!(
        e.model_features
            .iter()
            .any(|(f, _)| f.contains("permission")),
        "{:?}",
        e.model_features
    );
    let weights: Vec<f64> = e.model_features.iter().map(|(_, w)| *w).collect();
    assert!(
        weights.windows(2).all(|p| p[0] >= p[1]) && weights[0] > 0.0,
        "{weights:?}"
    );
}

#[test]
fn rules_win_where_they_match() {
    // Every text of the project's corpus a rule decides keeps the rule's answer with the
    // fallback on, whatever the model would say of it alone.
    let corpus: toml::Value =
        toml::from_str(include_str!("../../../../tests/data/real_errors.toml"))
            .expect("the corpus parses");
    let mut decided = 0;
    for case in corpus["case"].as_array().expect("cases") {
        let text = case["text"].as_str().expect("text");
        let rules = run(Value::from(text), false);
        if rules.kind == Kind::Unknown {
            continue;
        }
        decided += 1;
        let both = run(Value::from(text), true);
        assert_eq!(
            (both.kind, both.decided_by),
            (rules.kind, DecidedBy::Rule),
            "{text}"
        );
    }
    assert!(decided > 100, "{decided}");
    let e = run(Value::from(ETIMEDOUT), true);
    assert_eq!(e.kind, Kind::Timeout);
    assert_eq!(e.decided_by, DecidedBy::Rule);
    assert_eq!(e.confidence, None);
    // An input that names its kind, even `unknown`, keeps it.
    let given = json!({"status": "error", "kind": "unknown", "detail": GOOGLE});
    let e = run(given, true);
    assert_eq!((e.kind, e.decided_by), (Kind::Unknown, DecidedBy::Rule));
}

#[test]
fn garbage_stays_unknown_with_the_model_on() {
    for text in [
        "qwzx vbnm plokij uhyg",
        "the quick brown fox jumps over the lazy dog",
    ] {
        let e = run(Value::from(text), true);
        assert_eq!(
            (e.kind, e.decided_by),
            (Kind::Unknown, DecidedBy::Rule),
            "{text}"
        );
    }
}

#[test]
fn the_same_text_always_gets_the_same_answer() {
    let text =
        "ERROR 1213 (40001): Deadlock found when trying to get lock; try restarting transaction";
    let first = predict(text, None, true);
    for _ in 0..3 {
        assert_eq!(predict(text, None, true), first);
    }
    assert!(first.is_some());
    let e = run(Value::from(GOOGLE), true);
    assert_eq!(run(Value::from(GOOGLE), true), e);
}

#[test]
fn garbage_is_never_answered_with_confidence() {
    for text in [
        "",
        "qwzx vbnm plokij uhyg",
        "lorem ipsum dolor sit amet, consectetur adipiscing elit",
        "12345 67890 0xdeadbeef /a/b/c",
        "🙂🙂🙂",
    ] {
        let sure = predict(text, None, false).is_some_and(|a| a.sure);
        assert!(!sure, "{text:?} was answered");
    }
}

#[test]
fn every_known_feature_is_found_in_its_bucket_and_no_other() {
    let w = &weights::model();
    assert!(!w.keys.is_empty());
    for (i, k) in w.keys.iter().enumerate() {
        assert_eq!(lookup(w, *k), Some(i as u32), "{k:#x}");
    }
    let unknown = (0..200_000u32)
        .map(|i| i.wrapping_mul(0x9e37_79b9))
        .filter(|h| w.keys.binary_search(h).is_err());
    for h in unknown.take(1000) {
        assert_eq!(lookup(w, h), None, "{h:#x}");
    }
}
