//! The `wasmop` binary; everything is in [`wasmop::cli`].

fn main() -> std::process::ExitCode {
    // Before the start-up's own pages are mapped, 64 KiB at a time.
    wasmop_runtime::map_own_code_page_by_page();
    wasmop::cli::main()
}
