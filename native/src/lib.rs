//! claimgraph's native per-command path. The pure-Python core (``claimgraph.core``) is its
//! executable specification: every result here must equal the Python core's, byte for byte,
//! and every case this module does not cover is handed back to Python (``None``). It takes
//! the specification's limits, names and codes at load (``Spec``) and declares what it
//! implements (``implements()``, ``spec.rs``); ``SOURCES`` names the sources it was built from.

use pyo3::prelude::*;

mod avro;
mod batch;
mod decide;
mod fold;
mod rows;
mod sha256;
mod spec;
mod table;

/// The SHA-256 of ``data``, in hex (the chain's ``command_sha256``).
/// ``scalar``: without the CPU's SHA extensions (tests check both ways).
#[pyfunction]
#[pyo3(signature = (data, scalar=false))]
fn sha256_hex(data: &[u8], scalar: bool) -> String {
    sha256::hex(&if scalar {
        sha256::sha256_scalar(data)
    } else {
        sha256::sha256(data)
    })
}

/// ``claimgraph.native._rust``: the package's build (setup.py) puts it inside the package.
#[pymodule]
#[pyo3(name = "_rust")]
fn claimgraph_native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<spec::Spec>()?;
    m.add_class::<avro::Codec>()?;
    m.add_class::<decide::Hot>()?;
    m.add_class::<fold::Fold>()?;
    m.add_class::<batch::Batch>()?;
    m.add_class::<table::Store>()?;
    m.add_class::<table::ClaimMap>()?;
    m.add_class::<table::EdgeMap>()?;
    m.add_class::<table::ClaimRef>()?;
    m.add_class::<table::EdgeRef>()?;
    m.add_function(wrap_pyfunction!(batch::row_json, m)?)?;
    m.add_function(wrap_pyfunction!(sha256_hex, m)?)?;
    m.add_function(wrap_pyfunction!(spec::implements, m)?)?;
    m.add("ABI", 4)?;
    m.add("VERSION", env!("CARGO_PKG_VERSION"))?;
    m.add("SOURCES", env!("CLAIMGRAPH_NATIVE_SOURCES"))?;
    Ok(())
}
