//! The cache's automata match as `regex` does; a file is read back only when it is whole,
//! this policy's, this build's and this user's; a call that finds it compiles nothing.

use super::*;
use proptest::prelude::*;
use std::collections::HashMap;

/// Patterns from the shipped policies and the seeds, and ones that probe the edges: empty
/// matches, anchors, word boundaries, case folding, non-ASCII classes and literals.
const PATTERNS: &[&str] = &[
    r"\[\d+\]|https?://|\bdoi:|\(([A-Z][\w-]+)( et al\.)?,? \d{4}[a-z]?\)",
    r"(?i)lorem ipsum",
    r"\bTODO\b",
    r"(?i)^\W*(I.m sorry|I am sorry|I apologi[sz]e|as an AI)",
    r"(?im)^\s*(#{1,6}\s*|\*\*)executive summary",
    r"(?im)^\s*(#{1,6}\s*|\*\*)?strong points",
    r"(?i)\bverified\b",
    r"(?i)\bissues? found\b",
    r"(?i)style checklist",
    r"(?i)\bresult",
    r"\d(?:[.,]\d+)?(?:[eE][+-]?\d+)?\s*(?:%|°[CFK]?|[µμ]?[A-Za-zΩ]{1,5}(?:[/·*^][A-Za-z0-9µμ]{1,5})*)(?:\W|$)",
    r"(?i)corpus index .* not found",
    r"a*",
    r"x*$",
    r"(?m)^",
    r"\b",
    r"é+",
    r"(?i)straße",
    r"[^a]",
    r".{3}",
    r"\w+@\w+",
];

const TEXTS: &[&str] = &[
    "",
    "a",
    "plain ascii text with a result [12] and doi:10.1/x",
    "Lorem Ipsum dolor\nTODO: later\n## Executive summary\n",
    "I'm sorry, I cannot",
    "   I apologise for that",
    "## Strong points\n- one\n**Challenges**",
    "Verified: 3 claims; issues found: 2",
    "Result: 4.2 mol/L and 12 °C, 3 µm, 5 Ωm",
    "naïve café — “quoted” text with an em dash",
    "ÉÉé straße STRASSE Straße",
    "corpus index at docs/index.json not found",
    "a\u{300}b",
    "x@y and ü@ö",
    "Smith (Jones et al., 2020) wrote",
];

/// One matcher per pattern for the whole run (building tiers is what a first call pays).
fn shared(p: &'static str) -> Arc<Matcher> {
    static M: OnceLock<Mutex<HashMap<&'static str, Arc<Matcher>>>> = OnceLock::new();
    let mut map = M.get_or_init(Default::default).lock().unwrap();
    map.entry(p)
        .or_insert_with(|| Arc::new(Matcher::new(p)))
        .clone()
}

fn regex_find(p: &str, t: &str) -> Option<(usize, usize)> {
    regex::Regex::new(p)
        .unwrap()
        .find(t)
        .map(|m| (m.start(), m.end()))
}

#[test]
fn matchers_find_what_regex_finds() {
    for p in PATTERNS {
        let m = shared(p);
        for t in TEXTS {
            assert_eq!(m.find(t), Ok(regex_find(p, t)), "{p:?} on {t:?}");
        }
    }
}

#[test]
fn the_ascii_tier_answers_ascii_text_and_the_unicode_tier_the_rest() {
    let m = Matcher::new(r"(?i)lorem ipsum");
    assert_eq!(m.find("x LOREM ipsum"), Ok(Some((2, 13))));
    assert!(matches!(m.ascii.get(), Some(Some(_))));
    assert_eq!(m.find("é lorem ipsum"), Ok(Some((3, 14))));
    assert!(matches!(m.unicode.get(), Some(Some(_))));
    // A Unicode word boundary has no Unicode tier: non-ASCII text goes to the regex.
    let w = Matcher::new(r"\bTODO\b");
    assert_eq!(w.find("é TODO"), Ok(Some((3, 7))));
    assert!(matches!(w.unicode.get(), Some(None)));
}

#[test]
fn searches_skip_to_the_bytes_that_can_start_a_match() {
    let accel = |p: &str| {
        let m = Matcher::new(p);
        let _ = m.find("x");
        let tier = m.ascii.get().cloned().flatten().unwrap();
        tier.fwd.accel.clone()
    };
    assert_eq!(accel(r"(?i)lorem ipsum"), Some(b"Ll".to_vec()));
    assert_eq!(accel(r"\bTODO\b"), Some(b"T".to_vec()));
    assert_eq!(
        accel(r"\[\d+\]|https?://|\bdoi:|\(([A-Z][\w-]+)( et al\.)?,? \d{4}[a-z]?\)"),
        Some(b"([dh".to_vec())
    );
    assert_eq!(accel(r"\w+@"), None, "too many bytes to skip to");
}

#[test]
fn a_pattern_regex_refuses_is_refused_with_its_words() {
    let huge = format!("(?:{}){{1000}}", r"\w{100}");
    let m = Matcher::new(&huge);
    let why = m.find("abc").unwrap_err();
    assert!(why.contains("exceeds size limit"), "{why}");
    assert_eq!(m.check(), Err(why));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]
    #[test]
    fn matchers_agree_with_regex_on_random_text(
        p in prop::sample::select(PATTERNS.to_vec()),
        parts in proptest::collection::vec(prop::sample::select(vec![
            "a", "A", "x", "1", "42", " ", "\n", "[3]", "doi:", "http://", "lorem ipsum",
            "LOREM IPSUM", "todo", "TODO", "I'm sorry", "#", "**", "executive summary",
            "verified", "é", "ß", "µ", "°C", "Ω", "—", ".", ",", "@", "(Smith, 2020)",
            "corpus index", "not found", "result", "e+5", "mol/L",
        ]), 0..16),
    ) {
        let t = parts.concat();
        prop_assert_eq!(shared(p).find(&t), Ok(regex_find(p, &t)));
    }
}

/// A file holding every pattern above, with both tiers built where they can be.
fn file(policy: &PolicyText) -> (Vec<u8>, HashMap<String, Arc<Matcher>>) {
    let mut r = HashMap::new();
    for p in PATTERNS {
        let m = shared(p);
        let _ = m.find("ascii");
        let _ = m.find("é");
        r.insert(p.to_string(), m);
    }
    let all = r.iter().map(|(p, m)| (p.clone(), m.clone())).collect();
    (encode(policy, all), r)
}

#[test]
fn a_file_reads_back_as_written_and_compiles_nothing() {
    let policy = identify("[agents.x.output]\n");
    let (bytes, r) = file(&policy);
    let entries = decode(&bytes, &policy).expect("reads back");
    assert_eq!(entries.len(), PATTERNS.len());
    for e in entries {
        let m = &r[&e.pattern];
        assert_eq!(e.usable.as_ref(), m.usable.get());
        assert_eq!(e.ascii.as_ref(), m.ascii.get());
        assert_eq!(e.unicode.as_ref(), m.unicode.get());
        // Restored as a call that finds the file restores it, it matches without building
        // an automaton or compiling the regex, wherever a tier was stored.
        let restored = Matcher::new(&e.pattern);
        let _ = restored.usable.set(e.usable.clone().unwrap());
        let _ = restored.ascii.set(e.ascii.clone().unwrap());
        for t in TEXTS.iter().filter(|t| t.is_ascii()) {
            assert_eq!(restored.find(t), Ok(regex_find(&e.pattern, t)));
        }
        assert!(restored.regex.get().is_none(), "{} compiled", e.pattern);
        assert!(restored.unicode.get().is_none());
    }
}

#[test]
fn a_cut_or_damaged_file_is_never_read() {
    let policy = identify("x");
    let (bytes, _) = file(&policy);
    for len in (0..bytes.len()).step_by(7).chain([bytes.len() - 1]) {
        assert!(decode(&bytes[..len], &policy).is_none(), "cut at {len}");
    }
    for at in (0..bytes.len()).step_by(13) {
        for flip in [0x01, 0x80] {
            let mut b = bytes.clone();
            b[at] ^= flip;
            assert!(decode(&b, &policy).is_none(), "flip {flip:x} at {at}");
        }
    }
    let mut longer = bytes.clone();
    longer.push(0);
    assert!(decode(&longer, &policy).is_none());
}

#[test]
fn a_file_of_another_policy_build_or_format_is_stale() {
    let policy = identify("a");
    let (bytes, _) = file(&policy);
    assert!(decode(&bytes, &policy).is_some());
    assert!(decode(&bytes, &identify("b")).is_none(), "another policy");
    // Another format, another build (its id), another text under this one's name (a hash
    // collision): each header field changed, with a checksum made to fit.
    let format = MAGIC.len();
    let build = format + 4 + 4;
    let text = build + BUILD_ID.len() + 4;
    for at in [format, build, text] {
        let mut b = bytes[..bytes.len() - 8].to_vec();
        b[at] ^= 1;
        let sum = checksum(&b);
        b.extend_from_slice(&sum.to_le_bytes());
        assert!(decode(&b, &policy).is_none(), "header byte {at}");
    }
}

#[test]
fn only_a_private_file_of_this_user_is_read() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("cache").join("triage");
    crate::store::files::set_private_dir(&root);
    let policy = identify("[retry]\n");
    let target = path(&root, &policy);
    let (bytes, _) = file(&policy);
    crate::store::files::write_cache(&target, &bytes).unwrap();
    let mode = std::fs::metadata(&target).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    assert_eq!(load(&root, &policy), Ok(true));
    // Open to others: refused, and said so.
    std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o644)).unwrap();
    let refused = load(&root, &policy).unwrap_err();
    assert!(refused.contains("lets others in"), "{refused}");
    std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o600)).unwrap();
    // Another user's (when this test may give it away): refused.
    let chown = std::process::Command::new("chown")
        .arg("65534")
        .arg(&target)
        .status();
    if chown.is_ok_and(|s| s.success()) {
        let refused = load(&root, &policy).unwrap_err();
        assert!(refused.contains("another user"), "{refused}");
    } else {
        println!("skipped the other user's file: cannot chown here (not root)");
    }
    // A link to a sound file: refused.
    let real = dir.path().join("real.bin");
    std::fs::write(&real, &bytes).unwrap();
    std::fs::set_permissions(&real, std::fs::Permissions::from_mode(0o600)).unwrap();
    std::fs::remove_file(&target).unwrap();
    std::os::unix::fs::symlink(&real, &target).unwrap();
    let refused = load(&root, &policy).unwrap_err();
    assert!(refused.contains("symbolic link"), "{refused}");
    // A missing or damaged one is only a miss.
    std::fs::remove_file(&target).unwrap();
    assert_eq!(load(&root, &identify("[retry]\n")), Ok(false));
    std::fs::write(&target, b"triage-patterns\nshort").unwrap();
    std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o600)).unwrap();
    assert_eq!(load(&root, &policy), Ok(false));
}

#[test]
fn the_checksum_sees_every_byte() {
    let base = checksum(b"0123456789abcdef01");
    for i in 0..18 {
        let mut b = *b"0123456789abcdef01";
        b[i] ^= 4;
        assert_ne!(checksum(&b), base, "byte {i}");
    }
    assert_ne!(checksum(b""), checksum(b"\0"));
}

#[test]
fn the_cache_folder_is_the_users_own_and_never_a_projects() {
    let os = |s: &str| Some(std::ffi::OsString::from(s));
    assert_eq!(
        user_dir(os("/x/cache"), os("/home/u")),
        Some(PathBuf::from("/x/cache/triage"))
    );
    assert_eq!(
        user_dir(None, os("/home/u")),
        Some(PathBuf::from("/home/u/.cache/triage"))
    );
    // A relative or empty XDG_CACHE_HOME is not one (the XDG rule): `~/.cache` serves.
    for bad in ["", ".triage", "./cache", "cache"] {
        assert_eq!(
            user_dir(os(bad), os("/home/u")),
            Some(PathBuf::from("/home/u/.cache/triage")),
            "{bad:?}"
        );
    }
    // No absolute HOME either: no cache at all, rather than one in the current folder.
    for home in [None, os(""), os("."), os("home")] {
        assert_eq!(user_dir(None, home.clone()), None, "{home:?}");
        assert_eq!(user_dir(os("rel"), home.clone()), None, "{home:?}");
    }
}

#[test]
fn a_cache_folder_that_is_a_link_or_open_to_others_is_refused() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let policy = identify("[breaker]\n");
    let (bytes, _) = file(&policy);
    // A link to a folder holding a sound file: not read, and said so.
    let real = dir.path().join("real");
    std::fs::create_dir(&real).unwrap();
    std::fs::set_permissions(&real, std::fs::Permissions::from_mode(0o700)).unwrap();
    std::fs::write(path(&real, &policy), &bytes).unwrap();
    std::fs::set_permissions(path(&real, &policy), std::fs::Permissions::from_mode(0o600)).unwrap();
    let linked = dir.path().join("linked").join("triage");
    std::fs::create_dir(linked.parent().unwrap()).unwrap();
    std::os::unix::fs::symlink(&real, &linked).unwrap();
    crate::store::files::set_private_dir(&linked);
    let refused = load(&linked, &policy).unwrap_err();
    assert!(refused.contains("symbolic link"), "{refused}");
    // Writable by its group: the same.
    let loose = dir.path().join("loose").join("triage");
    std::fs::create_dir_all(&loose).unwrap();
    std::fs::set_permissions(&loose, std::fs::Permissions::from_mode(0o770)).unwrap();
    std::fs::write(path(&loose, &policy), &bytes).unwrap();
    std::fs::set_permissions(
        path(&loose, &policy),
        std::fs::Permissions::from_mode(0o600),
    )
    .unwrap();
    crate::store::files::set_private_dir(&loose);
    let refused = load(&loose, &policy).unwrap_err();
    assert!(refused.contains("writable by its group"), "{refused}");
    // A folder that is not there yet is only a miss, and is made 0700 by the first write.
    let fresh = dir.path().join("fresh").join("triage");
    crate::store::files::set_private_dir(&fresh);
    assert_eq!(load(&fresh, &policy), Ok(false));
    crate::store::files::write_cache(&path(&fresh, &policy), &bytes).unwrap();
    let mode = std::fs::metadata(&fresh).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o700);
    assert_eq!(load(&fresh, &policy), Ok(true));
}
