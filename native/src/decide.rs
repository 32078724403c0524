//! The hot path of ``claimgraph.core.governor.decide``: ``assert``, ``deny`` and ``retract``
//! under a rules revision it implements (``spec::RULES``), when they are accepted (or retired)
//! without a conflict
//! (a stale claim under ``on_stale: accept`` included, flagged), conflicted by a newer claim
//! that stands (last-write-wins), or rejected as a duplicate command id or a stale claim under
//! ``on_stale: reject``.
//!
//! It reads the Python ``GraphState`` as it is and builds the decision dict Python would
//! build, key for key. Every other case — another refusal, a conflict, a stale claim held for
//! a resolver, a grant, a fail-closed domain, decision checks, a Kafka offset map — is
//! declined with a short reason and decided by Python, and so is every command outside the
//! declaration of ``spec.rs`` (another revision, a policy, cardinality, ``on_stale`` value or
//! fallback mode it does not list). Every limit, kind and reason it writes is the
//! specification's (``Spec``). The Python rules this follows are cited by function.

use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyFrozenSet, PyList, PySet, PyString, PyTuple};

use crate::avro::Codec;
use crate::sha256::{hex, sha256};
use crate::spec::{Policy, Spec, Stale};
use crate::table::{store_of, Store};

/// Why the native path handed a command to Python.
pub struct Decline(pub &'static str);

impl From<PyErr> for Decline {
    fn from(_: PyErr) -> Self {
        Decline("error")
    }
}

type D<T> = Result<T, Decline>;

fn chars(s: &str) -> usize {
    if s.is_ascii() {
        s.len()
    } else {
        s.chars().count()
    }
}

fn text<'py>(v: &Bound<'py, PyAny>) -> D<Bound<'py, PyString>> {
    Ok(v.downcast::<PyString>()
        .map_err(|_| Decline("field"))?
        .clone())
}

/// ``base.check_id``: a string, non-empty (unless allowed), at most ``LIMITS["id"]``
/// characters, printable.
fn check_id(sp: &Spec, v: &Bound<'_, PyAny>, empty_ok: bool) -> D<()> {
    let s = text(v)?;
    let t = s.to_str().map_err(|_| Decline("field"))?;
    if t.is_empty() {
        return if empty_ok {
            Ok(())
        } else {
            Err(Decline("field"))
        };
    }
    if chars(t) > sp.id {
        return Err(Decline("field"));
    }
    if !t.bytes().all(|b| (0x20..0x7f).contains(&b)) {
        let ok: bool = s.call_method0(intern!(s.py(), "isprintable"))?.extract()?;
        if !ok {
            return Err(Decline("field"));
        }
    }
    Ok(())
}

fn check_text(v: &Bound<'_, PyAny>, limit: usize) -> D<()> {
    let s = text(v)?;
    if chars(s.to_str().map_err(|_| Decline("field"))?) > limit {
        return Err(Decline("field"));
    }
    Ok(())
}

fn get<'py>(d: &Bound<'py, PyDict>, k: &Bound<'py, PyString>) -> D<Bound<'py, PyAny>> {
    d.get_item(k)?.ok_or(Decline("error"))
}

fn dict<'py>(v: Bound<'py, PyAny>) -> D<Bound<'py, PyDict>> {
    v.downcast_into::<PyDict>().map_err(|_| Decline("error"))
}

fn same(a: &Bound<'_, PyAny>, b: &Bound<'_, PyAny>) -> D<bool> {
    Ok(a.eq(b)?)
}

/// What a rule decided: the fields of the decision it fills in.
struct Outcome<'py> {
    kind: Bound<'py, PyString>,
    reason: Bound<'py, PyString>,
    detail: String,
    claim: Option<Bound<'py, PyDict>>,
    target: Option<Bound<'py, PyAny>>,
    supersedes: Vec<String>,
    conflicts_with: Vec<String>,
    stale: bool,
}

impl<'py> Outcome<'py> {
    /// ``decide_command`` on a ``Refusal``: a rejection with no effect, its detail cut to
    /// ``LIMITS["detail"]`` characters.
    fn rejected(py: Python<'py>, sp: &Spec, reason: &Py<PyString>, detail: String) -> Self {
        let detail = if chars(&detail) > sp.detail {
            detail.chars().take(sp.detail).collect()
        } else {
            detail
        };
        Outcome {
            kind: sp.rejected.bind(py).clone(),
            reason: reason.bind(py).clone(),
            detail,
            claim: None,
            target: None,
            supersedes: Vec::new(),
            conflicts_with: Vec::new(),
            stale: false,
        }
    }
}

/// ``governance.iso_utc``: ms since the epoch as ISO 8601 UTC, for times in
/// ``[0, LIMITS["time_max"]]`` (the end of year 9999; else Python).
fn iso_utc(ms: i64, time_max: i64) -> D<String> {
    if !(0..=time_max).contains(&ms) {
        return Err(Decline("time"));
    }
    let (secs, rem) = (ms / 1000, ms % 1000);
    let (days, sod) = (secs / 86_400, secs % 86_400);
    // civil_from_days (H. Hinnant): the proleptic Gregorian date of a day count
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    Ok(format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{rem:03}Z",
        sod / 3600,
        sod % 3600 / 60,
        sod % 60
    ))
}

#[pyclass(frozen, module = "claimgraph.native._rust")]
pub struct Hot {
    pub(crate) spec: Py<Spec>,
    claim: Py<Codec>,
    claim_header: Vec<u8>,
    retract: Py<Codec>,
    retract_header: Vec<u8>,
}

/// What the rules below read of the state, fetched once per command.
struct St<'py> {
    state: Bound<'py, PyAny>,
    store: Bound<'py, Store>,
}

#[pymethods]
impl Hot {
    #[new]
    fn new(
        spec: Py<Spec>,
        claim: Py<Codec>,
        claim_header: Vec<u8>,
        retract: Py<Codec>,
        retract_header: Vec<u8>,
    ) -> Self {
        Hot {
            spec,
            claim,
            claim_header,
            retract,
            retract_header,
        }
    }

    /// ``(decision, None)``, or ``(None, why)``: decide it in Python. ``rules``: the rules
    /// revision it is decided under (the graph's, or ``CURRENT`` for an empty graph).
    fn decide<'py>(
        &self,
        py: Python<'py>,
        state: &Bound<'py, PyAny>,
        data: &Bound<'py, PyAny>,
        input_offset: &Bound<'py, PyAny>,
        log_time: &Bound<'py, PyAny>,
        rules: i64,
    ) -> (PyObject, Option<&'static str>) {
        match self.run(py, state, data, input_offset, log_time, rules) {
            Ok(d) => (d.into_any().unbind(), None),
            Err(Decline(why)) => (py.None(), Some(why)),
        }
    }
}

impl Hot {
    pub(crate) fn run<'py>(
        &self,
        py: Python<'py>,
        state: &Bound<'py, PyAny>,
        data: &Bound<'py, PyAny>,
        input_offset: &Bound<'py, PyAny>,
        log_time: &Bound<'py, PyAny>,
        rules: i64,
    ) -> D<Bound<'py, PyDict>> {
        let sp = self.spec.get();
        // a revision this module implements, and the graph's own (a batch checks each command)
        if !Spec::decides_rules(rules) {
            return Err(Decline("rules"));
        }
        let graph_rules = state.getattr(intern!(py, "rules"))?;
        if !graph_rules.is_none() && graph_rules.extract::<i64>()? != rules {
            return Err(Decline("rules"));
        }
        let raw = data
            .downcast_exact::<PyBytes>()
            .map_err(|_| Decline("type"))?
            .as_bytes();
        let header = raw.get(..10).ok_or(Decline("kind"))?;
        let is_claim = header == self.claim_header.as_slice();
        if !is_claim && header != self.retract_header.as_slice() {
            return Err(Decline("kind"));
        }
        let codec = if is_claim {
            self.claim.get()
        } else {
            self.retract.get()
        };
        let c = codec
            .decode_bytes(py, raw, 10)
            .map_err(|_| Decline("decode"))?;
        let c = dict(c.into_bound(py))?;
        let store = store_of(state)?;
        let st = St {
            state: state.clone(),
            store,
        };

        // decide_command: _check_envelope
        let cid = get(&c, intern!(py, "command_id"))?;
        check_id(sp, &cid, false)?;
        let graph = state.getattr(intern!(py, "graph"))?;
        if !same(&get(&c, intern!(py, "graph"))?, &graph)? {
            return Err(Decline("refused"));
        }
        let other = state.getattr(intern!(py, "other_commands"))?;
        let other = other.downcast::<PySet>().map_err(|_| Decline("error"))?;
        let known = match cid.downcast::<PyString>() {
            Ok(x) => st.store.borrow().claim_index(x.to_str()?).is_some(),
            Err(_) => false,
        };
        let duplicate = known || other.contains(&cid)?;
        let agent = get(&c, intern!(py, "agent"))?;
        let task = get(&c, intern!(py, "task"))?;

        let d = if duplicate {
            // base: refused before the agent and task are looked at
            let detail = format!(
                "command {} was already decided; use a new command_id to retry",
                cid.repr()?.to_str()?
            );
            Outcome::rejected(py, sp, &sp.duplicate_command, detail)
        } else if is_claim {
            check_id(sp, &agent, false)?;
            check_id(sp, &task, true)?;
            self.claim(py, sp, &st, &c, &cid, &agent, &task, raw.len())?
        } else {
            check_id(sp, &agent, false)?;
            check_id(sp, &task, true)?;
            self.retract(py, sp, &st, &c, &agent)?
        };
        let Outcome {
            kind,
            reason,
            detail,
            claim,
            target,
            supersedes,
            conflicts_with,
            stale,
        } = d;

        // new_decision, filled in by the rule; then decide(): the chain fields, fitting()
        let n = 4 * raw.len()
            + 4 * (chars(&detail) + chars(text(&graph)?.to_str()?))
            + 4096
            + 1050 * (supersedes.len() + conflicts_with.len());
        if n > sp.decision_bytes {
            return Err(Decline("large"));
        }
        let chain = state.getattr(intern!(py, "chain"))?;
        let chain = chain.downcast::<PyBytes>().map_err(|_| Decline("error"))?;
        let none = py.None();
        let out = PyDict::new(py);
        out.set_item(intern!(py, "graph"), &graph)?;
        out.set_item(intern!(py, "command_id"), &cid)?;
        out.set_item(
            intern!(py, "command_type"),
            if is_claim {
                sp.claim.bind(py)
            } else {
                sp.retract.bind(py)
            },
        )?;
        out.set_item(intern!(py, "input_offset"), input_offset)?;
        out.set_item(intern!(py, "log_time"), log_time)?;
        out.set_item(intern!(py, "kind"), kind)?;
        out.set_item(intern!(py, "reason"), reason)?;
        out.set_item(intern!(py, "detail"), detail)?;
        out.set_item(
            intern!(py, "schema_rev"),
            state.getattr(intern!(py, "schema_rev"))?,
        )?;
        out.set_item(intern!(py, "agent"), &agent)?;
        out.set_item(intern!(py, "task"), &task)?;
        out.set_item(
            intern!(py, "claim"),
            claim.map_or_else(|| none.clone_ref(py), |x| x.into_any().unbind()),
        )?;
        out.set_item(
            intern!(py, "target"),
            target.map_or_else(|| none.clone_ref(py), |x| x.unbind()),
        )?;
        out.set_item(intern!(py, "conflict_id"), &none)?;
        out.set_item(
            intern!(py, "conflicts_with"),
            PyList::new(py, &conflicts_with)?,
        )?;
        out.set_item(intern!(py, "supersedes"), PyList::new(py, &supersedes)?)?;
        out.set_item(intern!(py, "withheld"), PyList::empty(py))?;
        out.set_item(intern!(py, "released"), PyList::empty(py))?;
        out.set_item(intern!(py, "dismissed"), PyList::empty(py))?;
        out.set_item(intern!(py, "stale"), stale)?;
        out.set_item(intern!(py, "schema"), &none)?;
        out.set_item(intern!(py, "grant"), &none)?;
        out.set_item(intern!(py, "merge"), &none)?;
        out.set_item(intern!(py, "signals"), PyList::empty(py))?;
        out.set_item(intern!(py, "exits"), PyList::empty(py))?;
        out.set_item(intern!(py, "count"), 0)?;
        out.set_item(intern!(py, "run_id"), &none)?;
        out.set_item(intern!(py, "key"), &none)?;
        out.set_item(intern!(py, "signed_by"), &none)?;
        out.set_item(intern!(py, "rules"), rules)?;
        out.set_item(intern!(py, "command_sha256"), hex(&sha256(raw)))?;
        out.set_item(intern!(py, "prev_hash"), hex(chain.as_bytes()))?;
        Ok(out)
    }

    /// ``claims.claim`` where it accepts without a conflict, or (last-write-wins) finds a newer
    /// claim standing.
    #[allow(clippy::too_many_arguments, clippy::type_complexity)]
    fn claim<'py>(
        &self,
        py: Python<'py>,
        sp: &Spec,
        st: &St<'py>,
        c: &Bound<'py, PyDict>,
        cid: &Bound<'py, PyAny>,
        agent: &Bound<'py, PyAny>,
        task: &Bound<'py, PyAny>,
        _size: usize,
    ) -> D<Outcome<'py>> {
        // check_claim_fields
        let names = [
            "edge_type",
            "subject_type",
            "subject_id",
            "object_type",
            "object_id",
        ];
        let mut parts: Vec<Bound<'py, PyAny>> = Vec::with_capacity(5);
        for n in names {
            let v = get(c, &PyString::intern(py, n))?;
            check_id(sp, &v, false)?;
            parts.push(v);
        }
        let run_id = get(c, intern!(py, "run_id"))?;
        if !run_id.is_none() {
            check_id(sp, &run_id, false)?;
        }
        let conf = get(c, intern!(py, "confidence"))?;
        let cf: f64 = conf.extract()?;
        if !(cf.is_finite() && (0.0..=1.0).contains(&cf)) {
            return Err(Decline("field"));
        }
        let evidence = get(c, intern!(py, "evidence"))?;
        let evidence = evidence
            .downcast::<PyList>()
            .map_err(|_| Decline("error"))?;
        if evidence.len() > sp.evidence_items {
            return Err(Decline("field"));
        }
        for e in evidence.iter() {
            check_text(&e, sp.evidence_item)?;
        }
        let reasoning = get(c, intern!(py, "reasoning"))?;
        check_text(&reasoning, sp.reasoning)?;
        let props = dict(get(c, intern!(py, "properties"))?)?;
        if props.len() > sp.properties {
            return Err(Decline("field"));
        }
        let mut sorted: Vec<(String, Bound<'py, PyAny>, Bound<'py, PyAny>)> = Vec::new();
        for (k, v) in props.iter() {
            check_id(sp, &k, false)?;
            check_text(&v, sp.property_value)?;
            sorted.push((text(&k)?.to_str()?.to_owned(), k, v));
        }
        let asserted_at = get(c, intern!(py, "asserted_at"))?;
        let ts: i64 = asserted_at.extract()?;
        if !(0..=sp.time_max).contains(&ts) {
            return Err(Decline("field")); // outside [0, LIMITS["time_max"]]: Python's
        }
        let based = get(c, intern!(py, "based_on_version"))?;
        let based_v: Option<i64> = based.extract()?;
        if matches!(based_v, Some(b) if b < -1) {
            return Err(Decline("field"));
        }

        // the schema and the edge type
        let state = &st.state;
        let schema = state.getattr(intern!(py, "schema"))?;
        if schema.is_none() {
            return Err(Decline("no_schema"));
        }
        let ets = dict(schema.getattr(intern!(py, "edge_types"))?)?;
        let et = ets.get_item(&parts[0])?.ok_or(Decline("refused"))?;
        if !et.getattr(intern!(py, "decision"))?.is_none() {
            return Err(Decline("signals"));
        }
        // the declaration (spec.rs): a policy, cardinality, on_stale value or fallback mode
        // this module does not implement is decided in Python
        let policy = sp
            .policy(text(&et.getattr(intern!(py, "conflict_policy"))?)?.to_str()?)
            .ok_or(Decline("policy"))?;
        if !sp.knows_cardinality(text(&et.getattr(intern!(py, "cardinality"))?)?.to_str()?) {
            return Err(Decline("cardinality"));
        }
        let on_stale = sp
            .on_stale(text(&et.getattr(intern!(py, "on_stale"))?)?.to_str()?)
            .ok_or(Decline("on_stale"))?;
        let fallback = et.getattr(intern!(py, "fallback"))?;
        if !sp.knows_fallback(text(&fallback.getattr(intern!(py, "mode"))?)?.to_str()?) {
            return Err(Decline("fallback"));
        }
        let node_types = schema.getattr(intern!(py, "node_types"))?;
        let node_types = node_types
            .downcast::<PyFrozenSet>()
            .map_err(|_| Decline("error"))?;
        for (i, end) in [(1, intern!(py, "subject")), (3, intern!(py, "object"))] {
            if !node_types.contains(&parts[i])? || !same(&parts[i], &et.getattr(end)?)? {
                return Err(Decline("refused"));
            }
        }
        // authority.authorised: the schema's writers (a grant: Python)
        let auth_key = PyTuple::new(
            py,
            [
                et.getattr(intern!(py, "name"))?,
                agent.clone(),
                task.clone(),
            ],
        )?;
        let cache = dict(schema.getattr(intern!(py, "_auth_cache"))?)?;
        let hit = match cache.get_item(&auth_key)? {
            Some(h) => h.is_truthy()?,
            None => schema
                .call_method1(intern!(py, "may_write"), (&et, agent, task))?
                .is_truthy()?,
        };
        if !hit {
            return Err(Decline("grant"));
        }

        let strs: Vec<&str> = parts
            .iter()
            .map(|p| p.downcast::<PyString>().unwrap().to_str())
            .collect::<PyResult<_>>()?;
        let sep = sp.sep.as_str();
        let key = strs.join(sep);
        let mut slots: Vec<String> = Vec::with_capacity(2);
        if et.getattr(intern!(py, "subject_exclusive"))?.is_truthy()? {
            slots.push([strs[0], "out", strs[1], strs[2]].join(sep));
        }
        if et.getattr(intern!(py, "object_exclusive"))?.is_truthy()? {
            slots.push([strs[0], "in", strs[3], strs[4]].join(sep));
        }
        let polarity = text(&get(c, intern!(py, "polarity"))?)?;
        let asserts = sp.asserts(polarity.to_str()?).ok_or(Decline("polarity"))?;

        let es = st.store.borrow().edge_index(&key);
        // staleness (embedded logs: versions are sequence numbers)
        let mut stale = false;
        if let Some(b) = based_v {
            if !state.getattr(intern!(py, "offsets"))?.is_none() {
                return Err(Decline("offsets"));
            }
            let head: i64 = state.getattr(intern!(py, "head"))?.extract()?;
            if b > head {
                return Err(Decline("refused"));
            }
            let mut changed: i64 = match es {
                Some(e) => st.store.borrow().edge(e).changed,
                None => -1,
            };
            let slot_changed = dict(state.getattr(intern!(py, "slot_changed"))?)?;
            for s in &slots {
                if let Some(v) = slot_changed.get_item(s)? {
                    changed = changed.max(v.extract()?);
                }
            }
            if changed > b {
                match on_stale {
                    Stale::Reject => {
                        let detail = format!(
                            "the slot changed after version {b}, which the claim was based on"
                        );
                        return Ok(Outcome::rejected(py, sp, &sp.stale_claim, detail));
                    }
                    Stale::Hold => return Err(Decline("stale")), // held for a resolver
                    Stale::Accept => stale = true,               // accepted, flagged
                }
            }
        }

        let mut own: Vec<String> = Vec::new();
        let mut agreeing: Vec<String> = Vec::new();
        let mut opposing: Vec<String> = Vec::new();
        let agent_s = text(agent)?.to_str()?.to_owned();
        let mut ts_of: Vec<(String, i64)> = Vec::new();
        if let Some(e) = es {
            let store = st.store.borrow();
            if store.n_withheld(e) != 0 {
                return Err(Decline("conflict"));
            }
            for ci in store.visible(e) {
                let cs = store.claim(ci);
                let ids = store.claim_id(ci).into_owned();
                ts_of.push((ids.clone(), cs.ts));
                if store.claim_agent(ci) == agent_s {
                    own.push(ids);
                } else if cs.asserts == asserts {
                    agreeing.push(ids);
                } else {
                    opposing.push(ids);
                }
            }
        }
        let slot_conflict = dict(state.getattr(intern!(py, "slot_conflict"))?)?;
        for s in &slots {
            if slot_conflict.get_item(s)?.is_some() {
                return Err(Decline("conflict"));
            }
        }
        if asserts && !slots.is_empty() {
            let holders = dict(state.getattr(intern!(py, "slot_holder"))?)?;
            for s in &slots {
                let holder = match holders.get_item(s)? {
                    Some(h) => h,
                    None => continue,
                };
                if text(&holder)?.to_str()? == key {
                    continue;
                }
                let store = st.store.borrow();
                let he = store
                    .edge_index(text(&holder)?.to_str()?)
                    .ok_or(Decline("error"))?;
                for ci in store.visible(he) {
                    let ids = store.claim_id(ci).into_owned();
                    if own.contains(&ids) || opposing.contains(&ids) {
                        continue;
                    }
                    ts_of.push((ids.clone(), store.claim(ci).ts));
                    if store.claim_agent(ci) == agent_s {
                        own.push(ids);
                    } else {
                        opposing.push(ids);
                    }
                }
            }
        }
        let lww = policy == Policy::LastWriteWins;
        let mut newer: Vec<(String, i64)> = Vec::new();
        let supersedes: Vec<String> = if lww {
            let mut all = own.clone();
            all.extend(opposing.iter().cloned());
            for x in &all {
                let t = ts_of
                    .iter()
                    .find(|(i, _)| i == x)
                    .map(|(_, t)| *t)
                    .ok_or(Decline("error"))?;
                if t > ts {
                    newer.push((x.clone(), t));
                }
            }
            all
        } else {
            if !opposing.is_empty() {
                return Err(Decline("conflict"));
            }
            own
        };

        // base.accept, or (last-write-wins) conflicted: the newer claim stands
        let (kind, reason, detail, supersedes, conflicts_with) =
            if let Some((first, t)) = newer.first() {
                let detail = format!(
                "asserted_at {} is older than the current claim {} ({}); the newer claim stands",
                iso_utc(ts, sp.time_max)?,
                first,
                iso_utc(*t, sp.time_max)?
            );
                let ids = newer.into_iter().map(|(i, _)| i).collect();
                (
                    &sp.conflicted,
                    &sp.older_than_current,
                    detail,
                    Vec::new(),
                    ids,
                )
            } else if !supersedes.is_empty() {
                let mut d = format!(
                    "supersedes {}",
                    supersedes[..supersedes.len().min(5)].join(", ")
                );
                if supersedes.len() > 5 {
                    d.push_str(&format!(" and {} more", supersedes.len() - 5));
                }
                (&sp.accepted, &sp.supersedes, d, supersedes, Vec::new())
            } else if !agreeing.is_empty() {
                let d = format!(
                    "agrees with {}",
                    agreeing[..agreeing.len().min(5)].join(", ")
                );
                (&sp.accepted, &sp.corroborates, d, supersedes, Vec::new())
            } else {
                (&sp.accepted, &sp.new, String::new(), supersedes, Vec::new())
            };

        // claims.claim_record
        let rec = PyDict::new(py);
        rec.set_item(intern!(py, "claim_id"), cid)?;
        rec.set_item(intern!(py, "agent"), agent)?;
        rec.set_item(intern!(py, "task"), task)?;
        rec.set_item(intern!(py, "run_id"), &run_id)?;
        for (n, v) in names.iter().zip(&parts) {
            rec.set_item(PyString::intern(py, n), v)?;
        }
        rec.set_item(intern!(py, "polarity"), &polarity)?;
        rec.set_item(intern!(py, "confidence"), cf)?;
        rec.set_item(intern!(py, "evidence"), PyList::new(py, evidence.iter())?)?;
        rec.set_item(intern!(py, "reasoning"), &reasoning)?;
        rec.set_item(intern!(py, "asserted_at"), &asserted_at)?;
        rec.set_item(intern!(py, "based_on_version"), &based)?;
        sorted.sort_by(|a, b| a.0.cmp(&b.0));
        let props_out = PyDict::new(py);
        for (_, k, v) in &sorted {
            props_out.set_item(k, v)?;
        }
        rec.set_item(intern!(py, "properties"), props_out)?;
        Ok(Outcome {
            kind: kind.bind(py).clone(),
            reason: reason.bind(py).clone(),
            detail,
            claim: Some(rec),
            target: None,
            supersedes,
            conflicts_with,
            stale,
        })
    }

    /// ``lifecycle.retract`` of a visible claim by its owner.
    #[allow(clippy::type_complexity)]
    fn retract<'py>(
        &self,
        py: Python<'py>,
        sp: &Spec,
        st: &St<'py>,
        c: &Bound<'py, PyDict>,
        agent: &Bound<'py, PyAny>,
    ) -> D<Outcome<'py>> {
        let target = get(c, intern!(py, "claim_id"))?;
        check_id(sp, &target, false)?;
        let reason = get(c, intern!(py, "reason"))?;
        check_text(&reason, sp.reasoning)?;
        // revision 3 checks the run id's domain (an id or null): decline any other
        let run_id = get(c, intern!(py, "run_id"))?;
        if !run_id.is_none() {
            check_id(sp, &run_id, false)?;
        }
        let store = st.store.borrow();
        let ci = match target.downcast::<PyString>() {
            Ok(t) => store.claim_index(t.to_str()?),
            Err(_) => None,
        }
        .ok_or(Decline("refused"))?;
        if store.claim_agent(ci) != text(agent)?.to_str()? {
            return Err(Decline("refused"));
        }
        if store.claim(ci).status != sp.visible {
            return Err(Decline("not_visible"));
        }
        let detail: String = text(&reason)?.to_str()?.chars().take(200).collect();
        Ok(Outcome {
            kind: sp.retired.bind(py).clone(),
            reason: sp.retracted.bind(py).clone(),
            detail,
            claim: None,
            target: Some(target),
            supersedes: Vec::new(),
            conflicts_with: Vec::new(),
            stale: false,
        })
    }
}
