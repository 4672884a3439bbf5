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
    footer: { turns: 0, tokens: 0, cost: null, seconds: 0 },
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
// Approve / Deny buttons. A click answers the request's token with the
// digest of the text this box shows: the kernel refuses any other.
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
  for (const [label, approved] of [["Approve", true], ["Deny", false]]) {
    const button = document.createElement("button");
    button.className = `cortex-approval-${label.toLowerCase()}`;
    button.textContent = label;
    button.addEventListener("click", () => {
      for (const b of box.querySelectorAll("button")) b.disabled = true;
      if (store.model) {
        store.model.send({
          type: "approval", id: node.id, token: approval.token, digest: approval.digest, approved,
        });
      }
    });
    box.appendChild(button);
  }
  return box;
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
  if (node.traceback) li.appendChild(collapsed("cortex-traceback", "traceback", node.traceback));
  if (node.log) li.appendChild(collapsed("cortex-log", "stderr", node.log));
  if (node.code) li.appendChild(collapsed("cortex-code", "code", node.code));
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
  const clock = el.querySelector(".cortex-clock");
  if (clock) clock.textContent = fmtSeconds(nowOf(store));
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
    const ui = { thoughtOpen: new Map() };
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
