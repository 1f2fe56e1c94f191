//! Name patterns for policy sections: `*` matches any run of characters, `?` one character.
//! Used for agent names and breaker keys (`"*-consultant"`, `"*"`).
//!
//! File globs (`files_exist`, `check-output --file`) are `globset`'s, checked here by
//! [`project_glob`] and walked by `check-output`.

use globset::{GlobBuilder, GlobMatcher};
use std::path::{Component, Path};

/// The longest file glob accepted (PATH_MAX).
const MAX_LEN: usize = 4096;

/// A file glob relative to the project, compiled; or why it cannot be one (absolute, `..`,
/// too long, bad syntax).
pub fn project_glob(pattern: &str) -> Result<GlobMatcher, String> {
    if pattern.len() > MAX_LEN {
        return Err(format!(
            "the glob is {} bytes long, more than a path may be ({MAX_LEN})",
            pattern.len()
        ));
    }
    if pattern.contains('\0') {
        return Err("the glob holds a NUL byte".into());
    }
    let path = Path::new(pattern);
    if path.is_absolute() || pattern.starts_with('~') {
        return Err(
            "the glob names a place outside the project; write it relative to the project folder"
                .into(),
        );
    }
    if path.components().any(|c| c == Component::ParentDir) {
        return Err(
            "the glob climbs out of the project with `..`; write it relative to the project folder"
                .into(),
        );
    }
    GlobBuilder::new(&normal(pattern))
        .literal_separator(true)
        .backslash_escape(true)
        .empty_alternates(true)
        .build()
        .map(|g| g.compile_matcher())
        .map_err(|e| format!("not a valid glob: {}", e.kind()))
}

/// `pattern` without `.` segments, empty segments or a trailing `/`.
pub fn normal(pattern: &str) -> String {
    pattern
        .split('/')
        .filter(|s| !s.is_empty() && *s != ".")
        .collect::<Vec<_>>()
        .join("/")
}

/// True when a path segment has no glob syntax.
pub fn is_literal(segment: &str) -> bool {
    !segment.contains(['*', '?', '[', ']', '{', '}', '\\'])
}

/// True when `name` matches `pattern`.
pub fn matches(pattern: &str, name: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let n: Vec<char> = name.chars().collect();
    let (mut pi, mut ni) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ni < n.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == n[ni]) {
            pi += 1;
            ni += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some((pi, ni));
            pi += 1;
        } else if let Some((sp, sn)) = star {
            pi = sp + 1;
            ni = sn + 1;
            star = Some((sp, sn + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&c| c == '*')
}

/// True when the pattern has a wildcard.
pub fn is_pattern(pattern: &str) -> bool {
    pattern.contains(['*', '?'])
}

/// How specific a matching pattern is: exact names last, then more literal characters.
/// Sorting ascending gives the order in which fields merge (least specific first).
pub fn specificity(pattern: &str) -> (bool, usize) {
    let literal = pattern.chars().filter(|c| *c != '*' && *c != '?').count();
    (!is_pattern(pattern), literal)
}

/// The patterns of `patterns` that match `name`, least specific first.
pub fn matching<'a, I>(patterns: I, name: &str) -> Vec<&'a str>
where
    I: IntoIterator<Item = &'a String>,
{
    let mut hits: Vec<&str> = patterns
        .into_iter()
        .map(String::as_str)
        .filter(|p| matches(p, name))
        .collect();
    hits.sort_by_key(|p| specificity(p));
    hits
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wildcards() {
        assert!(matches("*-consultant", "statistician-consultant"));
        assert!(!matches("*-consultant", "researcher"));
        assert!(matches("*", ""));
        assert!(matches("a?c", "abc"));
        assert!(matches("a*b*c", "aXXbYYc"));
        assert!(!matches("a*b*c", "aXXbYY"));
        assert!(matches("researcher", "researcher"));
    }

    #[test]
    fn exact_names_merge_last() {
        let pats: Vec<String> = ["researcher", "*", "re*"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(
            matching(&pats, "researcher"),
            vec!["*", "re*", "researcher"]
        );
    }
}
