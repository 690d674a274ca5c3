module wasmop.dev/plugins/required-labels

go 1.25

require wasmop.dev/wasmop v0.0.0

replace wasmop.dev/wasmop => ../../../guest-sdk/go
