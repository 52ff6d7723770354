// cowork view: draws the page from the JSON in #cowork-data. Every value from task data
// goes into the DOM as text (textContent, createTextNode, setAttribute on our own ids):
// never as markup, so an output holding a script tag shows as those characters.
"use strict";
(function () {
  const D = JSON.parse(document.getElementById("cowork-data").textContent);
  const SVG = "http://www.w3.org/2000/svg";

  // ------------------------------------------------------------------ DOM helpers
  function el(tag, attrs, ...kids) {
    const n = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k === "class") n.className = v;
      else if (k === "onclick") n.addEventListener("click", v);
      else n.setAttribute(k, v === true ? "" : String(v));
    }
    add(n, kids);
    return n;
  }
  function add(n, kids) {
    for (const k of kids.flat(Infinity)) {
      if (k === null || k === undefined || k === false) continue;
      n.appendChild(k instanceof Node ? k : document.createTextNode(String(k)));
    }
    return n;
  }
  function svg(tag, attrs, text) {
    const n = document.createElementNS(SVG, tag);
    for (const [k, v] of Object.entries(attrs || {})) n.setAttribute(k, String(v));
    if (text !== undefined) n.textContent = String(text);
    return n;
  }
  const link = (anchor, text, cls) => el("a", {href: "#" + anchor, class: cls}, text);
  const pre = (text, cls) => el("pre", {class: cls}, text);
  const json = (v) => (typeof v === "string" ? v : JSON.stringify(v, null, 2));
  const num = (v, d = 2) => (typeof v === "number" ? v.toFixed(d) : "–");
  const secs = (v) => (typeof v === "number" ? (v < 10 ? v.toFixed(2) : v.toFixed(1)) + " s" : "–");
  const ms = (v) => (typeof v === "number" ? v.toFixed(1) + " ms" : "");
  function badge(text, kind) { return el("span", {class: "badge " + kind}, text); }

  function verdict(row) {
    if (row.grade_status === "infra_error") return [badge("INFRA ERROR", "err")];
    const out = [row.passed ? badge("PASSED", "pass") : badge("FAILED", "fail")];
    return out;
  }
  function safety(row) {
    if (row.safe === true) return [badge("safe", "pass")];
    if (row.safe === false) {
      const v = row.violations || [];
      return v.length ? v.map((id) => badge("VIOLATION " + id, "viol")) : [badge("VIOLATION", "viol")];
    }
    return [badge("safety unknown", "warn")];
  }
  function statusOf(row) {
    if (row.grade_status === "infra_error" || row.grade_status === "evidence_invalid") return "error";
    if (row.safe === false) return "unsafe";
    return row.passed ? "passed" : "failed";
  }

  // ------------------------------------------------------------------ charts (inline SVG)
  const COLORS = ["#3b6fb6", "#e08a2e", "#4a9a5b", "#9b59b6"];
  function barChart(c) {
    const labelW = 190, barW = 360, rowH = 16 * Math.max(1, c.series.length) + 8, top = 22;
    const vals = c.bars.flatMap((b) => b.values.filter((v) => typeof v === "number"));
    const max = c.max || Math.max(1e-9, ...vals);
    const h = top + rowH * c.bars.length + 10;
    const s = svg("svg", {width: labelW + barW + 80, height: h, role: "img", class: "chart"});
    s.appendChild(svg("title", {}, c.title));
    c.series.forEach((name, j) => {
      if (c.series.length < 2) return;
      s.appendChild(svg("rect", {x: labelW + j * 110, y: 4, width: 10, height: 10, fill: COLORS[j % 4]}));
      s.appendChild(svg("text", {x: labelW + j * 110 + 14, y: 13, class: "legend"}, name));
    });
    c.bars.forEach((b, i) => {
      const y = top + i * rowH;
      s.appendChild(svg("text", {x: labelW - 6, y: y + rowH / 2 + 2, "text-anchor": "end", class: "label"},
        b.label.length > 28 ? b.label.slice(0, 27) + "…" : b.label));
      b.values.forEach((v, j) => {
        if (typeof v !== "number") return;
        const w = Math.max(1, (barW * v) / max);
        const by = y + 3 + j * 16;
        s.appendChild(svg("rect", {x: labelW, y: by, width: w, height: 13, fill: COLORS[j % 4]}));
        s.appendChild(svg("text", {x: labelW + w + 4, y: by + 11, class: "value"},
          (Math.abs(v) >= 100 ? v.toFixed(0) : v.toFixed(2)) + (c.unit ? " " + c.unit : "")));
      });
    });
    return el("figure", {class: "chartbox"}, el("figcaption", {}, c.title), s);
  }
  function dotChart(c) {
    const labelW = 190, W = 360, rowH = 22, top = 24;
    const span = Math.max(1e-9, c.max - c.min), x = (v) => labelW + (W * (v - c.min)) / span;
    const s = svg("svg", {width: labelW + W + 100, height: top + rowH * c.rows.length + 6, role: "img", class: "chart"});
    s.appendChild(svg("title", {}, c.title));
    for (const t of [c.min, (c.min + c.max) / 2, c.max]) {
      s.appendChild(svg("line", {x1: x(t), x2: x(t), y1: top - 6, y2: top + rowH * c.rows.length, class: "grid"}));
      s.appendChild(svg("text", {x: x(t), y: top - 9, "text-anchor": "middle", class: "value"}, t.toFixed(2)));
    }
    c.rows.forEach((r, i) => {
      const y = top + i * rowH + rowH / 2;
      s.appendChild(svg("text", {x: labelW - 6, y: y + 4, "text-anchor": "end", class: "label"},
        r.label.length > 28 ? r.label.slice(0, 27) + "…" : r.label));
      if (r.values.length) {
        s.appendChild(svg("line", {x1: x(Math.min(...r.values)), x2: x(Math.max(...r.values)), y1: y, y2: y, class: "range"}));
      }
      r.values.forEach((v) => s.appendChild(svg("circle", {cx: x(v), cy: y, r: 4, class: "dot"})));
      if (typeof r.mean === "number") {
        s.appendChild(svg("line", {x1: x(r.mean), x2: x(r.mean), y1: y - 7, y2: y + 7, class: "mean"}));
        s.appendChild(svg("text", {x: labelW + W + 8, y: y + 4, class: "value"}, "mean " + r.mean.toFixed(2)));
      }
    });
    return el("figure", {class: "chartbox"}, el("figcaption", {}, c.title), s);
  }
  const chart = (c) => (c.type === "dots" ? dotChart(c) : barChart(c));

  // ------------------------------------------------------------------ the run
  function agentsText() {
    // Who played, from the episodes themselves: "agents: oracle 2, nop 1" when they differ.
    const a = Object.entries(D.agents || {});
    if (a.length > 1) return "agents: " + a.map(([k, n]) => k + " " + n).join(", ");
    return a.length ? "agent " + a[0][0] : null;
  }
  function header() {
    const what = {results: "results folder", bundle: "evidence bundle", bench: "bench report"}[D.kind] || D.kind;
    const played = agentsText();
    const params = D.run ? Object.entries(D.run).filter(([k]) => k !== "tasks" && k !== "agents" &&
      !(k === "agent" && played)).map(([k, v]) => k + " " + json(v)) : [];
    if (played) params.unshift(played);
    return el("header", {},
      el("h1", {}, "cowork view"),
      el("p", {class: "meta"}, what + ": ", el("code", {}, D.source), " · generated " + D.generated,
        D.version ? " · cowork " + D.version : ""),
      params.length ? el("p", {class: "meta", id: "run-params"}, params.join(" · ")) : null);
  }
  function attention() {
    // The first screen: what went wrong, before any figure or chart.
    const A = D.attention;
    if (!A || !D.episodes.length) return null;
    const titles = {violation: ["Safety violations", "a-viol"], infra: ["Infrastructure and model endpoint errors (not scored)", "a-infra"],
      failure: ["Failures", "a-fail"]};
    const parts = Object.entries(titles).filter(([k]) => A[k] && A[k].total).map(([k, [title, cls]]) =>
      el("div", {class: "attn " + cls, id: "attention-" + k},
        el("h3", {}, title + " (" + A[k].total + ")"),
        el("ul", {}, A[k].episodes.map((e) => el("li", {},
          link(e.id, e.task + " · sample " + e.sample), e.agent ? el("span", {class: "meta"}, " · " + e.agent) : null,
          " ", el("span", {class: "meta"}, "score " + num(e.score)),
          el("ul", {class: "reasons"}, e.reasons.map((r) => el("li", {}, r)))))),
        A[k].total > A[k].episodes.length ? el("p", {class: "note"}, "… and " + (A[k].total - A[k].episodes.length) +
          " more: filter the episode table below.") : null));
    return el("section", {id: "attention"}, el("h2", {}, "Needs attention"),
      parts.length ? parts : el("p", {class: "note ok"}, "Nothing: every episode passed, and safely."));
  }
  function figures() {
    if (!D.figures || !D.figures.length) return null;
    return el("section", {class: "figures"}, D.figures.map((f) =>
      el("div", {class: "figure"}, el("div", {class: "fv"}, f.value), el("div", {class: "fl"}, f.label))));
  }
  function taskSummary() {
    const tasks = D.summary && D.summary.tasks;
    if (!tasks || !Object.keys(tasks).length) return null;
    const rows = Object.entries(tasks).map(([t, m]) => {
      const k = m.k, sp = (D.spread || {})[t] || {};
      return el("tr", {},
        el("td", {}, t), el("td", {class: "n"}, m.trials), el("td", {class: "n"}, m.passes),
        el("td", {class: "n"}, num(m.mean_score)), el("td", {class: "n"}, num(m["pass@1"])),
        el("td", {class: "n"}, "k=" + k + ": " + num(m["pass@" + k])), el("td", {class: "n"}, num(m["pass^" + k])),
        el("td", {class: "n"}, num(m.mean_reward)),
        el("td", {class: "n"}, sp.n ? num(sp.min) + " – " + num(sp.max) + " (σ " + num(sp.std) + ")" : "–"),
        el("td", {class: "n"}, m.unsafe), el("td", {class: "n"}, (m.infra_error || 0)));
    });
    return el("section", {},
      el("h2", {}, "Per task"),
      el("table", {class: "grid"},
        el("thead", {}, el("tr", {}, ["task", "trials", "passed", "mean score", "pass@1", "pass@k", "pass^k",
          "mean reward", "reward spread", "unsafe", "infra errors"].map((h) => el("th", {}, h)))),
        el("tbody", {}, rows)));
  }
  function charts() {
    const cs = D.charts || [];
    if (!cs.length) return null;
    return el("section", {}, el("h2", {}, "Figures"), el("div", {class: "charts"}, cs.map(chart)));
  }
  function bench() {
    if (!D.bench) return null;
    const b = D.bench;
    return el("section", {},
      el("h2", {}, "Bench"),
      b.targets.length ? el("table", {class: "grid"},
        el("thead", {}, el("tr", {}, ["figure", "measured", "target", ""].map((h) => el("th", {}, h)))),
        el("tbody", {}, b.targets.map((t) => el("tr", {}, el("td", {}, t.figure), el("td", {}, t.shown),
          el("td", {}, t.target), el("td", {}, t.pass ? badge("pass", "pass") : badge("MISS", "fail")))))) : null,
      el("div", {class: "charts"}, b.charts.map(chart)));
  }

  // ------------------------------------------------------------------ episode table and filters
  const state = {task: "", status: "", selected: null, all: false};
  function episodesTable() {
    if (!D.episodes.length) return null;
    const taskSel = el("select", {id: "filter-task", "aria-label": "task"}, el("option", {value: ""}, "all tasks"),
      D.tasks.map((t) => el("option", {value: t}, t)));
    const statusSel = el("select", {id: "filter-status", "aria-label": "status"},
      [["", "any status"], ["passed", "passed"], ["failed", "failed"], ["unsafe", "unsafe"], ["error", "error"]]
        .map(([v, t]) => el("option", {value: v}, t)));
    const allBox = el("input", {type: "checkbox", id: "show-all"});
    taskSel.addEventListener("change", () => { state.task = taskSel.value; applyFilter(); });
    statusSel.addEventListener("change", () => { state.status = statusSel.value; applyFilter(); });
    allBox.addEventListener("change", () => { state.all = allBox.checked; applyFilter(); });
    const body = el("tbody", {}, D.episodes.map((e) => {
      const r = e.row, d = r.durations || {};
      return el("tr", {"data-ep": e.id, "data-task": r.task, "data-status": statusOf(r), class: "eprow",
        onclick: (ev) => { if (ev.target.tagName !== "A") location.hash = "#" + e.id; }},
      el("td", {}, link(e.id, r.task)), el("td", {class: "n"}, r.sample), el("td", {}, r.agent || ""),
      el("td", {class: "n"}, num(r.score)), el("td", {}, verdict(r)), el("td", {}, safety(r)),
      el("td", {class: "n"}, r.robustness === null || r.robustness === undefined ? "–" : num(r.robustness)),
      el("td", {class: "n"}, r.turns ?? "–"), el("td", {class: "n"}, r.tool_calls ?? "–"),
      el("td", {class: "n"}, secs(d.episode_s)), el("td", {}, r.status || ""));
    }));
    return el("section", {},
      el("h2", {}, "Episodes"),
      el("div", {class: "filters"}, el("label", {}, "Task ", taskSel), el("label", {}, "Status ", statusSel),
        el("label", {}, allBox, " show every episode below"), el("span", {id: "shown-count", class: "meta"})),
      el("table", {class: "grid", id: "episodes"},
        el("thead", {}, el("tr", {}, ["task", "sample", "agent", "score", "passed", "safety", "robustness", "turns",
          "tool calls", "duration", "status"].map((h) => el("th", {}, h)))),
        body));
  }
  function matches(e) {
    return (!state.task || e.row.task === state.task) && (!state.status || statusOf(e.row) === state.status);
  }
  function applyFilter() {
    let n = 0;
    for (const e of D.episodes) {
      const ok = matches(e);
      n += ok;
      const tr = document.querySelector('tr[data-ep="' + e.id + '"]');
      if (tr) { tr.hidden = !ok; tr.classList.toggle("selected", e.id === state.selected); }
      const sec = document.getElementById(e.id);
      if (sec) sec.hidden = !(ok && (state.all || e.id === state.selected));
    }
    const c = document.getElementById("shown-count");
    if (c) c.textContent = n + " of " + D.episodes.length + " episodes";
  }

  // ------------------------------------------------------------------ one episode
  function checksPart(v) {
    if (!v.checks.length) return el("p", {class: "note"}, "No check results (the episode was not graded).");
    return el("div", {class: "checks"}, v.checks.map((c) => {
      const mark = c.status === "pass" ? badge("ok", "pass") : c.status === "not_graded" ? badge("n/a", "warn")
        : c.group === "safety" ? badge("VIOLATED", "viol") : badge("FAIL", "fail");
      return el("div", {class: "check " + c.status, id: c.anchor},
        el("div", {class: "checkhead"}, mark, " ", el("span", {class: "group"}, c.group), " ",
          el("strong", {}, c.id), " ", el("span", {class: "meta"}, c.type + (c.weight !== 1 ? " · weight " + c.weight : ""))),
        el("div", {class: "detail"}, c.detail),
        c.error ? el("div", {class: "detail err"}, "error: " + c.error) : null,
        c.evidence.length ? el("ul", {class: "proof"}, c.evidence.map((p) => el("li", {},
          "audit seq " + p.seq + " ",
          p.anchor ? link(p.anchor, "→ the call", "calllink") : el("span", {class: "meta"}, "(not an agent call)"), " ",
          p.audit ? link(p.audit, "audit entry", "auditlink") : null,
          pre(p.record, "record")))) : null);
    }));
  }
  function turnsPart(g) {
    if (!g || !g.turns || !g.turns.length) return null;
    return el("table", {class: "grid small"},
      el("thead", {}, el("tr", {}, ["turn", "day", "completion", "checks scoped here"].map((h) => el("th", {}, h)))),
      el("tbody", {}, g.turns.map((t) => el("tr", {}, el("td", {class: "n"}, t.turn), el("td", {class: "n"}, t.day ?? "–"),
        el("td", {class: "n"}, num(t.completion)),
        el("td", {}, Object.entries(t.scoped || {}).map(([id, s]) => id + ": " + s).join(", "))))));
  }
  function text(t, cls) {
    const body = pre(t.text, cls);
    return t.cut ? [body, el("p", {class: "note"}, "(cut: the page keeps the first part)")] : [body];
  }
  function timelinePart(v) {
    return el("ol", {class: "timeline"}, v.timeline.map((it) => {
      if (it.kind === "system") {
        return el("li", {class: "msg system"}, el("details", {}, el("summary", {}, "system prompt"), text(it)));
      }
      if (it.kind === "user") {
        const label = "user" + (it.turn ? " · turn " + it.turn : "") + (it.day ? " · day " + it.day : "") +
          (it.source ? " · " + it.source : "");
        return el("li", {class: "msg user"}, el("div", {class: "who"}, label), text(it));
      }
      if (it.kind === "assistant") {
        return el("li", {class: "msg assistant"}, el("div", {class: "who"}, "assistant · turn " + it.turn), text(it));
      }
      if (it.kind === "tool_output") {
        return el("li", {class: "msg tool"}, el("div", {class: "who"}, "tool output (" + it.call_id + ")"), text(it));
      }
      if (it.kind === "task") {
        const what = {day: "a new day begins", event: "event", user_actions: "the user acts", boundary: "turn ends",
          simulated_user: "simulated user"}[it.what] || it.what;
        return el("li", {class: "msg task"},
          el("div", {class: "who"}, what + (it.day ? " · day " + it.day : "") + (it.actor ? " · " + it.actor : "")),
          it.text ? pre(it.text) : null,
          it.actions && it.actions.length ? pre(json(it.actions), "args") : null,
          it.results && it.results.length ? el("details", {}, el("summary", {}, "results"), pre(json(it.results))) : null);
      }
      const out = it.output || {text: ""};
      const outcome = it.is_error ? badge("error", "fail") : it.outcome && it.outcome !== "ok" ? badge(it.outcome, "warn") : null;
      return el("li", {class: "msg call" + (it.cited_by ? " cited" : "") + agentClass(v, it.agent), id: it.anchor || null},
        el("div", {class: "who"}, el("span", {class: "tool"}, it.tool), " · turn " + (it.turn ?? "?"),
          it.agent && v.agents && v.agents.length ? [" · ", agentBadge(v, it.agent)] : null,
          it.duration_ms !== undefined ? " · " + ms(it.duration_ms) : "", " ", outcome,
          it.call_seq !== undefined ? el("span", {class: "meta"}, " audit seq " + it.call_seq +
            (it.seq !== it.call_seq ? "–" + it.seq : "")) : null),
        pre(json(it.args), "args"),
        el("details", {open: out.text.length < 1500}, el("summary", {}, "output (" + out.text.length + " chars)"),
          text(out, "output")),
        it.cited_by ? el("div", {class: "cited"}, "cited by ", it.cited_by.map((c) =>
          [link(c.anchor, c.id, c.status === "pass" ? "ok" : c.group === "safety" ? "viol" : "fail"), " "])) : null);
    }));
  }
  function diffLines(lines) {
    return el("pre", {class: "diff"}, lines.map((l) => el("span", {class: l.startsWith("@@") ? "hunk"
      : l.startsWith("+++") || l.startsWith("---") ? "fname" : l.startsWith("+") ? "add" : l.startsWith("-") ? "del" : ""},
    l + "\n")));
  }
  function workspacePart(w) {
    if (!w) return el("p", {class: "note"}, "No workspace in this bundle.");
    if (w.error) return el("p", {class: "note err"}, "The workspace archive could not be read: " + w.error);
    if (!w.files.length) return el("p", {class: "note"}, "No file was added, changed or deleted.");
    return el("div", {},
      w.complete ? null : el("p", {class: "note warn"}, "The export did not list every file: the list may be short."),
      w.files.map((f) => el("div", {class: "file"},
        el("div", {class: "filehead"}, badge(f.change, f.change), " ", el("code", {}, f.path),
          f.size !== undefined ? el("span", {class: "meta"}, " " + f.size + " bytes") : null,
          f.by_actor ? el("span", {class: "meta"}, " · the user or the world changed it too") : null),
        f.omitted ? el("p", {class: "note"}, "Content not exported: " + f.omitted) : null,
        f.binary ? el("p", {class: "note"}, "Binary content, not shown.") : null,
        f.diff ? [el("p", {class: "note"}, "Diff against the initial content from " + f.initial_source + " (its SHA-256 matches the bundle's initial.json)."), diffLines(f.diff)]
          : f.change === "changed" && f.final !== undefined ? [el("p", {class: "note"},
            "The initial content is not in the bundle (initial.json holds only its hash): the final content is shown" +
            (f.writes.length ? ", with the agent's writes below." : ".")), text({text: f.final, cut: f.final_cut}, "final")]
            : f.change === "added" && f.final !== undefined ? [el("p", {class: "note"}, "New file:"), text({text: f.final, cut: f.final_cut}, "final")]
              : f.change === "deleted" ? (f.initial !== undefined
                ? [el("p", {class: "note"}, "Deleted; its initial content (from " + f.initial_source + "):"), text({text: f.initial, cut: f.initial_cut})]
                : el("p", {class: "note"}, "Deleted (its content is not in the bundle).")) : null,
        f.writes.length ? el("details", {open: !f.diff}, el("summary", {}, "the agent's writes to this file (" + f.writes.length + ")"),
          el("ul", {class: "writes"}, f.writes.map((wr) => el("li", {},
            wr.anchor ? link(wr.anchor, wr.tool + " (audit seq " + wr.seq + ")") : wr.tool, " " + (wr.outcome || ""),
            pre(json(wr.args), "args"))))) : null)));
  }
  function statePart(st) {
    if (!st || !st.length) return el("p", {class: "note"}, "No service record was created, updated or deleted.");
    return el("div", {}, st.map((c) => el("div", {class: "coll"},
      el("h4", {}, c.service + "." + c.collection),
      c.by_actor.length ? el("p", {class: "note"}, "Also changed by the user or the world: " + c.by_actor.join(", ")) : null,
      c.created.map((r) => el("div", {class: "rec"}, badge("created", "added"), " ", el("code", {}, r.id), pre(r.record, "record"))),
      c.updated.map((r) => el("div", {class: "rec"}, badge("updated", "changed"), " ", el("code", {}, r.id),
        el("table", {class: "grid small"}, el("thead", {}, el("tr", {}, ["field", "before", "after"].map((h) => el("th", {}, h)))),
          el("tbody", {}, r.fields.map((f) => el("tr", {}, el("td", {}, f.field), el("td", {}, pre(f.before, "del")),
            el("td", {}, pre(f.after, "add")))))))),
      c.deleted.map((r) => el("div", {class: "rec"}, badge("deleted", "deleted"), " ", el("code", {}, r.id), pre(r.record, "record"))))));
  }
  // ------------------------------------------------------------------ agents of a harness episode
  function agentClass(v, id) {
    // One colour per agent of the episode, main first (view.css: .ag-0 .. .ag-5, then again).
    const ids = (v.agents || []).map((a) => a.id);
    const n = ids.indexOf(id);
    return n < 0 ? "" : " ag-" + (n % 6);
  }
  function agentBadge(v, id) {
    return id ? el("span", {class: "agent" + agentClass(v, id)}, id) : null;
  }
  function delegationPart(v) {
    if (!v.agents || !v.agents.length) return null;
    const children = {};
    v.agents.forEach((a) => { (children[a.parent || ""] = children[a.parent || ""] || []).push(a); });
    const node = (a) => el("li", {class: "agentnode" + agentClass(v, a.id)},
      el("div", {class: "who"}, agentBadge(v, a.id), a.assignment ? " · " + a.assignment : "",
        " · ", a.status === "main" ? "main agent" : a.status,
        el("span", {class: "meta"}, " · " + (a.turns ?? "?") + " turns" + (a.tokens ? ", " + a.tokens + " tokens" : "") +
          (a.denied.length ? " · denied: " + a.denied.join(", ") : ""))),
      a.task ? pre(a.task) : null,
      a.calls.length ? el("ul", {class: "agentcalls"}, a.calls.map((c) => el("li", {},
        c.anchor ? link(c.anchor, c.tool, c.outcome === "ok" ? "ok" : "fail") : el("span", {class: "tool"}, c.tool),
        " ", el("code", {}, json(c.args)), c.outcome && c.outcome !== "ok" ? [" ", badge(c.kind === "tool_denied" ?
          "denied" : c.outcome, "fail")] : null))) : el("p", {class: "note"}, "no tool calls"),
      a.result && a.result.text ? el("details", {}, el("summary", {}, "its report"), text(a.result)) : null,
      (children[a.id] || []).length ? el("ul", {class: "tree"}, children[a.id].map(node)) : null);
    const roots = v.agents.filter((a) => !a.parent || !v.agents.some((b) => b.id === a.parent));
    return [el("h3", {}, "Delegation"), el("ul", {class: "tree"}, roots.map(node))];
  }
  function auditPart(v) {
    if (!v.audit.length) return null;
    return el("details", {class: "audit"}, el("summary", {}, "audit log (" + v.audit.length + " entries" +
      (v.chain && !v.chain.valid ? ", CHAIN BROKEN: " + v.chain.error : ", chain verified") + ")"),
    el("table", {class: "grid small"},
      el("thead", {}, el("tr", {}, ["seq", "kind", "what", "actor", "agent", "outcome", "call"].map((h) => el("th", {}, h)))),
      el("tbody", {}, v.audit.map((a) => el("tr", {id: a.id},
        el("td", {class: "n"}, a.seq), el("td", {}, a.kind), el("td", {}, a.what), el("td", {}, a.actor || ""),
        el("td", {}, agentBadge(v, a.agent) || ""),
        el("td", {}, a.outcome || ""), el("td", {}, a.anchor ? link(a.anchor, "call") : ""))))));
  }
  function episodeSection(e) {
    const r = e.row, v = e.view;
    const sec = el("section", {class: "episode", id: e.id, hidden: true},
      el("h2", {}, r.task + " · sample " + r.sample, " ", verdict(r), " ", safety(r)),
      el("p", {class: "meta"}, [
        "agent " + (r.agent || "?"), "score " + num(r.score), "completion " + num(r.completion),
        "status " + (r.status || "?"), "turns " + (r.turns ?? "?"), "duration " + secs((r.durations || {}).episode_s),
      ].join(" · ")));
    if (e.error) { sec.appendChild(el("p", {class: "note err"}, e.error)); return sec; }
    if (v.error) sec.appendChild(el("p", {class: "note err"}, "episode error: " + v.error));
    if (v.grade && v.grade.error) sec.appendChild(el("p", {class: "note err"}, "grade: " + v.grade.error));
    if (v.title) sec.appendChild(el("p", {class: "title"}, v.title));
    add(sec, [
      turnsPart(v.grade),
      el("h3", {}, "Checks and safety rules"), checksPart(v),
      delegationPart(v),
      el("h3", {}, "Conversation"), timelinePart(v),
      el("h3", {}, "Workspace changes"), workspacePart(v.workspace),
      el("h3", {}, "Service state changes"), statePart(v.state),
      auditPart(v),
    ]);
    return sec;
  }

  // ------------------------------------------------------------------ navigation
  function go() {
    const id = decodeURIComponent(location.hash.slice(1));
    const target = id ? document.getElementById(id) : null;
    const sec = target ? target.closest("section.episode") : null;
    if (sec) state.selected = sec.id;
    applyFilter();
    if (!target) return;
    for (let p = target.parentElement; p; p = p.parentElement) if (p.tagName === "DETAILS") p.open = true;
    target.scrollIntoView({block: "start"});
    document.querySelectorAll(".flash").forEach((n) => n.classList.remove("flash"));
    target.classList.add("flash");
  }

  const app = document.getElementById("app");
  app.textContent = "";
  // Failures, violations and infrastructure errors first; the figures and charts below them.
  add(app, [header(), attention(), figures(), taskSummary(), episodesTable(), charts(), bench()]);
  add(app, D.episodes.map(episodeSection));
  state.selected = D.episodes.length ? D.episodes[0].id : null;
  window.addEventListener("hashchange", go);
  go();
  document.body.setAttribute("data-ready", "1");
})();
