//! `wasmop new NAME`: a plugin project, outside any checkout of wasmop, that builds, passes
//! its own golden test and runs as it is, in Rust, Python or Go. The project reconciles a custom
//! kind; in Rust its CRD is generated from the plugin's types.
//!
//! The files are templates under `new/` with `{{key}}` placeholders, filled from validated
//! values only: every value is checked here before it reaches a file name, a Rust source or
//! YAML, so a generated project always parses.

use std::path::{Path, PathBuf};

use anyhow::{Context as _, bail};

use super::Exit;

mod go;
mod python;
mod rust;

/// What `--help` shows after the options.
const AFTER_HELP: &str = "\
The project (Rust):
  Cargo.toml           the crate, its SDK dependency, and the size-optimised release profile
  src/lib.rs           the plugin: each KIND object gets a ConfigMap with its message and a
                       Ready condition
  crd.yaml             the KIND CustomResourceDefinition, generated from the Rust types
                       (`WASMOP_BLESS=1 cargo test` rewrites it; `cargo test` checks it)
  samples/             an object to try the plugin with
  tests/cases/         a golden case for `wasmop test --expect`
  README.md            the next commands

The project (Python, --lang python):
  app.py               the plugin, the same reconcile as in Rust
  requirements.txt     the build's toolchain (componentize-py) and the SDK, pinned
  build.py             builds target/NAME.wasm (`.venv/bin/python build.py`)
  wit/                 the contract the component is built against, this wasmop's
  crd.yaml, samples/, tests/cases/, README.md   as in Rust (crd.yaml written, not generated)

The project (Go, --lang go):
  plugin.go            the plugin, the same reconcile as in Rust
  plugin_test.go       the reconciler run natively over the SDK's fake host (`go test ./...`)
  go.mod               the module; a replace directive points at the checkout's Go SDK
  build                builds target/NAME.wasm with that SDK's build (stock Go for wasip1)
  crd.yaml, samples/, tests/cases/, README.md   as in Python

The SDK dependency: --sdk-path, --sdk-git or --sdk-version (Go: --sdk-path only); without
any, the guest-sdk directory of the language in the checkout this wasmop was built from,
when it is there.

Exit codes:
  0  the project was written; the next commands are printed
  1  it was not: a bad name or kind, a directory that is not empty, no SDK to depend on
  2  a usage error (bad or missing arguments)";

/// The languages `wasmop new` writes projects in.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum Lang {
    /// Rust, with the `wasmop-guest` crate.
    Rust,
    /// Python, with the `wasmop-guest` package, built by componentize-py.
    Python,
    /// Go, with the `wasmop.dev/wasmop` module, built by stock Go for wasip1.
    Go,
}

/// Arguments of `wasmop new`.
#[derive(Debug, clap::Args)]
#[command(after_help = AFTER_HELP)]
pub(crate) struct RawNew {
    /// The plugin's name: lowercase letters, digits and `-`, starting with a letter (at most
    /// 63). It names the project directory, the crate, and the field manager `wasmop/NAME`.
    name: String,
    /// The language of the project.
    #[arg(long, value_enum, default_value = "rust")]
    lang: Lang,
    /// The custom kind the plugin reconciles, as GROUP/VERSION/KIND (`example.com/v1/Backup`).
    /// [default: example.com/v1/ and NAME in CamelCase]
    #[arg(long, value_name = "GROUP/VERSION/KIND")]
    kind: Option<String>,
    /// A built-in kind the plugin creates and owns besides its ConfigMap, declared in
    /// `describe` so the host watches it (repeatable): one of
    /// ConfigMap, Service, PersistentVolumeClaim, Pod, Deployment, StatefulSet, DaemonSet,
    /// Job, CronJob, Ingress, NetworkPolicy. (Sensitive kinds, such as Secret, need a grant
    /// in the host's config: declare them by hand.)
    #[arg(long, value_name = "KIND")]
    owns: Vec<String>,
    /// Where to write the project (a new or empty directory). [default: ./NAME]
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
    /// Depend on the SDK in this directory: a wasmop checkout's `guest-sdk/rust` (or
    /// `guest-sdk/python`, `guest-sdk/go` with --lang python, go).
    #[arg(long, value_name = "DIR", conflicts_with_all = ["sdk_git", "sdk_version"])]
    sdk_path: Option<PathBuf>,
    /// Depend on the SDK in this git repository (wasmop's), at --sdk-rev (Python: pip's
    /// `git+URL@REV#subdirectory=guest-sdk/python`).
    #[arg(long, value_name = "URL", conflicts_with = "sdk_version")]
    sdk_git: Option<String>,
    /// With --sdk-git: the commit, tag or branch (default: the repository's default branch).
    #[arg(long, value_name = "REV", requires = "sdk_git")]
    sdk_rev: Option<String>,
    /// Depend on this released version of `wasmop-guest` (the crate from crates.io, or the
    /// package from PyPI with --lang python).
    #[arg(long, value_name = "VERSION")]
    sdk_version: Option<String>,
}

/// Built-in kinds a project may own, and their k8s-openapi modules. Not the host's
/// sensitive kinds ([`SENSITIVE`]): owning one needs a grant in the host's config, which
/// a generated project cannot give itself.
const BUILT_IN: &[(&str, &str)] = &[
    ("ConfigMap", "core::v1"),
    ("Service", "core::v1"),
    ("PersistentVolumeClaim", "core::v1"),
    ("Pod", "core::v1"),
    ("Deployment", "apps::v1"),
    ("StatefulSet", "apps::v1"),
    ("DaemonSet", "apps::v1"),
    ("Job", "batch::v1"),
    ("CronJob", "batch::v1"),
    ("Ingress", "networking::v1"),
    ("NetworkPolicy", "networking::v1"),
];

/// Names the generated sources declare or import besides the kind's own (in any language):
/// a custom kind by one of them would clash.
const SOURCE_NAMES: &[&str] = &[
    "Action",
    "Condition",
    "Context",
    "Event",
    "Info",
    "Kind",
    "Object",
    "Plugin",
    "ReconcileError",
    "Reconciler",
];

/// The host's built-in sensitive kinds a plugin might own (`wasmop_core::policy`).
const SENSITIVE: &[&str] = &["Secret", "ServiceAccount", "Role", "RoleBinding"];

/// Names a plugin may not take: Rust keywords and reserved words (not crate names) and the
/// words YAML reads as booleans or null (they would need quoting in every file).
const RESERVED: &[&str] = &[
    "as", "async", "await", "become", "box", "break", "const", "continue", "crate", "do", "dyn",
    "else", "enum", "extern", "false", "final", "fn", "for", "gen", "if", "impl", "in", "let",
    "loop", "macro", "match", "mod", "move", "mut", "n", "no", "null", "off", "on", "override",
    "priv", "pub", "ref", "return", "self", "static", "struct", "super", "test", "trait", "true",
    "try", "type", "typeof", "unsafe", "unsized", "use", "virtual", "where", "while", "y", "yes",
    "yield",
];

/// A validated plugin name: a DNS-1123 label that starts with a letter and is no reserved
/// word, so it is also a crate name, a file name and a plain YAML string.
fn plugin_name(name: &str) -> anyhow::Result<String> {
    wasmop_core::plugin::PluginName::new(name)?;
    if !name.starts_with(|c: char| c.is_ascii_lowercase()) {
        bail!("plugin name `{name}` must start with a letter (it is also the crate's name)");
    }
    if RESERVED.contains(&name) {
        bail!("plugin name `{name}` is a Rust keyword or a YAML boolean/null; choose another");
    }
    Ok(name.to_owned())
}

/// A custom kind: group, version and kind, each checked as the API server checks a CRD's.
#[derive(Debug, PartialEq)]
struct Kind {
    group: String,
    version: String,
    kind: String,
}

impl Kind {
    /// Parses GROUP/VERSION/KIND.
    fn parse(text: &str) -> anyhow::Result<Self> {
        let parts: Vec<&str> = text.split('/').collect();
        let [group, version, kind] = parts[..] else {
            bail!("--kind `{text}` is not GROUP/VERSION/KIND (e.g. example.com/v1/Backup)");
        };
        let label = |l: &str| {
            !l.is_empty()
                && l.len() <= 63
                && l.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !l.starts_with('-')
                && !l.ends_with('-')
        };
        if group.len() > 253 || !group.contains('.') || !group.split('.').all(label) {
            bail!(
                "--kind `{text}`: the group `{group}` must be a DNS subdomain with at least \
                 one dot, such as example.com (a custom kind's group; built-in kinds are not \
                 scaffolded)"
            );
        }
        if group.ends_with(".k8s.io") || group.ends_with(".kubernetes.io") || group == "k8s.io" {
            bail!("--kind `{text}`: the group `{group}` is reserved for Kubernetes itself");
        }
        if !is_version(version) {
            bail!(
                "--kind `{text}`: the version `{version}` must look like v1, v2beta1 or v1alpha2"
            );
        }
        let camel = kind.len() <= 63
            && kind.starts_with(|c: char| c.is_ascii_uppercase())
            && kind.chars().all(|c| c.is_ascii_alphanumeric());
        if !camel {
            bail!(
                "--kind `{text}`: the kind `{kind}` must be CamelCase: an uppercase letter, \
                 then letters and digits (at most 63)"
            );
        }
        if RESERVED.contains(&kind.to_ascii_lowercase().as_str()) {
            bail!("--kind `{text}`: the kind `{kind}` is a Rust keyword or a YAML boolean/null");
        }
        if BUILT_IN.iter().any(|(k, _)| *k == kind) {
            bail!(
                "--kind `{text}`: `{kind}` is a built-in kind's name; a custom kind by that \
                 name would be confused with it in the plugin's source"
            );
        }
        if SOURCE_NAMES.contains(&kind) {
            bail!(
                "--kind `{text}`: `{kind}` is a name the generated plugin source uses for \
                 something else (the reconciler or an SDK type); choose another"
            );
        }
        Ok(Self {
            group: group.to_owned(),
            version: version.to_owned(),
            kind: kind.to_owned(),
        })
    }

    /// The default kind of a plugin: `example.com/v1/` and the name in CamelCase.
    fn default_for(name: &str) -> anyhow::Result<Self> {
        let kind: String = name
            .split('-')
            .map(|w| {
                let mut chars = w.chars();
                chars.next().map_or_else(String::new, |c| {
                    c.to_ascii_uppercase().to_string() + chars.as_str()
                })
            })
            .collect();
        Self::parse(&format!("example.com/v1/{kind}"))
            .with_context(|| format!("no default kind for `{name}`; give --kind"))
    }

    /// The CRD's plural, as kube's derive (and so `crd.yaml`) spells it.
    fn plural(&self) -> String {
        let gvk = kube::core::GroupVersionKind::gvk(&self.group, &self.version, &self.kind);
        kube::core::ApiResource::from_gvk(&gvk).plural
    }
}

/// `v1`, `v2beta1`, `v1alpha2`: a Kubernetes API version.
fn is_version(v: &str) -> bool {
    let Some(rest) = v.strip_prefix('v') else {
        return false;
    };
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 || rest.starts_with('0') {
        return false;
    }
    let tail = &rest[digits..];
    if tail.is_empty() {
        return true;
    }
    let Some(n) = tail
        .strip_prefix("alpha")
        .or_else(|| tail.strip_prefix("beta"))
    else {
        return false;
    };
    !n.is_empty() && !n.starts_with('0') && n.bytes().all(|b| b.is_ascii_digit())
}

/// Fills a template's `{{key}}` placeholders. Every placeholder must have a value: a left-over
/// one is a bug in the templates, caught by the unit tests.
fn render(template: &str, vars: &[(&str, &str)]) -> String {
    let mut out = template.to_owned();
    for (key, value) in vars {
        out = out.replace(&format!("{{{{{key}}}}}"), value);
    }
    out
}

/// What every project's templates are filled with, whatever its language.
struct Shared<'a> {
    name: &'a str,
    kind: &'a Kind,
    singular: String,
    plural: String,
    case: String,
    summary: String,
}

impl<'a> Shared<'a> {
    fn new(name: &'a str, kind: &'a Kind) -> Self {
        let singular = kind.kind.to_ascii_lowercase();
        Self {
            name,
            kind,
            plural: kind.plural(),
            case: format!("{singular}-gets-its-configmap"),
            summary: format!(
                "each {} ({}/{}) gets a ConfigMap with its message and a Ready condition",
                kind.kind, kind.group, kind.version
            ),
            singular,
        }
    }

    /// The placeholders every project's templates use, the SDK dependency and the CRD file's
    /// header among them; a language adds its own.
    fn vars<'b>(&'b self, sdk: &'b str, crd_header: &'b str) -> Vec<(&'b str, &'b str)> {
        vec![
            ("name", self.name),
            ("summary", &self.summary),
            ("sdk", sdk),
            ("group", &self.kind.group),
            ("version", &self.kind.version),
            ("kind", &self.kind.kind),
            ("plural", &self.plural),
            ("singular", &self.singular),
            ("case", &self.case),
            ("crd_header", crd_header),
        ]
    }

    /// The language's own `templates` (path, text) filled from `vars`, then the files every
    /// project has: the CRD, a sample and a golden case.
    fn files(&self, vars: &[(&str, &str)], templates: &[(&str, &str)]) -> Vec<(String, String)> {
        let file = |path: String, template: &str| (path, render(template, vars));
        let (singular, case) = (&self.singular, &self.case);
        let mut files: Vec<_> = templates
            .iter()
            .map(|(path, template)| file((*path).to_owned(), template))
            .collect();
        files.extend([
            file("crd.yaml".into(), include_str!("new/common/crd.yaml.tmpl")),
            file(
                format!("samples/{singular}.yaml"),
                include_str!("new/common/sample.yaml.tmpl"),
            ),
            file(
                format!("tests/cases/{case}/object.yaml"),
                include_str!("new/common/object.yaml.tmpl"),
            ),
            file(
                format!("tests/cases/{case}/state.yaml"),
                include_str!("new/common/state.yaml"),
            ),
            file(
                format!("tests/cases/{case}/expected.yaml"),
                include_str!("new/common/expected.yaml.tmpl"),
            ),
        ]);
        files
    }
}

/// The API group of a k8s-openapi module in [`BUILT_IN`].
fn api_group(module: &str) -> &'static str {
    match module {
        "core::v1" => "",
        "apps::v1" => "apps",
        "batch::v1" => "batch",
        _ => "networking.k8s.io",
    }
}

/// Checks the `--owns` kinds against [`BUILT_IN`].
fn owned_kinds(owns: &[String]) -> anyhow::Result<Vec<String>> {
    let mut out = Vec::new();
    for k in owns {
        if SENSITIVE.contains(&k.as_str()) {
            bail!(
                "--owns `{k}`: {k} is a sensitive kind, which a plugin may own only with an \
                 explicit grant in the host's config (`plugins.<name>.grants`); declare it in \
                 src/lib.rs by hand (`.owns::<{k}>()`) and add the grant where the host runs"
            );
        }
        if !BUILT_IN.iter().any(|(b, _)| b == k) {
            let known: Vec<&str> = BUILT_IN.iter().map(|(b, _)| *b).collect();
            bail!(
                "--owns `{k}` is not a kind wasmop new knows; one of {}",
                known.join(", ")
            );
        }
        if !out.contains(k) {
            out.push(k.clone());
        }
    }
    Ok(out)
}

/// Makes `dir` (which must not exist, or be empty) and writes `files` into it; on a failure,
/// removes what it created.
fn write_project(dir: &Path, files: &[(String, String)]) -> anyhow::Result<()> {
    let created = match std::fs::read_dir(dir) {
        Ok(mut entries) => {
            if entries.next().is_some() {
                bail!(
                    "{} already exists and is not empty; choose another NAME or --dir",
                    dir.display()
                );
            }
            false
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
            true
        }
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", dir.display())),
    };
    let written = files.iter().try_for_each(|(path, text)| {
        let path = dir.join(path);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("cannot create {}", parent.display()))?;
        }
        std::fs::write(&path, text).with_context(|| format!("cannot write {}", path.display()))?;
        if text.starts_with("#!") {
            use std::os::unix::fs::PermissionsExt as _;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))
                .with_context(|| format!("cannot make {} executable", path.display()))?;
        }
        Ok(())
    });
    if written.is_err() {
        if created {
            let _ = std::fs::remove_dir_all(dir);
        } else if let Ok(entries) = std::fs::read_dir(dir) {
            for entry in entries.flatten() {
                let _ = std::fs::remove_dir_all(entry.path())
                    .or_else(|_| std::fs::remove_file(entry.path()));
            }
        }
    }
    written
}

/// Writes the project and prints the next commands.
pub(crate) async fn run(raw: RawNew) -> anyhow::Result<Exit> {
    let name = plugin_name(&raw.name)?;
    let kind = match &raw.kind {
        Some(text) => Kind::parse(text)?,
        None => Kind::default_for(&name)?,
    };
    let owns = owned_kinds(&raw.owns)?;
    let dir = raw.dir.clone().unwrap_or_else(|| PathBuf::from(&name));
    let files = match raw.lang {
        Lang::Rust => rust::rust_project(&name, &kind, &owns, &rust::sdk_dependency(&raw)?),
        Lang::Python => {
            python::python_project(&name, &kind, &owns, &python::python_sdk_requirement(&raw)?)
        }
        Lang::Go => {
            let package = go::package_name(&name)?;
            go::go_project(&name, &package, &kind, &owns, &go::go_sdk_dir(&raw)?)
        }
    };
    write_project(&dir, &files)?;
    let singular = kind.kind.to_ascii_lowercase();
    let case = format!("tests/cases/{singular}-gets-its-configmap");
    let (lang, build, wasm) = match raw.lang {
        Lang::Rust => (
            "Rust",
            "cargo build --release --target wasm32-wasip2".to_owned(),
            format!(
                "target/wasm32-wasip2/release/{}.wasm",
                name.replace('-', "_")
            ),
        ),
        Lang::Python => (
            "Python",
            "python3 -m venv .venv && .venv/bin/pip install -r requirements.txt\n  \
             .venv/bin/python build.py"
                .to_owned(),
            format!("target/{name}.wasm"),
        ),
        Lang::Go => (
            "Go",
            "go test ./...   # natively, over the SDK's fake host\n  ./build".to_owned(),
            format!("target/{name}.wasm"),
        ),
    };
    println!(
        "Created {dir} ({kind} {group}/{version}, {lang}). Next:\n\n  \
         cd {dir}\n  \
         wasmop dev      # build, run on a cluster (KUBECONFIG, or a local one), reload on save\n\n\
         Build and test by hand:\n  \
         {build}\n  \
         wasmop test {wasm} --object {case}/object.yaml --state {case}/state.yaml \
         --expect {case}/expected.yaml\n\n\
         {dir}/README.md has the rest.",
        dir = dir.display(),
        kind = kind.kind,
        group = kind.group,
        version = kind.version,
    );
    Ok(Exit::Success)
}

/// For the languages' tests: the text of the file at `path` among a scaffold's `files`.
#[cfg(test)]
fn written<'a>(files: &'a [(String, String)], path: &str) -> &'a str {
    files
        .iter()
        .find(|(p, _)| p == path)
        .map(|(_, text)| text.as_str())
        .unwrap_or_else(|| panic!("the scaffold writes no {path}"))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn names_are_checked_for_every_place_they_go() {
        assert!(plugin_name("backup-policy").is_ok());
        for bad in [
            "",
            "Backup",
            "1st",
            "-a",
            "a-",
            "a_b",
            "test",
            "yes",
            "self",
            &"a".repeat(64),
        ] {
            assert!(plugin_name(bad).is_err(), "{bad:?} accepted");
        }
        assert!(
            plugin_name("1st")
                .unwrap_err()
                .to_string()
                .contains("start with a letter")
        );
    }

    #[test]
    fn kinds_are_checked_as_the_api_server_checks_a_crd() {
        let k = Kind::parse("backup.example.com/v1beta2/BackupPolicy").unwrap();
        assert_eq!(k.group, "backup.example.com");
        assert_eq!(k.plural(), "backuppolicies");
        for bad in [
            "example.com/v1",
            "example/v1/Backup",
            "Example.com/v1/Backup",
            "apps.k8s.io/v1/Backup",
            "example.com/1/Backup",
            "example.com/v01/Backup",
            "example.com/v1gamma1/Backup",
            "example.com/v1/backup",
            "example.com/v1/Back-up",
            "example.com/v1/True",
            "example.com/v1/Job",
            "example.com/v1/Plugin",
            "example.com/v1/Context",
        ] {
            let e = Kind::parse(bad).unwrap_err().to_string();
            assert!(e.contains(bad), "{bad}: {e}");
        }
        assert_eq!(
            Kind::default_for("backup-policy").unwrap().kind,
            "BackupPolicy"
        );
    }

    #[test]
    fn sensitive_and_unknown_kinds_are_not_scaffolded() {
        let e = owned_kinds(&["Secret".into()]).unwrap_err().to_string();
        assert!(e.contains("sensitive") && e.contains("grant"), "{e}");
        let e = owned_kinds(&["Widget".into()]).unwrap_err().to_string();
        assert!(e.contains("`Widget`") && e.contains("Deployment"), "{e}");
        assert_eq!(owned_kinds(&["Job".into(), "Job".into()]).unwrap(), ["Job"]);
    }

    #[test]
    fn a_directory_with_files_is_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("keep"), "mine").unwrap();
        let e = write_project(dir.path(), &[("a".into(), "b".into())]).unwrap_err();
        assert!(e.to_string().contains("not empty"), "{e}");
        assert_eq!(
            std::fs::read_to_string(dir.path().join("keep")).unwrap(),
            "mine"
        );
        assert!(!dir.path().join("a").exists());
    }
}
