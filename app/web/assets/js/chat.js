// The chat panel: messages go to POST /chat as the owner's web console (`source: "web"`); the
// reply comes back in the same request, however long the turn takes, and is shown as Markdown.
// "/stop" (typed, or the Stop button) stops the running turn. Returns `add`, which puts a node at
// the end of the log (the page adds the answers kept for the owner).
import { postJson } from "./lib/api.js";
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
      const { response } = await postJson("/chat", { message, source: "web" });
      const reply = isStop
        ? el("div", { class: "bubble note", text: response || "Stopped." })
        : el(
            "div",
            { class: "bubble assistant" },
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
