//! Test component `other-world`: implements `example:greeter`, not `wasmop:plugin`; the host
//! must refuse to load it and say what it exports instead.

wit_bindgen::generate!({ path: "wit", world: "greeter" });

struct Greeter;

impl Guest for Greeter {
    fn greet(name: String) -> String {
        format!("hello, {name}")
    }
}

export!(Greeter);
