//! Records what the module is built from: ``SOURCES``, the SHA-256 of the files of this
//! package (``claimgraph.native.staleness`` hashes the checkout's the same way and reports a
//! build made from other sources as stale).
//!
//! The digest covers ``build.rs``, ``Cargo.toml``, ``Cargo.lock`` and ``src/*.rs``, in the
//! order of their paths: for each, its path (``/``-separated), a NUL, its length as u64_be,
//! its bytes. (The package's build, ``setup.py`` at the root, packages it; it does not change
//! what is compiled.)

use std::fs;
use std::path::Path;

#[allow(dead_code)]
#[path = "src/sha256.rs"]
mod sha256;

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files: Vec<String> = ["build.rs", "Cargo.toml", "Cargo.lock"]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
    for entry in fs::read_dir(root.join("src")).expect("native/src") {
        let name = entry.expect("native/src entry").file_name();
        let name = name.to_str().expect("a UTF-8 file name").to_owned();
        if name.ends_with(".rs") {
            files.push(format!("src/{name}"));
        }
    }
    files.sort();
    let mut all = Vec::new();
    for rel in &files {
        let bytes = fs::read(root.join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"));
        all.extend_from_slice(rel.as_bytes());
        all.push(0);
        all.extend_from_slice(&(bytes.len() as u64).to_be_bytes());
        all.extend_from_slice(&bytes);
        println!("cargo:rerun-if-changed={rel}");
    }
    println!("cargo:rerun-if-changed=src");
    println!(
        "cargo:rustc-env=CLAIMGRAPH_NATIVE_SOURCES={}",
        sha256::hex(&sha256::sha256(&all))
    );
}
