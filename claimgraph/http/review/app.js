// claimgraph review page: plain JavaScript over the HTTP API, no build step.
"use strict";

const $ = (id) => document.getElementById(id);
let token = sessionStorage.getItem("claimgraph-token") || "";
let head = -1;
let pinned = null; // the version the slider shows; null follows head

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

async function api(path, options) {
  const resp = await fetch(path, {
    ...(options || {}),
    headers: { "Authorization": "Bearer " + token, "Content-Type": "application/json" },
  });
  const body = await resp.json().catch(() => ({}));
  if (!resp.ok) {
    const err = new Error(`${body.reason || resp.status}: ${body.detail || resp.statusText}`);
    err.status = resp.status;
    err.body = body;
    throw err;
  }
  return body;
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

async function loadQueue() {
  const q = await api("/v1/quarantine");
  const box = $("conflicts");
  box.replaceChildren();
  if (!q.conflicts.length) box.append(el("p", { "data-testid": "queue-empty" }, "Nothing is quarantined."));
  for (const c of q.conflicts) {
    const claims = el("div", { class: "claims" });
    for (const info of c.claim_details) if (info) claims.append(claimCard(c, info));
    box.append(el("div", { class: "conflict", "data-testid": "conflict-" + c.conflict_id },
      el("h3", {}, `${c.conflict_id} · ${c.edge_type} · opened v${c.opened_at} · `
        + `${c.blocked_reads || 0} blocked reads`
        + (c.escalated_at !== null && c.escalated_at !== undefined
          ? ` · ESCALATED at v${c.escalated_at}` : "")),
      claims,
      el("button", {
        "data-testid": "reject-all-" + c.conflict_id,
        onclick: () => resolve(c.conflict_id, null),
      }, "Reject all")));
  }
  const esc = $("escalations");
  try {
    const e = await api("/v1/escalations");
    esc.replaceChildren(...e.escalations.map((x) => {
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
  } catch (err) {
    esc.replaceChildren(el("p", { class: "hint" }, err.message));
  }
  const focus = location.pathname.match(/\/conflicts\/([^/]+)$/);
  if (focus) {
    const card = document.querySelector(`[data-testid="conflict-${decodeURIComponent(focus[1])}"]`);
    if (card) { card.classList.add("focus"); card.scrollIntoView(); }
  }
}

async function loadGraph() {
  const at = pinned === null ? head : pinned;
  $("version").max = String(head);
  $("version").value = String(at);
  $("at-label").textContent = "v" + at + (at === head ? " (head)" : "");
  const g = await api("/v1/graph?at=" + at);
  const rows = g.edges.map((e) => el("tr", {
    class: "edge", "data-testid": `edge-${e.edge_type}-${e.subject[1]}-${e.object[1]}`,
    onclick: () => loadHistory(e, at),
  }, el("td", {}, e.edge_type), el("td", {}, e.subject.join(":")), el("td", {}, e.object.join(":")),
    el("td", { class: "state-" + e.state, "data-testid": "state" },
      e.state + (e.conflict_id ? " (" + e.conflict_id + ")" : ""))));
  $("edges").replaceChildren(...rows);
}

async function loadHistory(e, at) {
  const q = new URLSearchParams({
    edge_type: e.edge_type, subject: e.subject.join(":"), object: e.object.join(":"), at: at,
  });
  const h = await api("/v1/history?" + q);
  $("history-title").textContent = `of ${e.edge_type}(${e.subject[1]} → ${e.object[1]})`;
  $("history").replaceChildren(...h.history.map((x) => el("li", {},
    `v${x.version} ${x.command_type} ${x.kind} (${x.reason}) by ${x.agent || "?"} → ${x.state}`
    + (x.conflict_id ? ` in ${x.conflict_id}` : ""))));
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
  await loadGraph();
});

refresh();
