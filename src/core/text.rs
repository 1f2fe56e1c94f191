//! Text that is safe to show on a terminal: control characters in caret notation, as `cat -v`
//! shows them (every message, table and path that comes from outside goes through here).

/// `text` with its control characters made visible, as `cat -v` does: `^[` for ESC, `^M` for
/// a carriage return, `^?` for DEL, `\u{9b}` for a C1 control. Newlines and tabs stay.
pub fn printable(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\n' | '\t' => out.push(c),
            '\u{7f}' => out.push_str("^?"),
            c if (c as u32) < 0x20 => {
                out.push('^');
                out.push(char::from(b'@' + c as u8));
            }
            c if c.is_control() || is_bidi_control(c) => {
                out.push_str(&format!("\\u{{{:x}}}", c as u32))
            }
            c => out.push(c),
        }
    }
    out
}

/// The bidirectional embeddings, overrides and isolates (U+202A–U+202E, U+2066–U+2069): on a
/// terminal they would make a cell read reversed, so [`printable`] shows them as `\u{202e}`.
fn is_bidi_control(c: char) -> bool {
    matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// [`printable`], keeping SGR sequences (`ESC [` digits and `;` `m`) whole.
pub fn printable_styled(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find('\u{1b}') {
        out.push_str(&printable(&rest[..i]));
        let after = &rest[i + 1..];
        let sgr = after.strip_prefix('[').and_then(|a| {
            let n = a.find(|c: char| !(c.is_ascii_digit() || c == ';'))?;
            a[n..].starts_with('m').then_some(n + 2)
        });
        match sgr {
            Some(len) => {
                out.push('\u{1b}');
                out.push_str(&after[..len]);
                rest = &after[len..];
            }
            None => {
                out.push_str("^[");
                rest = after;
            }
        }
    }
    out.push_str(&printable(rest));
    out
}

/// `n` and the noun, in agreement: `1 attempt`, `2 attempts` (a regular plural: `noun` + s).
pub fn count(n: impl Into<u64>, noun: &str) -> String {
    match n.into() {
        1 => format!("1 {noun}"),
        n => format!("{n} {noun}s"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_shows_control_characters_instead_of_sending_them() {
        assert_eq!(
            printable("a\u{1b}]0;owned\u{7}b\rc\u{7f}\u{9b}31m\td\n"),
            "a^[]0;owned^Gb^Mc^?\\u{9b}31m\td\n"
        );
        assert_eq!(printable("plain é ✓"), "plain é ✓");
    }

    #[test]
    fn text_shows_bidi_overrides_instead_of_obeying_them() {
        assert_eq!(
            printable("agent-\u{202e}gnp.exe\u{2066}x\u{2069}"),
            "agent-\\u{202e}gnp.exe\\u{2066}x\\u{2069}"
        );
        assert_eq!(printable("\u{200f}rtl mark"), "\u{200f}rtl mark");
    }
}
