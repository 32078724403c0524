//! One call per batch: decode → decide → encode → fold → projection rows, for as long as the
//! native path covers the commands.
//!
//! ``Batch.run`` takes the batch's log records from ``start`` and, for each, decides
//! (``decide::Hot``), encodes the decision, folds it (``fold::Fold``) and, with a projector,
//! builds its rows (``rows::Stage``). It stops at the first record a step declines and says
//! which step, with what was done of that record so far, so the caller finishes that record in
//! Python (the specification) and calls again from the next one. Nothing a step declines has
//! changed anything.

use pyo3::exceptions::PyRuntimeError;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyTuple};

use crate::avro::Codec;
use crate::decide::{Decline, Hot};
use crate::fold::Fold;
use crate::rows::Stage;

#[pyclass(frozen, module = "claimgraph_native")]
pub struct Batch {
    hot: Py<Hot>,
    fold: Py<Fold>,
    writer: Py<Codec>,
}

#[pymethods]
impl Batch {
    #[new]
    fn new(hot: Py<Hot>, fold: Py<Fold>, writer: Py<Codec>) -> Self {
        Batch { hot, fold, writer }
    }

    /// ``(next, decisions, encoded, rows, tail)``: the records ``start..next`` were decided,
    /// folded and (with a projector) staged, their decisions and bytes in ``decisions`` and
    /// ``encoded``, their rows as ``[key, value, key, value, ...]``. ``tail`` is None when the
    /// batch is done, else what remains of record ``next``: ``("decide", why)`` (all of it),
    /// ``("encode", why, d)``, ``("fold", why, d, data)``, ``("rows", why, d, data, changes)``.
    #[pyo3(signature = (state, projector, records, start, version))]
    fn run<'py>(
        &self,
        py: Python<'py>,
        state: &Bound<'py, PyAny>,
        projector: &Bound<'py, PyAny>,
        records: &Bound<'py, PyList>,
        start: usize,
        version: u64,
    ) -> PyResult<Bound<'py, PyTuple>> {
        let hot = self.hot.get();
        let fold = self.fold.get();
        let writer = self.writer.get();
        let stage = if projector.is_none() {
            None
        } else {
            Some(Stage::new(py, state, projector).map_err(|Decline(why)| {
                PyRuntimeError::new_err(format!("the projector cannot be staged natively: {why}"))
            })?)
        };
        let decisions = PyList::empty(py);
        let encoded = PyList::empty(py);
        let mut rows: Vec<Vec<u8>> = Vec::new();
        let mut tail: PyObject = py.None();
        let mut i = start;
        let mut v = version;
        let n = records.len();
        while i < n {
            let rec = records.get_item(i)?;
            let value = rec.getattr(intern!(py, "value"))?;
            let offset = rec.getattr(intern!(py, "offset"))?;
            let ts = rec.getattr(intern!(py, "timestamp"))?;
            let d = match hot.run(py, state, &value, &offset, &ts) {
                Ok(d) => d,
                Err(Decline(why)) => {
                    tail = ("decide", why).into_pyobject(py)?.into_any().unbind();
                    break;
                }
            };
            let data = match writer.encode_value(d.as_any()) {
                Ok(b) => PyBytes::new(py, &b),
                Err(_) => {
                    tail = ("encode", "encode", d)
                        .into_pyobject(py)?
                        .into_any()
                        .unbind();
                    break;
                }
            };
            let vobj = v.into_pyobject(py)?.into_any();
            let ch = match fold.run(py, state, &d, &vobj, data.as_any()) {
                Ok(ch) => ch,
                Err(Decline("broken")) => {
                    return Err(PyRuntimeError::new_err(
                        "the native fold failed after it began changing the state: \
                         the state is not usable",
                    ))
                }
                Err(Decline(why)) => {
                    tail = ("fold", why, d, data)
                        .into_pyobject(py)?
                        .into_any()
                        .unbind();
                    break;
                }
            };
            if let Some(stage) = &stage {
                if let Err(Decline(why)) = stage.rows(&d, &ch, v, &mut rows) {
                    tail = ("rows", why, d, data, ch)
                        .into_pyobject(py)?
                        .into_any()
                        .unbind();
                    break;
                }
            }
            decisions.append(d)?;
            encoded.append(data)?;
            i += 1;
            v += 1;
        }
        let flat = PyList::empty(py);
        for r in rows {
            flat.append(PyBytes::new(py, &r))?;
        }
        PyTuple::new(
            py,
            [
                i.into_pyobject(py)?.into_any(),
                decisions.into_any(),
                encoded.into_any(),
                flat.into_any(),
                tail.into_bound(py),
            ],
        )
    }
}

/// ``pydantic_core.to_json`` of ``value`` as the row writer writes it, or None (declined).
#[pyfunction]
pub fn row_json<'py>(py: Python<'py>, value: &Bound<'py, PyAny>) -> Option<Bound<'py, PyBytes>> {
    let mut out = Vec::new();
    crate::rows::put_json(&mut out, value).ok()?;
    Some(PyBytes::new(py, &out))
}
