//! Label selectors in Kubernetes' string syntax (`app=web, tier in (a,b), !legacy`), parsed
//! and matched for the in-memory cluster. The API server does this itself for the real one.

use std::collections::BTreeMap;

/// Why a label selector does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("label selector {selector} is invalid: {reason}")]
pub struct SelectorError {
    /// The selector, escaped and cut: it may come from a plugin.
    selector: super::names::Quoted,
    reason: &'static str,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Requirement {
    Equals(String, String),
    NotEquals(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    DoesNotExist(String),
}

/// A parsed label selector; an empty one matches everything.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LabelSelector(Vec<Requirement>);

impl LabelSelector {
    /// Parses Kubernetes label-selector syntax.
    pub fn parse(selector: &str) -> Result<Self, SelectorError> {
        let fail = |reason| SelectorError {
            selector: super::names::quote(selector),
            reason,
        };
        let mut requirements = Vec::new();
        for part in split_top_level(selector).map_err(fail)? {
            let part = part.trim();
            if part.is_empty() {
                if selector.trim().is_empty() {
                    continue;
                }
                return Err(fail("empty requirement"));
            }
            requirements.push(parse_requirement(part).map_err(fail)?);
        }
        Ok(Self(requirements))
    }

    /// Whether an object with these labels is selected.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.0.iter().all(|r| match r {
            Requirement::Equals(k, v) => labels.get(k) == Some(v),
            Requirement::NotEquals(k, v) => labels.get(k) != Some(v),
            Requirement::In(k, vs) => labels.get(k).is_some_and(|l| vs.contains(l)),
            Requirement::NotIn(k, vs) => labels.get(k).is_none_or(|l| !vs.contains(l)),
            Requirement::Exists(k) => labels.contains_key(k),
            Requirement::DoesNotExist(k) => !labels.contains_key(k),
        })
    }

    /// The selector as the structured form the API takes (`matchExpressions`): one
    /// expression per requirement, `=` as `In` one value and `!=` as `NotIn` one value.
    pub fn expressions(&self) -> Vec<Expression> {
        let expr = |key: &String, operator, values: &[String]| Expression {
            key: key.clone(),
            operator,
            values: values.to_vec(),
        };
        self.0
            .iter()
            .map(|r| match r {
                Requirement::Equals(k, v) => expr(k, "In", std::slice::from_ref(v)),
                Requirement::NotEquals(k, v) => expr(k, "NotIn", std::slice::from_ref(v)),
                Requirement::In(k, vs) => expr(k, "In", vs),
                Requirement::NotIn(k, vs) => expr(k, "NotIn", vs),
                Requirement::Exists(k) => expr(k, "Exists", &[]),
                Requirement::DoesNotExist(k) => expr(k, "DoesNotExist", &[]),
            })
            .collect()
    }
}

/// One requirement of a selector in the API's structured form.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expression {
    /// The label key.
    pub key: String,
    /// `In`, `NotIn`, `Exists` or `DoesNotExist`.
    pub operator: &'static str,
    /// The values (`In`, `NotIn`).
    pub values: Vec<String>,
}

fn split_top_level(s: &str) -> Result<Vec<&str>, &'static str> {
    let (mut depth, mut start, mut parts) = (0i32, 0, Vec::new());
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth < 0 {
                    return Err("unbalanced `)`");
                }
            }
            ',' if depth == 0 => {
                parts.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    if depth != 0 {
        return Err("unbalanced `(`");
    }
    parts.push(&s[start..]);
    Ok(parts)
}

fn key(k: &str) -> Result<String, &'static str> {
    let k = k.trim();
    let ok = !k.is_empty()
        && k.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'));
    if ok {
        Ok(k.to_owned())
    } else {
        Err("bad label key")
    }
}

fn value(v: &str) -> Result<String, &'static str> {
    let v = v.trim();
    let ok = v
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if ok {
        Ok(v.to_owned())
    } else {
        Err("bad label value")
    }
}

fn parse_requirement(part: &str) -> Result<Requirement, &'static str> {
    if let Some(k) = part.strip_prefix('!') {
        return Ok(Requirement::DoesNotExist(key(k)?));
    }
    if let Some((k, v)) = part.split_once("!=") {
        return Ok(Requirement::NotEquals(key(k)?, value(v)?));
    }
    if let Some((k, v)) = part.split_once("==").or_else(|| part.split_once('=')) {
        return Ok(Requirement::Equals(key(k)?, value(v)?));
    }
    if let Some(open) = part.find('(') {
        let head: Vec<&str> = part[..open].split_whitespace().collect();
        let body = part[open + 1..]
            .strip_suffix(')')
            .ok_or("set must end with `)`")?;
        let values = body.split(',').map(value).collect::<Result<Vec<_>, _>>()?;
        return match head.as_slice() {
            [k, "in"] => Ok(Requirement::In(key(k)?, values)),
            [k, "notin"] => Ok(Requirement::NotIn(key(k)?, values)),
            _ => Err("expected `key in (...)` or `key notin (...)`"),
        };
    }
    if part.contains(['<', '>', ' ']) {
        return Err("unsupported operator");
    }
    Ok(Requirement::Exists(key(part)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn matches_every_operator() {
        let l = labels(&[("app", "web"), ("tier", "front")]);
        let yes = [
            "",
            "app=web",
            "app==web",
            "app!=db",
            "tier in (front, back)",
            "env notin (prod)",
            "app",
            "!env",
            "app=web,tier",
        ];
        for s in yes {
            assert!(LabelSelector::parse(s).expect(s).matches(&l), "{s}");
        }
        let no = ["app=db", "tier notin (front)", "env", "!app", "app=web,env"];
        for s in no {
            assert!(!LabelSelector::parse(s).expect(s).matches(&l), "{s}");
        }
    }

    #[test]
    fn every_operator_has_a_structured_form() {
        let s = LabelSelector::parse("app=web, tier!=db, env in (a,b), x notin (c), y, !z")
            .expect("valid");
        let got: Vec<(String, &str, Vec<String>)> = s
            .expressions()
            .into_iter()
            .map(|e| (e.key, e.operator, e.values))
            .collect();
        let v = |s: &[&str]| s.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        assert_eq!(
            got,
            vec![
                ("app".into(), "In", v(&["web"])),
                ("tier".into(), "NotIn", v(&["db"])),
                ("env".into(), "In", v(&["a", "b"])),
                ("x".into(), "NotIn", v(&["c"])),
                ("y".into(), "Exists", vec![]),
                ("z".into(), "DoesNotExist", vec![]),
            ]
        );
    }

    #[test]
    fn rejects_malformed_selectors_with_the_selector_in_the_message() {
        let err = LabelSelector::parse("app in (a").expect_err("unbalanced");
        assert_eq!(
            err.to_string(),
            "label selector `app in (a` is invalid: unbalanced `(`"
        );
        assert!(LabelSelector::parse("a=b,,c").is_err());
        assert!(LabelSelector::parse("a > 3").is_err());
    }
}
