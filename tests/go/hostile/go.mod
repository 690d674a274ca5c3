module wasmop.dev/tests/hostile

go 1.25

require wasmop.dev/wasmop v0.0.0

replace wasmop.dev/wasmop => ../../../guest-sdk/go
