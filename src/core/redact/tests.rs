//! The redactor against the credential corpus (`tests/data/credentials.txt`), the project's
//! error corpora (no false redaction), and its own edge cases.

use super::*;
use serde::Deserialize;
use serde_json::json;

/// One sample of the corpus: its kind, the rule it follows, the secret, and the text around.
pub(crate) struct Sample {
    pub kind: String,
    pub source: String,
    pub secret: String,
    pub text: String,
}

pub(crate) fn samples() -> Vec<Sample> {
    let corpus = include_str!("../../../tests/data/credentials.txt");
    corpus
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            assert_eq!(f.len(), 4, "a corpus line has 4 fields: {l}");
            let text = f[3]
                .replace("{{", "\u{1}")
                .replace("}}", "\u{2}")
                .replace("{}", f[2])
                .replace('\u{1}', "{")
                .replace('\u{2}', "}")
                .replace("\\n", "\n");
            Sample {
                kind: f[0].into(),
                source: f[1].into(),
                secret: f[2].into(),
                text,
            }
        })
        .collect()
}

#[test]
fn every_credential_of_the_corpus_becomes_a_marker_of_its_kind() {
    let all = samples();
    assert!(all.len() >= 50, "{} samples", all.len());
    for s in &all {
        assert!(
            s.source.starts_with("gitleaks ") || s.source.starts_with("trufflehog "),
            "{}: the sample names its source rule",
            s.secret
        );
        assert!(s.text.contains(&s.secret));
        let out = redact(&s.text);
        assert!(!out.contains(&s.secret), "{} kept in {out:?}", s.kind);
        if s.kind == "keyword" {
            assert!(out.contains("[redacted "), "{out}");
        } else {
            assert!(
                out.contains(&marker(&s.kind)),
                "{}: {out:?} lacks {}",
                s.kind,
                marker(&s.kind)
            );
        }
        assert_eq!(redact(&out), out, "redacting twice changes nothing");
    }
}

#[test]
fn redaction_keeps_the_words_around_the_secret() {
    assert_eq!(
        redact("export DB_PASSWORD=FAKEhunter22 && make"),
        "export DB_PASSWORD=[redacted password] && make"
    );
    assert_eq!(
        redact("psql postgres://app:FAKEpw99@db:5432/x failed"),
        "psql postgres://app:[redacted url-password]@db:5432/x failed"
    );
    assert_eq!(
        redact("HTTP 401: Authorization: Bearer FAKEabcdef0123456789 rejected"),
        "HTTP 401: Authorization: Bearer [redacted authorization] rejected"
    );
    assert_eq!(
        redact(r#"{"password": "FAKEpw-2024"}"#),
        r#"{"password": "[redacted password]"}"#
    );
}

#[test]
fn ordinary_error_text_is_left_alone() {
    for text in [
        "SyntaxError: Unexpected token: identifier",
        "error: expected token `;`, found `}`",
        "task-runner-2024-build failed",
        "Asia/Tokyo is not a valid zone",
        "see https://docs.example.com/errors#auth",
        "git@github.com:acme/app.git: Permission denied (publickey)",
        "password authentication failed for user \"app\"",
        "max_tokens: 4096 exceeds the limit",
        "Secret: my-db-secret not found in namespace default",
        "token: null",
        "password: ********",
        "api_key=${API_KEY}",
        "risk-assessment-module-v2 crashed",
        "disk-usage-3 is full",
        "https://user@example.com/path is unreachable",
        "http://localhost:8080/api@v2 returned 500",
    ] {
        assert_eq!(redact(text), text, "changed");
    }
}

#[derive(Deserialize)]
struct Corpus {
    case: Vec<Case>,
}

#[derive(Deserialize)]
struct Case {
    text: String,
    #[serde(default)]
    command: Option<String>,
}

/// The project's error corpora hold real, public error texts: none is a credential, so the
/// redactor must change none of them, with the exceptions listed (each a credential-shaped
/// value in a public text, changed on purpose).
#[test]
fn the_error_corpora_are_not_redacted() {
    let mut touched = Vec::new();
    let mut total = 0;
    for corpus in [
        include_str!("../../../tests/data/real_errors.toml"),
        include_str!("../../../tests/data/real_errors_2026.toml"),
    ] {
        let c: Corpus = toml::from_str(corpus).unwrap();
        for case in c.case {
            for text in std::iter::once(case.text).chain(case.command) {
                total += 1;
                if let Cow::Owned(r) = redact(&text) {
                    touched.push(r);
                }
            }
        }
    }
    eprintln!(
        "error corpora: {} of {total} texts touched by the redactor",
        touched.len()
    );
    for t in &touched {
        eprintln!("  touched: {t}");
    }
    assert!(total > 400, "{total}");
    assert!(touched.is_empty(), "{touched:#?}");
}

#[test]
fn a_policy_adds_shapes_and_names_fields_never_kept() {
    let r = Redactor::new(
        [
            ("acme-key", r"acme_[0-9a-f]{16}"),
            ("pin", r"PIN (?P<secret>\d{4,})"),
        ],
        ["session_cookie"],
    );
    assert_eq!(
        r.text("call with acme_0123456789abcdef and PIN 98765"),
        "call with [redacted acme-key] and PIN [redacted pin]"
    );
    let mut v = json!({"tool_input": {"command": "curl -u x", "session_cookie": "abc",
        "headers": {"Authorization": "Basic FAKEdXNlcjpwYXNz", "x-api-key": "k1"}},
        "tool_response": ["password=FAKEpw1234"], "n": 3});
    r.value(&mut v);
    assert_eq!(
        v,
        json!({"tool_input": {"command": "curl -u x", "session_cookie": "[redacted session-cookie]",
            "headers": {"Authorization": "[redacted authorization]", "x-api-key": "[redacted x-api-key]"}},
            "tool_response": ["password=[redacted password]"], "n": 3})
    );
}

#[test]
fn text_without_a_trigger_is_borrowed() {
    assert!(matches!(
        redact("plain error: file not found"),
        Cow::Borrowed(_)
    ));
    assert!(matches!(redact(""), Cow::Borrowed(_)));
}

#[test]
fn every_shape_compiles() {
    for (i, s) in SHAPES.iter().enumerate() {
        assert!(shape_regex(i).is_some(), "{}: {}", s.kind, s.pattern);
    }
    assert!(SHAPES.len() < 64, "one bit per shape");
}

#[test]
fn the_prefilter_knows_each_shape_by_its_place() {
    for (i, kind) in [
        (PRIVATE_KEY, "private-key"),
        (ANTHROPIC, "anthropic-api-key"),
        (OPENAI, "openai-api-key"),
        (STRIPE, "stripe-key"),
        (AWS_KEY_ID, "aws-access-key"),
        (AWS_SECRET, "aws-secret-key"),
        (GITHUB, "github-token"),
        (GITHUB_PAT, "github-token"),
        (GITLAB, "gitlab-token"),
        (SLACK, "slack-token"),
        (GOOGLE, "google-api-key"),
        (JWT, "jwt"),
        (AUTHORIZATION, "authorization"),
        (BEARER, "bearer-token"),
        (URL_PASSWORD, "url-password"),
        (KEYWORD, "password"),
        (FLAG, "password"),
    ] {
        assert_eq!(SHAPES[i].kind, kind);
    }
    assert_eq!(SHAPES.len(), FLAG + 1);
}

/// Ordinary payload text (ids, paths, prose, JSON) calls for no regex at all.
#[test]
fn the_prefilter_passes_ordinary_text_without_a_regex() {
    for text in [
        "Review the literature on oxygen-permeable membranes published since 2015.",
        "/home/user/.claude/projects/bench/bench-session-0001.jsonl",
        "toolu_01A8bench0000000000000002",
        "error[E0308]: mismatched types: expected `u32`, found `i64` at src/main.rs:12:5",
        "npm ERR! code ERESOLVE; see https://docs.npmjs.com/cli for details",
    ] {
        assert_eq!(candidates(text), 0, "{text}");
    }
}
