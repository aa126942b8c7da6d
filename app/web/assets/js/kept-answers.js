// The owner's notifications, on every page (the layout loads this): answers kept for them (a
// reminder, a plugin's result, a notice: turns nobody was waiting for), listed under the top bar
// until the owner dismisses them, here or on any other page or browser (GET /api/notifications,
// POST /api/notifications/dismiss). One arriving while a page is open appears at once (the live
// events) and, with the owner's leave (asked only when they press "Notify me"), raises a browser
// notification while they look elsewhere. One shown on a visible page is marked seen, so the CLI
// and the next console reply do not repeat it; until then the tab's title counts the new ones.
import { api, postJson } from "./lib/api.js";
import { byId, el, fill } from "./lib/dom.js";
import { formatDateTime } from "./lib/format.js";
import { renderMarkdown } from "./lib/markdown.js";
import { followEvents } from "./live.js";

const SOURCES = {
  cron: "Reminder",
  coder: "Coding task",
  upload: "Upload",
  delivery: "Delivery",
  login: "Login",
  people: "People",
  agent: "Assistant",
};

/** "Reminder", "Plugin radar", … for an answer's source (a firing's `cron:<id>` is a reminder). */
export function kindOf(source) {
  const text = source ?? "";
  return text.startsWith("plugin:")
    ? `Plugin ${text.slice(7)}`
    : (SOURCES[text.replace(/:.*$/, "")] ?? "Message");
}

/** The reply as plain text, for a notification. */
const plain = (markdown) =>
  markdown
    .replace(/[*_`#>~]|\[|\]\([^)]*\)/g, "")
    .replace(/\s+/g, " ")
    .trim();

const titleOf = (answer) => answer.title || (answer.message ?? "").split("\n")[0] || "";

function mountNotifications(region) {
  const list = byId("notification-list");
  const dismissAll = byId("notifications-dismiss-all");
  // The home page has its own "Notify me" and live status beside the chat.
  const allowButtons = [byId("notifications-allow"), document.getElementById("notify")].filter(Boolean);
  const liveStatus = document.getElementById("live-status");
  /** Listed, newest first. */
  let items = [];
  /** Marked seen by this page (or being marked). */
  const marked = new Set();
  /** Heard of live while the page was open: a browser notification may be raised for each once. */
  const raised = new Set();
  let unread = 0;
  const title = document.title;
  const canNotify = "Notification" in window;
  const visible = () => document.visibilityState === "visible";
  const looking = () => visible() && document.hasFocus();

  async function markSeen() {
    if (!visible()) return;
    const ids = items.map((item) => item.id).filter((id) => !marked.has(id));
    if (ids.length === 0) return;
    for (const id of ids) marked.add(id);
    try {
      await postJson("/api/answers/seen", { ids });
    } catch {
      // Not marked: tried again when the page is next shown.
      for (const id of ids) marked.delete(id);
    }
  }

  async function dismiss(ids, button) {
    if (button) button.disabled = true;
    try {
      await postJson("/api/notifications/dismiss", { ids });
      remove(ids);
    } catch (error) {
      if (button) button.disabled = false;
      region.querySelector(".notifications-error")?.remove();
      list.before(el("p", { class: "error notifications-error", role: "alert", text: error.message }));
    }
  }

  function render() {
    region.querySelector(".notifications-error")?.remove();
    fill(
      list,
      items.map((item) => {
        const kind = kindOf(item.source);
        const close = el("button", {
          type: "button",
          class: "dismiss",
          text: "Dismiss",
          "aria-label": `Dismiss: ${item.title || kind}`,
        });
        close.addEventListener("click", () => void dismiss([item.id], close));
        return el(
          "li",
          { class: item.failed ? "notification failed" : "notification", "data-notification": item.id },
          el(
            "div",
            { class: "notification-body" },
            el(
              "div",
              { class: "notification-title" },
              el("strong", { text: kind }),
              item.title ? ` · ${item.title}` : "",
              item.at ? el("span", { class: "hint", text: ` ${formatDateTime(item.at)}` }) : null,
            ),
            renderMarkdown(item.response),
          ),
          close,
        );
      }),
    );
    region.hidden = items.length === 0;
    dismissAll.hidden = items.length < 2;
  }

  function remove(ids) {
    const gone = new Set(ids);
    items = items.filter((item) => !gone.has(item.id));
    render();
  }

  let reads = 0;
  async function load() {
    const read = ++reads;
    let listed;
    try {
      listed = (await api("/api/notifications")).notifications;
    } catch {
      // Kept as they were; the next event or reconnection reads the list again.
      return;
    }
    // An older read answering late does not undo a newer one.
    if (read !== reads) return;
    items = listed;
    render();
    void markSeen();
  }

  function raise(answer) {
    if (!canNotify || Notification.permission !== "granted" || looking()) return;
    const about = titleOf(answer);
    try {
      const notification = new Notification(`Stavrobot · ${kindOf(answer.source)}`, {
        body: `${about ? `${about}: ` : ""}${plain(answer.response)}`.slice(0, 300),
        tag: `answer-${answer.id}`,
      });
      notification.addEventListener("click", () => {
        window.focus();
        notification.close();
      });
    } catch {
      // A browser that shows notifications only from a service worker: the page lists it anyway.
    }
  }

  function arrived(answer, { away }) {
    if (!away && !raised.has(answer.id)) {
      raised.add(answer.id);
      raise(answer);
      if (!visible()) {
        unread++;
        document.title = `(${unread}) ${title}`;
      }
    }
    // Listed from the event at once; the list read next names it as it was kept (what came
    // while the page was closed is in that list already, if it is a notification at all).
    if (!away && !items.some((item) => item.id === answer.id)) {
      items = [
        {
          id: answer.id,
          source: answer.source,
          title: titleOf(answer),
          response: answer.response,
          at: new Date().toISOString(),
        },
        ...items,
      ];
      render();
    }
    void load();
  }

  document.addEventListener("visibilitychange", () => {
    if (!visible()) return;
    unread = 0;
    document.title = title;
    void markSeen();
  });
  dismissAll.addEventListener(
    "click",
    () =>
      void dismiss(
        items.map((item) => item.id),
        dismissAll,
      ),
  );

  const showAllow = () => {
    for (const button of allowButtons) button.hidden = !canNotify || Notification.permission !== "default";
  };
  for (const button of allowButtons) {
    button.addEventListener("click", async () => {
      try {
        await Notification.requestPermission();
      } catch {
        // Refused or unsupported: the page keeps listing what arrives.
      }
      showAllow();
    });
  }
  showAllow();

  const STATES = {
    live: "Live",
    reconnecting: "Reconnecting…",
    off: "Live updates are off; trying again soon.",
  };
  followEvents({
    onAnswer: arrived,
    onDismissed: remove,
    onState: (state) => {
      if (liveStatus) {
        liveStatus.textContent = STATES[state] ?? "";
        liveStatus.dataset.state = state;
      }
      // Connected again: what was dismissed or kept meanwhile is read afresh.
      if (state === "live") void load();
    },
  });
}

const region = document.getElementById("notifications");
if (region) mountNotifications(region);
