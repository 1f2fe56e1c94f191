//! What makes a state document valid: JSON, an object unless `--any`, the `--require` keys
//! present, and the `--check` filter true. Pure: it is handed the document and the rules.

use crate::core::jq;
use serde_json::Value;

/// The rules a document must pass before it is written, or to be trusted when read.
pub struct Validation {
    /// Any JSON value, not only an object.
    pub any: bool,
    /// Dotted paths that must be present and not null.
    pub require: Vec<String>,
    /// A jq filter that must yield `true`.
    pub check: Option<(String, jq::Filter)>,
}

impl Validation {
    /// Builds the rules; a jq filter that does not compile is reported with its position.
    pub fn new(any: bool, require: &[String], check: Option<&str>) -> Result<Validation, String> {
        let check = match check {
            Some(code) => Some((code.to_string(), jq::Filter::compile(code)?)),
            None => None,
        };
        Ok(Validation {
            any,
            require: require.to_vec(),
            check,
        })
    }

    /// Only "is it JSON of the right shape".
    pub fn shape_only(any: bool) -> Validation {
        Validation {
            any,
            require: Vec::new(),
            check: None,
        }
    }

    /// Parses and checks `bytes`: the document, or what is wrong with it.
    pub fn parse(&self, bytes: &[u8]) -> Result<Value, String> {
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Err("empty".into());
        }
        let doc: Value =
            serde_json::from_slice(bytes).map_err(|e| format!("not valid JSON: {e}"))?;
        self.check(&doc)?;
        Ok(doc)
    }

    /// Checks a parsed document.
    pub fn check(&self, doc: &Value) -> Result<(), String> {
        if !self.any && !doc.is_object() {
            return Err(format!(
                "the document is {}, not an object (pass --any to allow any JSON value)",
                type_name(doc)
            ));
        }
        let missing: Vec<&str> = self
            .require
            .iter()
            .filter(|k| lookup(doc, k).is_none_or(Value::is_null))
            .map(String::as_str)
            .collect();
        if !missing.is_empty() {
            return Err(format!("required key missing: {}", missing.join(", ")));
        }
        if let Some((code, filter)) = &self.check {
            match filter.holds(doc) {
                Ok(true) => {}
                Ok(false) => return Err(format!("check `{code}` did not yield true")),
                Err(e) => return Err(format!("check `{code}` failed: {e}")),
            }
        }
        Ok(())
    }
}

/// How deep JSON may nest for the reader (serde_json's recursion limit): a writer must not
/// produce what its reader refuses.
pub const MAX_DEPTH: usize = 127;

/// How deep `v` nests (a scalar is 0, `[]` is 1), counted without recursion; stops counting
/// past `limit`.
pub fn depth(v: &Value, limit: usize) -> usize {
    let mut deepest = 0;
    let mut stack = vec![(v, 0usize)];
    while let Some((v, d)) = stack.pop() {
        let children: Box<dyn Iterator<Item = &Value>> = match v {
            Value::Array(a) => Box::new(a.iter()),
            Value::Object(m) => Box::new(m.values()),
            _ => continue,
        };
        let d = d + 1;
        deepest = deepest.max(d);
        if deepest > limit {
            return deepest;
        }
        stack.extend(children.map(|c| (c, d)));
    }
    deepest
}

/// Checks a document about to be written against every limit its reader has: nesting depth,
/// size (`max_bytes`, once serialized), and that it parses back as it will be read.
pub fn check_writable(
    doc: &Value,
    bytes: Option<&[u8]>,
    any: bool,
    max_bytes: usize,
) -> Result<(), String> {
    let d = depth(doc, MAX_DEPTH);
    if d > MAX_DEPTH {
        return Err(format!(
            "it nests deeper than {MAX_DEPTH} levels, more than state-read accepts"
        ));
    }
    if let Some(bytes) = bytes {
        if bytes.len() > max_bytes {
            return Err(format!(
                "it is {} bytes, more than the limit of {max_bytes} (TRIAGE_MAX_INPUT)",
                bytes.len()
            ));
        }
        Validation::shape_only(any)
            .parse(bytes)
            .map_err(|e| format!("it would not read back: {e}"))?;
    }
    Ok(())
}

/// The value at a dotted path (`a.b.0.c`); numbers index arrays.
pub fn lookup<'a>(doc: &'a Value, path: &str) -> Option<&'a Value> {
    path.split('.').try_fold(doc, |v, part| match v {
        Value::Object(m) => m.get(part),
        Value::Array(a) => part.parse::<usize>().ok().and_then(|i| a.get(i)),
        _ => None,
    })
}

/// The JSON type's name, for messages.
pub fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn dotted_paths() {
        let doc = json!({"a": {"b": [1, {"c": true}]}});
        assert_eq!(lookup(&doc, "a.b.1.c"), Some(&json!(true)));
        assert_eq!(lookup(&doc, "a.x"), None);
        assert_eq!(lookup(&doc, "a.b.9"), None);
    }

    #[test]
    fn depth_matches_what_the_reader_accepts() {
        for n in [1usize, 2, 126, 127, 128, 129, 600] {
            let text = "[".repeat(n) + &"]".repeat(n);
            let read = serde_json::from_str::<Value>(&text);
            let nested = (0..n).fold(json!([]), |v, _| json!([v]));
            // `nested` is n + 1 deep.
            let d = depth(&nested, MAX_DEPTH);
            assert_eq!(d > MAX_DEPTH, n + 1 > MAX_DEPTH, "{n}: {d}");
            assert_eq!(read.is_ok(), n <= MAX_DEPTH, "{n}");
            if n < 200 {
                let bytes = serde_json::to_vec(&nested).expect("serializes");
                assert_eq!(
                    check_writable(&nested, Some(&bytes), true, 1 << 20).is_ok(),
                    n < MAX_DEPTH,
                    "{n}"
                );
            }
        }
        assert!(check_writable(
            &json!({"a": "x".repeat(100)}),
            Some(&[b' '; 200]),
            false,
            50
        )
        .expect_err("size")
        .contains("TRIAGE_MAX_INPUT"));
    }

    #[test]
    fn rules() {
        let v = Validation::new(false, &["stage".into()], Some(".stage >= 1")).expect("rules");
        assert!(v.parse(br#"{"stage": 2}"#).is_ok());
        assert!(v
            .parse(br#"{"stage": 0}"#)
            .expect_err("check")
            .contains("did not yield true"));
        assert!(v
            .parse(br#"{"other": 1}"#)
            .expect_err("require")
            .contains("stage"));
        assert!(v.parse(br#"{"stage": null}"#).is_err());
        assert!(v.parse(b"[1]").expect_err("shape").contains("--any"));
        assert!(v.parse(b"").expect_err("empty").contains("empty"));
        assert!(Validation::shape_only(true).parse(b"[1]").is_ok());
        assert!(Validation::new(false, &[], Some(".a |")).is_err());
    }
}
