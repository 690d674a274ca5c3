//! The Python half of `wasmop new`: app.py, build.py (componentize-py) and the SDK
//! requirement, a pip-installable package.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::{Context as _, bail};

use super::{BUILT_IN, Kind, RawNew, Shared, api_group};

/// The WIT files of the contract this wasmop speaks, as a Python project builds against.
const WIT: &[(&str, &str)] = &[("wit/plugin.wit", include_str!("../../../../wit/plugin.wit"))];

/// The SDK requirement line of a Python project's `requirements.txt` (PEP 508).
pub(super) fn python_sdk_requirement(raw: &RawNew) -> anyhow::Result<String> {
    // Characters that pass through a requirement line and a URL unquoted.
    let plain = |text: &str, extra: &str| {
        !text.is_empty()
            && text
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "/._-+~".contains(c) || extra.contains(c))
    };
    if let Some(path) = &raw.sdk_path {
        let path = std::path::absolute(path)
            .with_context(|| format!("cannot resolve --sdk-path {}", path.display()))?;
        return python_sdk_path(&path);
    }
    if let Some(url) = &raw.sdk_git {
        if !plain(url, ":@%=") {
            bail!(
                "--sdk-git `{url}`: a URL of letters, digits and `/._-+~:@%=` only (it goes into \
                 a requirement line, `git+URL@REV#subdirectory=...`)"
            );
        }
        let rev = match &raw.sdk_rev {
            Some(rev) if !plain(rev, "") => bail!(
                "--sdk-rev `{rev}`: a commit, tag or branch of letters, digits and `/._-+~` only"
            ),
            Some(rev) => format!("@{rev}"),
            None => String::new(),
        };
        let url = url.strip_prefix("git+").unwrap_or(url);
        return Ok(format!(
            "wasmop-guest @ git+{url}{rev}#subdirectory=guest-sdk/python"
        ));
    }
    if let Some(version) = &raw.sdk_version {
        if !plain(version, "!") {
            bail!("--sdk-version `{version}` is not a version (such as 0.2.0)");
        }
        return Ok(format!("wasmop-guest=={version}"));
    }
    let built_from = Path::new(env!("CARGO_MANIFEST_DIR")).join("../guest-sdk/python");
    match std::fs::canonicalize(&built_from) {
        Ok(path) => python_sdk_path(&path),
        Err(_) => bail!(
            "no SDK to depend on: this wasmop was not built from a checkout that is still at \
             {}; give --sdk-path DIR (a checkout's guest-sdk/python), --sdk-git URL or \
             --sdk-version VERSION",
            built_from.display()
        ),
    }
}

/// The requirement on the Python SDK in directory `path` (a `file://` URL).
fn python_sdk_path(path: &Path) -> anyhow::Result<String> {
    let project = path.join("pyproject.toml");
    let text = std::fs::read_to_string(&project).with_context(|| {
        format!(
            "--sdk-path {}: cannot read {} (the Python SDK is a checkout's guest-sdk/python)",
            path.display(),
            project.display()
        )
    })?;
    if !text.contains("name = \"wasmop-guest\"") {
        bail!(
            "--sdk-path {}: {} is not the wasmop-guest package's",
            path.display(),
            project.display()
        );
    }
    let text = path
        .to_str()
        .filter(|t| {
            t.chars()
                .all(|c| c.is_ascii_alphanumeric() || "/._-+~".contains(c))
        })
        .with_context(|| {
            format!(
                "the SDK's path {} has characters a requirement's file:// URL would need \
                 quoted; move the checkout, or give --sdk-git or --sdk-version",
                path.display()
            )
        })?;
    Ok(format!("wasmop-guest @ file://{text}"))
}

/// `PersistentVolumeClaim` -> `PERSISTENT_VOLUME_CLAIM`: a Python constant's name.
fn upper_snake(camel: &str) -> String {
    let chars: Vec<char> = camel.chars().collect();
    let mut out = String::new();
    for (i, &c) in chars.iter().enumerate() {
        let boundary = i > 0
            && c.is_ascii_uppercase()
            && (!chars[i - 1].is_ascii_uppercase()
                || chars.get(i + 1).is_some_and(char::is_ascii_lowercase));
        if boundary {
            out.push('_');
        }
        out.push(c.to_ascii_uppercase());
    }
    out
}

/// The files of a Python project, paths relative to its directory.
pub(super) fn python_project(
    name: &str,
    kind: &Kind,
    owns: &[String],
    sdk: &str,
) -> Vec<(String, String)> {
    let shared = Shared::new(name, kind);
    let kind_const = upper_snake(&kind.kind);
    let mut owns_consts = String::new();
    let mut owns_calls = String::new();
    for k in owns {
        if let Some((k, module)) = BUILT_IN.iter().find(|(b, _)| b == k && *b != "ConfigMap") {
            let constant = upper_snake(k);
            let version = module.rsplit("::").next().unwrap_or("v1");
            let _ = writeln!(
                owns_consts,
                "{constant} = Kind(\"{}\", \"{version}\", \"{k}\")",
                api_group(module)
            );
            let _ = write!(owns_calls, ".owns({constant})");
        }
    }
    if !owns_consts.is_empty() {
        owns_consts.insert_str(0, "#: What it owns besides its ConfigMap.\n");
    }
    let crd_header = format!(
        "# The {} CustomResourceDefinition: keep its schema in step with {}Spec in app.py.\n",
        kind.kind, kind.kind
    );
    let mut vars = shared.vars(sdk, &crd_header);
    vars.extend([
        ("kind_const", kind_const.as_str()),
        ("owns_consts", &owns_consts),
        ("owns_calls", &owns_calls),
    ]);
    let mut files = shared.files(
        &vars,
        &[
            ("app.py", include_str!("python/app.py.tmpl")),
            ("build.py", include_str!("python/build.py.tmpl")),
            (
                "requirements.txt",
                include_str!("python/requirements.txt.tmpl"),
            ),
            (".gitignore", include_str!("python/gitignore")),
            ("README.md", include_str!("python/README.md.tmpl")),
        ],
    );
    // Verbatim: the WIT is the contract, not a template.
    files.extend(WIT.iter().map(|(p, t)| ((*p).to_owned(), (*t).to_owned())));
    files
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::cli::new::written;

    #[test]
    fn every_placeholder_of_a_python_project_is_filled() {
        let kind = Kind::parse("example.com/v1/WidgetSet").unwrap();
        let files = python_project(
            "widgets",
            &kind,
            &[
                "Job".into(),
                "PersistentVolumeClaim".into(),
                "ConfigMap".into(),
            ],
            "wasmop-guest==0.2.0",
        );
        for (path, text) in &files {
            if !path.ends_with(".wit") {
                assert!(
                    !text.contains("{{"),
                    "{path} has a placeholder left:\n{text}"
                );
            }
        }
        let app = written(&files, "app.py");
        assert!(app.contains("WIDGET_SET = Kind(\"example.com\", \"v1\", \"WidgetSet\")"));
        assert!(
            app.contains("JOB = Kind(\"batch\", \"v1\", \"Job\")"),
            "{app}"
        );
        assert!(
            app.contains("PERSISTENT_VOLUME_CLAIM = Kind(\"\", \"v1\", \"PersistentVolumeClaim\")")
        );
        assert!(app.contains(".owns(CONFIG_MAP).owns(JOB).owns(PERSISTENT_VOLUME_CLAIM)"));
        assert!(app.contains("name = f\"{obj.name}-widgets\""), "{app}");
        let wit = written(&files, "wit/plugin.wit");
        assert!(wit.contains("package wasmop:plugin@0.3.0;"));
        let requirements = written(&files, "requirements.txt");
        assert!(
            requirements.contains("\nwasmop-guest==0.2.0\n"),
            "{requirements}"
        );
    }

    #[test]
    fn python_constants_are_upper_snake_case() {
        assert_eq!(upper_snake("Job"), "JOB");
        assert_eq!(upper_snake("ConfigMap"), "CONFIG_MAP");
        assert_eq!(upper_snake("HTTPRoute"), "HTTP_ROUTE");
        assert_eq!(upper_snake("Backup2Policy"), "BACKUP2_POLICY");
    }

    #[test]
    fn python_sdk_requirements_are_checked() {
        let raw = |args: &[&str]| {
            use clap::Parser as _;
            #[derive(clap::Parser)]
            struct Cli {
                #[command(flatten)]
                new: RawNew,
            }
            let mut argv = vec!["wasmop-new", "x", "--lang", "python"];
            argv.extend_from_slice(args);
            Cli::parse_from(argv).new
        };
        assert_eq!(
            python_sdk_requirement(&raw(&[
                "--sdk-git",
                "https://example.com/w.git",
                "--sdk-rev",
                "v1.2"
            ]))
            .unwrap(),
            "wasmop-guest @ git+https://example.com/w.git@v1.2#subdirectory=guest-sdk/python"
        );
        assert_eq!(
            python_sdk_requirement(&raw(&["--sdk-version", "0.2.0"])).unwrap(),
            "wasmop-guest==0.2.0"
        );
        for bad in [
            &["--sdk-git", "https://x/y z"][..],
            &["--sdk-git", "https://x/y#frag"],
            &["--sdk-version", "0.2; os_name"],
        ] {
            assert!(python_sdk_requirement(&raw(bad)).is_err(), "{bad:?}");
        }
        let e = python_sdk_requirement(&raw(&["--sdk-path", "/nonexistent"])).unwrap_err();
        assert!(e.to_string().contains("pyproject.toml"), "{e}");
        // The checkout's own SDK, by default.
        let line = python_sdk_requirement(&raw(&[])).unwrap();
        assert!(
            line.starts_with("wasmop-guest @ file:///") && line.ends_with("/guest-sdk/python"),
            "{line}"
        );
    }
}
