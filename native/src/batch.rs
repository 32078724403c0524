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
use pyo3::types::{PyBytes, PyDict, PyList, PyTuple};

use crate::avro::Codec;
use crate::decide::{Decline, Hot};
use crate::fold::Fold;
use crate::rows::Stage;

#[pyclass(frozen, module = "claimgraph.native._rust")]
pub struct Batch {
    hot: Py<Hot>,
    fold: Py<Fold>,
    writer: Py<Codec>,
    readers: Py<PyDict>, // decision header -> the Codec that reads that version as the current
}

#[pymethods]
impl Batch {
    #[new]
    fn new(hot: Py<Hot>, fold: Py<Fold>, writer: Py<Codec>, readers: Py<PyDict>) -> Self {
        Batch {
            hot,
            fold,
            writer,
            readers,
        }
    }

    /// The replay of logged decisions (a projector's, a restart's, ``audit``'s rebuild):
    /// ``(next, decisions, staged, tail)``. The records ``start..next`` (each decision's bytes
    /// in ``value``, its version in ``offset``) were decoded (into ``decisions``) and folded,
    /// and those above ``applied`` staged (``staged`` of them, their rows put into the
    /// projector's write batch). ``tail`` is None when
    /// the batch is done, else what remains of record ``next``: ``("decode", why)`` (all of
    /// it), ``("fold", why, d)``, ``("rows", why, d, changes)``.
    #[pyo3(signature = (state, projector, records, start, applied))]
    fn fold<'py>(
        &self,
        py: Python<'py>,
        state: &Bound<'py, PyAny>,
        projector: &Bound<'py, PyAny>,
        records: &Bound<'py, PyList>,
        start: usize,
        applied: i64,
    ) -> PyResult<Bound<'py, PyTuple>> {
        let fold = self.fold.get();
        let readers = self.readers.bind(py);
        let stage = if projector.is_none() {
            None
        } else {
            Some(
                Stage::new(py, self.hot.get().spec.get(), state, projector).map_err(
                    |Decline(why)| {
                        PyRuntimeError::new_err(format!(
                            "the projector cannot be staged natively: {why}"
                        ))
                    },
                )?,
            )
        };
        let mut tail: PyObject = py.None();
        let mut staged = 0usize;
        let decisions = PyList::empty(py);
        let mut i = start;
        let n = records.len();
        while i < n {
            let rec = records.get_item(i)?;
            let value = rec.getattr(intern!(py, "value"))?;
            let offset = rec.getattr(intern!(py, "offset"))?;
            let version: i64 = offset.extract()?;
            let d = match self.decode(py, readers, &value) {
                Some(d) => d,
                None => {
                    tail = ("decode", "decode").into_pyobject(py)?.into_any().unbind();
                    break;
                }
            };
            let ch = match fold.run(py, state, &d, &offset, &value) {
                Ok(ch) => ch,
                Err(Decline("broken")) => {
                    return Err(PyRuntimeError::new_err(
                        "the native fold failed after it began changing the state: \
                         the state is not usable",
                    ))
                }
                Err(Decline(why)) => {
                    tail = ("fold", why, d).into_pyobject(py)?.into_any().unbind();
                    break;
                }
            };
            if version > applied {
                if let Some(stage) = &stage {
                    if let Err(Decline(why)) = stage.rows(&d, &ch, version as u64) {
                        tail = ("rows", why, d, ch).into_pyobject(py)?.into_any().unbind();
                        break;
                    }
                    staged += 1;
                }
            }
            decisions.append(d)?;
            i += 1;
        }
        PyTuple::new(
            py,
            [
                i.into_pyobject(py)?.into_any(),
                decisions.into_any(),
                staged.into_pyobject(py)?.into_any(),
                tail.into_bound(py),
            ],
        )
    }

    /// ``(next, decisions, encoded, tail)``: the records ``start..next`` were decided, folded
    /// and (with a projector) staged — their rows put into its write batch — their decisions
    /// and bytes in ``decisions`` and ``encoded``. ``tail`` is None when the
    /// batch is done, else what remains of record ``next``: ``("decide", why)`` (all of it),
    /// ``("encode", why, d)``, ``("fold", why, d, data)``, ``("rows", why, d, data, changes)``,
    /// or ``("size", "size", d, data)``: the decision's bytes are longer than ``limit``, and
    /// nothing of it was folded. ``rules``: the revision the graph decides under (each
    /// command is declined unless the graph is still under it).
    #[pyo3(signature = (state, projector, records, start, version, rules, limit=None))]
    #[allow(clippy::too_many_arguments)]
    fn run<'py>(
        &self,
        py: Python<'py>,
        state: &Bound<'py, PyAny>,
        projector: &Bound<'py, PyAny>,
        records: &Bound<'py, PyList>,
        start: usize,
        version: u64,
        rules: i64,
        limit: Option<usize>,
    ) -> PyResult<Bound<'py, PyTuple>> {
        let hot = self.hot.get();
        let fold = self.fold.get();
        let writer = self.writer.get();
        let stage = if projector.is_none() {
            None
        } else {
            Some(
                Stage::new(py, hot.spec.get(), state, projector).map_err(|Decline(why)| {
                    PyRuntimeError::new_err(format!(
                        "the projector cannot be staged natively: {why}"
                    ))
                })?,
            )
        };
        let decisions = PyList::empty(py);
        let encoded = PyList::empty(py);
        let mut tail: PyObject = py.None();
        let mut i = start;
        let mut v = version;
        let n = records.len();
        while i < n {
            let rec = records.get_item(i)?;
            let value = rec.getattr(intern!(py, "value"))?;
            let offset = rec.getattr(intern!(py, "offset"))?;
            let ts = rec.getattr(intern!(py, "timestamp"))?;
            let d = match hot.run(py, state, &value, &offset, &ts, rules) {
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
            if matches!(limit, Some(l) if data.as_bytes().len() > l) {
                tail = ("size", "size", d, data)
                    .into_pyobject(py)?
                    .into_any()
                    .unbind();
                break;
            }
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
                if let Err(Decline(why)) = stage.rows(&d, &ch, v) {
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
        PyTuple::new(
            py,
            [
                i.into_pyobject(py)?.into_any(),
                decisions.into_any(),
                encoded.into_any(),
                tail.into_bound(py),
            ],
        )
    }
}

impl Batch {
    /// A logged decision's value, read natively (None: Python's codec reads it).
    fn decode<'py>(
        &self,
        py: Python<'py>,
        readers: &Bound<'py, PyDict>,
        value: &Bound<'py, PyAny>,
    ) -> Option<Bound<'py, PyDict>> {
        let raw = value.downcast_exact::<PyBytes>().ok()?.as_bytes();
        let header = PyBytes::new(py, raw.get(..10)?);
        let codec = readers.get_item(header).ok()??;
        let codec = codec.downcast::<Codec>().ok()?.get();
        let d = codec.decode_bytes(py, raw, 10).ok()?;
        d.into_bound(py).downcast_into::<PyDict>().ok()
    }
}

/// ``pydantic_core.to_json`` of ``value`` as the row writer writes it, or None (declined).
#[pyfunction]
pub fn row_json<'py>(py: Python<'py>, value: &Bound<'py, PyAny>) -> Option<Bound<'py, PyBytes>> {
    let mut out = Vec::new();
    crate::rows::put_json(&mut out, value).ok()?;
    Some(PyBytes::new(py, &out))
}
