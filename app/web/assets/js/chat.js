// The chat panel: messages go to POST /chat as the owner's web console (`source: "web"`); the
// reply comes back in the same request, however long the turn takes, and is shown as Markdown.
// Meanwhile the request follows the turn (`Accept: text/event-stream`): the waiting bubble shows the
// text as it is written, the tool running, a tool's progress and a retry with its reason. "/stop"
// (typed, or the Stop button) stops the running turn. Returns `add`, which puts a node at the end
// of the log (the page adds the answers kept for the owner).
import { ApiError, postJson } from "./lib/api.js";
import { el } from "./lib/dom.js";
import { renderMarkdown } from "./lib/markdown.js";

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
  return { add };
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
      if (type === "retry")
        show(`${data.reason}: trying again in ${data.inSeconds} s (${data.attempt} of ${data.of})…`);
    }
  }
  throw new ApiError(0, "The connection ended before the answer; it will be shown with your next message.");
}
