//! Kubernetes identifiers as a plugin hands them to the host — object names, namespaces,
//! groups, versions, kinds and label selectors — checked once, at the boundary, against the
//! API server's own grammars before anything is built from them.
//!
//! Why here and not at the API server: the host builds request paths from these strings
//! (`/apis/{group}/{version}/namespaces/{namespace}/{plural}/{name}`) and kube's request
//! builder joins them as they are. A name such as `x?fieldManager=spoofed&` would become a
//! query, `?` a collection delete, `..` a traversal, and a version `v1/namespaces/kube-system/
//! secrets/NAME?x=` a GET of a Secret with the host's own credentials. Every value accepted
//! here is made only of characters a URL path segment carries unescaped, so no request path
//! built from validated parts can mean anything but the one object it names.
//!
//! Every check bounds the length first (the API server's own limits), so a hostile value costs
//! at most one pass over a bounded prefix, and an error quotes at most [`QUOTED_CHARS`]
//! characters of it, escaped.

use std::fmt;

use super::selector::{LabelSelector, SelectorError};

/// The longest object name the API server accepts (a DNS-1123 subdomain, 253 characters; the
/// path-segment names of RBAC kinds share the bound).
pub(crate) const MAX_NAME_LEN: usize = 253;
/// The longest namespace, version or kind: a DNS-1123 label, 63 characters.
pub const MAX_LABEL_LEN: usize = 63;
/// The longest API group: a DNS-1123 subdomain, 253 characters.
pub const MAX_GROUP_LEN: usize = 253;
/// The longest label selector a plugin may send. The API server sets no bound of its own
/// beyond its request-line limit; a selector of a few dozen requirements fits in a fraction of
/// this, and the cap keeps a hostile one from becoming a megabyte query string.
pub(crate) const MAX_SELECTOR_LEN: usize = 4 << 10;
/// The longest uid or resourceVersion a plugin may pass (a uid is a 36-character UUID, a
/// resourceVersion an etcd revision of at most 20 digits; both are opaque, so the bound
/// leaves room without letting one carry a payload).
pub const MAX_TOKEN_LEN: usize = 128;
/// How much of a refused value an error message quotes: enough to recognise it, never enough
/// to carry a payload into a log line or an Event.
pub(crate) const QUOTED_CHARS: usize = 64;

/// A plugin-supplied identifier the host refuses. Its message names the field and quotes the
/// value escaped and cut, so it is safe in any log line, Event or terminal.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field} {value} {problem}")]
pub struct NameError {
    /// Which field (`target.name`, `metadata.namespace`, `kind.version`, ...).
    pub field: String,
    /// The value, quoted by [`quote`].
    pub value: Quoted,
    /// What is wrong with it.
    pub problem: Problem,
}

/// What is wrong with a refused identifier.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Problem {
    /// It is empty where a value is required.
    Empty,
    /// It is longer than the API server allows.
    TooLong(usize),
    /// `.` or `..`, which a request path would read as a directory step.
    DotSegment,
    /// An object name with a character no Kubernetes name has unescaped in a URL path.
    NameChars,
    /// Not a DNS-1123 label (lowercase letters, digits and `-`, starting and ending with a
    /// letter or digit).
    Label,
    /// Not a DNS-1123 subdomain (DNS-1123 labels joined by `.`).
    Subdomain,
    /// Not a kind (a letter, then letters, digits or `-`).
    Kind,
    /// Not an opaque token such as a uid or resourceVersion (letters, digits, `-`, `.`, `_`).
    Token,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Problem::Empty => f.write_str("is empty"),
            Problem::TooLong(max) => write!(f, "is longer than {max} characters"),
            Problem::DotSegment => f.write_str("is a path step (`.` or `..`), not a name"),
            Problem::NameChars => f.write_str(
                "is not a Kubernetes object name (letters, digits and `-._:@~+` only; never \
                 `/`, `%`, `?`, `#`, spaces or control characters)",
            ),
            Problem::Label => f.write_str(
                "is not a DNS-1123 label (lowercase letters, digits and `-`, starting and \
                 ending with a letter or digit)",
            ),
            Problem::Subdomain => {
                f.write_str("is not a DNS-1123 subdomain (lowercase DNS labels separated by `.`)")
            }
            Problem::Kind => f.write_str(
                "is not a kind (a letter, then letters, digits or `-`, e.g. `ConfigMap`)",
            ),
            Problem::Token => f.write_str(
                "is not a uid or resourceVersion (letters, digits, `-`, `.` and `_` only)",
            ),
        }
    }
}

/// A refused value as an error shows it: escaped (control, bidi and non-ASCII characters as
/// `\u{..}`), cut at [`QUOTED_CHARS`] characters, in backticks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Quoted(String);

impl fmt::Display for Quoted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Quotes a hostile value for an error message (see [`Quoted`]).
pub fn quote(value: &str) -> Quoted {
    let mut out = String::with_capacity(value.len().min(QUOTED_CHARS * 2) + 2);
    out.push('`');
    for (i, c) in value.chars().enumerate() {
        if i == QUOTED_CHARS {
            out.push_str("`…");
            out.push_str(&format!(" ({} bytes)", value.len()));
            return Quoted(out);
        }
        if c.is_ascii_graphic() || c == ' ' {
            out.push(c);
        } else {
            out.push_str(&format!("\\u{{{:x}}}", u32::from(c)));
        }
    }
    out.push('`');
    Quoted(out)
}

fn refuse(field: &str, value: &str, problem: Problem) -> NameError {
    NameError {
        field: field.to_owned(),
        value: quote(value),
        problem,
    }
}

fn bounded(field: &str, value: &str, max: usize) -> Result<(), NameError> {
    if value.is_empty() {
        return Err(refuse(field, value, Problem::Empty));
    }
    if value.len() > max {
        return Err(refuse(field, value, Problem::TooLong(max)));
    }
    Ok(())
}

fn is_label(s: &str) -> bool {
    let bytes = s.as_bytes();
    let edge = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    !bytes.is_empty()
        && bytes.len() <= MAX_LABEL_LEN
        && bytes.first().is_some_and(edge)
        && bytes.last().is_some_and(edge)
        && bytes.iter().all(|b| edge(b) || *b == b'-')
}

/// An object name: the API server's path-segment rule (never `.` or `..`, no `/` or `%`)
/// narrowed to the characters Kubernetes names use and a URL path segment carries unescaped
/// (letters, digits, `-._:@~+`: DNS-1123 subdomains, and RBAC names such as
/// `system:controller:job-controller`), at most [`MAX_NAME_LEN`] characters.
pub(crate) fn check_name(field: &str, name: &str) -> Result<(), NameError> {
    bounded(field, name, MAX_NAME_LEN)?;
    if name == "." || name == ".." {
        return Err(refuse(field, name, Problem::DotSegment));
    }
    let ok = name.bytes().all(|b| {
        b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b':' | b'@' | b'~' | b'+')
    });
    if !ok {
        return Err(refuse(field, name, Problem::NameChars));
    }
    Ok(())
}

/// A uid or resourceVersion: opaque to the host, but it goes into a request body (a
/// precondition) or an index lookup, so it is bounded at [`MAX_TOKEN_LEN`] and made of
/// letters, digits, `-`, `.` and `_` (every uid and resourceVersion the API server issues).
pub fn check_token(field: &str, value: &str) -> Result<(), NameError> {
    bounded(field, value, MAX_TOKEN_LEN)?;
    let ok = value
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_'));
    if !ok {
        return Err(refuse(field, value, Problem::Token));
    }
    Ok(())
}

/// A namespace: a DNS-1123 label.
pub fn check_namespace(field: &str, namespace: &str) -> Result<(), NameError> {
    bounded(field, namespace, MAX_LABEL_LEN)?;
    if !is_label(namespace) {
        return Err(refuse(field, namespace, Problem::Label));
    }
    Ok(())
}

/// An API group: empty (the core group) or a DNS-1123 subdomain.
pub fn check_group(field: &str, group: &str) -> Result<(), NameError> {
    if group.is_empty() {
        return Ok(());
    }
    bounded(field, group, MAX_GROUP_LEN)?;
    if !group.split('.').all(is_label) {
        return Err(refuse(field, group, Problem::Subdomain));
    }
    Ok(())
}

/// An API version (`v1`, `v1beta1`): a DNS-1123 label, as CRD versions must be.
pub(crate) fn check_version(field: &str, version: &str) -> Result<(), NameError> {
    bounded(field, version, MAX_LABEL_LEN)?;
    if !is_label(version) {
        return Err(refuse(field, version, Problem::Label));
    }
    Ok(())
}

/// A kind: a letter, then letters, digits or `-` (a CRD's kind must be a DNS-1035 label once
/// lowercased), not ending in `-`, at most [`MAX_LABEL_LEN`] characters.
pub fn check_kind(field: &str, kind: &str) -> Result<(), NameError> {
    bounded(field, kind, MAX_LABEL_LEN)?;
    let bytes = kind.as_bytes();
    let ok = bytes.first().is_some_and(u8::is_ascii_alphabetic)
        && bytes.last().is_some_and(u8::is_ascii_alphanumeric)
        && bytes
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || *b == b'-');
    if !ok {
        return Err(refuse(field, kind, Problem::Kind));
    }
    Ok(())
}

/// A group, version and kind, each by its grammar; `field` names the record (`kind`,
/// `target.kind`), and the error the part (`target.kind.version`).
pub fn check_gvk(field: &str, group: &str, version: &str, kind: &str) -> Result<(), NameError> {
    check_group(&format!("{field}.group"), group)?;
    check_version(&format!("{field}.version"), version)?;
    check_kind(&format!("{field}.kind"), kind)
}

/// Why a label selector a plugin sent is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectorRefused {
    /// Longer than [`MAX_SELECTOR_LEN`].
    #[error("{field} is {len} bytes long; at most {MAX_SELECTOR_LEN} are accepted")]
    TooLong {
        /// Which field.
        field: String,
        /// Its length.
        len: usize,
    },
    /// It does not parse as Kubernetes label-selector syntax.
    #[error("{field} does not parse")]
    Syntax {
        /// Which field.
        field: String,
        /// The parse error.
        #[source]
        source: SelectorError,
    },
}

/// A label selector: bounded, then parsed (so only Kubernetes syntax reaches a query string).
pub fn check_selector(field: &str, selector: &str) -> Result<LabelSelector, SelectorRefused> {
    if selector.len() > MAX_SELECTOR_LEN {
        return Err(SelectorRefused::TooLong {
            field: field.to_owned(),
            len: selector.len(),
        });
    }
    LabelSelector::parse(selector).map_err(|source| SelectorRefused::Syntax {
        field: field.to_owned(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uids_and_resource_versions_are_bounded_tokens() {
        for good in [
            "8f0c3e1a-2b4d-4c6e-9f10-1a2b3c4d5e6f",
            "48213",
            "uid-1",
            "a.b_c",
        ] {
            check_token("owner-uid", good).expect(good);
        }
        for bad in ["", "a b", "1\"}", "a/b", "x?y", "caf\u{e9}", "a\nb"] {
            let err = check_token("owner-uid", bad).expect_err(bad);
            assert!(err.to_string().starts_with("owner-uid `"), "{err}");
        }
        let long = "1".repeat(MAX_TOKEN_LEN + 1);
        assert_eq!(
            check_token("if-resource-version", &long)
                .expect_err("long")
                .problem,
            Problem::TooLong(MAX_TOKEN_LEN)
        );
    }

    #[test]
    fn names_that_would_change_a_request_path_are_refused() {
        for bad in [
            "x?fieldManager=spoofed&",
            "?",
            "",
            ".",
            "..",
            "../../kube-system/secrets/token",
            "a%2Fb",
            "a/b",
            "a#b",
            "a b",
            "a\nb",
            "caf\u{e9}",
            "a\u{202e}b",
        ] {
            let err = check_name("target.name", bad).expect_err(bad);
            assert!(err.to_string().starts_with("target.name `"), "{err}");
        }
        for good in [
            "web",
            "db-config",
            "a.b.c",
            "system:controller:job-controller",
            "user@example.com",
            "x_y~z+1",
        ] {
            check_name("target.name", good).expect(good);
        }
        let long = "a".repeat(MAX_NAME_LEN + 1);
        assert_eq!(
            check_name("n", &long).expect_err("long").problem,
            Problem::TooLong(MAX_NAME_LEN)
        );
        check_name("n", &long[1..]).expect("253 characters");
    }

    #[test]
    fn gvk_parts_follow_their_grammars_and_name_the_part() {
        let err = check_gvk(
            "kind",
            "",
            "v1/namespaces/kube-system/secrets/x?y=",
            "Secret",
        )
        .expect_err("path in the version");
        assert!(err.to_string().starts_with("kind.version `v1/"), "{err}");
        check_gvk("kind", "", "v1", "ConfigMap").expect("core");
        check_gvk("kind", "apps", "v1", "Deployment").expect("apps");
        check_gvk("kind", "wasmop.test", "v1alpha1", "Target").expect("custom");
        for (g, v, k) in [
            ("Apps", "v1", "Deployment"),
            ("apps/v1", "v1", "Deployment"),
            (".apps", "v1", "Deployment"),
            ("apps", "", "Deployment"),
            ("apps", "V1", "Deployment"),
            ("apps", "v1", "deploy/ments"),
            ("apps", "v1", "1Deployment"),
            ("apps", "v1", ""),
            ("apps", "v1", "Deploy%ment"),
        ] {
            check_gvk("kind", g, v, k).expect_err(&format!("{g}/{v}/{k}"));
        }
    }

    #[test]
    fn namespaces_are_dns_labels() {
        check_namespace("namespace", "team-a").expect("label");
        for bad in [
            "",
            "..",
            "Team",
            "-a",
            "a-",
            "a.b",
            "kube-system/x",
            &"a".repeat(64),
        ] {
            check_namespace("namespace", bad).expect_err(bad);
        }
    }

    #[test]
    fn a_quoted_value_is_escaped_and_cut() {
        assert_eq!(
            quote("a\n\u{1b}[31m\u{202e}").to_string(),
            "`a\\u{a}\\u{1b}[31m\\u{202e}`"
        );
        let long = quote(&"x".repeat(10_000)).to_string();
        assert!(long.len() < 100, "{long}");
        assert!(long.ends_with("(10000 bytes)"), "{long}");
    }

    #[test]
    fn selectors_are_bounded_and_parsed() {
        check_selector("label-selector", "app=web,tier in (a,b)").expect("valid");
        assert!(matches!(
            check_selector("label-selector", "app=web&x=y"),
            Err(SelectorRefused::Syntax { .. })
        ));
        let huge = format!("a in ({})", vec!["b"; 5000].join(","));
        assert!(matches!(
            check_selector("label-selector", &huge),
            Err(SelectorRefused::TooLong { .. })
        ));
    }
}
