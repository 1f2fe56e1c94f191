//! The generator of the learned fallback's weights (`model/weights.rs`), and the test that
//! the committed weights are those of the training corpora as they are now.
//!
//! It reads every `tests/data/*.toml` corpus (the training texts; `tests/data/holdout/` is
//! never read), turns each case into the text the classifier would see (the same input as the
//! corpus test builds, stack frames dropped), labels it with its first acceptable kind, and
//! fits a multinomial naive Bayes model (see [`super`]). It chooses the confidence threshold
//! by 5-fold cross-validation on the same texts: the lowest confidence at and above which at
//! least [`TARGET_PRECISION`] of the held-back texts' answers were acceptable (never below
//! [`LEAST_THRESHOLD`]). Nothing depends on the order of a map or on time: the same corpora
//! give the same file.
//!
//! To write the weights again (after adding training texts or changing this code, the
//! features or the scoring):
//!
//! ```sh
//! TRIAGE_REFRESH_MODEL=1 cargo test --lib committed_model_is_not_stale
//! ```

use super::features::{self, Feature};
use super::{buckets_of, decide, kind_of, known_words, Weights, MIN_KNOWN, SCALE};
use crate::core::classify::corpus;
use crate::core::classify::{input, matching, Overrides};
use crate::core::vocab::Kind;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Changes whenever what the generator writes changes in a way its inputs do not show.
const GENERATOR_VERSION: &str = "naive-bayes 1";

/// The committed weights, relative to the package.
const COMMITTED: &str = "src/core/classify/model/weights.rs";

/// The code whose changes make the weights stale, besides the corpora.
const CODE: [&str; 3] = [
    "src/core/classify/model.rs",
    "src/core/classify/model/features.rs",
    "src/core/classify/model/train.rs",
];

/// The line of the committed file that carries its stamp.
const STAMP_PREFIX: &str = "// model-stamp: ";

/// How a model is fitted.
#[derive(Clone, Copy, Debug)]
pub struct Params {
    /// Additive smoothing.
    pub alpha: f64,
    /// A feature met in fewer training texts than this is left out.
    pub min_texts: usize,
    /// At most this many features are kept: those that say most about the class (mutual
    /// information between the feature's presence and the class).
    pub max_features: usize,
    /// What a character n-gram weighs against a word, in quarters.
    pub chars_quarters: i64,
}

/// The parameters the committed model is fitted with.
pub const PARAMS: Params = Params {
    alpha: 0.3,
    min_texts: 2,
    max_features: 8192,
    chars_quarters: 1,
};

/// The share of cross-validated answers at or above the threshold that must be acceptable.
const TARGET_PRECISION: f64 = 0.95;

/// The threshold is never lower than this.
const LEAST_THRESHOLD: f64 = 0.5;

const FOLDS: usize = 5;

/// The training corpora: `tests/data/*.toml`, by name.
pub fn training_files(manifest: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(manifest.join("tests/data"))?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.is_file() && p.extension().is_some_and(|x| x == "toml"))
        .collect();
    files.sort();
    Ok(files)
}

/// The stamp of the training corpora and the code under `manifest`: FNV-1a over each file's
/// name and bytes (CR dropped, so a CRLF checkout gets the same stamp) and the generator's
/// version.
pub fn stamp(manifest: &Path) -> std::io::Result<String> {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut eat = |bytes: &[u8]| {
        for &b in bytes {
            if b != b'\r' {
                h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
            }
        }
        h = (h ^ 0xff).wrapping_mul(0x0100_0000_01b3);
    };
    eat(GENERATOR_VERSION.as_bytes());
    let mut inputs = training_files(manifest)?;
    inputs.extend(CODE.iter().map(|c| manifest.join(c)));
    for f in inputs {
        let name = f.strip_prefix(manifest).unwrap_or(&f);
        eat(name.to_string_lossy().replace('\\', "/").as_bytes());
        eat(&std::fs::read(&f)?);
    }
    Ok(format!("{h:016x}"))
}

/// The stamp a generated file carries, if any.
pub fn stamp_of(text: &str) -> Option<&str> {
    text.lines()
        .take(4)
        .find_map(|l| l.strip_prefix(STAMP_PREFIX))
        .and_then(|rest| rest.split_whitespace().next())
}

/// One training text: its distinct feature hashes, its label and its acceptable kinds.
pub struct Doc {
    pub hashes: Vec<u32>,
    pub label: Kind,
    pub accept: Vec<Kind>,
}

/// The training texts of the corpora under `manifest`.
pub fn docs(manifest: &Path) -> Result<Vec<Doc>, String> {
    let mut out = Vec::new();
    let mut feats: Vec<Feature> = Vec::new();
    for file in training_files(manifest).map_err(|e| e.to_string())? {
        let data = std::fs::read_to_string(&file).map_err(|e| format!("{file:?}: {e}"))?;
        for c in corpus::cases(&data) {
            let accept: Vec<Kind> = c
                .accept
                .iter()
                .map(|k| k.parse::<Kind>())
                .collect::<Result<_, _>>()
                .map_err(|_| format!("{file:?}: {}: a kind is not known", c.source))?;
            let Some(&label) = accept.first() else {
                return Err(format!("{file:?}: {}: no acceptable kind", c.source));
            };
            let f = input::facts(&corpus::input(&c), &Overrides::default());
            let ev = matching::Evidence::new(&f.text);
            features::extract(
                &features::normalize(&ev.text),
                f.tool.as_deref(),
                &mut feats,
            );
            let mut hashes: Vec<u32> = feats.iter().map(|f| f.hash).collect();
            hashes.sort_unstable();
            hashes.dedup();
            out.push(Doc {
                hashes,
                label,
                accept,
            });
        }
    }
    Ok(out)
}

/// A fitted model's tables, owned.
pub struct Model {
    pub kinds: String,
    pub prior: Vec<i32>,
    pub unseen: Vec<i32>,
    pub keys: Vec<u32>,
    pub buckets: Vec<u16>,
    pub starts: Vec<u32>,
    pub entries: Vec<u16>,
    pub threshold: u16,
    pub chars_quarters: i64,
}

impl Model {
    /// The tables, as the run-time scoring reads them.
    pub fn view(&self) -> Weights<'_> {
        Weights {
            kinds: &self.kinds,
            prior: &self.prior,
            unseen: &self.unseen,
            keys: &self.keys,
            buckets: &self.buckets,
            starts: &self.starts,
            entries: &self.entries,
            threshold: self.threshold,
            chars_quarters: self.chars_quarters,
        }
    }
}

fn scaled(x: f64) -> i32 {
    (x * SCALE).round() as i32
}

/// Naive Bayes fitted on `docs` (the threshold left at 0).
pub fn fit(docs: &[&Doc], p: Params) -> Model {
    let classes: Vec<Kind> = Kind::ALL
        .iter()
        .copied()
        .filter(|k| docs.iter().any(|d| d.label == *k))
        .collect();
    let class_of = |k: Kind| classes.iter().position(|c| *c == k).unwrap_or(0);
    let mut texts = BTreeMap::<u32, usize>::new();
    for d in docs {
        for h in &d.hashes {
            *texts.entry(*h).or_default() += 1;
        }
    }
    let keys = select(docs, &classes, &texts, p);
    // Per key, per class: the texts of the class that hold it.
    let mut counts = vec![vec![0u32; classes.len()]; keys.len()];
    let mut per_class = vec![0u64; classes.len()];
    let mut docs_of = vec![0u64; classes.len()];
    for d in docs {
        let c = class_of(d.label);
        docs_of[c] += 1;
        for h in &d.hashes {
            if let Ok(k) = keys.binary_search(h) {
                counts[k][c] += 1;
                per_class[c] += 1;
            }
        }
    }
    let v = keys.len() as f64;
    let total = docs.len() as f64;
    let prior = docs_of
        .iter()
        .map(|n| scaled((*n as f64 / total).ln()))
        .collect();
    let unseen = per_class
        .iter()
        .map(|n| scaled((p.alpha / (*n as f64 + p.alpha * v)).ln()))
        .collect();
    let mut starts = Vec::with_capacity(keys.len() + 1);
    let mut entries = Vec::new();
    for row in &counts {
        starts.push(entries.len() as u32);
        for (c, n) in row.iter().enumerate() {
            if *n > 0 {
                let w = scaled(((f64::from(*n) + p.alpha) / p.alpha).ln()).clamp(0, 0x3ff) as u16;
                entries.push(((c as u16) << 10) | w);
            }
        }
    }
    starts.push(entries.len() as u32);
    Model {
        buckets: buckets_of(&keys),
        kinds: classes
            .iter()
            .map(|k| k.as_str())
            .collect::<Vec<_>>()
            .join(" "),
        prior,
        unseen,
        keys,
        starts,
        entries,
        threshold: 0,
        chars_quarters: p.chars_quarters,
    }
}

/// The features kept: met in at least `p.min_texts` texts, and of those the
/// `p.max_features` whose presence says most about the class (mutual information; ties by
/// hash), ascending.
fn select(docs: &[&Doc], classes: &[Kind], texts: &BTreeMap<u32, usize>, p: Params) -> Vec<u32> {
    let candidates: Vec<u32> = texts
        .iter()
        .filter(|(_, n)| **n >= p.min_texts)
        .map(|(h, _)| *h)
        .collect();
    let mut per = vec![vec![0u32; classes.len()]; candidates.len()];
    let mut class_n = vec![0f64; classes.len()];
    for d in docs {
        let c = classes.iter().position(|k| *k == d.label).unwrap_or(0);
        class_n[c] += 1.0;
        for h in &d.hashes {
            if let Ok(k) = candidates.binary_search(h) {
                per[k][c] += 1;
            }
        }
    }
    let n = docs.len() as f64;
    let term = |joint: f64, a: f64, b: f64| {
        if joint > 0.0 {
            joint / n * (joint * n / (a * b)).ln()
        } else {
            0.0
        }
    };
    let mut scored: Vec<(f64, u32)> = candidates
        .iter()
        .zip(&per)
        .map(|(h, row)| {
            let df: f64 = row.iter().map(|x| f64::from(*x)).sum();
            let mi: f64 = row
                .iter()
                .zip(&class_n)
                .map(|(x, cn)| {
                    let x = f64::from(*x);
                    term(x, df, *cn) + term(cn - x, n - df, *cn)
                })
                .sum();
            (mi, *h)
        })
        .collect();
    scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    let mut keys: Vec<u32> = scored
        .iter()
        .take(p.max_features)
        .map(|(_, h)| *h)
        .collect();
    keys.sort_unstable();
    keys
}

/// The model's class and confidence for a training text, `None` when it knows too few of
/// its features.
fn judge(m: &Model, d: &Doc) -> Option<(Kind, f64)> {
    let keys: Vec<u32> = d
        .hashes
        .iter()
        .filter_map(|h| m.keys.binary_search(h).ok().map(|k| k as u32))
        .collect();
    if known_words(&m.view(), &keys) < MIN_KNOWN {
        return None;
    }
    let (best, confidence, _) = decide(&m.view(), &keys)?;
    let kind = kind_of(&m.view(), best)?;
    Some((kind, confidence))
}

/// Cross-validated answers: per text, (confidence, acceptable) of the answers that are not
/// `unknown`, from a model fitted on the other folds.
pub fn cross_validate(docs: &[Doc], p: Params) -> Vec<(f64, bool)> {
    let mut out = Vec::new();
    for fold in 0..FOLDS {
        let train: Vec<&Doc> = docs
            .iter()
            .enumerate()
            .filter(|(i, _)| i % FOLDS != fold)
            .map(|(_, d)| d)
            .collect();
        let m = fit(&train, p);
        for d in docs.iter().skip(fold).step_by(FOLDS) {
            if let Some((kind, conf)) = judge(&m, d) {
                if kind != Kind::Unknown {
                    out.push((conf, d.accept.contains(&kind)));
                }
            }
        }
    }
    out
}

/// The lowest confidence (in thousandths) at and above which the answers given are right at
/// least [`TARGET_PRECISION`] of the time (never below [`LEAST_THRESHOLD`]).
pub fn choose_threshold(answers: &[(f64, bool)]) -> u16 {
    let mut sorted: Vec<(f64, bool)> = answers.to_vec();
    sorted.sort_by(|a, b| b.0.total_cmp(&a.0));
    let (mut right, mut n) = (0usize, 0usize);
    let mut best = 1.0f64;
    for (i, (conf, ok)) in sorted.iter().enumerate() {
        n += 1;
        right += usize::from(*ok);
        let last_of_its_value = sorted.get(i + 1).is_none_or(|next| next.0 < *conf);
        if last_of_its_value && right as f64 >= TARGET_PRECISION * n as f64 {
            best = *conf;
        }
    }
    let t = best.max(LEAST_THRESHOLD);
    ((t * 1000.0).ceil() as u16).min(1000)
}

/// The text of `weights.rs` for the corpora under `manifest`, and a summary of the training.
pub fn generate(manifest: &Path) -> Result<(String, String), String> {
    let stamp = stamp(manifest).map_err(|e| e.to_string())?;
    let docs = docs(manifest)?;
    let cv = cross_validate(&docs, PARAMS);
    let threshold = choose_threshold(&cv);
    let mut m = fit(&docs.iter().collect::<Vec<_>>(), PARAMS);
    m.threshold = threshold;
    let above: Vec<&(f64, bool)> = cv
        .iter()
        .filter(|(c, _)| (c * 1000.0).round() >= f64::from(threshold))
        .collect();
    let right_all = cv.iter().filter(|(_, ok)| *ok).count();
    let right_above = above.iter().filter(|(_, ok)| *ok).count();
    let summary = format!(
        "trained from {} texts: {} features, {} classes, {} entries; cross-validated: {} of {} answers acceptable, {} of {} at or above the threshold {:.3}",
        docs.len(),
        m.keys.len(),
        m.prior.len(),
        m.entries.len(),
        right_all,
        cv.len(),
        right_above,
        above.len(),
        f64::from(threshold) / 1000.0
    );
    let mut out = String::new();
    out.push_str(
        "// @generated by src/core/classify/model/train.rs from tests/data/*.toml; do not edit.\n",
    );
    out.push_str(&format!("{STAMP_PREFIX}{stamp}\n"));
    out.push_str("// Written again by `TRIAGE_REFRESH_MODEL=1 cargo test --lib committed_model_is_not_stale`.\n");
    out.push_str(&format!("// {summary}.\n"));
    out.push_str("//! The learned fallback's weights (generated; see `super::train`).\n\n");
    out.push_str("use super::Weights;\n\n");
    out.push_str(&format!("const KINDS: &str = {:?};\n", m.kinds));
    array(&mut out, "PRIOR", "i32", &m.prior);
    array(&mut out, "UNSEEN", "i32", &m.unseen);
    array(&mut out, "KEYS", "u32", &m.keys);
    array(&mut out, "BUCKETS", "u16", &m.buckets);
    array(&mut out, "STARTS", "u32", &m.starts);
    array(&mut out, "ENTRIES", "u16", &m.entries);
    out.push_str(&format!(
        "\n/// The committed model.\npub fn model() -> Weights<'static> {{\n    Weights {{\n        kinds: KINDS,\n        prior: &PRIOR,\n        unseen: &UNSEEN,\n        keys: &KEYS,\n        buckets: &BUCKETS,\n        starts: &STARTS,\n        entries: &ENTRIES,\n        threshold: {threshold},\n        chars_quarters: {},\n    }}\n}}\n",
        m.chars_quarters
    ));
    Ok((out, summary))
}

/// `static NAME: [TYPE; N] = [a,b,…];` wrapped at about 100 columns (a static array, not a
/// slice in a static: no pointer to relocate when the binary is loaded).
fn array<T: std::fmt::Display>(out: &mut String, name: &str, ty: &str, items: &[T]) {
    out.push_str(&format!(
        "\n#[rustfmt::skip]\nstatic {name}: [{ty}; {}] = [",
        items.len()
    ));
    let mut col = 100;
    for x in items {
        let s = format!("{x},");
        if col + s.len() > 100 {
            out.push_str("\n    ");
            col = 4;
        }
        out.push_str(&s);
        col += s.len();
    }
    out.push_str("\n];\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The committed weights are those of the training corpora and the code as they are now;
    /// with `TRIAGE_REFRESH_MODEL=1` this writes them first.
    #[test]
    fn committed_model_is_not_stale() {
        let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
        let refresh =
            std::env::var_os("TRIAGE_REFRESH_MODEL").is_some_and(|v| !v.is_empty() && v != "0");
        if refresh {
            let (text, summary) = generate(manifest).expect("the training corpora are readable");
            std::fs::write(manifest.join(COMMITTED), text).expect("weights.rs is writable");
            println!("{COMMITTED}: {summary}");
        }
        let want = stamp(manifest).expect("the model's inputs are readable");
        let text = std::fs::read_to_string(manifest.join(COMMITTED))
            .expect("src/core/classify/model/weights.rs is committed");
        assert_eq!(
            stamp_of(&text),
            Some(want.as_str()),
            "{COMMITTED} is stale (the training corpora or the model's code changed): run `TRIAGE_REFRESH_MODEL=1 cargo test --lib committed_model_is_not_stale` and commit it"
        );
    }

    /// The stamp follows the corpora (a text added, a file added), not line ends, and is read
    /// back from the line that carries it.
    #[test]
    fn the_model_stamp_follows_the_training_corpora() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir_all(dir.path().join("tests/data/holdout")).expect("mkdir");
        for f in CODE {
            let path = dir.path().join(f);
            std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
            std::fs::write(&path, "code\n").expect("write");
        }
        let corpus = dir.path().join("tests/data/a.toml");
        std::fs::write(&corpus, "[[case]]\nx = 1\n").expect("write");
        let before = stamp(dir.path()).expect("stamp");
        std::fs::write(&corpus, "[[case]]\r\nx = 1\r\n").expect("write");
        assert_eq!(stamp(dir.path()).expect("stamp"), before, "CRLF is LF");
        // The held-out texts are not training inputs.
        std::fs::write(dir.path().join("tests/data/holdout/b.toml"), "y").expect("write");
        assert_eq!(stamp(dir.path()).expect("stamp"), before);
        std::fs::write(&corpus, "[[case]]\nx = 2\n").expect("write");
        let changed = stamp(dir.path()).expect("stamp");
        assert_ne!(changed, before);
        std::fs::write(dir.path().join("tests/data/c.toml"), "").expect("write");
        let added = stamp(dir.path()).expect("stamp");
        assert_ne!(added, changed, "a new corpus file is a new input");
        let file = format!("// @generated\n{STAMP_PREFIX}{added}\npub static X: u8 = 0;\n");
        assert_eq!(stamp_of(&file), Some(added.as_str()));
        assert_eq!(stamp_of("// @generated\npub static X: u8 = 0;\n"), None);
    }

    /// Cross-validated figures for other parameters (`--ignored --nocapture`).
    #[test]
    #[ignore]
    fn explore_parameters() {
        let docs = docs(Path::new(env!("CARGO_MANIFEST_DIR"))).expect("docs");
        for alpha in [0.1, 0.3] {
            for chars_quarters in [1, 2, 4] {
                for max_features in [2048, 4096, 8192] {
                    let p = Params {
                        alpha,
                        min_texts: 2,
                        max_features,
                        chars_quarters,
                    };
                    let cv = cross_validate(&docs, p);
                    let t = choose_threshold(&cv);
                    let right = cv.iter().filter(|x| x.1).count();
                    let above: Vec<_> = cv
                        .iter()
                        .filter(|(c, _)| (c * 1000.0).round() >= f64::from(t))
                        .collect();
                    let ra = above.iter().filter(|x| x.1).count();
                    println!(
                        "{p:?}: {right} of {} right; threshold {t}: {ra} of {} above",
                        cv.len(),
                        above.len()
                    );
                }
            }
        }
    }

    #[test]
    fn the_threshold_is_the_lowest_confidence_that_keeps_the_answers_right() {
        // Sorted by confidence: 0.99 ok, 0.95 ok, 0.9 ok, 0.8 wrong, 0.7 ok, 0.6 wrong ×3.
        let answers = [
            (0.99, true),
            (0.95, true),
            (0.9, true),
            (0.8, false),
            (0.7, true),
            (0.6, false),
            (0.6, false),
            (0.6, false),
        ];
        // At 0.9: 3 of 3; at 0.8: 3 of 4 (75 %); at 0.7: 4 of 5 (80 %): below 90 %.
        assert_eq!(choose_threshold(&answers), 900);
        assert_eq!(
            choose_threshold(&[(0.3, true)]),
            500,
            "never below the least"
        );
    }
}
