// cortex-kernel's JupyterLab / Notebook 7 extension, prebuilt by hand.
//
// A federated extension is a module-federation container registered as
// window._JUPYTERLAB[name] with init(shareScope) and get(module). Written by
// hand (no npm, no bundler: none is reachable where this package is built),
// it takes @jupyterlab/notebook and @jupyterlab/codemirror from the share
// scope the application passes to init(), so the INotebookTracker and
// IEditorLanguageRegistry tokens are the application's own.
//
// What it does: a code cell whose first line is %%python is edited as
// (I)Python, whatever the kernel's language (the Cortex kernel's is markdown,
// for the message cells); a cell whose first line is %%agent (the magic of
// the stock IPython kernel) is edited as markdown, as the Cortex kernel's
// messages are. The cell goes back to the notebook's language when the line
// is removed.
var _JUPYTERLAB;
(_JUPYTERLAB = typeof _JUPYTERLAB === "undefined" ? {} : _JUPYTERLAB)["cortex-kernel"] = (function () {
  const PYTHON = "text/x-ipython";
  const MARKDOWN = "text/x-markdown";
  const PYTHON_LINE = /^\s*%%python(\s|$)/;
  const AGENT_LINE = /^\s*%%agent(\s|$)/;
  let shareScope = null;

  async function shared(name) {
    const versions = shareScope && shareScope[name];
    if (!versions) throw new Error(`cortex-kernel: ${name} is not shared`);
    const loaded = Object.values(versions).find((entry) => entry.loaded);
    const entry = loaded || versions[Object.keys(versions).sort().pop()];
    const factory = await entry.get();
    return factory();
  }

  function watchNotebook(panel, languages) {
    const notebook = panel.content;
    const fallback = () => notebook.codeMimetype || "text/plain";
    // The language a cell's first line asks for, or null for the notebook's.
    const own = (model) => {
      const source = model.sharedModel.getSource();
      if (PYTHON_LINE.test(source)) return PYTHON;
      if (AGENT_LINE.test(source)) return MARKDOWN;
      return null;
    };
    const apply = (cell) => {
      const model = cell.model;
      if (!model || model.type !== "code") return;
      const wanted = own(model) || fallback();
      if (model.mimeType !== wanted) model.mimeType = wanted;
    };
    const watchCell = (cell) => {
      if (!cell || !cell.model || cell.__cortexWatched) return;
      cell.__cortexWatched = true;
      apply(cell);
      // An editor created meanwhile may have loaded another language last:
      // once it exists, make it see a change to the cell's own language last.
      Promise.resolve(cell.ready).then(() => {
        const mime = cell.model.mimeType;
        if (mime === own(cell.model) && mime !== fallback()) cell.model.mimeType = fallback();
      });
      cell.model.contentChanged.connect(() => apply(cell));
      // The notebook resets every cell's language when the kernel's arrives.
      // The editor loads the language of each change and applies whichever
      // load ends last: answer once the reset's language has loaded.
      cell.model.mimeTypeChanged.connect(() => {
        const mime = cell.model.mimeType;
        if (mime === own(cell.model)) return;
        Promise.resolve(languages.getLanguage(mime))
          .catch(() => null)
          .then(() => setTimeout(() => apply(cell), 0));
      });
    };
    const watchAll = () => notebook.widgets.forEach(watchCell);
    watchAll();
    if (notebook.model) notebook.model.cells.changed.connect(() => setTimeout(watchAll, 0));
    notebook.modelChanged.connect(() => {
      watchAll();
      if (notebook.model) notebook.model.cells.changed.connect(() => setTimeout(watchAll, 0));
    });
    panel.sessionContext.kernelChanged.connect(() => setTimeout(watchAll, 0));
  }

  function plugin(notebookModule, codemirrorModule) {
    return {
      id: "cortex-kernel:python-cells",
      description: "Python highlighting for %%python cells, markdown for %%agent cells.",
      autoStart: true,
      requires: [notebookModule.INotebookTracker, codemirrorModule.IEditorLanguageRegistry],
      activate: (app, tracker, languages) => {
        tracker.forEach((panel) => watchNotebook(panel, languages));
        tracker.widgetAdded.connect((_, panel) => watchNotebook(panel, languages));
      },
    };
  }

  return {
    init(scope) {
      shareScope = scope;
    },
    async get(module) {
      if (module !== "./extension") throw new Error(`cortex-kernel: no module ${module}`);
      const [notebookModule, codemirrorModule] = await Promise.all([
        shared("@jupyterlab/notebook"),
        shared("@jupyterlab/codemirror"),
      ]);
      const exports = { __esModule: true, default: [plugin(notebookModule, codemirrorModule)] };
      return () => exports;
    },
  };
})();
