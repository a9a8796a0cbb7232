// Hotspot live page: polls the public API every second. Rate history for the
// charts is kept here, from the moment the page was opened (5 minutes).
"use strict";
const HISTORY = 300; // samples, one per second
const history = new Map(); // "app\u0000key" -> [rate, ...]
let threshold = null;

const esc = (s) => String(s).replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
// Every rate on the page reads one way: a whole number of accesses per
// second with thousands separators ("93", "335", "12,480").
const rateFormat = new Intl.NumberFormat("en-US", { maximumFractionDigits: 0 });
const fmt = (r) => rateFormat.format(r);

async function get(path) {
  const resp = await fetch(path, { cache: "no-store" });
  if (!resp.ok) throw new Error(path + ": " + resp.status);
  return resp.json();
}

function remember(app, key, rate) {
  const id = app + "\u0000" + key;
  let h = history.get(id);
  if (!h) history.set(id, (h = []));
  h.push(rate);
  if (h.length > HISTORY) h.shift();
  return h;
}

function spark(h) {
  if (h.length < 2) return "";
  const top = Math.max(...h, threshold || 0, 1);
  const pts = h.map((r, i) => `${(i * 180) / (HISTORY - 1)},${28 - (r / top) * 26}`).join(" ");
  const y = threshold ? 28 - (threshold / top) * 26 : -1;
  return `<svg class="spark" viewBox="0 0 180 28" preserveAspectRatio="none"><line x1="0" x2="180" y1="${y}" y2="${y}"/><polyline points="${pts}"/></svg>`;
}

// Timeline: each app's hot spells over the last hour, from the stored
// history (GET /v1/history), refreshed every 10 s.
const HOUR = 3600e3;
const timelines = new Map(); // app -> {at, svg}

async function refreshTimeline(app) {
  const t = timelines.get(app);
  if (t && Date.now() - t.at < 10e3) return;
  timelines.set(app, { at: Date.now(), svg: t ? t.svg : "" });
  const since = new Date(Date.now() - HOUR).toISOString();
  let svg;
  try {
    const resp = await fetch(`/v1/history?limit=10000&app=${encodeURIComponent(app)}&since=${since}`, { cache: "no-store" });
    const body = await resp.json();
    svg = resp.ok ? timelineSVG(body.events, Date.now()) : `<p class="empty">history: ${esc(body.error || resp.status)}</p>`;
  } catch (err) {
    svg = `<p class="empty">history: ${esc(err.message)}</p>`;
  }
  timelines.set(app, { at: Date.now(), svg });
}

// spells pairs promotions and demotions (newest first) into [key, from, to].
function spells(events, now) {
  const open = new Map();
  const out = [];
  for (const e of [...events].reverse()) {
    const at = Date.parse(e.at);
    if (e.kind === "promoted" && !open.has(e.key)) {
      open.set(e.key, out.length);
      out.push([e.key, at, now]);
    } else if (e.kind === "demoted" && open.has(e.key)) {
      out[open.get(e.key)][2] = at;
      open.delete(e.key);
    } else if (e.kind === "demoted") {
      out.push([e.key, now - HOUR, at]); // hot since before the hour
    }
  }
  return out;
}

function timelineSVG(events, now) {
  const sp = spells(events, now);
  if (!sp.length) return '<p class="empty">no promotions in the last hour</p>';
  const keys = [...new Set(sp.map((s) => s[0]))].slice(0, 30);
  const x = (t) => Math.max(0, (600 * (t - (now - HOUR))) / HOUR);
  const rows = keys.map((k, i) => {
    const bars = sp.filter((s) => s[0] === k).map((s) =>
      `<rect x="${x(s[1]).toFixed(1)}" y="${i * 14 + 2}" width="${Math.max(1, x(s[2]) - x(s[1])).toFixed(1)}" height="10"><title>${esc(k)}: ${new Date(s[1]).toLocaleTimeString()} – ${s[2] >= now ? "now" : new Date(s[2]).toLocaleTimeString()}</title></rect>`).join("");
    return `<text x="604" y="${i * 14 + 11}">${esc(k)}</text>${bars}`;
  }).join("");
  const h = keys.length * 14 + 14;
  const ticks = [0, 15, 30, 45, 60].map((m) => `<text class="tick" x="${(600 * m) / 60}" y="${h - 1}">${m === 60 ? "now" : "-" + (60 - m) + "m"}</text>`).join("");
  return `<svg class="timeline" viewBox="0 0 760 ${h}" preserveAspectRatio="xMinYMin meet">${rows}${ticks}</svg>`;
}

// Rules: each app's rule list (GET /v1/rules), refreshed every 5 s.
const ruleLists = new Map(); // app -> {at, list} (list null until read, or {error})

async function refreshRules(app) {
  const r = ruleLists.get(app);
  if (r && Date.now() - r.at < 5e3) return;
  ruleLists.set(app, { at: Date.now(), list: r ? r.list : null });
  let list;
  try {
    const resp = await fetch(`/v1/rules?app=${encodeURIComponent(app)}`, { cache: "no-store" });
    const body = await resp.json();
    list = resp.ok ? body : { error: body.error || String(resp.status) };
  } catch (err) {
    list = { error: err.message };
  }
  ruleLists.set(app, { at: Date.now(), list });
}

// ruleLabel names the rule behind a hot key: "default" for the default rule
// (rule -1) or when the answer has no rule, else "#i match pattern" from the
// app's list. The kind follows unless it is "count".
function ruleLabel(k, list) {
  let label = "default";
  if (typeof k.rule === "number" && k.rule >= 0) {
    const r = list && list.rules ? list.rules[k.rule] : null;
    label = r ? `#${k.rule} ${r.match} ${r.pattern}` : `#${k.rule}`;
  }
  const kind = k.kind || "count";
  return kind === "count" ? label : `${label} (${kind})`;
}

// rulesTable shows an app's rules; "-" is the default rule's value.
function rulesTable(list) {
  if (!list) return '<p class="empty">reading…</p>';
  if (list.error) return `<p class="empty">rules: ${esc(list.error)}</p>`;
  if (!list.rules || !list.rules.length) return '<p class="empty">none: every key follows the default rule</p>';
  const cols = ["mode", "measure", "ops", "threshold", "window", "hold", "low", "k"];
  const rows = list.rules.map((r, i) => `<tr><td class="num">${i}</td><td>${esc(r.match)}</td><td class="key">${esc(r.pattern)}</td>${cols.map((c) => `<td>${r[c] === undefined ? "-" : esc(c === "threshold" ? fmt(r[c]) : r[c])}</td>`).join("")}</tr>`).join("");
  return `<table class="rules"><thead><tr><th>#</th><th>match</th><th>pattern</th>${cols.map((c) => `<th>${c}</th>`).join("")}</tr></thead><tbody>${rows}</tbody></table><p class="note">version ${esc(list.version)} · first match wins · - is the default rule's value</p>`;
}

// Sources and effect: each hot key's busiest sources (GET
// /v1/hotkeys/{key}), for the DETAILED busiest hot keys of each app,
// refreshed every 5 s; the share of its reads answered from the apps'
// memory comes with the list (served_l1).
const DETAILED = 20;
const details = new Map(); // "app\u0000key" -> {at, st} (st null until read)

async function refreshDetails(app, hot) {
  await Promise.all(hot.slice(0, DETAILED).map(async (k) => {
    const id = app + "\u0000" + k.key;
    const d = details.get(id);
    if (d && Date.now() - d.at < 5e3) return;
    details.set(id, { at: Date.now(), st: d ? d.st : null });
    try {
      const st = await get(`/v1/hotkeys/${encodeURIComponent(k.key)}?app=${encodeURIComponent(app)}`);
      details.set(id, { at: Date.now(), st });
    } catch (err) {
      // keep what was shown; tried again in 5 s
    }
  }));
}

const pct = (f) => Math.round(f * 100) + "%";
const SOURCE_COLORS = ["#2563eb", "#f59e0b", "#10b981", "#8b5cf6", "#ef4444", "#06b6d4", "#84cc16", "#ec4899"];

// sourcesBar draws a key's busiest sources as one stacked bar, each source
// its share of the key's rate (hover for its name), the busiest named next
// to it with the number of distinct sources; the rest of the bar is the
// part no listed source accounts for.
function sourcesBar(st) {
  if (!st || !st.sources || !st.sources.length) return '<span class="empty">–</span>';
  const segs = st.sources.map((s, i) =>
    `<span style="width:${(Math.min(s.share, 1) * 100).toFixed(1)}%;background:${SOURCE_COLORS[i % SOURCE_COLORS.length]}" title="${esc(s.source)}: ${pct(s.share)}"></span>`).join("");
  const all = st.sources.map((s) => `${s.source}: ${pct(s.share)}`).join("\n");
  const n = st.distinct_sources ? ` · ${fmt(st.distinct_sources)} source${st.distinct_sources === 1 ? "" : "s"}` : "";
  return `<span class="srcbar" title="${esc(all)}">${segs}</span><span class="srcname">${esc(st.sources[0].source)} ${pct(st.sources[0].share)}${esc(n)}</span>`;
}

// servedBadge shows the fraction of a key's reads answered from the apps'
// L1, cluster-wide (or an instance's, from its own): green from 90 %,
// amber from 50 %, red below.
function servedBadge(f, whose = "the apps' memory (L1), cluster-wide") {
  if (typeof f !== "number") return '<span class="empty">–</span>';
  const cls = f >= 0.9 ? "good" : f >= 0.5 ? "fair" : "poor";
  return `<span class="l1 ${cls}" title="reads answered from ${esc(whose)}, last 10 s">L1 ${pct(f)}</span>`;
}

// Instances: each app instance (an SDK client, or an app of a sidecar
// proxy) that reported reads of hot keys over the last 10 s (GET
// /v1/instances, every tick), the INSTANCES busiest of each app shown.
const INSTANCES = 20;
let instances = new Map(); // app -> [instance, ...], busiest first

function instancesTable(list) {
  if (!list || !list.length) return '<p class="empty">none reported reads of hot keys in the last 10 s</p>';
  const rows = list.slice(0, INSTANCES).map((i) =>
    `<tr><td class="key">${esc(i.instance)}</td><td class="num">${fmt(i.l1_hits + i.l2_reads + i.limited)}</td><td>${servedBadge(i.served_l1, "its own memory (L1)")}</td><td class="num">${fmt(i.l2_reads)}</td><td class="num">${fmt(i.limited)}</td><td class="num">${fmt(i.source_loads)}</td></tr>`).join("");
  const more = list.length > INSTANCES ? `<p class="note">and ${fmt(list.length - INSTANCES)} more (GET /v1/instances)</p>` : "";
  return `<table class="instances"><thead><tr><th>instance</th><th>hot-key reads/s</th><th>from memory</th><th>to Redis/s</th><th>limited/s</th><th>source loads/s</th></tr></thead><tbody>${rows}</tbody></table>${more}`;
}

function appSection(app, hot, top) {
  const list = (ruleLists.get(app) || {}).list;
  const hotRows = hot.map((k) => {
    const h = remember(app, k.key, k.rate);
    const d = details.get(app + "\u0000" + k.key);
    return `<tr class="hot"><td class="key">${esc(k.key)}</td><td class="num">${fmt(k.rate)}</td><td>${servedBadge(k.served_l1)}</td><td class="sources">${sourcesBar(d && d.st)}</td><td>${esc(new Date(k.since).toLocaleTimeString())}</td><td>${esc(k.source)}</td><td>${esc(ruleLabel(k, list))}</td><td>${spark(h)}</td></tr>`;
  }).join("");
  const hotSet = new Set(hot.map((k) => k.key));
  const busy = top.filter((k) => !hotSet.has(k.key)).slice(0, 10).map((k) =>
    `<tr><td class="key">${esc(k.key)}</td><td class="num">${fmt(k.rate)}</td></tr>`).join("");
  return `<section class="app" data-app="${esc(app)}"><h2>app ${esc(app)}</h2><div class="cols">
    <div><h3>Hot keys (${hot.length})</h3>${hot.length ? `<table class="hotkeys"><thead><tr><th>key</th><th>rate/s</th><th>from memory</th><th>top sources</th><th>since</th><th>origin</th><th>rule</th><th>last minutes</th></tr></thead><tbody>${hotRows}</tbody></table>` : '<p class="empty">none</p>'}</div>
    <div><h3>Busiest keys not hot</h3>${busy ? `<table class="busy"><thead><tr><th>key</th><th>rate/s</th></tr></thead><tbody>${busy}</tbody></table>` : '<p class="empty">none</p>'}</div>
  </div><h3>Instances serving its hot keys (${(instances.get(app) || []).length})</h3>${instancesTable(instances.get(app))}<h3>Rules</h3>${rulesTable(list)}<h3>Hot keys over the last hour</h3><div class="tl">${(timelines.get(app) || {}).svg || ""}</div></section>`;
}

async function tick() {
  try {
    const [hot, events, inst] = await Promise.all([get("/v1/hotkeys"), get("/v1/events?n=30"),
      get("/v1/instances").catch(() => ({ instances: [] }))]);
    instances = new Map();
    for (const i of inst.instances) {
      if (!instances.has(i.app)) instances.set(i.app, []);
      instances.get(i.app).push(i);
    }
    if (threshold === null) {
      threshold = (await get("/v1/config")).threshold;
    }
    const apps = hot.apps.map((a) => a.app);
    for (const e of events.events) if (!apps.includes(e.app)) apps.push(e.app);
    for (const app of instances.keys()) if (!apps.includes(app)) apps.push(app);
    const tops = await Promise.all(apps.map((app) => get("/v1/top?n=20&app=" + encodeURIComponent(app)).catch(() => ({ keys: [] }))));
    const byApp = new Map(hot.apps.map((a) => [a.app, a.hotkeys]));
    await Promise.all([...apps.map(refreshTimeline), ...apps.map(refreshRules),
      ...apps.map((app) => refreshDetails(app, byApp.get(app) || []))]);
    document.getElementById("apps").innerHTML = apps.length
      ? apps.map((app, i) => appSection(app, byApp.get(app) || [], tops[i].keys)).join("")
      : '<p class="empty">No hot keys yet.</p>';
    document.querySelector("#events tbody").innerHTML = events.events.map((e) =>
      `<tr><td>${esc(new Date(e.at).toLocaleTimeString())}</td><td>${esc(e.app)}</td><td class="key">${esc(e.key)}</td><td class="${e.kind}">${e.kind}</td><td class="num">${e.rate ? fmt(e.rate) : ""}</td></tr>`).join("");
    document.getElementById("status").textContent = "updated " + new Date().toLocaleTimeString() + (threshold ? ` · threshold ${fmt(threshold)}/s` : "");
  } catch (err) {
    document.getElementById("status").textContent = "error: " + err.message;
  }
}

tick();
setInterval(tick, 1000);
