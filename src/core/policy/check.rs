//! The checks of a policy's values that its types cannot make, as the runtime would fail
//! them: regexes parse (and, for `config check`, compile within the size limit), jq filters
//! compile (and do not run out of their budget on sample inputs), file globs stay inside the
//! project, ratios are ratios, a rule can match. A bad value is dropped from the policy with
//! a problem naming where it was; everything else stays.

use super::load::{Depth, Doc, Loader, Step};
use super::{regex_error, Policy};
use std::ops::Range;

/// Checks `policy`'s values, dropping each bad one with a problem.
pub(super) fn check_values(policy: &mut Policy, doc: &Doc, depth: Depth, l: &mut Loader) {
    let at = |path: &[Step]| doc.span(path).unwrap_or(0..0);
    let key_at = |path: &[Step]| doc.key_span(path).unwrap_or(0..0);

    // A rule is one unit: a rule whose regex or filter is bad, or that can match nothing, is
    // dropped whole (half a rule would classify wrongly).
    let mut i = 0;
    policy.classify.rules.retain(|rule| {
        let path = |key| {
            [
                Step::Key("classify"),
                Step::Key("rules"),
                Step::At(i),
                Step::Key(key),
            ]
        };
        let name = format!("[[classify.rules]] `{}`", rule.name);
        let mut bad = Vec::new();
        if let Some(p) = &rule.pattern {
            if let Some(why) = regex_error(p, depth) {
                bad.push((
                    at(&path("match")),
                    format!("{name}: bad regex `{p}`: {why}"),
                ));
            }
        }
        if let Some(code) = &rule.jq {
            if let Some(why) = jq_problem(code, depth) {
                bad.push((at(&path("jq")), format!("{name}: jq filter `{code}` {why}")));
            }
        }
        if rule.pattern.is_none() && rule.jq.is_none() {
            bad.push((
                at(&[Step::Key("classify"), Step::Key("rules"), Step::At(i)]),
                format!("{name} needs `match` (a regex) or `jq` (a predicate) to match anything"),
            ));
        }
        i += 1;
        let keep = bad.is_empty();
        for (span, message) in bad {
            l.problem(span, format!("{message}; the whole rule is left out"));
        }
        keep
    });

    for (agent, a) in policy.agents.iter_mut() {
        let o = &mut a.output;
        let base = |field: &'static str| {
            move |i: usize| {
                [
                    Step::Key("agents"),
                    Step::Key(agent.as_str()),
                    Step::Key("output"),
                    Step::Key(field),
                    Step::At(i),
                ]
            }
        };
        let place = |field: &str| format!("agents.{agent}.output.{field}");
        // Each pattern of require_all, forbid, jq and files_exist is a requirement of its own:
        // a bad one is dropped and the others still apply.
        for (field, list) in [
            ("require_all", &mut o.require_all),
            ("forbid", &mut o.forbid),
        ] {
            let path = base(field);
            drop_bad(list, l, |i, p| {
                regex_error(p, depth).map(|why| {
                    (
                        at(&path(i)),
                        format!("{}: bad regex `{p}`: {why}", place(field)),
                    )
                })
            });
        }
        // require_any's patterns are alternatives: without one of them the rest would demand
        // more than was meant, so a bad one drops the whole key.
        if let Some(list) = &o.require_any {
            let bad = list.iter().enumerate().find_map(|(i, p)| {
                regex_error(p, depth).map(|why| (i, format!("bad regex `{p}`: {why}")))
            });
            if let Some((i, why)) = bad {
                l.problem(
                    at(&base("require_any")(i)),
                    format!(
                        "{}: {why}; the whole list is left out (its patterns are alternatives)",
                        place("require_any")
                    ),
                );
                o.require_any = None;
            }
        }
        let path = base("jq");
        drop_bad(&mut o.jq, l, |i, code| {
            jq_problem(code, depth).map(|why| {
                (
                    at(&path(i)),
                    format!("{}: jq filter `{code}` {why}", place("jq")),
                )
            })
        });
        let path = base("files_exist");
        drop_bad(&mut o.files_exist, l, |i, g| {
            crate::core::glob::project_glob(g).err().map(|e| {
                (
                    at(&path(i)),
                    format!("{}: glob `{g}`: {e}", place("files_exist")),
                )
            })
        });
    }

    let ratio = |v: f64| (0.0..=1.0).contains(&v);
    let ratio_problem = |name: &str, v: f64| {
        format!("{name} = {v} is not a ratio; write a number from 0 to 1 (the default applies)")
    };
    let v = policy.thresholds.phase_failure_ratio;
    if !ratio(v) {
        l.problem(
            key_at(&[Step::Key("thresholds"), Step::Key("phase_failure_ratio")]),
            ratio_problem("thresholds.phase_failure_ratio", v),
        );
        policy.thresholds.phase_failure_ratio = super::Thresholds::default().phase_failure_ratio;
    }
    if let Some(v) = policy.breaker.defaults.failure_rate.filter(|v| !ratio(*v)) {
        l.problem(
            key_at(&[Step::Key("breaker"), Step::Key("failure_rate")]),
            ratio_problem("breaker.failure_rate", v),
        );
        policy.breaker.defaults.failure_rate = None;
    }
    for (k, o) in policy.breaker.keys.iter_mut() {
        if let Some(v) = o.failure_rate.filter(|v| !ratio(*v)) {
            l.problem(
                key_at(&[
                    Step::Key("breaker"),
                    Step::Key(k),
                    Step::Key("failure_rate"),
                ]),
                ratio_problem(&format!("breaker.\"{k}\".failure_rate"), v),
            );
            o.failure_rate = None;
        }
    }
    let none_problem = |name: &str| {
        format!("{name} = 0: a call's output is rejected at least once before it counts as a breaker failure, so write 1 or more (the default, {}, applies)", super::DEFAULT_VALIDATION_FAILURES)
    };
    if policy.breaker.defaults.validation_failures == Some(0) {
        l.problem(
            key_at(&[Step::Key("breaker"), Step::Key("validation_failures")]),
            none_problem("breaker.validation_failures"),
        );
        policy.breaker.defaults.validation_failures = None;
    }
    for (k, o) in policy.breaker.keys.iter_mut() {
        if o.validation_failures == Some(0) {
            l.problem(
                key_at(&[
                    Step::Key("breaker"),
                    Step::Key(k),
                    Step::Key("validation_failures"),
                ]),
                none_problem(&format!("breaker.\"{k}\".validation_failures")),
            );
            o.validation_failures = None;
        }
    }
    // A shape with a bad regex or a name the marker cannot carry is left out alone.
    let mut i = 0;
    policy.redact.patterns.retain(|p| {
        let path = |key| [Step::Key("redact"), Step::Key("patterns"), Step::At(i), Step::Key(key)];
        let plain = !p.name.is_empty()
            && p.name.len() <= 40
            && p.name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
        let bad = if !plain {
            Some((
                at(&path("name")),
                format!("redact.patterns[{i}]: name `{}` is not a plain name; write letters, digits and `-` (at most 40), like \"acme-key\"", p.name),
            ))
        } else {
            regex_error(&p.regex, depth).map(|why| {
                (
                    at(&path("regex")),
                    format!("redact.patterns[{i}] `{}`: bad regex `{}`: {why}", p.name, p.regex),
                )
            })
        };
        i += 1;
        match bad {
            Some((span, message)) => {
                l.problem(span, format!("{message}; the others apply"));
                false
            }
            None => true,
        }
    });
    if policy.retry.max_attempts == 0 {
        l.problem(
            key_at(&[Step::Key("retry"), Step::Key("max_attempts")]),
            "retry.max_attempts = 0: attempts in all include the first, so write 1 or more (the default, 3, applies)".into(),
        );
        policy.retry.max_attempts = super::RetryPolicy::default().max_attempts;
    }
}

/// Drops each item of `list` that `bad` finds fault with, reporting it.
fn drop_bad(
    list: &mut Option<Vec<String>>,
    l: &mut Loader,
    mut bad: impl FnMut(usize, &str) -> Option<(Range<usize>, String)>,
) {
    let Some(items) = list else { return };
    let mut i = 0;
    items.retain(|item| {
        let found = bad(i, item);
        i += 1;
        match found {
            Some((span, message)) => {
                l.problem(span, format!("{message}; the others apply"));
                false
            }
            None => true,
        }
    });
}

/// Why a jq filter would fail at run time: it does not compile, or (for `config check`) it
/// runs out of its budget on a sample input and so would be skipped at every run.
fn jq_problem(code: &str, depth: Depth) -> Option<String> {
    match crate::core::jq::Filter::compile(code) {
        Err(e) => Some(format!("does not compile: {e}")),
        Ok(f) if depth == Depth::Compile => over_budget_on_samples(&f)
            .map(|e| format!("{e}, on a sample input; it would be skipped at run time")),
        Ok(_) => None,
    }
}

/// How a jq filter runs out of its budget on sample inputs (an empty object, a failure
/// payload), if it does.
fn over_budget_on_samples(f: &crate::core::jq::Filter) -> Option<crate::core::jq::RunError> {
    let samples = [
        serde_json::json!({}),
        serde_json::json!({"hook_event_name": "PostToolUseFailure", "tool_name": "Bash",
            "error": "Exit code 1", "status": "error", "output": "text"}),
    ];
    samples.iter().find_map(|s| {
        f.run(s)
            .err()
            .filter(crate::core::jq::RunError::is_over_budget)
    })
}
