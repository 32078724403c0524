//! Avro binary, driven by plans built in Python from the schema registry
//! (`claimgraph/native/plans.py`): the same values and bytes as the generated Python codecs of
//! `claimgraph.core.avro`, and at least as strict. A decode or encode that fails here returns
//! `None` to Python, which then runs the Python codec: its value, or its exact error.

use std::collections::HashMap;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};

/// A failure of the native path: Python runs its own codec instead (value or named error).
#[derive(Debug)]
pub struct Fail;

pub type R<T> = Result<T, Fail>;

impl From<std::convert::Infallible> for Fail {
    fn from(_: std::convert::Infallible) -> Self {
        Fail
    }
}

impl From<PyErr> for Fail {
    fn from(_: PyErr) -> Self {
        Fail
    }
}

pub enum Default {
    Required,
    Value(PyObject, bool), // the value, and whether it is mutable (copied per use)
}

pub struct Field {
    pub name: Py<PyString>,
    pub node: Node,
    pub default: Default,
}

pub enum Out {
    Read(usize),
    Default(PyObject, bool),
}

pub enum Node {
    Str,
    Bytes,
    Long,
    Int,
    Double,
    Bool,
    /// an int or long written, a double read
    ToDouble(bool), // true: the writer's is an int (32 bits)
    Enum {
        decode: Vec<Py<PyString>>,
        encode: HashMap<String, u64>,
    },
    Array(Box<Node>, u64),
    Map(Box<Node>, u64),
    Opt(u64, Box<Node>), // zigzag of the null branch's index, inner
    Record(Vec<Field>),
    /// resolution: writer fields (kept into a slot, or read and dropped), then the reader's
    Resolve(Vec<(Node, Option<usize>)>, Vec<(Py<PyString>, Out)>, usize),
}

fn item<'py>(t: &Bound<'py, PyTuple>, i: usize) -> PyResult<Bound<'py, PyAny>> {
    t.get_item(i)
}

/// A plan tuple (see plans.py) as a node.
pub fn build(plan: &Bound<'_, PyAny>) -> PyResult<Node> {
    let py = plan.py();
    let t = plan.downcast::<PyTuple>()?;
    let tag: String = item(t, 0)?.extract()?;
    Ok(match tag.as_str() {
        "string" => Node::Str,
        "bytes" => Node::Bytes,
        "long" => Node::Long,
        "int" => Node::Int,
        "double" => Node::Double,
        "boolean" => Node::Bool,
        "int_as_double" => Node::ToDouble(true),
        "long_as_double" => Node::ToDouble(false),
        "enum" => {
            let read: Vec<String> = item(t, 1)?.extract()?;
            let own: Vec<String> = item(t, 2)?.extract()?;
            Node::Enum {
                decode: read
                    .iter()
                    .map(|s| PyString::intern(py, s).unbind())
                    .collect(),
                encode: own
                    .into_iter()
                    .enumerate()
                    .map(|(i, s)| (s, i as u64))
                    .collect(),
            }
        }
        "array" => Node::Array(Box::new(build(&item(t, 1)?)?), item(t, 2)?.extract()?),
        "map" => Node::Map(Box::new(build(&item(t, 1)?)?), item(t, 2)?.extract()?),
        "optional" => {
            let null_index: u64 = item(t, 1)?.extract()?;
            Node::Opt(2 * null_index, Box::new(build(&item(t, 2)?)?))
        }
        "record" => {
            let mut fields = Vec::new();
            for f in item(t, 1)?.try_iter()? {
                let f = f?;
                let f = f.downcast::<PyTuple>()?;
                let name: String = item(f, 0)?.extract()?;
                let has_default: bool = item(f, 2)?.extract()?;
                let default = if has_default {
                    Default::Value(item(f, 3)?.unbind(), item(f, 4)?.extract()?)
                } else {
                    Default::Required
                };
                fields.push(Field {
                    name: PyString::intern(py, &name).unbind(),
                    node: build(&item(f, 1)?)?,
                    default,
                });
            }
            Node::Record(fields)
        }
        "resolve" => {
            let mut reads = Vec::new();
            for r in item(t, 1)?.try_iter()? {
                let r = r?;
                let r = r.downcast::<PyTuple>()?;
                reads.push((
                    build(&item(r, 0)?)?,
                    item(r, 1)?.extract::<Option<usize>>()?,
                ));
            }
            let mut outs = Vec::new();
            let mut slots = 0;
            for o in item(t, 2)?.try_iter()? {
                let o = o?;
                let o = o.downcast::<PyTuple>()?;
                let name: String = item(o, 0)?.extract()?;
                let slot: Option<usize> = item(o, 1)?.extract()?;
                let out = match slot {
                    Some(s) => {
                        slots = slots.max(s + 1);
                        Out::Read(s)
                    }
                    None => Out::Default(item(o, 2)?.unbind(), item(o, 3)?.extract()?),
                };
                outs.push((PyString::intern(py, &name).unbind(), out));
            }
            Node::Resolve(reads, outs, slots)
        }
        other => {
            return Err(PyValueError::new_err(format!(
                "unknown plan node {other:?}"
            )))
        }
    })
}

// -- decoding -------------------------------------------------------------------------------

pub struct Reader<'a> {
    pub d: &'a [u8],
    pub p: usize,
}

impl<'a> Reader<'a> {
    #[inline]
    pub fn byte(&mut self) -> R<u8> {
        let b = *self.d.get(self.p).ok_or(Fail)?;
        self.p += 1;
        Ok(b)
    }

    /// An unsigned varint of at most 10 bytes whose tenth carries at most bit 63.
    #[inline]
    pub fn uvar(&mut self) -> R<u64> {
        let b = self.byte()?;
        if b < 0x80 {
            return Ok(b as u64);
        }
        let mut v = (b & 0x7F) as u64;
        for i in 1..10u32 {
            let b = self.byte()?;
            if i == 9 {
                if b < 2 {
                    return Ok(v | (b as u64) << 63);
                }
                return Err(Fail);
            }
            if b < 0x80 {
                return Ok(v | (b as u64) << (7 * i));
            }
            v |= ((b & 0x7F) as u64) << (7 * i);
        }
        Err(Fail)
    }

    #[inline]
    pub fn long(&mut self) -> R<i64> {
        let u = self.uvar()?;
        Ok(((u >> 1) as i64) ^ -((u & 1) as i64))
    }

    #[inline]
    pub fn int(&mut self) -> R<i64> {
        let u = self.uvar()?;
        if u >> 32 != 0 {
            return Err(Fail);
        }
        Ok(((u >> 1) as i64) ^ -((u & 1) as i64))
    }

    #[inline]
    pub fn span(&mut self) -> R<&'a [u8]> {
        let u = self.uvar()?;
        if u & 1 != 0 {
            return Err(Fail);
        }
        let n = (u >> 1) as usize;
        let end = self.p.checked_add(n).ok_or(Fail)?;
        if end > self.d.len() {
            return Err(Fail);
        }
        let s = &self.d[self.p..end];
        self.p = end;
        Ok(s)
    }

    #[inline]
    pub fn str(&mut self) -> R<&'a str> {
        std::str::from_utf8(self.span()?).map_err(|_| Fail)
    }

    #[inline]
    pub fn double(&mut self) -> R<f64> {
        let end = self.p.checked_add(8).ok_or(Fail)?;
        let b: [u8; 8] = self
            .d
            .get(self.p..end)
            .ok_or(Fail)?
            .try_into()
            .map_err(|_| Fail)?;
        self.p = end;
        Ok(f64::from_le_bytes(b))
    }

    pub fn left(&self) -> u64 {
        (self.d.len() - self.p) as u64
    }
}

/// Read the blocks of an array or a map, calling `each` once per item (bounded by the input).
fn blocks(r: &mut Reader<'_>, size: u64, mut each: impl FnMut(&mut Reader<'_>) -> R<()>) -> R<()> {
    let mut u = r.uvar()?;
    while u != 0 {
        if u & 1 != 0 {
            let c = (u >> 1) + 1;
            let w = r.uvar()?;
            let end = (r.p as u64).checked_add(w >> 1).ok_or(Fail)?;
            if w & 1 != 0 || end > r.d.len() as u64 {
                return Err(Fail);
            }
            if (c as u128) * (size as u128) > (end - r.p as u64) as u128 {
                return Err(Fail);
            }
            for _ in 0..c {
                each(r)?;
            }
            if r.p as u64 != end {
                return Err(Fail);
            }
        } else {
            let c = u >> 1;
            if (c as u128) * (size as u128) > r.left() as u128 {
                return Err(Fail);
            }
            for _ in 0..c {
                each(r)?;
            }
        }
        u = r.uvar()?;
    }
    Ok(())
}

pub fn copy_default(
    py: Python<'_>,
    v: &PyObject,
    mutable: bool,
    deepcopy: &PyObject,
) -> R<PyObject> {
    if mutable {
        Ok(deepcopy.call1(py, (v,))?)
    } else {
        Ok(v.clone_ref(py))
    }
}

pub fn decode(py: Python<'_>, n: &Node, r: &mut Reader<'_>, deepcopy: &PyObject) -> R<PyObject> {
    Ok(match n {
        Node::Str => PyString::new(py, r.str()?).into_any().unbind(),
        Node::Bytes => PyBytes::new(py, r.span()?).into_any().unbind(),
        Node::Long => r.long()?.into_pyobject(py)?.into_any().unbind(),
        Node::Int => r.int()?.into_pyobject(py)?.into_any().unbind(),
        Node::Double => PyFloat::new(py, r.double()?).into_any().unbind(),
        Node::ToDouble(int) => {
            let v = if *int { r.int()? } else { r.long()? };
            PyFloat::new(py, v as f64).into_any().unbind()
        }
        Node::Bool => match r.byte()? {
            0 => PyBool::new(py, false).to_owned().into_any().unbind(),
            1 => PyBool::new(py, true).to_owned().into_any().unbind(),
            _ => return Err(Fail),
        },
        Node::Enum { decode: syms, .. } => {
            let u = r.uvar()?;
            if u & 1 != 0 || u >= 2 * syms.len() as u64 {
                return Err(Fail);
            }
            syms[(u >> 1) as usize].clone_ref(py).into_any()
        }
        Node::Opt(null_z, inner) => {
            let u = r.uvar()?;
            if u == *null_z {
                py.None()
            } else if u == 2 - *null_z {
                decode(py, inner, r, deepcopy)?
            } else {
                return Err(Fail);
            }
        }
        Node::Array(item, size) => {
            let list = PyList::empty(py);
            blocks(r, *size, |r| {
                list.append(decode(py, item, r, deepcopy)?)?;
                Ok(())
            })?;
            list.into_any().unbind()
        }
        Node::Map(value, size) => {
            let dict = PyDict::new(py);
            blocks(r, *size, |r| {
                let k = PyString::new(py, r.str()?);
                dict.set_item(k, decode(py, value, r, deepcopy)?)?;
                Ok(())
            })?;
            dict.into_any().unbind()
        }
        Node::Record(fields) => {
            let dict = PyDict::new(py);
            for f in fields {
                dict.set_item(f.name.bind(py), decode(py, &f.node, r, deepcopy)?)?;
            }
            dict.into_any().unbind()
        }
        Node::Resolve(reads, outs, slots) => {
            let mut got: Vec<Option<PyObject>> = (0..*slots).map(|_| None).collect();
            for (node, slot) in reads {
                let v = decode(py, node, r, deepcopy)?;
                if let Some(s) = slot {
                    got[*s] = Some(v);
                }
            }
            let dict = PyDict::new(py);
            for (name, out) in outs {
                let v = match out {
                    Out::Read(s) => got[*s].take().ok_or(Fail)?,
                    Out::Default(v, mutable) => copy_default(py, v, *mutable, deepcopy)?,
                };
                dict.set_item(name.bind(py), v)?;
            }
            dict.into_any().unbind()
        }
    })
}

// -- encoding -------------------------------------------------------------------------------

#[inline]
pub fn put_uvar(out: &mut Vec<u8>, mut z: u64) {
    while z >= 0x80 {
        out.push((z as u8 & 0x7F) | 0x80);
        z >>= 7;
    }
    out.push(z as u8);
}

#[inline]
pub fn put_long(out: &mut Vec<u8>, v: i64) {
    put_uvar(out, ((v << 1) ^ (v >> 63)) as u64);
}

#[inline]
pub fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    put_uvar(out, (b.len() as u64) << 1);
    out.extend_from_slice(b);
}

fn exact_i64(v: &Bound<'_, PyAny>) -> R<i64> {
    if !v.is_instance_of::<PyInt>() {
        return Err(Fail); // Python: ``v << 1`` fails for anything that is not an int
    }
    v.extract::<i64>().map_err(|_| Fail)
}

pub fn encode(n: &Node, v: &Bound<'_, PyAny>, out: &mut Vec<u8>) -> R<()> {
    let py = v.py();
    match n {
        Node::Str => put_bytes(
            out,
            v.downcast::<PyString>()
                .map_err(|_| Fail)?
                .to_str()?
                .as_bytes(),
        ),
        Node::Bytes => {
            if let Ok(b) = v.downcast_exact::<PyBytes>() {
                put_bytes(out, b.as_bytes());
            } else {
                return Err(Fail);
            }
        }
        Node::Long => put_long(out, exact_i64(v)?),
        Node::Int => {
            let x = exact_i64(v)?;
            if !(-(1i64 << 31)..(1i64 << 31)).contains(&x) {
                return Err(Fail);
            }
            put_long(out, x);
        }
        Node::Double => {
            if !(v.is_instance_of::<PyFloat>() || v.is_instance_of::<PyInt>()) {
                return Err(Fail);
            }
            out.extend_from_slice(&v.extract::<f64>()?.to_le_bytes());
        }
        Node::ToDouble(_) => return Err(Fail), // a reader-only plan
        Node::Bool => out.push(if v.is_truthy()? { 1 } else { 0 }),
        Node::Enum { encode: table, .. } => {
            let s = v.downcast::<PyString>().map_err(|_| Fail)?;
            let i = table.get(s.to_str()?).ok_or(Fail)?;
            put_uvar(out, 2 * i);
        }
        Node::Opt(null_z, inner) => {
            if v.is_none() {
                put_uvar(out, *null_z);
            } else {
                put_uvar(out, 2 - *null_z);
                encode(inner, v, out)?;
            }
        }
        Node::Array(item, _) => {
            if let Ok(list) = v.downcast_exact::<PyList>() {
                if !list.is_empty() {
                    put_uvar(out, (list.len() as u64) << 1);
                    for x in list.iter() {
                        encode(item, &x, out)?;
                    }
                }
            } else if let Ok(t) = v.downcast_exact::<PyTuple>() {
                if !t.is_empty() {
                    put_uvar(out, (t.len() as u64) << 1);
                    for x in t.iter() {
                        encode(item, &x, out)?;
                    }
                }
            } else {
                return Err(Fail);
            }
            out.push(0);
        }
        Node::Map(value, _) => {
            let d = v.downcast_exact::<PyDict>().map_err(|_| Fail)?;
            if !d.is_empty() {
                put_uvar(out, (d.len() as u64) << 1);
                for (k, x) in d.iter() {
                    let k = k.downcast::<PyString>().map_err(|_| Fail)?;
                    put_bytes(out, k.to_str()?.as_bytes());
                    encode(value, &x, out)?;
                }
            }
            out.push(0);
        }
        Node::Record(fields) => {
            let d = v.downcast_exact::<PyDict>().map_err(|_| Fail)?;
            for f in fields {
                match d.get_item(f.name.bind(py))? {
                    Some(x) => encode(&f.node, &x, out)?,
                    None => match &f.default {
                        Default::Required => return Err(Fail),
                        Default::Value(x, _) => encode(&f.node, x.bind(py), out)?,
                    },
                }
            }
        }
        Node::Resolve(..) => return Err(Fail),
    }
    Ok(())
}

/// One schema version's codec: its single-object header, and its plan.
#[pyclass(frozen, module = "claimgraph.native._rust")]
pub struct Codec {
    pub node: Node,
    pub prefix: Vec<u8>,
    pub deepcopy: PyObject,
}

#[pymethods]
impl Codec {
    #[new]
    fn new(plan: &Bound<'_, PyAny>, prefix: Vec<u8>, deepcopy: PyObject) -> PyResult<Self> {
        Ok(Codec {
            node: build(plan)?,
            prefix,
            deepcopy,
        })
    }

    /// The value in ``data[pos:]`` (which must be all of it), or None: let Python decode it.
    #[pyo3(signature = (data, pos=0))]
    fn decode(&self, py: Python<'_>, data: &Bound<'_, PyAny>, pos: usize) -> PyObject {
        let b = match data.downcast_exact::<PyBytes>() {
            Ok(b) => b,
            Err(_) => return py.None(),
        };
        self.decode_bytes(py, b.as_bytes(), pos)
            .unwrap_or_else(|_| py.None())
    }

    /// The prefix and the body of ``value``, or None: let Python encode it (or name its error).
    fn encode(&self, py: Python<'_>, value: &Bound<'_, PyAny>) -> PyObject {
        match self.encode_value(value) {
            Ok(out) => PyBytes::new(py, &out).into_any().unbind(),
            Err(_) => py.None(),
        }
    }
}

impl Codec {
    pub fn decode_bytes(&self, py: Python<'_>, d: &[u8], pos: usize) -> R<PyObject> {
        if pos > d.len() {
            return Err(Fail);
        }
        let mut r = Reader { d, p: pos };
        let v = decode(py, &self.node, &mut r, &self.deepcopy)?;
        if r.p != d.len() {
            return Err(Fail);
        }
        Ok(v)
    }

    pub fn encode_value(&self, value: &Bound<'_, PyAny>) -> R<Vec<u8>> {
        let mut out = Vec::with_capacity(256);
        out.extend_from_slice(&self.prefix);
        encode(&self.node, value, &mut out)?;
        Ok(out)
    }
}
