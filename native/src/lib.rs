//! claimgraph's native per-command path. The pure-Python core (``claimgraph.core``) is its
//! executable specification: every result here must equal the Python core's, byte for byte,
//! and every case this module does not cover is handed back to Python (``None``).

use pyo3::prelude::*;

mod avro;

#[pymodule]
fn claimgraph_native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<avro::Codec>()?;
    m.add("ABI", 1)?;
    Ok(())
}
