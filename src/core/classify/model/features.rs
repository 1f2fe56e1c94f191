//! What the learned fallback reads in a text: the same features at training and at run time.
//!
//! The text (its first [`MAX_BYTES`]) is normalized first: ASCII-lowercased, anything outside
//! ASCII a space, and each whitespace-separated token collapsed when it is an instance rather
//! than a word: a URL becomes `_url_`, a file path `_path_`, a hex run (a hash, an address, a
//! request id) `_hex_`, and every number `0`, except a three-digit one from 100 to 599 (an
//! HTTP status says much, a line number nothing). The features of the normalized text are its
//! words (runs of letters, digits and `_`, two bytes or longer), its word bigrams, its
//! character 3- and 4-grams, and the tool that failed, each hashed (FNV-1a, 32 bits, seeded by
//! the feature's sort) to a `u32`. Each feature keeps where it came from, so the trace can
//! show a decision's top features in words.

/// How much of a text is read: an error's first lines say what it is.
pub const MAX_BYTES: usize = 2048;

/// The sort of a feature (also the seed of its hash).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sort {
    Word = 1,
    Bigram = 2,
    Chars = 3,
    Tool = 4,
}

/// One feature: its hash, its sort, and the bytes of the normalized text it is (for the tool,
/// the span is empty).
#[derive(Clone, Copy, Debug)]
pub struct Feature {
    pub hash: u32,
    pub sort: Sort,
    pub start: u32,
    pub end: u32,
}

/// FNV-1a over `bytes`, seeded by the feature's sort, its lowest bit set for a character
/// n-gram (see [`is_chars`]).
fn hash(sort: Sort, bytes: &[u8]) -> u32 {
    let mut h: u32 = 0x811c_9dc5 ^ (sort as u32).wrapping_mul(0x0100_0193);
    for &b in bytes {
        h = (h ^ u32::from(b)).wrapping_mul(0x0100_0193);
    }
    mark(sort, h)
}

fn mark(sort: Sort, h: u32) -> u32 {
    (h & !1) | u32::from(sort == Sort::Chars)
}

/// Whether a feature's hash is that of a character n-gram (they weigh less than words: many
/// overlapping n-grams say what one word says).
pub fn is_chars(hash: u32) -> bool {
    hash & 1 == 1
}

/// `text` normalized: see the module's comment.
pub fn normalize(text: &str) -> String {
    let bytes = text.as_bytes();
    let bytes = &bytes[..bytes.len().min(MAX_BYTES)];
    let mut out = String::with_capacity(bytes.len());
    let tokens = bytes
        .split(|b| b.is_ascii_whitespace() || !b.is_ascii())
        .filter(|t| !t.is_empty());
    for token in tokens {
        if !out.is_empty() {
            out.push(' ');
        }
        let lower = token.to_ascii_lowercase();
        if is_url(&lower) {
            out.push_str("_url_");
        } else if is_path(&lower) {
            out.push_str("_path_");
        } else {
            collapse(&lower, &mut out);
        }
    }
    out
}

fn is_url(t: &[u8]) -> bool {
    t.windows(3).any(|w| w == b"://") || t.starts_with(b"www.")
}

/// A path: it starts like one (`/`, `~/`, `./`, `../`, `C:\`), or has two separators or more.
fn is_path(t: &[u8]) -> bool {
    let t = trim_punct(t);
    if t.len() < 2 {
        return false;
    }
    let starts = t.starts_with(b"/")
        || t.starts_with(b"~/")
        || t.starts_with(b"./")
        || t.starts_with(b"../")
        || (t.len() > 2 && t[0].is_ascii_alphabetic() && &t[1..3] == b":\\");
    let separators = t.iter().filter(|b| matches!(b, b'/' | b'\\')).count();
    (starts && t.iter().any(u8::is_ascii_alphanumeric)) || separators >= 2
}

fn trim_punct(t: &[u8]) -> &[u8] {
    let open = |b: &u8| matches!(b, b'"' | b'\'' | b'`' | b'(' | b'[' | b'{' | b'<');
    let close = |b: &u8| {
        matches!(
            b,
            b'"' | b'\'' | b'`' | b')' | b']' | b'}' | b'>' | b',' | b';' | b':' | b'.'
        )
    };
    let start = t.iter().position(|b| !open(b)).unwrap_or(t.len());
    let end = t.iter().rposition(|b| !close(b)).map_or(start, |e| e + 1);
    &t[start..end.max(start)]
}

/// `token` onto `out` with its hex runs and numbers collapsed.
fn collapse(token: &[u8], out: &mut String) {
    let mut i = 0;
    while i < token.len() {
        let b = token[i];
        if !b.is_ascii_alphanumeric() {
            out.push(char::from(b));
            i += 1;
            continue;
        }
        let end = token[i..]
            .iter()
            .position(|b| !b.is_ascii_alphanumeric())
            .map_or(token.len(), |n| i + n);
        let run = &token[i..end];
        if is_hex(run) {
            out.push_str("_hex_");
        } else if run.iter().all(u8::is_ascii_digit) {
            let status = run.len() == 3 && (b'1'..=b'5').contains(&run[0]);
            if status {
                run.iter().for_each(|&b| out.push(char::from(b)));
            } else {
                out.push('0');
            }
        } else {
            // Digits inside a word (`v2`, `utf8`, `e11000`) collapse, the letters stay.
            let mut last_digit = false;
            for &b in run {
                if b.is_ascii_digit() {
                    if !last_digit {
                        out.push('0');
                    }
                    last_digit = true;
                } else {
                    out.push(char::from(b));
                    last_digit = false;
                }
            }
        }
        i = end;
    }
}

/// A hex run: `0x…`, or eight hex digits or more with a digit among them.
fn is_hex(run: &[u8]) -> bool {
    if run.len() > 2 && run.starts_with(b"0x") && run[2..].iter().all(u8::is_ascii_hexdigit) {
        return true;
    }
    run.len() >= 8
        && run.iter().all(u8::is_ascii_hexdigit)
        && run.iter().any(u8::is_ascii_digit)
        && run.iter().any(|b| b.is_ascii_alphabetic())
}

fn is_word_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// The features of a normalized text (and of the tool that failed), into `out` (cleared
/// first); a feature met twice is listed twice.
pub fn extract(norm: &str, tool: Option<&str>, out: &mut Vec<Feature>) {
    out.clear();
    let bytes = norm.as_bytes();
    let span = |sort: Sort, start: usize, end: usize| Feature {
        hash: hash(sort, &bytes[start..end]),
        sort,
        start: start as u32,
        end: end as u32,
    };
    // Words and bigrams.
    let mut prev: Option<(usize, usize)> = None;
    let mut i = 0;
    while i < bytes.len() {
        if !is_word_byte(bytes[i]) {
            i += 1;
            continue;
        }
        let start = i;
        while i < bytes.len() && is_word_byte(bytes[i]) {
            i += 1;
        }
        if i - start < 2 {
            continue;
        }
        out.push(span(Sort::Word, start, i));
        if let Some((ps, pe)) = prev {
            // The bigram's hash is of both words with one space between.
            let mut h: u32 = 0x811c_9dc5 ^ (Sort::Bigram as u32).wrapping_mul(0x0100_0193);
            for &b in bytes[ps..pe]
                .iter()
                .chain(b" ".iter())
                .chain(&bytes[start..i])
            {
                h = (h ^ u32::from(b)).wrapping_mul(0x0100_0193);
            }
            out.push(Feature {
                hash: mark(Sort::Bigram, h),
                sort: Sort::Bigram,
                start: ps as u32,
                end: i as u32,
            });
        }
        prev = Some((start, i));
    }
    // Character 3- and 4-grams that hold a letter.
    for n in [3, 4] {
        for start in 0..bytes.len().saturating_sub(n - 1) {
            let gram = &bytes[start..start + n];
            if gram.iter().any(u8::is_ascii_alphabetic) {
                out.push(span(Sort::Chars, start, start + n));
            }
        }
    }
    if let Some(t) = tool {
        let lower = t.to_ascii_lowercase();
        out.push(Feature {
            hash: hash(Sort::Tool, lower.as_bytes()),
            sort: Sort::Tool,
            start: 0,
            end: 0,
        });
    }
}

/// A feature in words, for the trace: `word "deadlock"`, `chars "dlo"`, `tool bash`.
pub fn describe(f: &Feature, norm: &str, tool: Option<&str>) -> String {
    let text = norm
        .get(f.start as usize..f.end as usize)
        .unwrap_or_default();
    match f.sort {
        Sort::Word => format!("word {text:?}"),
        Sort::Bigram => {
            // The span runs from the first word to the second; what lies between is not part
            // of the feature.
            let mut words = text
                .split(|c: char| !is_word_byte(c as u8) || !c.is_ascii())
                .filter(|w| w.len() >= 2);
            let first = words.next().unwrap_or_default();
            let last = words.next_back().unwrap_or(first);
            format!("words \"{first} {last}\"")
        }
        Sort::Chars => format!("chars {text:?}"),
        Sort::Tool => format!("tool {}", tool.unwrap_or_default()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instances_collapse_and_words_stay() {
        assert_eq!(
            normalize("Error 403 at /usr/lib/x.py:12 see https://a.b/c id=0xdeadBEEF sha 3f2a9c1d77e0 took 1234ms"),
            "error 403 at _path_ see _url_ id=_hex_ sha _hex_ took 0ms"
        );
        assert_eq!(
            normalize("Killed process 8123 (python) v2.10"),
            "killed process 0 (python) v0.0"
        );
        assert_eq!(normalize("a\u{2014}b  c"), "a b c");
    }

    #[test]
    fn a_bigram_hash_is_of_its_two_words() {
        let mut f = Vec::new();
        extract("deadlock detected", None, &mut f);
        let bigram = f.iter().find(|f| f.sort == Sort::Bigram).expect("a bigram");
        let mut g = Vec::new();
        extract("x deadlock detected", None, &mut g);
        assert!(g
            .iter()
            .any(|x| x.sort == Sort::Bigram && x.hash == bigram.hash));
        assert_eq!(
            describe(bigram, "deadlock detected", None),
            "words \"deadlock detected\""
        );
        let mut h = Vec::new();
        extract("error 0 (0): deadlock", None, &mut h);
        let bigram = h.iter().find(|f| f.sort == Sort::Bigram).expect("a bigram");
        assert_eq!(
            describe(bigram, "error 0 (0): deadlock", None),
            "words \"error deadlock\""
        );
    }
}
