// The chat panel: messages go to POST /chat as the owner's web console (`source: "web"`); the
// reply comes back in the same request, however long the turn takes, and is shown as Markdown.
// Meanwhile the request follows the turn (`Accept: text/event-stream`): the waiting bubble shows the
// text as it is written, the tool running, a tool's progress and a retry with its reason. "/stop"
// (typed, or the Stop button) stops the running turn. When the page opens, the latest exchanges
// of the owner's own conversation are shown first (GET /api/chat/history): what they wrote here,
// on the CLI or from their phone, and the reminders and results nobody waited for, named in the
// owner's words. Returns `add`, which puts a node at the end of the log.
import { ApiError, api, postJson } from "./lib/api.js";
import { el } from "./lib/dom.js";
import { formatDateTime } from "./lib/format.js";
import { renderMarkdown } from "./lib/markdown.js";
import { kindOf } from "./kept-answers.js";

const STOP = "/stop";

export function mountChat({ log, form, input, stop }) {
  let waiting = 0;

  const add = (node) => {
    log.append(node);
    log.scrollTop = log.scrollHeight;
    return node;
  };
  const setWaiting = (delta) => {
    waiting += delta;
    stop.hidden = waiting === 0;
  };

  async function send(message) {
    const isStop = message.trim() === STOP;
    add(el("div", { class: "bubble user", text: message }));
    const pending = isStop ? null : add(el("div", { class: "bubble assistant pending", text: "Thinking…" }));
    if (pending) setWaiting(1);
    try {
      const { response, failed } = isStop
        ? await postJson("/chat", { message, source: "web" })
        : await followTurn(message, (status) => (pending.textContent = status));
      const reply = isStop
        ? el("div", { class: "bubble note", text: response || "Stopped." })
        : el(
            "div",
            // A turn that failed still answers its person (a refused budget, a provider's error).
            { class: failed ? "bubble assistant failed" : "bubble assistant" },
            response ? renderMarkdown(response) : el("em", { text: "(no reply)" }),
          );
      if (pending) pending.replaceWith(reply);
      else add(reply);
    } catch (error) {
      const shown = el("div", { class: "bubble note error", role: "alert", text: error.message });
      if (pending) pending.replaceWith(shown);
      else add(shown);
    } finally {
      if (pending) setWaiting(-1);
    }
  }

  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const message = input.value;
    if (!message.trim()) return;
    input.value = "";
    void send(message);
  });
  input.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
      event.preventDefault();
      form.requestSubmit();
    }
  });
  stop.addEventListener("click", () => void send(STOP));
  void showHistory(log);
  return { add };
}

/** The recent conversation, before anything this page adds (it comes first in the log). */
async function showHistory(log) {
  let entries;
  try {
    ({ entries } = await api("/api/chat/history"));
  } catch (error) {
    log.prepend(el("div", { class: "bubble note error", role: "alert", text: `History: ${error.message}` }));
    return;
  }
  if (entries.length === 0) return;
  const nodes = entries.flatMap(historyBubbles);
  nodes.push(el("div", { class: "bubble note history-end", text: "Earlier messages above" }));
  log.prepend(...nodes);
  log.scrollTop = log.scrollHeight;
}

function historyBubbles(entry) {
  const when = formatDateTime(entry.at);
  const reply = (extra) =>
    entry.response === null
      ? el("div", { class: "bubble note", text: "No answer here (yet): it comes with your next message." })
      : el(
          "div",
          { class: `bubble assistant history${entry.failed ? " failed" : ""}${extra}` },
          entry.response ? renderMarkdown(entry.response) : el("em", { text: "(no reply)" }),
        );
  if (entry.from === "background") {
    const node = reply(" kept");
    const label = entry.text ? `${kindOf(entry.source)} · ${entry.text}` : kindOf(entry.source);
    node.prepend(el("div", { class: "hint kept-from", text: `${label} · ${when}` }));
    return [node];
  }
  const files = entry.attachments ? ` (${entry.attachments} file${entry.attachments === 1 ? "" : "s"})` : "";
  const mine = el("div", {
    class: "bubble user history",
    title: when,
    text: `${entry.text}${files}` || "(no text)",
  });
  return [mine, reply("")];
}

/**
 * Sends the message asking for the turn's events and tells `show` what it is doing, in words;
 * resolves with the answer (the JSON a plain request gets). A server without events answers JSON.
 */
async function followTurn(message, show) {
  let response;
  try {
    response = await fetch("/chat", {
      method: "POST",
      credentials: "same-origin",
      headers: { "Content-Type": "application/json", Accept: "text/event-stream, application/json" },
      body: JSON.stringify({ message, source: "web" }),
    });
  } catch {
    throw new ApiError(0, "The assistant could not be reached. Is it running?");
  }
  if (!(response.headers.get("content-type") ?? "").startsWith("text/event-stream")) {
    const body = await response.json().catch(() => ({}));
    if (!response.ok)
      throw new ApiError(
        response.status,
        body.error ?? `The request failed (HTTP ${response.status}).`,
        body,
      );
    return body;
  }
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffered = "";
  let written = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffered += decoder.decode(value, { stream: true });
    for (let end = buffered.indexOf("\n\n"); end !== -1; end = buffered.indexOf("\n\n")) {
      const block = buffered.slice(0, end);
      buffered = buffered.slice(end + 2);
      const type = /^event: (.*)$/m.exec(block)?.[1];
      const data = JSON.parse(/^data: (.*)$/m.exec(block)?.[1] ?? "null");
      if (type === "answer") return data;
      if (type === "error") throw new ApiError(503, data.error, data);
      if (type === "text") show((written += data.delta));
      if (type === "tool") show(`Running ${data.name}…`);
      if (type === "progress")
        show(
          `${data.plugin}/${data.tool}: ${data.message ?? ""} (${data.total ? `${data.progress} of ${data.total}` : data.progress})`,
        );
      if (type === "retry") {
        // As the CLI says it: the provider's sentence, then when and which retry.
        const reason = String(data.reason)
          .trim()
          .replace(/[.:;,]+$/, "");
        const wait = data.inSeconds > 0 ? `in ${data.inSeconds} s` : "now";
        show(`${reason}. Trying again ${wait} (retry ${data.attempt} of ${data.of})…`);
      }
    }
  }
  throw new ApiError(0, "The connection ended before the answer; it will be shown with your next message.");
}
