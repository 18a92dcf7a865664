// Empty on purpose: it exists so the `cc` build-dependency in Cargo.toml (and
// with it cc's `parallel` feature for numkong's C kernels) is part of the build.
fn main() {
    println!("cargo::rerun-if-changed=build.rs");
}
