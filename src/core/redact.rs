//! The redactor: credentials in text from outside become a marker naming their kind
//! (`[redacted aws-access-key]`) before anything is stored or told. It runs where text enters
//! (a hook payload, `record-error`'s and `classify`'s input, `run`'s captured output), so
//! nothing downstream can forget it; the words that quote outside text to the model run it
//! again, for records written before it existed or planted in a cloned state root.
//!
//! The shapes follow the public rule sets of gitleaks (`config/gitleaks.toml`, rule ids in
//! each shape's `source`) and trufflehog (`pkg/detectors/<name>`), loosened where a shape is
//! matched in error text rather than in source code (a key cut short by a log line is still
//! a key). The policy adds shapes (`[redact] patterns`) and names payload fields never kept
//! (`[redact] fields`).
//!
//! Cost: most text holds no secret, and a hook call must stay cheap. One pass of an
//! Aho-Corasick automaton over the text finds the shapes' trigger words (`sk-`, `AKIA`,
//! `password`, `://` ...); a shape's regex is compiled (once per process) and run only when
//! its trigger is there, in the right case and at a word's start where the shape needs it.

use regex::{Captures, Regex};
use serde_json::Value;
use std::borrow::Cow;
use std::sync::OnceLock;

/// Where a shape's trigger must sit for the shape to be worth its regex.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Gate {
    /// Anywhere, in any case.
    Any,
    /// In the trigger's own case, not inside a word.
    Exact,
    /// Any case, followed (after more of a name and a quote) by `=` or `:`.
    Assigned,
    /// Followed by an `@` before the next space (credentials in a URL).
    AtSign,
}

/// One credential shape.
struct Shape {
    /// The kind the marker names.
    kind: &'static str,
    /// The rule it follows, for the reader.
    #[allow(dead_code)]
    source: &'static str,
    /// Words one of which the text must hold for the shape to be tried.
    triggers: &'static [&'static str],
    gate: Gate,
    /// The regex; a group named `secret` is what is replaced (else the whole match), and a
    /// group named `key` names the kind (`password`, `token` ...) in keyword shapes.
    pattern: &'static str,
}

/// The characters a value of `password=VALUE` is made of: not a space, quote, separator or
/// bracket (a value starting with `[` is a marker already, or a placeholder).
const VALUE: &str = r#"[^\s"'`,;&|<>(){}\[\]\\]"#;

/// The built-in shapes, in the order they are applied (the specific before the generic).
static SHAPES: &[Shape] = &[
    Shape {
        kind: "private-key",
        source: "gitleaks private-key; trufflehog privatekey",
        triggers: &["-----BEGIN"],
        gate: Gate::Any,
        pattern: r"-----BEGIN[ A-Z0-9_-]{0,100}PRIVATE KEY(?: BLOCK)?-----(?s:.*?)(?:-----END[ A-Z0-9_-]{0,100}PRIVATE KEY(?: BLOCK)?-----|\z)",
    },
    Shape {
        kind: "anthropic-api-key",
        source: "gitleaks anthropic-api-key, anthropic-admin-api-key",
        triggers: &["sk-ant-"],
        gate: Gate::Exact,
        pattern: r"\bsk-ant-[a-z]{3,8}\d{2}-[A-Za-z0-9_\-]{16,}",
    },
    Shape {
        kind: "openai-api-key",
        source: "gitleaks openai-api-key; trufflehog openai",
        triggers: &["sk-"],
        gate: Gate::Exact,
        pattern: r"\bsk-(?:(?:proj|svcacct|admin|None)-)?[A-Za-z0-9_\-]*\d[A-Za-z0-9_\-]*",
    },
    Shape {
        kind: "stripe-key",
        source: "gitleaks stripe-access-token",
        triggers: &["sk_test_", "sk_live_", "sk_prod_", "rk_test_", "rk_live_", "rk_prod_"],
        gate: Gate::Exact,
        pattern: r"\b(?:sk|rk)_(?:test|live|prod)_[A-Za-z0-9]{10,99}\b",
    },
    Shape {
        kind: "aws-access-key",
        source: "gitleaks aws-access-token; trufflehog aws",
        triggers: &["AKIA", "ASIA", "ABIA", "ACCA", "A3T"],
        gate: Gate::Exact,
        pattern: r"\b(?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA)[A-Z2-7]{16}\b",
    },
    Shape {
        kind: "aws-secret-key",
        source: "trufflehog aws (the secret beside its key id); gitleaks generic-api-key",
        triggers: &["aws_secret", "aws-secret", "awssecret", "secretaccesskey", "secret_access_key"],
        gate: Gate::Any,
        pattern: r#"(?i)(?:aws[_-]?secret[_-]?(?:access[_-]?)?key|secret_?access_?key)["'`]?\s*(?:=|:|=>)\s*["'`]?(?P<secret>[A-Za-z0-9/+=]{40})(?:[^A-Za-z0-9/+=]|$)"#,
    },
    Shape {
        kind: "github-token",
        source: "gitleaks github-pat, github-oauth, github-app-token, github-refresh-token",
        triggers: &["ghp_", "gho_", "ghu_", "ghs_", "ghr_"],
        gate: Gate::Exact,
        pattern: r"\bgh[pousr]_[0-9A-Za-z]{36,255}\b",
    },
    Shape {
        kind: "github-token",
        source: "gitleaks github-fine-grained-pat",
        triggers: &["github_pat_"],
        gate: Gate::Exact,
        pattern: r"\bgithub_pat_[A-Za-z0-9_]{22,255}",
    },
    Shape {
        kind: "gitlab-token",
        source: "gitleaks gitlab-pat, gitlab-pat-routable, gitlab-deploy-token, gitlab-runner-authentication-token",
        triggers: &["glpat-", "gldt-", "glrt-", "glptt-"],
        gate: Gate::Exact,
        pattern: r"\bgl(?:pat|dt|rt|ptt)-[A-Za-z0-9_.-]{20,300}",
    },
    Shape {
        kind: "slack-token",
        source: "gitleaks slack-bot-token, slack-user-token, slack-app-token, slack-legacy-token",
        triggers: &["xoxb-", "xoxa-", "xoxp-", "xoxr-", "xoxs-", "xoxe-", "xapp-"],
        gate: Gate::Exact,
        pattern: r"\b(?:xox[abprse](?:\.[A-Za-z0-9-]+)?-[0-9A-Za-z-]{10,250}|xapp-\d-[A-Z0-9]+-\d+-[a-z0-9]+)",
    },
    Shape {
        kind: "google-api-key",
        source: "gitleaks gcp-api-key; trufflehog googleapikey",
        triggers: &["AIza"],
        gate: Gate::Exact,
        pattern: r"\bAIza[A-Za-z0-9_-]{35}",
    },
    Shape {
        kind: "jwt",
        source: "gitleaks jwt; trufflehog jwt",
        triggers: &["eyJ"],
        gate: Gate::Exact,
        pattern: r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*",
    },
    Shape {
        kind: "authorization",
        source: "gitleaks curl-auth-header; trufflehog (HTTP Authorization header in any detector's request)",
        triggers: &["authorization"],
        gate: Gate::Assigned,
        pattern: r#"(?i)\b(?:proxy-)?authorization["'`]?\s*[:=]\s*["'`]?(?:(?:bearer|basic|token|digest|negotiate|ntlm|apikey|aws4-hmac-sha256)\s+)?(?P<secret>[^\s"'`\[][^\s"'`]{3,}(?:[ ,]+[A-Za-z]+=[^\s"'`,]+)*)"#,
    },
    Shape {
        kind: "bearer-token",
        source: "gitleaks curl-auth-header (Bearer); trufflehog (bearer tokens)",
        triggers: &["bearer "],
        gate: Gate::Any,
        pattern: r"(?i)\bbearer\s+(?P<secret>[A-Za-z0-9._~+/\-]{16,}=*)",
    },
    Shape {
        kind: "url-password",
        source: "trufflehog uri (credentials in a URL); gitleaks generic-api-key",
        triggers: &["://"],
        gate: Gate::AtSign,
        pattern: r#"\b[A-Za-z][A-Za-z0-9+.\-]{0,20}://[^\s/:@"'<>]{0,128}:(?P<secret>[^\s/@"'<>\[]{1,256})@"#,
    },
    Shape {
        kind: "password",
        source: "gitleaks generic-api-key (its keywords and assignment forms)",
        triggers: &[
            "password", "passwd", "passphrase", "secret", "token", "api_key", "api-key",
            "apikey", "access_key", "access-key", "private_key", "private-key", "credential",
        ],
        gate: Gate::Assigned,
        pattern: r#"(?i)(?P<key>password|passwd|passphrase|secret|token|api[_-]?key|access[_-]?key|private[_-]?key|credentials?)["'`]?\s*(?:=|:|=>)\s*["'`]?(?P<secret>VALUE{3,})"#,
    },
    Shape {
        kind: "password",
        source: "gitleaks generic-api-key (command-line flags)",
        triggers: &["--password", "--passwd", "--token", "--secret", "--api-key", "--api_key", "--apikey"],
        gate: Gate::Any,
        pattern: r#"(?i)--(?P<key>password|passwd|token|secret|api[_-]?key)[ =]["'`]?(?P<secret>VALUE{3,})"#,
    },
];

/// The kind a keyword shape's marker names, from its keyword.
fn keyword_kind(key: &str) -> &'static str {
    let k = key.to_ascii_lowercase().replace('-', "_");
    match k.as_str() {
        "password" | "passwd" | "passphrase" => "password",
        "secret" => "secret",
        "token" => "token",
        "private_key" => "private-key",
        "credential" | "credentials" => "credential",
        _ => "api-key",
    }
}

/// A value caught beside a keyword that is no secret: a placeholder, a variable, a word of
/// prose. Passwords may be words; a URL's password may be short.
fn placeholder(kind: &str, value: &str) -> bool {
    let v = value.trim_end_matches(['.', ':', '!', '?']);
    let lower = v.to_ascii_lowercase();
    let filler = v
        .chars()
        .all(|c| matches!(c, '*' | 'x' | 'X' | '.' | '-' | '_' | '#'));
    let variable = v.starts_with('$') || v.starts_with('%') || v.starts_with("{{");
    let word = matches!(
        lower.as_str(),
        "null"
            | "none"
            | "nil"
            | "true"
            | "false"
            | "undefined"
            | "empty"
            | "missing"
            | "required"
            | "invalid"
            | "expired"
            | "redacted"
            | "hidden"
            | "unset"
            | "string"
            | "bearer"
            | "basic"
            | "token"
    );
    // Prose (`unexpected token: identifier`, `secret: my-db-secret`) is letters only; a
    // token, key or secret has digits in it or is long.
    let prose = !matches!(kind, "password" | "url-password")
        && v.len() < 20
        && v.chars()
            .all(|c| c.is_ascii_alphabetic() || c == '_' || c == '-');
    let short = v.len() < if kind == "url-password" { 1 } else { 3 };
    short || filler || variable || word || prose
}

/// The compiled regex of shape `i`, made on first use.
fn shape_regex(i: usize) -> Option<&'static Regex> {
    static COMPILED: OnceLock<Vec<OnceLock<Option<Regex>>>> = OnceLock::new();
    let cells = COMPILED.get_or_init(|| SHAPES.iter().map(|_| OnceLock::new()).collect());
    cells
        .get(i)?
        .get_or_init(|| {
            let pattern = SHAPES.get(i)?.pattern.replace("VALUE", VALUE);
            Regex::new(&pattern).ok()
        })
        .as_ref()
}

/// The automaton of every shape's triggers (ASCII case folded), and the shape of each.
fn triggers() -> Option<&'static (aho_corasick::AhoCorasick, Vec<usize>)> {
    static AC: OnceLock<Option<(aho_corasick::AhoCorasick, Vec<usize>)>> = OnceLock::new();
    AC.get_or_init(|| {
        let mut words = Vec::new();
        let mut owner = Vec::new();
        for (i, s) in SHAPES.iter().enumerate() {
            for t in s.triggers {
                words.push(*t);
                owner.push(i);
            }
        }
        aho_corasick::AhoCorasick::builder()
            .ascii_case_insensitive(true)
            .match_kind(aho_corasick::MatchKind::Standard)
            .build(&words)
            .ok()
            .map(|ac| (ac, owner))
    })
    .as_ref()
}

/// Whether a trigger found at `start..end` of `text` passes its shape's gate.
fn gate_passes(gate: Gate, text: &[u8], start: usize, end: usize, trigger: &str) -> bool {
    match gate {
        Gate::Any => true,
        Gate::Exact => {
            text.get(start..end) == Some(trigger.as_bytes())
                && (start == 0 || !text[start - 1].is_ascii_alphanumeric())
        }
        Gate::Assigned => {
            let rest = text.get(end..).unwrap_or_default();
            rest.iter()
                .take(48)
                .skip_while(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
                .take(4)
                .any(|b| matches!(b, b'=' | b':'))
        }
        Gate::AtSign => {
            let rest = text.get(end..).unwrap_or_default();
            rest.iter()
                .take(400)
                .take_while(|b| !b.is_ascii_whitespace())
                .any(|b| *b == b'@')
        }
    }
}

/// Which built-in shapes `text` may hold, as a bit per shape.
fn candidates(text: &str) -> u64 {
    let Some((ac, owner)) = triggers() else {
        return u64::MAX;
    };
    let bytes = text.as_bytes();
    let mut found = 0u64;
    for m in ac.find_overlapping_iter(text) {
        let Some(&i) = owner.get(m.pattern().as_usize()) else {
            continue;
        };
        if found & (1 << i) != 0 {
            continue;
        }
        let shape = &SHAPES[i];
        let trigger = shape
            .triggers
            .iter()
            .find(|t| t.eq_ignore_ascii_case(&text[m.start()..m.end()]))
            .copied()
            .unwrap_or_default();
        if gate_passes(shape.gate, bytes, m.start(), m.end(), trigger) {
            found |= 1 << i;
        }
    }
    found
}

/// `[redacted KIND]`.
pub fn marker(kind: &str) -> String {
    format!("[redacted {kind}]")
}

/// Replaces what `re` matches in `text` (its `secret` group if it has one) by the marker of
/// `kind` (or of the keyword the `key` group caught); `None` when nothing was replaced.
fn replace_all(re: &Regex, text: &str, kind: &str) -> Option<String> {
    let mut changed = false;
    let out = re.replace_all(text, |c: &Captures| {
        let whole = c.get(0).map_or("", |m| m.as_str());
        let Some(secret) = c.name("secret") else {
            changed = true;
            return marker(kind);
        };
        let kind = match c.name("key") {
            Some(k) => keyword_kind(k.as_str()),
            None => kind,
        };
        if placeholder(kind, secret.as_str()) {
            return whole.to_string();
        }
        changed = true;
        let start = secret.start() - c.get(0).map_or(0, |m| m.start());
        let end = start + secret.len();
        format!("{}{}{}", &whole[..start], marker(kind), &whole[end..])
    });
    changed.then(|| out.into_owned())
}

/// `text` with the built-in credential shapes replaced by markers.
pub fn redact(text: &str) -> Cow<'_, str> {
    let found = candidates(text);
    if found == 0 {
        return Cow::Borrowed(text);
    }
    let mut out: Cow<'_, str> = Cow::Borrowed(text);
    for (i, shape) in SHAPES.iter().enumerate() {
        if found & (1 << i) == 0 {
            continue;
        }
        let Some(re) = shape_regex(i) else {
            continue;
        };
        if let Some(changed) = replace_all(re, &out, shape.kind) {
            out = Cow::Owned(changed);
        }
    }
    out
}

/// A shape the policy adds (`[redact] patterns`), compiled.
#[derive(Clone, Debug)]
pub struct ExtraShape {
    /// The kind its marker names.
    pub name: String,
    /// What it matches (its `secret` group, if it has one, is what is replaced).
    pub regex: Regex,
}

/// The redactor of one policy: the built-in shapes, the policy's own, and the payload fields
/// whose values are never kept.
#[derive(Clone, Debug, Default)]
pub struct Redactor {
    /// `[redact] patterns`.
    pub extra: Vec<ExtraShape>,
    /// `[redact] fields`, lowercased.
    pub fields: Vec<String>,
}

/// Field names whose string value is a credential whatever it looks like (a JSON object's
/// `"password": "..."` is seen as a value without its key by the text shapes); compared
/// without case, `_` or `-` (`SecretAccessKey`, `secret_access_key`, `x-api-key`).
const SECRET_FIELDS: &[&str] = &[
    "password",
    "passwd",
    "passphrase",
    "secret",
    "clientsecret",
    "token",
    "accesstoken",
    "refreshtoken",
    "idtoken",
    "authtoken",
    "apikey",
    "xapikey",
    "privatekey",
    "authorization",
    "proxyauthorization",
    "awssecretaccesskey",
    "secretaccesskey",
    "secretkey",
];

/// Whether field `name` holds a credential whatever its value looks like.
fn secret_field(name: &str) -> bool {
    if name.len() > 40 {
        return false;
    }
    let n: String = name
        .chars()
        .filter(|c| *c != '_' && *c != '-')
        .map(|c| c.to_ascii_lowercase())
        .collect();
    SECRET_FIELDS.contains(&n.as_str())
}

/// The marker's kind for a field: its name in lower case, `-` for `_`.
fn field_kind(name: &str) -> String {
    name.to_ascii_lowercase().replace('_', "-")
}

impl Redactor {
    /// A redactor with the policy's shapes (`(name, regex)`; a regex that does not compile is
    /// left out, as `config check` reports it) and fields.
    pub fn new<'a>(
        patterns: impl IntoIterator<Item = (&'a str, &'a str)>,
        fields: impl IntoIterator<Item = &'a str>,
    ) -> Redactor {
        Redactor {
            extra: patterns
                .into_iter()
                .filter_map(|(name, re)| {
                    Some(ExtraShape {
                        name: name.to_string(),
                        regex: Regex::new(re).ok()?,
                    })
                })
                .collect(),
            fields: fields.into_iter().map(str::to_ascii_lowercase).collect(),
        }
    }

    /// `text` with every credential shape, built-in and the policy's, replaced by its marker.
    pub fn text<'t>(&self, text: &'t str) -> Cow<'t, str> {
        let mut out = redact(text);
        for shape in &self.extra {
            if let Some(changed) = replace_all(&shape.regex, &out, &shape.name) {
                out = Cow::Owned(changed);
            }
        }
        out
    }

    /// `bytes` (a command's output) with every credential in its UTF-8 stretches replaced;
    /// bytes that are not UTF-8 are kept as they are.
    pub fn bytes<'b>(&self, bytes: &'b [u8]) -> Cow<'b, [u8]> {
        let mut out: Vec<u8> = Vec::new();
        let mut changed = false;
        for chunk in bytes.utf8_chunks() {
            let text = self.text(chunk.valid());
            changed |= matches!(text, Cow::Owned(_));
            out.extend_from_slice(text.as_bytes());
            out.extend_from_slice(chunk.invalid());
        }
        if changed {
            Cow::Owned(out)
        } else {
            Cow::Borrowed(bytes)
        }
    }

    /// Whether the policy names field `name` as never kept (`[redact] fields`): its value,
    /// whatever its type, becomes the marker.
    fn named_field(&self, name: &str) -> bool {
        !self.fields.is_empty() && {
            let n = name.to_ascii_lowercase();
            self.fields.contains(&n)
        }
    }

    /// Redacts every string in `v` in place: the value of a field the policy names, and the
    /// string value of a credential field (`password`, `api_key` ...), becomes its marker;
    /// every other string goes through [`Redactor::text`]. Object keys are kept.
    pub fn value(&self, v: &mut Value) {
        match v {
            Value::String(s) => {
                if let Cow::Owned(r) = self.text(s) {
                    *s = r;
                }
            }
            Value::Array(items) => items.iter_mut().for_each(|x| self.value(x)),
            Value::Object(map) => {
                for (k, x) in map.iter_mut() {
                    let named = self.named_field(k);
                    match x {
                        Value::String(s) if !s.is_empty() && (named || secret_field(k)) => {
                            *s = marker(&field_kind(k));
                        }
                        _ if named && !x.is_null() => *x = Value::from(marker(&field_kind(k))),
                        _ => self.value(x),
                    }
                }
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests;
