//! Formats of an output: JSON and YAML parsed into a value (a surrounding ``` fence removed),
//! Markdown's minimal shape. Pure.

use crate::core::policy::OutputFormat;
use serde_json::{json, Value};

pub(super) fn name_of(f: OutputFormat) -> &'static str {
    match f {
        OutputFormat::Json => "JSON",
        OutputFormat::Yaml => "YAML",
        OutputFormat::Markdown => "Markdown",
        OutputFormat::Text => "text",
    }
}

/// Markdown, read by a CommonMark parser (`pulldown-cmark`): at least one heading (ATX `#`
/// or setext underlined), and every fenced code block closed — an open one means the output
/// was cut off. A fence is closed by a line of the same character at least as long, so a
/// four-backtick fence may hold three.
pub(super) fn markdown(text: &str) -> Result<String, String> {
    use pulldown_cmark::{CodeBlockKind, Event, Parser, Tag};
    // The parser recurses on nested block quotes: refuse an absurd nesting before it does.
    if deepest_prefix(text, &['>', ' ', '\t'], '>') > MAX_NESTING {
        return Err(format!(
            "expected Markdown, found block quotes nested more than {MAX_NESTING} levels deep"
        ));
    }
    let mut headings = 0;
    for (event, range) in Parser::new(text).into_offset_iter() {
        match event {
            Event::Start(Tag::Heading { .. }) => headings += 1,
            Event::Start(Tag::CodeBlock(CodeBlockKind::Fenced(_))) => {
                if let Some(fence) = unclosed_fence(&text[range]) {
                    return Err(format!(
                        "expected Markdown with closed code fences, found an unclosed {fence} fence (the output looks truncated)"
                    ));
                }
            }
            _ => {}
        }
    }
    if headings == 0 {
        return Err("expected Markdown with at least one heading, found none".into());
    }
    Ok(format!("Markdown ({headings} headings)"))
}

/// Nesting accepted in Markdown and YAML outputs, far beyond any real document; the parsers
/// recurse on it.
const MAX_NESTING: usize = 512;

/// The most `marker` characters in the run of `prefix` characters that starts any line.
fn deepest_prefix(text: &str, prefix: &[char], marker: char) -> usize {
    text.lines()
        .map(|l| {
            l.chars()
                .take_while(|c| prefix.contains(c))
                .filter(|c| *c == marker)
                .count()
        })
        .max()
        .unwrap_or(0)
}

/// The opening fence of a fenced code block's source when no closing fence ends it.
fn unclosed_fence(block: &str) -> Option<&str> {
    let mut lines = block.lines();
    let open = lines.next()?.trim_start();
    let ch = open.chars().next()?;
    let len = open.chars().take_while(|c| *c == ch).count();
    let fence = &open[..len * ch.len_utf8()];
    let closed = lines.next_back().is_some_and(|last| {
        let t = last.trim();
        t.chars().count() >= len && t.chars().all(|c| c == ch)
    });
    (!closed).then_some(fence)
}

/// A JSON or YAML value from the output: a non-string value as it is; text parsed, with one
/// surrounding ``` fence removed (agents often fence their JSON).
pub fn structured(output: &Value, format: OutputFormat) -> Result<Value, String> {
    let text = match output {
        Value::String(s) => unfence(s),
        v => return Ok(v.clone()),
    };
    match format {
        OutputFormat::Yaml => yaml_value(text),
        _ => serde_json::from_str(text).map_err(|e| format!("invalid JSON: {e}")),
    }
}

fn unfence(s: &str) -> &str {
    let t = s.trim();
    let Some(rest) = t.strip_prefix("```") else {
        return t;
    };
    let Some(body) = rest.strip_suffix("```") else {
        return t;
    };
    match body.split_once('\n') {
        Some((lang, body)) if !lang.contains(char::is_whitespace) => body.trim(),
        _ => t,
    }
}

/// Parses one YAML document into a JSON value.
pub fn yaml_value(text: &str) -> Result<Value, String> {
    use yaml_rust2::YamlLoader;
    // yaml-rust2 limits flow nesting (`[[[`) but recurses on block nesting (`- - -`).
    if deepest_prefix(text, &['-', '?', ' ', '\t'], '-').max(deepest_prefix(
        text,
        &['-', '?', ' ', '\t'],
        '?',
    )) > MAX_NESTING
    {
        return Err(format!(
            "invalid YAML: nested more than {MAX_NESTING} levels deep"
        ));
    }
    let docs = YamlLoader::load_from_str(text).map_err(|e| format!("invalid YAML: {e}"))?;
    match docs.as_slice() {
        [] => Err("an empty YAML document".into()),
        [doc] => yaml_to_json(doc, 0),
        _ => Err(format!("{} YAML documents, expected one", docs.len())),
    }
}

fn yaml_to_json(y: &yaml_rust2::Yaml, depth: usize) -> Result<Value, String> {
    use yaml_rust2::Yaml;
    if depth > 128 {
        return Err("YAML nested more than 128 levels deep".into());
    }
    Ok(match y {
        Yaml::Null | Yaml::BadValue | Yaml::Alias(_) => Value::Null,
        Yaml::Boolean(b) => Value::Bool(*b),
        Yaml::Integer(i) => json!(i),
        Yaml::Real(r) => r
            .parse::<f64>()
            .ok()
            .and_then(serde_json::Number::from_f64)
            .map_or_else(|| Value::String(r.clone()), Value::Number),
        Yaml::String(s) => Value::String(s.clone()),
        Yaml::Array(a) => Value::Array(
            a.iter()
                .map(|v| yaml_to_json(v, depth + 1))
                .collect::<Result<_, _>>()?,
        ),
        Yaml::Hash(h) => {
            let mut m = serde_json::Map::new();
            for (k, v) in h {
                let key = match k {
                    Yaml::String(s) | Yaml::Real(s) => s.clone(),
                    Yaml::Integer(i) => i.to_string(),
                    Yaml::Boolean(b) => b.to_string(),
                    _ => return Err("a YAML mapping key that is not a scalar".into()),
                };
                m.insert(key, yaml_to_json(v, depth + 1)?);
            }
            Value::Object(m)
        }
    })
}
