//! The Go half of `wasmop new`: plugin.go with a native test, go.mod pointing at the Go SDK
//! of a wasmop checkout, and `build`, which runs that SDK's build.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::{Context as _, bail};

use super::{BUILT_IN, Kind, RawNew, Shared, api_group};

/// Go's keywords: a package name (the plugin's name without its dashes) may be none of them.
const KEYWORDS: &[&str] = &[
    "break",
    "case",
    "chan",
    "const",
    "continue",
    "default",
    "defer",
    "else",
    "fallthrough",
    "for",
    "func",
    "go",
    "goto",
    "if",
    "import",
    "interface",
    "map",
    "package",
    "range",
    "return",
    "select",
    "struct",
    "switch",
    "type",
    "var",
];

/// The Go package name of plugin `name` (already a checked plugin name): its letters and
/// digits.
pub(super) fn package_name(name: &str) -> anyhow::Result<String> {
    let package = name.replace('-', "");
    if KEYWORDS.contains(&package.as_str()) {
        bail!(
            "plugin name `{name}` makes the Go package name `{package}`, a Go keyword; choose \
             another"
        );
    }
    Ok(package)
}

/// The directory of the Go SDK a project's go.mod points at: --sdk-path, else the checkout
/// this wasmop was built from. The SDK is no published module yet, so --sdk-git and
/// --sdk-version are refused with what to do instead.
pub(super) fn go_sdk_dir(raw: &RawNew) -> anyhow::Result<String> {
    if raw.sdk_git.is_some() || raw.sdk_version.is_some() {
        bail!(
            "--lang go takes the SDK from a wasmop checkout only (the Go SDK, module \
             wasmop.dev/wasmop, is not published yet, and its build needs the checkout's WIT \
             and toolchain): give --sdk-path DIR, a checkout's guest-sdk/go"
        );
    }
    let path = match &raw.sdk_path {
        Some(path) => std::path::absolute(path)
            .with_context(|| format!("cannot resolve --sdk-path {}", path.display()))?,
        None => {
            let built_from = Path::new(env!("CARGO_MANIFEST_DIR")).join("../guest-sdk/go");
            std::fs::canonicalize(&built_from).map_err(|_| {
                anyhow::anyhow!(
                    "no SDK to depend on: this wasmop was not built from a checkout that is \
                     still at {}; give --sdk-path DIR (a checkout's guest-sdk/go)",
                    built_from.display()
                )
            })?
        }
    };
    let go_mod = path.join("go.mod");
    let text = std::fs::read_to_string(&go_mod).with_context(|| {
        format!(
            "--sdk-path {}: cannot read {} (the Go SDK is a checkout's guest-sdk/go)",
            path.display(),
            go_mod.display()
        )
    })?;
    if !text.lines().any(|l| l.trim() == "module wasmop.dev/wasmop")
        || !path.join("build").is_file()
    {
        bail!(
            "--sdk-path {}: not the Go SDK (its go.mod is not module wasmop.dev/wasmop's, or \
             it has no build script)",
            path.display()
        );
    }
    path.to_str()
        .filter(|t| {
            t.chars()
                .all(|c| c.is_ascii_alphanumeric() || "/._-+~".contains(c))
        })
        .map(str::to_owned)
        .with_context(|| {
            format!(
                "the SDK's path {} has characters go.mod's replace directive would need \
                 quoted; move the checkout",
                path.display()
            )
        })
}

/// The files of a Go project, paths relative to its directory.
pub(super) fn go_project(
    name: &str,
    package: &str,
    kind: &Kind,
    owns: &[String],
    sdk: &str,
) -> Vec<(String, String)> {
    let shared = Shared::new(name, kind);
    let mut owns_vars = String::new();
    let mut owns_calls = String::new();
    for k in owns {
        if let Some((k, module)) = BUILT_IN.iter().find(|(b, _)| b == k && *b != "ConfigMap") {
            let version = module.rsplit("::").next().unwrap_or("v1");
            let _ = writeln!(
                owns_vars,
                "\n// {k}Kind is a kind the plugin owns besides its ConfigMap.\n\
                 var {k}Kind = wasmop.Kind{{Group: \"{}\", Version: \"{version}\", Kind: \"{k}\", \
                 Namespaced: true}}",
                api_group(module)
            );
            let _ = write!(owns_calls, ".Owns({k}Kind)");
        }
    }
    let crd_header = format!(
        "# The {} CustomResourceDefinition: keep its schema in step with {}Spec in plugin.go.\n",
        kind.kind, kind.kind
    );
    let module = format!("example.com/{name}");
    let mut vars = shared.vars(sdk, &crd_header);
    vars.extend([
        ("package", package),
        ("module", &module),
        ("owns_vars", &owns_vars),
        ("owns_calls", &owns_calls),
    ]);
    shared.files(
        &vars,
        &[
            ("plugin.go", include_str!("go/plugin.go.tmpl")),
            ("plugin_test.go", include_str!("go/plugin_test.go.tmpl")),
            ("go.mod", include_str!("go/go.mod.tmpl")),
            ("build", include_str!("go/build.tmpl")),
            (".gitignore", include_str!("go/gitignore")),
            ("README.md", include_str!("go/README.md.tmpl")),
        ],
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::cli::new::written;

    #[test]
    fn every_placeholder_of_a_go_project_is_filled() {
        let kind = Kind::parse("example.com/v1/WidgetSet").unwrap();
        let files = go_project(
            "wid-gets",
            "widgets",
            &kind,
            &["Job".into(), "ConfigMap".into()],
            "/src/wasmop/guest-sdk/go",
        );
        for (path, text) in &files {
            // `build` has Go's own template, `go list -f '{{.Dir}}'`.
            let text = text.replace("{{.Dir}}", "");
            assert!(
                !text.contains("{{"),
                "{path} has a placeholder left:\n{text}"
            );
        }
        let get = |name: &str| written(&files, name);
        let plugin = get("plugin.go");
        assert!(plugin.starts_with("// Package widgets is"), "{plugin}");
        assert!(plugin.contains("\npackage widgets\n"));
        assert!(plugin.contains(
            "var JobKind = wasmop.Kind{Group: \"batch\", Version: \"v1\", Kind: \"Job\", \
             Namespaced: true}"
        ));
        assert!(plugin.contains(".Owns(wasmop.ConfigMapKind).Owns(JobKind)"));
        assert!(plugin.contains("name := obj.Name + \"-wid-gets\""));
        let go_mod = get("go.mod");
        assert!(
            go_mod.starts_with("module example.com/wid-gets\n"),
            "{go_mod}"
        );
        assert!(go_mod.contains("replace wasmop.dev/wasmop => /src/wasmop/guest-sdk/go\n"));
        assert!(get("build").contains("-o target/wid-gets.wasm"));
    }

    #[test]
    fn go_package_names_are_no_keywords() {
        assert_eq!(package_name("tide-watch").unwrap(), "tidewatch");
        let e = package_name("fall-through").unwrap_err().to_string();
        assert!(e.contains("`fallthrough`") && e.contains("keyword"), "{e}");
    }

    #[test]
    fn the_go_sdk_comes_from_a_checkout() {
        let raw = |args: &[&str]| {
            use clap::Parser as _;
            #[derive(clap::Parser)]
            struct Cli {
                #[command(flatten)]
                new: RawNew,
            }
            let mut argv = vec!["wasmop-new", "x", "--lang", "go"];
            argv.extend_from_slice(args);
            Cli::parse_from(argv).new
        };
        let dir = go_sdk_dir(&raw(&[])).unwrap();
        assert!(
            dir.starts_with('/') && dir.ends_with("/guest-sdk/go"),
            "{dir}"
        );
        let e = go_sdk_dir(&raw(&["--sdk-version", "0.2.0"])).unwrap_err();
        assert!(e.to_string().contains("--sdk-path"), "{e}");
        let e = go_sdk_dir(&raw(&["--sdk-path", "/nonexistent"])).unwrap_err();
        assert!(e.to_string().contains("go.mod"), "{e}");
        let python = Path::new(env!("CARGO_MANIFEST_DIR")).join("../guest-sdk/python");
        let e = go_sdk_dir(&raw(&["--sdk-path", python.to_str().unwrap()])).unwrap_err();
        assert!(e.to_string().contains("guest-sdk/go"), "{e}");
    }
}
