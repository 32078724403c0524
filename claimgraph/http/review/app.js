// claimgraph review page: plain JavaScript over the HTTP API, no build step, no inline code
// (the page's CSP allows scripts and styles from this server only).
"use strict";

const $ = (id) => document.getElementById(id);
let token = sessionStorage.getItem("claimgraph-token") || "";
let head = -1;
let pinned = null; // the version the slider shows; null follows head
const QUEUE_SIZE = 10; // conflicts per page
const EDGES_SIZE = 25; // edges per page
const CLAIMS_SHOWN = 8; // claims drawn per conflict
const ESCALATIONS_SHOWN = 10;
// a pager: the cursor that starts each page seen so far, the page shown, the search
const queue = { cursors: [null], page: 0, q: "" };
const edges = { cursors: [null], page: 0, q: "" };
let nbNode = null; // the node whose neighbourhood is drawn

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") e.className = v;
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v);
  }
  for (const c of children) e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return e;
}

function say(text, error) {
  $("message").textContent = text;
  $("message").className = error ? "error" : "";
}

function notice(id, text) {
  $(id).textContent = text || "";
  $(id).hidden = !text;
}

async function request(path, options) {
  const resp = await fetch(path, {
    ...(options || {}),
    headers: { "Authorization": "Bearer " + token, "Content-Type": "application/json" },
  });
  if (!resp.ok) {
    const body = await resp.json().catch(() => ({}));
    const err = new Error(`${body.reason || resp.status}: ${body.detail || resp.statusText}`);
    err.status = resp.status;
    err.body = body;
    throw err;
  }
  return resp;
}

async function api(path, options) {
  return (await request(path, options)).json();
}

function claimCard(conflict, info) {
  const dl = el("dl", {});
  const row = (k, v) => dl.append(el("dt", {}, k), el("dd", {}, v));
  row("owner", `${info.agent}${info.task ? " / " + info.task : ""}`);
  row("edge", `${info.subject_type}:${info.subject_id} → ${info.object_type}:${info.object_id}`);
  row("confidence", info.confidence);
  row("read version", info.based_on_version === null ? "—" : "v" + info.based_on_version);
  row("evidence", (info.evidence || []).join(", ") || "—");
  row("reasoning", info.reasoning || "—");
  row("asserted", new Date(info.asserted_at).toISOString());
  row("status", info.status);
  const pick = el("button", {
    "data-testid": "pick-" + info.claim_id,
    onclick: () => resolve(conflict.conflict_id, info.claim_id),
  }, "Pick this claim");
  return el("div", { class: "claim", "data-testid": "claim-" + info.claim_id },
    el("div", {}, el("span", { class: info.polarity }, info.polarity.toUpperCase()),
      " claim ", el("code", {}, info.claim_id)),
    dl, pick);
}

async function resolve(conflictId, winner) {
  const rationale = prompt("Rationale for the log (optional):", "") || "";
  try {
    const r = await api("/v1/commands/resolve", {
      method: "POST",
      body: JSON.stringify({ conflict_id: conflictId, winner: winner, rationale: rationale }),
    });
    say(`resolved ${conflictId} at v${r.version}: ${r.decision.detail}`);
    pinned = null;
    await refresh();
  } catch (e) {
    say(`could not resolve ${conflictId}: ${e.message}`, true);
  }
}

// One page of a paged list: fetch it, remember where the next page starts, label the pager,
// and say when the list goes on (or when a search stopped before the end).
async function fetchPage(pager, path, params, what, prefix) {
  const q = new URLSearchParams(params);
  const cursor = pager.cursors[pager.page];
  if (cursor) q.set("cursor", cursor);
  if (pager.q) q.set("q", pager.q);
  const r = await api(path + "?" + q);
  const items = r[what];
  if (r.next_cursor) pager.cursors[pager.page + 1] = r.next_cursor;
  pager.cursors.length = pager.page + (r.next_cursor ? 2 : 1);
  const size = Number(params.limit);
  const first = pager.page * size + 1;
  const last = pager.page * size + items.length;
  $(prefix + "-page").textContent = items.length
    ? `page ${pager.page + 1} · ${what} ${first}–${last}` : `page ${pager.page + 1}`;
  $(prefix + "-prev").disabled = pager.page === 0;
  $(prefix + "-next").disabled = !r.truncated;
  const matching = pager.q ? ` matching “${pager.q}”` : "";
  if (r.truncated && items.length) {
    notice(prefix + "-truncated",
      `Truncated: showing ${what} ${first}–${last}${matching}; more follow — Next ›`);
  } else if (r.truncated) {
    notice(prefix + "-truncated",
      `No ${what}${matching} among the ${r.scanned} searched so far; Next › searches further.`);
  } else {
    notice(prefix + "-truncated", "");
  }
  return r;
}

async function loadQueue() {
  const r = await fetchPage(queue, "/v1/quarantine", { limit: QUEUE_SIZE }, "conflicts", "queue");
  if (!r.conflicts.length && queue.page > 0 && !r.truncated) {
    queue.page -= 1; // the last item of this page was resolved: show the page before
    return loadQueue();
  }
  const box = $("conflicts");
  box.replaceChildren();
  if (!r.conflicts.length && !r.truncated) {
    box.append(el("p", { "data-testid": "queue-empty" },
      queue.q ? `No open conflict matches “${queue.q}”.` : "Nothing is quarantined."));
  }
  for (const c of r.conflicts) {
    const claims = el("div", { class: "claims" });
    const details = c.claim_details.filter((x) => x);
    for (const info of details.slice(0, CLAIMS_SHOWN)) claims.append(claimCard(c, info));
    const more = details.length > CLAIMS_SHOWN
      ? el("p", { class: "notice", "data-testid": "claims-truncated-" + c.conflict_id },
        `Truncated: ${CLAIMS_SHOWN} of ${details.length} claims shown.`) : "";
    box.append(el("div", { class: "conflict", "data-testid": "conflict-" + c.conflict_id },
      el("h3", {}, `${c.conflict_id} · ${c.edge_type} · opened v${c.opened_at} · `
        + `${c.blocked_reads || 0} blocked reads`
        + (c.escalated_at !== null && c.escalated_at !== undefined
          ? ` · ESCALATED at v${c.escalated_at}` : "")),
      claims, more,
      el("button", {
        "data-testid": "reject-all-" + c.conflict_id,
        onclick: () => resolve(c.conflict_id, null),
      }, "Reject all")));
  }
  await loadEscalations();
  const focus = location.pathname.match(/\/conflicts\/([^/]+)$/);
  if (focus) {
    const card = document.querySelector(`[data-testid="conflict-${decodeURIComponent(focus[1])}"]`);
    if (card) { card.classList.add("focus"); card.scrollIntoView(); }
  }
}

async function loadEscalations() {
  const esc = $("escalations");
  try {
    const e = await api("/v1/escalations");
    const shown = e.escalations.slice(0, ESCALATIONS_SHOWN);
    esc.replaceChildren(...shown.map((x) => {
      const rec = x.recommended_action || {};
      return el("details", { "data-testid": "escalation-" + x.conflict_id, open: "" },
        el("summary", {}, `${x.conflict_id} · ${x.edge_type} · ${x.status}`
          + (x.escalation_reason ? ` (${x.escalation_reason})` : "")),
        el("p", {}, `recommended: ${rec.action || "review"}`
          + (rec.claim_id ? ` claim ${rec.claim_id}` : "") + (rec.why ? ` — ${rec.why}` : "")),
        el("p", {}, "versions read: " + Object.entries(x.versions_read || {})
          .map(([a, v]) => `${a} v${v === null ? "—" : v}`).join(", ")),
        el("pre", {}, JSON.stringify({ votes: x.votes, signals: x.signals, fallback: x.fallback },
          null, 2)));
    }));
    if (!e.escalations.length) esc.replaceChildren(el("p", {}, "No escalations."));
    notice("escalations-truncated", e.escalations.length > shown.length
      ? `Truncated: ${shown.length} of ${e.escalations.length} escalations shown; `
        + "each is also marked ESCALATED in the queue." : "");
  } catch (err) {
    esc.replaceChildren(el("p", { class: "hint" }, err.message));
  }
}

function at() {
  return pinned === null ? head : pinned;
}

async function loadGraph() {
  const v = at();
  $("version").max = String(head);
  $("version").value = String(v);
  $("at-label").textContent = "v" + v + (v === head ? " (head)" : "");
  const g = await fetchPage(edges, "/v1/graph", { at: v, limit: EDGES_SIZE }, "edges", "graph");
  const rows = g.edges.map((e) => el("tr", {
    class: "edge", "data-testid": `edge-${e.edge_type}-${e.subject[1]}-${e.object[1]}`,
    onclick: () => { loadHistory(e, v); draw(e.subject.join(":")); },
  }, el("td", {}, e.edge_type), el("td", {}, e.subject.join(":")), el("td", {}, e.object.join(":")),
    el("td", { class: "state-" + e.state, "data-testid": "state" },
      e.state + (e.conflict_id ? " (" + e.conflict_id + ")" : ""))));
  if (!rows.length && !g.truncated) {
    rows.push(el("tr", {}, el("td", { colspan: "4", "data-testid": "edges-empty" },
      edges.q ? `No edge matches “${edges.q}” at v${v}.` : `No edges at v${v}.`)));
  }
  $("edges").replaceChildren(...rows);
  if (nbNode !== null) await draw(nbNode);
}

async function loadHistory(e, v) {
  const q = new URLSearchParams({
    edge_type: e.edge_type, subject: e.subject.join(":"), object: e.object.join(":"), at: v,
  });
  const h = await api("/v1/history?" + q);
  $("history-title").textContent = `of ${e.edge_type}(${e.subject[1]} → ${e.object[1]})`;
  $("history").replaceChildren(...h.history.map((x) => el("li", {},
    `v${x.version} ${x.command_type} ${x.kind} (${x.reason}) by ${x.agent || "?"} → ${x.state}`
    + (x.conflict_id ? ` in ${x.conflict_id}` : ""))));
}

// The neighbourhood is drawn by the server (SVG, escaped, no script); it is parsed as XML
// and adopted into the page, and a click on a neighbour draws that node's neighbourhood.
async function draw(nodeId) {
  nbNode = nodeId;
  $("node").value = nodeId;
  const v = at();
  try {
    const q = new URLSearchParams({ node: nodeId, at: v });
    const text = await (await request("/v1/neighborhood.svg?" + q)).text();
    const doc = new DOMParser().parseFromString(text, "image/svg+xml");
    if (doc.querySelector("parsererror")) throw new Error("the drawing did not parse");
    const svg = document.importNode(doc.documentElement, true);
    for (const g of svg.querySelectorAll("g.node")) {
      g.addEventListener("click", () => draw(g.getAttribute("data-node")));
    }
    $("neighbourhood").replaceChildren(svg);
    $("nb-title").textContent = `of ${nodeId} at v${v}`;
    const cut = svg.querySelector('[data-testid="svg-truncated"]');
    notice("nb-truncated", cut ? "Truncated: " + cut.textContent.replace(/^truncated: /, "") : "");
  } catch (e) {
    $("neighbourhood").replaceChildren(el("p", { class: "hint" }, e.message));
    notice("nb-truncated", "");
  }
}

async function refresh() {
  try {
    const h = await api("/v1/head");
    head = h.head;
    $("head").textContent = "v" + head;
    $("graph-name").textContent = h.graph;
    await loadQueue();
    await loadGraph();
  } catch (e) {
    say(e.status === 401 ? "Enter a bearer token to review this graph." : e.message, true);
  }
}

async function guarded(load) {
  try {
    await load();
  } catch (e) {
    say(e.message, true);
  }
}

function wirePager(pager, prefix, load) {
  $(prefix + "-prev").addEventListener("click", () => {
    if (pager.page > 0) { pager.page -= 1; guarded(load); }
  });
  $(prefix + "-next").addEventListener("click", () => {
    if (pager.cursors[pager.page + 1]) { pager.page += 1; guarded(load); }
  });
}

function wireSearch(pager, form, input, load) {
  $(form).addEventListener("submit", (ev) => {
    ev.preventDefault();
    pager.q = $(input).value.trim();
    pager.cursors = [null];
    pager.page = 0;
    guarded(load);
  });
}

$("login").addEventListener("submit", async (ev) => {
  ev.preventDefault();
  token = $("token").value.trim();
  sessionStorage.setItem("claimgraph-token", token);
  try {
    const me = await api("/v1/whoami");
    $("whoami").textContent = `${me.agent} (${me.roles.join(", ") || "no roles"})`;
    say("");
  } catch (e) {
    say(e.message, true);
  }
  await refresh();
});

$("version").addEventListener("input", async () => {
  const v = Number($("version").value);
  pinned = v === head ? null : v;
  edges.cursors = [null];
  edges.page = 0;
  await guarded(loadGraph);
});

$("nb-form").addEventListener("submit", (ev) => {
  ev.preventDefault();
  const n = $("node").value.trim();
  if (n) draw(n);
});

// -- the proposed schema's what-if: a dry-run publish (POST .../publish_schema, dry_run) ------

const WHAT_IF_SHOWN = 10; // entries listed per category
const WHAT_IF_LISTS = [
  ["rejected", "newly rejected", (r) => r.decisions.rejected, change],
  ["quarantined", "newly quarantined", (r) => r.decisions.quarantined, change],
  ["accepted", "newly accepted", (r) => r.decisions.accepted, change],
  ["other", "otherwise changed", (r) => r.decisions.other, change],
  ["not-needed", "resolves and escalations no longer needed", (r) => r.no_longer_needed,
    (e) => `v${e.version} ${e.command_type} ${e.command_id} by ${e.agent}: ${e.detail}`],
  ["appear", "conflicts that appear", (r) => r.conflicts.appear, conflictLine],
  ["vanish", "conflicts that vanish", (r) => r.conflicts.vanish, conflictLine],
  ["slots", "slots whose value at the end differs", (r) => r.slots,
    (e) => `${e.slot}: ${e.logged} → ${e.what_if}`],
  ["edges", "edges whose state at the end differs", (r) => r.edges,
    (e) => `${e.edge}: ${e.logged} → ${e.what_if}`],
];

function outcome(d) {
  return `${d.kind} ${d.reason}` + (d.conflict_id ? ` ${d.conflict_id}` : "");
}

function change(e) {
  const who = e.task ? `${e.agent}/${e.task}` : e.agent;
  return `v${e.version} ${e.command_type} ${e.command_id} by ${who}`
    + (e.edge ? ` ${e.edge}` : "") + `: ${outcome(e.logged)} → ${outcome(e.what_if)}`
    + (e.what_if.detail ? ` — ${e.what_if.detail}` : "");
}

function conflictLine(e) {
  return `${e.conflict_id} (${e.edge_type}, opened v${e.opened_at}, `
    + `${e.open ? "open at the end" : "closed"}): claims ${e.claims.join(", ")}`;
}

function renderWhatIf(r) {
  const box = $("what-if-report");
  const p = r.proposal;
  const out = [];
  if (r.stopped === "refused") {
    out.push(el("p", { class: "refused", "data-testid": "what-if-summary" },
      `Publishing it at v${p.at} would be refused: ${p.reason} — ${p.detail}`));
    box.replaceChildren(...out);
    return;
  }
  if (p.kind === null) {
    out.push(el("p", { class: "notice", "data-testid": "what-if-summary" },
      "Stopped by its time bound before the range: nothing was decided again."));
    box.replaceChildren(...out);
    return;
  }
  const span = r.to >= r.from ? `v${r.from}–v${r.to}` : "no version";
  out.push(el("p", { "data-testid": "what-if-summary" },
    `In force from v${r.from} without taking a version: decided again ${span} `
    + `(head v${r.head}), ${r.commands} commands; ${r.changed} decisions differ.`));
  if (r.now && r.now.kind === "rejected") {
    out.push(el("p", { class: "refused", "data-testid": "what-if-now" },
      `Publishing it now would be refused: ${r.now.reason} — ${r.now.detail}`));
  }
  if (r.stopped) {
    out.push(el("p", { class: "notice", "data-testid": "what-if-stopped" },
      `Stopped by its ${r.stopped === "time" ? "time bound" : "command limit"} at v${r.to}; `
      + `the range goes on to v${r.requested_to}.`));
  }
  for (const [key, title, pick, line] of WHAT_IF_LISTS) {
    const listing = pick(r);
    const items = listing.first.map((e) => el("li", {}, line(e)));
    const more = listing.count - listing.first.length;
    if (more > 0) items.push(el("li", { class: "hint" }, `… and ${more} more`));
    out.push(el("h3", { "data-testid": "what-if-" + key }, `${title}: ${listing.count}`));
    if (items.length) out.push(el("ul", { "data-testid": "what-if-list-" + key }, ...items));
  }
  for (const n of r.publishes) {
    out.push(el("p", { class: "notice", "data-testid": "what-if-publish" },
      `v${n.version}: schema revision ${n.revision} was published here and applies as logged`
      + (n.what_if ? ` (under the proposal it would be ${n.what_if.kind}: ${n.what_if.reason})`
        : "") + "; the proposal is not in force after it."));
  }
  box.replaceChildren(...out);
}

async function whatIf() {
  const doc = $("proposal-text").value;
  if (!doc.trim()) {
    say("Paste a proposed schema first (or start from the schema in force).", true);
    return;
  }
  const opts = { first: WHAT_IF_SHOWN };
  const from = $("what-if-from").value.trim();
  if (from !== "") opts.from_version = Number(from);
  $("what-if-report").replaceChildren(el("p", { class: "hint", "data-testid": "what-if-busy" },
    "Deciding the logged commands again under the proposal…"));
  try {
    const r = await api("/v1/commands/publish_schema", {
      method: "POST",
      body: JSON.stringify({ document: doc, source: "review page", dry_run: true, what_if: opts }),
    });
    renderWhatIf(r.what_if);
    say("");
  } catch (e) {
    if (e.body && e.body.what_if) {
      renderWhatIf(e.body.what_if);
    } else {
      $("what-if-report").replaceChildren(el("p", { class: "refused",
        "data-testid": "what-if-summary" }, e.message));
    }
  }
}

$("what-if-form").addEventListener("submit", (ev) => {
  ev.preventDefault();
  guarded(whatIf);
});

$("load-schema").addEventListener("click", () => guarded(async () => {
  const s = await api("/v1/schema");
  $("proposal-text").value = s.document;
}));

wirePager(queue, "queue", loadQueue);
wirePager(edges, "graph", loadGraph);
wireSearch(queue, "queue-search", "queue-q", loadQueue);
wireSearch(edges, "graph-search", "graph-q", loadGraph);
refresh();
