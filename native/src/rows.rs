//! The projection rows of one folded decision, as ``claimgraph.projections.projector.Projector
//! .stage`` writes them: the same keys (``projections.rows``) and the same compact JSON values
//! (``pydantic_core.to_json``), byte for byte.
//!
//! It covers what the native fold produces — claim rows, edge rows with their two adjacency
//! rows and a history row, the input index row — and declines (nothing staged, nothing
//! changed) a decision that changed a slot, a conflict, a calibration record or the schema, an
//! erase, a claim whose record is not in the projector's cache (Python reads it back from the
//! database), or a value the JSON writer does not know; ``Projector.stage`` writes those.

use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyDict, PyFloat, PyList, PyString, PyTuple};

use crate::decide::Decline;

type D<T> = Result<T, Decline>;

const SEP: &str = "\x1f";
const MAX: u64 = u64::MAX;

/// ``STATUS_NAMES`` of ``claimgraph.core.entities``.
pub fn status_name(status: i64) -> D<&'static str> {
    Ok(match status {
        1 => "visible",
        2 => "withheld",
        3 => "lost",
        4 => "superseded",
        5 => "retired",
        6 => "dismissed",
        _ => return Err(Decline("status")),
    })
}

/// ``rows.entity_key``: family ‖ entity ‖ 0x00 ‖ u64_be(2^64 - 1 - version).
pub fn entity_key(family: u8, entity: &str, version: u64) -> Vec<u8> {
    let mut k = Vec::with_capacity(entity.len() + 10);
    k.push(family);
    k.extend_from_slice(entity.as_bytes());
    k.push(0);
    k.extend_from_slice(&(MAX - version).to_be_bytes());
    k
}

/// ``rows.history_key``: ``H`` ‖ entity ‖ 0x00 ‖ u64_be(version).
pub fn history_key(entity: &str, version: u64) -> Vec<u8> {
    let mut k = Vec::with_capacity(entity.len() + 10);
    k.push(b'H');
    k.extend_from_slice(entity.as_bytes());
    k.push(0);
    k.extend_from_slice(&version.to_be_bytes());
    k
}

// -- pydantic_core.to_json ---------------------------------------------------------------

/// A JSON string as serde_json writes it: ``"``, ``\`` and control characters escaped (the
/// short forms for \b \t \n \f \r), everything else as UTF-8.
pub fn put_str(out: &mut Vec<u8>, s: &str) {
    out.push(b'"');
    let b = s.as_bytes();
    let mut start = 0;
    for (i, &c) in b.iter().enumerate() {
        let esc: &[u8] = match c {
            b'"' => b"\\\"",
            b'\\' => b"\\\\",
            0x08 => b"\\b",
            0x09 => b"\\t",
            0x0a => b"\\n",
            0x0c => b"\\f",
            0x0d => b"\\r",
            0x00..=0x1f => b"",
            _ => continue,
        };
        out.extend_from_slice(&b[start..i]);
        if esc.is_empty() {
            out.extend_from_slice(format!("\\u{c:04x}").as_bytes());
        } else {
            out.extend_from_slice(esc);
        }
        start = i + 1;
    }
    out.extend_from_slice(&b[start..]);
    out.push(b'"');
}

/// A float as pydantic_core writes it (ryu's layout: decimal for 1e-5 <= |x| < 1e16, else
/// ``d.ddde±x``), from Python's shortest round-trip digits (``repr``).
fn put_float(out: &mut Vec<u8>, v: &Bound<'_, PyFloat>) -> D<()> {
    let x = v.value();
    if !x.is_finite() {
        return Err(Decline("json"));
    }
    let r = v.repr()?;
    let r = r.to_str()?;
    let (neg, body) = match r.strip_prefix('-') {
        Some(b) => (true, b),
        None => (false, r),
    };
    let (mant, exp) = match body.split_once('e') {
        Some((m, e)) => (m, e.parse::<i64>().map_err(|_| Decline("json"))?),
        None => (body, 0),
    };
    let (int, frac) = mant.split_once('.').unwrap_or((mant, ""));
    // digits d1 d2 ... with the value 0.d1d2... × 10^kk
    let mut digits: String = format!("{int}{frac}");
    let mut kk = int.len() as i64 + exp;
    let lead = digits.len() - digits.trim_start_matches('0').len();
    digits.drain(..lead);
    kk -= lead as i64;
    let trimmed = digits.trim_end_matches('0').len();
    digits.truncate(trimmed);
    if neg {
        out.push(b'-');
    }
    if digits.is_empty() {
        out.extend_from_slice(b"0.0");
        return Ok(());
    }
    let n = digits.len() as i64;
    if (1..=16).contains(&kk) {
        if n <= kk {
            out.extend_from_slice(digits.as_bytes());
            out.extend(std::iter::repeat(b'0').take((kk - n) as usize));
            out.extend_from_slice(b".0");
        } else {
            out.extend_from_slice(&digits.as_bytes()[..kk as usize]);
            out.push(b'.');
            out.extend_from_slice(&digits.as_bytes()[kk as usize..]);
        }
    } else if (-4..=0).contains(&kk) {
        out.extend_from_slice(b"0.");
        out.extend(std::iter::repeat(b'0').take((-kk) as usize));
        out.extend_from_slice(digits.as_bytes());
    } else {
        out.push(digits.as_bytes()[0]);
        if n > 1 {
            out.push(b'.');
            out.extend_from_slice(&digits.as_bytes()[1..]);
        }
        let e = kk - 1;
        out.extend_from_slice(
            if e >= 0 {
                format!("e+{e}")
            } else {
                format!("e{e}")
            }
            .as_bytes(),
        );
    }
    Ok(())
}

/// ``to_json`` of a value made of str, int, float, bool, None, list, tuple and str-keyed dict
/// (anything else: declined).
pub fn put_json(out: &mut Vec<u8>, v: &Bound<'_, PyAny>) -> D<()> {
    if v.is_none() {
        out.extend_from_slice(b"null");
    } else if let Ok(s) = v.downcast_exact::<PyString>() {
        put_str(out, s.to_str()?);
    } else if let Ok(b) = v.downcast_exact::<PyBool>() {
        out.extend_from_slice(if b.is_true() { b"true" } else { b"false" });
    } else if let Ok(f) = v.downcast_exact::<PyFloat>() {
        put_float(out, f)?;
    } else if v.is_exact_instance_of::<pyo3::types::PyInt>() {
        if let Ok(i) = v.extract::<i64>() {
            out.extend_from_slice(i.to_string().as_bytes());
        } else if let Ok(u) = v.extract::<u64>() {
            out.extend_from_slice(u.to_string().as_bytes());
        } else {
            return Err(Decline("json"));
        }
    } else if let Ok(l) = v.downcast_exact::<PyList>() {
        out.push(b'[');
        for (i, x) in l.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            put_json(out, &x)?;
        }
        out.push(b']');
    } else if let Ok(t) = v.downcast_exact::<PyTuple>() {
        out.push(b'[');
        for (i, x) in t.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            put_json(out, &x)?;
        }
        out.push(b']');
    } else if let Ok(d) = v.downcast_exact::<PyDict>() {
        out.push(b'{');
        for (i, (k, x)) in d.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            let k = k
                .downcast_exact::<PyString>()
                .map_err(|_| Decline("json"))?;
            put_str(out, k.to_str()?);
            out.push(b':');
            put_json(out, &x)?;
        }
        out.push(b'}');
    } else {
        return Err(Decline("json"));
    }
    Ok(())
}

fn s(v: &Bound<'_, PyAny>) -> D<String> {
    Ok(v.downcast::<PyString>()
        .map_err(|_| Decline("error"))?
        .to_str()?
        .to_owned())
}

fn empty(v: &Bound<'_, PyAny>) -> D<bool> {
    Ok(v.len()? == 0)
}

/// What staging reads of the projector and the state.
pub struct Stage<'py> {
    pub py: Python<'py>,
    pub state: Bound<'py, PyAny>,
    pub claims: Bound<'py, PyDict>,
    pub edges: Bound<'py, PyDict>,
    pub slot_conflict: Bound<'py, PyDict>,
    pub sides: Bound<'py, PyDict>,
    pub records: Bound<'py, PyDict>, // Projector._claim_records
    pub staged: Bound<'py, PyDict>,  // Projector._staged_claims
    pub put: Bound<'py, PyAny>,      // Projector._wb.put: rows go straight into its batch
    pub index_inputs: bool,
}

impl<'py> Stage<'py> {
    pub fn new(
        py: Python<'py>,
        state: &Bound<'py, PyAny>,
        projector: &Bound<'py, PyAny>,
    ) -> D<Self> {
        let dict = |v: Bound<'py, PyAny>| -> D<Bound<'py, PyDict>> {
            v.downcast_into::<PyDict>().map_err(|_| Decline("error"))
        };
        Ok(Stage {
            py,
            state: state.clone(),
            claims: dict(state.getattr(intern!(py, "claims"))?)?,
            edges: dict(state.getattr(intern!(py, "edges"))?)?,
            slot_conflict: dict(state.getattr(intern!(py, "slot_conflict"))?)?,
            sides: dict(state.getattr(intern!(py, "_sides"))?)?,
            records: dict(projector.getattr(intern!(py, "_claim_records"))?)?,
            staged: dict(projector.getattr(intern!(py, "_staged_claims"))?)?,
            put: projector
                .getattr(intern!(py, "_wb"))?
                .getattr(intern!(py, "put"))?,
            index_inputs: projector
                .getattr(intern!(py, "index_inputs"))?
                .is_truthy()?,
        })
    }

    /// ``GraphState.slots_of`` (its ``_sides`` cache filled by Python on a miss).
    fn slots(&self, key: &str, p: &[&str]) -> D<Vec<String>> {
        let sides = match self.sides.get_item(p[0])? {
            Some(x) => x,
            None => {
                self.state
                    .call_method1(intern!(self.py, "slots_of"), (key,))?;
                self.sides.get_item(p[0])?.ok_or(Decline("error"))?
            }
        };
        let (subj, obj): (bool, bool) = sides.extract()?;
        let mut out = Vec::with_capacity(2);
        if subj {
            out.push([p[0], "out", p[1], p[2]].join(SEP));
        }
        if obj {
            out.push([p[0], "in", p[3], p[4]].join(SEP));
        }
        Ok(out)
    }

    /// ``edge_own`` (with_slots false) or ``edge_read`` (true): the state, the conflict id
    /// (None: null) and the visible claims (None: ``[]``).
    #[allow(clippy::type_complexity)]
    fn edge(
        &self,
        key: &str,
        p: &[&str],
        with_slots: bool,
    ) -> D<(
        &'static str,
        Option<Bound<'py, PyAny>>,
        Option<Bound<'py, PyAny>>,
    )> {
        let py = self.py;
        let es = self.edges.get_item(key)?;
        let mut unknown = false;
        let mut conflict: Option<Bound<'py, PyAny>> = None;
        if let Some(e) = &es {
            let w = e.getattr(intern!(py, "withheld"))?;
            if !empty(&w)? {
                let c = self
                    .claims
                    .get_item(w.get_item(0)?)?
                    .ok_or(Decline("error"))?;
                let c = c.getattr(intern!(py, "conflict"))?;
                if !with_slots || !c.is_none() {
                    unknown = true;
                    conflict = Some(c);
                }
            }
        }
        if with_slots && !unknown {
            for sl in self.slots(key, p)? {
                if let Some(c) = self.slot_conflict.get_item(sl)? {
                    if !c.is_none() {
                        unknown = true;
                        conflict = Some(c);
                        break;
                    }
                }
            }
        }
        let visible = match &es {
            Some(e) => Some(e.getattr(intern!(py, "visible"))?),
            None => None,
        };
        let state = if unknown {
            "unknown"
        } else {
            match &visible {
                Some(v) if !empty(v)? => {
                    let c = self
                        .claims
                        .get_item(v.get_item(0)?)?
                        .ok_or(Decline("error"))?;
                    if c.getattr(intern!(py, "asserts"))?.is_truthy()? {
                        "present"
                    } else {
                        "absent"
                    }
                }
                _ => "absent",
            }
        };
        Ok((state, conflict, visible))
    }

    fn opt_json(out: &mut Vec<u8>, v: &Option<Bound<'py, PyAny>>, none: &[u8]) -> D<()> {
        match v {
            Some(x) => put_json(out, x),
            None => {
                out.extend_from_slice(none);
                Ok(())
            }
        }
    }

    /// The rows of one decision put into the projector's write batch, with its caches updated
    /// as ``stage`` updates them; or a decline with nothing done.
    pub fn rows(&self, d: &Bound<'py, PyDict>, ch: &Bound<'py, PyAny>, version: u64) -> D<()> {
        let py = self.py;
        let get = |k: &Bound<'py, PyString>| -> D<Bound<'py, PyAny>> {
            d.get_item(k)?.ok_or(Decline("error"))
        };
        for k in [
            intern!(py, "slots"),
            intern!(py, "conflicts"),
            intern!(py, "calibration"),
        ] {
            if !empty(&ch.getattr(k)?)? {
                return Err(Decline("changes"));
            }
        }
        if !get(intern!(py, "schema"))?.is_none() {
            return Err(Decline("changes"));
        }
        if s(&get(intern!(py, "command_type"))?)? == "erase" {
            return Err(Decline("changes"));
        }
        let new_claim = ch.getattr(intern!(py, "new_claim"))?;
        let (new_id, new_record) = if new_claim.is_none() {
            (None, None)
        } else {
            let nc = new_claim
                .downcast::<PyDict>()
                .map_err(|_| Decline("error"))?;
            let id = nc
                .get_item(intern!(py, "claim_id"))?
                .ok_or(Decline("error"))?;
            (Some(s(&id)?), Some(nc.copy()?))
        };
        let mut out: Vec<Vec<u8>> = Vec::new();
        // claims: every row built before any cache changes
        let mut staged: Vec<(String, Vec<u8>, Bound<'py, PyDict>, i64)> = Vec::new();
        let changed: Vec<(String, i64)> = ch.getattr(intern!(py, "claims"))?.extract()?;
        for (id, status) in &changed {
            let record = match (&new_id, &new_record) {
                (Some(n), Some(r)) if n == id => r.clone(),
                _ => self
                    .records
                    .get_item(id)?
                    .ok_or(Decline("record"))?
                    .downcast_into::<PyDict>()
                    .map_err(|_| Decline("error"))?,
            };
            // claim_row: the record, then its status and since (a record that has either
            // key, which stage would overwrite in place: Python)
            if record.contains(intern!(py, "status"))? || record.contains(intern!(py, "since"))? {
                return Err(Decline("record"));
            }
            let key = entity_key(b'K', id, version);
            let mut value = Vec::with_capacity(512);
            put_json(&mut value, record.as_any())?;
            value.pop(); // the record's closing brace
            if record.len() > 0 {
                value.push(b',');
            }
            value.extend_from_slice(b"\"status\":");
            put_str(&mut value, status_name(*status)?);
            value.extend_from_slice(format!(",\"since\":{version}}}").as_bytes());
            out.push(key.clone());
            out.push(value);
            staged.push((id.clone(), key, record, *status));
        }
        let edge_keys: Vec<String> = ch.getattr(intern!(py, "edges"))?.extract()?;
        for key in &edge_keys {
            let p: Vec<&str> = key.split(SEP).collect();
            if p.len() != 5 {
                return Err(Decline("error"));
            }
            let mut value = Vec::with_capacity(64);
            let (state, conflict, visible) = self.edge(key, &p, false)?;
            value.push(b'[');
            put_str(&mut value, state);
            value.push(b',');
            Self::opt_json(&mut value, &conflict, b"null")?;
            value.push(b',');
            Self::opt_json(&mut value, &visible, b"[]")?;
            value.push(b']');
            out.push(entity_key(b'E', key, version));
            out.push(value.clone());
            let (t, st, si, ot, oi) = (p[0], p[1], p[2], p[3], p[4]);
            out.push(entity_key(
                b'A',
                &[st, si, "out", t, ot, oi].join(SEP),
                version,
            ));
            out.push(value.clone());
            out.push(entity_key(
                b'A',
                &[ot, oi, "in", t, st, si].join(SEP),
                version,
            ));
            out.push(value);
            // _history_entry
            let mut h = Vec::with_capacity(256);
            h.extend_from_slice(b"{\"kind\":");
            put_json(&mut h, &get(intern!(py, "kind"))?)?;
            h.extend_from_slice(b",\"reason\":");
            put_json(&mut h, &get(intern!(py, "reason"))?)?;
            h.extend_from_slice(b",\"command_id\":");
            put_json(&mut h, &get(intern!(py, "command_id"))?)?;
            h.extend_from_slice(b",\"command_type\":");
            put_json(&mut h, &get(intern!(py, "command_type"))?)?;
            h.extend_from_slice(b",\"agent\":");
            put_json(&mut h, &get(intern!(py, "agent"))?)?;
            h.extend_from_slice(b",\"log_time\":");
            put_json(&mut h, &get(intern!(py, "log_time"))?)?;
            h.extend_from_slice(b",\"claims\":[");
            let mut first = true;
            for (id, _) in &changed {
                let cs = self.claims.get_item(id)?.ok_or(Decline("error"))?;
                if s(&cs.getattr(intern!(py, "edge"))?)? != *key {
                    continue;
                }
                if !first {
                    h.push(b',');
                }
                first = false;
                h.push(b'[');
                put_str(&mut h, id);
                h.push(b',');
                put_str(
                    &mut h,
                    status_name(cs.getattr(intern!(py, "status"))?.extract()?)?,
                );
                h.push(b']');
            }
            h.push(b']');
            let (state, conflict, visible) = self.edge(key, &p, true)?;
            h.extend_from_slice(b",\"state\":");
            put_str(&mut h, state);
            h.extend_from_slice(b",\"conflict_id\":");
            Self::opt_json(&mut h, &conflict, b"null")?;
            h.extend_from_slice(b",\"visible\":");
            Self::opt_json(&mut h, &visible, b"[]")?;
            h.push(b'}');
            out.push(history_key(key, version));
            out.push(h);
        }
        if self.index_inputs {
            let off: u64 = get(intern!(py, "input_offset"))?.extract()?;
            let mut k = Vec::with_capacity(9);
            k.push(b'I');
            k.extend_from_slice(&off.to_be_bytes());
            out.push(k);
            out.push(version.to_be_bytes().to_vec());
        }
        // commit: the caches as stage leaves them
        if let (Some(id), Some(r)) = (new_id, new_record) {
            self.records.set_item(id, r)?;
        }
        for (id, key, record, status) in staged {
            let list = match self.staged.get_item(&id)? {
                Some(l) => l,
                None => {
                    let l = PyList::empty(py).into_any();
                    self.staged.set_item(&id, &l)?;
                    l
                }
            };
            list.downcast::<PyList>()
                .map_err(|_| Decline("error"))?
                .append((PyBytes::new(py, &key), record, status, version))?;
        }
        let mut it = out.into_iter();
        while let (Some(k), Some(v)) = (it.next(), it.next()) {
            self.put
                .call1((PyBytes::new(py, &k), PyBytes::new(py, &v)))?;
        }
        Ok(())
    }
}
