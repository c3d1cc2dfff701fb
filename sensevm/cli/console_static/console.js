// The Sense console's page: reads /api/state and /api/audit, and posts the buttons' requests.
// Every value from the program is put into the page as text (never as HTML). While a request
// is in flight every control is disabled and "working…" shows; a refused request's error is
// shown in #error (role="alert"); a server that stops answering is said to be unreachable.
"use strict";

(function () {
  const token = new URLSearchParams(window.location.search).get("token") || "";
  const $ = (id) => document.getElementById(id);
  const PING_MS = 3000;

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs || {})) {
      if (value === null || value === undefined || value === false) continue;
      if (key === "class") node.className = value;
      else if (key === "text") node.textContent = value;
      else if (key.startsWith("data-")) node.setAttribute(key, String(value));
      else node.setAttribute(key, value === true ? "" : String(value));
    }
    for (const child of children) {
      if (child === null || child === undefined) continue;
      node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return node;
  }

  async function api(method, path, body) {
    const init = { method, headers: { "X-Sense-Token": token }, cache: "no-store" };
    if (body !== undefined) {
      init.headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(body);
    }
    let response;
    try {
      response = await fetch("/api" + path, init);
    } catch (err) {
      setReachable(false);
      return { ok: false, status: 0, error: { kind: "Unreachable", text: UNREACHABLE } };
    }
    setReachable(true);
    let data;
    try {
      data = await response.json();
    } catch (err) {
      data = { ok: false, error: { kind: "BadReply", text: "HTTP " + response.status } };
    }
    data.status = response.status;
    return data;
  }

  const UNREACHABLE = "Console unreachable: the `sensevm inspect` server does not answer " +
    "(was it stopped?). Start it again and open the new address it prints.";

  // A success goes to #message (a status); an error to #error (an alert), which stays until
  // the next request succeeds.
  function say(text, kind) {
    const box = kind === "error" ? $("error") : $("message");
    const other = kind === "error" ? $("message") : $("error");
    other.hidden = true;
    other.textContent = "";
    box.hidden = false;
    box.className = kind || "";
    box.textContent = text;
  }

  function errorText(reply) {
    const e = reply.error || {};
    if (e.kind === "Unreachable") return e.text;
    return (e.kind ? e.kind + ": " : "") + (e.text || e.message || "failed");
  }

  let reachable = true;
  function setReachable(yes) {
    if (yes === reachable) return;
    reachable = yes;
    $("unreachable").hidden = yes;
    if (!yes) say(UNREACHABLE, "error");
    else if ($("error").textContent === UNREACHABLE) $("error").hidden = true;
  }

  // Requests in flight: while there is one, every control is disabled (the server runs one
  // request at a time anyway) and "working…" shows.
  let inFlight = 0;
  function setBusy(delta) {
    inFlight += delta;
    const on = inFlight > 0;
    $("busy").hidden = !on;
    $("controls").disabled = on;
    $("refresh").disabled = on || !loaded;
    document.body.setAttribute("aria-busy", on ? "true" : "false");
  }

  async function busy(work) {
    setBusy(1);
    try {
      await work();
    } finally {
      setBusy(-1);
    }
  }

  function appendOutput(text) {
    if (!text) return;
    $("output").textContent += text;
  }

  // ---------------------------------------------------------------- rendering

  function fill(tbody, rows, columns, emptyText) {
    tbody.replaceChildren(...rows);
    if (!rows.length) tbody.append(el("tr", {}, el("td", { class: "empty", colspan: columns, text: emptyText })));
  }

  function signature(params) {
    return params.map((p) => p.type ? p.name + ": " + p.type : p.name).join(", ");
  }

  function requires(item) {
    const parts = [];
    if (item.capability) parts.push(item.capability);
    if (item.approval) parts.push("approval");
    return parts.join(", ") || "\u2014";
  }

  function renderHeader(state) {
    $("program").textContent = state.program;
    const status = $("run-status");
    if (state.run.error) {
      status.textContent = "run stopped: " + state.run.error.kind;
      status.className = "pill bad";
      status.title = state.run.error.text;
    } else {
      status.textContent = "run finished";
      status.className = "pill ok";
      status.title = "";
    }
    $("dry-run-badge").hidden = !state.dry_run;
    document.title = (state.dry_run ? "[DRY RUN] " : "") + "Sense console \u2014 " + state.program;
  }

  function renderActions(state) {
    const rows = state.actions.map((a) => {
      const input = el("input", {
        class: "args", type: "text", spellcheck: "false", "aria-label": "arguments of " + a.name,
        placeholder: signature(a.params) || "(no arguments)",
      });
      const button = el("button", { class: "prepare", type: "button", disabled: !a.declared,
        title: a.declared ? "Prepare (the body does not run)" : "its declaration never ran" }, "Prepare");
      button.addEventListener("click", () => prepare(a, input.value));
      input.addEventListener("keydown", (ev) => { if (ev.key === "Enter" && a.declared) prepare(a, input.value); });
      return el("tr", { class: "decl", "data-action-index": a.index, "data-name": a.name },
        el("td", {}, el("span", { class: "mono" }, a.name + "(" + signature(a.params) + ")"),
          el("span", { class: "tag", text: a.kind })),
        el("td", { class: "mono", text: requires(a) }),
        el("td", { text: a.policy || "\u2014" }),
        el("td", {}, input),
        el("td", {}, button));
    });
    fill($("actions"), rows, 5, "this program declares no actions");
  }

  function nextSteps(p) {
    const next = new Set();
    if (p.state === "prepared") next.add("verify");
    if ((p.state === "prepared" || p.state === "verified") && ((p.approval && !p.approved) || p.second_look)) next.add("approve");
    if (p.state === "verified") next.add("commit");
    if (p.state === "committed" && p.reversible) next.add("rollback");
    return next;
  }

  function renderPrepared(state) {
    const rows = state.prepared.map((p) => {
      const next = nextSteps(p);
      const buttons = ["verify", "approve", "commit", "rollback"].map((step) => {
        const b = el("button", { type: "button", class: next.has(step) ? "step next" : "step", "data-step": step }, step);
        b.addEventListener("click", () => lifecycle(p, step));
        return b;
      });
      const look = p.second_look || (p.reason && p.state !== "committed" ? p.reason : null);
      return el("tr", { class: "prepared", "data-id": p.id, "data-name": p.name, "data-state": p.state },
        el("td", { class: "mono", text: "#" + p.id }),
        el("td", {}, el("span", { class: "mono", text: p.name }), el("span", { class: "tag", text: p.kind }),
          p.origin === "console" ? el("span", { class: "tag console", text: "console" }) : null),
        el("td", { class: "mono", text: p.args.join(", ") }),
        el("td", {}, el("span", { class: "state state-" + p.state, text: p.state })),
        el("td", { class: "approved", text: p.approved ? "yes" : "no" }),
        el("td", { class: "second-look", text: look || "" }),
        el("td", {}, el("div", { class: "buttons" }, ...buttons)));
    });
    fill($("prepared"), rows, 7, "no action has been prepared yet");
  }

  function renderTools(state) {
    const rows = state.tools.map((t) => {
      const input = el("input", { class: "args", type: "text", spellcheck: "false",
        "aria-label": "arguments of " + t.name, placeholder: signature(t.params) || "(no arguments)" });
      const button = el("button", { class: "call", type: "button", disabled: !t.declared }, "Call");
      button.addEventListener("click", () => callTool(t, input.value));
      return el("tr", { class: "tool", "data-tool-index": t.index, "data-name": t.name },
        el("td", {}, el("span", { class: "mono", text: t.name + "(" + signature(t.params) + ")" + (t.returns ? " returns " + t.returns : "") }),
          t.async ? el("span", { class: "tag", text: "async" }) : null,
          t.trusted ? el("span", { class: "tag", text: "trusted" }) : null,
          t.description ? el("div", { class: "hint", text: t.description }) : null),
        el("td", { class: "mono", text: t.capability || "\u2014" }),
        el("td", { text: t.policy || "\u2014" }),
        el("td", {}, input),
        el("td", {}, button));
    });
    fill($("tools"), rows, 5, "this program declares no tools");
  }

  function renderPaused(state, records) {
    const shown = state.agents.filter((a) => a.status === "paused" || a.answers.length);
    const box = $("paused");
    if (!shown.length) {
      box.replaceChildren(el("p", { class: "hint empty", text: "no agent is waiting for an answer" }));
      return;
    }
    box.replaceChildren(...shown.map((a) => {
      const history = a.answers.map((an, n) => el("li", { class: "answered", "data-question": n + 1 },
        el("div", {}, el("span", { class: "label", text: "asked " }), el("span", { class: "mono", text: an.question === null ? "(paused)" : an.question })),
        el("div", {}, el("span", { class: "label", text: "answered " }), el("span", { class: "mono answer-text", text: an.answer })),
        an.output ? el("pre", { class: "mono agent-output", text: an.output }) : null,
        an.records.length ? el("ul", { class: "agent-records tree" }, ...an.records.map((seq) => {
          const r = records.get(seq);
          return r ? renderRecord(r) : el("li", { class: "mono", "data-seq": seq, text: "#" + seq });
        })) : null,
        el("div", { class: "after" }, "then: ", el("span", { class: "state state-" + an.status, text: an.status }),
          an.error ? el("span", { class: "agent-error", text: " — " + (an.error.kind + ": " + an.error.text) }) : null)));
      let ask = null;
      if (a.status === "paused") {
        const input = el("input", { class: "answer", type: "text", spellcheck: "false",
          "aria-label": "answer to agent " + a.name, placeholder: "your answer" });
        const button = el("button", { class: "answer", type: "button", disabled: !a.answerable,
          title: a.answerable ? "Give the agent this answer and let it run" : "an async agent is answered only by resume() in its program" }, "Answer");
        button.addEventListener("click", () => answerAgent(a, input.value));
        input.addEventListener("keydown", (ev) => { if (ev.key === "Enter" && a.answerable) answerAgent(a, input.value); });
        ask = el("div", { class: "ask" },
          el("div", { class: "question" }, el("span", { class: "label", text: "asks " }),
            el("span", { class: "mono question-text", text: a.question === null ? "(paused, no question)" : a.question })),
          el("div", { class: "answer-row" }, input, button),
          a.answerable ? null : el("p", { class: "hint", text: "async agent: it waits on a thread of its own, and only resume() in its program can continue it" }));
      }
      return el("div", { class: "paused-agent", "data-index": a.index, "data-name": a.name, "data-status": a.status },
        el("h3", {}, el("span", { class: "mono", text: a.name }),
          el("span", { class: "state status state-" + a.status, text: a.status })),
        history.length ? el("ol", { class: "answers" }, ...history) : null,
        ask);
    }));
  }

  function renderAgents(state) {
    const rows = state.agents.map((a) => el("tr", { class: "agent", "data-name": a.name },
      el("td", {}, el("span", { class: "mono", text: a.name }), a.async ? el("span", { class: "tag", text: "async" }) : null),
      el("td", { class: "status", text: a.status }),
      el("td", { class: "pause-reason mono", text: a.pause_reason === null ? "" : a.pause_reason })));
    fill($("agents"), rows, 3, "no agent was made");
  }

  function renderMemories(state) {
    const box = $("memories");
    if (!state.memories.length) {
      box.replaceChildren(el("p", { class: "hint", text: "no memory was declared" }));
      return;
    }
    box.replaceChildren(...state.memories.map((m) => {
      const rows = m.entries.map((e) => el("tr", {}, el("td", { class: "mono", text: e.key }), el("td", { class: "mono", text: e.value })));
      const tbody = el("tbody");
      fill(tbody, rows, 2, m.error ? errorText({ error: m.error }) : "empty");
      return el("div", { class: "memory", "data-name": m.name },
        el("h3", {}, m.name, el("span", { class: "tag", text: m.kind === "persistent" ? "persistent: " + m.path : "session" + (m.hint ? " (" + m.hint + ")" : "") })),
        el("table", { class: "grid" }, el("thead", {}, el("tr", {}, el("th", { text: "Key" }), el("th", { text: "Value" }))), tbody));
    }));
  }

  function renderPolicy(state) {
    const rows = state.policy.map((p) => el("tr", {}, el("td", { class: "mono", text: p.capability }), el("td", { text: p.decision })));
    fill($("policy"), rows, 2, "no capability is required by any declaration");
  }

  function detail(text) {
    if (text.length <= 160) return " (" + text + ")";
    // A long detail (the second look's evaluation) folds away.
    return el("details", { class: "detail" }, el("summary", { text: "(" + text.slice(0, 100) + "\u2026)" }),
      el("pre", { class: "mono", text }));
  }

  function renderRecord(r) {
    const parts = [];
    if (r.line !== null) parts.push("[line " + r.line + "] ");
    parts.push(r.subject + " \u2192 ");
    const li = el("li", { class: "record ev-" + r.event + (r.host_only ? " host-only" : ""), "data-event": r.event, "data-name": r.name, "data-seq": r.seq },
      el("span", { class: "seq tag", text: String(r.seq) }), " ", ...parts,
      el("span", { class: "event", text: r.event }),
      r.detail ? detail(r.detail) : null,
      r.origin === "console" ? el("span", { class: "tag console", text: "console" }) : null,
      r.host_only ? el("span", { class: "tag host", text: "host", title: "kept in the host-side trail, not in audit_log()" }) : null);
    return li;
  }

  function renderNode(node) {
    if (node.type === "record") return renderRecord(node.record);
    const list = el("ul", {}, ...node.children.map(renderNode));
    return el("li", { class: "frame frame-" + node.kind, "data-tag": node.tag },
      el("span", { class: "frame-label", text: node.tag }), list);
  }

  function renderAudit(audit) {
    const box = $("audit-tree");
    if (!audit.records.length) {
      box.replaceChildren(el("p", { class: "hint", text: "no audit records yet" }));
      return;
    }
    box.replaceChildren(el("ul", {}, ...audit.tree.children.map(renderNode)));
  }

  let loaded = false;

  async function refresh() {
    const [state, audit] = await Promise.all([api("GET", "/state"), api("GET", "/audit")]);
    $("loading").hidden = true;
    if (!state.ok) {
      say(errorText(state), "error");
      return false;
    }
    if (!loaded) {
      loaded = true;
      $("main").hidden = false;
      $("refresh").disabled = inFlight > 0;
    }
    const records = new Map(audit.ok ? audit.records.map((r) => [r.seq, r]) : []);
    renderHeader(state);
    renderPaused(state, records);
    renderActions(state);
    renderPrepared(state);
    renderTools(state);
    renderAgents(state);
    renderMemories(state);
    renderPolicy(state);
    if (audit.ok) renderAudit(audit);
    return true;
  }

  // ---------------------------------------------------------------- requests

  function prepare(action, text) {
    return busy(async () => {
      const reply = await api("POST", "/actions/" + action.index + "/prepare", { text });
      if (reply.ok) say("prepared " + action.name + " as #" + reply.action.id + " (state: " + reply.action.state + ")", "ok");
      else say(errorText(reply), "error");
      await refresh();
    });
  }

  function lifecycle(p, step) {
    return busy(async () => {
      const reply = await api("POST", "/prepared/" + p.id + "/" + step);
      if (reply.output) appendOutput(reply.output);
      if (reply.ok) {
        let text = step + " #" + p.id + " " + p.name + ": state " + reply.action.state;
        if (reply.result !== undefined && reply.result !== "nil") text += ", returned " + reply.result;
        if (reply.action.second_look && step === "verify") text += "\nsecond look: " + reply.action.second_look;
        say(text, "ok");
      } else {
        say(errorText(reply), "error");
      }
      await refresh();
    });
  }

  function callTool(tool, text) {
    return busy(async () => {
      const reply = await api("POST", "/tools/" + tool.index + "/call", { text });
      if (reply.output) appendOutput(reply.output);
      if (reply.ok) say(tool.name + " returned " + reply.result, "ok");
      else say(errorText(reply), "error");
      await refresh();
    });
  }

  function answerAgent(agent, text) {
    return busy(async () => {
      const reply = await api("POST", "/agents/" + agent.index + "/answer",
        { answer: text, question: agent.question_number });
      if (reply.output) appendOutput(reply.output);
      if (reply.ok) {
        const now = reply.agent;
        let said = "answered agent " + agent.name + ": now " + now.status;
        if (now.status === "paused" && now.question !== null) said += ", asking: " + now.question;
        if (reply.prepared.length) said += " (prepared " + reply.prepared.map((p) => "#" + p.id + " " + p.name).join(", ") + ")";
        say(said, "ok");
      } else {
        say(errorText(reply), "error");
      }
      await refresh();
    });
  }

  // Every few seconds, when nothing else is in flight, ask whether the server is still there,
  // so that a stopped console is said to be unreachable before anything is clicked.
  let pinging = false;
  async function ping() {
    if (pinging || inFlight > 0 || !token) return;
    pinging = true;
    try {
      const was = reachable;
      const reply = await api("GET", "/ping");
      if (reply.ok && !was) await busy(refresh);
    } finally {
      pinging = false;
    }
  }

  document.addEventListener("DOMContentLoaded", () => {
    $("refresh").addEventListener("click", () => busy(refresh));
    if (!token) {
      $("loading").hidden = true;
      say("This page needs the token: open the full URL that `sensevm inspect` printed.", "error");
      return;
    }
    refresh();
    window.setInterval(ping, PING_MS);
  });
})();
