//! The automata agree with the regexes they were built from: the same tables, the same
//! patterns, and on every text of the corpus and of the classifier's own tables, the same
//! leftmost match start for every rule (and the same first, and earliest-line, rule).

use super::super::rules::{self, facts, TextRule, API_TYPES, GENERIC, SPECIFIC, TOOL_EXIT};
use super::*;
use regex::bytes::{Regex, RegexBuilder};
use std::sync::OnceLock;

/// A built-in pattern compiled as the classifier matched before it had automata: `regex::bytes`
/// without Unicode, multi-line, over ASCII-lowercased text.
pub fn source_regex(pattern: &str) -> Regex {
    RegexBuilder::new(pattern)
        .unicode(false)
        .multi_line(true)
        .build()
        .unwrap()
}

/// One table: its name, its rules' names and patterns, its automaton, and the regexes.
struct Checked {
    name: &'static str,
    src: Vec<(&'static str, &'static str)>,
    table: &'static Table,
    res: Vec<Regex>,
}

/// Every table, with the regexes compiled once.
fn tables() -> &'static [Checked] {
    static T: OnceLock<Vec<Checked>> = OnceLock::new();
    T.get_or_init(|| {
        let rules = |r: &'static [TextRule]| r.iter().map(|r| (r.name, r.pattern)).collect();
        let fact_list = vec![
            ("USAGE_EPOCH", facts::USAGE_EPOCH),
            ("USAGE_CLOCK", facts::USAGE_CLOCK),
            ("EXIT_STATUS", facts::EXIT_STATUS),
            ("HTTP_STATUS", facts::HTTP_STATUS),
            ("HTTP_PHRASE", facts::HTTP_PHRASE),
            ("RETRY_AFTER", facts::RETRY_AFTER),
            ("ERRNO", facts::ERRNO),
        ];
        let one = |name, src: Vec<(&'static str, &'static str)>, table| Checked {
            name,
            res: src.iter().map(|(_, p)| source_regex(p)).collect(),
            src,
            table,
        };
        vec![
            one("SPECIFIC", rules(SPECIFIC), &SPECIFIC_AUTOMATON),
            one("API_TYPES", rules(API_TYPES), &API_TYPES_AUTOMATON),
            one("GENERIC", rules(GENERIC), &GENERIC_AUTOMATON),
            one(
                "TOOL_EXIT",
                rules(std::slice::from_ref(&TOOL_EXIT)),
                &TOOL_EXIT_AUTOMATON,
            ),
            one("FACTS", fact_list, &FACTS),
        ]
    })
}

use super::{
    API_TYPES as API_TYPES_AUTOMATON, GENERIC as GENERIC_AUTOMATON, SPECIFIC as SPECIFIC_AUTOMATON,
    TOOL_EXIT as TOOL_EXIT_AUTOMATON,
};

#[test]
fn the_automata_were_built_from_the_tables_as_they_are() {
    let built: [&[(&str, &str)]; 5] = [
        SPECIFIC_SOURCES,
        API_TYPES_SOURCES,
        GENERIC_SOURCES,
        TOOL_EXIT_SOURCES,
        FACTS_SOURCES,
    ];
    for (t, built) in tables().iter().zip(built) {
        assert_eq!(&t.src[..], built, "{}: rebuilt from another table", t.name);
    }
}

#[test]
fn builtin_patterns_are_written_for_folded_ascii_text() {
    for Checked { name, src, .. } in tables() {
        for (rule, p) in src {
            assert!(
                p.is_ascii(),
                "{name} {rule}: the text is matched ASCII-folded"
            );
            assert_eq!(
                &fold(p),
                p,
                "{name} {rule}: write it in lower case, without (?i)"
            );
        }
    }
    assert_eq!(fold(r"(?i)Foo\S+\d"), r"foo\S+\d");
}

/// Lowercases a pattern's ASCII letters, leaving escapes (`\S`, `\d`, `\b`) alone, and drops
/// `(?i)`: the text it runs on is lowercased instead.
fn fold(pattern: &str) -> String {
    let mut out = String::with_capacity(pattern.len());
    let mut escaped = false;
    for c in pattern.replace("(?i)", "").chars() {
        out.push(if escaped { c } else { c.to_ascii_lowercase() });
        escaped = !escaped && c == '\\';
    }
    out
}

/// Asserts that on `hay` every table gives each rule the leftmost start its regex gives, and
/// the same first rule and earliest-line rule. Called on every text the classifier's unit
/// tests match (see `matching`), and on the corpus below.
pub fn agree(hay: &[u8]) {
    for Checked {
        name,
        src,
        table,
        res,
    } in tables()
    {
        let want: Vec<Option<usize>> = res.iter().map(|r| r.find(hay).map(|m| m.start())).collect();
        let got = table.leftmost_starts(hay);
        for (i, (w, g)) in want.iter().zip(&got).enumerate() {
            assert_eq!(
                w,
                g,
                "{name} rule {}: regex and automaton disagree on {:?}",
                src[i].0,
                String::from_utf8_lossy(hay)
            );
        }
        let first = want.iter().enumerate().find_map(|(i, s)| s.map(|s| (i, s)));
        assert_eq!(table.first(hay), first, "{name} first on {hay:?}");
        let line = |at: usize| {
            hay[..at]
                .iter()
                .rposition(|&b| b == b'\n')
                .map_or(0, |i| i + 1)
        };
        let earliest = want
            .iter()
            .enumerate()
            .filter_map(|(i, s)| s.map(|s| (line(s), i, s)))
            .min()
            .map(|(_, i, s)| (i, s));
        assert_eq!(
            table.earliest_line(hay),
            earliest,
            "{name} earliest line on {hay:?}"
        );
    }
}

#[derive(serde::Deserialize)]
struct Corpus {
    case: Vec<Case>,
}

#[derive(serde::Deserialize)]
struct Case {
    text: String,
}

#[test]
fn the_automata_agree_with_the_regexes_on_the_corpus() {
    let mut cases = Vec::new();
    for data in [
        include_str!("../../../../tests/data/real_errors.toml"),
        include_str!("../../../../tests/data/real_errors_2026.toml"),
    ] {
        cases.extend(toml::from_str::<Corpus>(data).unwrap().case);
    }
    assert!(cases.len() >= 400);
    for c in &cases {
        // As matched: the evidence lowercased, its lines joined, and the raw text lowercased.
        let ev = super::super::matching::Evidence::new(&c.text);
        agree(&ev.lower);
        let joined = super::super::join_wrapped_lines(&ev.text);
        agree(&joined.to_ascii_lowercase().into_bytes());
        agree(&c.text.to_ascii_lowercase().into_bytes());
        // Prefixes and suffixes at the first line breaks (a match cut at the text's ends).
        for (i, _) in c.text.match_indices('\n').take(3) {
            agree(c.text[..i].to_ascii_lowercase().as_bytes());
            agree(c.text[i + 1..].to_ascii_lowercase().as_bytes());
        }
    }
}

#[test]
fn the_automata_agree_at_the_edges() {
    for t in [
        "",
        "\n",
        "killed",
        "killed\n",
        "^c",
        "x\n^c\ny",
        "hook error: something was blocked",
        &format!("hook error {} blocked", "x".repeat(199)),
        &format!("hook error {} blocked", "x".repeat(200)),
        &format!("hook error {} blocked", "x".repeat(201)),
        "hook error\nblocked",
        "the coordinator is unresponsive",
        &format!("coordinator{}unresponsive", " ".repeat(61)),
        &format!("coordinator{}unresponsive", " ".repeat(60)),
        "hook [a] failed",
        &format!("hook [{}] failed", "a".repeat(300)),
        &format!("hook [{}] failed", "a".repeat(301)),
        "task abc not found; agent x9 is not running",
        "exit code 1",
        "exit code 1   \n",
        "error: exit code -3",
        "gate 3 : fail",
        "gate #3-a failed",
        "keyerror: 'x'\ntypeerror: y",
        "5 failed, 2 passed in 1.2s",
        "  3 failing  ",
    ] {
        agree(t.as_bytes());
    }
}

#[test]
fn the_automata_agree_on_pattern_fragments() {
    use proptest::prelude::*;
    use proptest::test_runner::{Config, TestRunner};
    // Pieces of the patterns themselves: literal words cut from them, and separators.
    let mut pieces: Vec<String> = vec![" ".into(), "\n".into(), "x".into(), "1".into(), ":".into()];
    for t in tables() {
        for (_, p) in &t.src {
            for w in p.split(|c: char| !c.is_ascii_alphanumeric() && c != ' ' && c != '_') {
                if w.len() >= 2 {
                    pieces.push(w.to_string());
                }
            }
        }
    }
    let mut runner = TestRunner::new(Config::with_cases(2000));
    runner
        .run(
            &proptest::collection::vec(prop::sample::select(pieces), 0..12),
            |parts| {
                agree(parts.concat().as_bytes());
                Ok(())
            },
        )
        .unwrap();
}

#[test]
fn tables_name_what_they_hold() {
    assert_eq!(SPECIFIC_AUTOMATON.rules(), SPECIFIC.len());
    assert_eq!(GENERIC_AUTOMATON.rules(), GENERIC.len());
    assert_eq!(API_TYPES_AUTOMATON.rules(), API_TYPES.len());
    assert_eq!(FACT_ENDS.len(), FACTS_SOURCES.len());
    let _ = rules::defaults;
}
