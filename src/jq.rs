//! jq filters, run by the embedded jaq engine: compiled once, run on many values.
//!
//! `halt` and `halt_error` are left out of the standard library: they would end the process
//! from inside a filter, and a policy file must never be able to do that to a hook.

use jaq_core::compile::Lut;
use jaq_core::load::{Arena, File, Loader};
use jaq_core::{Compiler, Ctx, Cv, Error, Exn, Native, RcIter, ValXs};
use jaq_json::Val;
use serde_json::Value;

/// A compiled jq filter.
pub struct Filter {
    filter: jaq_core::Filter<Native<Val>>,
}

impl Filter {
    /// Compiles `code`, or says where and why it is wrong.
    ///
    /// Most filters (`.n += 1`, `.evidence_count > 0`) call no definition of the standard
    /// library, only native filters: they are compiled without it first, which skips lexing,
    /// parsing and compiling its ~190 definitions (about 0.4 ms of every call). A filter that
    /// needs one (`select`, `map`, `true`) is compiled again with the whole library. No
    /// definition shares a name and arity with a native filter (a test checks it), so a name
    /// resolves to the same filter either way.
    pub fn compile(code: &str) -> Result<Filter, String> {
        match Filter::compile_with(code, false) {
            Ok(f) => Ok(f),
            Err(_) => Filter::compile_with(code, true),
        }
    }

    fn compile_with(code: &str, with_defs: bool) -> Result<Filter, String> {
        let arena = Arena::default();
        let loader = if with_defs {
            Loader::new(std_defs().collect::<Vec<_>>())
        } else {
            Loader::new(Vec::new())
        };
        let modules = loader
            .load(&arena, File { code, path: () })
            .map_err(|errs| load_errors(code, &errs))?;
        let filter = Compiler::default()
            .with_funs(natives())
            .compile(modules)
            .map_err(|errs| {
                let names: Vec<String> = errs
                    .iter()
                    .flat_map(|(_, es)| es.iter().map(|(name, _)| format!("`{name}`")))
                    .collect();
                format!("jq filter `{code}`: undefined {}", names.join(", "))
            })?;
        Ok(Filter { filter })
    }

    /// Runs the filter on `input` and collects every output (or the first error).
    pub fn run(&self, input: &Value) -> Result<Vec<Value>, String> {
        let inputs = RcIter::new(core::iter::empty());
        let out = self
            .filter
            .run((Ctx::new([], &inputs), Val::from(input.clone())));
        let mut values = Vec::new();
        for v in out {
            values.push(Value::from(v.map_err(|e| format!("jq error: {e}"))?));
        }
        Ok(values)
    }

    /// Runs the filter as a predicate: true only when every output is `true` and there is one.
    pub fn holds(&self, input: &Value) -> Result<bool, String> {
        let out = self.run(input)?;
        Ok(!out.is_empty() && out.iter().all(|v| v == &Value::Bool(true)))
    }
}

/// The definitions of jq's standard library (written in jq).
fn std_defs() -> impl Iterator<Item = jaq_core::load::parse::Def<&'static str>> {
    jaq_std::defs().chain(jaq_json::defs())
}

/// The native filters, `halt` and `halt_error` replaced.
fn natives() -> impl Iterator<Item = jaq_std::Filter<Native<Val>>> {
    jaq_std::funs()
        .map(|(name, args, native)| match name {
            "halt" | "halt_error" => (name, args, Native::new(refuse_halt)),
            _ => (name, args, native),
        })
        .chain(jaq_json::funs())
}

/// Stands in for `halt` and `halt_error`: an error value instead of ending the process.
fn refuse_halt<'a>(_: &'a Lut<Native<Val>>, _: Cv<'a, Val>) -> ValXs<'a, Val> {
    Box::new(core::iter::once(Err(Exn::from(Error::str(
        "halt is not allowed in triage filters",
    )))))
}

fn offset_in(code: &str, part: &str) -> usize {
    let start = code.as_ptr() as usize;
    let at = part.as_ptr() as usize;
    if at >= start && at <= start + code.len() {
        at - start
    } else {
        0
    }
}

fn load_errors(code: &str, errs: &jaq_core::load::Errors<&str, ()>) -> String {
    use jaq_core::load::Error;
    let mut parts = Vec::new();
    for (_, e) in errs {
        match e {
            Error::Io(v) => parts.extend(v.iter().map(|(p, m)| format!("cannot load {p}: {m}"))),
            Error::Lex(v) => parts.extend(v.iter().map(|(expect, at)| {
                format!(
                    "expected {} at position {}",
                    expect.as_str(),
                    offset_in(code, at)
                )
            })),
            Error::Parse(v) => parts.extend(v.iter().map(|(expect, at)| {
                let pos = offset_in(code, at);
                let found = if at.is_empty() {
                    "end of filter".into()
                } else {
                    format!("`{at}`")
                };
                format!(
                    "expected {} at position {pos}, found {found}",
                    expect.as_str()
                )
            })),
        }
    }
    format!("jq filter `{code}`: {}", parts.join("; "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn runs_and_updates() {
        let f = Filter::compile(".n += 1").expect("compile");
        assert_eq!(f.run(&json!({"n": 1})).expect("run"), vec![json!({"n": 2})]);
        assert_eq!(f.run(&json!({})).expect("run"), vec![json!({"n": 1})]);
    }

    #[test]
    fn predicates() {
        let f = Filter::compile(".evidence_count > 0").expect("compile");
        assert!(f.holds(&json!({"evidence_count": 3})).expect("run"));
        assert!(!f.holds(&json!({"evidence_count": 0})).expect("run"));
        assert!(!Filter::compile("empty")
            .expect("compile")
            .holds(&json!(1))
            .expect("run"));
    }

    #[test]
    fn errors_say_where() {
        let e = Filter::compile(".a | ").err().expect("error");
        assert!(e.contains("position"), "{e}");
        let e = Filter::compile("nosuchfn(1)").err().expect("error");
        assert!(e.contains("undefined"), "{e}");
        let halt = Filter::compile("halt").expect("compiles to an error");
        assert!(halt.run(&json!(1)).is_err());
        assert!(Filter::compile("\"x\" | halt_error")
            .expect("compile")
            .run(&json!(1))
            .is_err());
    }

    #[test]
    fn no_definition_shadows_a_native_filter() {
        // `compile` tries the native filters alone first: that is only sound when no
        // definition of the library has the name and arity of a native one.
        let natives: Vec<(&str, usize)> = natives().map(|(n, a, _)| (n, a.len())).collect();
        for d in std_defs() {
            assert!(
                !natives.contains(&(d.name, d.args.len())),
                "{}/{}",
                d.name,
                d.args.len()
            );
        }
    }

    #[test]
    fn filters_that_need_the_library_still_compile() {
        let f = Filter::compile("[.[] | select(. > 1)] | map(. * 2) | add").expect("compile");
        assert_eq!(f.run(&json!([1, 2, 3])).expect("run"), vec![json!(10)]);
        let f = Filter::compile(".a == true and (.b | not)").expect("compile");
        assert!(f.holds(&json!({"a": true, "b": false})).expect("run"));
        let f = Filter::compile(".tags | join(\",\") | test(\"a,b\")").expect("compile");
        assert!(f.holds(&json!({"tags": ["a", "b"]})).expect("run"));
        let f = Filter::compile("def twice(f): f | f; .n | twice(. + 1)").expect("compile");
        assert_eq!(f.run(&json!({"n": 1})).expect("run"), vec![json!(3)]);
        let e = Filter::compile("select(.a) | nosuchfn")
            .err()
            .expect("error");
        assert!(e.contains("undefined") && e.contains("nosuchfn"), "{e}");
    }

    #[test]
    fn runtime_errors_are_values_not_panics() {
        let f = Filter::compile(".a + 1").expect("compile");
        assert!(f.run(&json!({"a": "x"})).is_err());
        let f = Filter::compile("error(\"no\")").expect("compile");
        assert!(f.run(&json!(1)).is_err());
    }
}
