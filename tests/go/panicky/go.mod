module wasmop.dev/tests/panicky

go 1.25

require wasmop.dev/wasmop v0.0.0

replace wasmop.dev/wasmop => ../../../guest-sdk/go
