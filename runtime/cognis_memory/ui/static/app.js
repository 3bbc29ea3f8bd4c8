// cognis-memory inspector: plain JavaScript, no build step, no third-party code.
// Everything shown comes from the API with the key entered here. The DOM is built from text
// nodes only (never innerHTML), so stored memory text is shown, never run.
"use strict";

const KEY_STORAGE = "cognis-inspector.api-key"; // sessionStorage: this tab only, gone when it closes
const API = new URL("../v1/", document.baseURI); // the API beside /ui/, whatever prefix serves both
const PAGE_SIZE = 25;
// Per-hit explain scores shown as chart columns: [explain key, column label].
// "score" is the hit's final score (the one it is ranked by), not an explain key.
const SCORE_COLUMNS = [
  ["vector", "vector"], ["bm25", "BM25"], ["rrf", "fused"], ["temporal", "temporal"], ["rerank", "rerank"],
  ["score", "final score"],
];
const scoreOf = (h, k) => (k === "score" ? h.score : (h.scores || {})[k]);

const state = {
  key: "",
  tenant: null,
  readOnly: true,
  enums: { category: [], scope: [], kind: [], jobStatus: [] },
  users: [], usersNext: null,
  user: null,
  memories: { pages: [null], index: 0, next: null, rows: [] },
  jobs: { pages: [null], index: 0, next: null },
};

// -- small helpers ---------------------------------------------------------------------------
const $ = (id) => document.getElementById(id);

function el(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(props)) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "class") node.className = v;
    else if (k === "dataset") Object.assign(node.dataset, v);
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue;
    node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return node;
}

const SVG_NS = "http://www.w3.org/2000/svg";
function svg(tag, attrs = {}, text) {
  const node = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, String(v));
  if (text !== undefined) node.textContent = text;
  return node;
}

function when(iso, { zone = true } = {}) {
  if (!iso) return "—";
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return String(iso);
  return d.toISOString().slice(0, 16).replace("T", " ") + (zone ? " UTC" : "");
}

function num(v) {
  if (typeof v !== "number" || !Number.isFinite(v)) return "—";
  const a = Math.abs(v);
  if (a !== 0 && (a < 0.001 || a >= 10000)) return v.toExponential(2);
  return v.toFixed(a < 1 ? 3 : a < 100 ? 2 : 1);
}

function notice(message, kind = "error") {
  const box = $("notice");
  box.textContent = message;
  box.className = `notice ${kind}`;
  box.hidden = !message;
}

class ApiError extends Error {
  constructor(status, message, field) {
    super(message);
    this.status = status;
    this.field = field;
  }
}

async function api(method, path, body) {
  const headers = { Accept: "application/json" };
  if (state.key) headers.Authorization = `Bearer ${state.key}`;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const started = performance.now();
  const res = await fetch(new URL(path, API), {
    method, headers, body: body === undefined ? undefined : JSON.stringify(body),
    cache: "no-store", credentials: "omit", referrerPolicy: "no-referrer",
  });
  const data = await res.json().catch(() => null);
  if (!res.ok) {
    const err = data && data.error ? data.error : {};
    throw new ApiError(res.status, err.message || `${res.status} ${res.statusText}`, err.field);
  }
  return { data, ms: performance.now() - started, requestId: res.headers.get("X-Request-Id") };
}

const userPath = (user, rest = "") => `users/${encodeURIComponent(user)}${rest}`;

function fail(err) {
  const hint = err.status === 403 ? " (this key is read-only)" : err.status === 401 ? " (unknown key)" : "";
  notice(`${err.message}${hint}`);
}

// -- connecting ------------------------------------------------------------------------------
async function connect(key) {
  state.key = key;
  try {
    const { data } = await api("GET", "key");
    state.tenant = data.tenant_id;
    state.readOnly = data.read_only;
  } catch (err) {
    state.key = "";
    sessionStorage.removeItem(KEY_STORAGE);
    // The refused key leaves the field, so the next key typed is not appended to it.
    $("api-key").value = "";
    $("api-key").focus();
    fail(err);
    return;
  }
  sessionStorage.setItem(KEY_STORAGE, key);
  $("api-key").value = "";
  $("key-form").hidden = true;
  $("session").hidden = false;
  $("tenant").textContent = state.tenant;
  $("key-mode").textContent = state.readOnly ? "read-only key" : "read-write key";
  $("key-mode").className = `badge ${state.readOnly ? "ro" : "rw"}`;
  document.body.classList.toggle("read-only", state.readOnly);
  $("intro").hidden = true;
  $("app").hidden = false;
  notice("");
  await loadEnums();
  await loadUsers(true);
}

function disconnect() {
  sessionStorage.removeItem(KEY_STORAGE);
  state.key = "";
  state.user = null;
  location.reload();
}

async function loadEnums() {
  // The allowed values come from the API's own schema, so the page never lists them twice.
  try {
    const res = await fetch(new URL("../openapi.json", API), { credentials: "omit" });
    const schemas = (await res.json()).components.schemas;
    const values = (name) => (schemas[name] && schemas[name].enum) || [];
    state.enums = {
      category: values("Category"), scope: values("Scope"), kind: values("MemoryKind"), jobStatus: values("JobStatusFilter"),
    };
  } catch {
    state.enums = { category: [], scope: [], kind: [], jobStatus: [] };
  }
  const fill = (select, values) => {
    select.replaceChildren(select.options[0]);
    for (const v of values) select.append(el("option", { value: v }, v));
  };
  fill($("filter-category"), state.enums.category);
  fill($("filter-scope"), state.enums.scope);
  fill($("filter-kind"), state.enums.kind);
  $("edit-category").replaceChildren(...state.enums.category.map((v) => el("option", { value: v }, v)));
  const statuses = state.enums.jobStatus.length ? state.enums.jobStatus : ["dead"];
  $("job-status").replaceChildren(el("option", { value: "" }, "every status"),
    ...statuses.map((v) => el("option", { value: v, selected: v === "dead" }, v)));
}

// -- users -----------------------------------------------------------------------------------
async function loadUsers(fresh) {
  if (fresh) { state.users = []; state.usersNext = null; }
  const after = fresh ? "" : `&after=${encodeURIComponent(state.usersNext)}`;
  try {
    const { data } = await api("GET", `users?limit=100${after}`);
    state.users.push(...data.users);
    state.usersNext = data.next_after;
  } catch (err) { fail(err); }
  renderUsers();
}

function renderUsers() {
  const filter = $("user-filter").value.trim().toLowerCase();
  const list = $("users");
  const shown = state.users.filter((u) => !filter || u.user_id.toLowerCase().includes(filter));
  list.replaceChildren(...shown.map((u) => el("li", {},
    el("button", {
      type: "button", class: u.user_id === state.user ? "user active" : "user", dataset: { user: u.user_id },
      onclick: () => pickUser(u.user_id),
    }, el("span", { class: "uid" }, u.user_id),
    el("span", { class: "meta", title: `last write ${when(u.last_memory_at)}` },
      `${u.current_memories} current · ${when(u.last_memory_at).slice(0, 10)}`)),
  )));
  if (!state.users.length) list.append(el("li", { class: "muted" }, "No users in this tenant yet."));
  $("users-more").hidden = !state.usersNext;
}

async function pickUser(user) {
  state.user = user;
  renderUsers();
  $("memories-title").textContent = `Memories of ${user}`;
  $("chain").hidden = true;
  resetSearch();
  await loadMemories(0, true);
}

// -- memories --------------------------------------------------------------------------------
async function loadMemories(index, fresh = false) {
  if (!state.user) return;
  const m = state.memories;
  if (fresh) { m.pages = [null]; m.next = null; }
  const after = m.pages[index];
  const history = $("include-history").checked;
  const query = `?limit=${PAGE_SIZE}&include_history=${history}${after ? `&after=${encodeURIComponent(after)}` : ""}`;
  try {
    const { data } = await api("GET", userPath(state.user, `/memories${query}`));
    m.index = index;
    m.rows = data.memories;
    m.next = data.next_after;
    if (m.next && m.pages.length === index + 1) m.pages.push(m.next);
  } catch (err) { fail(err); return; }
  renderMemories();
}

function renderMemories() {
  const m = state.memories;
  const f = { category: $("filter-category").value, scope: $("filter-scope").value, kind: $("filter-kind").value };
  const rows = m.rows.filter((r) => (!f.category || r.category === f.category)
    && (!f.scope || r.scope === f.scope) && (!f.kind || r.kind === f.kind));
  const body = $("memories-table").tBodies[0];
  body.replaceChildren(...rows.map(memoryRow));
  if (!rows.length) {
    body.append(el("tr", {}, el("td", { colspan: 7, class: "muted" },
      m.rows.length ? "No memory on this page matches the filters." : "No memories.")));
  }
  const first = m.index * PAGE_SIZE + 1;
  $("page-info").textContent = m.rows.length
    ? `page ${m.index + 1} · memories ${first}–${first + m.rows.length - 1}` : "";
  $("memories-first").disabled = m.index === 0;
  $("memories-next").disabled = !m.next;
}

function memoryRow(r) {
  const status = r.deleted ? "deleted" : r.is_current ? "current" : "earlier version";
  const actions = el("td", { class: "actions" },
    el("button", { type: "button", class: "link", dataset: { action: "history" }, onclick: () => showChain(r.id) },
      "versions"));
  if (!state.readOnly && r.is_current && !r.deleted) {
    actions.append(
      el("button", { type: "button", class: "link edit", dataset: { action: "edit" }, onclick: () => editMemory(r) },
        "edit"),
      el("button", { type: "button", class: "link danger", dataset: { action: "delete" },
        onclick: (e) => deleteMemory(r, e.currentTarget) }, "delete"),
    );
  }
  return el("tr", { class: r.is_current ? "" : "old", dataset: { memory: r.id } },
    el("td", { class: "content" }, el("div", {}, r.content),
      r.speaker ? el("div", { class: "muted small" }, `speaker: ${r.speaker}`) : null),
    el("td", {}, el("span", { class: "tag cat" }, r.category)),
    el("td", { class: "nowrap" }, `${r.scope} · ${r.kind}`),
    el("td", { class: "nowrap" }, when(r.event_time, { zone: false })),
    el("td", { class: "nowrap" }, when(r.created_at, { zone: false })),
    el("td", {}, `v${r.version}`, el("div", { class: "muted small" }, status)),
    actions);
}

async function showChain(memoryId) {
  let versions;
  try {
    ({ data: { versions } } = await api("GET", userPath(state.user, `/memories/${encodeURIComponent(memoryId)}/history`)));
  } catch (err) { fail(err); return; }
  const box = $("chain-versions");
  const cards = [];
  versions.forEach((v, i) => {
    if (i) cards.push(el("div", { class: "arrow", "aria-hidden": "true" }, "→"));
    const label = v.deleted ? "deleted" : v.is_current ? "current" : "replaced";
    cards.push(el("article", { class: `version ${label}`, dataset: { version: v.version } },
      el("header", {}, el("strong", {}, `v${v.version}`), el("span", { class: `badge ${label}` }, label)),
      el("p", { class: "vcontent" }, v.deleted ? "(tombstone: the memory was deleted here)" : v.content),
      el("dl", {},
        el("dt", {}, "written"), el("dd", { class: "written" }, when(v.created_at)),
        el("dt", {}, "event time"), el("dd", {}, when(v.event_time)),
        el("dt", {}, "message time"), el("dd", {}, when(v.message_time)),
        el("dt", {}, "category"), el("dd", {}, v.category),
        el("dt", {}, "kind"), el("dd", {}, v.kind))));
  });
  box.replaceChildren(...cards);
  $("chain-summary").textContent = `${versions.length} version${versions.length === 1 ? "" : "s"}, oldest first`;
  $("chain").hidden = false;
  $("chain").scrollIntoView({ block: "nearest" });
}

let editing = null;
function editMemory(r) {
  editing = r;
  $("edit-content").value = r.content;
  $("edit-category").value = r.category;
  $("edit-dialog").showModal();
}

async function saveEdit(event) {
  event.preventDefault();
  const r = editing;
  const body = {};
  if ($("edit-content").value !== r.content) body.content = $("edit-content").value;
  if ($("edit-category").value !== r.category) body.category = $("edit-category").value;
  $("edit-dialog").close();
  if (!Object.keys(body).length) return;
  try {
    const { data } = await api("PATCH", userPath(state.user, `/memories/${encodeURIComponent(r.id)}`), body);
    notice(`Saved version ${data.version}.`, "ok");
    await loadMemories(state.memories.index);
    await showChain(data.id);
  } catch (err) { fail(err); }
}

async function deleteMemory(r, button) {
  if (button.dataset.armed !== "1") { // a second click confirms
    button.dataset.armed = "1";
    button.textContent = "confirm delete";
    return;
  }
  try {
    await api("DELETE", userPath(state.user, `/memories/${encodeURIComponent(r.id)}`));
    notice("Deleted (a tombstone version keeps the history).", "ok");
    await loadMemories(state.memories.index);
  } catch (err) { fail(err); }
}

// -- search ----------------------------------------------------------------------------------
function resetSearch() {
  for (const id of ["search-summary", "score-chart", "moves-chart", "timing-chart", "hits"]) $(id).replaceChildren();
}

async function runSearch(event) {
  event.preventDefault();
  if (!state.user) { notice("Pick a user first."); return; }
  const body = {
    query: $("search-query").value,
    limit: Number($("search-limit").value) || 10,
    include_history: $("search-history").checked,
    explain: true,
  };
  let res;
  try {
    res = await api("POST", userPath(state.user, "/search"), body);
  } catch (err) { fail(err); return; }
  notice("");
  renderSearch(res.data, res.ms, res.requestId);
}

function renderSearch(data, roundTripMs, requestId) {
  const stages = (data.explain && data.explain.stage_durations) || {};
  const analysis = data.query_analysis || {};
  const bits = [`${data.results.length} hit${data.results.length === 1 ? "" : "s"}`, `round trip ${num(roundTripMs)} ms`];
  if (analysis.temporal && analysis.temporal !== "none") bits.push(`temporal query: ${analysis.temporal}`);
  if (analysis.history) bits.push("history query");
  const summary = [el("span", {}, bits.join(" · "))];
  if (data.degraded && data.degraded.length) {
    summary.push(el("span", { class: "badge warn" }, `degraded: ${data.degraded.join(", ")}`));
  }
  if (requestId) summary.push(el("span", { class: "muted small" }, `request ${requestId}`));
  $("search-summary").replaceChildren(...summary);
  $("score-chart").replaceChildren(scoreChart(data.results));
  $("moves-chart").replaceChildren(movesChart(data.results));
  $("timing-chart").replaceChildren(timingChart(stages));
  $("hits").replaceChildren(...data.results.map(hitItem));
}

function hitItem(h, i) {
  const m = h.memory;
  const scores = h.scores || {};
  const parts = SCORE_COLUMNS.filter(([k]) => k !== "score" && typeof scores[k] === "number")
    .map(([k, label]) => `${label} ${num(scores[k])}`);
  const moves = h.moves || [];
  const item = el("li", { class: "hit", dataset: { memory: m.id } },
    el("div", { class: "hit-head" }, el("span", { class: "rank" }, `#${i + 1}`),
      el("span", { class: "score" }, `score ${num(h.score)}`),
      el("span", { class: "tag cat" }, m.category), el("span", { class: "muted small" }, `${m.kind} · ${m.scope}`),
      el("span", { class: "muted small" }, `event ${when(m.event_time)} · written ${when(m.created_at)}`)),
    el("p", { class: "hit-content" }, m.content),
    parts.length ? el("div", { class: "muted small" }, parts.join(" · ")) : null,
    typeof scores.rrf_rank === "number" ? el("div", { class: "moves small" },
      el("span", { class: "muted" }, `fused #${scores.rrf_rank}`),
      moves.length ? moves.map(moveItem) : el("span", { class: "muted" }, " · no stage moved it")) : null);
  if (h.history && h.history.length) {
    item.append(el("details", {}, el("summary", {}, `${h.history.length} earlier version(s)`),
      el("ul", {}, h.history.map((v) => el("li", {}, `v${v.version} · ${when(v.created_at)} · `, v.content)))));
  }
  return item;
}

// One stage's move of one hit, as text: its place before and after, and what happened to its score.
function moveText(m) {
  const place = m.rank_after === null ? `#${m.rank_before} → removed` : `#${m.rank_before} → #${m.rank_after}`;
  if (m.score_after === m.score_before) return `${place}, moved without a score`;
  const delta = m.score_after - m.score_before;
  return `${place}, score ${num(m.score_before)} → ${num(m.score_after)} (${delta > 0 ? "+" : ""}${num(delta)})`;
}

function moveItem(m) {
  const unscored = m.score_after === m.score_before;
  return el("span", { class: `move${unscored ? " unscored" : ""}`, dataset: { stage: m.stage } },
    " · ", el("strong", {}, m.stage), ` ${moveText(m)}`);
}

// Every stage that changed the score or the place of a shown hit, one column each in the order they
// ran: the place before and after, and a bar for the size of the score change (none: moved without a score).
function movesChart(results) {
  const stages = [];
  for (const h of results) for (const m of h.moves || []) if (!stages.includes(m.stage)) stages.push(m.stage);
  if (!results.length || !results.some((h) => h.scores && typeof h.scores.rrf_rank === "number")) {
    return el("p", { class: "muted" }, "No explanation.");
  }
  if (!stages.length) return el("p", { class: "muted" }, "No stage changed a score or a place: fused order.");
  const moveOf = (h, stage) => (h.moves || []).find((m) => m.stage === stage);
  const maxDelta = {};
  for (const stage of stages) {
    maxDelta[stage] = Math.max(...results.map((h) => {
      const m = moveOf(h, stage);
      return m ? Math.abs(m.score_after - m.score_before) : 0;
    }), 1e-12);
  }
  const labelW = 44, fusedW = 56, colW = 118, rowH = 26, top = 28, barH = 14;
  const width = labelW + fusedW + stages.length * colW, height = top + results.length * rowH + 4;
  const chart = svg("svg", { viewBox: `0 0 ${width} ${height}`, width, height, role: "img", class: "moves-chart",
    "aria-label": "How each stage moved each hit" });
  chart.append(svg("text", { x: labelW + 4, y: 16, class: "col-label" }, "fused"));
  stages.forEach((stage, c) => {
    chart.append(svg("text", { x: labelW + fusedW + c * colW + 4, y: 16, class: "col-label" }, stage));
  });
  results.forEach((h, r) => {
    const y = top + r * rowH;
    chart.append(svg("text", { x: 4, y: y + barH - 2, class: "row-label" }, `#${r + 1}`));
    chart.append(svg("text", { x: labelW + 4, y: y + barH - 2, class: "value" }, `#${(h.scores || {}).rrf_rank}`));
    stages.forEach((stage, c) => {
      const x = labelW + fusedW + c * colW + 4;
      const m = moveOf(h, stage);
      chart.append(svg("rect", { x, y, width: colW - 12, height: barH, class: "track" }));
      if (!m) {
        chart.append(svg("text", { x: x + 4, y: y + barH - 3, class: "none" }, "—"));
        return;
      }
      const delta = m.score_after - m.score_before;
      const way = m.rank_after === null || m.rank_after > m.rank_before ? "down"
        : m.rank_after < m.rank_before ? "up" : "same";
      const cell = svg("g", { class: `move ${way}${delta === 0 ? " unscored" : ""}`, "data-stage": stage,
        "data-hit": r });
      const w = delta === 0 ? 0 : Math.max(1, (Math.abs(delta) / maxDelta[stage]) * (colW - 12));
      if (w) cell.append(svg("rect", { x, y, width: w.toFixed(1), height: barH, class: `bar ${delta > 0 ? "gain" : "loss"}` }));
      const place = m.rank_after === null ? `#${m.rank_before}→out` : `#${m.rank_before}→#${m.rank_after}`;
      cell.append(svg("text", { x: x + 4, y: y + barH - 3, class: "value" }, delta === 0 ? `${place} no score` : place));
      cell.append(svg("title", {}, `${stage}: ${moveText(m)}`));
      chart.append(cell);
    });
  });
  return chart;
}

function scoreChart(results) {
  const cols = SCORE_COLUMNS.filter(([k]) => results.some((h) => typeof scoreOf(h, k) === "number"));
  if (!results.length || !cols.length) return el("p", { class: "muted" }, "No hits.");
  const max = {};
  for (const [k] of cols) max[k] = Math.max(...results.map((h) => Math.max(0, scoreOf(h, k) || 0)), 1e-12);
  const labelW = 44, colW = 118, rowH = 26, top = 28, barH = 14;
  const width = labelW + cols.length * colW, height = top + results.length * rowH + 4;
  const chart = svg("svg", { viewBox: `0 0 ${width} ${height}`, width, height, role: "img", class: "score-chart",
    "aria-label": "Stage scores of each hit" });
  cols.forEach(([k, label], c) => {
    chart.append(svg("text", { x: labelW + c * colW + 4, y: 16, class: "col-label" }, label));
  });
  results.forEach((h, r) => {
    const y = top + r * rowH;
    chart.append(svg("text", { x: 4, y: y + barH - 2, class: "row-label" }, `#${r + 1}`));
    cols.forEach(([k], c) => {
      const x = labelW + c * colW + 4;
      const value = scoreOf(h, k);
      chart.append(svg("rect", { x, y, width: colW - 12, height: barH, class: "track" }));
      if (typeof value !== "number") {
        chart.append(svg("text", { x: x + 4, y: y + barH - 3, class: "none" }, "not ranked"));
        return;
      }
      const w = Math.max(1, ((Math.max(0, value) / max[k]) * (colW - 12)));
      const bar = svg("rect", { x, y, width: w.toFixed(1), height: barH, class: `bar s-${k}`,
        "data-stage": k, "data-hit": r });
      bar.append(svg("title", {}, `${k}: ${value}`));
      chart.append(bar, svg("text", { x: x + 4, y: y + barH - 3, class: "value" }, num(value)));
    });
  });
  return chart;
}

function timingChart(stages) {
  const entries = Object.entries(stages);
  if (!entries.length) return el("p", { class: "muted" }, "No timings.");
  const max = Math.max(...entries.map(([, v]) => v), 1e-9);
  const labelW = 120, barW = 200, rowH = 20, width = labelW + barW + 70, height = entries.length * rowH + 4;
  const chart = svg("svg", { viewBox: `0 0 ${width} ${height}`, width, height, role: "img", class: "timing-chart",
    "aria-label": "Stage timings" });
  entries.forEach(([name, ms], i) => {
    const y = i * rowH + 2;
    const stage = name.replace(/_ms$/, "");
    chart.append(svg("text", { x: labelW - 6, y: y + 12, class: "row-label end" }, stage));
    chart.append(svg("rect", { x: labelW, y, width: barW, height: 14, class: "track" }));
    const bar = svg("rect", { x: labelW, y, width: Math.max(1, (ms / max) * barW).toFixed(1), height: 14,
      class: "bar timing", "data-stage": stage });
    bar.append(svg("title", {}, `${stage}: ${ms} ms`));
    chart.append(bar, svg("text", { x: labelW + barW + 6, y: y + 12, class: "value" }, `${num(ms)} ms`));
  });
  return chart;
}

// -- jobs ------------------------------------------------------------------------------------
async function loadJobs(index, fresh = false) {
  const j = state.jobs;
  if (fresh) { j.pages = [null]; j.next = null; }
  const status = $("job-status").value;
  const after = j.pages[index];
  const query = `?limit=${PAGE_SIZE}${status ? `&status=${encodeURIComponent(status)}` : ""}`
    + `${after ? `&after=${encodeURIComponent(after)}` : ""}`;
  let data;
  try {
    ({ data } = await api("GET", `jobs${query}`));
  } catch (err) {
    if (err.status === 404) { notice("This server has no tenant-wide job listing (GET /v1/jobs)."); return; }
    fail(err);
    return;
  }
  j.index = index;
  j.next = data.next_after;
  if (j.next && j.pages.length === index + 1) j.pages.push(j.next);
  const body = $("jobs-table").tBodies[0];
  body.replaceChildren(...data.jobs.map((job) => el("tr", { dataset: { job: job.id } },
    el("td", { class: "mono", title: job.id }, job.id.slice(0, 12)),
    el("td", {}, el("button", { type: "button", class: "link", onclick: () => { showTab("memories"); pickUser(job.user_id); } },
      job.user_id)),
    el("td", {}, el("span", { class: `badge job-${job.status}` }, job.status)),
    el("td", {}, `${job.attempts} / ${job.max_attempts}`),
    el("td", { class: "nowrap" }, when(job.updated_at, { zone: false })),
    el("td", { class: "error-text" }, job.last_error || "—"))));
  if (!data.jobs.length) {
    body.append(el("tr", {}, el("td", { colspan: 6, class: "muted" }, status ? `No ${status} jobs.` : "No jobs.")));
  }
  $("jobs-first").disabled = index === 0;
  $("jobs-next").disabled = !j.next;
}

// -- tabs and wiring -------------------------------------------------------------------------
function showTab(name) {
  for (const b of document.querySelectorAll(".tabs button")) b.classList.toggle("active", b.dataset.tab === name);
  for (const t of document.querySelectorAll(".tab")) t.hidden = t.id !== `tab-${name}`;
  if (name === "jobs") loadJobs(0, true);
}

function wire() {
  $("key-form").addEventListener("submit", (e) => { e.preventDefault(); connect($("api-key").value.trim()); });
  $("disconnect").addEventListener("click", disconnect);
  $("users-more").addEventListener("click", () => loadUsers(false));
  $("user-filter").addEventListener("input", renderUsers);
  for (const b of document.querySelectorAll(".tabs button")) b.addEventListener("click", () => showTab(b.dataset.tab));
  $("include-history").addEventListener("change", () => loadMemories(0, true));
  for (const id of ["filter-category", "filter-scope", "filter-kind"]) $(id).addEventListener("change", renderMemories);
  $("memories-first").addEventListener("click", () => loadMemories(0));
  $("memories-next").addEventListener("click", () => loadMemories(state.memories.index + 1));
  $("search-form").addEventListener("submit", runSearch);
  $("job-status").addEventListener("change", () => loadJobs(0, true));
  $("jobs-refresh").addEventListener("click", () => loadJobs(0, true));
  $("jobs-first").addEventListener("click", () => loadJobs(0));
  $("jobs-next").addEventListener("click", () => loadJobs(state.jobs.index + 1));
  $("edit-form").addEventListener("submit", saveEdit);
  $("edit-cancel").addEventListener("click", () => $("edit-dialog").close());
  $("chain-close").addEventListener("click", () => { $("chain").hidden = true; });
  const saved = sessionStorage.getItem(KEY_STORAGE);
  if (saved !== null) connect(saved);
}

wire();
