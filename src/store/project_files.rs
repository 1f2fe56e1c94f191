//! The files an output check names (`files_exist` globs, `--file`, the input's `files`),
//! found under the project folder and nowhere else, and the output check that looks them up
//! ([`judge`]: `check-output`, its hooks and `run --until-output-ok` judge through it).
//!
//! Globs are `globset`'s (ripgrep's): `*` and `?` within a path segment, `**` across
//! segments, `[ab]` classes and `{L2,docs}` alternatives. A glob is hostile input: one that is
//! absolute, climbs out with `..`, or is longer than a path may be is refused with a reason;
//! the walk starts at the glob's literal prefix, never follows a link to a folder, counts a
//! linked file only when it resolves inside the project, and visits a bounded number of
//! entries without recursion, so no glob can make it slow or reach outside.

use crate::core::glob::{is_literal, normal, project_glob};
use crate::core::output_check::{self, FileFacts, Input, Verdict};
use crate::core::policy::{OutputRules, Policy};
use crate::core::vocab::Criticality;
use crate::store::ground::Ground;
use std::path::{Path, PathBuf};

/// Judges one output by the agent's rules in `policy` overlaid by `flags`, its files looked
/// up under the project; the rules' problems are warnings. Returns the rules and criticality
/// it used too (the loop guard needs `max_rejections`).
pub fn judge(
    g: &Ground,
    policy: &Policy,
    input: &Input,
    flags: &OutputRules,
) -> (Verdict, OutputRules, Criticality) {
    let judged =
        output_check::judge_input(policy, input, flags, |pattern| expand(&g.project, pattern));
    for w in &judged.0.warnings {
        g.warn(w);
    }
    judged
}

/// Entries visited for one glob at most.
const MAX_ENTRIES: usize = 100_000;
/// Folder levels walked below the glob's literal prefix at most.
const MAX_DEPTH: usize = 64;

/// The files `pattern` matches under `project`, with their sizes; a refused glob says why.
pub fn expand(project: &Path, pattern: &str) -> FileFacts {
    let mut facts = FileFacts {
        pattern: pattern.to_string(),
        ..FileFacts::default()
    };
    let matcher = match project_glob(pattern) {
        Ok(m) => m,
        Err(why) => {
            facts.refused = Some(why);
            return facts;
        }
    };
    let inside = Inside::new(project);
    let norm = normal(pattern);
    let segments: Vec<&str> = norm.split('/').filter(|s| !s.is_empty()).collect();
    let literal = segments.iter().take_while(|s| is_literal(s)).count();
    if literal == segments.len() {
        // A plain path: one look, no walk.
        if let Some(size) = inside.file_size(&project.join(&norm)) {
            facts.found.push((norm, size));
        }
        return facts;
    }
    let prefix = segments[..literal].join("/");
    let below = if segments[literal..].contains(&"**") {
        MAX_DEPTH
    } else {
        segments.len() - literal
    };
    let hidden = segments.iter().any(|s| s.starts_with('.'));
    let mut budget = MAX_ENTRIES;
    let mut stack = vec![(project.join(&prefix), prefix, 0usize)];
    while let Some((dir, rel, depth)) = stack.pop() {
        if !inside.dir(&dir) {
            continue;
        }
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            if budget == 0 {
                if facts.found.is_empty() {
                    facts.refused = Some(format!(
                        "no match in the first {MAX_ENTRIES} entries searched (the search is bounded); name a narrower glob"
                    ));
                }
                facts.found.sort();
                return facts;
            }
            budget -= 1;
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.starts_with('.') && !hidden {
                continue;
            }
            let child = if rel.is_empty() {
                name
            } else {
                format!("{rel}/{name}")
            };
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            if kind.is_dir() {
                if depth + 1 < below {
                    stack.push((entry.path(), child, depth + 1));
                }
            } else if matcher.is_match(&child) {
                if let Some(size) = inside.file_size(&entry.path()) {
                    facts.found.push((child, size));
                }
            }
        }
    }
    facts.found.sort();
    facts
}

/// The project folder, resolved once: what is inside it.
struct Inside {
    root: Option<PathBuf>,
}

impl Inside {
    fn new(project: &Path) -> Inside {
        Inside {
            root: std::fs::canonicalize(project).ok(),
        }
    }

    /// True when `path` resolves to a place inside the project (links resolved).
    fn contains(&self, path: &Path) -> bool {
        match (&self.root, std::fs::canonicalize(path)) {
            (Some(root), Ok(real)) => real.starts_with(root),
            _ => false,
        }
    }

    /// A folder inside the project, reached without following a link.
    fn dir(&self, path: &Path) -> bool {
        std::fs::symlink_metadata(path).is_ok_and(|m| m.is_dir()) && self.contains(path)
    }

    /// The size of a regular file inside the project (a link counts only when it resolves
    /// inside), or `None`.
    fn file_size(&self, path: &Path) -> Option<u64> {
        let m = std::fs::metadata(path).ok()?;
        (m.is_file() && self.contains(path)).then_some(m.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hostile_input::hostile_text;
    use proptest::prelude::*;

    fn tree() -> tempfile::TempDir {
        let d = tempfile::tempdir().expect("tempdir");
        for (p, body) in [
            ("L2/a.md", "a"),
            ("L2/deep/b.md", "b"),
            ("docs/c.md", "c"),
            ("a.txt", "x"),
            ("b.txt", ""),
            (".hidden/h.md", "h"),
        ] {
            let path = d.path().join(p);
            std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
            std::fs::write(path, body).expect("write");
        }
        d
    }

    fn found(d: &Path, pattern: &str) -> Vec<String> {
        let f = expand(d, pattern);
        assert_eq!(f.refused, None, "{pattern}");
        f.found.into_iter().map(|(p, _)| p).collect()
    }

    #[test]
    fn real_glob_syntax() {
        let d = tree();
        assert_eq!(found(d.path(), "L2/**"), ["L2/a.md", "L2/deep/b.md"]);
        assert_eq!(found(d.path(), "L2/*"), ["L2/a.md"]);
        assert_eq!(found(d.path(), "[ab].txt"), ["a.txt", "b.txt"]);
        assert_eq!(found(d.path(), "{L2,docs}/*.md"), ["L2/a.md", "docs/c.md"]);
        assert_eq!(
            found(d.path(), "**/*.md"),
            ["L2/a.md", "L2/deep/b.md", "docs/c.md"]
        );
        assert_eq!(found(d.path(), "./L2/a.md"), ["L2/a.md"]);
        assert_eq!(found(d.path(), ".hidden/*.md"), [".hidden/h.md"]);
        assert!(found(d.path(), "nothing/*").is_empty());
    }

    #[test]
    fn nothing_outside_the_project() {
        let d = tree();
        for bad in ["/etc/host*", "../*", "L2/../../*", "~/x", "/etc/hostname"] {
            let f = expand(d.path(), bad);
            assert!(f.refused.is_some() && f.found.is_empty(), "{bad}");
        }
        std::os::unix::fs::symlink("/etc", d.path().join("etc")).expect("link");
        assert!(found(d.path(), "etc/host*").is_empty());
        assert!(found(d.path(), "etc/hostname").is_empty());
        assert!(found(d.path(), "**/hostname").is_empty());
        std::os::unix::fs::symlink(d.path().join("a.txt"), d.path().join("link.txt"))
            .expect("link");
        assert_eq!(found(d.path(), "link.txt"), ["link.txt"]);
    }

    #[test]
    fn hostile_globs_are_bounded() {
        let d = tree();
        let many = vec!["**"; 300].join("/");
        assert!(found(d.path(), &format!("{many}/x")).is_empty());
        let long = "a/".repeat(15_000);
        assert!(expand(d.path(), &long).refused.is_some());
        let path = "a/".repeat(2000);
        assert!(found(d.path(), &path).is_empty());
        assert!(expand(d.path(), "[").refused.is_some());
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]

        #[test]
        fn globs_never_reach_outside_the_project(pattern in hostile_text()) {
            let d = tempfile::tempdir().unwrap();
            std::fs::create_dir_all(d.path().join("L2/x")).unwrap();
            std::fs::write(d.path().join("L2/a.md"), "a").unwrap();
            std::os::unix::fs::symlink("/etc", d.path().join("etc")).unwrap();
            let facts = expand(d.path(), &pattern);
            for (p, _) in &facts.found {
                prop_assert!(p.starts_with("L2/"), "{} matched {}", pattern, p);
            }
        }
    }
}
