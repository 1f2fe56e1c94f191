//! The hostile text the fuzzers feed every parser (issue 14): the in-process properties beside
//! each parser, and `tests/cli/fuzz.rs` (which includes this file) on the binary.

use proptest::prelude::*;

/// Text that looks like what the parsers read: JSON punctuation, escapes (lone surrogates
/// among them), TOML and glob syntax, Markdown fences, control characters, non-ASCII.
pub fn hostile_text() -> impl Strategy<Value = String> {
    let atoms = prop_oneof![
        Just("{".to_string()),
        Just("}".to_string()),
        Just("[".to_string()),
        Just("]".to_string()),
        Just("\"".to_string()),
        Just(":".to_string()),
        Just(",".to_string()),
        Just("\\ud83d".to_string()),
        Just("\\udc00".to_string()),
        Just("\\u0000".to_string()),
        Just("\\".to_string()),
        Just("**/".to_string()),
        Just("../".to_string()),
        Just("{a,b}".to_string()),
        Just("[!x]".to_string()),
        Just("```".to_string()),
        Just("~~~~".to_string()),
        Just("\n".to_string()),
        Just("=".to_string()),
        Just("[[classify.rules]]\n".to_string()),
        Just("\u{1b}[2J".to_string()),
        Just("999999999999999999999".to_string()),
        Just("d".to_string()),
        Just("é😀".to_string()),
        "[a-z0-9_.-]{1,8}",
    ];
    prop::collection::vec(atoms, 0..40).prop_map(|v| v.concat())
}
