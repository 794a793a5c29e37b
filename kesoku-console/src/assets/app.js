// The kesoku console's page: plain JavaScript, no build step. Everything a
// model, a tool or a user wrote is shown with textContent, never parsed as
// markup, and bounded (CSS, and the cut below).
"use strict";

const CSRF = document.querySelector('meta[name="csrf"]').content;
const main = document.getElementById("main");
const live = document.getElementById("live");
// What one message may show before it is cut (a gigantic line stays
// bounded: the page keeps responding).
const SHOWN = 20000;
let closeEvents = null;

// An element with our own attributes (never a message's) and children.
function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "text") e.textContent = v;
    else e.setAttribute(k, v);
  }
  for (const c of children) if (c != null) e.append(c);
  return e;
}

function shown(text) {
  const s = String(text ?? "");
  return s.length > SHOWN ? s.slice(0, SHOWN) + ` … (${s.length - SHOWN} more characters)` : s;
}

function json(value) {
  return el("pre", { text: shown(JSON.stringify(value, null, 2)) });
}

async function api(path, opts) {
  const init = Object.assign({ credentials: "same-origin" }, opts || {});
  init.headers = { "content-type": "application/json", "x-csrf-token": CSRF };
  const r = await fetch(path, init);
  const body = await r.json().catch(() => ({}));
  if (!r.ok) throw new Error(body.error || r.statusText);
  return body;
}

function announce(text) {
  live.textContent = shown(text).slice(0, 200);
}

function failure(e) {
  const p = el("p", { class: "error", role: "alert", text: String(e.message || e) });
  main.prepend(p);
}

// --- sessions -------------------------------------------------------------

async function sessionsView(offset = 0, q = "") {
  const search = el("input", { type: "search", id: "q", "aria-label": "Search sessions" });
  search.value = q;
  const form = el("form", { role: "search" }, el("label", { for: "q", text: "Search " }), search,
    el("button", { type: "submit", text: "Search" }));
  form.onsubmit = (ev) => { ev.preventDefault(); sessionsView(0, search.value); };
  const body = el("tbody");
  const table = el("table", { "aria-label": "Sessions" },
    el("thead", {}, el("tr", {}, ...["Session", "Title", "Status", "Messages", "Last activity"].map(h => el("th", { scope: "col", text: h })))),
    body);
  const pager = el("p");
  main.replaceChildren(el("h1", { text: "Sessions" }), form, table, pager);
  try {
    const page = await api(`/api/sessions?offset=${offset}&limit=50&q=${encodeURIComponent(q)}`);
    for (const s of page.sessions) {
      const link = el("a", { href: "#/s/" + encodeURIComponent(s.id), text: s.id });
      body.append(el("tr", {}, el("td", {}, link), el("td", { text: shown(s.title || "") }),
        el("td", { class: "status-" + s.status, text: s.status }),
        el("td", { text: String(s.messages) }), el("td", { text: new Date(s.updated).toLocaleString() })));
    }
    pager.textContent = `${page.total} sessions `;
    if (offset > 0) {
      const prev = el("button", { type: "button", text: "Newer" });
      prev.onclick = () => sessionsView(Math.max(0, offset - 50), q);
      pager.append(prev);
    }
    if (offset + 50 < page.total) {
      const next = el("button", { type: "button", text: "Older" });
      next.onclick = () => sessionsView(offset + 50, q);
      pager.append(next);
    }
  } catch (e) { failure(e); }
}

// --- one session ------------------------------------------------------------

// One stored message, as what it is. Results are put with their calls.
function render(list, m) {
  if (m.metadata && m.metadata.decides) return; // a decision: shown by its call's result
  if (m.type === "tool_result" && m.parent_id) {
    const call = list.querySelector(`[data-call="${CSS.escape(m.parent_id)}"]`);
    if (call) {
      const res = el("div", { class: m.metadata && m.metadata.tool_error ? "error" : "" },
        el("span", { class: "role", text: "result" }), el("div", { class: "content", text: shown(m.content) }));
      if (m.metadata && m.metadata.tool_result !== undefined) res.append(json(m.metadata.tool_result));
      call.append(res);
      return;
    }
  }
  const item = el("li", { "data-id": m.id });
  if (m.role === "user") item.classList.add("user");
  if (m.type === "tool_call") {
    item.setAttribute("data-call", m.id);
    const details = el("details", {}, el("summary", { text: "→ " + (m.metadata?.tool_name || "call") }),
      json(m.metadata?.arguments ?? {}));
    item.append(details);
  } else {
    if (m.metadata && m.metadata.progress) item.classList.add("progress");
    if (m.role === "system" || (m.metadata && (m.metadata.summary || m.metadata.feedback || m.metadata.guardrail))) item.classList.add("note");
    item.append(el("span", { class: "role", text: m.metadata?.agent ? `${m.role} · ${m.metadata.agent}` : m.role }),
      el("div", { class: "content", text: shown(m.content) }));
  }
  const usage = m.metadata && m.metadata.usage;
  if (usage) item.append(el("div", { class: "meta", text: `tokens: ${usage.input_tokens ?? 0} in, ${usage.output_tokens ?? 0} out` }));
  list.append(item);
}

// What a nested agent stored, under the call that runs it.
function renderNested(list, delta) {
  const top = delta.path[0];
  let host = list.querySelector(`[data-call="${CSS.escape(top.call_id)}"]`);
  if (!host) host = list;
  let nested = host.querySelector(":scope > ol.nested");
  if (!nested) { nested = el("ol", { class: "nested", "aria-label": "Agent " + top.tool }); host.append(nested); }
  render(nested, delta.kind.message);
}

async function sessionView(id) {
  const list = el("ol", { class: "messages", "aria-label": "Messages" });
  const older = el("button", { type: "button", text: "Older messages" });
  const streaming = el("div", { class: "streaming", "aria-live": "off" });
  const text = el("textarea", { id: "prompt", "aria-label": "Prompt", rows: "2" });
  const send = el("button", { type: "submit", text: "Send" });
  const stop = el("button", { type: "button", text: "Interrupt" });
  const form = el("form", { class: "prompt" }, text, send, stop);
  main.replaceChildren(el("h1", { text: "Session " + id }), older, list, streaming, form);
  const enc = encodeURIComponent(id);
  let oldest = null;
  const seen = new Set();
  async function load() {
    try {
      const page = await api(`/api/sessions/${enc}/messages?limit=100` + (oldest ? `&before=${oldest}` : ""));
      const frag = el("ol");
      for (const { seq, message } of page.messages) { seen.add(message.id); render(frag, message); }
      if (page.messages.length) oldest = page.messages[0].seq;
      list.prepend(...frag.children);
      older.hidden = !page.more;
    } catch (e) { if (oldest === null) older.hidden = true; else failure(e); }
  }
  older.onclick = load;
  await load();
  const events = new EventSource(`/api/sessions/${enc}/events`);
  closeEvents = () => events.close();
  events.addEventListener("message", (ev) => {
    const { message } = JSON.parse(ev.data);
    if (seen.has(message.id)) return;
    seen.add(message.id);
    if (message.role === "assistant" && message.type === "text") streaming.textContent = "";
    render(list, message);
    announce(`${message.role}: ${message.content}`);
  });
  events.addEventListener("delta", (ev) => {
    const delta = JSON.parse(ev.data);
    if (delta.path && delta.path.length) {
      if (delta.kind && delta.kind.message) renderNested(list, delta);
    } else if (delta.kind && typeof delta.kind.text === "string") {
      streaming.textContent = shown(streaming.textContent + delta.kind.text);
    }
  });
  form.onsubmit = async (ev) => {
    ev.preventDefault();
    if (!text.value.trim()) return;
    try { await api(`/api/sessions/${enc}/prompt`, { method: "POST", body: JSON.stringify({ text: text.value }) }); text.value = ""; }
    catch (e) { failure(e); }
  };
  stop.onclick = async () => {
    try { await api(`/api/sessions/${enc}/interrupt`, { method: "POST", body: "{}" }); announce("interrupted"); }
    catch (e) { failure(e); }
  };
}

// --- approvals --------------------------------------------------------------

async function approvalsView() {
  const body = el("tbody");
  main.replaceChildren(el("h1", { text: "Waiting for approval" }),
    el("table", { "aria-label": "Calls waiting for approval" },
      el("thead", {}, el("tr", {}, ...["Tool", "Arguments", "Session", "Asked", "Deadline", "Decision"].map(h => el("th", { scope: "col", text: h })))),
      body));
  try {
    const { approvals } = await api("/api/approvals");
    if (!approvals.length) body.append(el("tr", {}, el("td", { colspan: "6", text: "Nothing waits." })));
    for (const a of approvals) {
      const reason = el("input", { type: "text", "aria-label": `Reason to deny ${a.tool}` });
      const yes = el("button", { type: "button", text: "Approve", "aria-label": `Approve ${a.tool}` });
      const no = el("button", { type: "button", text: "Deny", "aria-label": `Deny ${a.tool}` });
      const decide = async (approve) => {
        try {
          await api(`/api/approvals/${encodeURIComponent(a.id)}`, { method: "POST", body: JSON.stringify({ approve, reason: reason.value }) });
          announce(approve ? `approved ${a.tool}` : `denied ${a.tool}`);
          approvalsView();
        } catch (e) { failure(e); }
      };
      yes.onclick = () => decide(true);
      no.onclick = () => decide(false);
      const where = (a.path || []).map(v => v.tool).join(" > ");
      body.append(el("tr", { "data-approval": a.id },
        el("td", { text: where ? `${where} > ${a.tool}` : a.tool }), el("td", {}, json(a.arguments)),
        el("td", {}, el("a", { href: "#/s/" + encodeURIComponent(a.session_id), text: a.session_id })),
        el("td", { text: a.asked ? new Date(a.asked).toLocaleString() : "" }),
        el("td", { text: a.deadline ? new Date(a.deadline).toLocaleString() : "none" }),
        el("td", {}, yes, " ", reason, " ", no)));
    }
  } catch (e) { failure(e); }
}

function route() {
  if (closeEvents) { closeEvents(); closeEvents = null; }
  const h = location.hash;
  if (h.startsWith("#/s/")) sessionView(decodeURIComponent(h.slice(4)));
  else if (h === "#/approvals") approvalsView();
  else sessionsView();
  main.focus();
}

window.addEventListener("hashchange", route);
route();
