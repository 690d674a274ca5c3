module wasmop.dev/wasmop

go 1.25
