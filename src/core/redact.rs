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
//! Cost: most text holds no secret, and a hook call must stay cheap. A prefilter looks for
//! the shapes' anchors with SIMD searches (the separators `=` `:` `-` `_`, and the literal
//! prefixes `AKIA`, `AIza`, `eyJ` ...), and checks each hit by the bytes around it (`sk` before
//! `-`, `password` before `=`); a shape's regex is compiled (once per process) and run only
//! when its anchor is there.

use regex::{Captures, Regex};
use serde_json::Value;
use std::borrow::Cow;
use std::sync::OnceLock;

/// One credential shape.
struct Shape {
    /// The kind the marker names.
    kind: &'static str,
    /// The rule it follows, for the reader.
    #[allow(dead_code)]
    source: &'static str,
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
        pattern: r"-----BEGIN[ A-Z0-9_-]{0,100}PRIVATE KEY(?: BLOCK)?-----(?s:.*?)(?:-----END[ A-Z0-9_-]{0,100}PRIVATE KEY(?: BLOCK)?-----|\z)",
    },
    Shape {
        kind: "anthropic-api-key",
        source: "gitleaks anthropic-api-key, anthropic-admin-api-key",
        pattern: r"\bsk-ant-[a-z]{3,8}\d{2}-[A-Za-z0-9_\-]{16,}",
    },
    Shape {
        kind: "openai-api-key",
        source: "gitleaks openai-api-key; trufflehog openai",
        pattern: r"\bsk-(?:(?:proj|svcacct|admin|None)-)?[A-Za-z0-9_\-]*\d[A-Za-z0-9_\-]*",
    },
    Shape {
        kind: "stripe-key",
        source: "gitleaks stripe-access-token",
        pattern: r"\b(?:sk|rk)_(?:test|live|prod)_[A-Za-z0-9]{10,99}\b",
    },
    Shape {
        kind: "aws-access-key",
        source: "gitleaks aws-access-token; trufflehog aws",
        pattern: r"\b(?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA)[A-Z2-7]{16}\b",
    },
    Shape {
        kind: "aws-secret-key",
        source: "trufflehog aws (the secret beside its key id); gitleaks generic-api-key",
        pattern: r#"(?i)(?:aws[_-]?secret[_-]?(?:access[_-]?)?key|secret_?access_?key)["'`]?\s*(?:=|:|=>)\s*["'`]?(?P<secret>[A-Za-z0-9/+=]{40})(?:[^A-Za-z0-9/+=]|$)"#,
    },
    Shape {
        kind: "github-token",
        source: "gitleaks github-pat, github-oauth, github-app-token, github-refresh-token",
        pattern: r"\bgh[pousr]_[0-9A-Za-z]{36,255}\b",
    },
    Shape {
        kind: "github-token",
        source: "gitleaks github-fine-grained-pat",
        pattern: r"\bgithub_pat_[A-Za-z0-9_]{22,255}",
    },
    Shape {
        kind: "gitlab-token",
        source: "gitleaks gitlab-pat, gitlab-pat-routable, gitlab-deploy-token, gitlab-runner-authentication-token",
        pattern: r"\bgl(?:pat|dt|rt|ptt)-[A-Za-z0-9_.-]{20,300}",
    },
    Shape {
        kind: "slack-token",
        source: "gitleaks slack-bot-token, slack-user-token, slack-app-token, slack-legacy-token",
        pattern: r"\b(?:xox[abprse](?:\.[A-Za-z0-9-]+)?-[0-9A-Za-z-]{10,250}|xapp-\d-[A-Z0-9]+-\d+-[a-z0-9]+)",
    },
    Shape {
        kind: "google-api-key",
        source: "gitleaks gcp-api-key; trufflehog googleapikey",
        pattern: r"\bAIza[A-Za-z0-9_-]{35}",
    },
    Shape {
        kind: "jwt",
        source: "gitleaks jwt; trufflehog jwt",
        pattern: r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*",
    },
    Shape {
        kind: "authorization",
        source: "gitleaks curl-auth-header; trufflehog (HTTP Authorization header in any detector's request)",
        pattern: r#"(?i)\b(?:proxy-)?authorization["'`]?\s*[:=]\s*["'`]?(?:(?:bearer|basic|token|digest|negotiate|ntlm|apikey|aws4-hmac-sha256)\s+)?(?P<secret>[^\s"'`\[][^\s"'`]{3,}(?:[ ,]+[A-Za-z]+=[^\s"'`,]+)*)"#,
    },
    Shape {
        kind: "bearer-token",
        source: "gitleaks curl-auth-header (Bearer); trufflehog (bearer tokens)",
        pattern: r"(?i)\bbearer\s+(?P<secret>[A-Za-z0-9._~+/\-]{16,}=*)",
    },
    Shape {
        kind: "url-password",
        source: "trufflehog uri (credentials in a URL); gitleaks generic-api-key",
        pattern: r#"\b[A-Za-z][A-Za-z0-9+.\-]{0,20}://[^\s/:@"'<>]{0,128}:(?P<secret>[^\s/@"'<>\[]{1,256})@"#,
    },
    Shape {
        kind: "password",
        source: "gitleaks generic-api-key (its keywords and assignment forms)",
        pattern: r#"(?i)(?P<key>password|passwd|passphrase|secret|token|api[_-]?key|access[_-]?key|private[_-]?key|credentials?)["'`]?\s*(?:=|:|=>)\s*["'`]?(?P<secret>VALUE{3,})"#,
    },
    Shape {
        kind: "password",
        source: "gitleaks generic-api-key (command-line flags)",
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

// The shapes' places in [`SHAPES`], for the prefilter.
const PRIVATE_KEY: usize = 0;
const ANTHROPIC: usize = 1;
const OPENAI: usize = 2;
const STRIPE: usize = 3;
const AWS_KEY_ID: usize = 4;
const AWS_SECRET: usize = 5;
const GITHUB: usize = 6;
const GITHUB_PAT: usize = 7;
const GITLAB: usize = 8;
const SLACK: usize = 9;
const GOOGLE: usize = 10;
const JWT: usize = 11;
const AUTHORIZATION: usize = 12;
const BEARER: usize = 13;
const URL_PASSWORD: usize = 14;
const KEYWORD: usize = 15;
const FLAG: usize = 16;

/// The shortest text that can hold a credential (`token=abc`).
const SHORTEST: usize = 9;

/// Finders of the literal prefixes of the shapes that have no `-`, `_`, `=`, `:` or capital
/// `A` to anchor on, made once.
fn finders() -> &'static [(memchr::memmem::Finder<'static>, usize)] {
    static FINDERS: OnceLock<Vec<(memchr::memmem::Finder<'static>, usize)>> = OnceLock::new();
    FINDERS.get_or_init(|| {
        [("eyJ", JWT), ("earer ", BEARER)]
            .into_iter()
            .map(|(lit, shape)| (memchr::memmem::Finder::new(lit.as_bytes()), shape))
            .collect()
    })
}

/// The keywords whose value, after `=` or `:`, is a credential, and the shapes they call
/// for: a name ending with one (compared in lower case, without `_` and `-`: `DB_PASSWORD`,
/// `x-api-key`, `aws_secret_access_key`), as the shapes' regexes want the keyword right
/// before the separator.
const KEYWORDS: &[(&str, u64)] = &[
    ("password", 1 << KEYWORD),
    ("passwd", 1 << KEYWORD),
    ("passphrase", 1 << KEYWORD),
    ("secret", (1 << KEYWORD) | (1 << AWS_SECRET)),
    ("token", 1 << KEYWORD),
    ("apikey", 1 << KEYWORD),
    ("accesskey", (1 << KEYWORD) | (1 << AWS_SECRET)),
    ("privatekey", 1 << KEYWORD),
    ("credential", 1 << KEYWORD),
    ("credentials", 1 << KEYWORD),
    ("authorization", 1 << AUTHORIZATION),
];

/// The name just before a separator at `at`: the run of letters, digits and `_ . -` before
/// it (past a closing quote and spaces), lowercased without `_` and `-`, at most 48 bytes.
fn name_before(b: &[u8], at: usize, out: &mut [u8; 48]) -> usize {
    let mut end = at;
    let mut skipped = 0;
    while end > 0 && skipped < 3 && matches!(b[end - 1], b' ' | b'\t' | b'"' | b'\'' | b'`') {
        end -= 1;
        skipped += 1;
    }
    let mut start = end;
    while start > 0
        && end - start < 48
        && (b[start - 1].is_ascii_alphanumeric() || matches!(b[start - 1], b'_' | b'-' | b'.'))
    {
        start -= 1;
    }
    let mut n = 0;
    for &c in &b[start..end] {
        if c != b'_' && c != b'-' {
            out[n] = c.to_ascii_lowercase();
            n += 1;
        }
    }
    n
}

/// The word of letters and digits that ends at `at` and starts a word, if it is at most 11
/// bytes.
fn word_ending_at(b: &[u8], at: usize) -> &[u8] {
    let mut start = at;
    while start > 0 && at - start < 12 && b[start - 1].is_ascii_alphanumeric() {
        start -= 1;
    }
    let starts_word = start == 0 || !(b[start - 1].is_ascii_alphanumeric() || b[start - 1] == b'_');
    if starts_word && at - start < 12 {
        &b[start..at]
    } else {
        &[]
    }
}

/// Which built-in shapes `text` may hold, as a bit per shape: a few passes of SIMD search
/// (the separators `=`, `:`, `-`, `_` and a handful of literal prefixes), each hit checked
/// by a look at the bytes around it. No regex is compiled for text that passes none.
fn candidates(text: &str) -> u64 {
    let b = text.as_bytes();
    if b.len() < SHORTEST {
        return 0;
    }
    let mut found = 0u64;
    let mut name = [0u8; 48];
    for i in memchr::memchr2_iter(b'=', b':', b) {
        if b[i] == b':' && b.get(i + 1..i + 3) == Some(b"//") {
            let rest = &b[i + 3..b.len().min(i + 400)];
            let end = rest
                .iter()
                .position(|c| c.is_ascii_whitespace())
                .unwrap_or(rest.len());
            if rest[..end].contains(&b'@') {
                found |= 1 << URL_PASSWORD;
            }
            continue;
        }
        let n = name_before(b, i, &mut name);
        if n < 5 {
            continue;
        }
        let word = &name[..n];
        for (k, bits) in KEYWORDS {
            if word.ends_with(k.as_bytes()) {
                found |= bits;
            }
        }
    }
    for i in memchr::memchr2_iter(b'-', b'_', b) {
        let sep = b[i];
        let after = &b[i + 1..];
        let word = word_ending_at(b, i);
        let bit = match (sep, word) {
            (b'-', b"sk") if after.starts_with(b"ant-") => (1 << ANTHROPIC) | (1 << OPENAI),
            (b'-', b"sk") => 1 << OPENAI,
            (b'_', b"sk" | b"rk") => 1 << STRIPE,
            (b'_', b"ghp" | b"gho" | b"ghu" | b"ghs" | b"ghr") => 1 << GITHUB,
            (b'_', b"github") if after.starts_with(b"pat_") => 1 << GITHUB_PAT,
            (b'-', b"glpat" | b"gldt" | b"glrt" | b"glptt") => 1 << GITLAB,
            (b'-', b"xoxa" | b"xoxb" | b"xoxp" | b"xoxr" | b"xoxs" | b"xoxe" | b"xapp") => {
                1 << SLACK
            }
            (b'-', b"") if after.starts_with(b"----BEGIN") => 1 << PRIVATE_KEY,
            (b'-', b"") if after.starts_with(b"-") && i + 2 < b.len() => {
                let flag = &b[i + 2..b.len().min(i + 12)];
                let lower: Vec<u8> = flag.iter().map(u8::to_ascii_lowercase).collect();
                if [&b"password"[..], b"passwd", b"token", b"secret", b"api"]
                    .iter()
                    .any(|k| lower.starts_with(k))
                {
                    1 << FLAG
                } else {
                    0
                }
            }
            _ => 0,
        };
        found |= bit;
    }
    // AWS key ids (`AKIA`, `ASIA`, `ABIA`, `ACCA`, `A3T`) and Google keys (`AIza`) at a
    // word's start.
    for i in memchr::memchr_iter(b'A', b) {
        if i > 0 && b[i - 1].is_ascii_alphanumeric() {
            continue;
        }
        match b.get(i..i + 4) {
            Some(b"AKIA" | b"ASIA" | b"ABIA" | b"ACCA") => found |= 1 << AWS_KEY_ID,
            Some(b"AIza") => found |= 1 << GOOGLE,
            Some([b'A', b'3', b'T', _]) => found |= 1 << AWS_KEY_ID,
            _ => {}
        }
    }
    for (finder, shape) in finders() {
        if found & (1 << shape) == 0 && finder.find(b).is_some() {
            found |= 1 << shape;
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
