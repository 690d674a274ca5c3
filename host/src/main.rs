//! The `wasmop` binary; everything is in [`wasmop::cli`].

fn main() -> std::process::ExitCode {
    wasmop::cli::main()
}
