//! Writes the WASI preview-1 reactor adapter to the path given as the only argument, for
//! `guest-sdk/go/build`: a Go plugin is a wasip1 module, and `wasm-tools component new
//! --adapt` turns it into a WASI P2 component with this adapter. The bytes come from the
//! `wasi-preview1-component-adapter-provider` crate on crates.io (no download of our own);
//! `./dev setup` runs this once into the Go toolchain's directory.

use std::process::ExitCode;

fn main() -> ExitCode {
    let mut args = std::env::args_os().skip(1);
    let (Some(path), None) = (args.next(), args.next()) else {
        eprintln!("usage: wasmop-go-adapter OUT.wasm");
        return ExitCode::from(2);
    };
    let adapter = wasi_preview1_component_adapter_provider::WASI_SNAPSHOT_PREVIEW1_REACTOR_ADAPTER;
    // Written beside the target and renamed, so a reader never sees half an adapter.
    let partial = std::path::PathBuf::from(format!("{}.partial", path.to_string_lossy()));
    if let Err(e) =
        std::fs::write(&partial, adapter).and_then(|()| std::fs::rename(&partial, &path))
    {
        eprintln!(
            "wasmop-go-adapter: cannot write {}: {e}",
            std::path::Path::new(&path).display()
        );
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}
