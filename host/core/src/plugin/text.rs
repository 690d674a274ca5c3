//! Text a plugin controls, made safe to show: [`PluginText`] and the one function that
//! escapes it, [`escape`].
//!
//! A plugin's log messages, its error messages, what it prints, its trap messages and the
//! names it puts into a denied call all reach the host's log (text or JSON), Events and
//! `wasmop status`. Shown raw, a newline or carriage return forges log lines, an ANSI escape
//! rewrites the operator's terminal, and a bidi override (U+202E) or line separator (U+2028,
//! which JSON passes through and many viewers break on) makes a line read as something else.
//! So every such string is escaped once, where it enters the host, into a [`PluginText`].
//!
//! # Guarantees
//! The escaped text holds no control character (C0, DEL, C1), no line or paragraph separator
//! and no bidi control: each is shown as a visible escape (`\n`, `\r`, `\t`, else
//! `\u{1b}`-style with the code point in lowercase hex), and `\` itself as `\\`, so the
//! escaping can be read back unambiguously. Every other character, any script, is kept.
//! The escaped form of `n` bytes is at most `6 n` bytes (`\u{7f}` for one byte).

use std::fmt;

/// Text from a plugin, escaped for display (see the module docs). Built only by escaping.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct PluginText(String);

impl PluginText {
    /// `text` escaped.
    pub fn new(text: &str) -> Self {
        let mut out = String::with_capacity(text.len());
        // Writing into a `String` cannot fail.
        let _ = escape(&mut out, text);
        Self(out)
    }

    /// `text` cut to at most `cap` bytes (at a character boundary), then escaped: the cap
    /// bounds what the plugin sent, the escaping at most multiplies it by 6.
    pub fn cut(text: &str, cap: usize) -> Self {
        Self::new(cut(text, cap))
    }

    /// The escaped text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The escaped text, owned.
    pub fn into_string(self) -> String {
        self.0
    }
}

impl fmt::Display for PluginText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<&str> for PluginText {
    /// Escapes `text`.
    fn from(text: &str) -> Self {
        Self::new(text)
    }
}

impl PartialEq<str> for PluginText {
    fn eq(&self, other: &str) -> bool {
        self.0 == other
    }
}

impl AsRef<str> for PluginText {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

/// Shows a borrowed plugin string escaped, formatting it only when displayed (for log
/// macros, whose arguments are formatted only when the line is enabled).
#[derive(Debug, Clone, Copy)]
pub struct Escaped<'a>(pub &'a str);

impl fmt::Display for Escaped<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        escape(f, self.0)
    }
}

/// `text` cut to at most `cap` bytes at a character boundary.
pub fn cut(text: &str, cap: usize) -> &str {
    if text.len() <= cap {
        return text;
    }
    let mut end = cap;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// Whether `c` must not be shown as it is: control characters (C0, DEL, C1, which includes
/// NEL U+0085 and the 8-bit CSI U+009B), the line and paragraph separators, and the
/// characters that change the direction of text (marks, embeddings, overrides, isolates).
pub fn is_unsafe(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{2028}' | '\u{2029}'
                | '\u{200e}' | '\u{200f}' | '\u{061c}'
                | '\u{202a}'..='\u{202e}'
                | '\u{2066}'..='\u{2069}'
        )
}

/// Writes `text` to `out` escaped: the one function every plugin string goes through.
pub(crate) fn escape(out: &mut impl fmt::Write, text: &str) -> fmt::Result {
    let mut rest = text;
    while let Some(at) = rest.find(|c: char| c == '\\' || is_unsafe(c)) {
        out.write_str(&rest[..at])?;
        let c = rest[at..].chars().next().unwrap_or_default();
        match c {
            '\\' => out.write_str("\\\\")?,
            '\n' => out.write_str("\\n")?,
            '\r' => out.write_str("\\r")?,
            '\t' => out.write_str("\\t")?,
            c => write!(out, "\\u{{{:x}}}", u32::from(c))?,
        }
        rest = &rest[at + c.len_utf8()..];
    }
    out.write_str(rest)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_separator_and_bidi_characters_become_visible_escapes() {
        let hostile = "a\nb\rc\td\u{1b}[31me\u{7f}\u{85}\u{9b}f\u{2028}\u{2029}g\u{202e}\u{2066}\u{200e}\u{200f}\u{61c}\\h\0";
        assert_eq!(
            PluginText::new(hostile).as_str(),
            r"a\nb\rc\td\u{1b}[31me\u{7f}\u{85}\u{9b}f\u{2028}\u{2029}g\u{202e}\u{2066}\u{200e}\u{200f}\u{61c}\\h\u{0}"
        );
        assert!(!PluginText::new(hostile).as_str().chars().any(is_unsafe));
    }

    #[test]
    fn other_text_of_any_script_is_kept() {
        let text = "Grüße, 世界! ✓ ok — عربى";
        assert_eq!(PluginText::new(text).as_str(), text);
        assert_eq!(Escaped(text).to_string(), text);
        assert_eq!(Escaped("x\ny").to_string(), r"x\ny");
    }

    #[test]
    fn cut_caps_the_input_before_escaping() {
        assert_eq!(PluginText::cut("ab\ncd", 3).as_str(), r"ab\n");
        assert_eq!(PluginText::cut("é\n", 1).as_str(), "");
        let worst = "\u{7f}".repeat(10);
        assert_eq!(PluginText::new(&worst).as_str().len(), 60);
    }
}
