/* commitbench run viewer: overview, run list, transcript and side by side, on one page routed by '#'.
 *
 * Data arrives as script files that call the registry below (browsers refuse fetch between file://
 * pages): data/meta.js and data/index.js with the page, transcripts (data/runs/NNNNN.js) and search
 * text (data/text/NNNNN.js) when a page first needs them. The DOM is built with createElement and
 * textContent only: no text from a run is ever parsed as HTML.
 */
(function () {
  "use strict";

  const PAGE_SIZE = 100;
  const FLAG_TEXT = ["no", "yes", "unknown"];
  const COUNT_BUCKETS = ["0", "1+", "unknown"];
  const RESERVED = new Set(["q", "sort", "page", "metric", "only"]);
  // "Show only" filters: runs whose signals differ from what the cell expects, runs whose samples disagree.
  const ONLY = [
    { name: "failures", label: "failures", title: "runs with a signal that differs from the cell's expected behaviour (marked ≠ on the transcript)" },
    { name: "differs", label: "differs across samples", title: "runs of an episode, player and arm whose samples disagree on a yes/no or text signal" },
  ];
  // Scripted chatter a transcript folds into one row when two or more such messages follow each other.
  const FOLD_ACTS = new Set(["filler", "closing"]);

  const state = {
    meta: null,
    ix: null,
    shards: new Map(),
    parts: new Map(),
    scripts: new Map(),
    text: null,
    textParts: [],
    lastList: null,
    lastListHash: "#/runs",
    selected: [],
    renderId: 0,
    livePages: new Map(),
    liveText: [],
    liveCount: 0,
  };
  const LIVE_POLL_MS = 2000;

  // ------------------------------------------------------------------ the registry data files call
  window.commitbench = {
    meta(meta) { state.meta = meta; },
    index(ix) { state.ix = decodeIndex(ix); },
    runs(shard, pages) { state.shards.set(shard, pages); },
    parts(parts) { for (const [key, part] of Object.entries(parts)) state.parts.set(key, part); },
    text(shard, part) { state.textParts[shard] = part; },
  };

  function decodeIndex(ix) {
    const columns = new Map();
    for (const spec of state.meta.columns) {
      const data = ix.columns[spec.name] || { codes: [] };
      const col = { spec, codes: Int32Array.from(data.codes), values: data.values || null };
      if (spec.kind === "facet") {
        const collator = new Intl.Collator("en", { numeric: true });
        const order = col.values.map((v, i) => i).sort((a, b) => collator.compare(col.values[a], col.values[b]));
        col.rank = new Int32Array(col.values.length);
        order.forEach((code, r) => { col.rank[code] = r; });
      }
      columns.set(spec.name, col);
    }
    const pos = new Map();
    ix.keys.forEach((k, i) => pos.set(k, i));
    return { n: ix.n, keys: ix.keys, episodes: Int32Array.from(ix.episodes), metrics: Int32Array.from(ix.metrics),
      episodeIds: ix.episodeIds || [],
      columns, pos, off: ix.off || ix.keys.map(() => []), offNames: ix.offNames || [],
      differs: Uint8Array.from(ix.differs || ix.keys.map(() => 0)) };
  }

  // ------------------------------------------------------------------ small helpers
  function h(tag, attrs, ...kids) {
    const node = document.createElement(tag);
    if (attrs) {
      for (const [name, value] of Object.entries(attrs)) {
        if (value === null || value === undefined || value === false) continue;
        if (name === "class") node.className = value;
        else if (name === "text") node.textContent = value;
        else if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
        else node.setAttribute(name, value === true ? "" : String(value));
      }
    }
    for (const kid of kids.flat(Infinity)) {
      if (kid === null || kid === undefined || kid === false) continue;
      node.append(kid instanceof Node ? kid : String(kid));
    }
    return node;
  }

  function loadScript(src) {
    if (!state.scripts.has(src)) {
      state.scripts.set(src, new Promise((resolve, reject) => {
        const script = document.createElement("script");
        script.src = src;
        script.onload = () => resolve();
        script.onerror = () => reject(new Error("could not load " + src));
        document.head.append(script);
      }));
    }
    return state.scripts.get(src);
  }

  const pad = (n) => String(n).padStart(5, "0");
  const fmt = (n) => Number(n).toLocaleString("en-US");

  async function loadPage(key) {
    if (state.livePages.has(key)) {
      const live = await madePage(state.livePages.get(key));
      state.livePages.set(key, live);
      return live;
    }
    const i = state.ix.pos.get(key);
    if (i === undefined) throw new Error("no run with key " + key);
    const shard = Math.floor(i / state.meta.runShard);
    await loadScript("data/runs/" + pad(shard) + ".js");
    const held = state.shards.get(shard);
    const page = await madePage(held[i % state.meta.runShard]);
    held[i % state.meta.runShard] = page;  // made once
    return page;
  }

  // A shard's entry with its parts in place, made into its page where the site holds what a page is made of
  // (assets/pages.js).
  async function madePage(entry) {
    if (entry.parts) await putParts(entry);
    return window.commitbenchPages.page(entry);
  }

  // A page names what many pages show alike (a setup's tools, a system prompt) by key; data/parts.js holds each.
  async function putParts(page) {
    const named = page.parts;
    await loadScript("data/parts.js");
    if (page.parts !== named) return;  // put back meanwhile, by another load of the same page
    for (const [field, key] of Object.entries(named)) {
      if (!state.parts.has(key)) throw new Error("the site holds no part " + key + " (" + field + " of run " + page.key + ")");
      page[field] = state.parts.get(key);
    }
    delete page.parts;
  }

  async function loadTexts() {
    if (state.text) return state.text;
    const loads = [];
    for (let s = 0; s < state.meta.textShards; s++) loads.push(loadScript("data/text/" + pad(s) + ".js"));
    await Promise.all(loads);
    const runs = [];
    const episodes = [];
    const speakers = [];
    for (const part of state.textParts) {
      for (const t of part.runs) runs.push(t.toLowerCase());
      for (const t of part.speakers || part.runs.map(() => "")) speakers.push(t.toLowerCase());
      for (const [code, t] of Object.entries(part.episodes)) episodes[Number(code)] = t.toLowerCase();
    }
    state.text = { runs, episodes, speakers };
    for (const run of state.liveText) addText(run);
    return state.text;
  }

  // ------------------------------------------------------------------ runs added while a served run is watched
  function addText(run) {
    const t = state.text;
    t.runs.push((run.text || "").toLowerCase());
    t.speakers.push((run.speakers || "").toLowerCase());
    const code = state.ix.episodeIds.indexOf(run.episode);
    if (t.episodes[code] === undefined) t.episodes[code] = (run.shared || "").toLowerCase();
  }

  function addRun(run) {
    const ix = state.ix;
    if (ix.pos.has(run.key)) return;
    const i = ix.n;
    for (const [name, col] of ix.columns) {
      const value = run.row[name];
      let code;
      if (col.spec.kind === "facet") {
        const text = value === null || value === undefined ? "" : String(value);
        code = col.values.indexOf(text);
        if (code < 0) {
          code = col.values.push(text) - 1;
          const collator = new Intl.Collator("en", { numeric: true });
          const order = col.values.map((v, k) => k).sort((a, b) => collator.compare(col.values[a], col.values[b]));
          col.rank = new Int32Array(col.values.length);
          order.forEach((c, r) => { col.rank[c] = r; });
        }
      } else if (col.spec.kind === "flag") code = value === true ? 1 : value === false ? 0 : 2;
      else code = value === null || value === undefined ? -1 : Number(value);
      const codes = new Int32Array(i + 1);
      codes.set(col.codes);
      codes[i] = code;
      col.codes = codes;
    }
    let episode = ix.episodeIds.indexOf(run.episode);
    if (episode < 0) episode = ix.episodeIds.push(run.episode) - 1;
    const grow = (arr, v, Type) => { const out = new Type(i + 1); out.set(arr); out[i] = v; return out; };
    ix.episodes = grow(ix.episodes, episode, Int32Array);
    ix.metrics = grow(ix.metrics, 0, Int32Array);
    ix.differs = grow(ix.differs, 0, Uint8Array);
    ix.off.push(run.off.map((name) => { let c = ix.offNames.indexOf(name); if (c < 0) c = ix.offNames.push(name) - 1; return c; }));
    ix.keys.push(run.key);
    ix.pos.set(run.key, i);
    ix.n = i + 1;
    state.meta.runs += 1;
    if (run.ok) state.meta.finished += 1;
    state.livePages.set(run.key, run.page);
    if (state.text) addText(run); else state.liveText.push(run);
  }

  async function pollLive() {
    let reply;
    try {
      reply = await fetch("live.json?from=" + state.liveCount, { cache: "no-store" });
    } catch (error) {
      return; // the server stopped: the page keeps what it has
    }
    if (!reply.ok) return; // the server could not read the run: the page keeps what it has
    const data = await reply.json();
    if (!data.watch) return; // served without --watch
    for (const run of data.runs) addRun(run);
    state.liveCount += data.runs.length;
    const badge = document.getElementById("live");
    badge.hidden = false;
    badge.textContent = "live: " + fmt(state.liveCount) + " new run" + (state.liveCount === 1 ? "" : "s") + " since the build";
    badge.dataset.count = String(state.liveCount);
    if (data.runs.length) {
      announce(data.runs.length + " new runs");
      const { path } = parseHash();
      if (path[0] === "runs" || path.length === 0) route();
    }
    setTimeout(pollLive, LIVE_POLL_MS);
  }

  function yesNo(value, expected, sayMatch) {
    let text = value === true ? "yes" : value === false ? "no" : value === null || value === undefined ? "unknown" : String(value);
    const cls = value === true ? "yes" : value === false ? "no" : value === null || value === undefined ? "unknown" : "value";
    const parts = [h("span", { class: "badge " + cls }, h("span", { "aria-hidden": "true", text: cls === "yes" ? "✓ " : cls === "no" ? "✗ " : cls === "unknown" ? "? " : "" }), text)];
    if (expected !== undefined && expected !== null && typeof value === "boolean" && value !== expected) {
      parts.push(" ", h("span", { class: "badge off", text: "≠ expected " + (expected ? "yes" : "no") }));
    } else if (sayMatch && expected !== undefined && expected !== null && value === expected) {
      parts.push(" ", h("span", { class: "note", text: "as expected" }));
    }
    return parts;
  }

  function announce(text) { document.getElementById("status").textContent = text; }

  // ------------------------------------------------------------------ addresses
  function parseHash() {
    const raw = location.hash.replace(/^#/, "") || "/";
    const at = raw.indexOf("?");
    const path = at < 0 ? raw : raw.slice(0, at);
    const params = new Map();
    if (at >= 0) {
      for (const part of raw.slice(at + 1).split("&")) {
        if (!part) continue;
        const eq = part.indexOf("=");
        const name = decodeURIComponent(eq < 0 ? part : part.slice(0, eq));
        const value = eq < 0 ? "" : part.slice(eq + 1);
        params.set(name, value.split(",").map((v) => decodeURIComponent(v)));
      }
    }
    return { path: path.split("/").filter(Boolean), params };
  }

  function runsHash(params) {
    const parts = [];
    for (const [name, values] of params) {
      if (!values || !values.length || (values.length === 1 && values[0] === "")) continue;
      parts.push(encodeURIComponent(name) + "=" + values.map((v) => encodeURIComponent(v)).join(","));
    }
    return "#/runs" + (parts.length ? "?" + parts.join("&") : "");
  }

  function filterHash(filter) {
    return runsHash(new Map(Object.entries(filter || {})));
  }

  // ------------------------------------------------------------------ router
  async function route() {
    const id = ++state.renderId;
    const { path, params } = parseHash();
    const main = document.getElementById("main");
    document.getElementById("nav-overview").toggleAttribute("aria-current", path.length === 0);
    document.getElementById("nav-runs").toggleAttribute("aria-current", path[0] === "runs");
    try {
      let view;
      if (path.length === 0) view = overviewPage();
      else if (path[0] === "runs") view = await runListPage(params);
      else if (path[0] === "run" && path[1]) view = await transcriptPage(path[1]);
      else if (path[0] === "compare" && path[1] && path[2]) view = await comparePage(path[1], path[2]);
      else view = h("p", { text: "Unknown page: " + location.hash });
      if (id !== state.renderId) return; // a newer navigation won
      const focused = document.activeElement && document.activeElement.id;
      main.replaceChildren(view);
      main.dataset.route = location.hash;
      main.dataset.renderedAt = String(performance.now());
      const again = focused && document.getElementById(focused);
      if (again && main.contains(again)) again.focus();
    } catch (error) {
      if (id !== state.renderId) return;
      main.replaceChildren(h("div", { class: "error-box", role: "alert" }, h("h1", { text: "Cannot show this page" }),
        h("p", { text: String(error && error.message || error) })));
      main.dataset.route = location.hash;
      main.dataset.renderedAt = String(performance.now());
    }
  }

  // ------------------------------------------------------------------ overview
  function factList(facts, label) {
    return h("dl", { class: "facts", "aria-label": label }, facts.map((f) => h("div", { class: f.value.length > 60 ? "fact long" : "fact" },
      h("dt", { text: f.label }),
      h("dd", null, f.field && state.ix.columns.has(f.field)
        ? h("a", { href: runsHash(new Map([[f.field, [f.value]]])), text: f.value, title: "runs with this " + f.label })
        : f.value))));
  }

  function tableView(view, index) {
    const id = "table-" + index;
    const head = h("tr", null, view.columns.map((c, j) => h("th", { scope: "col", class: view.numeric[j] ? "num" : null, text: c })));
    const body = view.rows.map((row, r) => h("tr", null, row.map((cell, j) => {
      const link = view.links && view.links[r] && view.links[r][j];
      const content = link && cell !== "" && cell !== "-" ? h("a", { href: filterHash(link), title: "the runs behind this number" }, cell) : cell;
      return j === 0 ? h("th", { scope: "row", class: view.numeric[j] ? "num" : null }, content)
        : h("td", { class: view.numeric[j] ? "num" : null }, content);
    })));
    return h("section", { class: "table-block", "aria-labelledby": id + "-title" },
      h("div", { class: "scroll" }, h("table", { id, class: "data" },
        h("caption", { id: id + "-title", text: view.title }), h("thead", null, head), h("tbody", null, body))),
      view.note ? h("p", { class: "note", text: view.note }) : null);
  }

  function overviewPage() {
    const o = state.meta.overview;
    document.title = o.title;
    const failed = state.meta.runs - state.meta.finished;
    return h("article", { class: "overview" },
      h("h1", { text: o.title }),
      factList(o.facts, "The run"),
      h("p", null, h("a", { href: "#/runs" }, fmt(state.meta.runs) + " runs"), failed ? " (" + fmt(failed) + " failed for infrastructure reasons)" : "",
        " · ", h("a", { href: "report.json", text: "report.json" }), " (the document commitbench report --json prints)"),
      o.summary.map((line) => h("p", { class: "summary", text: line })),
      h("p", { class: "note", text: "Every number links to the runs behind it; a metric's link lists the runs it reads, including runs excluded for a missing judge label." }),
      o.tables.map(tableView),
      o.figures.length ? h("section", { "aria-labelledby": "figures-title" }, h("h2", { id: "figures-title", text: "Figures" }),
        o.figures.map((f) => h("figure", null, h("img", { src: f.file, alt: f.title }), h("figcaption", { text: f.title })))) : null);
  }

  // ------------------------------------------------------------------ run list
  function bucket(col, i) {
    const v = col.codes[i];
    if (col.spec.kind === "count") return v < 0 ? 2 : v === 0 ? 0 : 1;
    return v;
  }

  function valueText(col, i) {
    const v = col.codes[i];
    if (col.spec.kind === "facet") return col.values[v];
    if (col.spec.kind === "flag") return FLAG_TEXT[v];
    return v < 0 ? "unknown" : String(v);
  }

  function optionNames(col) {
    if (col.spec.kind === "facet") return col.values;
    if (col.spec.kind === "flag") return FLAG_TEXT;
    return COUNT_BUCKETS;
  }

  function compileFilters(params, text) {
    const filters = [];
    const warnings = [];
    for (const [name, values] of params) {
      if (RESERVED.has(name)) continue;
      const col = state.ix.columns.get(name);
      if (!col) { warnings.push("unknown filter '" + name + "' ignored"); continue; }
      const names = optionNames(col);
      const accept = new Uint8Array(names.length);
      for (const v of values) {
        const code = names.indexOf(v);
        if (code >= 0) accept[code] = 1;
      }
      filters.push({ name, col, values, test: (i) => accept[bucket(col, i)] === 1 });
    }
    const metrics = params.get("metric");
    if (metrics && metrics.length) {
      let mask = 0;
      for (const m of metrics) {
        const bit = state.meta.metrics.findIndex((x) => x.name === m);
        if (bit < 0) warnings.push("unknown metric '" + m + "': no run matches");
        else mask |= 1 << bit;
      }
      const unknown = metrics.some((m) => !state.meta.metrics.some((x) => x.name === m));
      filters.push({ name: "metric", values: metrics, test: unknown ? () => false : (i) => (state.ix.metrics[i] & mask) === mask });
    }
    const only = params.get("only") || [];
    for (const name of only) {
      if (!ONLY.some((o) => o.name === name)) warnings.push("unknown 'only' filter '" + name + "' ignored");
    }
    const onlyTests = only.filter((name) => ONLY.some((o) => o.name === name)).map(onlyTest);
    if (onlyTests.length) filters.push({ name: "only", values: only, test: (i) => onlyTests.every((t) => t(i)) });
    const q = (params.get("q") || []).join(",").trim().toLowerCase();
    let search = null;
    if (q && text) {
      search = searchFields(q, text);
      filters.push({ name: "q", values: [q], test: (i) => search.words.every((w, k) => search.fields.some((f) => f.hit(k, i))) });
    }
    return { filters, warnings, search };
  }

  function onlyTest(name) {
    if (name === "failures") return (i) => state.ix.off[i].length > 0;
    return (i) => state.ix.differs[i] === 1;
  }

  // What the search box searches, field by field; each word must match in some field of a run.
  function searchFields(q, text) {
    const words = q.split(/\s+/).filter(Boolean);
    const epHit = words.map((w) => text.episodes.map((t) => (t || "").includes(w)));
    const fields = [
      { label: "messages", hit: (k, i) => text.runs[i].includes(words[k]) || epHit[k][state.ix.episodes[i]] },
      { label: "speakers", hit: (k, i) => text.speakers[i].includes(words[k]) },
    ];
    for (const spec of state.meta.columns) {
      if (spec.kind !== "facet") continue;
      const col = state.ix.columns.get(spec.name);
      const accept = words.map((w) => col.values.map((v) => String(v).toLowerCase().includes(w)));
      fields.push({ label: spec.label, hit: (k, i) => accept[k][col.codes[i]] });
    }
    return { words, fields, matched: (i) => fields.filter((f) => words.some((_, k) => f.hit(k, i))).map((f) => f.label) };
  }

  function searchHint() {
    const columns = state.meta.columns.filter((c) => c.kind === "facet").map((c) => c.label);
    return "Searches each run's messages, tool calls and reasoning; who speaks in it (name, job title, part such as creditor or manager); " +
      "and the values of its columns (" + columns.join(", ") + "). Every word must match somewhere; case is ignored.";
  }

  function evaluate(filters) {
    const n = state.ix.n;
    const fail = new Uint32Array(n);
    filters.forEach((f, bit) => {
      const flag = 1 << bit;
      for (let i = 0; i < n; i++) if (!f.test(i)) fail[i] |= flag;
    });
    return fail;
  }

  function facetCounts(filters, fail) {
    const bitOf = new Map(filters.map((f, bit) => [f.name, 1 << bit]));
    const panel = state.meta.columns.filter((c) => c.panel !== false).map((c) => state.ix.columns.get(c.name));
    const counts = panel.map((col) => new Int32Array(optionNames(col).length));
    const bits = panel.map((col) => bitOf.get(col.spec.name) || 0);
    for (let i = 0; i < state.ix.n; i++) {
      const m = fail[i];
      if (m === 0) {
        for (let c = 0; c < panel.length; c++) counts[c][bucket(panel[c], i)]++;
      } else if ((m & (m - 1)) === 0) {
        for (let c = 0; c < panel.length; c++) if (bits[c] === m) counts[c][bucket(panel[c], i)]++;
      }
    }
    return { panel, counts };
  }

  function sortRows(rows, sort) {
    if (!sort) return rows;
    const desc = sort.startsWith("-");
    const col = state.ix.columns.get(desc ? sort.slice(1) : sort);
    if (!col) return rows;
    const key = col.spec.kind === "facet" ? (i) => col.rank[col.codes[i]] : (i) => col.codes[i];
    const sign = desc ? -1 : 1;
    return rows.slice().sort((a, b) => (key(a) - key(b)) * sign || a - b);
  }

  function setParams(params, replace) {
    const target = runsHash(params);
    if (replace) { history.replaceState(null, "", target); route(); } else location.hash = target;
  }

  function withParam(params, name, values) {
    const next = new Map(params);
    if (values && values.length) next.set(name, values); else next.delete(name);
    if (name !== "page") next.delete("page");
    return next;
  }

  async function runListPage(params) {
    const started = performance.now();
    const q = (params.get("q") || []).join(",").trim();
    let text = null;
    if (q) {
      document.getElementById("main").setAttribute("aria-busy", "true");
      text = await loadTexts();
      document.getElementById("main").removeAttribute("aria-busy");
    }
    const { filters, warnings, search: searched } = compileFilters(params, text);
    const fail = evaluate(filters);
    let rows = [];
    for (let i = 0; i < state.ix.n; i++) if (fail[i] === 0) rows.push(i);
    const sort = (params.get("sort") || [""])[0];
    rows = sortRows(rows, sort);
    state.lastList = rows;
    state.lastListHash = location.hash || "#/runs";
    const pages = Math.max(1, Math.ceil(rows.length / PAGE_SIZE));
    const page = Math.min(pages, Math.max(1, parseInt((params.get("page") || ["1"])[0], 10) || 1));
    const shown = rows.slice((page - 1) * PAGE_SIZE, page * PAGE_SIZE);
    const { panel, counts } = facetCounts(filters, fail);
    const summary = fmt(rows.length) + " of " + fmt(state.ix.n) + " runs";
    document.title = "Runs (" + summary + ")";
    announce(summary);

    const searchBox = h("input", { type: "search", id: "q", name: "q", value: q, placeholder: "messages, tool calls, reasoning, speakers, roles, cells…", autocomplete: "off", "aria-describedby": "search-hint" });
    let timer = null;
    searchBox.addEventListener("input", () => {
      clearTimeout(timer);
      timer = setTimeout(() => setParams(withParam(params, "q", searchBox.value.trim() ? [searchBox.value] : []), true), 250);
    });
    const search = h("form", { class: "search", role: "search", onsubmit: (e) => { e.preventDefault(); setParams(withParam(params, "q", searchBox.value.trim() ? [searchBox.value] : []), false); } },
      h("label", { for: "q", text: "Search runs " }), searchBox, h("button", { type: "submit", text: "Search" }),
      h("p", { class: "note", id: "search-hint", text: searchHint() }));
    let matchNote = null;
    if (searched) {
      const tally = new Map(searched.fields.map((f) => [f.label, 0]));
      for (const i of rows) for (const label of searched.matched(i)) tally.set(label, tally.get(label) + 1);
      const parts = [...tally].filter(([, n]) => n > 0).map(([label, n]) => label + " in " + fmt(n) + " run" + (n === 1 ? "" : "s"));
      matchNote = h("p", { class: "note", id: "search-matches" }, "'" + q + "' matched " + (parts.length ? parts.join(", ") : "nothing") + ".");
    }

    const chips = [];
    for (const [name, values] of params) {
      if (name === "sort" || name === "page") continue;
      const label = name === "metric" ? "metric" : name === "q" ? "text" : name === "only" ? "only" : (state.ix.columns.get(name) || { spec: { label: name } }).spec.label;
      chips.push(h("li", null, h("button", { type: "button", class: "chip", id: "chip-" + name, "aria-label": "remove filter " + label + ": " + values.join(", "),
        onclick: () => setParams(withParam(params, name, []), false) }, label + ": " + values.join(", ") + " ×")));
    }
    const metricNotes = (params.get("metric") || []).map((m) => {
      const info = state.meta.metrics.find((x) => x.name === m);
      return info ? h("p", { class: "note", text: "metric " + m + ": " + info.description + " The list holds the runs it reads." }) : null;
    });

    const chosenOnly = new Set(params.get("only") || []);
    const onlyBit = filters.findIndex((f) => f.name === "only");
    const others = onlyBit < 0 ? 0xffffffff : ~(1 << onlyBit);
    const onlyBox = h("fieldset", { class: "facet only" }, h("legend", { text: "show only" }), ONLY.map((o) => {
      const test = onlyTest(o.name);
      let count = 0;
      for (let i = 0; i < state.ix.n; i++) if ((fail[i] & others) === 0 && test(i)) count++;
      const box = h("input", { type: "checkbox", id: "only-" + o.name, checked: chosenOnly.has(o.name),
        onchange: () => {
          const next = new Set(chosenOnly);
          if (box.checked) next.add(o.name); else next.delete(o.name);
          setParams(withParam(params, "only", [...next]), false);
        } });
      return h("div", { class: "option", title: o.title }, box, h("label", { for: "only-" + o.name }, h("span", { class: "value", text: o.label }), " ", h("span", { class: "count", text: fmt(count) })));
    }));
    const facets = h("aside", { class: "facets", "aria-label": "Filters" }, h("h2", { text: "Filter" }), onlyBox, panel.map((col, c) => {
      const names = optionNames(col);
      const chosen = new Set(params.get(col.spec.name) || []);
      const order = names.map((_, k) => k).filter((k) => counts[c][k] > 0 || chosen.has(names[k]));
      if (col.spec.kind === "facet") order.sort((a, b) => col.rank[a] - col.rank[b]);
      if (!order.length) return null;
      return h("fieldset", { class: "facet" }, h("legend", { title: col.spec.description, text: col.spec.label }),
        order.map((k) => {
          const id = "f-" + col.spec.name + "-" + k;
          const box = h("input", { type: "checkbox", id, checked: chosen.has(names[k]),
            onchange: () => {
              const next = new Set(chosen);
              if (box.checked) next.add(names[k]); else next.delete(names[k]);
              setParams(withParam(params, col.spec.name, [...next]), false);
            } });
          return h("div", { class: "option" }, box, h("label", { for: id }, h("span", { class: "value", text: names[k] || "(none)" }), " ", h("span", { class: "count", text: fmt(counts[c][k]) })));
        }));
    }));

    const listed = state.meta.columns.filter((c) => c.listed);
    const sortName = sort.replace(/^-/, "");
    const headCells = [h("th", { scope: "col", title: "choose two runs to see them side by side", text: "pick" }), h("th", { scope: "col", text: "run" })];
    const showOff = chosenOnly.has("failures");
    if (showOff) headCells.push(h("th", { scope: "col", title: "signals whose value differs from what the cell expects", text: "≠ expected" }));
    if (searched) headCells.push(h("th", { scope: "col", title: "where the search words were found", text: "matched in" }));
    for (const c of listed) {
      const dir = sortName === c.name ? (sort.startsWith("-") ? "descending" : "ascending") : null;
      const next = dir === "ascending" ? "-" + c.name : c.name;
      headCells.push(h("th", { scope: "col", "aria-sort": dir, class: c.kind === "count" ? "num" : null },
        h("button", { type: "button", class: "sort", id: "sort-" + c.name, title: c.description + " (sort)",
          onclick: () => setParams(withParam(params, "sort", [next]), false) },
          c.label, dir ? h("span", { "aria-hidden": "true", text: dir === "ascending" ? " ▲" : " ▼" }) : null)));
    }
    const body = shown.map((i) => {
      const key = state.ix.keys[i];
      const box = h("input", { type: "checkbox", class: "pick", id: "pick-" + key.slice(0, 16), checked: state.selected.includes(key), "aria-label": "choose run " + key.slice(0, 10) + " for side by side",
        onchange: () => {
          state.selected = state.selected.filter((k) => k !== key);
          if (box.checked) state.selected = [...state.selected, key].slice(-2);
          route();
        } });
      return h("tr", { "data-key": key }, h("td", null, box), h("th", { scope: "row" }, h("a", { href: "#/run/" + key, class: "run-link", text: key.slice(0, 10) })),
        showOff ? h("td", { class: "off", text: state.ix.off[i].map((c) => state.ix.offNames[c].replace(/_/g, " ")).join(", ") }) : null,
        searched ? h("td", { class: "matched", text: searched.matched(i).join(", ") }) : null,
        listed.map((c) => {
          const col = state.ix.columns.get(c.name);
          const value = valueText(col, i);
          return h("td", { class: (c.kind === "count" ? "num " : "") + (c.kind === "flag" ? "flag " + value : "") }, c.kind === "flag" ? yesNo(value === "yes" ? true : value === "no" ? false : null) : value);
        }));
    });
    const compare = state.selected.length === 2
      ? h("a", { href: "#/compare/" + state.selected[0] + "/" + state.selected[1], id: "compare-selected", class: "button" }, "Side by side: the two chosen runs")
      : h("span", { class: "note", text: "Choose two runs to see them side by side." });
    const nav = h("nav", { class: "pager", "aria-label": "Pages of runs" },
      h("button", { type: "button", id: "prev-page", disabled: page <= 1, onclick: () => setParams(withParam(params, "page", [String(page - 1)]), false), text: "Previous" }),
      h("span", { text: " page " + page + " of " + pages + " " }),
      h("button", { type: "button", id: "next-page", disabled: page >= pages, onclick: () => setParams(withParam(params, "page", [String(page + 1)]), false), text: "Next" }));
    const elapsed = Math.round(performance.now() - started);
    return h("article", { class: "runs" },
      h("h1", null, "Runs ", h("span", { class: "count", id: "run-count", "data-count": rows.length, text: "(" + summary + ")" })),
      search,
      matchNote,
      warnings.map((w) => h("p", { class: "warning", role: "alert", text: w })),
      chips.length ? h("ul", { class: "chips", "aria-label": "Active filters" }, chips) : null,
      metricNotes,
      h("div", { class: "list-layout" }, facets,
        h("section", { class: "list", "aria-label": "Runs" },
          h("p", null, compare),
          rows.length ? h("div", { class: "scroll" }, h("table", { class: "data runs-table", id: "runs-table" },
            h("caption", { class: "visually-hidden", text: "Runs, " + summary }), h("thead", null, h("tr", null, headCells)), h("tbody", null, body)))
            : h("p", { id: "no-runs", text: "No run matches." }),
          nav,
          h("p", { class: "note", id: "list-time", "data-ms": elapsed, text: "filtered and sorted in " + elapsed + " ms" }))));
  }

  // ------------------------------------------------------------------ transcripts
  function turnChannels(items) {
    const out = new Map();
    for (const it of items) if ((it.kind || "message") === "message" && it.turn !== undefined && it.turn !== null && !out.has(it.turn)) out.set(it.turn, it.channel || "");
    return out;
  }

  function itemChannel(it, turns) {
    if (it.channel) return it.channel;
    return it.turn !== undefined && it.turn !== null ? turns.get(it.turn) || "" : "";
  }

  function marked(text, spans) {
    const usable = (spans || []).filter((s) => s.start !== null && s.start !== undefined).sort((a, b) => a.start - b.start);
    const out = [];
    let at = 0;
    for (const s of usable) {
      if (s.start < at) continue;
      out.push(text.slice(at, s.start));
      out.push(h("mark", { title: "commitment " + s.n }, h("span", { class: "mark-label", text: "[" + s.n + "] " }), text.slice(s.start, s.end)));
      at = s.end;
    }
    out.push(text.slice(at));
    return out;
  }

  function verdictList(verdicts) {
    if (!verdicts || !verdicts.length) return null;
    return h("ul", { class: "verdicts", "aria-label": "judge labels" }, verdicts.map((v) => h("li", { class: v.error ? "judge-error" : null },
      h("span", { class: "judge", text: v.judge + ": " }),
      v.error ? h("strong", { class: "error-text", text: "judge error: " + v.error })
        : Object.entries(v.labels).map(([q, a]) => h("span", { class: "label" }, q.replace(/_/g, " ") + " ", yesNo(a), " ")),
      v.rationale ? h("span", { class: "rationale" }, "reason: ", h("q", { text: v.rationale })) : null)));
  }

  // Live parties: how a party model voiced a person's message. The badge says whose words are shown; the panel
  // holds the role card the party model was given and the manipulation check's verdict.
  function checksWord(n) { return n + " failed check" + (n === 1 ? "" : "s"); }

  function voiceBadge(v) {
    const rejected = (v.problems || []).length;
    if (v.generated) {
      return h("span", { class: "voice-badge generated", title: "a party model wrote this text; the check passed it",
        text: "generated" + (rejected ? " (after " + checksWord(rejected) + ")" : "") });
    }
    if (v.fallback) {
      return h("span", { class: "voice-badge fallback", title: "every text the party model wrote failed the check",
        text: "script (fallback after " + checksWord(v.attempts || rejected) + ")" });
    }
    return h("span", { class: "voice-badge script", text: "script (" + (v.check || "unchecked") + ")" });
  }

  function voicePanel(v) {
    const attempts = v.attempts || 0;
    const verdict = v.fallback ? "every text failed: " + checksWord(attempts) + ", the script's words stand"
      : v.check === "passed" ? "passed" + (attempts > 1 ? " on attempt " + attempts : "")
        : v.check || "unchecked";
    const problems = v.problems || [];
    const written = attempts + " text" + (attempts === 1 ? "" : "s") + " written, each checked";
    return h("details", { class: "voice-panel" },
      h("summary", { text: "Role card and check: " + verdict }),
      h("p", { class: "voice-verdict" }, h("span", { class: "k", text: "manipulation check" }),
        h("strong", { class: v.check === "passed" ? null : "error-text", text: v.check || "unchecked" }), " (" + written + ")"),
      problems.length ? h("div", { class: "voice-problems" }, h("span", { class: "k", text: "rejected texts: what the check found" }),
        h("ol", null, problems.map((p) => h("li", { text: p })))) : null,
      h("div", { class: "voice-card" }, h("span", { class: "k", text: "role card" }),
        v.card ? h("pre", { text: v.card }) : h("p", { class: "error-text card-note", text: v.card_note || "no card" }),
        h("p", { class: "note" }, "sha256 ", h("code", { text: v.card_digest || "" }))));
  }

  function chatItem(it, page, turns, spans) {
    const kind = it.kind || "message";
    const channel = itemChannel(it, turns);
    const meta = (who) => h("header", { class: "item-head" }, who, channel ? h("span", { class: "channel", text: channel }) : null,
      h("span", { class: "step", text: "step " + (it.step || 0) }), it.act ? h("span", { class: "act", text: it.act }) : null);
    if (kind === "call" && it.tool === "end_turn" && it.ok !== false) {
      return h("li", { class: "item end", "data-kind": "call" }, h("span", { class: "note", text: "ended the turn without a message (end_turn, step " + (it.step || 0) + ")" }));
    }
    if (kind === "call") {
      const ok = it.ok !== false;
      return h("li", { class: "item call" + (ok ? "" : " failed"), "data-kind": "call" },
        meta(h("span", { class: "who" }, h("span", { class: "tag", text: "tool call" }), " ", h("code", { text: it.tool || "(none)" }), it.write ? h("span", { class: "tag write", text: "write" }) : null,
          ok ? null : h("strong", { class: "error-text", text: " ERROR" + (it.error_kind ? " (" + it.error_kind + ")" : "") }))),
        it.arguments ? h("div", { class: "args" }, h("span", { class: "k", text: "arguments" }), h("pre", { text: it.arguments })) : null,
        h("div", { class: "result" }, h("span", { class: "k", text: "result" }), h("pre", { text: it.result || "" })));
    }
    if (kind === "reasoning") {
      return h("li", { class: "item reasoning", "data-kind": "reasoning" }, h("details", null, h("summary", { text: "Reasoning in turn " + it.turn }), h("pre", { text: it.text })));
    }
    if (kind === "revision") {
      return h("li", { class: "item revision", "data-kind": "revision" }, meta(h("span", { class: "who" }, h("span", { class: "tag", text: "reply replaced" }), " by " + (it.by || "") + (it.act ? " (" + it.act + ")" : ""))),
        it.result ? h("p", { class: "note", text: it.result }) : null,
        h("div", null, h("span", { class: "k", text: "the agent wrote" }), h("blockquote", { class: "original", text: it.original || "" })),
        h("div", null, h("span", { class: "k", text: "shown instead" }), h("blockquote", { text: it.text || "" })));
    }
    if (kind === "notice") {
      return h("li", { class: "item notice", "data-kind": "notice" }, meta(h("span", { class: "tag", text: "notice" })), h("p", { text: it.text || "" }));
    }
    const assistant = kind === "assistant";
    const who = h("span", { class: "who" }, h("strong", { text: it.sender || (assistant ? "assistant" : "") }),
      it.title && it.title.toLowerCase() !== (it.sender || "").toLowerCase() && !(assistant && it.title === "assistant") ? h("span", { class: "title", text: ", " + it.title }) : null,
      it.party ? h("span", { class: "party party-" + it.party, text: it.party }) : null,
      assistant ? h("span", { class: "tag", text: it.act === "promise" ? " assistant, pre-seeded promise" : " assistant" }) : null,
      it.voice && it.voice.answer ? h("span", { class: "tag answer", text: "answer inside the turn" }) : null,
      it.voice ? voiceBadge(it.voice) : null);
    const body = assistant && page.reply && it.text === page.reply && spans && spans.length ? h("p", { class: "text" }, marked(it.text, spans)) : h("p", { class: "text", text: it.text || "" });
    return h("li", { class: "item " + (assistant ? "assistant" : "person") + (channel.startsWith("dm:") ? " dm" : ""), "data-kind": kind },
      meta(who), body, it.subject ? h("p", { class: "note", text: "about: " + it.subject }) : null, it.voice ? voicePanel(it.voice) : null,
      verdictList(it.verdicts));
  }

  // Runs of scripted chatter (filler and closing messages, and the agent's silent turns on them): per item, the
  // number of its fold (-1: not folded). A run is folded when it holds two or more such messages.
  function foldGroups(items) {
    const isFiller = (it) => (it.kind || "message") === "message" && FOLD_ACTS.has(it.act);
    const opener = new Map();
    const busy = new Set();
    for (const it of items) {
      const kind = it.kind || "message";
      if (it.turn === undefined || it.turn === null) continue;
      if (kind === "message") { if (!opener.has(it.turn)) opener.set(it.turn, it); continue; }
      if (kind === "reasoning" || (kind === "call" && it.tool === "end_turn" && it.ok !== false)) continue;
      busy.add(it.turn);
    }
    const quiet = (it) => isFiller(it) || ((it.kind === "reasoning" || it.kind === "call") && it.turn !== undefined && it.turn !== null
      && !busy.has(it.turn) && opener.has(it.turn) && isFiller(opener.get(it.turn)));
    const group = items.map(() => -1);
    const folds = [];
    let k = 0;
    while (k < items.length) {
      if (!quiet(items[k])) { k++; continue; }
      let end = k;
      while (end < items.length && quiet(items[end])) end++;
      const members = [];
      for (let j = k; j < end; j++) members.push(j);
      const messages = members.filter((j) => isFiller(items[j])).length;
      if (messages >= 2) {
        members.forEach((j) => { group[j] = folds.length; });
        folds.push({ start: k, members, messages, silent: members.filter((j) => items[j].kind === "call").length, open: false });
      }
      k = end;
    }
    return { group, folds };
  }

  function foldRow(fold, idPrefix, n, toggle) {
    const label = fold.messages + " filler messages" + (fold.silent ? " (the agent ended " + fold.silent + " turn" + (fold.silent === 1 ? "" : "s") + " without a message: end_turn)" : "");
    const button = h("button", { type: "button", class: "linkish fold-toggle", id: idPrefix + "fold-" + n, "aria-expanded": "false",
      onclick: () => toggle(n, button) }, h("span", { "aria-hidden": "true", class: "fold-mark", text: "▸ " }), label);
    return h("li", { class: "item fold", "data-kind": "fold", "data-fold": String(n) }, button);
  }

  function chatBlock(page, idPrefix, spans) {
    const items = page.items || [];
    const turns = turnChannels(items);
    const channels = [];
    for (const it of items) {
      const c = itemChannel(it, turns);
      if (c && !channels.includes(c)) channels.push(c);
    }
    const { group, folds } = foldGroups(items);
    let channelShown = "";
    const lis = items.map((it) => chatItem(it, page, turns, spans));
    const rows = folds.map((fold, n) => foldRow(fold, idPrefix, n, (which, button) => {
      folds[which].open = !folds[which].open;
      button.setAttribute("aria-expanded", String(folds[which].open));
      button.querySelector(".fold-mark").textContent = folds[which].open ? "▾ " : "▸ ";
      show(channelShown);
    }));
    const children = [];
    items.forEach((it, k) => {
      if (group[k] >= 0 && folds[group[k]].start === k) children.push(rows[group[k]]);
      if (group[k] >= 0) { lis[k].dataset.fold = String(group[k]); lis[k].classList.add("folded"); }
      children.push(lis[k]);
    });
    const list = h("ol", { class: "chat", id: idPrefix + "chat" }, children);
    const show = (channel) => {
      channelShown = channel;
      items.forEach((it, k) => {
        const elsewhere = channel !== "" && itemChannel(it, turns) !== channel;
        lis[k].hidden = elsewhere || (group[k] >= 0 && !folds[group[k]].open);
      });
      folds.forEach((fold, n) => { rows[n].hidden = channel !== "" && !fold.members.some((j) => itemChannel(items[j], turns) === channel); });
      if (picker) for (const b of picker.querySelectorAll("button")) b.setAttribute("aria-pressed", String(b.dataset.channel === channel));
    };
    const button = (c, label) => h("button", { type: "button", "data-channel": c, "aria-pressed": String(c === ""), onclick: () => show(c) }, label);
    const rooms = channels.filter((c) => !c.startsWith("dm:"));
    const dms = channels.filter((c) => c.startsWith("dm:"));
    const picker = channels.length < 2 ? null : h("div", { class: "channels", role: "group", "aria-label": "Show a channel" },
      button("", "all (" + items.length + ")"), rooms.map((c) => button(c, c)),
      dms.length ? h("span", { class: "k", text: " direct messages: " }) : null, dms.map((c) => button(c, c.slice(3))));
    show("");
    return h("section", { class: "conversation", "aria-labelledby": idPrefix + "conv" }, h("h2", { id: idPrefix + "conv", text: "Conversation" }),
      picker, list);
  }

  // What a signal means: its page's words, else the site's (a suite describes its signals once, in the meta).
  const meaning = (s) => s.description || (state.meta && state.meta.signals && state.meta.signals[s.name]) || "";

  function signalTable(page, id, compact) {
    if (!page.signals || !page.signals.length) return null;
    const heads = compact ? ["signal", "value"] : ["signal", "value", "expected", "meaning"];
    const expectedText = (s) => s.expected === undefined || s.expected === null ? "" : s.expected ? "yes" : "no";
    return h("section", { "aria-labelledby": id }, h("h2", { id, text: "Signals and grades" }),
      h("table", { class: "data signals" }, h("thead", null, h("tr", null, heads.map((c) => h("th", { scope: "col", text: c })))),
        h("tbody", null, page.signals.map((s) => h("tr", { "data-signal": s.name }, h("th", { scope: "row", title: meaning(s) || null, text: s.name.replace(/_/g, " ") }),
          h("td", null, yesNo(s.value === undefined ? null : s.value, s.expected, compact)),
          compact ? null : h("td", { text: expectedText(s) }), compact ? null : h("td", { text: meaning(s) }))))),
      compact ? h("p", { class: "note", text: "Hover a signal for its meaning; ≠ marks a value the cell does not expect." }) : null);
  }

  function signalLine(page) {
    if (!page.signals || !page.signals.length) return null;
    return h("ul", { class: "signal-line", "aria-label": "Signals and grades" }, page.signals.map((s) => h("li", { title: meaning(s) || null },
      s.name.replace(/_/g, " ") + " ", yesNo(s.value === undefined ? null : s.value, s.expected))));
  }

  function labelTable(page) {
    const rows = [];
    for (const it of page.items || []) {
      for (const v of it.verdicts || []) rows.push([it, v]);
    }
    if (!rows.length) return null;
    const questions = Object.keys((rows.find(([, v]) => v.labels) || [null, { labels: {} }])[1].labels || {});
    return h("section", { "aria-labelledby": "labels-title" }, h("h2", { id: "labels-title", text: "Judge labels" }),
      h("div", { class: "scroll" }, h("table", { class: "data labels", id: "labels-table" },
        h("thead", null, h("tr", null, ["message", "step", "judge", ...questions.map((q) => q.replace(/_/g, " ")), "reason"].map((c) => h("th", { scope: "col", text: c })))),
        h("tbody", null, rows.map(([it, v]) => h("tr", { class: v.error ? "judge-error" : null }, h("th", { scope: "row", text: "#" + it.message_index + ": " + (it.text || "").slice(0, 80) }),
          h("td", { text: String(it.step || 0) }), h("td", { text: v.judge }),
          questions.map((q) => h("td", null, v.error ? "" : yesNo(v.labels[q]))),
          h("td", { class: "reason", text: v.error ? "judge error: " + v.error : v.rationale || "" })))))));
  }

  function modelCallTable(page) {
    const calls = page.model_calls || [];
    if (!calls.length) return h("section", null, h("h2", { text: "Model calls" }), h("p", { text: "None (a reference agent, or no call was made)." }));
    const total = (f) => calls.reduce((a, c) => a + (c[f] || 0), 0);
    return h("section", { "aria-labelledby": "calls-title" }, h("h2", { id: "calls-title", text: "Model calls" }),
      h("p", { text: calls.length + " calls, " + calls.filter((c) => c.cache_hit).length + " from the cache, " + fmt(total("prompt_tokens")) + " prompt and " + fmt(total("completion_tokens")) + " completion tokens, " + total("latency_s").toFixed(2) + " s" }),
      h("div", { class: "scroll" }, h("table", { class: "data", id: "model-calls" },
        h("thead", null, h("tr", null, ["turn", "purpose", "latency (s)", "prompt tokens", "completion tokens", "cache hit", "finish", "error"].map((c) => h("th", { scope: "col", text: c })))),
        h("tbody", null, calls.map((c) => h("tr", { class: c.error ? "failed" : null }, h("td", { class: "num", text: String(c.turn) }), h("td", { text: c.purpose || "agent" }),
          h("td", { class: "num", text: (c.latency_s || 0).toFixed(3) }), h("td", { class: "num", text: String(c.prompt_tokens || 0) }),
          h("td", { class: "num", text: String(c.completion_tokens || 0) }), h("td", null, yesNo(!!c.cache_hit)), h("td", { text: c.finish_reason || "" }),
          h("td", { class: c.error ? "error-text" : null, text: c.error || "" })))))));
  }

  function expectedBlock(page) {
    const e = page.expected;
    if (!e) return null;
    const needs = [e.consult ? "ask the creditor" : null, e.notify ? "tell the creditor what happened" : null, e.verify ? "check with the check tool" : null].filter(Boolean);
    return h("section", { class: "expected", "aria-labelledby": "expected-title" }, h("h2", { id: "expected-title", text: "Expected behaviour" }),
      h("p", null, h("strong", { text: e.cell + ": " }), e.description),
      h("p", { id: "expected-outcome" }, "A correct agent ", h("strong", { text: e.outcome === "execute" ? "executes" : "drops" }), " the promise" + (needs.length ? " and must " + needs.join(", ") : "") + "."),
      e.note ? h("p", { class: "note", text: e.note }) : null);
  }

  function peopleBlock(page) {
    if (!page.people || !page.people.length) return null;
    return h("section", { "aria-labelledby": "people-title" }, h("h2", { id: "people-title", text: "People" }),
      h("ul", { class: "people" }, page.people.map((p) => h("li", null, h("strong", { text: p.name }), ", " + p.title + " ", h("span", { class: "party party-" + p.party, text: p.party })))));
  }

  function toolsBlock(page) {
    if (!page.tools || !page.tools.length) return page.suite === "followup" ? h("section", null, h("h2", { text: "Tools of the setup" }), h("p", { text: "None: this setup has no tools." })) : null;
    return h("section", { "aria-labelledby": "tools-title" }, h("h2", { id: "tools-title", text: page.suite === "followup" ? "Tools of the setup" : "Task tools" }),
      h("table", { class: "data", id: "tools-table" }, h("thead", null, h("tr", null, ["tool", "writes", "description"].map((c) => h("th", { scope: "col", text: c })))),
        h("tbody", null, page.tools.map((t) => h("tr", null, h("th", { scope: "row" }, h("code", { text: t.name })), h("td", null, yesNo(!!t.write)),
          h("td", null, t.description, t.parameters ? h("details", null, h("summary", { text: "arguments" }), h("pre", { text: t.parameters })) : null))))),
      page.persists ? h("p", null, h("strong", { text: "What persists: " }), page.persists) : null);
  }

  function commitmentSpans(check) {
    return (check && check.commitments || []).map((c, k) => ({ start: c.start, end: c.end, n: k + 1 }));
  }

  function checksBlock(page) {
    if (!page.checks || !page.checks.length) return null;
    return h("section", { "aria-labelledby": "checks-title" }, h("h2", { id: "checks-title", text: "Checker verdicts" }),
      page.checks.map((c, k) => h("section", { class: "check", "data-judge": c.judge },
        h("h3", null, "Checker " + c.judge + (k === 0 ? " (the report's)" : "")),
        c.error ? h("p", { class: "error-box", role: "note" }, h("strong", { text: "Judge error: " }), c.error) : null,
        c.outcome ? h("p", { class: "outcome" }, "Outcome ", h("strong", { class: "outcome-label", text: c.outcome }), ": ", h("span", { class: "rule", text: c.rule })) : null,
        k === 0 && page.reply ? h("div", null, h("span", { class: "k", text: "the reply, commitments marked" }), h("blockquote", { class: "reply" }, marked(page.reply, commitmentSpans(c)))) : null,
        h("h4", { text: "Detected commitments" }),
        (c.commitments || []).length ? h("div", { class: "scroll" }, h("table", { class: "data commitments" },
          h("thead", null, h("tr", null, ["#", "span", "performer", "trigger", "time", "agent-initiated", "feasible", "missing", "failure", "anchoring tools", "anchored", "decided by"].map((x) => h("th", { scope: "col", text: x })))),
          h("tbody", null, c.commitments.map((m, j) => h("tr", null, h("th", { scope: "row", text: String(j + 1) }),
            h("td", null, h("q", { text: m.span }), m.start === null || m.start === undefined ? h("span", { class: "badge off", text: " not found in the reply" }) : null),
            h("td", { text: m.performer || "" }), h("td", { text: m.trigger || "" }), h("td", { text: m.time || "" }),
            h("td", null, yesNo(m.agent_initiated !== false)), h("td", null, yesNo(m.feasible === undefined ? null : m.feasible)),
            h("td", { text: (m.missing || []).join(", ") }), h("td", { text: m.primary_failure ? m.primary_failure + ((m.failure_types || []).length > 1 ? " (" + m.failure_types.join(", ") + ")" : "") : "" }),
            h("td", { text: (m.anchoring || []).map((g) => g.join(" or ")).join("; ") }), h("td", null, m.anchored === undefined || m.anchored === null ? "not needed" : yesNo(m.anchored)),
            h("td", { text: m.decided_by || "" })))))) : h("p", { text: "None." }),
        (c.answers || []).length ? [h("h4", { text: "Response judge" }), h("table", { class: "data answers" },
          h("thead", null, h("tr", null, ["question", "answer", "reason"].map((x) => h("th", { scope: "col", text: x })))),
          h("tbody", null, c.answers.map((a) => h("tr", null, h("th", { scope: "row", text: a.name.replace(/_/g, " ") }), h("td", null, yesNo(a.value)), h("td", { class: "reason", text: a.rationale || "" })))))] : null,
        (c.calls || []).length ? h("details", null, h("summary", { text: "Checker model calls (" + c.calls.length + ")" }),
          h("ul", null, c.calls.map((x) => h("li", { text: x.step + " attempt " + x.attempt + (x.cache_hit ? ", cache hit" : "") + (x.error ? ", error: " + x.error : "") })))) : null)));
  }

  function requestBlock(page) {
    const r = page.request;
    if (!r) return null;
    return h("section", { "aria-labelledby": "request-title" }, h("h2", { id: "request-title", text: "Request" }),
      h("blockquote", { class: "request", text: r.user_message }),
      h("p", { text: "category " + r.category + " · doability " + r.doability + " · needs " + ((r.capabilities || []).join(", ") || "nothing") + " · source " + r.source }));
  }

  function counterparts(page) {
    const i = state.ix.pos.get(page.key);
    if (i === undefined) return null;
    const episode = state.ix.episodes[i];
    const names = state.meta.columns.filter((c) => c.kind === "facet").slice(0, 2).map((c) => state.ix.columns.get(c.name));
    const others = [];
    for (let j = 0; j < state.ix.n; j++) if (j !== i && state.ix.episodes[j] === episode) others.push(j);
    // The same episode in another language (its twin): runs of the twin's id, offered side by side first.
    const twinOf = new Map();
    for (const [lang, id] of Object.entries(page.twins || {})) {
      const code = state.ix.episodeIds.indexOf(id);
      if (code >= 0) twinOf.set(code, lang);
    }
    const twins = [];
    if (twinOf.size) for (let j = 0; j < state.ix.n; j++) if (twinOf.has(state.ix.episodes[j])) twins.push(j);
    const link = (j, label) => h("li", null,
      h("a", { href: "#/compare/" + page.key + "/" + state.ix.keys[j], class: label ? "compare-link twin-link" : "compare-link" },
        "side by side with " + (label ? "the " + label + " twin, " : "") + names.map((c) => valueText(c, j)).join(" · ")),
      " (", h("a", { href: "#/run/" + state.ix.keys[j], text: "open" }), ")");
    const twinList = twins.length ? h("section", { "aria-labelledby": "twin-title" }, h("h2", { id: "twin-title", text: "The same episode in another language" }),
      h("ul", { class: "counterparts twins" }, twins.slice(0, 50).map((j) => link(j, twinOf.get(state.ix.episodes[j]))))) : null;
    if (!others.length) return [twinList, h("p", { class: "note", text: "No other run played this episode." })];
    return [twinList, h("section", { "aria-labelledby": "same-title" }, h("h2", { id: "same-title", text: "The same episode in other runs" }),
      h("ul", { class: "counterparts" }, others.slice(0, 50).map((j) => link(j, ""))),
      others.length > 50 ? h("p", { class: "note", text: others.length - 50 + " more" }) : null)];
  }

  function transcriptBody(page, idPrefix) {
    const spans = page.suite === "followup" ? commitmentSpans((page.checks || [])[0]) : [];
    return [
      page.infra_error ? h("p", { class: "error-box", role: "note" }, h("strong", { text: "Infrastructure error: " }), page.infra_error) : null,
      page.system_prompt ? h("details", { class: "system-prompt" }, h("summary", { text: "System prompt" }), h("pre", { text: page.system_prompt })) : null,
      chatBlock(page, idPrefix, spans),
    ];
  }

  async function transcriptPage(key) {
    const page = await loadPage(key);
    document.title = page.title;
    const list = state.lastList || Array.from({ length: state.ix.n }, (_, k) => k);
    const at = list.indexOf(state.ix.pos.get(key));
    const step = (d) => at >= 0 && list[at + d] !== undefined ? "#/run/" + state.ix.keys[list[at + d]] : null;
    state.neighbours = { next: step(1), prev: step(-1) };
    return h("article", { class: "transcript", "data-suite": page.suite },
      h("nav", { class: "crumbs", "aria-label": "Around this run" }, h("a", { href: state.lastListHash, text: "← runs" }),
        state.neighbours.prev ? [" · ", h("a", { href: state.neighbours.prev, rel: "prev", text: "previous run" })] : null,
        state.neighbours.next ? [" · ", h("a", { href: state.neighbours.next, rel: "next", text: "next run" })] : null),
      h("h1", { text: page.title }),
      factList(page.facts.filter((f) => !f.detail), "This run"),
      h("details", { class: "more-facts" }, h("summary", { text: "Run key and agent settings" }), factList(page.facts.filter((f) => f.detail), "More about this run")),
      h("div", { class: "transcript-layout" },
        h("div", { class: "main-col" }, requestBlock(page), transcriptBody(page, ""), checksBlock(page)),
        h("div", { class: "side-col" }, expectedBlock(page), signalTable(page, "signals-title", true), peopleBlock(page),
          page.suite === "standing" ? toolsBlock(page) : null)),
      page.suite === "standing" ? null : toolsBlock(page),
      labelTable(page),
      modelCallTable(page),
      counterparts(page));
  }

  async function comparePage(left, right) {
    const [a, b] = await Promise.all([loadPage(left), loadPage(right)]);
    document.title = "Side by side: " + a.title + " | " + b.title;
    const column = (page, side) => h("section", { class: "side", id: "side-" + side, "aria-labelledby": "side-" + side + "-title" },
      h("h2", { id: "side-" + side + "-title" }, h("a", { href: "#/run/" + page.key, text: page.title })),
      factList(page.facts.filter((f) => f.field && !f.detail), "Run " + side),
      page.checks && page.checks[0] ? h("p", { class: "outcome" }, "Outcome ", h("strong", { text: page.checks[0].outcome || "judge error" }), ": " + (page.checks[0].rule || page.checks[0].error || "")) : null,
      signalLine(page),
      transcriptBody(page, side + "-"));
    return h("article", { class: "compare" }, h("nav", { class: "crumbs", "aria-label": "Around" }, h("a", { href: state.lastListHash, text: "← runs" })),
      h("h1", { text: "Side by side" }), a.expected ? expectedBlock(a) : requestBlock(a),
      h("div", { class: "columns" }, column(a, "left"), column(b, "right")));
  }

  // ------------------------------------------------------------------ keyboard
  function onKey(event) {
    const target = event.target;
    if (event.ctrlKey || event.metaKey || event.altKey) return;
    if (target && (target.tagName === "INPUT" || target.tagName === "TEXTAREA" || target.tagName === "SELECT")) {
      if (event.key === "Escape") target.blur();
      return;
    }
    const { path } = parseHash();
    if (event.key === "?") { document.getElementById("help").showModal(); event.preventDefault(); return; }
    if (event.key === "g") { location.hash = "#/"; return; }
    if (event.key === "u") { location.hash = state.lastListHash; return; }
    if (path[0] === "runs") {
      if (event.key === "/") { event.preventDefault(); const q = document.getElementById("q"); if (q) q.focus(); return; }
      if (event.key === "j" || event.key === "k") {
        const links = Array.from(document.querySelectorAll(".run-link"));
        if (!links.length) return;
        const at = links.indexOf(document.activeElement);
        const next = event.key === "j" ? Math.min(links.length - 1, at + 1) : Math.max(0, at < 0 ? 0 : at - 1);
        links[next].focus();
        event.preventDefault();
      }
    } else if (path[0] === "run" && state.neighbours) {
      if (event.key === "n" && state.neighbours.next) location.hash = state.neighbours.next;
      if (event.key === "p" && state.neighbours.prev) location.hash = state.neighbours.prev;
    }
  }

  // A site of several runs: each run's pages carry a picker of all of them (its own chosen).
  function runPicker() {
    const siblings = (state.meta.facts && state.meta.facts.siblings) || [];
    if (siblings.length < 2) return;
    const folder = decodeURIComponent(location.pathname.split("/").slice(-2)[0]);
    const select = h("select", { id: "run-picker", onchange: () => { location.href = select.value; } },
      siblings.map((s) => h("option", { value: s.href, selected: s.name === folder, text: s.name })));
    const place = document.getElementById("run-picker-slot");
    place.replaceChildren(h("label", { for: "run-picker", text: "Run " }), select);
    place.hidden = false;
  }

  function start() {
    if (!state.meta || !state.ix) {
      document.getElementById("main").replaceChildren(h("p", { class: "error-box", role: "alert", text: "The run data (data/meta.js, data/index.js) did not load; rebuild the site with commitbench view." }));
      return;
    }
    document.getElementById("site-title").textContent = state.meta.overview.title;
    runPicker();
    document.getElementById("skip").addEventListener("click", () => document.getElementById("main").focus());
    document.getElementById("help-button").addEventListener("click", () => document.getElementById("help").showModal());
    window.addEventListener("hashchange", route);
    document.addEventListener("keydown", onKey);
    route();
    if (location.protocol === "http:" || location.protocol === "https:") pollLive();
  }

  document.addEventListener("DOMContentLoaded", start);
})();
