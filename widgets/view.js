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
  running: "▶",
  succeeded: "✓",
  failed: "✗",
  skipped: "↷",
  cancelled: "⊘",
  "awaiting approval": "⏸",
};

function emptyDoc() {
  return {
    run_id: "", model: "", message: "", status: "running", status_message: "", answer: "",
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

// -- a small, safe markdown renderer (escape first, then a few constructs) --

function escapeHtml(s) {
  return String(s)
    .replace(/&/g, "&amp;")
    .replace(/</g, "&lt;")
    .replace(/>/g, "&gt;")
    .replace(/"/g, "&quot;");
}

function inline(s) {
  return s
    .replace(/`([^`]+)`/g, "<code>$1</code>")
    .replace(/\*\*([^*]+)\*\*/g, "<strong>$1</strong>")
    .replace(/(^|[^*])\*([^*\s][^*]*)\*/g, "$1<em>$2</em>")
    .replace(/\[([^\]]+)\]\((https?:[^)\s]+)\)/g, '<a href="$2" target="_blank" rel="noopener">$1</a>');
}

export function markdown(src) {
  const lines = escapeHtml(src).split("\n");
  const out = [];
  let inCode = false;
  let list = null;
  let para = [];
  const flushPara = () => {
    if (para.length) out.push(`<p>${inline(para.join(" "))}</p>`);
    para = [];
  };
  const closeList = () => {
    if (list) out.push(`</${list}>`);
    list = null;
  };
  for (const line of lines) {
    if (/^\s*(```|~~~)/.test(line)) {
      flushPara();
      closeList();
      out.push(inCode ? "</code></pre>" : "<pre><code>");
      inCode = !inCode;
      continue;
    }
    if (inCode) {
      out.push(line + "\n");
      continue;
    }
    const heading = /^(#{1,6})\s+(.*)$/.exec(line);
    const bullet = /^\s*[-*+]\s+(.*)$/.exec(line);
    const numbered = /^\s*\d+[.)]\s+(.*)$/.exec(line);
    if (heading) {
      flushPara();
      closeList();
      const level = Math.min(heading[1].length + 2, 6);
      out.push(`<h${level}>${inline(heading[2])}</h${level}>`);
    } else if (bullet || numbered) {
      flushPara();
      const kind = bullet ? "ul" : "ol";
      if (list !== kind) {
        closeList();
        out.push(`<${kind}>`);
        list = kind;
      }
      out.push(`<li>${inline((bullet || numbered)[1])}</li>`);
    } else if (!line.trim()) {
      flushPara();
      closeList();
    } else {
      closeList();
      para.push(line);
    }
  }
  flushPara();
  closeList();
  if (inCode) out.push("</code></pre>");
  return out.join("");
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

// A tool marked confirm: true waits for the user: its exact parameters and
// Approve / Deny buttons, whose click goes to the kernel as a custom message.
function renderApproval(node, store) {
  const box = document.createElement("div");
  box.className = "cortex-approval";
  const params = document.createElement("pre");
  params.className = "cortex-approval-params";
  params.textContent = node.approval.parameters || "{}";
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
      if (store.model) store.model.send({ type: "approval", id: node.id, approved });
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
  const deps = node.deps && node.deps.length
    ? `<span class="cortex-deps">← ${node.deps.map(escapeHtml).join(", ")}</span>`
    : "";
  const mode = node.mode && node.mode !== "sync"
    ? `<span class="cortex-mode">${escapeHtml(node.mode)}</span>` : "";
  const key = node.key ? `<span class="cortex-key">→ ${escapeHtml(node.key)}</span>` : "";
  // Where a cluster ran it; a lost worker's call that Dask ran again shows as a retry.
  const where = node.where
    ? `<span class="cortex-where" title="${escapeHtml(node.backend || "")}">on ${escapeHtml(node.where)}</span>`
    : "";
  const retried = node.moved_from
    ? `<span class="cortex-retry" title="worker ${escapeHtml(node.moved_from)} was lost">↻ retried after worker ${escapeHtml(node.moved_from)} was lost</span>`
    : "";
  const attempt = node.attempt > 1
    ? `<span class="cortex-retry">attempt ${Number(node.attempt)}</span>` : "";
  const elapsed = elapsedOf(node, store);
  row.innerHTML =
    `<span class="cortex-icon">${ICONS[node.state] || "?"}</span>` +
    `<span class="cortex-id">${escapeHtml(node.id)}</span>` +
    `<span class="cortex-type">${escapeHtml(node.type || "")}</span>` +
    `<span class="cortex-name">${escapeHtml(node.name || "")}</span>` +
    mode + deps + key +
    `<span class="cortex-state">${escapeHtml(node.state)}</span>` + attempt + where + retried +
    `<span class="cortex-elapsed" data-id="${escapeHtml(node.id)}">${elapsed === null ? "" : fmtSeconds(elapsed)}</span>`;
  li.appendChild(row);
  const detail = node.error || node.preview;
  if (detail) {
    const d = document.createElement("div");
    d.className = node.error ? "cortex-error" : "cortex-preview";
    d.textContent = detail;
    li.appendChild(d);
  }
  if (node.traceback) {
    // The failing tool's own frames, collapsed until asked for.
    const tb = document.createElement("details");
    tb.className = "cortex-traceback";
    const summary = document.createElement("summary");
    summary.textContent = "traceback";
    const pre = document.createElement("pre");
    pre.textContent = node.traceback;
    tb.append(summary, pre);
    li.appendChild(tb);
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
  el.innerHTML = "";
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
    div.innerHTML = markdown(text);
    el.appendChild(div);
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

  if (doc.dashboard) {
    const link = document.createElement("a");
    link.className = "cortex-dashboard";
    link.href = doc.dashboard;
    link.target = "_blank";
    link.rel = "noopener";
    link.textContent = "Dask dashboard";
    el.appendChild(link);
  }

  const f = doc.footer;
  const footer = document.createElement("div");
  footer.className = "cortex-footer";
  const cost = f.cost === null || f.cost === undefined ? "" : ` · $${f.cost.toFixed(4)}`;
  footer.innerHTML =
    `<span class="cortex-status">${escapeHtml(doc.status)}</span>` +
    `<span>${f.turns} turn${f.turns === 1 ? "" : "s"} · ${f.tokens} tokens${cost} · ` +
    `<span class="cortex-clock">${fmtSeconds(doc.status === "running" ? nowOf(store) : f.seconds)}</span></span>`;
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
