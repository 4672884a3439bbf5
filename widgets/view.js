// The live view of a Cortex run (anywidget ESM, no bundler, no dependencies).
//
// The Python side (cortex_kernel/jupyter/view.py) sends coalesced deltas as
// custom messages {seq, now, ops} at most ~20 times a second, and a whole
// document only in the `snapshot` trait (start and end of the run) or in
// reply to {type: "sync"}. The document lives per model (keyed by the
// `view_id` trait, because anywidget hands initialize() and render()
// different model proxies), so every view of the same run shows the same
// state and a view opened mid-run catches up with one sync.

const STORES = new Map();

const ICONS = {
  parsing: "…",
  queued: "○",
  waiting: "◔",
  running: "⟳",
  "still running": "⟳", // cancelled, but its thread could not be stopped
  succeeded: "✓",
  failed: "✗",
  skipped: "↷",
  cancelled: "⊘",
  "awaiting approval": "⏸",
};

function emptyDoc() {
  return {
    run_id: "", model: "", message: "", status: "running", status_message: "", answer: "", grounding: "",
    thoughts: [], text: "", responses: [], nodes: {}, order: [], warnings: [], variables: {},
    footer: { turns: 0, tokens: 0, cost: null, seconds: 0 }, waiting: null,
    timeline: { turns: [], segs: [], bars: [], more: 0 },
  };
}

function storeFor(model) {
  const id = model.get("view_id");
  let store = STORES.get(id);
  if (!store) {
    store = { doc: null, seq: -1, clock: { now: 0, at: performance.now() }, views: new Set() };
    STORES.set(id, store);
  }
  return store;
}

function loadSnapshot(store, snap) {
  if (!snap || !snap.doc) return;
  if (store.doc && snap.seq < store.seq) return; // older than what we have
  store.doc = structuredClone(snap.doc);
  store.seq = snap.seq;
  setClock(store, snap.now);
}

function setClock(store, now) {
  if (typeof now === "number") store.clock = { now, at: performance.now() };
}

function applyOps(doc, ops) {
  for (const op of ops) {
    switch (op[0]) {
      case "run":
        Object.assign(doc, op[1]);
        break;
      case "th": {
        const [, i, text, done] = op;
        while (doc.thoughts.length <= i) doc.thoughts.push({ text: "", done: false });
        doc.thoughts[i].text += text;
        doc.thoughts[i].done = done;
        break;
      }
      case "tx":
        doc.text += op[1];
        break;
      case "rs": {
        const [, i, text, final, done] = op;
        while (doc.responses.length <= i) doc.responses.push({ text: "", final, done: false });
        const r = doc.responses[i];
        r.text += text;
        r.final = final;
        r.done = done;
        break;
      }
      case "n": {
        const [, id, fields] = op;
        if (!doc.nodes[id]) {
          doc.nodes[id] = { id, deps: [], state: "queued" };
          doc.order.push(id);
        }
        Object.assign(doc.nodes[id], fields);
        break;
      }
      case "w":
        doc.warnings.push(op[1]);
        break;
      case "v":
        doc.variables[op[1]] = op[2];
        break;
      case "f":
        doc.footer = op[1];
        break;
      case "tl": {
        // ["tl", section, index, value]: one turn, segment or bar of the timeline.
        const [, section, i, value] = op;
        const tl = doc.timeline || (doc.timeline = { turns: [], segs: [], bars: [], more: 0 });
        if (section === "more") tl.more = value;
        else if (Array.isArray(tl[section])) tl[section][i] = value;
        break;
      }
    }
  }
}

function onMessage(model, store, msg) {
  if (msg.snapshot) {
    store.doc = structuredClone(msg.snapshot);
    store.seq = msg.seq;
    setClock(store, msg.now);
  } else if (msg.ops) {
    if (!store.doc) return; // a sync reply is on its way
    if (msg.seq <= store.seq) return; // already in the snapshot
    if (msg.seq !== store.seq + 1) {
      model.send({ type: "sync" }); // a gap: ask for the whole document once
      return;
    }
    applyOps(store.doc, msg.ops);
    store.seq = msg.seq;
    setClock(store, msg.now);
  } else {
    return;
  }
  for (const redraw of store.views) redraw();
}

// -- a small markdown renderer that builds DOM nodes: model text only ever
// becomes text nodes (never innerHTML), links only to http(s)/mailto URLs --

// The element `tag` holding `text` as a text node (and `className`, if given).
function textElement(tag, text, className) {
  const e = document.createElement(tag);
  if (className) e.className = className;
  e.textContent = text;
  return e;
}

// A <details> of class className, its <summary> label, showing text in a <pre>.
function collapsed(className, label, text) {
  const details = document.createElement("details");
  details.className = className;
  details.append(textElement("summary", label), textElement("pre", text));
  return details;
}

// An absolute http, https or mailto URL, or null: no javascript:, data:,
// relative (the Jupyter server's own API) or other URL from model text.
function safeHref(url) {
  try {
    const parsed = new URL(url);
    return ["http:", "https:", "mailto:"].includes(parsed.protocol) ? parsed.href : null;
  } catch {
    return null;
  }
}

const INLINE = /`([^`]+)`|\*\*([^*]+)\*\*|\*([^*\s][^*]*)\*|\[([^\]]+)\]\(([^)\s]+)\)/g;

// Append `s` to `parent`: `code`, **strong**, *em* and [links](https://…); the rest text.
function inline(parent, s) {
  let at = 0;
  for (const m of s.matchAll(INLINE)) {
    if (m.index > at) parent.append(s.slice(at, m.index));
    at = m.index + m[0].length;
    if (m[1] !== undefined) {
      parent.append(textElement("code", m[1]));
    } else if (m[2] !== undefined || m[3] !== undefined) {
      const e = document.createElement(m[2] !== undefined ? "strong" : "em");
      inline(e, m[2] !== undefined ? m[2] : m[3]);
      parent.append(e);
    } else {
      const href = safeHref(m[5]);
      if (href === null) {
        parent.append(m[0]); // shown as written
        continue;
      }
      const a = document.createElement("a");
      a.href = href;
      a.target = "_blank";
      a.rel = "noopener noreferrer nofollow";
      inline(a, m[4]);
      parent.append(a);
    }
  }
  if (at < s.length) parent.append(s.slice(at));
}

// Markdown as a DocumentFragment: fenced code, headings, lists, paragraphs.
export function markdown(src) {
  const out = document.createDocumentFragment();
  let code = null; // the open fence's <code>
  let list = null;
  let para = [];
  const flushPara = () => {
    if (para.length) inline(out.appendChild(document.createElement("p")), para.join(" "));
    para = [];
  };
  for (const line of String(src).split("\n")) {
    if (/^\s*(```|~~~)/.test(line)) {
      flushPara();
      list = null;
      if (code) {
        code = null;
      } else {
        code = out.appendChild(document.createElement("pre")).appendChild(document.createElement("code"));
      }
      continue;
    }
    if (code) {
      code.append(line + "\n");
      continue;
    }
    const heading = /^(#{1,6})\s+(.*)$/.exec(line);
    const bullet = /^\s*[-*+]\s+(.*)$/.exec(line);
    const numbered = /^\s*\d+[.)]\s+(.*)$/.exec(line);
    if (heading) {
      flushPara();
      list = null;
      inline(out.appendChild(document.createElement(`h${Math.min(heading[1].length + 2, 6)}`)), heading[2]);
    } else if (bullet || numbered) {
      flushPara();
      const kind = bullet ? "UL" : "OL";
      if (!list || list.tagName !== kind) list = out.appendChild(document.createElement(kind));
      inline(list.appendChild(document.createElement("li")), (bullet || numbered)[1]);
    } else if (!line.trim()) {
      flushPara();
      list = null;
    } else {
      list = null;
      para.push(line);
    }
  }
  flushPara();
  return out;
}

// -- rendering --------------------------------------------------------------

function fmtSeconds(s) {
  if (s === null || s === undefined || Number.isNaN(s)) return "";
  return s < 10 ? `${s.toFixed(1)}s` : `${Math.round(s)}s`;
}

function nowOf(store) {
  const { now, at } = store.clock;
  const running = store.doc && store.doc.status === "running";
  return running ? now + (performance.now() - at) / 1000 : now;
}

function elapsedOf(node, store) {
  if (node.t0 === null || node.t0 === undefined) return null;
  const end = node.t1 !== null && node.t1 !== undefined ? node.t1 : nowOf(store);
  return Math.max(0, end - node.t0);
}

// The request's text as the kernel made it visible (viewstate.visible_text):
// every "⟨" opens a marker (a count of spaces, a tab, an invisible or bidi
// code point; a literal "⟨" is itself escaped), set apart here. Text nodes
// only: nothing in it is ever markup.
function fillShown(pre, shown) {
  let at = 0;
  for (const m of shown.matchAll(/⟨[^⟩]*⟩/g)) {
    if (m.index > at) pre.appendChild(document.createTextNode(shown.slice(at, m.index)));
    const mark = document.createElement("span");
    mark.className = "cortex-approval-mark";
    mark.textContent = m[0];
    pre.appendChild(mark);
    at = m.index + m[0].length;
  }
  if (at < shown.length) pre.appendChild(document.createTextNode(shown.slice(at)));
}

// A call marked confirm: true waits for the user: what asks (which run,
// workflow or sub-agent), its exact parameters whole (the box scrolls), and
// Approve / Approve for this cell / Deny buttons. A click answers the
// request's token with the digest of the text this box shows: the kernel
// refuses any other. "for this cell" sends scope "cell" only: the kernel
// reads what it grants (this request's tool) from the waiting request.
function renderApproval(node, store) {
  const box = document.createElement("div");
  box.className = "cortex-approval";
  const head = document.createElement("div");
  head.className = "cortex-approval-head";
  const approval = node.approval;
  head.textContent = `${approval.kind || "tool"} '${approval.tool || ""}'` +
    (approval.asker ? `, asked by ${approval.asker}` : "");
  box.appendChild(head);
  const params = document.createElement("pre");
  params.className = "cortex-approval-params";
  fillShown(params, approval.parameters || "{}");
  box.appendChild(params);
  if (node.approval.decision) {
    const done = document.createElement("div");
    done.className = "cortex-approval-decision";
    done.textContent = node.approval.decision;
    box.appendChild(done);
    return box;
  }
  if (node.state !== "awaiting approval") return box;
  const buttons = [
    ["Approve", "approve", true, "once"],
    ["Approve for this cell", "cell", true, "cell"],
    ["Deny", "deny", false, "once"],
  ];
  for (const [label, name, approved, scope] of buttons) {
    const button = document.createElement("button");
    button.className = `cortex-approval-${name}`;
    button.textContent = label;
    if (scope === "cell") {
      button.title = `Approve this and the rest of this cell's calls to '${approval.tool || ""}'` +
        " (code that writes into your objects still asks)";
    }
    button.addEventListener("click", () => {
      for (const b of box.querySelectorAll("button")) b.disabled = true;
      if (store.model) {
        store.model.send({
          type: "approval", id: node.id, token: approval.token, digest: approval.digest, approved,
          scope,
        });
      }
    });
    box.appendChild(button);
  }
  return box;
}

// "waiting for the model's first token — 1,400 prompt tokens" (the count when known).
export function waitingText(waiting) {
  const count = Number(waiting.prompt_tokens);
  const tokens = Number.isFinite(count) && count > 0 ? ` — ${count.toLocaleString("en-US")} prompt tokens` : "";
  return `waiting for the model's first token${tokens}`;
}

function waitedOf(waiting, store) {
  return Math.max(0, nowOf(store) - (Number(waiting.since) || 0));
}

// A <details> whose open state survives redraws (one per node and kind, per run).
function remembered(details, store, key) {
  if (!store.opened) store.opened = new Set();
  details.open = store.opened.has(key);
  details.addEventListener("toggle", () => {
    if (details.open) store.opened.add(key);
    else store.opened.delete(key);
  });
  return details;
}

function renderNode(node, children, store, depth) {
  const li = document.createElement("li");
  li.className = `cortex-node cortex-${String(node.state).replace(/\s+/g, "-")}`;
  li.dataset.id = node.id;
  li.dataset.state = node.state;
  const row = document.createElement("div");
  row.className = "cortex-row";
  // Ids, names and keys are the model's: text nodes only.
  row.append(
    textElement("span", ICONS[node.state] || "?", "cortex-icon"),
    textElement("span", String(node.id), "cortex-id"),
    textElement("span", node.type || "", "cortex-type"),
    textElement("span", node.name || "", "cortex-name"),
  );
  if (node.mode && node.mode !== "sync") row.append(textElement("span", node.mode, "cortex-mode"));
  if (node.deps && node.deps.length) {
    row.append(textElement("span", `← ${node.deps.join(", ")}`, "cortex-deps"));
  }
  if (node.key) row.append(textElement("span", `→ ${node.key}`, "cortex-key"));
  row.append(textElement("span", node.state, "cortex-state"));
  if (node.attempt > 1) row.append(textElement("span", `attempt ${Number(node.attempt)}`, "cortex-retry"));
  // An internal action or a context feed the agent's permissions refused.
  if (node.audit === "blocked") row.append(textElement("span", "blocked", "cortex-blocked"));
  // Where a cluster ran it; a lost worker's call that Dask ran again shows as a retry.
  if (node.where) {
    const where = textElement("span", `on ${node.where}`, "cortex-where");
    where.title = node.backend || "";
    row.append(where);
  }
  if (node.moved_from) {
    const retried = textElement(
      "span", `↻ retried after worker ${node.moved_from} was lost`, "cortex-retry");
    retried.title = `worker ${node.moved_from} was lost`;
    row.append(retried);
  }
  const elapsed = elapsedOf(node, store);
  const clock = textElement("span", elapsed === null ? "" : fmtSeconds(elapsed), "cortex-elapsed");
  clock.dataset.id = node.id;
  row.append(clock);
  li.appendChild(row);
  const detail = node.error || node.preview;
  if (detail) {
    const d = document.createElement("div");
    d.className = node.error ? "cortex-error" : "cortex-preview";
    d.textContent = detail;
    li.appendChild(d);
  }
  // The failing tool's own frames; what the tool wrote to stderr (its tail, not
  // its result); the agent's code that ran in the notebook's namespace: each
  // collapsed until asked for.
  // What the action was given (the code, once it ran in the notebook, is shown as code;
  // a request for approval, whole in its box).
  for (const [field, label] of [["args", "arguments"], ["traceback", "traceback"], ["log", "stderr"], ["code", "code"]]) {
    if (!node[field] || (field === "args" && (node.code || node.approval))) continue;
    const details = collapsed(`cortex-${field}`, label, node[field]);
    li.appendChild(remembered(details, store, `${node.id}\n${field}`));
  }
  if (node.changes) {
    // What the run changed in the user's variables (⚠: an object changed in place).
    li.appendChild(textElement("div", `changes: ${node.changes}`, "cortex-changes"));
  }
  if (node.approval) li.appendChild(renderApproval(node, store));
  const kids = children.get(node.id) || [];
  if (kids.length) {
    const ul = document.createElement("ul");
    ul.className = "cortex-tree cortex-subtree";
    for (const kid of kids) ul.appendChild(renderNode(kid, children, store, depth + 1));
    li.appendChild(ul);
  }
  return li;
}

// -- the timeline (cortex_kernel/jupyter/viewstate/timeline.py draws the same
// statically): the model's turns coloured by what it wrote, a bar per action
// from its dispatch to its end, lines from each dependency. SVG built as DOM
// nodes; ids and names are the model's: text nodes only. --

const SVG = "http://www.w3.org/2000/svg";
const TL_COLOURS = {
  wait: "#e0e0e0", thought: "#b39ddb", action: "#ffb74d", response: "#64b5f6", text: "#cfd8dc",
  mixed: "#bdbdbd", queued: "#eeeeee", approval: "#ffe082", running: "#90caf9",
  succeeded: "#81c784", failed: "#e57373", skipped: "#ffcc80", cancelled: "#ffcc80",
};
const TL = { width: 640, label: 150, row: 16, bar: 10, axis: 18, legend: 14, rows: 40 };
const TL_LEGEND = [
  ["wait", "first token"], ["thought", "thought"], ["action", "action tag"], ["response", "response"],
  ["queued", "queued"], ["approval", "approval"], ["running", "running"], ["succeeded", "succeeded"],
  ["failed", "failed"],
];

function hasTimeline(doc) {
  const tl = doc.timeline;
  return Boolean(tl && (tl.turns.length || tl.bars.length));
}

function union(spans) {
  const merged = [];
  for (const [a, b] of spans.filter(([a, b]) => b > a).sort((p, q) => p[0] - q[0] || p[1] - q[1])) {
    const last = merged[merged.length - 1];
    if (last && a <= last[1]) last[1] = Math.max(last[1], b);
    else merged.push([a, b]);
  }
  return merged;
}

const spanLength = (spans) => spans.reduce((sum, [a, b]) => sum + b - a, 0);

// Where the time went, as timeline.time_spent: model, actions, both, approvals, the rest.
function timeSpent(doc, end) {
  const tl = doc.timeline;
  const open = (t) => (t === null || t === undefined ? end : t);
  const model = union(tl.turns.map((t) => [t[1], open(t[2])]));
  const tools = union(tl.bars.filter((b) => b[2] !== null).map((b) => [b[2], open(b[3])]));
  const approval = union(tl.bars.filter((b) => b[4] !== null).map((b) => [b[4], open(b[5])]));
  let overlap = 0;
  for (const [a, b] of model) for (const [c, d] of tools) overlap += Math.max(0, Math.min(b, d) - Math.max(a, c));
  const busy = spanLength(union([...model, ...tools, ...approval]));
  return {
    model: spanLength(model), tools: spanLength(tools), overlap,
    approval: spanLength(approval), other: Math.max(0, end - busy),
  };
}

function timelineEnd(doc, store) {
  const tl = doc.timeline;
  let end = doc.status === "running" ? nowOf(store) : doc.footer.seconds || 0;
  for (const s of tl.segs) end = Math.max(end, s[2]);
  for (const b of tl.bars) for (const t of b.slice(1)) if (t !== null) end = Math.max(end, t);
  return Math.max(end, 0.001);
}

function timelineSummary(doc, end) {
  const spent = timeSpent(doc, end);
  const parts = [`model ${spent.model.toFixed(1)}s`];
  if (doc.timeline.bars.length) {
    parts.push(`actions ${spent.tools.toFixed(1)}s (${spent.overlap.toFixed(1)}s while the model wrote)`);
  }
  if (spent.approval) parts.push(`approval ${spent.approval.toFixed(1)}s`);
  parts.push(`other ${spent.other.toFixed(1)}s`);
  return parts.join(" · ");
}

function svgElement(tag, attrs, title) {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
  if (title) {
    const t = document.createElementNS(SVG, "title");
    t.textContent = title;
    e.appendChild(t);
  }
  return e;
}

const secs = (t) => (t === null || t === undefined ? "?" : `${t.toFixed(2)}s`);

function barTitle(node, bar) {
  const label = [node.id, node.type, node.name].filter(Boolean).join(" ");
  const parts = [`${label}: ${node.state || ""}`, `dispatched ${secs(bar[1])}`];
  if (bar[4] !== null) parts.push(`asked for approval ${secs(bar[4])} (answered ${secs(bar[5])})`);
  if (bar[2] !== null) {
    let ran = `ran ${secs(bar[2])}–${secs(bar[3])}`;
    if (bar[3] !== null) ran += ` (${(bar[3] - bar[2]).toFixed(2)}s)`;
    parts.push(ran);
  }
  if (node.deps && node.deps.length) parts.push(`after ${node.deps.join(", ")}`);
  return parts.join(" · ");
}

function drawTimeline(doc, store) {
  const tl = doc.timeline;
  const end = timelineEnd(doc, store);
  const bars = tl.bars.slice(0, TL.rows);
  const hidden = tl.bars.length - bars.length + (tl.more || 0);
  const rows = 1 + bars.length + (hidden ? 1 : 0);
  const height = TL.row * rows + TL.axis + TL.legend;
  const span = TL.width - TL.label - 8;
  const x = (t) => TL.label + (span * Math.min(Math.max(t, 0), end)) / end;
  const svg = svgElement("svg", {
    width: TL.width, height, viewBox: `0 0 ${TL.width} ${height}`,
    "font-family": "sans-serif", "font-size": 10, role: "img", "aria-label": "timeline",
  });
  svg.classList.add("cortex-timeline-svg");
  const rect = (t0, t1, row, fill, title, { size = TL.bar, keep = false, cls = "" } = {}) => {
    if (t1 <= t0 && !keep) return;
    const r = svgElement("rect", {
      x: x(t0), y: row * TL.row + (TL.row - size) / 2, width: Math.max(x(t1) - x(t0), 1), height: size, fill,
    }, title);
    if (cls) r.classList.add(cls);
    svg.appendChild(r);
  };
  const label = (row, text, title, fill = "#555") => {
    const t = svgElement("text", { x: 2, y: row * TL.row + TL.row - 4, fill }, title);
    t.append(text);
    svg.appendChild(t);
  };
  label(0, "model");
  const open = (t) => (t === null || t === undefined ? end : t);
  for (const turn of tl.turns) rect(turn[1], open(turn[2]), 0, "#f5f5f5", `turn ${turn[0]}`, { size: TL.row - 2 });
  for (const [kind, t0, t1] of tl.segs) {
    rect(t0, t1, 0, TL_COLOURS[kind] || "#bdbdbd", `${kind} ${t0.toFixed(2)}–${t1.toFixed(2)}s`, { cls: `cortex-tl-${kind}` });
  }
  const where = new Map();
  bars.forEach((bar, i) => {
    const row = i + 1;
    const node = doc.nodes[bar[0]] || { id: bar[0] };
    where.set(bar[0], [row, bar]);
    let depth = 0;
    for (let p = node.parent; p && doc.nodes[p] && depth < 8; p = doc.nodes[p].parent) depth += 1;
    const title = barTitle(node, bar);
    const text = "  ".repeat(depth) + [bar[0], node.name || node.type || ""].filter(Boolean).join(" ");
    label(row, text.length > 26 ? `${text.slice(0, 25)}…` : text, title);
    const tEnd = open(bar[3]);
    if (bar[1] !== null) rect(bar[1], bar[2] !== null ? bar[2] : tEnd, row, TL_COLOURS.queued, title);
    if (bar[4] !== null) rect(bar[4], open(bar[5]), row, TL_COLOURS.approval, title);
    if (bar[2] !== null) {
      const state = String(node.state || "running");
      rect(bar[2], tEnd, row, TL_COLOURS[state] || TL_COLOURS.running, title,
        { keep: true, cls: "cortex-tl-bar" });
      svg.lastChild.dataset.id = bar[0];
    }
  });
  bars.forEach((bar, i) => {
    const node = doc.nodes[bar[0]] || {};
    for (const dep of node.deps || []) {
      if (!where.has(dep)) continue;
      const [depRow, depBar] = where.get(dep);
      const from = [depBar[3], depBar[2], depBar[1]].find((t) => t !== null);
      const to = [bar[2], bar[1]].find((t) => t !== null);
      const [x1, y1] = [x(from === undefined ? 0 : from), depRow * TL.row + TL.row / 2];
      const [x2, y2] = [x(to === undefined ? from || 0 : to), (i + 1) * TL.row + TL.row / 2];
      const path = svgElement("path", {
        d: `M${x1} ${y1} L${x2} ${y2 - 4} M${x2 - 3} ${y2 - 7} L${x2} ${y2 - 4} L${x2 + 3} ${y2 - 7}`,
        stroke: "#555", "stroke-width": 1, fill: "none",
      }, `${bar[0]} after ${dep}`);
      path.classList.add("cortex-tl-dep");
      svg.appendChild(path);
    }
  });
  if (hidden) label(rows - 1, `+${hidden} more actions`, "", "#777");
  const axis = rows * TL.row;
  svg.appendChild(svgElement("line", { x1: TL.label, y1: axis, x2: TL.width - 8, y2: axis, stroke: "#999" }));
  const step = [0.1, 0.2, 0.5, 1, 2, 5, 10, 15, 30, 60, 120, 300, 600].find((s) => end / s <= 6) || Math.max(end / 6, 1);
  for (let i = 0; i * step <= end + 1e-9; i += 1) {
    const tick = Math.round(i * step * 1000) / 1000;
    svg.appendChild(svgElement("line", { x1: x(tick), y1: axis, x2: x(tick), y2: axis + 3, stroke: "#999" }));
    const t = svgElement("text", { x: x(tick), y: axis + 13, fill: "#777", "text-anchor": "middle" });
    t.textContent = `${tick}s`;
    svg.appendChild(t);
  }
  TL_LEGEND.forEach(([kind, name], i) => {
    const left = 2 + i * 70;
    const y = axis + TL.axis;
    svg.appendChild(svgElement("rect", { x: left, y: y + 2, width: 8, height: 8, fill: TL_COLOURS[kind] }));
    const t = svgElement("text", { x: left + 11, y: y + 10, fill: "#777" });
    t.textContent = name;
    svg.appendChild(t);
  });
  return svg;
}

// A collapsed "Timeline" under the tree (open state kept per view), its
// summary line saying where the time went even while closed.
function timelineSection(doc, store, ui) {
  const details = document.createElement("details");
  details.className = "cortex-timeline";
  details.open = ui.timelineOpen;
  details.addEventListener("toggle", () => {
    ui.timelineOpen = details.open;
    if (details.open && !details.querySelector("svg")) {
      details.appendChild(drawTimeline(store.doc || doc, store));
    }
  });
  const summary = textElement("summary", `Timeline · ${timelineSummary(doc, timelineEnd(doc, store))}`);
  details.appendChild(summary);
  // Drawn only when shown: a closed section costs one line per redraw.
  if (details.open) details.appendChild(drawTimeline(doc, store));
  return details;
}

function draw(el, store, ui) {
  const doc = store.doc || emptyDoc();
  el.replaceChildren();
  el.className = `cortex-view cortex-status-${doc.status}`;
  el.dataset.status = doc.status;

  // Thoughts: collapsible; open while streaming, remembered per view once toggled.
  doc.thoughts.forEach((thought, i) => {
    if (!thought.text.trim()) return;
    const details = document.createElement("details");
    details.className = "cortex-thought";
    const open = ui.thoughtOpen.has(i) ? ui.thoughtOpen.get(i) : !thought.done;
    details.open = open;
    details.addEventListener("toggle", () => ui.thoughtOpen.set(i, details.open));
    const summary = document.createElement("summary");
    summary.textContent = thought.done ? "thought" : "thinking…";
    const body = document.createElement("div");
    body.className = "cortex-thought-text";
    body.textContent = thought.text;
    details.append(summary, body);
    el.appendChild(details);
  });

  if (doc.order.length) {
    const children = new Map();
    for (const id of doc.order) {
      const node = doc.nodes[id];
      const parent = node.parent && doc.nodes[node.parent] ? node.parent : null;
      if (!children.has(parent)) children.set(parent, []);
      children.get(parent).push(node);
    }
    const ul = document.createElement("ul");
    ul.className = "cortex-tree";
    for (const node of children.get(null) || []) ul.appendChild(renderNode(node, children, store, 0));
    el.appendChild(ul);
  }

  if (hasTimeline(doc)) el.appendChild(timelineSection(doc, store, ui));

  if (doc.text.trim()) {
    const t = document.createElement("div");
    t.className = "cortex-text";
    t.textContent = doc.text.trim();
    el.appendChild(t);
  }

  doc.responses.forEach((r) => {
    if (!r.text.trim()) return;
    // Once the run is over, the cell's own result shows the final answer
    // right below the view: showing it twice would only repeat it.
    if (r.final && doc.status === "ok" && doc.answer) return;
    const div = document.createElement("div");
    div.className = r.final ? "cortex-response cortex-final" : "cortex-response cortex-partial";
    div.dataset.final = String(r.final);
    div.dataset.done = String(r.done);
    // The final response's $vars are filled in only in the run's answer.
    const text = r.final && doc.answer ? doc.answer : r.text;
    div.append(markdown(text));
    el.appendChild(div);
    // Under the answer wherever it shows: how many of its figures no result backs.
    if (r.final && doc.grounding) {
      el.appendChild(textElement("div", `⚠ ${doc.grounding}`, "cortex-grounding"));
    }
  });

  for (const w of doc.warnings) {
    const div = document.createElement("div");
    div.className = "cortex-warning";
    div.textContent = w;
    el.appendChild(div);
  }
  if (doc.status !== "running" && doc.status !== "ok" && doc.status_message) {
    const div = document.createElement("div");
    div.className = "cortex-run-error";
    div.textContent = `${doc.status}: ${doc.status_message}`;
    el.appendChild(div);
  }

  if (doc.dashboard && safeHref(doc.dashboard)) {
    const link = document.createElement("a");
    link.className = "cortex-dashboard";
    link.href = safeHref(doc.dashboard);
    link.target = "_blank";
    link.rel = "noopener noreferrer";
    link.textContent = "Dask dashboard";
    el.appendChild(link);
  }

  // A turn's request is out and nothing has streamed yet: on a CPU the model
  // may read a long prompt for a minute, so say so (and how long it is).
  if (doc.status === "running" && doc.waiting) {
    const waiting = textElement("div", `${waitingText(doc.waiting)} · `, "cortex-first-token");
    waiting.append(textElement("span", fmtSeconds(waitedOf(doc.waiting, store)), "cortex-first-token-clock"));
    el.appendChild(waiting);
  }

  const f = doc.footer;
  const footer = document.createElement("div");
  footer.className = "cortex-footer";
  const cost = f.cost === null || f.cost === undefined ? "" : ` · $${f.cost.toFixed(4)}`;
  const stats = textElement("span", `${f.turns} turn${f.turns === 1 ? "" : "s"} · ${f.tokens} tokens${cost} · `);
  stats.append(textElement(
    "span", fmtSeconds(doc.status === "running" ? nowOf(store) : f.seconds), "cortex-clock"));
  footer.append(textElement("span", doc.status, "cortex-status"), stats);
  el.appendChild(footer);
}

function tick(el, store) {
  // Elapsed times tick in the browser between messages: only text nodes change.
  if (!store.doc || store.doc.status !== "running") return;
  for (const span of el.querySelectorAll(".cortex-elapsed")) {
    const node = store.doc.nodes[span.dataset.id];
    if (node && node.state === "running") span.textContent = fmtSeconds(elapsedOf(node, store));
  }
  // An open timeline's running bars and streaming turn grow with the clock.
  const drawn = el.querySelector(".cortex-timeline[open] svg");
  if (drawn) drawn.replaceWith(drawTimeline(store.doc, store));
  const clock = el.querySelector(".cortex-clock");
  if (clock) clock.textContent = fmtSeconds(nowOf(store));
  const waited = el.querySelector(".cortex-first-token-clock");
  if (waited && store.doc.waiting) waited.textContent = fmtSeconds(waitedOf(store.doc.waiting, store));
}

export default {
  initialize({ model }) {
    const store = storeFor(model);
    loadSnapshot(store, model.get("snapshot"));
    const handler = (msg) => onMessage(model, store, msg);
    model.on("msg:custom", handler);
    const onSnapshot = () => {
      loadSnapshot(store, model.get("snapshot"));
      for (const redraw of store.views) redraw();
    };
    model.on("change:snapshot", onSnapshot);
    // Deltas sent before this module loaded are gone: catch up once.
    if (!store.doc || store.doc.status === "running") model.send({ type: "sync" });
    return () => {
      model.off("msg:custom", handler);
      model.off("change:snapshot", onSnapshot);
    };
  },

  render({ model, el }) {
    const store = storeFor(model);
    store.model = model;  // the approval buttons send through it
    if (!store.doc) loadSnapshot(store, model.get("snapshot"));
    const ui = { thoughtOpen: new Map(), timelineOpen: false };
    const redraw = () => draw(el, store, ui);
    store.views.add(redraw);
    redraw();
    const timer = setInterval(() => tick(el, store), 200);
    return () => {
      clearInterval(timer);
      store.views.delete(redraw);
    };
  },
};
