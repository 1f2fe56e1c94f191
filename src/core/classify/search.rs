//! A search that found nothing: grep, rg and their kin exit 1 when no line matched, and print
//! nothing. The exit status of a shell command line is its last command's, so the program that
//! answers is the last one of the line (after `&&`, `;`, the last stage of a pipe).

/// Programs whose exit status 1 means "no match".
const SEARCHES: &[&str] = &[
    "grep", "egrep", "fgrep", "zgrep", "rg", "ag", "ack", "pgrep", "findstr",
];

/// Words that run the command after them and pass its exit status on.
const WRAPPERS: &[&str] = &["sudo", "command", "exec", "time", "nice", "env", "timeout"];

/// Whether the command line's exit status is a search program's.
pub fn is_search(command: &str) -> bool {
    let Some(last) = segments(command).into_iter().rev().find(|s| !s.is_empty()) else {
        return false;
    };
    let mut words = last.iter().map(String::as_str).peekable();
    // Leading assignments and wrappers (`LC_ALL=C timeout 30 grep …`); a `!` inverts the
    // status, so exit 1 is then a match.
    while let Some(w) = words.peek() {
        let assignment = w.contains('=') && !w.starts_with('-') && !w.starts_with('=');
        let duration = w.bytes().next().is_some_and(|b| b.is_ascii_digit());
        if assignment || WRAPPERS.contains(w) || w.starts_with('-') || duration {
            words.next();
        } else {
            break;
        }
    }
    let Some(program) = words.next() else {
        return false;
    };
    let program = program.rsplit('/').next().unwrap_or(program);
    if program == "git" {
        return words.find(|w| !w.starts_with('-')) == Some("grep");
    }
    SEARCHES.contains(&program)
}

/// The simple commands of a command line, each as its words: split at `|`, `||`, `&&`, `&`,
/// `;` and line breaks outside quotes. Quotes are removed, backslash escapes kept as written.
fn segments(command: &str) -> Vec<Vec<String>> {
    let mut out: Vec<Vec<String>> = vec![Vec::new()];
    let mut word = String::new();
    let mut in_word = false;
    let mut quote: Option<char> = None;
    let mut chars = command.chars();
    let end_word = |out: &mut Vec<Vec<String>>, word: &mut String, in_word: &mut bool| {
        if *in_word {
            if let Some(seg) = out.last_mut() {
                seg.push(std::mem::take(word));
            }
            *in_word = false;
        }
    };
    while let Some(c) = chars.next() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some('"'), '\\') => {
                word.extend(chars.next());
            }
            (Some(_), c) => word.push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                in_word = true;
            }
            (None, '\\') => {
                word.extend(chars.next());
                in_word = true;
            }
            (None, '|' | '&' | ';' | '\n' | '(' | ')') => {
                end_word(&mut out, &mut word, &mut in_word);
                if out.last().is_some_and(|s| !s.is_empty()) {
                    out.push(Vec::new());
                }
            }
            (None, c) if c.is_whitespace() => end_word(&mut out, &mut word, &mut in_word),
            (None, c) => {
                word.push(c);
                in_word = true;
            }
        }
    }
    end_word(&mut out, &mut word, &mut in_word);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_command_of_the_line_answers() {
        for cmd in [
            "grep -rn TODO src",
            "rg 'fn main' --type rust",
            "cd src && grep -E 'a|b' *.rs",
            "cat log.txt | grep -i error",
            "LC_ALL=C timeout 30 /usr/bin/grep -q needle file",
            "git grep -n \"foo;bar\"",
            "git --no-pager grep needle",
            "pgrep -f 'node server'",
        ] {
            assert!(is_search(cmd), "{cmd}");
        }
        for cmd in [
            "grep foo file | wc -l",
            "grep foo file && make",
            "! grep -q foo file",
            "make test",
            "git log --grep foo",
            "echo 'grep'",
            "",
            "   ",
        ] {
            assert!(!is_search(cmd), "{cmd}");
        }
    }
}
