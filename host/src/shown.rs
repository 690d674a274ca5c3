//! Text a plugin said, made safe where a person or a parser reads it: a terminal (`wasmop
//! status`, `wasmop check`) and a Prometheus label value (`/metrics`).
//!
//! `describe` validates the version and every identifier (see `runtime::describe`), so with a
//! valid declaration nothing here changes a byte. It is the second wall: last errors quote
//! plugin messages, `wasmop status` reads a host it does not control, and a future field must
//! not become a forged table row or metric series by being forgotten in a validator.

use std::borrow::Cow;

/// Whether `c` must not reach a terminal raw: C0/C1 controls (newlines, carriage returns,
/// `ESC` that starts escape sequences, `DEL`), the Unicode line and paragraph separators, and
/// the bidi controls that make a line read differently from its bytes.
fn unsafe_on_terminal(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{2028}' | '\u{2029}' | '\u{061c}' | '\u{200e}' | '\u{200f}'
                | '\u{202a}'..='\u{202e}'
                | '\u{2066}'..='\u{2069}'
        )
}

/// `s` with every character a terminal would act on written as `\u{..}` (and `\` as `\\`, so
/// an escape cannot be forged); borrowed when there is none.
pub fn terminal(s: &str) -> Cow<'_, str> {
    if !s.chars().any(|c| unsafe_on_terminal(c) || c == '\\') {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if c == '\\' {
            out.push_str("\\\\");
        } else if unsafe_on_terminal(c) {
            out.push_str(&format!("\\u{{{:x}}}", u32::from(c)));
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// `s` as the Prometheus text exposition format wants a label value between its quotes: `\`,
/// `"` and newline escaped as `\\`, `\"` and `\n` (prometheus-client 0.24 writes label values
/// as they are). Other characters are legal in a label value and left alone.
pub fn label_value(s: &str) -> Cow<'_, str> {
    if !s.contains(['\\', '"', '\n']) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_terminal_sees_no_control_escape_or_bidi_character() {
        assert!(matches!(terminal("1.2.0-rc.1+build"), Cow::Borrowed(_)));
        let shown = terminal("1\nforged  row\r\u{1b}[2J\u{202e}x\u{2028}\\u{41}");
        assert_eq!(
            shown,
            "1\\u{a}forged  row\\u{d}\\u{1b}[2J\\u{202e}x\\u{2028}\\\\u{41}"
        );
        assert!(!shown.chars().any(unsafe_on_terminal));
    }

    #[test]
    fn label_values_are_escaped_as_the_exposition_format_says() {
        assert!(matches!(label_value("1.2.0"), Cow::Borrowed(_)));
        assert_eq!(label_value("1\"} 1\n# HELP x\\"), "1\\\"} 1\\n# HELP x\\\\");
    }
}
