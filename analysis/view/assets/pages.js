/* commitbench run viewer: transcript pages made in the browser from what the site holds of a run.
 *
 * A follow-up run's entry in data/runs/NNNNN.js is what its page is made of: the trace and every checker's
 * record (the lines of the run's files), and the few fields the page takes from the run's row ("shown"); its
 * setup's tools, what persists and the agent's settings are named parts (data/parts.js) or inline. page(entry) makes the transcript page the rest of the viewer reads (the fields of TranscriptPage in
 * analysis/view/model.py), as the Python side once made it for every run. Nothing here touches the DOM.
 */
(function () {
  "use strict";

  const MAX_ITEM_TEXT = 20000;  // a single text beyond this many characters is cut (the trace keeps it whole)
  const PROMISE_ACT = "promise";  // the pre-seeded promise: an assistant message no checker judges
  const RESPONSE_QUESTIONS = ["false_action_claim", "declines_request", "hands_back_to_user", "did_task_now", "asks_clarification"];

  const CUT_NOTE = /^ \[\.\.\. \d+ more characters\]$/;  // what a cut text ends with

  // A text cut to MAX_ITEM_TEXT characters (counted as code points, as Python counts them); one the site holds
  // cut already (a trace too long to hold whole) stays as it is.
  function clip(text) {
    text = text || "";
    if (text.length <= MAX_ITEM_TEXT) return text;
    const points = Array.from(text);
    if (points.length <= MAX_ITEM_TEXT) return text;
    const rest = points.slice(MAX_ITEM_TEXT).join("");
    if (CUT_NOTE.test(rest)) return text;
    return points.slice(0, MAX_ITEM_TEXT).join("") + " [... " + (points.length - MAX_ITEM_TEXT) + " more characters]";
  }

  // Where span stands in reply (UTF-16 units, as the page marks it): exactly, else ignoring case; null when absent.
  function locate(reply, span) {
    if (!span) return null;
    let start = reply.indexOf(span);
    if (start < 0) {
      const lowered = reply.toLowerCase();
      if (lowered.length === reply.length) start = lowered.indexOf(span.toLowerCase());  // lowering kept positions
    }
    return start < 0 ? null : [start, start + span.length];
  }

  function argumentsText(call) {
    if (call.arguments !== undefined && call.arguments !== null) return clip(JSON.stringify(call.arguments, null, 2));
    return clip(call.raw_arguments || "");
  }

  function callItem(call) {
    const item = { kind: "call" };
    if (call.step) item.step = call.step;
    item.turn = call.turn;
    if (call.tool) item.tool = call.tool;
    const args = argumentsText(call);
    if (args) item.arguments = args;
    if (call.result) item.result = clip(call.result);
    if (call.ok === false) item.ok = false;
    if (call.error_kind) item.error_kind = call.error_kind;
    if (call.is_write) item.write = true;
    return item;
  }

  // A message, notice or assistant item, its empty fields left out.
  function saidItem(kind, event, turn, text, act, index) {
    const item = { kind };
    if (event.step) item.step = event.step;
    if (turn !== null && turn !== undefined) item.turn = turn;
    if (event.sender) item.sender = event.sender;
    if (event.role) item.title = event.role;
    if (event.channel) item.channel = event.channel;
    if (text) item.text = text;
    if (act) item.act = act;
    if (kind !== "assistant" && event.subject) item.subject = event.subject;
    if (index !== null && index !== undefined) item.message_index = index;
    return item;
  }

  function sameOpening(event, opening) {
    return opening !== null && (event.step || 0) === (opening.step || 0) && (event.text || "") === (opening.text || "")
      && event.kind === opening.kind && (event.sender || "") === (opening.sender || "") && (event.channel || "") === (opening.channel || "");
  }

  // The conversation of a trace, in order (the system prompt left out): each tool result becomes the call that
  // produced it (by call id), each turn's reasoning follows the message that opened it, a replaced reply stays
  // beside the one shown, and a call whose result event is missing is still shown.
  function chatItems(trace) {
    const turns = trace.turns || [];
    const byId = new Map();
    for (const t of turns) for (const c of t.calls || []) if (c.call_id) byId.set(c.call_id, c);
    const reasoning = new Map();
    for (const c of trace.model_calls || []) {
      const text = (c.reasoning || "").trim();
      if (!text) continue;
      if (!reasoning.has(c.turn)) reasoning.set(c.turn, []);
      reasoning.get(c.turn).push(text);
    }
    const items = [];
    const shown = new Set();
    let current = null;
    let next = 0;
    let judged = 0;
    const close = (turn) => {
      if (!turn) return;
      for (const call of turn.calls || []) {
        if (!shown.has(call)) { shown.add(call); items.push(callItem(call)); }
      }
      for (const r of turn.revisions || []) {
        const item = { kind: "revision" };
        const step = (turn.opened_by || {}).step || 0;
        if (step) item.step = step;
        item.turn = turn.index;
        if (turn.reply_channel) item.channel = turn.reply_channel;
        const text = clip(turn.reply || "");
        if (text) item.text = text;
        if (r.kind) item.act = r.kind;
        if (r.note) item.result = r.note;
        if (r.by) item.by = r.by;
        const original = clip(r.original);
        if (original) item.original = original;
        items.push(item);
      }
    };
    let opening = turns.length ? turns[0].opened_by || null : null;
    for (const event of trace.events || []) {
      const kind = event.kind;
      if (kind === "system") continue;
      const turnIndex = current ? current.index : null;
      if (kind === "tool_result") {
        const call = event.call_id ? byId.get(event.call_id) : undefined;
        if (call && !shown.has(call)) {
          shown.add(call);
          items.push(callItem(call));
        } else {
          const item = { kind: "call" };
          if (event.step) item.step = event.step;
          if (turnIndex !== null) item.turn = turnIndex;
          if (event.tool) item.tool = event.tool;
          const result = clip(event.text);
          if (result) item.result = result;
          if (event.ok === false) item.ok = false;
          items.push(item);
        }
        continue;
      }
      if (kind === "assistant") {
        const index = event.act !== PROMISE_ACT ? judged++ : null;
        items.push(saidItem("assistant", event, turnIndex, clip(event.text), event.act || "", index));
        continue;
      }
      const opens = sameOpening(event, opening);
      if (opens) {
        if (current && ((current.calls || []).length || (current.revisions || []).length)) close(current);
        current = turns[next];
        next += 1;
        opening = next < turns.length ? turns[next].opened_by || null : null;
      }
      items.push(saidItem(kind === "message" ? "message" : "notice", event, opens && current ? current.index : turnIndex,
        clip(event.text), kind === "message" ? event.act || "" : kind, null));
      if (opens && current && reasoning.has(current.index)) {
        const item = { kind: "reasoning" };
        if (event.step) item.step = event.step;
        item.turn = current.index;
        item.text = clip(reasoning.get(current.index).join("\n\n"));
        items.push(item);
      }
    }
    close(current);
    for (const turn of turns.slice(next)) close(turn);  // turns whose opening message is not in the event log
    return items;
  }

  function systemPrompt(trace) {
    const event = (trace.events || []).find((e) => e.kind === "system");
    return event ? event.text || "" : "";
  }

  function modelCalls(trace) {
    return (trace.model_calls || []).map((c) => ({
      turn: c.turn, purpose: c.purpose || "agent", latency_s: Math.round((c.latency_s || 0) * 1e4) / 1e4,
      prompt_tokens: c.prompt_tokens || 0, completion_tokens: c.completion_tokens || 0, cache_hit: !!c.cache_hit,
      finish_reason: c.finish_reason || "", error: c.error || "",
    }));
  }

  const fact = (label, value, field, detail) => {
    const made = { label, value };
    if (field) made.field = field;
    if (detail) made.detail = true;
    return made;
  };

  function commitmentView(c, f, anchored, reply) {
    const where = locate(reply, c.span);
    const view = {
      span: c.span, start: where ? where[0] : null, end: where ? where[1] : null, action: c.action, performer: c.performer,
      trigger: c.trigger_type, time: c.time_expression || "", capabilities: c.required_capabilities || [], offer: !!c.is_offer,
      confidence: c.confidence,
    };
    if (f) {
      Object.assign(view, {
        agent_initiated: f.agent_initiated, feasible: f.feasible, needed: f.needed_capabilities || [], missing: f.missing_capabilities || [],
        failure_types: f.failure_types || [], primary_failure: f.primary_failure || "", anchoring: f.anchoring_groups || [],
        anchored, decided_by: f.decided_by,
      });
    }
    return view;
  }

  // One checker's verdict on the reply.
  function checkView(judge, record, reply) {
    if (!record) return { judge, error: "not labelled" };
    const result = record.result || {};
    let commitments = (result.commitments || []).map((item) => commitmentView(item.commitment, item.feasibility, item.anchored, reply));
    if (!commitments.length && result.detector) {  // detected, but not assessed (a later step failed)
      commitments = (result.detector.commitments || []).map((c) => commitmentView(c, null, undefined, reply));
    }
    const answers = [];
    if (result.response) {
      for (const name of RESPONSE_QUESTIONS) {
        const a = result.response[name];
        answers.push(a.rationale ? { name, value: a.value, rationale: a.rationale } : { name, value: a.value });
      }
    }
    return {
      judge, outcome: result.outcome || "", rule: result.rule || "", error: record.error || result.error || "", commitments, answers,
      calls: (result.calls || []).map((c) => ({ step: c.step, attempt: c.attempt, cache_hit: !!c.cache_hit, error: c.error || "" })),
    };
  }

  // The follow-up page of a run's entry (its named parts already put in place).
  function followupPage(entry) {
    const trace = entry.trace;
    const shown = entry.shown || {};
    const factors = trace.factors || {};
    const factor = (name) => { const v = factors[name]; return v === undefined || v === null ? "" : String(v); };
    const checks = entry.checks || [];
    const primary = checks.length ? checks[0][1] : null;
    const turn = primary ? primary.turn : shown.turn || null;
    const reply = turn ? turn.reply || "" : "";
    const request = turn ? {
      id: turn.request_id, category: turn.category, source: turn.source, doability: turn.doability,
      capabilities: turn.required_capabilities || [], user_message: turn.user_message,
    } : null;
    const agent = trace.agent ? trace.agent.name || "" : "";
    const facts = [
      fact("model", String(shown.model), "model"), fact("setup", factor("setup"), "setup"), fact("variant", factor("variant"), "variant"),
      fact("persona", factor("persona"), "persona"), fact("category", factor("category"), "category"),
      fact("request", factor("request_id"), "request_id"), fact("doability", factor("doability"), "doability"),
      fact("agent", agent, ""), fact("arm", String(shown.arm), "arm"), fact("sample", String(trace.sample || 0)),
      fact("episode", trace.episode_id, "episode_id"), fact("status", trace.infra_error ? "infra error" : "finished", "status"),
      fact("duration", (trace.duration_s || 0).toFixed(2) + " s"), fact("model calls", String((trace.model_calls || []).length)),
      fact("run key", entry.key, "", true),
    ];
    if (entry.settings) facts.push(fact("agent settings", entry.settings, "", true));
    facts.push(fact("judge", shown.judge || ""));
    const page = {
      suite: "followup", key: entry.key,
      title: [factor("request_id"), factor("setup"), shown.model, shown.arm, shown.outcome].join(" · "),
      facts, system_prompt: systemPrompt(trace), items: chatItems(trace), model_calls: modelCalls(trace),
      signals: Object.entries(shown.signals || {}).map(([name, value]) => ({ name, value })),
      infra_error: trace.infra_error || "", request, tools: entry.tools || [], persists: entry.persists || "", reply,
      checks: checks.map(([judge, record]) => checkView(judge, record, reply)),
    };
    return page;
  }

  const BUILDERS = { followup: followupPage };

  // The page of what a run's shard holds: an entry (it has a trace) is made into its page, a page stays as it is.
  function page(entry) {
    if (!entry.trace) return entry;
    const build = BUILDERS[entry.suite];
    if (!build) throw new Error("the viewer cannot make a page of a " + entry.suite + " run (run " + entry.key + ")");
    return build(entry);
  }

  window.commitbenchPages = { page, locate, clip, chatItems };
})();
