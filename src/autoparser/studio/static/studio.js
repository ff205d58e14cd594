// autoparser studio: a thin client over the server's JSON API (docs/studio.md).
// Every request carries the template and the conversation; every error is shown in the
// pane it concerns (error.pane of the answer). No framework, nothing fetched but /api/*.
"use strict";

const $ = (id) => document.getElementById(id);
const state = { variants: {}, analysis: null, markers: [], special: [], timer: null, replayTimer: null };

const WEATHER_TOOL = {
  type: "function",
  function: {
    name: "get_weather",
    description: "Get the current weather in a city.",
    parameters: {
      type: "object",
      properties: { city: { type: "string" }, unit: { type: "string", enum: ["celsius", "fahrenheit"] } },
      required: ["city"],
    },
  },
};
const call = (id, city) => ({ id, type: "function", function: { name: "get_weather", arguments: JSON.stringify({ city }) } });
const PRESETS = {
  plain: { messages: [{ role: "user", content: "What's the weather like in Paris?" }], tools: null },
  system: {
    messages: [
      { role: "system", content: "You are a helpful assistant." },
      { role: "user", content: "What's the weather like in Paris?" },
    ],
    tools: null,
  },
  tools: { messages: [{ role: "user", content: "What's the weather like in Paris?" }], tools: [WEATHER_TOOL] },
  tool_result: {
    messages: [
      { role: "user", content: "What's the weather like in Paris?" },
      { role: "assistant", content: null, tool_calls: [call("call00001", "Paris")] },
      { role: "tool", tool_call_id: "call00001", content: "{\"temperature\": 21}" },
    ],
    tools: [WEATHER_TOOL],
  },
  parallel: {
    messages: [
      { role: "user", content: "Weather in Paris and in Rome?" },
      { role: "assistant", content: null, tool_calls: [call("call00001", "Paris"), call("call00002", "Rome")] },
      { role: "tool", tool_call_id: "call00001", content: "{\"temperature\": 21}" },
      { role: "tool", tool_call_id: "call00002", content: "{\"temperature\": 25}" },
    ],
    tools: [WEATHER_TOOL],
  },
  reasoning: {
    messages: [
      { role: "user", content: "What is 2 + 2?" },
      { role: "assistant", content: "4.", reasoning_content: "Two plus two is four." },
      { role: "user", content: "And 3 + 3?" },
    ],
    tools: null,
    thinking: "on",
  },
};

// ------------------------------------------------------------------------------ helpers

function escapeHtml(text) {
  return text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
}

// Whitespace made visible: a dot for a space, an arrow for a tab, a return sign before a newline.
function visible(text) {
  return escapeHtml(text)
    .replace(/ /g, '<span class="ws">·</span>')
    .replace(/\t/g, '<span class="ws">→</span>\t')
    .replace(/\n/g, '<span class="ws">↵</span>\n');
}

function el(tag, attrs, text) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
  if (text !== undefined) node.textContent = text;
  return node;
}

function setStatus(text) { $("status").textContent = text; }

function showError(pane, error) {
  const box = $("error-" + pane) || $("error-template");
  box.hidden = false;
  box.textContent = `${error.type}: ${error.message}`;
  box.dataset.field = error.field || "";
}

function clearErrors() {
  for (const box of document.querySelectorAll(".pane-error")) { box.hidden = true; box.textContent = ""; }
}

function parseJsonField(id, fallback) {
  const text = $(id).value.trim();
  if (!text) return fallback;
  try {
    return JSON.parse(text);
  } catch (exc) {
    throw { pane: "conversation", type: "JSON", message: `${id}: not JSON: ${exc.message}`, field: id };
  }
}

// tool_choice: auto / none / required, or one tool by name ("function:NAME" in the menu).
function toolChoice() {
  const value = $("tool-choice").value;
  if (!value.startsWith("function:")) return value;
  return { type: "function", function: { name: value.slice("function:".length) } };
}

function updateToolChoices(tools) {
  const select = $("tool-choice");
  const current = select.value;
  const names = (Array.isArray(tools) ? tools : [])
    .map((t) => (t && t.function && t.function.name) || (t && t.name))
    .filter((n) => typeof n === "string");
  const wanted = ["auto", "none", "required"].concat(names.map((n) => "function:" + n));
  const have = [...select.options].map((o) => o.value);
  if (wanted.join("\n") === have.join("\n")) return;
  select.textContent = "";
  for (const value of wanted) {
    select.appendChild(el("option", { value }, value.startsWith("function:") ? value.slice(9) + " (named)" : value));
  }
  select.value = wanted.includes(current) ? current : "auto";
}

function requestBody(extra) {
  const thinking = $("thinking").value;
  const tools = parseJsonField("tools", null);
  updateToolChoices(tools);
  return Object.assign({
    template: $("template-source").value,
    bos_token: $("bos-token").value,
    eos_token: $("eos-token").value,
    messages: parseJsonField("messages", []),
    tools,
    tool_choice: toolChoice(),
    enable_thinking: thinking === "" ? null : thinking === "on",
    template_kwargs: parseJsonField("kwargs", {}),
    add_generation_prompt: $("gen-prompt").checked,
  }, extra || {});
}

function outputBody() {
  return {
    output: $("output").value,
    finish_reason: $("finish-length").checked ? "length" : null,
    chunk_size: parseInt($("chunk-size").value, 10) || 1,
    tool_call_deltas: $("call-deltas").value,
  };
}

// The launch's token, from the URL's fragment (#token=...: never sent to a server, never in
// a Referer); every /api call carries it, so no other page can use the API.
const TOKEN = new URLSearchParams(location.hash.slice(1)).get("token") || "";
const TOKEN_HEADER = { "X-Studio-Token": TOKEN };

// POST to the API; answers the JSON, or shows the error in its pane and answers null.
async function api(path, body, pane) {
  let response;
  try {
    response = await fetch(path, { method: "POST", headers: { "Content-Type": "application/json", ...TOKEN_HEADER }, body: JSON.stringify(body) });
  } catch (exc) {
    showError(pane, { type: "NetworkError", message: "the studio server does not answer" });
    return null;
  }
  const data = await response.json().catch(() => null);
  if (!response.ok || data === null) {
    const error = (data && data.error) || { type: "HTTP " + response.status, message: "unexpected answer", pane };
    showError(error.pane === "page" ? pane : error.pane || pane, error);
    return null;
  }
  return data;
}

// ----------------------------------------------------------------------------- template

function showTemplate(errorLine) {
  const lines = $("template-source").value.split("\n");
  const view = $("template-view");
  view.textContent = "";
  lines.forEach((line, i) => {
    const row = el("span", { class: "line" + (errorLine === i + 1 ? " error-line" : "") });
    row.dataset.line = String(i + 1);
    row.appendChild(el("span", { class: "no" }, String(i + 1)));
    const code = el("span");
    code.innerHTML = escapeHtml(line).replace(/(\{#.*?#\}|\{%.*?%\}|\{\{.*?\}\})/g, (m) => {
      const cls = m.startsWith("{#") ? "jinja-comment" : m.startsWith("{%") ? "jinja-stmt" : "jinja-expr";
      return `<span class="${cls}">${m}</span>`;
    });
    row.appendChild(code);
    row.appendChild(document.createTextNode("\n"));
    view.appendChild(row);
  });
}

function setVariants(payload) {
  state.variants = payload.variants;
  $("template-name").textContent = payload.name;
  const select = $("variant");
  select.textContent = "";
  for (const name of Object.keys(payload.variants)) select.appendChild(el("option", { value: name }, name));
  $("template-source").value = Object.values(payload.variants)[0] || "";
  $("bos-token").value = payload.bos_token || "";
  $("eos-token").value = payload.eos_token || "";
}

async function loadText(text, name) {
  clearErrors();
  const payload = await api("/api/load", { text, name }, "template");
  if (payload) { setVariants(payload); refresh(); }
}

// ------------------------------------------------------------------------------ analysis

function kvRows(box, rows) {
  box.textContent = "";
  for (const [k, v] of rows) {
    box.appendChild(el("span", { class: "k" }, k));
    box.appendChild(el("span", { class: "v" }, v));
  }
}

function flatten(data, prefix, out) {
  for (const [k, v] of Object.entries(data)) {
    const name = prefix + k;
    if (v && typeof v === "object" && !Array.isArray(v)) flatten(v, name + ".", out);
    else if (k !== "mode") out.push([name, typeof v === "string" ? (v ? JSON.stringify(v) : "-") : JSON.stringify(v)]);
  }
  return out;
}

function showAnalysis(data) {
  const a = data.analysis;
  state.analysis = a;
  state.markers = data.markers;
  state.special = a.preserved_tokens || [];
  const summary = $("analysis-summary");
  summary.textContent = "";
  const badges = [
    `reasoning: ${a.reasoning.mode}`, `content: ${a.content.mode}`, `tools: ${a.tools.format.mode}`,
  ];
  for (const b of badges) summary.appendChild(el("span", { class: "badge" }, b));
  if (a.handler) summary.appendChild(el("span", { class: "badge warn" }, `hand-written format: ${a.handler}`));
  for (const w of a.workarounds) summary.appendChild(el("span", { class: "badge warn" }, `workaround: ${w}`));
  const adapted = Object.entries(data.quirks).filter(([k, v]) => v === true || (typeof v === "string" && v && k !== "reasoning_field")).map(([k]) => k);
  const needs = Object.entries(data.caps).filter(([k, v]) => k.startsWith("requires_") && v === true).map(([k]) => k);
  const polyfills = el("div", { id: "polyfills" });
  polyfills.textContent = adapted.concat(needs).length
    ? `polyfills adapt requests to: ${adapted.concat(needs).join(", ")}`
    : "polyfills: none needed (requests render as they are)";
  summary.appendChild(polyfills);
  const list = $("verification");
  list.textContent = "";
  const check = a.verification;
  if (check) {
    const failed = new Map(check.failures.map((f) => [f.check, f.reason]));
    for (const name of check.checks) {
      const item = el("li", { class: failed.has(name) ? "fail" : "pass" });
      item.textContent = failed.has(name) ? `✗ ${name}: ${failed.get(name)}` : `✓ ${name}`;
      list.appendChild(item);
    }
    for (const [name, why] of check.skipped) list.appendChild(el("li", { class: "muted" }, `skipped ${name}: ${why}`));
  }
  const box = $("evidence");
  box.textContent = "";
  for (const item of data.evidence) {
    const details = el("details", { class: "evidence" });
    const summaryLine = el("summary");
    summaryLine.appendChild(el("span", { class: "field-label" }, item.field + " "));
    const mark = el("mark", { class: "marker" });
    mark.innerHTML = visible(item.marker);
    summaryLine.appendChild(mark);
    if (!item.found) summaryLine.appendChild(el("span", { class: "badge warn" }, "not in the render (set by a workaround or format)"));
    details.appendChild(summaryLine);
    details.appendChild(el("div", { class: "muted" }, item.question));
    const pair = el("div", { class: "pair" });
    for (const [label, text] of [["without", item.without], ["with", item.with]]) {
      const pre = el("pre", { class: "code" });
      if (text === null) pre.textContent = "(the template refused this conversation)";
      else pre.innerHTML = highlight(text, [{ marker: item.marker, field: item.field }], []);
      const col = el("div");
      col.appendChild(el("div", { class: "muted" }, label));
      col.appendChild(pre);
      pair.appendChild(col);
    }
    details.appendChild(pair);
    box.appendChild(details);
  }
  const caps = Object.entries(data.caps).map(([k, v]) => ["caps." + k, JSON.stringify(v)]);
  const quirks = Object.entries(data.quirks).map(([k, v]) => ["quirks." + k, JSON.stringify(v)]);
  kvRows($("caps"), caps.concat(quirks));
  const copy = JSON.parse(JSON.stringify(a));
  delete copy.verification;
  kvRows($("fields"), flatten(copy, "", []));
}

// -------------------------------------------------------------------------------- prompt

// Non-overlapping [start, end, class, title] ranges of the markers and special tokens.
function ranges(text, markers, special) {
  const found = [];
  const taken = (s, e) => found.some((r) => s < r[1] && r[0] < e);
  const add = (needle, cls, title) => {
    if (!needle) return;
    for (let at = text.indexOf(needle); at >= 0; at = text.indexOf(needle, at + needle.length)) {
      if (!taken(at, at + needle.length)) found.push([at, at + needle.length, cls, title]);
    }
  };
  for (const m of markers) add(m.marker, "marker", m.field);
  for (const s of special) add(s, "special", "special token");
  return found.sort((x, y) => x[0] - y[0]);
}

function highlight(text, markers, special) {
  let html = "";
  let pos = 0;
  for (const [s, e, cls, title] of ranges(text, markers, special)) {
    html += visible(text.slice(pos, s));
    const tag = cls === "marker" ? "mark" : "span";
    html += `<${tag} class="${cls}" title="${escapeHtml(title)}">${visible(text.slice(s, e))}</${tag}>`;
    pos = e;
  }
  return html + visible(text.slice(pos));
}

function firstDifference(a, b) {
  const n = Math.min(a.length, b.length);
  let lo = 0;
  // Binary search on equal prefixes (no per-character loop).
  let hi = n;
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    if (a.slice(0, mid) === b.slice(0, mid)) lo = mid; else hi = mid - 1;
  }
  return lo;
}

function compareLine(label, ours, theirs, error) {
  if (theirs === null || theirs === undefined) return `${label}: ${error || "not rendered"}`;
  if (theirs === ours) return `${label}: identical`;
  const at = firstDifference(ours, theirs);
  return `${label}: differs at character ${at}: ours ${JSON.stringify(ours.slice(at, at + 40))} vs ${JSON.stringify(theirs.slice(at, at + 40))}`;
}

function showPrompt(data) {
  const prompt = data.prompt;
  const special = state.special.concat([$("bos-token").value, $("eos-token").value].filter(Boolean));
  const at = data.generation_prompt_at;
  let html;
  if (at >= 0) {
    html = highlight(prompt.slice(0, at), state.markers, special)
      + `<span class="gen-prompt" title="generation prompt">${highlight(prompt.slice(at), state.markers, special)}</span>`;
  } else {
    html = highlight(prompt, state.markers, special);
  }
  $("prompt").innerHTML = html;
  const lines = [compareLine("without polyfills", prompt, data.without_polyfills, data.without_polyfills_error)];
  const t = data.transformers;
  if (!t.available) lines.push(`transformers: ${t.reason}`);
  else lines.push(compareLine("transformers (no polyfills)", data.without_polyfills || prompt, t.prompt, t.error));
  const box = $("prompt-compare");
  box.textContent = "";
  for (const line of lines) box.appendChild(el("div", { class: "compare" }, line));
}

// -------------------------------------------------------------------------------- output

function showParsed(data) {
  const text = $("output").value;
  let html = "";
  for (const span of data.spans) {
    // The reason a span was tolerated or refused, next to it (and in its tooltip).
    const reasons = span.findings || [];
    const title = escapeHtml([span.kind, ...reasons].join("\n"));
    const cls = reasons.length ? ` finding` : "";
    html += `<span class="span-${span.kind}${cls}" title="${title}">${visible(text.slice(span.start, span.end))}</span>`;
    if (reasons.length) html += `<sup class="finding-mark" title="${title}">⚠</sup>`;
  }
  $("output-spans").innerHTML = html;
  const box = $("parsed");
  box.textContent = "";
  const m = data.message;
  const meta = el("div");
  meta.appendChild(el("span", { class: "badge" }, `finish_reason: ${data.finish_reason}`));
  if (data.truncated) meta.appendChild(el("span", { class: "badge warn", id: "truncated" }, "truncated"));
  box.appendChild(meta);
  if ((data.findings || []).length) {
    const list = el("ul", { class: "findings", id: "findings" });
    for (const f of data.findings) list.appendChild(el("li", { class: `finding-${f.outcome}` }, f.text));
    box.appendChild(list);
  }
  if (m.reasoning_content) {
    box.appendChild(el("div", { class: "field-label" }, "reasoning_content"));
    box.appendChild(el("pre", { class: "code", id: "parsed-reasoning" }, m.reasoning_content));
  }
  box.appendChild(el("div", { class: "field-label" }, "content"));
  box.appendChild(el("pre", { class: "code", id: "parsed-content" }, m.content === null ? "null" : m.content));
  for (const tc of m.tool_calls || []) {
    const card = el("div", { class: "tool-call" });
    card.appendChild(el("span", { class: "name" }, tc.function.name));
    card.appendChild(el("span", { class: "muted" }, ` ${tc.id}`));
    card.appendChild(el("div", { class: "args" }, tc.function.arguments));
    box.appendChild(card);
  }
}

async function replay() {
  clearTimeout(state.replayTimer);
  $("error-output").hidden = true;
  const list = $("deltas");
  list.textContent = "";
  let body;
  try { body = requestBody(outputBody()); } catch (error) { showError(error.pane, error); return; }
  const data = await api("/api/stream", body, "output");
  if (!data) return;
  const items = [];
  data.chunks.forEach((chunk, i) => {
    for (const delta of chunk.deltas) items.push([i, chunk.text, delta, !!chunk.final]);
  });
  let next = 0;
  const step = () => {
    if (next >= items.length) {
      const done = el("li", { class: "final" }, `done: ${data.chunks.length} chunks, ${items.length} deltas`);
      done.id = "replay-done";
      list.appendChild(done);
      return;
    }
    const [i, text, delta, final] = items[next++];
    const where = final ? "finish()" : `chunk ${i} ${JSON.stringify(text)}`;
    list.appendChild(el("li", { class: "delta" }, `${where} → ${JSON.stringify(delta)}`));
    state.replayTimer = setTimeout(step, 25);
  };
  step();
}

// ------------------------------------------------------------------------------- grammar

function showGrammar(data) {
  const meta = $("grammar-meta");
  meta.textContent = "";
  if (data.grammar === null) {
    meta.appendChild(el("div", { class: "muted" }, "no grammar for this request (no tools, tool_choice none, no response format)"));
  } else {
    meta.appendChild(el("div", {}, `lazy: ${data.grammar_lazy ? "yes" : "no"}`));
    for (const t of data.grammar_triggers) meta.appendChild(el("div", { class: "trigger" }, `trigger (${t.kind}): ${JSON.stringify(t.value)}${t.reason ? " — " + t.reason : ""}`));
    meta.appendChild(el("div", {}, `preserved tokens: ${JSON.stringify(data.preserved_tokens)}`));
    meta.appendChild(el("div", {}, `stops: ${JSON.stringify(data.additional_stops)}`));
  }
  const acc = data.accepts;
  const box = $("accepts");
  box.textContent = "";
  if (acc) {
    const text = !acc.checked ? `not checked: ${acc.reason}` : acc.accepted ? `llguidance: the grammar accepts the output${acc.reason ? " (" + acc.reason + ")" : ""}` : `llguidance: the grammar refuses the output: ${acc.reason}`;
    box.appendChild(el("div", { class: acc.checked ? (acc.accepted ? "pass" : "fail") : "muted" }, text));
  }
  $("grammar").textContent = data.grammar || "";
}

function showExport(data) {
  $("export-response-template").textContent = data.response_template
    ? JSON.stringify(data.response_template, null, 2) : `not expressible: ${data.response_template_error}`;
  $("export-vllm").textContent = "vllm serve MODEL " + data.vllm_flags.join(" ");
  $("export-llamacpp").textContent = JSON.stringify(data.llamacpp_completion, null, 2);
  $("export-pytest").textContent = data.pytest;
}

// ------------------------------------------------------------------------------- refresh

async function refresh() {
  clearErrors();
  showTemplate(null);
  setStatus("working…");
  let body;
  try { body = requestBody(outputBody()); } catch (error) { showError(error.pane, error); setStatus(""); return; }
  const analysis = await api("/api/analyze", body, "analysis");
  if (!analysis) {
    const box = $("error-template");
    const line = /line (\d+)/.exec(box.textContent);
    if (line) showTemplate(parseInt(line[1], 10));
    setStatus("template error");
    return;
  }
  showAnalysis(analysis);
  const jobs = [
    api("/api/render", body, "prompt").then((d) => d && showPrompt(d)),
    api("/api/grammar", body, "grammar").then((d) => d && showGrammar(d)),
    api("/api/export", body, "export").then((d) => d && showExport(d)),
  ];
  if (body.output) jobs.push(api("/api/parse", body, "output").then((d) => d && showParsed(d)));
  await Promise.all(jobs);
  setStatus("ready");
  document.body.dataset.ready = String(Date.now());
}

function later() {
  clearTimeout(state.timer);
  state.timer = setTimeout(refresh, 350);
}

function applyPreset(name) {
  const preset = PRESETS[name];
  $("messages").value = JSON.stringify(preset.messages, null, 2);
  $("tools").value = preset.tools ? JSON.stringify(preset.tools, null, 2) : "";
  $("thinking").value = preset.thinking || "";
}

async function start() {
  const response = await fetch("/api/template", { headers: TOKEN_HEADER });
  const initial = await response.json();
  if (!response.ok) {
    showError("template", initial.error || { type: "HTTP " + response.status, message: "unexpected answer" });
    return;
  }
  setVariants(initial);
  applyPreset($("preset").value);
  $("output").value = initial.output || "";
  for (const id of ["template-source", "bos-token", "eos-token", "messages", "tools", "kwargs", "output", "chunk-size"]) {
    $(id).addEventListener("input", later);
  }
  for (const id of ["tool-choice", "thinking", "gen-prompt", "finish-length", "call-deltas"]) {
    $(id).addEventListener("change", refresh);
  }
  $("preset").addEventListener("change", () => { applyPreset($("preset").value); refresh(); });
  $("variant").addEventListener("change", () => { $("template-source").value = state.variants[$("variant").value]; refresh(); });
  $("replay").addEventListener("click", replay);
  $("template-file").addEventListener("change", async (event) => {
    const file = event.target.files[0];
    if (file) loadText(await file.text(), file.name);
  });
  document.addEventListener("dragover", (event) => { event.preventDefault(); document.body.classList.add("dragging"); });
  document.addEventListener("dragleave", () => document.body.classList.remove("dragging"));
  document.addEventListener("drop", async (event) => {
    event.preventDefault();
    document.body.classList.remove("dragging");
    const file = event.dataTransfer.files[0];
    if (file) loadText(await file.text(), file.name);
  });
  await refresh();
}

start();
