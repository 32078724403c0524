//! The fold's claims and edges off the Python heap (``GraphState.claims`` / ``.edges``).
//!
//! A :class:`Store` keeps every claim and edge the fold knows in flat native tables: strings
//! (claim ids, edge keys, agents, conflict ids) live once each in chunk-aligned arenas with an
//! open-addressing index (canonical UUID ids as 16 bytes), a claim is a 32-byte record, an edge
//! a 16-byte one whose visible claims are claim indexes (one inline, more in a side list);
//! withheld lists and conflicts, rare, are side maps. With a spill (``claimgraph.native.spill``)
//! the oldest chunks of claims, edge keys and edges move to a scratch RocksDB and are read
//! back on use into bounded cold caches. Python sees the tables
//! through ``ClaimMap`` / ``EdgeMap``: mappings in insertion order, like the dicts they
//! replace, whose items are write-through views (``ClaimRef``, ``EdgeRef``) with the
//! attributes of ``ClaimState`` / ``EdgeState``. Nothing is ever removed (the fold only adds
//! claims and edges), so indexes are stable and the order is the order of first insertion,
//! which the state's canonical encoding depends on.
//!
//! The native decide, fold and rows read and write the tables directly (``Store``'s Rust
//! methods); the Python fold goes through the views, so both cores fold the same state.

use std::borrow::Cow;
use std::collections::hash_map::RandomState;
use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};
use std::sync::Mutex;

use pyo3::exceptions::{PyKeyError, PyMemoryError, PyTypeError, PyValueError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyString, PyTuple};

use crate::decide::Decline;

pub const NONE: u32 = u32::MAX;
const TOMB: u8 = 1; // an index slot whose entry was dropped (empty: 0, live: 0x80 | hash bits)
const LIST: u32 = 1 << 31; // an edge's visible claims held in a side list
const MAX_ITEMS: usize = (LIST - 1) as usize;
const NO_BASED: i64 = i64::MIN;
const CHUNK_BITS: u32 = 16; // 65,536 entries per chunk

fn full() -> PyErr {
    PyMemoryError::new_err("claimgraph state table full (2^31 entries or 4 GiB of strings)")
}

/// A vector in fixed chunks of ``1 << bits`` items: it grows without copying more than a
/// chunk (no reallocation that briefly doubles the table and sets the process's peak), wastes
/// at most one chunk, and a chunk can be dropped (spilled) while the others stay.
pub struct Seg<T> {
    chunks: Vec<Vec<T>>,
    len: usize,
    bits: u32,
}

impl<T: Copy> Seg<T> {
    fn new(bits: u32) -> Self {
        Seg {
            chunks: Vec::new(),
            len: 0,
            bits,
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    fn push(&mut self, x: T) {
        if self.len % (1 << self.bits) == 0 {
            // a chunk starts small and doubles up to its size (a small table stays small)
            self.chunks
                .push(Vec::with_capacity(256.min(1 << self.bits)));
        }
        self.chunks.last_mut().expect("a chunk").push(x);
        self.len += 1;
    }

    #[inline]
    pub fn at(&self, i: usize) -> &T {
        &self.chunks[i >> self.bits][i & ((1 << self.bits) - 1)]
    }

    #[inline]
    fn at_mut(&mut self, i: usize) -> &mut T {
        &mut self.chunks[i >> self.bits][i & ((1 << self.bits) - 1)]
    }

    /// Whether item ``i`` is in memory (its chunk was not dropped).
    #[inline]
    fn has(&self, i: usize) -> bool {
        i < self.len && !self.chunks[i >> self.bits].is_empty()
    }

    fn drop_chunk(&mut self, c: usize) {
        self.chunks[c] = Vec::new();
    }

    fn heap_bytes(&self) -> usize {
        let items: usize = self.chunks.iter().map(Vec::capacity).sum();
        items * std::mem::size_of::<T>() + self.chunks.capacity() * 24
    }
}

/// Strings stored once each, length-prefixed, the strings of entries ``[c << bits, (c + 1) <<
/// bits)`` in arena chunk ``c`` (so a chunk of entries can be dropped with its strings), found by
/// an open-addressing index (random-keyed SipHash, so an agent cannot choose ids that collide;
/// tags filter the probes; load at most 0.8, grown by half).
pub struct Interner {
    chunks: Vec<Vec<u8>>,
    starts: Seg<u32>, // offset of the entry's length prefix in its arena chunk
    slots: Vec<u32>,
    tags: Vec<u8>, // 0: empty slot
    rs: RandomState,
    // canonical lowercase UUIDs stored as their 16 bytes (after the marker 0x80 0x00, which is
    // no length's varint): claim ids are mostly UUIDs, 37 bytes each otherwise
    uuids: bool,
    live: usize,  // entries in memory (indexed)
    tombs: usize, // index slots of dropped entries (probes pass them)
}

/// The 16 bytes of a canonical lowercase UUID string (8-4-4-4-12 hex digits), else None.
fn uuid16(s: &str) -> Option<[u8; 16]> {
    let b = s.as_bytes();
    if b.len() != 36 {
        return None;
    }
    let mut out = [0u8; 16];
    let mut n = 0;
    let mut i = 0;
    while i < 36 {
        if i == 8 || i == 13 || i == 18 || i == 23 {
            if b[i] != b'-' {
                return None;
            }
            i += 1;
            continue;
        }
        let hi = hexval(b[i])?;
        let lo = hexval(b[i + 1])?;
        out[n] = (hi << 4) | lo;
        n += 1;
        i += 2;
    }
    Some(out)
}

fn hexval(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        _ => None,
    }
}

fn uuid_text(b: &[u8]) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(36);
    for (i, x) in b.iter().enumerate() {
        if i == 4 || i == 6 || i == 8 || i == 10 {
            out.push('-');
        }
        out.push(HEX[usize::from(x >> 4)] as char);
        out.push(HEX[usize::from(x & 15)] as char);
    }
    out
}

/// A stored entry: its text, or a UUID's 16 bytes.
enum Entry<'a> {
    Text(&'a str),
    Uuid(&'a [u8]),
}

impl Interner {
    fn new(bits: u32) -> Self {
        Interner {
            chunks: Vec::new(),
            starts: Seg::new(bits),
            slots: vec![NONE; 16],
            tags: vec![0; 16],
            rs: RandomState::new(),
            uuids: false,
            live: 0,
            tombs: 0,
        }
    }

    fn with_uuids(bits: u32) -> Self {
        let mut i = Interner::new(bits);
        i.uuids = true;
        i
    }

    /// Whether entry ``i`` is in memory.
    pub fn has(&self, i: u32) -> bool {
        self.starts.has(i as usize)
    }

    /// Drop the entries of chunk ``c`` and their strings (the caller saved them).
    /// Their index slots become tombstones (found by hashing each once: O(chunk), not
    /// O(entries in memory)); the index is rebuilt when tombstones and entries fill it.
    fn drop_chunk(&mut self, c: usize) {
        let n = self.starts.chunks[c].len();
        let lo = (c << self.starts.bits) as u32;
        let len = self.slots.len();
        for i in lo..lo + n as u32 {
            let h = self.hash(self.text(i).as_bytes());
            let mut pos = self.home(h);
            while self.slots[pos] != i || self.tags[pos] < 0x80 {
                pos += 1;
                if pos == len {
                    pos = 0;
                }
            }
            self.tags[pos] = TOMB;
            self.tombs += 1;
        }
        self.starts.drop_chunk(c);
        self.chunks[c] = Vec::new();
        self.live -= n;
        if (self.live + self.tombs) * 5 > self.slots.len() * 4 {
            self.reindex(self.slots.len());
        }
    }

    pub fn len(&self) -> usize {
        self.starts.len()
    }

    fn hash(&self, s: &[u8]) -> u64 {
        let mut h = self.rs.build_hasher();
        h.write(s);
        h.finish()
    }

    #[inline]
    fn home(&self, h: u64) -> usize {
        ((u128::from(h) * self.slots.len() as u128) >> 64) as usize
    }

    fn entry(&self, i: u32) -> Entry<'_> {
        let mut pos = *self.starts.at(i as usize) as usize;
        let chunk = &self.chunks[i as usize >> self.starts.bits];
        if chunk[pos] == 0x80 && chunk[pos + 1] == 0 {
            return Entry::Uuid(&chunk[pos + 2..pos + 18]);
        }
        let mut len = 0usize;
        let mut shift = 0;
        loop {
            let b = chunk[pos];
            pos += 1;
            len |= usize::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                break;
            }
            shift += 7;
        }
        // SAFETY: only whole &str values are ever stored, each after its length
        Entry::Text(unsafe { std::str::from_utf8_unchecked(&chunk[pos..pos + len]) })
    }

    /// The text of entry ``i`` (an interner without UUIDs: no allocation).
    pub fn get(&self, i: u32) -> &str {
        match self.entry(i) {
            Entry::Text(t) => t,
            Entry::Uuid(_) => panic!("a UUID entry read as text"),
        }
    }

    /// The text of entry ``i`` (formatted, if it is stored as a UUID).
    pub fn text(&self, i: u32) -> Cow<'_, str> {
        match self.entry(i) {
            Entry::Text(t) => Cow::Borrowed(t),
            Entry::Uuid(b) => Cow::Owned(uuid_text(b)),
        }
    }

    pub fn find(&self, s: &str) -> Option<u32> {
        let h = self.hash(s.as_bytes());
        let u = if self.uuids { uuid16(s) } else { None };
        let tag = (h >> 57) as u8 | 0x80;
        let n = self.slots.len();
        let mut pos = self.home(h);
        loop {
            let t = self.tags[pos];
            if t == 0 {
                return None;
            }
            if t == tag {
                let at = self.slots[pos];
                let same = match (self.entry(at), &u) {
                    (Entry::Text(t), _) => t == s,
                    (Entry::Uuid(b), Some(x)) => b == x,
                    (Entry::Uuid(_), None) => false,
                };
                if same {
                    return Some(at);
                }
            }
            pos += 1;
            if pos == n {
                pos = 0;
            }
        }
    }

    fn place(&mut self, h: u64, i: u32) {
        let n = self.slots.len();
        let mut pos = self.home(h);
        while self.tags[pos] >= 0x80 {
            pos += 1;
            if pos == n {
                pos = 0;
            }
        }
        if self.tags[pos] == TOMB {
            self.tombs -= 1;
        }
        self.slots[pos] = i;
        self.tags[pos] = (h >> 57) as u8 | 0x80;
    }

    /// More room: a bigger index, or (mostly tombstones) the same size rebuilt.
    fn grow(&mut self) {
        let cap = self.slots.len();
        if (self.live + 1) * 5 > cap * 2 {
            self.reindex(cap + cap / 2);
        } else {
            self.reindex(cap);
        }
    }

    fn reindex(&mut self, cap: usize) {
        self.slots = vec![NONE; cap];
        self.tags = vec![0; cap];
        self.tombs = 0;
        for i in 0..self.len() as u32 {
            if self.has(i) {
                let h = self.hash(self.text(i).as_bytes());
                self.place(h, i);
            }
        }
    }

    /// The index of ``s``, added if new.
    pub fn intern(&mut self, s: &str) -> PyResult<u32> {
        if let Some(i) = self.find(s) {
            return Ok(i);
        }
        self.push(s)
    }

    /// Add ``s`` (not present: the caller checked).
    fn push(&mut self, s: &str) -> PyResult<u32> {
        if self.len() >= MAX_ITEMS {
            return Err(full());
        }
        if (self.live + self.tombs + 1) * 5 > self.slots.len() * 4 {
            self.grow();
        }
        if self.len() % (1 << self.starts.bits) == 0 {
            if let Some(full) = self.chunks.last_mut() {
                full.shrink_to_fit(); // its entries are all in: no room kept for more
            }
            self.chunks.push(Vec::with_capacity(1024)); // doubles as it fills
        }
        let uuid = if self.uuids { uuid16(s) } else { None };
        let chunk = self.chunks.last_mut().expect("a chunk");
        if chunk.len() + s.len() + 10 > u32::MAX as usize {
            return Err(full());
        }
        let at = chunk.len() as u32;
        if let Some(b) = uuid {
            chunk.extend_from_slice(&[0x80, 0]);
            chunk.extend_from_slice(&b);
        } else {
            Self::put_text(chunk, s);
        }
        let i = self.len() as u32;
        self.starts.push(at);
        self.live += 1;
        let h = self.hash(s.as_bytes());
        self.place(h, i);
        Ok(i)
    }

    fn put_text(chunk: &mut Vec<u8>, s: &str) {
        let mut len = s.len();
        loop {
            let b = (len & 0x7f) as u8;
            len >>= 7;
            if len == 0 {
                chunk.push(b);
                break;
            }
            chunk.push(b | 0x80);
        }
        chunk.extend_from_slice(s.as_bytes());
    }

    fn heap_bytes(&self) -> usize {
        self.chunks.iter().map(Vec::capacity).sum::<usize>()
            + self.starts.heap_bytes()
            + self.slots.capacity() * 5
    }
}

/// Where claims beyond the kept chunks go: a Python object with ``get(key) -> bytes | None``
/// and ``put(items)`` over a RocksDB (``claimgraph.native.spill``). Claims read back are kept
/// in a bounded cold cache; changes to them are written back when it is emptied.
struct Spill {
    db: Py<PyAny>,
    keep: usize, // chunks of each table kept in memory (at least 1: the one being filled)
    spilled: usize, // claim chunks [0, spilled) are in the spill
    kspilled: usize, // edge-key chunks [0, kspilled) are
    espilled: usize, // edge chunks [0, espilled) are
    cold: Mutex<HashMap<u32, Cold>>,
    cold_ids: Mutex<HashMap<String, u32>>,
    cold_keys: Mutex<HashMap<u32, ColdKey>>,
    cold_key_ids: Mutex<HashMap<String, u32>>,
    cold_edges: Mutex<HashMap<u32, (EdgeRec, bool)>>,
}

struct ColdKey {
    key: String,
    edge: u32, // its edge row, NONE: none
    dirty: bool,
}

struct Cold {
    id: String,
    rec: ClaimRec,
    dirty: bool,
}

const COLD_MAX: usize = 1 << 16;

impl Spill {
    fn get(&self, key: &[u8]) -> Option<Vec<u8>> {
        Python::with_gil(|py| {
            let v = self
                .db
                .call_method1(py, intern!(py, "get"), (PyBytes::new(py, key),))
                .unwrap_or_else(|e| panic!("claimgraph state spill: a read failed: {e}"));
            if v.is_none(py) {
                None
            } else {
                Some(
                    v.extract::<Vec<u8>>(py)
                        .unwrap_or_else(|e| panic!("claimgraph state spill: {e}")),
                )
            }
        })
    }

    fn put(&self, items: Vec<(Vec<u8>, Vec<u8>)>) -> PyResult<()> {
        Python::with_gil(|py| {
            let list = PyList::empty(py);
            for (k, v) in items {
                list.append((PyBytes::new(py, &k), PyBytes::new(py, &v)))?;
            }
            self.db.call_method1(py, intern!(py, "put"), (list,))?;
            Ok(())
        })
    }

    /// Write changed cold claims, keys and edges back and empty the cold caches.
    fn write_back(&self) {
        let mut items = Vec::new();
        for (&i, c) in self.cold.lock().expect("the cold cache").iter() {
            if c.dirty {
                items.push((claim_row_key(i), encode_claim(&c.id, &c.rec)));
            }
        }
        for (&k, c) in self.cold_keys.lock().expect("the cold cache").iter() {
            if c.dirty {
                items.push((row_key(b'K', k), encode_key(&c.key, c.edge)));
            }
        }
        for (&e, (rec, dirty)) in self.cold_edges.lock().expect("the cold cache").iter() {
            if *dirty {
                items.push((row_key(b'E', e), encode_edge(rec)));
            }
        }
        self.cold_keys.lock().expect("the cold cache").clear();
        self.cold_key_ids.lock().expect("the cold cache").clear();
        self.cold_edges.lock().expect("the cold cache").clear();
        items.sort();
        if !items.is_empty() {
            self.put(items)
                .unwrap_or_else(|e| panic!("claimgraph state spill: a write failed: {e}"));
        }
        self.cold.lock().expect("the cold cache").clear();
        self.cold_ids.lock().expect("the cold cache").clear();
    }
}

fn claim_row_key(i: u32) -> Vec<u8> {
    row_key(b'c', i)
}

fn row_key(family: u8, i: u32) -> Vec<u8> {
    let mut k = Vec::with_capacity(5);
    k.push(family);
    k.extend_from_slice(&i.to_be_bytes());
    k
}

fn text_key(family: u8, s: &str) -> Vec<u8> {
    let mut k = Vec::with_capacity(1 + s.len());
    k.push(family);
    k.extend_from_slice(s.as_bytes());
    k
}

fn encode_key(key: &str, edge: u32) -> Vec<u8> {
    let mut v = Vec::with_capacity(4 + key.len());
    v.extend_from_slice(&edge.to_be_bytes());
    v.extend_from_slice(key.as_bytes());
    v
}

fn encode_edge(r: &EdgeRec) -> Vec<u8> {
    let mut v = Vec::with_capacity(16);
    v.extend_from_slice(&r.changed.to_be_bytes());
    v.extend_from_slice(&r.key.to_be_bytes());
    v.extend_from_slice(&r.vis.to_be_bytes());
    v
}

fn decode_edge(v: &[u8]) -> EdgeRec {
    EdgeRec {
        changed: i64::from_be_bytes(v[0..8].try_into().expect("8 bytes")),
        key: u32::from_be_bytes(v[8..12].try_into().expect("4 bytes")),
        vis: u32::from_be_bytes(v[12..16].try_into().expect("4 bytes")),
    }
}

fn be32(v: &[u8]) -> u32 {
    u32::from_be_bytes(v[..4].try_into().expect("4 bytes"))
}

fn encode_claim(id: &str, r: &ClaimRec) -> Vec<u8> {
    let mut v = Vec::with_capacity(30 + id.len());
    v.extend_from_slice(&r.ts.to_be_bytes());
    v.extend_from_slice(&r.based.to_be_bytes());
    v.extend_from_slice(&r.key.to_be_bytes());
    v.extend_from_slice(&r.agent.to_be_bytes());
    v.extend_from_slice(&r.conf.to_be_bytes());
    v.push(r.status);
    v.push(u8::from(r.asserts));
    v.extend_from_slice(id.as_bytes());
    v
}

fn decode_claim(v: &[u8]) -> (String, ClaimRec) {
    let q = |a: usize| i64::from_be_bytes(v[a..a + 8].try_into().expect("8 bytes"));
    let w = |a: usize| u32::from_be_bytes(v[a..a + 4].try_into().expect("4 bytes"));
    let rec = ClaimRec {
        ts: q(0),
        based: q(8),
        key: w(16),
        agent: w(20),
        conf: w(24),
        status: v[28],
        asserts: v[29] != 0,
    };
    let id = String::from_utf8(v[30..].to_vec()).expect("a UTF-8 claim id");
    (id, rec)
}

/// One claim: what ``ClaimState`` holds, with strings and confidences as indexes (its
/// conflict, rare, is in ``Store.conflict_of``).
#[derive(Clone, Copy)]
pub struct ClaimRec {
    pub ts: i64,
    based: i64,     // NO_BASED: none
    pub key: u32,   // edge key (Store.keys)
    pub agent: u32, // Store.agents
    conf: u32,      // Store.confs
    pub status: u8,
    pub asserts: bool,
}

/// One edge: what ``EdgeState`` holds; ``vis`` is a claim index, NONE (empty) or LIST | i
/// (side list i). Withheld claims (rare) are in ``Store.withheld_of``.
#[derive(Clone, Copy)]
pub struct EdgeRec {
    pub changed: i64,
    pub key: u32,
    vis: u32,
}

#[pyclass(module = "claimgraph.native._rust")]
pub struct Store {
    pub ids: Interner, // claim ids; the index is the claim's index
    claims: Seg<ClaimRec>,
    pub keys: Interner,    // edge keys of claims and edges
    edge_of_key: Seg<u32>, // key index → edge index, NONE: no edge row
    edges: Seg<EdgeRec>,
    pub agents: Interner,
    pub conflict_ids: Interner,
    confs: Vec<f64>,
    conf_index: HashMap<u64, u32>,
    conflict_of: HashMap<u32, u32>, // claim → its conflict (withheld claims)
    withheld_of: HashMap<u32, Vec<u32>>, // edge → its withheld claims
    lists: Vec<Vec<u32>>,
    free: Vec<u32>,
    spill: Option<Spill>,
}

impl Store {
    pub fn claim_index(&self, id: &str) -> Option<u32> {
        if let Some(i) = self.ids.find(id) {
            return Some(i);
        }
        let sp = self.spill.as_ref()?;
        if let Some(&i) = sp.cold_ids.lock().expect("the cold cache").get(id) {
            return Some(i);
        }
        let mut key = Vec::with_capacity(1 + id.len());
        key.push(b'i');
        key.extend_from_slice(id.as_bytes());
        let v = sp.get(&key)?;
        let i = u32::from_be_bytes(v.as_slice().try_into().expect("a 4-byte claim index"));
        self.fault(i);
        Some(i)
    }

    /// A spilled claim, read back into the cold cache (the cache is written back and emptied
    /// when it is full).
    fn fault(&self, i: u32) -> ClaimRec {
        let sp = self
            .spill
            .as_ref()
            .expect("a claim outside memory without a spill");
        if let Some(c) = sp.cold.lock().expect("the cold cache").get(&i) {
            return c.rec;
        }
        if sp.cold.lock().expect("the cold cache").len() >= COLD_MAX {
            sp.write_back();
        }
        let v = sp
            .get(&claim_row_key(i))
            .unwrap_or_else(|| panic!("claimgraph state spill: claim {i} is missing"));
        let (id, rec) = decode_claim(&v);
        sp.cold_ids
            .lock()
            .expect("the cold cache")
            .insert(id.clone(), i);
        sp.cold.lock().expect("the cold cache").insert(
            i,
            Cold {
                id,
                rec,
                dirty: false,
            },
        );
        rec
    }

    /// Change a claim in memory, or in the cold cache (written back later).
    fn update(&mut self, i: u32, f: impl FnOnce(&mut ClaimRec)) {
        if self.claims.has(i as usize) {
            f(self.claims.at_mut(i as usize));
            return;
        }
        self.fault(i);
        let sp = self.spill.as_ref().expect("a spill");
        let mut cold = sp.cold.lock().expect("the cold cache");
        let c = cold.get_mut(&i).expect("faulted in");
        f(&mut c.rec);
        c.dirty = true;
    }

    pub fn set_status(&mut self, i: u32, status: u8) {
        self.update(i, |r| r.status = status);
    }

    /// Move the oldest chunks of claims, edge keys and edges to the spill while more chunks
    /// of a table than the spill keeps are in memory (the chunk being filled always stays).
    fn maybe_spill(&mut self) -> PyResult<()> {
        if self.spill.is_none() {
            return Ok(());
        }
        let bits = self.claims.bits;
        let size = 1usize << bits;
        let chunks = |n: usize| (n + size - 1) >> bits;
        loop {
            let sp = self.spill.as_ref().expect("a spill");
            let mut items: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
            if chunks(self.claims.len()) - sp.spilled > sp.keep {
                let c = sp.spilled;
                for i in (c << bits)..((c + 1) << bits) {
                    let i = i as u32;
                    let id = self.ids.text(i);
                    items.push((
                        claim_row_key(i),
                        encode_claim(&id, self.claims.at(i as usize)),
                    ));
                    items.push((text_key(b'i', &id), i.to_be_bytes().to_vec()));
                }
                sp.put(items)?;
                self.ids.drop_chunk(c);
                self.claims.drop_chunk(c);
                self.spill.as_mut().expect("a spill").spilled += 1;
            } else if chunks(self.keys.len()) - sp.kspilled > sp.keep {
                let c = sp.kspilled;
                for k in (c << bits)..((c + 1) << bits) {
                    let k = k as u32;
                    let key = self.keys.get(k);
                    let e = *self.edge_of_key.at(k as usize);
                    items.push((row_key(b'K', k), encode_key(key, e)));
                    items.push((text_key(b'k', key), k.to_be_bytes().to_vec()));
                }
                sp.put(items)?;
                self.keys.drop_chunk(c);
                self.edge_of_key.drop_chunk(c);
                self.spill.as_mut().expect("a spill").kspilled += 1;
            } else if chunks(self.edges.len()) - sp.espilled > sp.keep {
                let c = sp.espilled;
                for e in (c << bits)..((c + 1) << bits) {
                    let e = e as u32;
                    items.push((row_key(b'E', e), encode_edge(self.edges.at(e as usize))));
                }
                sp.put(items)?;
                self.edges.drop_chunk(c);
                self.spill.as_mut().expect("a spill").espilled += 1;
            } else {
                return Ok(());
            }
        }
    }

    /// The index of an edge key: in memory, in the cold cache, or in the spill.
    fn key_index(&self, key: &str) -> Option<u32> {
        if let Some(k) = self.keys.find(key) {
            return Some(k);
        }
        let sp = self.spill.as_ref()?;
        if let Some(&k) = sp.cold_key_ids.lock().expect("the cold cache").get(key) {
            return Some(k);
        }
        let k = be32(&sp.get(&text_key(b'k', key))?);
        self.fault_key(k);
        Some(k)
    }

    fn fault_key(&self, k: u32) {
        let sp = self
            .spill
            .as_ref()
            .expect("an edge key outside memory without a spill");
        if sp
            .cold_keys
            .lock()
            .expect("the cold cache")
            .contains_key(&k)
        {
            return;
        }
        if sp.cold_keys.lock().expect("the cold cache").len() >= COLD_MAX {
            sp.write_back();
        }
        let v = sp
            .get(&row_key(b'K', k))
            .unwrap_or_else(|| panic!("claimgraph state spill: edge key {k} is missing"));
        let key = String::from_utf8(v[4..].to_vec()).expect("a UTF-8 edge key");
        sp.cold_key_ids
            .lock()
            .expect("the cold cache")
            .insert(key.clone(), k);
        sp.cold_keys.lock().expect("the cold cache").insert(
            k,
            ColdKey {
                key,
                edge: be32(&v),
                dirty: false,
            },
        );
    }

    /// The text of edge key ``k``.
    pub fn key_text(&self, k: u32) -> Cow<'_, str> {
        if self.keys.has(k) {
            return Cow::Borrowed(self.keys.get(k));
        }
        self.fault_key(k);
        let sp = self.spill.as_ref().expect("a spill");
        let key = sp.cold_keys.lock().expect("the cold cache")[&k].key.clone();
        Cow::Owned(key)
    }

    /// The edge row of edge key ``k`` (NONE: none).
    fn edge_of(&self, k: u32) -> u32 {
        if self.edge_of_key.has(k as usize) {
            return *self.edge_of_key.at(k as usize);
        }
        self.fault_key(k);
        let sp = self.spill.as_ref().expect("a spill");
        let e = sp.cold_keys.lock().expect("the cold cache")[&k].edge;
        e
    }

    fn set_edge_of(&mut self, k: u32, e: u32) {
        if self.edge_of_key.has(k as usize) {
            *self.edge_of_key.at_mut(k as usize) = e;
            return;
        }
        self.fault_key(k);
        let sp = self.spill.as_ref().expect("a spill");
        let mut cold = sp.cold_keys.lock().expect("the cold cache");
        let c = cold.get_mut(&k).expect("faulted in");
        c.edge = e;
        c.dirty = true;
    }

    fn fault_edge(&self, e: u32) -> EdgeRec {
        let sp = self
            .spill
            .as_ref()
            .expect("an edge outside memory without a spill");
        if let Some((r, _)) = sp.cold_edges.lock().expect("the cold cache").get(&e) {
            return *r;
        }
        if sp.cold_edges.lock().expect("the cold cache").len() >= COLD_MAX {
            sp.write_back();
        }
        let v = sp
            .get(&row_key(b'E', e))
            .unwrap_or_else(|| panic!("claimgraph state spill: edge {e} is missing"));
        let r = decode_edge(&v);
        sp.cold_edges
            .lock()
            .expect("the cold cache")
            .insert(e, (r, false));
        r
    }

    fn update_edge(&mut self, e: u32, f: impl FnOnce(&mut EdgeRec)) {
        if self.edges.has(e as usize) {
            f(self.edges.at_mut(e as usize));
            return;
        }
        self.fault_edge(e);
        let sp = self.spill.as_ref().expect("a spill");
        let mut cold = sp.cold_edges.lock().expect("the cold cache");
        let c = cold.get_mut(&e).expect("faulted in");
        f(&mut c.0);
        c.1 = true;
    }

    pub fn n_claims(&self) -> usize {
        self.claims.len()
    }

    pub fn n_edges(&self) -> usize {
        self.edges.len()
    }

    pub fn claim(&self, i: u32) -> ClaimRec {
        if self.claims.has(i as usize) {
            *self.claims.at(i as usize)
        } else {
            self.fault(i)
        }
    }

    pub fn claim_id(&self, i: u32) -> Cow<'_, str> {
        if self.ids.has(i) {
            return self.ids.text(i);
        }
        self.fault(i);
        let sp = self.spill.as_ref().expect("a spill");
        let id = sp
            .cold
            .lock()
            .expect("the cold cache")
            .get(&i)
            .expect("faulted in")
            .id
            .clone();
        Cow::Owned(id)
    }

    pub fn claim_key(&self, i: u32) -> Cow<'_, str> {
        self.key_text(self.claim(i).key)
    }

    pub fn claim_agent(&self, i: u32) -> &str {
        self.agents.get(self.claim(i).agent)
    }

    pub fn claim_conf(&self, i: u32) -> f64 {
        self.confs[self.claim(i).conf as usize]
    }

    pub fn claim_based(&self, i: u32) -> Option<i64> {
        let b = self.claim(i).based;
        if b == NO_BASED {
            None
        } else {
            Some(b)
        }
    }

    pub fn claim_conflict(&self, i: u32) -> Option<&str> {
        self.conflict_of.get(&i).map(|&c| self.conflict_ids.get(c))
    }

    pub fn set_conflict(&mut self, i: u32, conflict: Option<&str>) -> PyResult<()> {
        match conflict {
            None => {
                self.conflict_of.remove(&i);
            }
            Some(s) => {
                let c = self.conflict_ids.intern(s)?;
                self.conflict_of.insert(i, c);
            }
        }
        Ok(())
    }

    /// The edge row of an edge key, if it has one.
    pub fn edge_index(&self, key: &str) -> Option<u32> {
        let k = self.key_index(key)?;
        let e = self.edge_of(k);
        if e == NONE {
            None
        } else {
            Some(e)
        }
    }

    pub fn edge(&self, e: u32) -> EdgeRec {
        if self.edges.has(e as usize) {
            *self.edges.at(e as usize)
        } else {
            self.fault_edge(e)
        }
    }

    pub fn edge_key(&self, e: u32) -> Cow<'_, str> {
        self.key_text(self.edge(e).key)
    }

    pub fn set_changed(&mut self, e: u32, v: i64) {
        self.update_edge(e, |r| r.changed = v);
    }

    pub fn visible(&self, e: u32) -> Vec<u32> {
        let v = self.edge(e).vis;
        if v == NONE {
            Vec::new()
        } else if v & LIST != 0 {
            self.lists[(v & !LIST) as usize].clone()
        } else {
            vec![v]
        }
    }

    pub fn withheld(&self, e: u32) -> Vec<u32> {
        self.withheld_of.get(&e).cloned().unwrap_or_default()
    }

    /// The first visible claim of an edge (no allocation).
    pub fn first_visible(&self, e: u32) -> Option<u32> {
        let v = self.edge(e).vis;
        if v == NONE {
            None
        } else if v & LIST != 0 {
            self.lists[(v & !LIST) as usize].first().copied()
        } else {
            Some(v)
        }
    }

    pub fn first_withheld(&self, e: u32) -> Option<u32> {
        self.withheld_of.get(&e).and_then(|w| w.first().copied())
    }

    pub fn n_withheld(&self, e: u32) -> usize {
        self.withheld_of.get(&e).map_or(0, Vec::len)
    }

    pub fn set_visible(&mut self, e: u32, ids: Vec<u32>) {
        let old = self.edge(e).vis;
        if old != NONE && old & LIST != 0 {
            let slot = (old & !LIST) as usize;
            if ids.len() > 1 {
                self.lists[slot] = ids;
                return;
            }
            self.lists[slot] = Vec::new();
            self.free.push(slot as u32);
        }
        let v = match ids.len() {
            0 => NONE,
            1 => ids[0],
            _ => {
                let slot = match self.free.pop() {
                    Some(s) => {
                        self.lists[s as usize] = ids;
                        s
                    }
                    None => {
                        self.lists.push(ids);
                        (self.lists.len() - 1) as u32
                    }
                };
                LIST | slot
            }
        };
        self.update_edge(e, |r| r.vis = v);
    }

    pub fn set_withheld(&mut self, e: u32, ids: Vec<u32>) {
        if ids.is_empty() {
            self.withheld_of.remove(&e);
        } else {
            self.withheld_of.insert(e, ids);
        }
    }

    /// The edge row of ``key``, added (empty, changed -1) if it has none.
    pub fn ensure_edge(&mut self, key: &str) -> PyResult<u32> {
        let k = self.intern_key(key)?;
        let e = self.edge_of(k);
        if e != NONE {
            return Ok(e);
        }
        if self.edges.len() >= MAX_ITEMS {
            return Err(full());
        }
        let e = self.edges.len() as u32;
        self.edges.push(EdgeRec {
            changed: -1,
            key: k,
            vis: NONE,
        });
        self.set_edge_of(k, e);
        self.maybe_spill()?;
        Ok(e)
    }

    fn intern_key(&mut self, key: &str) -> PyResult<u32> {
        if let Some(k) = self.key_index(key) {
            return Ok(k);
        }
        let k = self.keys.push(key)?;
        self.edge_of_key.push(NONE);
        Ok(k)
    }

    fn conf_index(&mut self, conf: f64) -> u32 {
        let bits = conf.to_bits();
        if let Some(&i) = self.conf_index.get(&bits) {
            return i;
        }
        let i = self.confs.len() as u32;
        self.confs.push(conf);
        self.conf_index.insert(bits, i);
        i
    }

    /// Add a claim, or overwrite it in place (a dict keeps a key's position). ``new``: the
    /// caller has just looked the id up and not found it (the native fold), so it is not looked
    /// up again (with a spill, that lookup is a RocksDB read).
    #[allow(clippy::too_many_arguments)]
    pub fn put_claim(
        &mut self,
        new: bool,
        id: &str,
        key: &str,
        agent: &str,
        asserts: bool,
        ts: i64,
        status: u8,
        conflict: Option<&str>,
        conf: f64,
        based: Option<i64>,
    ) -> PyResult<u32> {
        if based == Some(NO_BASED) {
            return Err(PyValueError::new_err("based_on_version out of range"));
        }
        let rec = ClaimRec {
            ts,
            based: based.unwrap_or(NO_BASED),
            key: self.intern_key(key)?,
            agent: self.agents.intern(agent)?,
            conf: self.conf_index(conf),
            status,
            asserts,
        };
        let i = match if new { None } else { self.claim_index(id) } {
            Some(i) => {
                self.update(i, |r| *r = rec);
                i
            }
            None => {
                let i = self.ids.push(id)?;
                self.claims.push(rec);
                i
            }
        };
        self.set_conflict(i, conflict)?;
        self.maybe_spill()?;
        Ok(i)
    }

    fn ids_of(&self, ids: &Bound<'_, PyAny>) -> PyResult<Vec<u32>> {
        let mut out = Vec::new();
        for x in ids.try_iter()? {
            let x = x?;
            let s = x.downcast::<PyString>()?.to_str()?;
            match self.claim_index(s) {
                Some(i) => out.push(i),
                None => return Err(PyKeyError::new_err(s.to_owned())),
            }
        }
        Ok(out)
    }

    fn ids_tuple<'py>(&self, py: Python<'py>, items: &[u32]) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(
            py,
            items.iter().map(|&i| PyString::new(py, &self.claim_id(i))),
        )
    }

    pub fn heap_bytes(&self) -> usize {
        let map = |n: usize, each: usize| n * (each + 1) * 8 / 7;
        self.ids.heap_bytes()
            + self.keys.heap_bytes()
            + self.agents.heap_bytes()
            + self.conflict_ids.heap_bytes()
            + self.claims.heap_bytes()
            + self.edges.heap_bytes()
            + self.edge_of_key.heap_bytes()
            + self.confs.capacity() * 8
            + map(self.conf_index.capacity(), 12)
            + map(self.conflict_of.capacity(), 8)
            + map(self.withheld_of.capacity(), 28)
            + self
                .lists
                .iter()
                .map(|l| l.capacity() * 4 + 24)
                .sum::<usize>()
    }
}

/// The native tables of a ``GraphState`` (a decline when it keeps Python dicts).
pub fn store_of<'py>(state: &Bound<'py, PyAny>) -> Result<Bound<'py, Store>, Decline> {
    let py = state.py();
    Ok(state
        .getattr(intern!(py, "claims"))?
        .downcast_into::<ClaimMap>()
        .map_err(|_| Decline("tables"))?
        .get()
        .store
        .bind(py)
        .clone())
}

fn key_str<'a>(k: &'a Bound<'_, PyAny>) -> PyResult<&'a str> {
    k.downcast::<PyString>()
        .map_err(|_| PyTypeError::new_err("keys are str"))?
        .to_str()
}

#[pymethods]
impl Store {
    /// ``Store()``: everything in memory. ``Store(spill=db, keep=n, chunk_bits=b)``: claims
    /// in chunks of ``2**b``, at most ``n`` chunks in memory, the older ones in ``db``.
    #[new]
    #[pyo3(signature = (spill=None, keep=1, chunk_bits=CHUNK_BITS))]
    fn new(spill: Option<Py<PyAny>>, keep: usize, chunk_bits: u32) -> PyResult<Self> {
        if !(1..=24).contains(&chunk_bits) || keep == 0 {
            return Err(PyValueError::new_err(
                "chunk_bits must be 1..24 and keep at least 1",
            ));
        }
        Ok(Store {
            spill: spill.map(|db| Spill {
                db,
                keep,
                spilled: 0,
                kspilled: 0,
                espilled: 0,
                cold: Mutex::new(HashMap::new()),
                cold_ids: Mutex::new(HashMap::new()),
                cold_keys: Mutex::new(HashMap::new()),
                cold_key_ids: Mutex::new(HashMap::new()),
                cold_edges: Mutex::new(HashMap::new()),
            }),
            ids: Interner::with_uuids(chunk_bits),
            claims: Seg::new(chunk_bits),
            keys: Interner::new(chunk_bits),
            edge_of_key: Seg::new(chunk_bits),
            edges: Seg::new(chunk_bits),
            agents: Interner::new(CHUNK_BITS),
            conflict_ids: Interner::new(CHUNK_BITS),
            confs: Vec::new(),
            conf_index: HashMap::new(),
            conflict_of: HashMap::new(),
            withheld_of: HashMap::new(),
            lists: Vec::new(),
            free: Vec::new(),
        })
    }

    /// Edges in the spill (not in memory).
    fn spilled_edges(&self) -> usize {
        self.spill
            .as_ref()
            .map_or(0, |sp| sp.espilled << self.edges.bits)
    }

    /// Claims in the spill (not in memory).
    fn spilled(&self) -> usize {
        self.spill
            .as_ref()
            .map_or(0, |sp| sp.spilled << self.claims.bits)
    }

    /// The claims table as a mapping: claim id → ``ClaimRef``.
    fn claims(slf: Py<Self>) -> ClaimMap {
        ClaimMap { store: slf }
    }

    /// The edges table as a mapping: edge key → ``EdgeRef``.
    fn edges(slf: Py<Self>) -> EdgeMap {
        EdgeMap { store: slf }
    }

    /// Bytes the tables hold on the native heap (capacity, not length).
    fn memory(&self) -> usize {
        self.heap_bytes()
    }
}

#[pyclass(frozen, mapping, module = "claimgraph.native._rust")]
pub struct ClaimMap {
    #[pyo3(get)]
    pub store: Py<Store>,
}

#[pyclass(frozen, module = "claimgraph.native._rust")]
pub struct ClaimRef {
    store: Py<Store>,
    i: u32,
}

#[pyclass(frozen, mapping, module = "claimgraph.native._rust")]
pub struct EdgeMap {
    store: Py<Store>,
}

#[pyclass(frozen, module = "claimgraph.native._rust")]
pub struct EdgeRef {
    store: Py<Store>,
    i: u32,
}

/// Iterates a table in insertion order: what = 0 keys, 1 items, 2 values; edges: +3.
#[pyclass(module = "claimgraph.native._rust")]
pub struct TableIter {
    store: Py<Store>,
    at: u32,
    what: u8,
}

#[pymethods]
impl TableIter {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__(&mut self, py: Python<'_>) -> PyResult<Option<PyObject>> {
        let st = self.store.bind(py).borrow();
        let i = self.at;
        let edges = self.what >= 3;
        let n = if edges {
            st.edges.len()
        } else {
            st.claims.len()
        };
        if i as usize >= n {
            return Ok(None);
        }
        self.at += 1;
        let key = if edges {
            st.edge_key(i)
        } else {
            st.claim_id(i)
        };
        let key = PyString::new(py, &key).into_any();
        let value = || -> PyObject {
            let store = self.store.clone_ref(py);
            if edges {
                EdgeRef { store, i }
                    .into_pyobject(py)
                    .unwrap()
                    .into_any()
                    .unbind()
            } else {
                ClaimRef { store, i }
                    .into_pyobject(py)
                    .unwrap()
                    .into_any()
                    .unbind()
            }
        };
        Ok(Some(match self.what % 3 {
            0 => key.unbind(),
            1 => PyTuple::new(py, [key.unbind(), value()])?
                .into_any()
                .unbind(),
            _ => value(),
        }))
    }
}

fn iter(store: &Py<Store>, py: Python<'_>, what: u8) -> TableIter {
    TableIter {
        store: store.clone_ref(py),
        at: 0,
        what,
    }
}

impl ClaimMap {
    fn find(&self, py: Python<'_>, k: &Bound<'_, PyAny>) -> PyResult<Option<ClaimRef>> {
        let s = match k.downcast::<PyString>() {
            Ok(s) => s,
            Err(_) => return Ok(None),
        };
        let found = self.store.bind(py).borrow().claim_index(s.to_str()?);
        Ok(found.map(|i| ClaimRef {
            store: self.store.clone_ref(py),
            i,
        }))
    }
}

#[pymethods]
impl ClaimMap {
    fn __len__(&self, py: Python<'_>) -> usize {
        self.store.bind(py).borrow().n_claims()
    }

    fn __contains__(&self, py: Python<'_>, k: &Bound<'_, PyAny>) -> PyResult<bool> {
        let s = match k.downcast::<PyString>() {
            Ok(s) => s,
            Err(_) => return Ok(false),
        };
        Ok(self
            .store
            .bind(py)
            .borrow()
            .claim_index(s.to_str()?)
            .is_some())
    }

    fn __getitem__(&self, py: Python<'_>, k: &Bound<'_, PyAny>) -> PyResult<ClaimRef> {
        match self.find(py, k)? {
            Some(r) => Ok(r),
            None => Err(PyKeyError::new_err(k.clone().unbind())),
        }
    }

    #[pyo3(signature = (k, default=None))]
    fn get(
        &self,
        py: Python<'_>,
        k: &Bound<'_, PyAny>,
        default: Option<PyObject>,
    ) -> PyResult<PyObject> {
        Ok(match self.find(py, k)? {
            Some(r) => r.into_pyobject(py)?.into_any().unbind(),
            None => default.unwrap_or_else(|| py.None()),
        })
    }

    /// ``claims[id] = ClaimState(...)``: copies the fields in (the table keeps no object).
    fn __setitem__(
        &self,
        py: Python<'_>,
        k: &Bound<'_, PyAny>,
        v: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let id = key_str(k)?;
        let edge: String = v.getattr(intern!(py, "edge"))?.extract()?;
        let agent: String = v.getattr(intern!(py, "agent"))?.extract()?;
        let asserts: bool = v.getattr(intern!(py, "asserts"))?.extract()?;
        let ts: i64 = v.getattr(intern!(py, "ts"))?.extract()?;
        let status: u8 = v.getattr(intern!(py, "status"))?.extract()?;
        let conflict: Option<String> = v.getattr(intern!(py, "conflict"))?.extract()?;
        let conf: f64 = v.getattr(intern!(py, "conf"))?.extract()?;
        let based: Option<i64> = v.getattr(intern!(py, "based"))?.extract()?;
        self.store.bind(py).borrow_mut().put_claim(
            false,
            id,
            &edge,
            &agent,
            asserts,
            ts,
            status,
            conflict.as_deref(),
            conf,
            based,
        )?;
        Ok(())
    }

    fn __iter__(&self, py: Python<'_>) -> TableIter {
        iter(&self.store, py, 0)
    }

    fn keys(&self, py: Python<'_>) -> TableIter {
        iter(&self.store, py, 0)
    }

    fn items(&self, py: Python<'_>) -> TableIter {
        iter(&self.store, py, 1)
    }

    fn values(&self, py: Python<'_>) -> TableIter {
        iter(&self.store, py, 2)
    }
}

impl EdgeMap {
    fn find(&self, py: Python<'_>, k: &Bound<'_, PyAny>) -> PyResult<Option<EdgeRef>> {
        let s = match k.downcast::<PyString>() {
            Ok(s) => s,
            Err(_) => return Ok(None),
        };
        let found = self.store.bind(py).borrow().edge_index(s.to_str()?);
        Ok(found.map(|i| EdgeRef {
            store: self.store.clone_ref(py),
            i,
        }))
    }
}

#[pymethods]
impl EdgeMap {
    fn __len__(&self, py: Python<'_>) -> usize {
        self.store.bind(py).borrow().n_edges()
    }

    fn __contains__(&self, py: Python<'_>, k: &Bound<'_, PyAny>) -> PyResult<bool> {
        let s = match k.downcast::<PyString>() {
            Ok(s) => s,
            Err(_) => return Ok(false),
        };
        Ok(self
            .store
            .bind(py)
            .borrow()
            .edge_index(s.to_str()?)
            .is_some())
    }

    fn __getitem__(&self, py: Python<'_>, k: &Bound<'_, PyAny>) -> PyResult<EdgeRef> {
        match self.find(py, k)? {
            Some(r) => Ok(r),
            None => Err(PyKeyError::new_err(k.clone().unbind())),
        }
    }

    #[pyo3(signature = (k, default=None))]
    fn get(
        &self,
        py: Python<'_>,
        k: &Bound<'_, PyAny>,
        default: Option<PyObject>,
    ) -> PyResult<PyObject> {
        Ok(match self.find(py, k)? {
            Some(r) => r.into_pyobject(py)?.into_any().unbind(),
            None => default.unwrap_or_else(|| py.None()),
        })
    }

    /// ``edges[key] = EdgeState()``: copies the fields in (the table keeps no object).
    fn __setitem__(
        &self,
        py: Python<'_>,
        k: &Bound<'_, PyAny>,
        v: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let key = key_str(k)?;
        let visible = v.getattr(intern!(py, "visible"))?;
        let withheld = v.getattr(intern!(py, "withheld"))?;
        let changed: i64 = v.getattr(intern!(py, "changed"))?.extract()?;
        let mut st = self.store.bind(py).borrow_mut();
        let vis = st.ids_of(&visible)?;
        let wh = st.ids_of(&withheld)?;
        let e = st.ensure_edge(key)?;
        st.set_visible(e, vis);
        st.set_withheld(e, wh);
        st.set_changed(e, changed);
        Ok(())
    }

    fn __iter__(&self, py: Python<'_>) -> TableIter {
        iter(&self.store, py, 3)
    }

    fn keys(&self, py: Python<'_>) -> TableIter {
        iter(&self.store, py, 3)
    }

    fn items(&self, py: Python<'_>) -> TableIter {
        iter(&self.store, py, 4)
    }

    fn values(&self, py: Python<'_>) -> TableIter {
        iter(&self.store, py, 5)
    }
}

#[pymethods]
impl ClaimRef {
    #[getter]
    fn edge<'py>(&self, py: Python<'py>) -> Bound<'py, PyString> {
        PyString::new(py, &self.store.bind(py).borrow().claim_key(self.i))
    }

    #[getter]
    fn agent<'py>(&self, py: Python<'py>) -> Bound<'py, PyString> {
        PyString::new(py, self.store.bind(py).borrow().claim_agent(self.i))
    }

    #[getter]
    fn asserts(&self, py: Python<'_>) -> bool {
        self.store.bind(py).borrow().claim(self.i).asserts
    }

    #[getter]
    fn ts(&self, py: Python<'_>) -> i64 {
        self.store.bind(py).borrow().claim(self.i).ts
    }

    #[getter]
    fn status(&self, py: Python<'_>) -> i64 {
        i64::from(self.store.bind(py).borrow().claim(self.i).status)
    }

    #[setter]
    fn set_status(&self, py: Python<'_>, v: u8) {
        self.store.bind(py).borrow_mut().set_status(self.i, v);
    }

    #[getter]
    fn conflict<'py>(&self, py: Python<'py>) -> Option<Bound<'py, PyString>> {
        let st = self.store.bind(py).borrow();
        st.claim_conflict(self.i).map(|s| PyString::new(py, s))
    }

    #[setter]
    fn set_conflict(&self, py: Python<'_>, v: Option<&str>) -> PyResult<()> {
        self.store.bind(py).borrow_mut().set_conflict(self.i, v)
    }

    #[getter]
    fn conf(&self, py: Python<'_>) -> f64 {
        self.store.bind(py).borrow().claim_conf(self.i)
    }

    #[getter]
    fn based(&self, py: Python<'_>) -> Option<i64> {
        self.store.bind(py).borrow().claim_based(self.i)
    }
}

#[pymethods]
impl EdgeRef {
    #[getter]
    fn visible<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        let st = self.store.bind(py).borrow();
        st.ids_tuple(py, &st.visible(self.i))
    }

    #[setter]
    fn set_visible(&self, py: Python<'_>, v: &Bound<'_, PyAny>) -> PyResult<()> {
        let mut st = self.store.bind(py).borrow_mut();
        let ids = st.ids_of(v)?;
        st.set_visible(self.i, ids);
        Ok(())
    }

    #[getter]
    fn withheld<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        let st = self.store.bind(py).borrow();
        st.ids_tuple(py, &st.withheld(self.i))
    }

    #[setter]
    fn set_withheld(&self, py: Python<'_>, v: &Bound<'_, PyAny>) -> PyResult<()> {
        let mut st = self.store.bind(py).borrow_mut();
        let ids = st.ids_of(v)?;
        st.set_withheld(self.i, ids);
        Ok(())
    }

    #[getter]
    fn changed(&self, py: Python<'_>) -> i64 {
        self.store.bind(py).borrow().edge(self.i).changed
    }

    #[setter]
    fn set_changed(&self, py: Python<'_>, v: i64) {
        self.store.bind(py).borrow_mut().set_changed(self.i, v);
    }
}
