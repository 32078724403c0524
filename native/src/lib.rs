//! claimgraph's native per-command path. The pure-Python core (``claimgraph.core``) is its
//! executable specification: every result here must equal the Python core's, byte for byte,
//! and every case this module does not cover is handed back to Python (``None``).

use pyo3::prelude::*;

mod avro;
mod decide;
mod sha256;

/// The SHA-256 of ``data``, in hex (the chain's ``command_sha256``).
#[pyfunction]
fn sha256_hex(data: &[u8]) -> String {
    sha256::hex(&sha256::sha256(data))
}

#[pymodule]
fn claimgraph_native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<avro::Codec>()?;
    m.add_class::<decide::Hot>()?;
    m.add_function(wrap_pyfunction!(sha256_hex, m)?)?;
    m.add("ABI", 1)?;
    Ok(())
}
