//! The Rust half of `wasmop new`: the crate (its SDK dependency, the size profile), the
//! plugin whose CRD is generated from its types, and the project's README.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::{Context as _, bail};

use super::{BUILT_IN, Kind, RawNew, Shared};

/// A TOML basic string: the text quoted, with `"`, `\` and control characters escaped.
fn toml_string(text: &str) -> String {
    let mut out = String::from("\"");
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => {
                let _ = write!(out, "\\u{:04X}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// The SDK dependency line of `Cargo.toml` (the value after `wasmop-guest = `).
pub(super) fn sdk_dependency(raw: &RawNew) -> anyhow::Result<String> {
    let features = r#"features = ["crd"]"#;
    if let Some(path) = &raw.sdk_path {
        let path = std::path::absolute(path)
            .with_context(|| format!("cannot resolve --sdk-path {}", path.display()))?;
        check_sdk_dir(&path)?;
        let text = path
            .to_str()
            .with_context(|| format!("--sdk-path {} is not UTF-8", path.display()))?;
        return Ok(format!("{{ path = {}, {features} }}", toml_string(text)));
    }
    if let Some(url) = &raw.sdk_git {
        let rev = raw
            .sdk_rev
            .as_ref()
            .map(|r| format!(", rev = {}", toml_string(r)))
            .unwrap_or_default();
        return Ok(format!("{{ git = {}{rev}, {features} }}", toml_string(url)));
    }
    if let Some(version) = &raw.sdk_version {
        return Ok(format!(
            "{{ version = {}, {features} }}",
            toml_string(version)
        ));
    }
    // The checkout this binary was built from, if it is still there.
    let built_from = Path::new(env!("CARGO_MANIFEST_DIR")).join("../guest-sdk/rust");
    match std::fs::canonicalize(&built_from) {
        Ok(path) if check_sdk_dir(&path).is_ok() => {
            let text = path.to_str().context("the SDK's path is not UTF-8")?;
            Ok(format!("{{ path = {}, {features} }}", toml_string(text)))
        }
        _ => bail!(
            "no SDK to depend on: this wasmop was not built from a checkout that is still at \
             {}; give --sdk-path DIR (a checkout's guest-sdk/rust), --sdk-git URL or \
             --sdk-version VERSION",
            built_from.display()
        ),
    }
}

/// Checks that `dir` holds the `wasmop-guest` crate.
fn check_sdk_dir(dir: &Path) -> anyhow::Result<()> {
    let manifest = dir.join("Cargo.toml");
    let text = std::fs::read_to_string(&manifest).with_context(|| {
        format!(
            "--sdk-path {}: cannot read {} (the SDK is a checkout's guest-sdk/rust)",
            dir.display(),
            manifest.display()
        )
    })?;
    if !text.contains("name = \"wasmop-guest\"") {
        bail!(
            "--sdk-path {}: {} is not the wasmop-guest crate's",
            dir.display(),
            manifest.display()
        );
    }
    Ok(())
}

/// The files of a Rust project, paths relative to its directory.
pub(super) fn rust_project(
    name: &str,
    kind: &Kind,
    owns: &[String],
    sdk: &str,
) -> Vec<(String, String)> {
    let shared = Shared::new(name, kind);
    let crate_name = name.replace('-', "_");
    let mut owns_uses = String::new();
    let mut owns_calls = String::new();
    for k in owns {
        // The ConfigMap is owned already.
        if let Some((k, module)) = BUILT_IN.iter().find(|(b, _)| b == k && *b != "ConfigMap") {
            let _ = writeln!(
                owns_uses,
                "use wasmop_guest::k8s_openapi::api::{module}::{k};"
            );
            let _ = write!(owns_calls, "\n            .owns::<{k}>()");
        }
    }
    // As `wasmop_guest::crd::rendered` writes it, so `cargo test` finds the file unchanged.
    let crd_header = format!(
        "# The {} CustomResourceDefinition, generated from the plugin's Rust types by\n\
         # `WASMOP_BLESS=1 cargo test -p {name}`: edit the types, not this file.\n",
        kind.kind
    );
    let mut vars = shared.vars(sdk, &crd_header);
    vars.extend([
        ("crate", crate_name.as_str()),
        (
            "deps",
            "# The CRD is derived from the Rust types (kube's CustomResource, through the SDK).\nschemars = \"1\"\n",
        ),
        ("owns_uses", &owns_uses),
        ("owns_calls", &owns_calls),
        (
            "crd_line",
            "- `crd.yaml`: the CRD, generated from the types in `src/lib.rs`: `cargo test` checks it,\n  `WASMOP_BLESS=1 cargo test` rewrites it.\n",
        ),
        (
            "cargo_test_line",
            "cargo test                                       # crd.yaml is what the types generate\n",
        ),
        ("install_lines", "kubectl apply -f crd.yaml\n"),
    ]);
    shared.files(
        &vars,
        &[
            ("Cargo.toml", include_str!("rust/Cargo.toml.tmpl")),
            (".cargo/config.toml", include_str!("rust/cargo-config.toml")),
            (
                "rust-toolchain.toml",
                include_str!("rust/rust-toolchain.toml"),
            ),
            (".gitignore", include_str!("rust/gitignore")),
            ("README.md", include_str!("rust/README.md.tmpl")),
            ("src/lib.rs", include_str!("rust/custom.rs.tmpl")),
        ],
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::cli::new::written;

    #[test]
    fn every_placeholder_is_filled() {
        let kind = Kind::parse("example.com/v1/Widget").unwrap();
        let files = rust_project(
            "widgets",
            &kind,
            &["Job".into(), "ConfigMap".into()],
            "{ path = \"/x\" }",
        );
        for (path, text) in &files {
            assert!(
                !text.contains("{{"),
                "{path} has a placeholder left:\n{text}"
            );
        }
        let lib = written(&files, "src/lib.rs");
        assert!(lib.contains("use wasmop_guest::k8s_openapi::api::batch::v1::Job;"));
        assert!(lib.contains(".owns::<Job>()"));
        let crd = written(&files, "crd.yaml");
        assert!(crd.contains("name: widgets.example.com"), "{crd}");
        let config = written(&files, ".cargo/config.toml");
        assert!(
            config.contains(r#"rustflags = ["-C", "relocation-model=static"]"#),
            "{config}"
        );
    }

    #[test]
    fn toml_strings_are_escaped() {
        assert_eq!(toml_string(r#"a"b\c"#), r#""a\"b\\c""#);
        assert_eq!(toml_string("a\nb"), r#""a\u000Ab""#);
    }
}
