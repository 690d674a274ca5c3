//! Rendering an error for a log field, a status line or a plugin's message: the one renderer
//! every crate uses, so an error reads the same wherever it is reported.

/// The error chain of `e` on one line (`outer: cause: root cause`), for log fields.
pub fn chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::chain;

    #[derive(Debug, thiserror::Error)]
    #[error("outer")]
    struct Outer(#[source] std::io::Error);

    #[test]
    fn every_cause_is_joined_on_one_line() {
        let e = Outer(std::io::Error::other("root"));
        assert_eq!(chain(&e), "outer: root");
    }
}
