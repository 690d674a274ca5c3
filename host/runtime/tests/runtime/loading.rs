//! Bad files are refused at load with the reason, and the newer-major fixture differs from
//! the contract only in its version.

use crate::support::{bytes_of, load_err, runtime, test_limits, tiered_runtime};

#[tokio::test]
async fn bad_files_are_refused_with_the_reason() {
    let _shared = crate::support::shared().await;
    // A tiered runtime refuses them alike: what Winch cannot compile goes to Cranelift.
    for rt in [runtime(), tiered_runtime(test_limits())] {
        let healthy = bytes_of("well-behaved");

        let truncated = healthy[..healthy.len() / 2].to_vec();
        let msg = load_err(&rt, truncated).await;
        assert!(msg.starts_with("truncated WebAssembly file"), "{msg}");

        // Deterministic noise (a linear congruential generator), no wasm magic.
        let mut x: u32 = 12345;
        let noise: Vec<u8> = (0..4096)
            .map(|_| {
                x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
                (x >> 16) as u8
            })
            .collect();
        let msg = load_err(&rt, noise).await;
        assert!(msg.contains("not a WebAssembly file"), "{msg}");

        let core = wat::parse_str("(module (func (export \"run\")))").expect("wat");
        let msg = load_err(&rt, core).await;
        assert!(
            msg.contains("a core WebAssembly module, not a component"),
            "{msg}"
        );

        let msg = load_err(&rt, bytes_of("other-world")).await;
        assert!(
            msg.contains("not a wasmop plugin") && msg.contains("greet"),
            "{msg}"
        );

        let msg = load_err(&rt, bytes_of("newer-major")).await;
        assert!(
            msg.contains("wasmop:plugin@1.0.0")
                && msg.contains("wasmop:plugin@0.3.0")
                && msg.contains("wasmop:plugin@0.2.0")
                && msg.contains("wasmop:plugin@0.1.0"),
            "{msg}"
        );

        let msg = load_err(&rt, bytes_of("missing-export")).await;
        assert!(
            msg.contains("export is incomplete") && msg.contains("cleanup"),
            "{msg}"
        );

        let msg = load_err(&rt, bytes_of("extra-import")).await;
        assert!(msg.contains("imports") && msg.contains("extra"), "{msg}");

        // Well framed, but not a valid component inside.
        let invalid = b"\0asm\x0d\0\x01\0\x01\x03abc".to_vec();
        let msg = load_err(&rt, invalid).await;
        assert!(msg.starts_with("invalid WebAssembly component"), "{msg}");
    }
}

#[test]
fn newer_major_fixture_differs_from_the_contract_only_in_its_version() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
    let real = std::fs::read_to_string(format!("{root}/wit/plugin.wit")).expect("wit");
    let copy = std::fs::read_to_string(format!("{root}/tests/hostile/newer-major/wit/plugin.wit"))
        .expect("copy");
    let copy: String = copy
        .lines()
        .skip_while(|l| l.starts_with("// "))
        .map(|l| format!("{l}\n"))
        .collect();
    assert_eq!(
        copy.replace("wasmop:plugin@1.0.0", "wasmop:plugin@0.3.0"),
        real
    );
}
