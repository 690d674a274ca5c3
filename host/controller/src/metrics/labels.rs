//! The label sets of the host's metrics. Every value is bounded: plugin names, verbs,
//! outcome and cause labels, states, versions and digests of loaded plugins, Lease names,
//! watched kinds.

use std::borrow::Cow;

use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue, LabelValueEncoder};

/// A label value a plugin chose (its version): written escaped as the text format requires,
/// because prometheus-client 0.24 writes label values as they are, and a `"` or newline in one
/// would end the series and start a forged one. `describe` already refuses such versions;
/// this keeps the page parseable whatever reaches it.
#[derive(Clone, Debug, Hash, PartialEq, Eq)]
pub(super) struct Said(pub(super) String);

impl EncodeLabelValue for Said {
    fn encode(&self, encoder: &mut LabelValueEncoder) -> Result<(), std::fmt::Error> {
        std::fmt::Write::write_str(encoder, &label_value(&self.0))
    }
}

/// `s` as the Prometheus text exposition format wants a label value between its quotes: `\`,
/// `"` and newline escaped as `\\`, `\"` and `\n` (prometheus-client 0.24 writes label values
/// as they are). Other characters are legal in a label value and left alone.
fn label_value(s: &str) -> Cow<'_, str> {
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

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct ControllerLabels {
    pub(super) controller: String,
}

/// A watched kind as `apiVersion/Kind`, as discovery resolved it (not a plugin's spelling).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct KindLabels {
    pub(super) kind: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct NameLabels {
    pub(super) name: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct ResultLabels {
    pub(super) controller: String,
    pub(super) result: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct DeniedLabels {
    pub(super) plugin: String,
    pub(super) verb: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct CallLabels {
    pub(super) plugin: String,
    pub(super) verb: String,
    pub(super) outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct PluginLabels {
    pub(super) plugin: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct StateLabels {
    pub(super) plugin: String,
    pub(super) state: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct OutcomeLabels {
    pub(super) plugin: String,
    pub(super) outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct CauseLabels {
    pub(super) plugin: String,
    pub(super) cause: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct InfoLabels {
    pub(super) plugin: String,
    pub(super) version: Said,
    pub(super) digest: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct LoadLabels {
    pub(super) plugin: String,
    pub(super) from_cache: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct ReloadLabels {
    pub(super) plugin: String,
    pub(super) result: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_values_are_escaped_as_the_exposition_format_says() {
        assert!(matches!(label_value("1.2.0"), Cow::Borrowed(_)));
        assert_eq!(label_value("1\"} 1\n# HELP x\\"), "1\\\"} 1\\n# HELP x\\\\");
    }
}
