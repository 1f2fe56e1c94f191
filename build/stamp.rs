// The stamp of the classifier's committed automata (src/core/classify/builtin_automata.rs):
// a hash of everything they are generated from — the rule table, the generator, the encoder
// and the locked versions of the two crates that determinize and minimize them. build.rs
// uses the committed file only when its stamp is this one (else it generates them again), and
// a lib test (`core::dfa::tests`) fails while the committed file is stale. Included by both
// (`include!`), so it is written for either: no crate-level items, std only.

/// The files the automata are generated from, relative to the package.
const AUTOMATA_INPUTS: [&str; 3] = [
    "src/core/classify/rules.rs",
    "build/automata.rs",
    "src/core/dfa/encode.rs",
];

/// The line of the committed file that carries its stamp.
const AUTOMATA_STAMP_PREFIX: &str = "// automata-stamp: ";

/// The stamp of the inputs under `manifest`: FNV-1a over each file (line ends normalized, so
/// a checkout with CRLF line ends gets the same stamp) and the locked versions of
/// regex-automata and regex-syntax.
fn automata_stamp(manifest: &std::path::Path) -> std::io::Result<String> {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut eat = |bytes: &[u8]| {
        for &b in bytes {
            if b != b'\r' {
                h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
            }
        }
        h = (h ^ 0xff).wrapping_mul(0x0100_0000_01b3);
    };
    for f in AUTOMATA_INPUTS {
        eat(&std::fs::read(manifest.join(f))?);
    }
    let lock = std::fs::read_to_string(manifest.join("Cargo.lock")).unwrap_or_default();
    for krate in ["regex-automata", "regex-syntax"] {
        let name = format!("name = \"{krate}\"");
        let mut lines = lock.lines().skip_while(|l| l.trim() != name);
        lines.next();
        let version = lines.next().unwrap_or_default();
        eat(format!("{krate} {}", version.trim()).as_bytes());
    }
    Ok(format!("{h:016x}"))
}

/// The stamp a generated file carries, if any.
fn automata_stamp_of(text: &str) -> Option<&str> {
    text.lines()
        .take(4)
        .find_map(|l| l.strip_prefix(AUTOMATA_STAMP_PREFIX))
        .and_then(|rest| rest.split_whitespace().next())
}
