//! The learned fallback: what kind a text is when no rule knows it.
//!
//! A multinomial naive Bayes model over the features of [`features`] (words, word bigrams,
//! character 3- and 4-grams of the normalized text, the tool), each counted once per text.
//! It is trained from the training corpora only (`tests/data/*.toml`, never
//! `tests/data/holdout/`) by `train`, which writes its weights into `model/weights.rs`, a
//! committed file stamped with a hash of the corpora and of the code that trains and reads
//! it; a lib test fails while that stamp is stale and names the command that writes it again.
//!
//! The weights are quantized: for each feature kept (met in at least two training texts, and
//! of those the few thousand whose presence says most about the kind), the classes it was met
//! in, each with `ln((n + α) / α)` in 1/[`SCALE`] nats (n: the texts of the class that hold
//! it); per class, the log prior and the log probability of a feature the class never met. A
//! text's score for a class is its prior plus, per distinct known feature of the text, that
//! feature's weight for the class and the class's unseen term, a character n-gram counting a
//! fraction of a word ([`Weights::chars_quarters`]: many overlapping n-grams say what one word
//! says). The confidence is the top class's share of `softmax(score / (SCALE · √L))`, L the
//! (so weighted) number of known features, so that a long text is not made surer by its
//! length alone. Only an answer at or above the threshold the training chose (the lowest at
//! which its cross-validated answers were acceptable at least `train`'s target share)
//! replaces `unknown`, and only when at least [`MIN_KNOWN`] known words or bigrams back it.
//!
//! Everything is integer arithmetic on static tables until the last softmax, so the same text
//! always gets the same answer.

pub mod features;
#[cfg(test)]
pub mod train;
mod weights;

use crate::core::vocab::Kind;
use features::Feature;

/// Weights are in 1/SCALE nats.
pub const SCALE: f64 = 128.0;

/// Fewer known words and bigrams than this, and the model does not answer: character
/// n-grams alone (`ing`, `tion`) are in any text.
pub const MIN_KNOWN: usize = 2;

/// The keys are bucketed by this many top bits of their hash.
pub const BUCKET_BITS: u32 = 12;

/// How many of a decision's features the trace shows.
pub const TOP_FEATURES: usize = 5;

/// The tables of a trained model (the committed one is `weights::model()`).
pub struct Weights<'a> {
    /// The classes, as kind names separated by spaces (a string, not a table of strings: the
    /// committed tables hold no pointer, so loading the binary relocates nothing of them).
    pub kinds: &'a str,
    /// Per class: the log prior, in 1/SCALE nats.
    pub prior: &'a [i32],
    /// Per class: the log probability of a feature the class never met, in 1/SCALE nats.
    pub unseen: &'a [i32],
    /// The known features' hashes, ascending.
    pub keys: &'a [u32],
    /// Where the keys whose top [`BUCKET_BITS`] bits are `b` start in `keys`, per `b` (one
    /// more at the end): a lookup reads one bucket of a few keys instead of searching them
    /// all (a binary search over thousands of keys per n-gram was most of a long text's time).
    pub buckets: &'a [u16],
    /// Per key, where its entries start in `entries` (one more at the end).
    pub starts: &'a [u32],
    /// `class << 10 | weight`: the classes a feature was met in and its weight for each.
    pub entries: &'a [u16],
    /// The confidence, in thousandths, at or above which an answer replaces `unknown`.
    pub threshold: u16,
    /// What a character n-gram weighs against a word, in quarters (1 to 4).
    pub chars_quarters: i64,
}

/// The model's answer for a text.
#[derive(Clone, Debug, PartialEq)]
pub struct Answer {
    /// The most likely kind.
    pub kind: Kind,
    /// Its posterior share, 0 to 1.
    pub confidence: f64,
    /// Whether the confidence clears the threshold (and enough features were known).
    pub sure: bool,
    /// The features that weighed most for the kind against the runner-up, in words, each with
    /// its weight in nats; filled only when asked.
    pub top_features: Vec<(String, f64)>,
}

/// The committed model's answer for `text` (the evidence text, stack frames dropped) from
/// `tool`; `None` when it knows too few of its features. With `explain`, the answer carries
/// its top features.
pub fn predict(text: &str, tool: Option<&str>, explain: bool) -> Option<Answer> {
    predict_with(&weights::model(), text, tool, explain)
}

/// The threshold of the committed model, 0 to 1.
pub fn threshold() -> f64 {
    f64::from(weights::model().threshold) / 1000.0
}

/// [`predict`] with the tables given.
pub fn predict_with(w: &Weights, text: &str, tool: Option<&str>, explain: bool) -> Option<Answer> {
    let norm = features::normalize(text);
    let mut feats = Vec::new();
    features::extract(&norm, tool, &mut feats);
    // The known features, each once: (key index, position in `feats`).
    let mut known: Vec<(u32, u32)> = feats
        .iter()
        .enumerate()
        .filter_map(|(i, f)| lookup(w, f.hash).map(|k| (k, i as u32)))
        .collect();
    known.sort_unstable();
    known.dedup_by_key(|(k, _)| *k);
    let keys: Vec<u32> = known.iter().map(|(k, _)| *k).collect();
    let (best, confidence, runner_up) = decide(w, &keys)?;
    let kind = kind_of(w, best)?;
    let sure = kind != Kind::Unknown
        && known_words(w, &keys) >= MIN_KNOWN
        && (confidence * 1000.0).round() >= f64::from(w.threshold);
    let top_features = if explain {
        top(w, &known, &feats, &norm, tool, best, runner_up)
    } else {
        Vec::new()
    };
    Some(Answer {
        kind,
        confidence,
        sure,
        top_features,
    })
}

/// The kind of class `class`.
pub fn kind_of(w: &Weights, class: usize) -> Option<Kind> {
    w.kinds.split(' ').nth(class)?.parse::<Kind>().ok()
}

/// The index of `hash` in `w.keys`, if it is a known feature.
pub fn lookup(w: &Weights, hash: u32) -> Option<u32> {
    let b = (hash >> (32 - BUCKET_BITS)) as usize;
    let from = usize::from(*w.buckets.get(b)?);
    let to = usize::from(*w.buckets.get(b + 1)?);
    let at = w.keys.get(from..to)?.iter().position(|k| *k == hash)?;
    Some((from + at) as u32)
}

/// Per bucket, where its keys start in `keys` (ascending): see [`Weights::buckets`].
pub fn buckets_of(keys: &[u32]) -> Vec<u16> {
    let n = 1usize << BUCKET_BITS;
    let mut out = Vec::with_capacity(n + 1);
    let mut at = 0usize;
    for b in 0..n {
        while at < keys.len() && ((keys[at] >> (32 - BUCKET_BITS)) as usize) < b {
            at += 1;
        }
        out.push(at as u16);
    }
    out.push(keys.len() as u16);
    out
}

/// How many of the known keys are words or bigrams (not character n-grams).
pub fn known_words(w: &Weights, keys: &[u32]) -> usize {
    keys.iter()
        .filter(|k| {
            w.keys
                .get(**k as usize)
                .is_some_and(|h| !features::is_chars(*h))
        })
        .count()
}

/// What key `k` weighs, in quarters.
fn quarters(w: &Weights, k: u32) -> i64 {
    match w.keys.get(k as usize) {
        Some(h) if features::is_chars(*h) => w.chars_quarters,
        _ => 4,
    }
}

/// The entries of key `k`: (class, weight).
fn entries<'w>(w: &'w Weights, k: u32) -> impl Iterator<Item = (usize, i32)> + 'w {
    let (a, b) = (
        w.starts.get(k as usize).copied().unwrap_or(0) as usize,
        w.starts.get(k as usize + 1).copied().unwrap_or(0) as usize,
    );
    w.entries
        .get(a..b)
        .unwrap_or_default()
        .iter()
        .map(|e| (usize::from(e >> 10), i32::from(e & 0x3ff)))
}

/// The best class, its confidence and the runner-up class, for the known keys given.
pub fn decide(w: &Weights, keys: &[u32]) -> Option<(usize, f64, usize)> {
    let n = w.prior.len();
    if n == 0 || keys.is_empty() {
        return None;
    }
    // In quarters of 1/SCALE nats: a word's weight counts 4 times, a character n-gram's
    // `chars_quarters` times.
    let len: i64 = keys.iter().map(|k| quarters(w, *k)).sum();
    let mut score: Vec<i64> = (0..n)
        .map(|c| {
            4 * i64::from(w.prior.get(c).copied().unwrap_or(0))
                + len * i64::from(w.unseen.get(c).copied().unwrap_or(0))
        })
        .collect();
    for &k in keys {
        let q = quarters(w, k);
        for (c, weight) in entries(w, k) {
            if let Some(s) = score.get_mut(c) {
                *s += q * i64::from(weight);
            }
        }
    }
    // Ties go to the lower class index, so the answer never depends on anything but the text.
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|a, b| score[*b].cmp(&score[*a]).then(a.cmp(b)));
    let (best, second) = (order[0], order.get(1).copied().unwrap_or(order[0]));
    let temperature = 4.0 * SCALE * (len as f64 / 4.0).sqrt();
    let top = score[best];
    let total: f64 = score
        .iter()
        .map(|s| ((s - top) as f64 / temperature).exp())
        .sum();
    Some((best, 1.0 / total, second))
}

/// The features that weighed most for `best` over `second`, in words, with their weight.
fn top(
    w: &Weights,
    known: &[(u32, u32)],
    feats: &[Feature],
    norm: &str,
    tool: Option<&str>,
    best: usize,
    second: usize,
) -> Vec<(String, f64)> {
    let weight = |k: u32, class: usize| {
        let x = entries(w, k)
            .find(|(c, _)| *c == class)
            .map_or(0, |(_, x)| x)
            + w.unseen.get(class).copied().unwrap_or(0);
        quarters(w, k) * i64::from(x)
    };
    let mut by: Vec<(i64, u32, u32)> = known
        .iter()
        .map(|&(k, at)| (weight(k, best) - weight(k, second), k, at))
        .filter(|(d, _, _)| *d > 0)
        .collect();
    by.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    by.iter()
        .take(TOP_FEATURES)
        .filter_map(|&(d, _, at)| {
            let f = feats.get(at as usize)?;
            Some((features::describe(f, norm, tool), d as f64 / (4.0 * SCALE)))
        })
        .collect()
}

#[cfg(test)]
mod tests;
