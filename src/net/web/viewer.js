// rankd's board viewer: the board list (/) and one board's top 100
// (/?board=NAME; &window=1: its rolling window), refreshed every 2 s from
// /api/top.
//
// Member names and data are whatever clients sent: they only ever enter the
// page as text (textContent, setAttribute), never as HTML.
"use strict";

const REFRESH_MS = 2000;
const TOP_N = 100;
const PERIODS_SHOWN = 30; // past periods offered in the period menu

function $(id) {
  return document.getElementById(id);
}

// An element with text and an optional class.
function el(tag, text, cls) {
  const e = document.createElement(tag);
  if (text !== undefined && text !== null) e.textContent = String(text);
  if (cls) e.className = cls;
  return e;
}

function optionsText(o) {
  const parts = [];
  if (typeof o.members === "number")
    parts.push(o.members + (o.members === 1 ? " member" : " members"));
  if (o.configured === false) parts.push("not in the configuration");
  if (o.shards > 1) parts.push(o.shards + " shards");
  if (o.order === "asc") parts.push("lower first");
  if (o.rank !== "ordinal") parts.push(o.rank + " ranks");
  if (o.period !== "none") parts.push(o.period + ", " + o.retention + " kept");
  if (o.window > 0) parts.push("rolling window of " + o.window);
  if (o.cap > 0) parts.push("best " + o.cap);
  if (o.subscores.length > 0) parts.push("subscores " + o.subscores.join(","));
  return parts.join(" · ");
}

async function getJson(url) {
  const r = await fetch(url, { cache: "no-store" });
  let body = null;
  try {
    body = await r.json();
  } catch (e) {
    throw new Error("HTTP " + r.status);
  }
  if (!r.ok) throw new Error(body && body.error ? body.error : "HTTP " + r.status);
  return body;
}

function boardUrl(name) {
  return "/?board=" + encodeURIComponent(name);
}

async function showBoards() {
  $("boards").hidden = false;
  const list = $("board-list");
  const status = $("boards-status");
  try {
    const { boards } = await getJson("/api/boards");
    list.replaceChildren();
    for (const b of boards) {
      const li = el("li");
      const a = el("a", b.name);
      a.href = boardUrl(b.name);
      li.append(a);
      const text = optionsText(b);
      if (text) li.append(el("span", text, "options"));
      list.append(li);
    }
    status.textContent = boards.length === 0
      ? "No boards yet (none configured, none written to): type a board's name above."
      : "";
    status.className = "status";
  } catch (e) {
    status.textContent = "Cannot list the boards: " + e.message;
    status.className = "status error";
  }
}

// ---- one board ----

let board = null;
let periodsBack = 0;
let periodsOffered = -1;
// The board's rolling window (board option window=N) instead of a period.
let readWindow = false;

function fillPeriods(top) {
  const choice = $("period-choice");
  if (top.period === "none") {
    choice.hidden = true;
    return;
  }
  choice.hidden = false;
  $("window-choice").hidden = !(top.window > 0);
  $("window").checked = readWindow;
  $("period").disabled = readWindow;
  $("period-label").textContent = readWindow
    ? "the last " + top.window + " periods, to " + (top.period_label || "")
    : top.period_label || "";
  const count = Math.min(top.retention, PERIODS_SHOWN);
  if (count === periodsOffered) return;
  periodsOffered = count;
  const select = $("period");
  select.replaceChildren();
  for (let i = 0; i <= count; i++) {
    const o = el("option", i === 0 ? "current" : i + " back");
    o.value = String(i);
    select.append(o);
  }
  select.value = String(periodsBack);
}

function queueText(q) {
  if (!q) return "";
  if (q.backlog === 0) return "queue: empty";
  return "queue: " + q.backlog + " waiting, the oldest for " +
    (q.oldest_age_ms / 1000).toFixed(1) + " s";
}

function renderTop(top) {
  $("board-options").textContent =
    [optionsText(top), queueText(top.queue)].filter((t) => t).join(" · ");
  fillPeriods(top);
  const dataKeys = [...new Set(top.entries.flatMap((e) => Object.keys(e.data)))]
    .sort();
  const head = $("top-head");
  head.replaceChildren(el("th", "Rank"), el("th", "Member"), el("th", "Score"));
  top.subscores.forEach((order, i) =>
    head.append(el("th", "Subscore " + (i + 1) + " (" + order + ")")));
  for (const k of dataKeys) head.append(el("th", k));

  const rows = top.entries.map((e) => {
    const tr = el("tr");
    tr.setAttribute("data-rank", String(e.rank));
    tr.append(el("td", e.rank, "rank"), el("td", e.member, "member"),
              el("td", e.score, "score"));
    top.subscores.forEach((_, i) =>
      tr.append(el("td", i < e.subscores.length ? e.subscores[i] : "", "sub")));
    for (const k of dataKeys) {
      const td = el("td", k in e.data ? e.data[k] : "", "data");
      td.setAttribute("data-key", k);
      tr.append(td);
    }
    return tr;
  });
  $("top-body").replaceChildren(...rows);
  const status = $("top-status");
  status.className = "status";
  status.textContent = (top.entries.length === 0
    ? "No entries."
    : "Top " + top.entries.length + ".") +
    " Updated " + new Date().toLocaleTimeString() + "; refreshes every " +
    REFRESH_MS / 1000 + " s.";
}

// One refresh chain: a refresh started meanwhile (another period chosen)
// supersedes the one in flight.
let timer = null;
let generation = 0;

async function refresh() {
  clearTimeout(timer);
  const mine = ++generation;
  const url = "/api/top?board=" + encodeURIComponent(board) + "&n=" + TOP_N +
    (readWindow ? "&window=1" : "&periods_back=" + periodsBack);
  let top = null;
  let failure = null;
  try {
    top = await getJson(url);
  } catch (e) {
    failure = e;
  }
  if (mine !== generation) return;
  if (top !== null) {
    renderTop(top);
  } else {
    const e = failure;
    const status = $("top-status");
    status.textContent = "Cannot read the board: " + e.message +
      " (retrying every " + REFRESH_MS / 1000 + " s)";
    status.className = "status error";
  }
  timer = setTimeout(refresh, REFRESH_MS);
}

function showBoard(name) {
  board = name;
  document.title = name + " · rankd";
  $("board").hidden = false;
  $("board-name").textContent = name;
  $("open-board").value = name;
  $("period").addEventListener("change", (ev) => {
    periodsBack = Number(ev.target.value);
    refresh();
  });
  $("window").addEventListener("change", (ev) => {
    readWindow = ev.target.checked;
    if (readWindow) periodsBack = 0;
    const url = new URL(location.href);
    if (readWindow) url.searchParams.set("window", "1");
    else url.searchParams.delete("window");
    history.replaceState(null, "", url);
    refresh();
  });
  refresh();
}

const params = new URLSearchParams(location.search);
const requested = params.get("board");
readWindow = params.get("window") === "1";
if (requested) showBoard(requested);
else showBoards();
