// Helpers that tests/browser/conftest.py installs in a JupyterLab page as window.course.
// They drive JupyterLab through its own commands (the ones its menus call) and read what it
// shows: the notebook model's outputs and the rendered output nodes. The server runs with
// --LabApp.expose_app_in_browser, which makes the application available as window.jupyterapp.
(() => {
  const app = () => window.jupyterapp;
  const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
  // Wait until ready() holds, however busy the machine (a test fails on what it then reads, never on
  // time): at most `ms`, a bound for a page that never renders at all.
  async function until(ready, ms = 120000) {
    for (let k = 0; k < ms / 100 && !ready(); k++) await sleep(100);
  }
  const panels = {};  // path -> NotebookPanel
  const runs = {};    // path -> {done, result | error}

  async function open(path) {
    const panel = await app().commands.execute('docmanager:open', { path, factory: 'Notebook' });
    await panel.context.ready;
    await panel.sessionContext.ready;
    await panel.revealed;
    app().shell.activateById(panel.id);
    panels[path] = panel;
    // JupyterLab opens a Launcher when the last tab closes: close it, the screenshots show notebooks
    for (const w of [...app().shell.widgets('main')]) {
      if (w.node.querySelector('.jp-Launcher')) w.dispose();
    }
    return panel;
  }

  async function idle(panel) {
    // the kernel has nothing left to do
    const kernel = () => panel.sessionContext.session && panel.sessionContext.session.kernel;
    await until(() => !kernel() || kernel().status === 'idle');
  }

  async function settle(panel) {
    // the kernel is idle, and every widget output has a rendered view (they render asynchronously)
    await idle(panel);
    const want = () => {
      let n = 0;
      const cells = panel.content.model.cells;
      for (let i = 0; i < cells.length; i++) {
        const c = cells.get(i);
        if (c.type !== 'code') continue;
        for (let j = 0; j < c.outputs.length; j++) {
          if (c.outputs.get(j).data['application/vnd.jupyter.widget-view+json']) n++;
        }
      }
      return n;
    };
    const views = () => panel.node.querySelectorAll('.jp-OutputArea-output .jupyter-widgets').length;
    await until(() => views() >= want());
  }

  // Run the notebook at `path` as a learner does: Run > Run All Cells, once. JupyterLab stops at
  // the first cell that raises; `ok` says whether the run went through to the end.
  async function run(path) {
    const panel = await open(path);
    const nb = panel.content;
    const t0 = performance.now();
    nb.activeCellIndex = 0;
    const ok = await app().commands.execute('notebook:run-all-cells');
    await settle(panel);
    const seconds = (performance.now() - t0) / 1000;
    return { path, seconds, ok, cells: await describe(panel) };
  }

  async function describe(panel) {
    // What each cell shows: its model outputs and the rendered images and widgets
    const out = [];
    const cells = panel.content.model.cells;
    for (let i = 0; i < cells.length; i++) {
      const c = cells.get(i);
      const node = panel.content.widgets[i].node;
      const cell = {
        index: i, type: c.type, source: c.sharedModel.getSource(),
        nbgrader: c.getMetadata('nbgrader') || null, tags: c.getMetadata('tags') || [],
      };
      if (c.type === 'code') {
        cell.executionCount = c.executionCount;
        // with the notebook setting recordTiming (the tests' settings turn it on)
        const timing = c.getMetadata('execution') || {};
        if (timing['iopub.execute_input'] && timing['shell.execute_reply']) {
          cell.seconds = (Date.parse(timing['shell.execute_reply']) - Date.parse(timing['iopub.execute_input'])) / 1000;
        }
        cell.outputs = [];
        for (let j = 0; j < c.outputs.length; j++) {
          const o = c.outputs.get(j).toJSON();
          cell.outputs.push({
            type: o.output_type, name: o.name || null, ename: o.ename || null, evalue: o.evalue || null,
            traceback: (o.traceback || []).join('\n').replace(/\u001b\[[0-9;]*m/g, '').slice(-3000),
            mimes: o.data ? Object.keys(o.data) : [],
            text: (Array.isArray(o.text) ? o.text.join('') : (o.text || '')).slice(0, 3000),
          });
        }
        const images = async (selector) => {
          const found = [];
          for (const el of node.querySelectorAll(selector)) {
            if (el.tagName === 'IMG') {
              try { await el.decode(); } catch (e) { /* reported as 0 x 0 below */ }
              found.push([el.naturalWidth, el.naturalHeight]);
            } else {
              const box = el.getBoundingClientRect();
              found.push([box.width, box.height]);
            }
          }
          return found;
        };
        // Cells out of view are rendered when the browser gets to them (JupyterLab's windowed notebook,
        // later still on a busy machine): a cell whose images are not all drawn yet is brought into view.
        const want = cell.outputs.filter((o) => o.mimes.includes('image/svg+xml') || o.mimes.includes('image/png')).length;
        const drawn = () => node.querySelectorAll('.jp-RenderedSVG, .jp-RenderedImage').length;
        if (drawn() < want) {
          await panel.content.scrollToItem(i, 'start');
          await until(() => drawn() >= want);
        }
        cell.svg = await images('.jp-RenderedSVG img, .jp-RenderedSVG svg');
        cell.png = await images('.jp-RenderedImage img');
        cell.widgets = node.querySelectorAll('.jp-OutputArea-output .jupyter-widgets').length;
        // Markdown links are rewritten by JupyterLab when rendered; code cells have none
      } else if (c.type === 'markdown') {
        // Cells out of view are rendered when scrolled to (JupyterLab's windowed notebook): the last
        // cell (the recap, with the link to the next lesson) is brought into view to read its links.
        // JupyterLab draws the markdown, then resolves its relative links, both asynchronously (CI read the
        // recap before either: no link): its links are read once it has text and no link is left as written
        // (a scheme, an absolute path or an anchor are never rewritten).
        const unresolved = () => [...node.querySelectorAll('.jp-RenderedMarkdown a[href]')]
          .some((a) => !/^([a-z][a-z0-9+.-]*:|\/|#)/i.test(a.getAttribute('href')));
        if (i === cells.length - 1) {
          await panel.content.scrollToItem(i, 'start');
          await until(() => node.querySelector('.jp-RenderedMarkdown')?.textContent.trim() && !unresolved());
        }
        // JupyterLab rewrites a relative link to /files/PATH (and opens PATH in a tab when clicked)
        cell.links = [...node.querySelectorAll('.jp-RenderedMarkdown a[href]')].map((a) => {
          const url = new URL(a.href, location.href);
          const m = url.pathname.match(/\/files\/(.*)$/);
          return m ? decodeURIComponent(m[1]) : a.getAttribute('href');
        });
      }
      out.push(cell);
    }
    return out;
  }

  function start(path) {
    runs[path] = { done: false };
    run(path).then(
      (result) => { runs[path] = { done: true, result }; },
      (error) => { runs[path] = { done: true, error: String(error && error.stack || error) }; },
    );
  }

  async function scrollTo(path, index) {
    const panel = panels[path];
    app().shell.activateById(panel.id);
    panel.content.activeCellIndex = index;
    await panel.content.scrollToItem(index, 'start');
    const node = panel.content.widgets[index].node;
    node.setAttribute('data-course-cell', String(index));
    node.scrollIntoView({ block: 'start' });
  }

  async function close(path) {
    const panel = panels[path];
    if (!panel) return;
    delete panels[path];
    await panel.sessionContext.shutdown();
    panel.context.model.dirty = false;  // nothing to save: the tests work on a temporary copy
    panel.dispose();
  }

  async function closeAll() {
    // every open notebook: kernel shut down, tab closed without saving
    for (const w of [...app().shell.widgets('main')]) {
      if (w.sessionContext) await w.sessionContext.shutdown();
      if (w.context) w.context.model.dirty = false;
      w.dispose();
    }
    for (const p of Object.keys(panels)) delete panels[p];
  }

  window.course = { open, start, runs: () => runs, scrollTo, close, closeAll, panels, settle };
})();
