//! What this module implements, and the specification it runs under.
//!
//! The native core keeps no copy of the specification's limits, names or codes: Python hands
//! them over once at load (``claimgraph.native.spec.table()``, built from
//! ``claimgraph.core``: ``LIMITS``, ``DecisionKind``, ``Reason``, the claim statuses, the
//! schema's enums, the command catalogue), and [`Spec`] holds them. A key it needs and does not
//! find makes the specification unusable here (``ValueError``), so the module is not used.
//!
//! What it does keep is its own declaration, below: the rules revisions, conflict policies,
//! cardinalities, ``on_stale`` values, polarities, fallback modes and command kinds it
//! implements, named as the specification names them (enum member names; fallback modes and
//! command kinds by value, as the specification has no members for them). Python hands it only
//! commands inside that set; every check here declines whatever is outside it, so a value the
//! specification gains later (a new policy, a new revision) is decided in Python until this
//! declaration lists it.

use pyo3::exceptions::PyValueError;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString};

/// A conflict policy, as this module implements it.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    LastWriteWins,
    Quarantine,
    Merge,
}

/// An ``on_stale`` value, as this module implements it.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Stale {
    Reject,
    Hold,
    Accept,
}

/// The governor rules revisions ``decide`` implements (``claimgraph.core.governor.revisions``).
/// Revision 3 checks every field against its declared domain before any rule runs and records
/// a failing rule as ``internal_error``: for the commands decided here the decisions are those
/// of revision 2, because every field outside the spec's bounds is declined (and decided in
/// Python) before anything is decided, and nothing here raises into a decision.
/// Revision 4 changes fail-closed domains (declined here: no ``fail_closed`` fallback mode
/// below) and conflicts that meet (declined: a claim touching a conflict is Python's).
/// Revision 5 changed only ``read_blocked`` (a report without a run counts once per reader
/// and conflict), which is decided and folded in Python: claims and retracts decide as under 4.
/// Revision 6 changed only ``place`` (an operator's act) and the records of no graph placed on
/// the partition (one shared bucket), both decided in Python: a graph the native path decides
/// is placed on its partition (declined otherwise), and its claims and retracts decide as
/// under 5.
pub const RULES: &[i64] = &[2, 3, 4, 5, 6];
/// The rules revisions whose decisions the fold folds (its effects did not change between them;
/// revision 4's merge exits come only with a conflict id, which the fold declines; revision 6's
/// bucket rejections carry no command id, which every revision's fold already remembers not).
pub const FOLD_RULES: &[i64] = &[1, 2, 3, 4, 5, 6];
/// The projection row layouts ``rows`` writes (``claimgraph.projections.rows.LAYOUT``).
pub const LAYOUTS: &[i64] = &[2];
/// The command kinds ``decide`` decides.
pub const DECIDES: &[&str] = &["claim", "retract"];
/// The command kinds whose accepted, conflicted or retired decisions the fold folds (it folds
/// every rejection).
pub const FOLDS: &[&str] = &["claim", "retract"];
/// ``ConflictPolicy`` members.
pub const POLICIES: &[(&str, Policy)] = &[
    ("LAST_WRITE_WINS", Policy::LastWriteWins),
    ("QUARANTINE", Policy::Quarantine),
    ("CONFIDENCE_WEIGHTED_MERGE", Policy::Merge),
];
/// ``Cardinality`` members (which sides are exclusive is read from the edge type).
pub const CARDINALITIES: &[&str] = &["ONE_TO_ONE", "MANY_TO_ONE", "ONE_TO_MANY", "MANY_TO_MANY"];
/// ``OnStale`` members.
pub const ON_STALE: &[(&str, Stale)] = &[
    ("REJECT", Stale::Reject),
    ("QUARANTINE", Stale::Hold),
    ("ACCEPT", Stale::Accept),
];
/// ``Polarity`` members: whether it asserts.
pub const POLARITIES: &[(&str, bool)] = &[("ASSERT", true), ("DENY", false)];
/// ``Fallback.mode`` values (``FALLBACK_MODES``) under which a claim is decided as in any
/// domain: a fail-closed domain is Python's. A domain is implemented when its fallback is.
pub const FALLBACK_MODES: &[&str] = &["escalate", "default"];

/// The declaration above, for Python: ``claimgraph.native`` checks it against the
/// specification's enums and ``CURRENT`` and reports a build that is behind them.
#[pyfunction]
pub fn implements(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("rules", RULES.to_vec())?;
    d.set_item("fold_rules", FOLD_RULES.to_vec())?;
    d.set_item("layouts", LAYOUTS.to_vec())?;
    d.set_item("decides", DECIDES.to_vec())?;
    d.set_item("folds", FOLDS.to_vec())?;
    d.set_item(
        "policies",
        POLICIES.iter().map(|(n, _)| *n).collect::<Vec<_>>(),
    )?;
    d.set_item("cardinalities", CARDINALITIES.to_vec())?;
    d.set_item(
        "on_stale",
        ON_STALE.iter().map(|(n, _)| *n).collect::<Vec<_>>(),
    )?;
    d.set_item(
        "polarities",
        POLARITIES.iter().map(|(n, _)| *n).collect::<Vec<_>>(),
    )?;
    d.set_item("fallback_modes", FALLBACK_MODES.to_vec())?;
    Ok(d)
}

/// The specification's table, read once: limits, names and codes, and the values of what the
/// declaration above implements.
#[pyclass(frozen, module = "claimgraph.native._rust")]
pub struct Spec {
    // LIMITS
    pub id: usize,
    pub evidence_items: usize,
    pub evidence_item: usize,
    pub reasoning: usize,
    pub properties: usize,
    pub property_value: usize,
    pub detail: usize,
    pub decision_bytes: usize,
    pub time_max: i64,
    /// The key separator (``entities.SEP``).
    pub sep: String,
    // DecisionKind
    pub accepted: Py<PyString>,
    pub conflicted: Py<PyString>,
    pub rejected: Py<PyString>,
    pub retired: Py<PyString>,
    // Reason
    pub new: Py<PyString>,
    pub corroborates: Py<PyString>,
    pub supersedes: Py<PyString>,
    pub older_than_current: Py<PyString>,
    pub duplicate_command: Py<PyString>,
    pub stale_claim: Py<PyString>,
    pub retracted: Py<PyString>,
    // claim statuses (entities)
    pub visible: u8,
    pub withheld: u8,
    pub lost: u8,
    pub superseded: u8,
    pub retired_status: u8,
    status_names: Vec<(u8, String)>,
    // the command kinds of DECIDES / FOLDS, as the catalogue names them
    pub claim: Py<PyString>,
    pub retract: Py<PyString>,
    // enum values of what is implemented (an implemented member the spec lacks: not here)
    policies: Vec<(String, Policy)>,
    cardinalities: Vec<String>,
    on_stale: Vec<(String, Stale)>,
    polarities: Vec<(String, bool)>,
    fallback_modes: Vec<String>,
    table: Py<PyDict>,
}

fn section<'py>(t: &Bound<'py, PyDict>, name: &str) -> PyResult<Bound<'py, PyDict>> {
    t.get_item(name)?
        .ok_or_else(|| PyValueError::new_err(format!("the specification has no {name:?}")))?
        .downcast_into::<PyDict>()
        .map_err(|_| PyValueError::new_err(format!("the specification's {name:?} is no dict")))
}

fn entry<'py>(d: &Bound<'py, PyDict>, what: &str, key: &str) -> PyResult<Bound<'py, PyAny>> {
    d.get_item(key)?.ok_or_else(|| {
        PyValueError::new_err(format!(
            "the specification's {what} has no {key:?}, which the native core needs"
        ))
    })
}

fn name(py: Python<'_>, d: &Bound<'_, PyDict>, what: &str, key: &str) -> PyResult<Py<PyString>> {
    let v: String = entry(d, what, key)?.extract()?;
    Ok(PyString::intern(py, &v).unbind())
}

/// The values of the implemented members the specification has, with what each means here.
fn values<T: Copy>(d: &Bound<'_, PyDict>, declared: &[(&str, T)]) -> PyResult<Vec<(String, T)>> {
    let mut out = Vec::new();
    for (member, x) in declared {
        if let Some(v) = d.get_item(*member)? {
            out.push((v.extract::<String>()?, *x));
        }
    }
    Ok(out)
}

#[pymethods]
impl Spec {
    #[new]
    fn new(py: Python<'_>, table: &Bound<'_, PyDict>) -> PyResult<Self> {
        let limits = section(table, "limits")?;
        let lim = |k: &str| -> PyResult<usize> { entry(&limits, "limits", k)?.extract() };
        let kinds = section(table, "kinds")?;
        let reasons = section(table, "reasons")?;
        let statuses = section(table, "statuses")?;
        let status = |k: &str| -> PyResult<u8> { entry(&statuses, "statuses", k)?.extract() };
        let mut status_names = Vec::new();
        for (code, n) in section(table, "status_names")?.iter() {
            status_names.push((code.extract::<u8>()?, n.extract::<String>()?));
        }
        let commands: Vec<String> = table
            .get_item("commands")?
            .ok_or_else(|| PyValueError::new_err("the specification has no \"commands\""))?
            .downcast_into::<PyList>()
            .map_err(|_| PyValueError::new_err("the specification's \"commands\" is no list"))?
            .extract()?;
        for k in DECIDES.iter().chain(FOLDS) {
            if !commands.iter().any(|c| c == k) {
                return Err(PyValueError::new_err(format!(
                    "the command catalogue has no {k:?}, which the native core decides"
                )));
            }
        }
        let modes: Vec<String> = table
            .get_item("fallback_modes")?
            .ok_or_else(|| PyValueError::new_err("the specification has no \"fallback_modes\""))?
            .extract()?;
        let cards = section(table, "cardinalities")?;
        let mut cardinalities = Vec::new();
        for m in CARDINALITIES {
            if let Some(v) = cards.get_item(*m)? {
                cardinalities.push(v.extract::<String>()?);
            }
        }
        Ok(Spec {
            id: lim("id")?,
            evidence_items: lim("evidence_items")?,
            evidence_item: lim("evidence_item")?,
            reasoning: lim("reasoning")?,
            properties: lim("properties")?,
            property_value: lim("property_value")?,
            detail: lim("detail")?,
            decision_bytes: lim("decision_bytes")?,
            time_max: entry(&limits, "limits", "time_max")?.extract()?,
            sep: table
                .get_item("sep")?
                .ok_or_else(|| PyValueError::new_err("the specification has no \"sep\""))?
                .extract()?,
            accepted: name(py, &kinds, "kinds", "ACCEPTED")?,
            conflicted: name(py, &kinds, "kinds", "CONFLICTED")?,
            rejected: name(py, &kinds, "kinds", "REJECTED")?,
            retired: name(py, &kinds, "kinds", "RETIRED")?,
            new: name(py, &reasons, "reasons", "NEW")?,
            corroborates: name(py, &reasons, "reasons", "CORROBORATES")?,
            supersedes: name(py, &reasons, "reasons", "SUPERSEDES")?,
            older_than_current: name(py, &reasons, "reasons", "OLDER_THAN_CURRENT")?,
            duplicate_command: name(py, &reasons, "reasons", "DUPLICATE_COMMAND")?,
            stale_claim: name(py, &reasons, "reasons", "STALE_CLAIM")?,
            retracted: name(py, &reasons, "reasons", "RETRACTED")?,
            visible: status("VISIBLE")?,
            withheld: status("WITHHELD")?,
            lost: status("LOST")?,
            superseded: status("SUPERSEDED")?,
            retired_status: status("RETIRED")?,
            status_names,
            claim: PyString::intern(py, DECIDES[0]).unbind(),
            retract: PyString::intern(py, DECIDES[1]).unbind(),
            policies: values(&section(table, "policies")?, POLICIES)?,
            cardinalities,
            on_stale: values(&section(table, "on_stale")?, ON_STALE)?,
            polarities: values(&section(table, "polarities")?, POLARITIES)?,
            fallback_modes: FALLBACK_MODES
                .iter()
                .filter(|m| modes.iter().any(|x| x == *m))
                .map(|m| (*m).to_owned())
                .collect(),
            table: table.copy()?.unbind(),
        })
    }

    /// The table this specification was read from (a copy).
    #[getter]
    fn table<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        self.table.bind(py).copy()
    }

    /// The values of the declaration under this specification: what Python may hand over.
    #[getter]
    fn values<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        d.set_item(
            intern!(py, "policies"),
            self.policies
                .iter()
                .map(|(v, _)| v.as_str())
                .collect::<Vec<_>>(),
        )?;
        d.set_item(intern!(py, "cardinalities"), self.cardinalities.clone())?;
        d.set_item(
            intern!(py, "on_stale"),
            self.on_stale
                .iter()
                .map(|(v, _)| v.as_str())
                .collect::<Vec<_>>(),
        )?;
        d.set_item(
            intern!(py, "polarities"),
            self.polarities
                .iter()
                .map(|(v, _)| v.as_str())
                .collect::<Vec<_>>(),
        )?;
        d.set_item(intern!(py, "fallback_modes"), self.fallback_modes.clone())?;
        Ok(d)
    }
}

impl Spec {
    pub fn policy(&self, value: &str) -> Option<Policy> {
        self.policies
            .iter()
            .find(|(v, _)| v == value)
            .map(|(_, p)| *p)
    }

    pub fn knows_cardinality(&self, value: &str) -> bool {
        self.cardinalities.iter().any(|v| v == value)
    }

    pub fn on_stale(&self, value: &str) -> Option<Stale> {
        self.on_stale
            .iter()
            .find(|(v, _)| v == value)
            .map(|(_, s)| *s)
    }

    /// Whether a polarity asserts (None: not one this module implements).
    pub fn asserts(&self, value: &str) -> Option<bool> {
        self.polarities
            .iter()
            .find(|(v, _)| v == value)
            .map(|(_, a)| *a)
    }

    pub fn knows_fallback(&self, mode: &str) -> bool {
        self.fallback_modes.iter().any(|m| m == mode)
    }

    /// ``STATUS_NAMES[status]`` (None: a status the specification does not name).
    pub fn status_name(&self, status: i64) -> Option<&str> {
        self.status_names
            .iter()
            .find(|(c, _)| i64::from(*c) == status)
            .map(|(_, n)| n.as_str())
    }

    pub fn decides_rules(rules: i64) -> bool {
        RULES.contains(&rules)
    }

    pub fn folds_rules(rules: i64) -> bool {
        FOLD_RULES.contains(&rules)
    }
}
