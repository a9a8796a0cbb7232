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

function appSection(app, hot, top) {
  const hotRows = hot.map((k) => {
    const h = remember(app, k.key, k.rate);
    return `<tr class="hot"><td class="key">${esc(k.key)}</td><td class="num">${fmt(k.rate)}</td><td>${esc(new Date(k.since).toLocaleTimeString())}</td><td>${esc(k.source)}</td><td>${spark(h)}</td></tr>`;
  }).join("");
  const hotSet = new Set(hot.map((k) => k.key));
  const busy = top.filter((k) => !hotSet.has(k.key)).slice(0, 10).map((k) =>
    `<tr><td class="key">${esc(k.key)}</td><td class="num">${fmt(k.rate)}</td></tr>`).join("");
  return `<section class="app" data-app="${esc(app)}"><h2>app ${esc(app)}</h2><div class="cols">
    <div><h3>Hot keys (${hot.length})</h3>${hot.length ? `<table class="hotkeys"><thead><tr><th>key</th><th>rate/s</th><th>since</th><th>source</th><th>last minutes</th></tr></thead><tbody>${hotRows}</tbody></table>` : '<p class="empty">none</p>'}</div>
    <div><h3>Busiest below the threshold</h3>${busy ? `<table class="busy"><thead><tr><th>key</th><th>rate/s</th></tr></thead><tbody>${busy}</tbody></table>` : '<p class="empty">none</p>'}</div>
  </div></section>`;
}

async function tick() {
  try {
    const [hot, events] = await Promise.all([get("/v1/hotkeys"), get("/v1/events?n=30")]);
    if (threshold === null) {
      threshold = (await get("/v1/config")).threshold;
    }
    const apps = hot.apps.map((a) => a.app);
    for (const e of events.events) if (!apps.includes(e.app)) apps.push(e.app);
    const tops = await Promise.all(apps.map((app) => get("/v1/top?n=20&app=" + encodeURIComponent(app)).catch(() => ({ keys: [] }))));
    const byApp = new Map(hot.apps.map((a) => [a.app, a.hotkeys]));
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
