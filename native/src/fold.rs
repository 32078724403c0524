//! The hot path of ``claimgraph.core.state.GraphState.evolve``: an accepted claim without a
//! conflict (it shows, and may supersede visible claims), a claim conflicted by a newer one
//! (stored as lost), and the retirement of a visible claim.
//!
//! It mutates the Python ``GraphState`` exactly as ``evolve`` does, in the same order (dict
//! insertion order is part of the state's canonical encoding), and returns the same
//! ``Changes``. Any other decision — and any hot-looking one that meets a withheld claim — is
//! declined before anything is changed, and ``evolve`` folds it — and so is every decision
//! outside the declaration of ``spec.rs``: one made under a rules revision it does not list
//! (``FOLD_RULES``), or a claim on an edge type whose conflict policy it does not implement.
//! The statuses, kinds and reasons it reads and writes are the specification's (``Spec``).

use pyo3::exceptions::PyRuntimeError;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PySet, PyString, PyType};

use crate::decide::Decline;
use crate::sha256::sha256;
use crate::spec::{Policy, Spec};
use crate::table::{store_of, Store};

type D<T> = Result<T, Decline>;

#[pyclass(frozen, module = "claimgraph.native._rust")]
pub struct Fold {
    spec: Py<Spec>,
    changes: Py<PyType>,
}

fn s<'py>(v: &Bound<'py, PyAny>) -> D<String> {
    Ok(v.downcast::<PyString>()
        .map_err(|_| Decline("error"))?
        .to_str()?
        .to_owned())
}

fn dict<'py>(v: Bound<'py, PyAny>) -> D<Bound<'py, PyDict>> {
    v.downcast_into::<PyDict>().map_err(|_| Decline("error"))
}

fn item<'py>(d: &Bound<'py, PyDict>, k: &Bound<'py, PyString>) -> D<Bound<'py, PyAny>> {
    d.get_item(k)?.ok_or(Decline("error"))
}

fn empty(v: &Bound<'_, PyAny>) -> D<bool> {
    Ok(v.len()? == 0)
}

/// The state being folded, and what the fold collects (``before``, ``Changes``).
struct Run<'s, 'py> {
    py: Python<'py>,
    sp: &'s Spec,
    state: Bound<'py, PyAny>,
    store: Bound<'py, Store>,
    slot_holder: Bound<'py, PyDict>,
    slot_conflict: Bound<'py, PyDict>,
    sides: Bound<'py, PyDict>,
    before: Vec<(String, &'static str)>,
    ch_claims: Vec<(String, i64)>,
    ch_edges: Vec<String>,
    // One Python string per edge key met in this decision: the slot holders' values are then
    // one object, as in ``evolve``.
    keys: Vec<(String, Bound<'py, PyAny>)>,
}

impl<'py> Run<'_, 'py> {
    /// ``GraphState.slots_of`` (its ``_sides`` cache filled by Python on a miss).
    fn slots(&self, key: &str) -> D<Vec<String>> {
        let sep = self.sp.sep.as_str();
        let name = key.split(sep).next().unwrap_or("");
        let sides = match self.sides.get_item(name)? {
            Some(x) => x,
            None => {
                self.state
                    .call_method1(intern!(self.py, "slots_of"), (key,))?;
                self.sides.get_item(name)?.ok_or(Decline("error"))?
            }
        };
        let (subj, obj): (bool, bool) = sides.extract()?;
        let p: Vec<&str> = key.split(sep).collect();
        if p.len() != 5 {
            return Err(Decline("error"));
        }
        let mut out = Vec::with_capacity(2);
        if subj {
            out.push([p[0], "out", p[1], p[2]].join(sep));
        }
        if obj {
            out.push([p[0], "in", p[3], p[4]].join(sep));
        }
        Ok(out)
    }

    fn claim(&self, id: &str) -> D<u32> {
        self.store.borrow().claim_index(id).ok_or(Decline("error"))
    }

    /// ``GraphState.edge_read(key)[0]``.
    fn read(&self, key: &str) -> D<&'static str> {
        let e = {
            let st = self.store.borrow();
            let e = st.edge_index(key);
            if let Some(e) = e {
                if let Some(w) = st.first_withheld(e) {
                    if st.claim_conflict(w).is_some() {
                        return Ok("unknown");
                    }
                }
            }
            e
        };
        for sl in self.slots(key)? {
            if self.slot_conflict.get_item(sl)?.is_some() {
                return Ok("unknown");
            }
        }
        if let Some(e) = e {
            let st = self.store.borrow();
            if let Some(v) = st.first_visible(e) {
                if st.claim(v).asserts {
                    return Ok("present");
                }
            }
        }
        Ok("absent")
    }

    fn remember(&mut self, key: &str) -> D<()> {
        if !self.before.iter().any(|(k, _)| k == key) {
            let r = self.read(key)?;
            self.before.push((key.to_owned(), r));
        }
        Ok(())
    }

    fn touch(&mut self, key: &str) {
        if !self.ch_edges.iter().any(|k| k == key) {
            self.ch_edges.push(key.to_owned());
        }
    }

    /// The Python string of an edge key: the one already met in this decision, else a new one.
    fn key_obj(&mut self, key: &str) -> Bound<'py, PyAny> {
        if let Some((_, o)) = self.keys.iter().find(|(k, _)| k == key) {
            return o.clone();
        }
        let o = PyString::new(self.py, key).into_any();
        self.keys.push((key.to_owned(), o.clone()));
        o
    }

    /// ``GraphState._show`` of a claim that is not withheld.
    fn show(&mut self, id: &str, ci: u32, key: &str, asserts: bool) -> D<()> {
        self.remember(key)?;
        {
            let mut st = self.store.borrow_mut();
            st.set_status(ci, self.sp.visible);
            let e = st.ensure_edge(key)?;
            let mut vis = st.visible(e);
            vis.push(ci);
            st.set_visible(e, vis);
        }
        if asserts {
            let k = self.key_obj(key);
            for sl in self.slots(key)? {
                self.slot_holder.set_item(sl, &k)?;
            }
        }
        self.ch_claims
            .push((id.to_owned(), i64::from(self.sp.visible)));
        self.touch(key);
        Ok(())
    }

    /// ``GraphState._hide`` of a claim that is not withheld (checked before the fold began).
    fn hide(&mut self, id: &str, status: u8) -> D<()> {
        let ci = self.claim(id)?;
        let key = self.store.borrow().claim_key(ci).into_owned();
        self.remember(&key)?;
        let now = self.store.borrow().claim(ci).status;
        if now == self.sp.visible {
            let any_assert = {
                let mut st = self.store.borrow_mut();
                let e = st.edge_index(&key).ok_or(Decline("error"))?;
                let keep: Vec<u32> = st.visible(e).into_iter().filter(|&x| x != ci).collect();
                let any = keep.iter().any(|&x| st.claim(x).asserts);
                st.set_visible(e, keep);
                any
            };
            if !any_assert {
                for sl in self.slots(&key)? {
                    if let Some(h) = self.slot_holder.get_item(&sl)? {
                        if s(&h)? == key {
                            self.slot_holder.del_item(&sl)?;
                        }
                    }
                }
            }
        }
        self.store.borrow_mut().set_status(ci, status);
        self.ch_claims.push((id.to_owned(), i64::from(status)));
        self.touch(&key);
        Ok(())
    }

    fn vote_group(&self, key: &str) -> D<String> {
        Ok(self
            .slots(key)?
            .into_iter()
            .next()
            .unwrap_or_else(|| key.to_owned()))
    }
}

#[pymethods]
impl Fold {
    #[new]
    fn new(spec: Py<Spec>, changes: Py<PyType>) -> Self {
        Fold { spec, changes }
    }

    /// ``(changes, None)`` with the state folded, or ``(None, why)``: nothing changed, fold it
    /// in Python.
    fn evolve<'py>(
        &self,
        py: Python<'py>,
        state: &Bound<'py, PyAny>,
        d: &Bound<'py, PyDict>,
        version: &Bound<'py, PyAny>,
        raw: &Bound<'py, PyAny>,
    ) -> PyResult<(PyObject, Option<&'static str>)> {
        match self.run(py, state, d, version, raw) {
            Ok(ch) => Ok((ch.unbind(), None)),
            Err(Decline("broken")) => Err(PyRuntimeError::new_err(
                "the native fold failed after it began changing the state: the state is not usable",
            )),
            Err(Decline(why)) => Ok((py.None(), Some(why))),
        }
    }
}

/// What ``evolve`` does for every decision: the head, counts, rules, chain and log time.
fn bookkeeping<'py>(
    py: Python<'py>,
    state: &Bound<'py, PyAny>,
    d: &Bound<'py, PyDict>,
    version: &Bound<'py, PyAny>,
    raw: &[u8],
) -> D<()> {
    state.setattr(intern!(py, "head"), version)?;
    let n: i64 = state.getattr(intern!(py, "decisions"))?.extract()?;
    state.setattr(intern!(py, "decisions"), n + 1)?;
    state.setattr(intern!(py, "rules"), item(d, intern!(py, "rules"))?)?;
    let chain = state.getattr(intern!(py, "chain"))?;
    let chain = chain.downcast::<PyBytes>().map_err(|_| Decline("error"))?;
    let mut buf = Vec::with_capacity(32 + raw.len());
    buf.extend_from_slice(chain.as_bytes());
    buf.extend_from_slice(raw);
    state.setattr(intern!(py, "chain"), PyBytes::new(py, &sha256(&buf)))?;
    let log_time = item(d, intern!(py, "log_time"))?;
    if log_time.gt(state.getattr(intern!(py, "last_log_time"))?)? {
        state.setattr(intern!(py, "last_log_time"), &log_time)?;
    }
    Ok(())
}

impl Fold {
    /// ``evolve`` of any rejected decision: bookkeeping, and its command id remembered
    /// (unless it was rejected as a duplicate).
    fn rejected<'py>(
        &self,
        py: Python<'py>,
        state: &Bound<'py, PyAny>,
        d: &Bound<'py, PyDict>,
        version: &Bound<'py, PyAny>,
        raw: &[u8],
    ) -> D<Bound<'py, PyAny>> {
        let ch = self.changes.bind(py).call0()?;
        bookkeeping(py, state, d, version, raw)?;
        let cid = item(d, intern!(py, "command_id"))?;
        let duplicate =
            item(d, intern!(py, "reason"))?.eq(self.spec.get().duplicate_command.bind(py))?;
        if cid.is_truthy()? && !duplicate {
            let other = state.getattr(intern!(py, "other_commands"))?;
            other
                .downcast::<PySet>()
                .map_err(|_| Decline("error"))?
                .add(&cid)?;
        }
        Ok(ch)
    }

    pub(crate) fn run<'py>(
        &self,
        py: Python<'py>,
        state: &Bound<'py, PyAny>,
        d: &Bound<'py, PyDict>,
        version: &Bound<'py, PyAny>,
        raw: &Bound<'py, PyAny>,
    ) -> D<Bound<'py, PyAny>> {
        let sp: &Spec = self.spec.get();
        let raw = raw
            .downcast_exact::<PyBytes>()
            .map_err(|_| Decline("raw"))?
            .as_bytes();
        // a decision of a rules revision whose fold this module implements
        let rules: i64 = item(d, intern!(py, "rules"))?
            .extract()
            .map_err(|_| Decline("rules"))?;
        if !Spec::folds_rules(rules) {
            return Err(Decline("rules"));
        }
        let kind = item(d, intern!(py, "kind"))?;
        let ctype = item(d, intern!(py, "command_type"))?;
        if kind.eq(sp.rejected.bind(py))? {
            return self
                .rejected(py, state, d, version, raw)
                .map_err(|_| Decline("broken"));
        }
        let claim_type = ctype.eq(sp.claim.bind(py))?;
        let lost = claim_type && kind.eq(sp.conflicted.bind(py))?; // stored, shown nowhere
        let is_claim = claim_type && (lost || kind.eq(sp.accepted.bind(py))?);
        let is_retract = ctype.eq(sp.retract.bind(py))? && kind.eq(sp.retired.bind(py))?;
        if !(is_claim || is_retract) {
            return Err(Decline("kind"));
        }
        if !item(d, intern!(py, "conflict_id"))?.is_none()
            || !item(d, intern!(py, "schema"))?.is_none()
            || !item(d, intern!(py, "grant"))?.is_none()
            || !item(d, intern!(py, "key"))?.is_none()
        {
            return Err(Decline("effects"));
        }
        for k in [
            intern!(py, "withheld"),
            intern!(py, "released"),
            intern!(py, "dismissed"),
            intern!(py, "exits"),
        ] {
            if !empty(&item(d, k)?)? {
                return Err(Decline("effects"));
            }
        }
        let claim = item(d, intern!(py, "claim"))?;
        let supersedes: Vec<String> = item(d, intern!(py, "supersedes"))?.extract()?;
        let target = item(d, intern!(py, "target"))?;
        if is_claim == claim.is_none()
            || (is_retract && (!supersedes.is_empty() || target.is_none()))
        {
            return Err(Decline("effects"));
        }
        let store = store_of(state)?;
        let mut run = Run {
            py,
            sp,
            state: state.clone(),
            store,
            slot_holder: dict(state.getattr(intern!(py, "slot_holder"))?)?,
            slot_conflict: dict(state.getattr(intern!(py, "slot_conflict"))?)?,
            sides: dict(state.getattr(intern!(py, "_sides"))?)?,
            before: Vec::new(),
            ch_claims: Vec::new(),
            ch_edges: Vec::new(),
            keys: Vec::new(),
        };
        // nothing withheld is touched (leaving a conflict is Python's): checked before any change
        let target_s = if is_retract { Some(s(&target)?) } else { None };
        for id in supersedes.iter().chain(target_s.iter()) {
            let ci = run.claim(id)?;
            if run.store.borrow().claim(ci).status == sp.withheld {
                return Err(Decline("withheld"));
            }
        }
        let claim_parts = if is_claim {
            let c = claim.downcast::<PyDict>().map_err(|_| Decline("error"))?;
            let mut parts = Vec::with_capacity(5);
            for n in [
                "edge_type",
                "subject_type",
                "subject_id",
                "object_type",
                "object_id",
            ] {
                parts.push(s(&item(c, &PyString::intern(py, n))?)?);
            }
            let key = parts.join(sp.sep.as_str());
            let id_obj = item(c, intern!(py, "claim_id"))?;
            let asserts = sp
                .asserts(&s(&item(c, intern!(py, "polarity"))?)?)
                .ok_or(Decline("polarity"))?;
            let id = s(&id_obj)?;
            {
                let st = run.store.borrow();
                if st.claim_index(&id).is_some() {
                    return Err(Decline("known")); // cannot be accepted; Python names what happens
                }
                if let Some(e) = st.edge_index(&key) {
                    if st.n_withheld(e) > 0 {
                        return Err(Decline("withheld"));
                    }
                }
            }
            // the claim's edge type: its policy is one this module implements (its votes)
            let merges = {
                let schema = state.getattr(intern!(py, "schema"))?;
                if schema.is_none() {
                    false
                } else {
                    let ets = dict(schema.getattr(intern!(py, "edge_types"))?)?;
                    match ets.get_item(&parts[0])? {
                        None => false,
                        Some(et) => {
                            let policy = et.getattr(intern!(py, "conflict_policy"))?;
                            sp.policy(&s(&policy)?).ok_or(Decline("policy"))? == Policy::Merge
                        }
                    }
                }
            };
            Some((c.clone(), key, id, id_obj, merges, asserts))
        } else {
            None
        };

        if matches!(&target_s, Some(t) if t.is_empty()) {
            return Err(Decline("effects"));
        }
        // From here on the state changes: a failure now is a broken fold, never a decline.
        let apply = || -> D<Bound<'py, PyAny>> {
            // evolve: the bookkeeping every decision does
            let ch = self.changes.bind(py).call0()?;
            bookkeeping(py, state, d, version, raw)?;
            let cid = item(d, intern!(py, "command_id"))?;
            if is_retract && cid.is_truthy()? {
                let other = state.getattr(intern!(py, "other_commands"))?;
                other
                    .downcast::<PySet>()
                    .map_err(|_| Decline("error"))?
                    .add(&cid)?;
            }

            if let Some((c, key, id, id_obj, merges, asserts)) = claim_parts {
                run.remember(&key)?;
                let agent = item(&c, intern!(py, "agent"))?;
                let agent = agent.downcast::<PyString>().map_err(|_| Decline("error"))?;
                let agent_i = PyString::intern(py, agent.to_str()?);
                let conf: f64 = item(&c, intern!(py, "confidence"))?.extract()?;
                let ts: i64 = item(&c, intern!(py, "asserted_at"))?.extract()?;
                let based: Option<i64> = item(&c, intern!(py, "based_on_version"))?.extract()?;
                let ci = run.store.borrow_mut().put_claim(
                    true, // "known" was declined above: the id is new
                    &id,
                    &key,
                    agent.to_str()?,
                    asserts,
                    ts,
                    sp.lost,
                    None,
                    conf,
                    based,
                )?;
                ch.setattr(intern!(py, "new_claim"), &c)?;
                if merges {
                    let votes = dict(state.getattr(intern!(py, "votes"))?)?;
                    let group = run.vote_group(&key)?;
                    let g = match votes.get_item(&group)? {
                        Some(g) => g,
                        None => {
                            let g = PyDict::new(py).into_any();
                            votes.set_item(&group, &g)?;
                            g
                        }
                    };
                    g.set_item(&agent_i, &id_obj)?;
                }
                if lost {
                    run.ch_claims.push((id.clone(), i64::from(sp.lost)));
                } else {
                    run.show(&id, ci, &key, asserts)?;
                }
            }
            for c in &supersedes {
                run.hide(c, sp.superseded)?;
            }
            if let Some(t) = &target_s {
                run.hide(t, sp.retired_status)?;
                // _drop_vote
                let ci = run.claim(t)?;
                let (key, agent) = {
                    let st = run.store.borrow();
                    (st.claim_key(ci).into_owned(), st.claim_agent(ci).to_owned())
                };
                let votes = dict(state.getattr(intern!(py, "votes"))?)?;
                if let Some(g) = votes.get_item(run.vote_group(&key)?)? {
                    let g = dict(g)?;
                    if let Some(v) = g.get_item(&agent)? {
                        if s(&v)? == *t {
                            g.del_item(&agent)?;
                        }
                    }
                }
            }
            // _mark_changed (no slot changed: no conflict opened or closed)
            let slot_changed = dict(state.getattr(intern!(py, "slot_changed"))?)?;
            let before = std::mem::take(&mut run.before);
            for (key, was) in &before {
                if run.read(key)? != *was {
                    let v: i64 = version.extract()?;
                    let mut st = run.store.borrow_mut();
                    let e = st.ensure_edge(key)?;
                    st.set_changed(e, v);
                    drop(st);
                    for sl in run.slots(key)? {
                        slot_changed.set_item(sl, version)?;
                    }
                }
            }
            let claims = PyList::empty(py);
            for (id, st) in &run.ch_claims {
                claims.append((id.as_str(), *st))?;
            }
            ch.setattr(intern!(py, "claims"), claims)?;
            ch.setattr(intern!(py, "edges"), PyList::new(py, &run.ch_edges)?)?;
            Ok(ch)
        };
        apply().map_err(|_| Decline("broken"))
    }
}
