// Answers kept for the owner (a reminder, a plugin's result, a notice: turns nobody was waiting
// for) in the home page's chat: what arrived while the page was closed when it opens, then each one
// as it is kept. One is marked seen once shown on a visible page (until then the tab's title
// counts them), so no other console and no later reply shows it again. With the owner's leave,
// asked only when they press the button, one that arrives while they look elsewhere raises a
// browser notification; without it (refused, or a browser without notifications) nothing else
// changes.
import { postJson } from "./lib/api.js";
import { el } from "./lib/dom.js";
import { renderMarkdown } from "./lib/markdown.js";
import { followEvents } from "./live.js";

const SOURCES = {
  cron: "Reminder",
  coder: "Coding task",
  upload: "Upload",
  delivery: "Delivery",
  login: "Login",
  agent: "Assistant",
};

/** "Reminder", "Plugin radar/scan", … and what it answers (a reminder's note, a tool's result). */
function describe(answer) {
  const source = answer.source ?? "";
  // A firing names its entry (`cron:<id>`); it is a reminder like any other.
  const kind = source.startsWith("plugin:")
    ? `Plugin ${source.slice(7)}`
    : (SOURCES[source.replace(/:.*$/, "")] ?? "Message");
  const about = (answer.message.split("\n")[0] ?? "")
    .replace(/^\[Cron entry \d+ has fired\] /, "")
    .slice(0, 200);
  return { kind, about };
}

/** The reply as plain text, for a notification. */
const plain = (markdown) =>
  markdown
    .replace(/[*_`#>~]|\[|\]\([^)]*\)/g, "")
    .replace(/\s+/g, " ")
    .trim();

export function mountKeptAnswers({ add, status, notify }) {
  const shown = new Set();
  /** Shown on the page, not yet marked seen (the page was not visible, or marking failed). */
  const unmarked = new Set();
  let awayNote = false;
  let unread = 0;
  const title = document.title;
  const canNotify = "Notification" in window;

  const visible = () => document.visibilityState === "visible";
  const looking = () => visible() && document.hasFocus();

  async function markSeen() {
    if (!visible() || unmarked.size === 0) return;
    const ids = [...unmarked];
    unmarked.clear();
    try {
      await postJson("/api/answers/seen", { ids });
    } catch {
      // Not marked: tried again when the page is next shown.
      for (const id of ids) unmarked.add(id);
    }
  }

  function raise(answer, kind) {
    if (!canNotify || Notification.permission !== "granted" || looking()) return;
    try {
      const notification = new Notification(`Stavrobot · ${kind}`, {
        body: plain(answer.response).slice(0, 300),
        tag: `answer-${answer.id}`,
      });
      notification.addEventListener("click", () => {
        window.focus();
        notification.close();
      });
    } catch {
      // A browser that shows notifications only from a service worker: the page shows it anyway.
    }
  }

  function show(answer, { away }) {
    if (shown.has(answer.id)) return;
    shown.add(answer.id);
    if (away && !awayNote) {
      awayNote = true;
      add(el("div", { class: "bubble note", text: "While you were away" }));
    }
    const { kind, about } = describe(answer);
    add(
      el(
        "div",
        { class: "bubble assistant kept", "data-answer": answer.id },
        el("div", { class: "hint kept-from", text: about ? `${kind} · ${about}` : kind }),
        renderMarkdown(answer.response),
      ),
    );
    unmarked.add(answer.id);
    if (!away) raise(answer, kind);
    if (!visible()) {
      unread++;
      document.title = `(${unread}) ${title}`;
    }
    void markSeen();
  }

  document.addEventListener("visibilitychange", () => {
    if (!visible()) return;
    unread = 0;
    document.title = title;
    void markSeen();
  });

  const showButton = () => {
    notify.hidden = !canNotify || Notification.permission !== "default";
  };
  notify.addEventListener("click", async () => {
    try {
      await Notification.requestPermission();
    } catch {
      // Refused or unsupported: the page keeps showing what arrives.
    }
    showButton();
  });
  showButton();

  const STATES = {
    live: "Live",
    reconnecting: "Reconnecting…",
    off: "Live updates are off; trying again soon.",
  };
  followEvents({
    onAnswer: show,
    onState: (state) => {
      status.textContent = STATES[state] ?? "";
      status.dataset.state = state;
    },
  });
}
