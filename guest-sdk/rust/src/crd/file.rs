//! The CRD file beside a plugin: rendering a type's CRD as YAML and the test that keeps the
//! file equal to it (native builds only: a plugin's tests, never the component).

use std::path::Path;

use kube_core::CustomResourceExt;

/// The environment variable that makes [`check_file`] write the file instead of comparing:
/// `WASMOP_BLESS=1 cargo test -p <plugin>`, the same switch the golden cases use.
pub const BLESS_VAR: &str = "WASMOP_BLESS";

/// `T`'s CRD as the YAML [`check_file`] keeps: a header saying where it comes from and how
/// to rewrite it, then the `CustomResourceDefinition`.
///
/// # Panics
/// When the CRD does not serialize, which kube's derive never produces.
pub fn rendered<T: CustomResourceExt>(package: &str) -> String {
    let crd = T::crd();
    let kind = &crd.spec.names.kind;
    let yaml = serde_yaml::to_string(&crd)
        .unwrap_or_else(|e| panic!("the CRD of {kind} does not serialize as YAML: {e}"));
    format!(
        "# The {kind} CustomResourceDefinition, generated from the plugin's Rust types by\n\
         # `{BLESS_VAR}=1 cargo test -p {package}`: edit the types, not this file.\n{yaml}"
    )
}

/// Checks that the file at `path` is `T`'s CRD as [`rendered`] writes it, for a test of the
/// plugin `package`; with `WASMOP_BLESS=1` set, writes the file instead. Use
/// [`check_crd!`](crate::check_crd), which passes the path and the package.
///
/// # Panics
/// When the file is missing or differs (the message names the file, the first line that
/// differs and the command that rewrites it), or cannot be written when blessing.
pub fn check_file<T: CustomResourceExt>(path: &Path, package: &str) {
    let want = rendered::<T>(package);
    if std::env::var_os(BLESS_VAR).is_some_and(|v| !v.is_empty() && v != "0") {
        std::fs::write(path, &want)
            .unwrap_or_else(|e| panic!("cannot write {}: {e}", path.display()));
        return;
    }
    let bless = format!("`{BLESS_VAR}=1 cargo test -p {package}` writes it");
    let have = match std::fs::read_to_string(path) {
        Ok(have) => have,
        Err(e) => panic!("cannot read the CRD file {}: {e}; {bless}", path.display()),
    };
    if have == want {
        return;
    }
    let (line, have_line, want_line) = first_difference(&have, &want);
    panic!(
        "{} is not the CRD the Rust types generate (line {line}: the file has {have_line:?}, \
         the types give {want_line:?}); {bless}, then review the diff",
        path.display()
    );
}

/// The first line (1-based) where `have` and `want` differ, with both lines (`""` past
/// the end of one).
fn first_difference<'a>(have: &'a str, want: &'a str) -> (usize, &'a str, &'a str) {
    let mut have_lines = have.lines();
    let mut want_lines = want.lines();
    let mut line = 1;
    loop {
        match (have_lines.next(), want_lines.next()) {
            (Some(h), Some(w)) if h == w => line += 1,
            (h, w) => return (line, h.unwrap_or_default(), w.unwrap_or_default()),
        }
    }
}

/// Checks (or with `WASMOP_BLESS=1` writes) the CRD file of a CRD type, at a path relative
/// to the calling crate's manifest directory. See [`crd`](crate::crd).
///
/// ```ignore
/// #[test]
/// fn crd_yaml_is_generated_from_the_types() {
///     wasmop_guest::check_crd!(Database, "crd.yaml");
/// }
/// ```
#[macro_export]
macro_rules! check_crd {
    ($ty:ty, $path:literal $(,)?) => {
        $crate::crd::check_file::<$ty>(
            ::std::path::Path::new(::core::concat!(
                ::core::env!("CARGO_MANIFEST_DIR"),
                "/",
                $path
            )),
            ::core::env!("CARGO_PKG_NAME"),
        )
    };
}

#[cfg(test)]
mod tests {
    use schemars::JsonSchema;
    use serde::{Deserialize, Serialize};

    use super::{check_file, first_difference, rendered};
    use crate::crd::CustomResource;
    use crate::object::{Gvk, Object, encode};

    /// A CRD type declared as a plugin declares one.
    #[derive(CustomResource, Serialize, Deserialize, JsonSchema, Clone, Debug)]
    #[kube(
        group = "example.com",
        version = "v1",
        kind = "Gadget",
        status = "GadgetStatus",
        crates(kube_core = "crate::kube_core")
    )]
    struct GadgetSpec {
        /// How many.
        #[schemars(range(max = 9))]
        count: u8,
    }

    #[derive(Serialize, Deserialize, JsonSchema, Clone, Debug)]
    struct GadgetStatus {
        #[serde(default)]
        #[schemars(schema_with = "crate::crd::conditions")]
        conditions: Vec<k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition>,
    }

    #[test]
    fn a_derived_crd_type_is_an_object() {
        const { assert!(!Gadget::NAMESPACED) };
        assert_eq!(Gvk::of::<Gadget>().to_string(), "example.com/v1/Gadget");
        let json = encode(&Gadget::new("g", GadgetSpec { count: 2 })).expect("encodes");
        // The derive writes apiVersion and kind itself; the encoder keeps one of each.
        assert_eq!(json.matches("\"apiVersion\"").count(), 1, "{json}");
        assert!(json.starts_with(r#"{"apiVersion":"example.com/v1","kind":"Gadget""#));
    }

    #[test]
    fn the_rendered_crd_carries_the_schema_and_says_how_to_rewrite_it() {
        let yaml = rendered::<Gadget>("gadgets");
        assert!(
            yaml.starts_with("# The Gadget CustomResourceDefinition"),
            "{yaml}"
        );
        assert!(
            yaml.contains("`WASMOP_BLESS=1 cargo test -p gadgets`"),
            "{yaml}"
        );
        for want in [
            "name: gadgets.example.com",
            "scope: Cluster",
            "description: How many.",
            "maximum: 9.0",
            "x-kubernetes-list-type: map",
            "- Unknown",
            "status: {}",
        ] {
            assert!(yaml.contains(want), "{want:?} missing from\n{yaml}");
        }
    }

    #[test]
    fn check_file_accepts_the_rendered_crd_and_names_the_first_difference() {
        let dir = std::env::temp_dir().join(format!("wasmop-crd-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let path = dir.join("crd.yaml");
        std::fs::write(&path, rendered::<Gadget>("gadgets")).expect("written");
        check_file::<Gadget>(&path, "gadgets");

        std::fs::write(
            &path,
            rendered::<Gadget>("gadgets").replace("maximum: 9", "maximum: 8"),
        )
        .expect("written");
        let panic = std::panic::catch_unwind(|| check_file::<Gadget>(&path, "gadgets"))
            .expect_err("a stale file fails");
        let message = panic.downcast_ref::<String>().expect("a message");
        assert!(
            message.contains("crd.yaml is not the CRD the Rust types generate"),
            "{message}"
        );
        assert!(
            message.contains("maximum: 8.0\", the types give \""),
            "{message}"
        );
        assert!(
            message.contains("`WASMOP_BLESS=1 cargo test -p gadgets` writes it"),
            "{message}"
        );

        std::fs::remove_file(&path).expect("removed");
        let panic = std::panic::catch_unwind(|| check_file::<Gadget>(&path, "gadgets"))
            .expect_err("a missing file fails");
        let message = panic.downcast_ref::<String>().expect("a message");
        assert!(message.contains("cannot read the CRD file"), "{message}");
        std::fs::remove_dir(&dir).ok();
    }

    #[test]
    fn the_first_difference_names_the_line_and_both_texts() {
        assert_eq!(first_difference("a\nb\nc\n", "a\nx\nc\n"), (2, "b", "x"));
        assert_eq!(first_difference("a\n", "a\nb\n"), (2, "", "b"));
        assert_eq!(first_difference("a\nb", "a\n"), (2, "b", ""));
    }
}
