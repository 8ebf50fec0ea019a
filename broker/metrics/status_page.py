"""The status page: one self-contained HTML document (inline CSS and JavaScript, no CDN, no
external request of any kind) that polls ``status.json`` on the same port every
``REFRESH_MS`` and redraws its tables.

Every value from the broker is inserted with ``textContent`` (never as HTML), so a topic or
group name cannot inject markup. The page only reads; the server has no route that changes state.
"""

from __future__ import annotations

__all__ = ["STATUS_PAGE", "REFRESH_MS"]

REFRESH_MS = 1000

STATUS_PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>pylog broker status</title>
<style>
body { font-family: system-ui, sans-serif; margin: 1em 2em; color: #222; }
h1 { font-size: 1.3em; } h2 { font-size: 1.1em; margin-top: 1.5em; }
table { border-collapse: collapse; margin: .3em 0; }
th, td { border: 1px solid #ccc; padding: 2px 8px; text-align: left; font-size: .9em; }
th { background: #eee; }
tr.under-replicated td { background: rgb(255, 170, 170); }
tr.offline td { background: rgb(200, 0, 0); color: white; }
.muted { color: #888; } #error { color: #b00; }
</style></head>
<body>
<h1>pylog broker <span id="broker-id">?</span></h1>
<div>cluster <span id="cluster-id"></span> &middot; controller <span id="controller-id"></span>
 &middot; updated <span id="updated">never</span> <span id="error"></span></div>
<h2>Brokers</h2>
<table id="brokers"><thead><tr><th>id</th><th>host</th><th>port</th><th>role</th></tr></thead><tbody></tbody></table>
<h2>Topics</h2>
<div class="muted">Red: under-replicated (ISR smaller than the replicas). Sizes are of the replicas on this broker.</div>
<table id="topics"><thead><tr><th>topic</th><th>partition</th><th>leader</th><th>replicas</th><th>ISR</th>
<th>size (bytes)</th><th>log end</th><th>state</th></tr></thead><tbody></tbody></table>
<h2>Consumer groups <span class="muted">(coordinated by this broker)</span></h2>
<table id="groups"><thead><tr><th>group</th><th>state</th><th>members</th><th>topic</th><th>partition</th>
<th>committed</th><th>end</th><th>lag</th></tr></thead><tbody></tbody></table>
<h2>Open transactions <span class="muted">(coordinated by this broker)</span></h2>
<table id="transactions"><thead><tr><th>transactional id</th><th>producer id</th><th>epoch</th><th>state</th>
<th>age (s)</th><th>partitions</th></tr></thead><tbody></tbody></table>
<script>
"use strict";
function cell(row, value) {
  const td = document.createElement("td");
  td.textContent = (value === null || value === undefined) ? "\\u2014" : String(value);
  row.appendChild(td); return td;
}
function fill(id, rows, build) {
  const body = document.querySelector("#" + id + " tbody");
  const fresh = document.createElement("tbody");
  for (const r of rows) { const tr = document.createElement("tr"); build(tr, r); fresh.appendChild(tr); }
  body.replaceWith(fresh);
}
function render(s) {
  document.getElementById("broker-id").textContent = s.broker_id;
  document.getElementById("cluster-id").textContent = s.cluster_id;
  document.getElementById("controller-id").textContent = s.controller_id;
  document.getElementById("updated").textContent = new Date(s.time_ms).toISOString();
  fill("brokers", s.brokers, (tr, b) => {
    cell(tr, b.id); cell(tr, b.host); cell(tr, b.port);
    cell(tr, (b.id === s.controller_id ? "controller" : "") + (b.id === s.broker_id ? " (this broker)" : ""));
  });
  const parts = [];
  for (const t of s.topics) for (const p of t.partitions) parts.push([t, p]);
  fill("topics", parts, (tr, [t, p]) => {
    tr.dataset.topic = t.name; tr.dataset.partition = p.partition;
    if (p.offline) tr.className = "offline"; else if (p.under_replicated) tr.className = "under-replicated";
    cell(tr, t.name); cell(tr, p.partition); cell(tr, p.leader); cell(tr, p.replicas.join(","));
    cell(tr, p.isr.join(",")); cell(tr, p.size_bytes); cell(tr, p.log_end_offset);
    cell(tr, p.offline ? "offline" : p.under_replicated ? "under-replicated" : "ok");
  });
  const lags = [];
  for (const g of s.groups) {
    if (g.lag.length === 0) lags.push([g, null]);
    for (const l of g.lag) lags.push([g, l]);
  }
  fill("groups", lags, (tr, [g, l]) => {
    tr.dataset.group = g.group;
    cell(tr, g.group); cell(tr, g.state);
    cell(tr, g.members.map(m => m.client_id + "@" + m.client_host).join(", "));
    if (l === null) { for (let i = 0; i < 5; i++) cell(tr, null); return; }
    tr.dataset.topic = l.topic; tr.dataset.partition = l.partition;
    cell(tr, l.topic); cell(tr, l.partition); cell(tr, l.committed); cell(tr, l.end);
    cell(tr, l.lag).className = "lag";
  });
  fill("transactions", s.transactions, (tr, x) => {
    cell(tr, x.transactional_id); cell(tr, x.producer_id); cell(tr, x.producer_epoch); cell(tr, x.state);
    cell(tr, (x.age_ms / 1000).toFixed(1)); cell(tr, x.partitions.join(" "));
  });
}
async function refresh() {
  try {
    const answer = await fetch("status.json", {cache: "no-store"});
    if (!answer.ok) throw new Error("HTTP " + answer.status);
    render(await answer.json());
    document.getElementById("error").textContent = "";
  } catch (e) {
    document.getElementById("error").textContent = "(refresh failed: " + e.message + ")";
  }
}
refresh();
setInterval(refresh, REFRESH_MS_VALUE);
</script></body></html>
""".replace("REFRESH_MS_VALUE", str(REFRESH_MS))
