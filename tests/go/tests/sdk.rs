//! The Go SDK's own checks, run natively by `cargo test -p wasmop-go-plugins` (so by
//! `./dev test`): `go vet` and `go test` of the SDK (`guest-sdk/go`: its unit tests run
//! reconcilers over a fake host) and of every Go plugin, `go vet` of the test plugin; and
//! the tests of the alignment fix and the reserve in the copy of wit-bindgen's Go runtime
//! package that `./dev setup` patched (`guest-sdk/go/witpatch/allocate_test.go`).

use std::path::Path;
use std::process::Command;

/// Runs `go <args>` in `dir` natively (no GOOS/GOARCH from the environment), failing with
/// its output.
fn go(dir: &Path, args: &[&str]) {
    let output = Command::new("go")
        .args(args)
        .current_dir(dir)
        .env_remove("GOOS")
        .env_remove("GOARCH")
        .env("GOWORK", "off")
        .env("GOFLAGS", "-mod=mod")
        .output()
        .unwrap_or_else(|e| panic!("cannot run go (is Go installed? ./dev setup says): {e}"));
    assert!(
        output.status.success(),
        "go {} in {} failed ({}):\n{}{}",
        args.join(" "),
        dir.display(),
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

#[test]
fn the_go_sdk_vets_and_passes_its_unit_tests() {
    let sdk = wasmop_go_plugins::workspace().join("guest-sdk/go");
    go(&sdk, &["vet", "./..."]);
    go(&sdk, &["test", "-count=1", "./..."]);
}

#[test]
fn every_go_plugin_vets_and_passes_its_tests_and_the_test_plugin_vets() {
    let root = wasmop_go_plugins::workspace();
    for name in wasmop_go_plugins::names() {
        let dir = root.join("plugins/go").join(name);
        go(&dir, &["vet", "./..."]);
        go(&dir, &["test", "-count=1", "./..."]);
    }
    go(&root.join("tests/go/panicky"), &["vet", "./..."]);
}

/// The tests of the changes `./dev setup` makes to wit-bindgen-go 0.63's runtime package: an
/// allocation whose size is not a multiple of its alignment (describe's return area, 92
/// bytes aligned to 8) is rounded up instead of panicking; the reserve past the heap hands
/// out aligned, disjoint blocks until it is spent.
#[test]
fn the_patched_wit_runtime_aligns_allocations_and_hands_out_its_reserve() {
    let tools = wasmop_go_plugins::tools();
    let pkg = tools
        .last()
        .expect("--tools prints the Go package's copy last");
    assert!(
        pkg.join(".installed").is_file(),
        "{} is not installed; run ./dev setup",
        pkg.display()
    );
    go(
        pkg,
        &[
            "test",
            "-count=1",
            "-tags",
            "wasmop_witpatch",
            "./wit/runtime",
        ],
    );
}
