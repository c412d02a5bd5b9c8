// The live dashboard (index.html): for the chosen view, each architecture's answer from
// GET /v1/views/{view}, its meta, and two charts over the time the page has been open (the
// view's total and its rows, so they read the same for a windowed view and for one of the
// current state, which has no time fields: its table is its keys and values alone).
//
// Each architecture is polled every POLL_MS with the ETag of the answer on screen in
// If-None-Match: while no micro-batch commits and no alias moves, the API answers 304 after
// one statement, without reading a row. Only a changed answer is read whole (page by page,
// for the totals). A failed poll (503 while the store is down, or no answer at all) shows a
// banner on that architecture's panel and polling goes on, so the page recovers by itself.
//
// For a view with matches (config.matches, from core.catalog.MATCH_SPECS: search_conversions),
// each architecture's first config.matches_shown matched patterns (search -> click -> order,
// GET /v1/views/{view}/matches) are polled beside it the same way and shown under the panels;
// for any other view that section is hidden and nothing more is asked.
//
// Below the panels, the last comparison's verdict (GET /v1/comparison): a row per question,
// Lambda's figure beside Kappa's, which one is ahead and by how much, each question linked to
// its figure in the published report. Runs are rare (by hand, a few a day): it is read at load
// and once a minute.
"use strict";

const POLL_MS = 2000;
const REQUEST_TIMEOUT_MS = 10000; // a request that hangs must not stop the polling
const MAX_ROWS = 100000; // rows read per changed answer, for the totals; more: "100,000+"
const TABLE_ROWS = 50;
const HISTORY_POINTS = 900; // 30 minutes of polls per chart
const CHART_HEIGHT = 130;
const COMPARISON_POLL_MS = 60000;
const ISO_INSTANT = /^\d{4}-\d\d-\d\dT.*Z$/; // as the API writes them: UTC, with a Z

const ARCHITECTURES = [
  { name: "lambda", title: "Lambda", color: "#c05621" },
  { name: "kappa", title: "Kappa", color: "#2b6cb0" },
];

// Written into the page by the server: each view's fields in row order (no time fields for
// the current state) and what one row spans, the API's largest page (LK_SERVE_PAGE_LIMIT_MAX),
// and the views with matches, each with the columns shown of them.
const config = JSON.parse(document.getElementById("config").textContent);
const integer = new Intl.NumberFormat("en-US");

let view = initialView();
let generation = 0; // bumped when the view changes: answers to older polls are dropped
let timer = null;
// Each chart as wide as its cell, from the first layout on and whenever the window changes.
const resized = new ResizeObserver((entries) => {
  for (const { target } of entries) {
    target.plot?.setSize({ width: chartWidth(target), height: CHART_HEIGHT });
  }
});
const panels = ARCHITECTURES.map(createPanel);

function initialView() {
  const asked = location.hash.slice(1); // #sessions: a view can be linked to
  return Object.hasOwn(config.views, asked) ? asked : Object.keys(config.views)[0];
}

// The field a chart sums: the view's first value (count, users, searches, revenue_cents,
// events). Overlapping windows (page_views_hopping) count each event in each of its windows,
// which the line by the view says.
function mainValue() {
  return config.views[view].values[0];
}

function columns() {
  const spec = config.views[view];
  return [...spec.keys, ...spec.time_fields, ...spec.values];
}

function hasMatches() {
  return Object.hasOwn(config.matches, view);
}

// --- one panel per architecture -------------------------------------------------------------

function createPanel(architecture) {
  const node = fromTemplate("panel", architecture, architecture.name);
  document.getElementById("architectures").append(node);
  // Its matches in a section of their own, under both panels: the panel's tables stay the view's.
  const matchesNode = fromTemplate("matches-panel", architecture, `matches-${architecture.name}`);
  document.getElementById("matches-architectures").append(matchesNode);
  return { ...architecture, node, matchesNode, charts: [] };
}

function fromTemplate(template, architecture, id) {
  const node = document.getElementById(template).content.firstElementChild.cloneNode(true);
  node.id = id;
  node.dataset.architecture = architecture.name;
  node.querySelector(".name").textContent = architecture.title;
  return node;
}

function reset(panel) {
  Object.assign(panel, {
    etag: null, // of the answer on screen
    answer: null, // { rows (first TABLE_ROWS), rowCount, total, partial, meta, readAt }
    error: null,
    unchanged: 0, // 304s since the answer on screen was read
    history: [[], [], []], // poll time (s), total, rows; null while unavailable: a gap
    matches: { etag: null, answer: null, error: null }, // answer: { rows, more, readAt }
  });
  for (const chart of panel.charts) chart.destroy();
  const value = mainValue();
  panel.charts = [
    chart(panel, ".chart.total", `total ${value}`, 1),
    chart(panel, ".chart.rows", "rows", 2),
  ];
  renderAnswer(panel);
  renderStatus(panel);
  renderMatches(panel);
}

function chart(panel, selector, title, series) {
  const target = panel.node.querySelector(selector);
  target.replaceChildren();
  const plot = new uPlot(
    {
      title,
      width: chartWidth(target),
      height: CHART_HEIGHT,
      legend: { show: false },
      scales: { x: { time: true } },
      axes: [{ space: 50 }, { size: 64 }],
      series: [
        {},
        {
          label: title,
          stroke: panel.color,
          width: 2,
          fill: `${panel.color}1a`,
          // A value holds until the next answer that changed it: steps, not slopes.
          paths: uPlot.paths.stepped({ align: 1 }),
        },
      ],
    },
    [[], []],
    target,
  );
  plot.seriesIndex = series; // which of panel.history it draws
  target.plot = plot;
  resized.observe(target);
  return plot;
}

function chartWidth(target) {
  return Math.max(target.clientWidth, 160);
}

// --- polling ----------------------------------------------------------------------------------

// A poll that got no answer: the API's reason (503: "the serving store is unavailable: <why>"),
// or why the API could not be reached.
class PollFailed extends Error {
  constructor(message, status = null) {
    super(message);
    this.status = status;
  }
}

async function fetchPage(architecture, cursor, etag) {
  const params = new URLSearchParams({ architecture, limit: String(config.page_limit) });
  if (cursor !== null) params.set("cursor", cursor);
  return fetchAnswer(`v1/views/${encodeURIComponent(view)}`, params, etag);
}

// The first matches only, without the view's filters (the dashboard sets none): a glimpse.
async function fetchMatches(architecture, etag) {
  const params = new URLSearchParams({ architecture, limit: String(config.matches_shown) });
  return fetchAnswer(`v1/views/${encodeURIComponent(view)}/matches`, params, etag);
}

async function fetchAnswer(path, params, etag) {
  let response;
  try {
    response = await fetch(`${path}?${params}`, {
      // Our own If-None-Match, and no browser cache: a 304 reaches this script as a 304.
      headers: etag === null ? {} : { "If-None-Match": etag },
      cache: "no-store",
      signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
    });
  } catch (error) {
    throw new PollFailed(`the serving API does not answer (${error.message})`);
  }
  if (response.status === 304) return null;
  if (!response.ok) throw new PollFailed(await reason(response), response.status);
  return { etag: response.headers.get("ETag"), body: await response.json() };
}

async function reason(response) {
  try {
    const body = await response.json();
    if (typeof body.detail === "string") return body.detail;
  } catch {
    // not the API's JSON (a proxy's error page): the status says enough
  }
  return `the serving API answered ${response.status} ${response.statusText}`.trim();
}

// A changed answer, read whole: the first page's rows for the table, every page for the totals
// (at most MAX_ROWS). A page is one snapshot; a cursor whose version the alias left (a hand-off,
// a Kappa switch) gets 409, and the next poll reads the new version from its start.
async function readAnswer(architecture, first) {
  const value = mainValue();
  let { body } = first;
  const answer = {
    rows: body.rows.slice(0, TABLE_ROWS),
    rowCount: 0,
    total: 0,
    partial: false,
    meta: body.meta,
    readAt: new Date(),
  };
  for (;;) {
    answer.rowCount += body.rows.length;
    for (const row of body.rows) answer.total += Number(row[value]) || 0;
    const cursor = body.meta.next_cursor;
    if (cursor === null) return answer;
    if (answer.rowCount >= MAX_ROWS) return { ...answer, partial: true };
    ({ body } = await fetchPage(architecture, cursor, null));
  }
}

async function poll(panel, polled) {
  let error = null;
  let answer = null;
  let moved = false;
  let etag = panel.etag;
  try {
    const first = await fetchPage(panel.name, null, panel.etag);
    if (first !== null) {
      answer = await readAnswer(panel.name, first);
      etag = first.etag;
    }
  } catch (failure) {
    if (!(failure instanceof PollFailed)) console.error(failure); // a bug of this page
    // 409: the alias moved mid-read, no failure; the answer on screen stays until the next poll.
    moved = failure.status === 409;
    if (!moved) {
      error = failure instanceof PollFailed ? failure.message : `the page failed: ${failure}`;
    }
  }
  if (polled !== generation) return; // the view changed meanwhile
  panel.error = error;
  if (answer !== null) {
    Object.assign(panel, { answer, etag, unchanged: 0 });
    renderAnswer(panel);
  } else if (error === null && !moved) {
    panel.unchanged += 1;
  }
  record(panel);
  renderStatus(panel);
}

// One request: its first page is all the section shows, so no cursor is followed (and no 409).
async function pollMatches(panel, polled) {
  const shown = panel.matches;
  let { etag } = shown;
  let answer = null;
  let error = null;
  try {
    const first = await fetchMatches(panel.name, shown.etag);
    if (first !== null) {
      const { matches, meta } = first.body;
      answer = { rows: matches, more: meta.next_cursor !== null, readAt: new Date() };
      etag = first.etag;
    }
  } catch (failure) {
    if (!(failure instanceof PollFailed)) console.error(failure); // a bug of this page
    error = failure instanceof PollFailed ? failure.message : `the page failed: ${failure}`;
  }
  if (polled !== generation) return; // the view changed meanwhile
  shown.error = error;
  if (answer !== null) Object.assign(shown, { answer, etag });
  renderMatches(panel);
}

async function tick() {
  const polled = generation;
  // A hidden tab polls nothing; it catches up when shown again (visibilitychange).
  if (!document.hidden) {
    const matches = hasMatches();
    await Promise.all(
      panels.map((panel) =>
        Promise.all([poll(panel, polled), matches ? pollMatches(panel, polled) : null]),
      ),
    );
  }
  if (polled === generation) schedule(POLL_MS);
}

function schedule(delay) {
  clearTimeout(timer);
  timer = setTimeout(tick, delay);
}

function selectView(name) {
  view = name;
  history.replaceState(null, "", `#${name}`);
  renderWindow();
  generation += 1;
  panels.forEach(reset);
  schedule(0);
}

// --- rendering --------------------------------------------------------------------------------

function record(panel) {
  const [times, totals, rows] = panel.history;
  const ok = panel.error === null && panel.answer !== null;
  times.push(Date.now() / 1000);
  totals.push(ok ? panel.answer.total : null);
  rows.push(ok ? panel.answer.rowCount : null);
  if (times.length > HISTORY_POINTS) panel.history.forEach((column) => column.shift());
  for (const plot of panel.charts) {
    plot.setData([times, panel.history[plot.seriesIndex]]);
  }
}

function renderWindow() {
  document.getElementById("window").textContent = config.views[view].window;
  const section = document.getElementById("matches");
  section.hidden = !hasMatches();
  section.querySelector(".view").textContent = view;
  section.querySelector(".shown").textContent = String(config.matches_shown);
}

function renderStatus(panel) {
  const { node, answer, error } = panel;
  const banner = node.querySelector(".banner");
  banner.hidden = error === null;
  node.classList.toggle("stale", error !== null);
  if (error !== null) {
    const kept = answer === null ? "" : `; the last answer read (${clock(answer.readAt)}) is shown`;
    const note = document.createElement("span");
    note.className = "muted";
    note.textContent = `retrying every ${POLL_MS / 1000} s${kept}`;
    banner.replaceChildren(error, note);
  }
  node.querySelector(".status").textContent =
    answer === null
      ? "waiting for a first answer"
      : `read at ${clock(answer.readAt)}; since then ${panel.unchanged} unchanged (304)`;
}

function renderAnswer(panel) {
  const { node, answer, name } = panel;
  const meta = answer === null ? null : answer.meta;
  for (const field of node.querySelectorAll("[data-meta]")) {
    field.textContent = metaText(name, field.dataset.meta, meta);
  }
  const summary = node.querySelector(".summary");
  const head = node.querySelector("thead");
  const body = node.querySelector("tbody");
  const fields = columns();
  head.replaceChildren(row(fields.map((field) => cell("th", field, field))));
  if (answer === null) {
    summary.textContent = "";
    body.replaceChildren();
    return;
  }
  const count = `${integer.format(answer.rowCount)}${answer.partial ? "+" : ""}`;
  const total = `${integer.format(answer.total)}${answer.partial ? "+" : ""}`;
  summary.textContent =
    `${count} rows, total ${mainValue()} ${total}` +
    (answer.rowCount > TABLE_ROWS ? `; the first ${TABLE_ROWS} are shown` : "");
  body.replaceChildren(
    ...answer.rows.map((values) =>
      row(fields.map((field) => cell("td", field, format(field, values[field])))),
    ),
  );
}

// The matches on screen, the way renderStatus and renderAnswer show a view's answer: the last
// one read stays, dimmed under a banner, while a poll fails.
function renderMatches(panel) {
  const { matchesNode: node } = panel;
  const { answer, error } = panel.matches;
  const banner = node.querySelector(".banner");
  banner.hidden = error === null;
  banner.textContent = error === null ? "" : `${error}; retrying every ${POLL_MS / 1000} s`;
  node.classList.toggle("stale", error !== null);
  node.querySelector(".status").textContent =
    answer === null ? "waiting for a first answer" : `read at ${clock(answer.readAt)}`;
  const fields = hasMatches() ? config.matches[view] : [];
  node.querySelector("thead").replaceChildren(
    row(fields.map((field) => cell("th", field, field))),
  );
  node.querySelector(".summary").textContent = answer === null ? "" : matchesText(answer);
  node.querySelector("tbody").replaceChildren(
    ...(answer?.rows ?? []).map((values) => {
      const texts = matchTexts(fields, values);
      return row(fields.map((field, i) => cell("td", field, texts[i])));
    }),
  );
}

// A row's later times on the day of its first (a click and an order within the hour of their
// search) read as the time of day alone, so the row fits its half of the page.
function matchTexts(fields, values) {
  let day = null;
  return fields.map((field) => {
    const text = format(field, values[field]);
    if (!ISO_INSTANT.test(values[field])) return text;
    const [date, time] = text.split(" ");
    if (day === null) {
      day = date;
      return text;
    }
    return date === day ? time : text;
  });
}

function matchesText({ rows, more }) {
  const count = integer.format(rows.length);
  if (more) return `the first ${count} matches shown; more follow`;
  if (rows.length === 0) return "no match yet";
  return `${count} ${rows.length === 1 ? "match" : "matches"}, all shown`;
}

function metaText(architecture, field, meta) {
  if (meta === null) return "…";
  const value = meta[field];
  if (field === "batch_cutoff" && architecture === "kappa") return "none (no batch layer)";
  if (value === null) return field === "view_version" ? "none published yet" : "none yet";
  return format(field, value);
}

function row(cells) {
  const tr = document.createElement("tr");
  tr.append(...cells);
  return tr;
}

function cell(tag, field, text) {
  const node = document.createElement(tag);
  node.textContent = text;
  if (isNumeric(field)) node.className = "number";
  return node;
}

function isNumeric(field) {
  return Object.values(config.views).some((spec) => spec.values.includes(field)) ||
    ["late_dropped", "quarantined", "view_version"].includes(field);
}

function format(field, value) {
  if (field === "ctr") return value.toFixed(3); // the one fraction among the values
  if (typeof value === "number") return integer.format(value);
  // ISO 8601 instants in UTC: "2026-11-01T10:00:00.000Z" -> "2026-11-01 10:00:00"
  if (ISO_INSTANT.test(value)) return value.replace("T", " ").replace(/(\.0+)?Z$/, "");
  return String(value);
}

function clock(date) {
  return date.toTimeString().slice(0, 8);
}

// --- the last comparison ----------------------------------------------------------------------

const comparison = document.getElementById("comparison");
let comparisonTimer = null;

async function readComparison() {
  let body = null;
  let error = null;
  try {
    const response = await fetch("v1/comparison", {
      cache: "no-store",
      signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
    });
    if (response.ok) body = await response.json();
    else error = await reason(response);
  } catch (failure) {
    error = `the serving API does not answer (${failure.message})`;
  }
  renderComparison(body, error);
  clearTimeout(comparisonTimer);
  comparisonTimer = setTimeout(readComparison, COMPARISON_POLL_MS);
}

// Text only (textContent): every string of the answer is shown as it is, never as HTML.
function renderComparison(body, error) {
  const status = comparison.querySelector(".comparison-status");
  const wrap = comparison.querySelector(".table-wrap");
  comparison.classList.toggle("stale", error !== null);
  if (error !== null) {
    // The verdict on screen, if any, stays: a comparison does not change while the store is away.
    status.textContent = `${error}; retrying every ${COMPARISON_POLL_MS / 1000} s`;
    return;
  }
  if (body.report === null) {
    status.textContent = "No comparison published yet: lk compare (or lk demo) runs one.";
    wrap.hidden = true;
    return;
  }
  const report = webAddress(body.report);
  const numbers = webAddress(body.json);
  status.replaceChildren(
    `Published ${utc(body.published_at)}: `,
    link(report, "the report"),
    ", ",
    link(numbers, "its numbers (comparison.json)"),
    body.verdict === null ? "; it predates the verdict table, see its figures." : ".",
  );
  wrap.hidden = body.verdict === null;
  comparison.querySelector("tbody").replaceChildren(
    ...(body.verdict ?? []).map((entry) => verdictRow(entry, report)),
  );
}

function verdictRow(entry, report) {
  let figure = null;
  if (report !== null) {
    figure = new URL(report);
    figure.hash = entry.figure;
  }
  const question = document.createElement("td");
  question.append(link(figure, entry.question));
  const ahead = document.createElement("td");
  ahead.dataset.ahead = entry.ahead;
  ahead.textContent = aheadText(entry.ahead);
  const texts = [entry.lambda_figure, entry.kappa_figure].map((text) => cell("td", "", text));
  return row([question, ...texts, ahead, cell("td", "", entry.by)]);
}

function aheadText(ahead) {
  const architecture = ARCHITECTURES.find(({ name }) => name === ahead);
  if (architecture !== undefined) return architecture.title;
  return ahead === "" ? "not measured" : ahead;
}

// An http(s) address, or null: no other scheme (javascript:, data:) becomes a link.
function webAddress(address) {
  if (typeof address !== "string") return null;
  try {
    const url = new URL(address, location.href);
    return ["http:", "https:"].includes(url.protocol) ? url : null;
  } catch {
    return null;
  }
}

// A link to `url` (a URL, or null: the text alone).
function link(url, text) {
  if (url === null) return document.createTextNode(text);
  const anchor = document.createElement("a");
  anchor.href = url.href;
  anchor.textContent = text;
  return anchor;
}

// "2026-11-24 15:30:00 UTC", whatever the offset the API wrote the instant with.
function utc(instant) {
  const date = new Date(instant);
  if (Number.isNaN(date.getTime())) return String(instant);
  return `${date.toISOString().slice(0, 19).replace("T", " ")} UTC`;
}

// --- start ------------------------------------------------------------------------------------

const select = document.getElementById("view");
for (const name of Object.keys(config.views)) select.add(new Option(name, name));
select.value = view;
renderWindow();
select.addEventListener("change", () => selectView(select.value));
document.addEventListener("visibilitychange", () => {
  if (!document.hidden) schedule(0);
});
panels.forEach(reset); // once both panels are laid out: each chart's width is its cell's
schedule(0);
readComparison();
