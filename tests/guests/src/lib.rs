//! Paths of the wasm components built from plugins/ and tests/hostile/.
