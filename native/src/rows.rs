//! The projection rows of one folded decision, as ``claimgraph.projections.projector.Projector
//! .stage`` writes them: the same keys (``projections.rows``) and the same values — layout 2's
//! binary claim records, claim status rows and history rows, and the compact JSON of edge
//! rows (``pydantic_core.to_json``) — byte for byte.
//!
//! It covers what the native fold produces — a new claim's record, claim status rows, edge
//! rows with their two adjacency rows and a history row, the input index row — and declines
//! (nothing staged, nothing changed) a decision that changed a slot, a conflict, a
//! calibration record or the schema, one of a command kind the fold does not fold (an erase),
//! or a value the writers do not know; ``Projector.stage`` writes those. It writes the row
//! layouts ``spec::LAYOUTS`` lists (the caller checks the store's); the claim statuses and
//! the key separator are the specification's (``Spec``), the ``STATIC`` strings layout 2's.

use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};
use std::collections::HashMap;

use crate::decide::Decline;
use crate::spec::{Spec, FOLDS};
use crate::table::{store_of, Store};

type D<T> = Result<T, Decline>;

const MAX: u64 = u64::MAX;

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

// -- layout 2's compact values (``rows._Out``) ---------------------------------------------

/// ``len(rows.STATIC)``: string tokens past it name the row's own literals. The table (index
/// 0 is None) is frozen with projection layout 2; ``static_index`` is generated from it.
const NSTATIC: usize = 55;

/// ``rows.RECORD_KEYS``: a claim record in this key order is stored binary.
const RECORD_KEYS: [&str; 16] = [
    "claim_id",
    "agent",
    "task",
    "run_id",
    "edge_type",
    "subject_type",
    "subject_id",
    "object_type",
    "object_id",
    "polarity",
    "confidence",
    "evidence",
    "reasoning",
    "asserted_at",
    "based_on_version",
    "properties",
];

/// The index of a string in ``rows.STATIC`` (None: not there).
fn static_index(s: &str) -> Option<usize> {
    Some(match s {
        "visible" => 1,
        "withheld" => 2,
        "lost" => 3,
        "superseded" => 4,
        "retired" => 5,
        "dismissed" => 6,
        "present" => 7,
        "absent" => 8,
        "unknown" => 9,
        "assert" => 10,
        "deny" => 11,
        "" => 12,
        "accepted" => 13,
        "conflicted" => 14,
        "quarantined" => 15,
        "rejected" => 16,
        "resolved" => 17,
        "claim" => 18,
        "retract" => 19,
        "resolve" => 20,
        "publish_schema" => 21,
        "grant" => 22,
        "revoke" => 23,
        "tick" => 24,
        "read_blocked" => 25,
        "escalate" => 26,
        "invalid_input" => 27,
        "refused" => 28,
        "register_key" => 29,
        "revoke_key" => 30,
        "signed" => 31,
        "upgrade_rules" => 32,
        "erase" => 33,
        "place" => 34,
        "new" => 35,
        "corroborates" => 36,
        "supersedes" => 37,
        "older_than_current" => 38,
        "slot_conflict" => 39,
        "polarity_conflict" => 40,
        "joins_conflict" => 41,
        "stale_claim" => 42,
        "merge_pending" => 43,
        "merged" => 44,
        "outvoted" => 45,
        "merge_margin" => 46,
        "needs_human" => 47,
        "duplicate_command" => 48,
        "escalated" => 49,
        "retracted" => 50,
        "winner" => 51,
        "reject_all" => 52,
        "erased" => 53,
        "conflict_settled" => 54,
        _ => return None,
    })
}

fn varint(out: &mut Vec<u8>, mut n: usize) {
    while n >= 0x80 {
        out.push((n as u8 & 0x7F) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

/// One row being encoded: its bytes and its table of literal strings (``rows._Out``).
struct Out {
    buf: Vec<u8>,
    local: HashMap<String, usize>,
}

impl Out {
    fn new(tag: u8) -> Self {
        let mut buf = Vec::with_capacity(160);
        buf.push(tag);
        Out {
            buf,
            local: HashMap::new(),
        }
    }

    /// A string token: a back-reference to the static table or an earlier literal of the row,
    /// else the literal (None is static index 0).
    fn s(&mut self, value: Option<&str>) {
        let v = match value {
            Some(v) => v,
            None => {
                self.buf.push(0);
                return;
            }
        };
        let i = match static_index(v) {
            Some(i) => i,
            None => match self.local.get(v) {
                Some(i) => *i,
                None => {
                    self.local.insert(v.to_owned(), NSTATIC + self.local.len());
                    varint(&mut self.buf, 2 * v.len() + 1);
                    self.buf.extend_from_slice(v.as_bytes());
                    return;
                }
            },
        };
        varint(&mut self.buf, 2 * i);
    }

    /// ``s`` of a Python value: None or an exact str (anything else: declined as ``why``).
    fn py(&mut self, v: &Bound<'_, PyAny>, why: &'static str) -> D<()> {
        if v.is_none() {
            self.s(None);
        } else {
            let st = v.downcast_exact::<PyString>().map_err(|_| Decline(why))?;
            self.s(Some(st.to_str().map_err(|_| Decline(why))?));
        }
        Ok(())
    }

    fn n(&mut self, count: usize) {
        varint(&mut self.buf, count);
    }

    fn q(&mut self, value: i64) {
        self.buf.extend_from_slice(&value.to_be_bytes());
    }
}

/// The token of a static string (a claim status row is one).
fn token(name: &str) -> D<u8> {
    let i = static_index(name).ok_or(Decline("status"))?;
    Ok((2 * i) as u8)
}

/// An exact Python int as i64 (``struct.pack(">q")``; bools and out-of-range: declined).
fn exact_i64(v: &Bound<'_, PyAny>, why: &'static str) -> D<i64> {
    if !v.is_exact_instance_of::<PyInt>() {
        return Err(Decline(why));
    }
    v.extract::<i64>().map_err(|_| Decline(why))
}

/// ``rows.encode_record`` of a new claim's record and the status it was decided with.
fn encode_record(record: &Bound<'_, PyDict>, status: &str) -> D<Vec<u8>> {
    let token = token(status)?;
    let keys: Vec<String> = record
        .keys()
        .iter()
        .map(|k| k.extract::<String>())
        .collect::<PyResult<_>>()
        .map_err(|_| Decline("record"))?;
    if keys.len() == RECORD_KEYS.len() + 1 && keys[..RECORD_KEYS.len()] == RECORD_KEYS {
        return Err(Decline("record")); // an erased record: Python's encode_record
    }
    let get = |k: &str| -> D<Bound<'_, PyAny>> { record.get_item(k)?.ok_or(Decline("record")) };
    let binary = keys == RECORD_KEYS && {
        let bov = get("based_on_version")?;
        get("confidence")?.is_exact_instance_of::<PyFloat>()
            && get("asserted_at")?.is_exact_instance_of::<PyInt>()
            && (bov.is_none() || bov.is_exact_instance_of::<PyInt>())
            && get("properties")?.is_exact_instance_of::<PyDict>()
            && get("evidence")?.is_exact_instance_of::<PyList>()
    };
    if !binary {
        let mut out = vec![0u8, token];
        put_json(&mut out, record.as_any())?;
        return Ok(out);
    }
    let bov = get("based_on_version")?;
    let mut o = Out::new(1);
    o.buf.push(token);
    o.buf.push(if bov.is_none() { 0 } else { 1 }); // flags: based_on_version follows
    let conf: f64 = get("confidence")?
        .downcast_exact::<PyFloat>()
        .map_err(|_| Decline("record"))?
        .value();
    o.buf.extend_from_slice(&conf.to_be_bytes());
    o.q(exact_i64(&get("asserted_at")?, "record")?);
    if !bov.is_none() {
        o.q(exact_i64(&bov, "record")?);
    }
    let ev = get("evidence")?;
    let ev = ev
        .downcast_exact::<PyList>()
        .map_err(|_| Decline("record"))?;
    let props = get("properties")?;
    let props = props
        .downcast_exact::<PyDict>()
        .map_err(|_| Decline("record"))?;
    o.n(ev.len());
    o.n(props.len());
    for k in [
        "agent",
        "task",
        "run_id",
        "edge_type",
        "subject_type",
        "subject_id",
        "object_type",
        "object_id",
        "polarity",
        "reasoning",
    ] {
        o.py(&get(k)?, "record")?;
    }
    for e in ev.iter() {
        o.py(&e, "record")?;
    }
    for (k, v) in props.iter() {
        o.py(&k, "record")?;
        o.py(&v, "record")?;
    }
    Ok(o.buf)
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
pub struct Stage<'s, 'py> {
    pub py: Python<'py>,
    pub sp: &'s Spec,
    pub state: Bound<'py, PyAny>,
    pub store: Bound<'py, Store>,
    pub slot_conflict: Bound<'py, PyDict>,
    pub sides: Bound<'py, PyDict>,
    pub staged: Bound<'py, PyDict>, // Projector._staged_records
    pub put: Bound<'py, PyAny>,     // Projector._wb.put: rows go straight into its batch
    pub index_inputs: bool,
}

impl<'s, 'py> Stage<'s, 'py> {
    pub fn new(
        py: Python<'py>,
        sp: &'s Spec,
        state: &Bound<'py, PyAny>,
        projector: &Bound<'py, PyAny>,
    ) -> D<Self> {
        let dict = |v: Bound<'py, PyAny>| -> D<Bound<'py, PyDict>> {
            v.downcast_into::<PyDict>().map_err(|_| Decline("error"))
        };
        Ok(Stage {
            py,
            sp,
            state: state.clone(),
            store: store_of(state)?,
            slot_conflict: dict(state.getattr(intern!(py, "slot_conflict"))?)?,
            sides: dict(state.getattr(intern!(py, "_sides"))?)?,
            staged: dict(projector.getattr(intern!(py, "_staged_records"))?)?,
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
        let sep = self.sp.sep.as_str();
        let mut out = Vec::with_capacity(2);
        if subj {
            out.push([p[0], "out", p[1], p[2]].join(sep));
        }
        if obj {
            out.push([p[0], "in", p[3], p[4]].join(sep));
        }
        Ok(out)
    }

    /// ``edge_own`` (with_slots false) or ``edge_read`` (true): the state, the conflict id
    /// and the visible claims.
    fn edge(
        &self,
        key: &str,
        p: &[&str],
        with_slots: bool,
    ) -> D<(&'static str, Option<String>, Vec<String>)> {
        let mut unknown = false;
        let mut conflict: Option<String> = None;
        let (es, visible, first_asserts) = {
            let st = self.store.borrow();
            let es = st.edge_index(key);
            if let Some(e) = es {
                if let Some(w) = st.first_withheld(e) {
                    let c = st.claim_conflict(w);
                    if !with_slots || c.is_some() {
                        unknown = true;
                        conflict = c.map(str::to_owned);
                    }
                }
            }
            let vis = match es {
                Some(e) => st.visible(e),
                None => Vec::new(),
            };
            let first_asserts = vis.first().map(|&c| st.claim(c).asserts);
            let names: Vec<String> = vis.iter().map(|&c| st.claim_id(c).into_owned()).collect();
            (es, names, first_asserts)
        };
        if with_slots && !unknown {
            for sl in self.slots(key, p)? {
                if let Some(c) = self.slot_conflict.get_item(sl)? {
                    if !c.is_none() {
                        unknown = true;
                        conflict = Some(s(&c)?);
                        break;
                    }
                }
            }
        }
        let _ = es;
        let state = if unknown {
            "unknown"
        } else if first_asserts == Some(true) {
            "present"
        } else {
            "absent"
        };
        Ok((state, conflict, visible))
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
        // a rejection, or a decision of a kind the native fold folds (an erase is not one)
        let rejected = get(intern!(py, "kind"))?.eq(self.sp.rejected.bind(py))?;
        if !rejected && !FOLDS.contains(&s(&get(intern!(py, "command_type"))?)?.as_str()) {
            return Err(Decline("changes"));
        }
        let status_name =
            |status: i64| -> D<&str> { self.sp.status_name(status).ok_or(Decline("status")) };
        let new_claim = ch.getattr(intern!(py, "new_claim"))?;
        let mut out: Vec<Vec<u8>> = Vec::new();
        let changed: Vec<(String, i64)> = ch.getattr(intern!(py, "claims"))?.extract()?;
        let new_id = if new_claim.is_none() {
            None
        } else {
            let id = new_claim.get_item(intern!(py, "claim_id"))?;
            Some(s(&id)?)
        };
        // status changes of other claims (K, one byte); the new claim's status (the last one
        // given, as the last put of a key wins) goes into its record
        let mut first: Option<i64> = None;
        for (id, status) in &changed {
            if Some(id) == new_id.as_ref() {
                first = Some(*status);
            } else {
                out.push(entity_key(b'K', id, version));
                out.push(vec![token(status_name(*status)?)?]);
            }
        }
        // the new claim's record, once (R)
        let mut new_record: Option<(String, Vec<u8>, Bound<'py, PyDict>, &str)> = None;
        if let Some(id) = new_id {
            let nc = new_claim
                .downcast::<PyDict>()
                .map_err(|_| Decline("error"))?;
            let status = status_name(first.ok_or(Decline("record"))?)?;
            let record = nc.copy()?;
            let key = entity_key(b'R', &id, version);
            out.push(key.clone());
            out.push(encode_record(&record, status)?);
            new_record = Some((id, key, record, status));
        }
        let edge_keys: Vec<String> = ch.getattr(intern!(py, "edges"))?.extract()?;
        for key in &edge_keys {
            let sep = self.sp.sep.as_str();
            let p: Vec<&str> = key.split(sep).collect();
            if p.len() != 5 {
                return Err(Decline("error"));
            }
            let mut value = Vec::with_capacity(64);
            let (state, conflict, visible) = self.edge(key, &p, false)?;
            value.push(b'[');
            put_str(&mut value, state);
            value.push(b',');
            match &conflict {
                Some(c) => put_str(&mut value, c),
                None => value.extend_from_slice(b"null"),
            }
            value.push(b',');
            value.push(b'[');
            for (i, c) in visible.iter().enumerate() {
                if i > 0 {
                    value.push(b',');
                }
                put_str(&mut value, c);
            }
            value.push(b']');
            value.push(b']');
            out.push(entity_key(b'E', key, version));
            out.push(value.clone());
            let (t, st, si, ot, oi) = (p[0], p[1], p[2], p[3], p[4]);
            out.push(entity_key(
                b'A',
                &[st, si, "out", t, ot, oi].join(sep),
                version,
            ));
            out.push(value.clone());
            out.push(entity_key(
                b'A',
                &[ot, oi, "in", t, st, si].join(sep),
                version,
            ));
            out.push(value);
            // _history_row: rows.encode_history
            let mut touched: Vec<(&str, &str)> = Vec::new();
            {
                let st = self.store.borrow();
                for (id, _) in &changed {
                    let ci = st.claim_index(id).ok_or(Decline("error"))?;
                    if *st.claim_key(ci) != **key {
                        continue;
                    }
                    touched.push((id, status_name(i64::from(st.claim(ci).status))?));
                }
            }
            let (state, conflict, visible) = self.edge(key, &p, true)?;
            let mut h = Out::new(1);
            h.q(exact_i64(&get(intern!(py, "log_time"))?, "history")?);
            h.n(touched.len());
            h.n(visible.len());
            for k in [
                intern!(py, "kind"),
                intern!(py, "reason"),
                intern!(py, "command_id"),
                intern!(py, "command_type"),
                intern!(py, "agent"),
            ] {
                h.py(&get(k)?, "history")?;
            }
            for (id, status) in touched {
                h.s(Some(id));
                h.s(Some(status));
            }
            h.s(Some(state));
            h.s(conflict.as_deref());
            for c in &visible {
                h.s(Some(c));
            }
            let h = h.buf;
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
        // commit: the cache as stage leaves it
        if let Some((id, key, record, status)) = new_record {
            self.staged
                .set_item(id, (PyBytes::new(py, &key), record, status))?;
        }
        let mut it = out.into_iter();
        while let (Some(k), Some(v)) = (it.next(), it.next()) {
            self.put
                .call1((PyBytes::new(py, &k), PyBytes::new(py, &v)))?;
        }
        Ok(())
    }
}
