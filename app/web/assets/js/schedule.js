// The Schedule page: every cron entry (the owner's reminders and the assistant's nightly upkeep)
// with its next firing, its last firing's result and what its firings cost, each editable and
// deletable. The server checks every change as the assistant's own cron tool does.
import { api } from "./lib/api.js";
import { busy, byId, el, fill, showError } from "./lib/dom.js";
import { formatUsd } from "./lib/format.js";

let timezone = "UTC";

/** A date in the owner's time zone (the one cron expressions are read in), not the browser's. */
function when(iso) {
  if (!iso) return "—";
  const date = new Date(iso);
  try {
    return new Intl.DateTimeFormat(undefined, {
      dateStyle: "medium",
      timeStyle: "short",
      timeZone: timezone,
    }).format(date);
  } catch {
    return date.toLocaleString();
  }
}

/** The value a datetime-local input shows for an instant, in the owner's time zone. */
function localInput(iso) {
  const parts = Object.fromEntries(
    new Intl.DateTimeFormat("en-CA", {
      timeZone: timezone,
      hourCycle: "h23",
      year: "numeric",
      month: "2-digit",
      day: "2-digit",
      hour: "2-digit",
      minute: "2-digit",
    })
      .formatToParts(new Date(iso))
      .map((part) => [part.type, part.value]),
  );
  return `${parts.year}-${parts.month}-${parts.day}T${parts.hour}:${parts.minute}`;
}

const OUTCOMES = {
  reply: "answered",
  empty: "finished without a reply",
  aborted: "stopped",
  error: "failed",
  steered: "merged into another turn",
};

function lastResult(result) {
  if (!result) return el("dd", { "data-field": "last", text: "Not fired yet." });
  const state =
    result.status === "done" || result.status === "failed"
      ? (OUTCOMES[result.outcome] ?? result.status)
      : result.status === "pending"
        ? "waiting for its turn"
        : "running now";
  const failed = result.status === "failed" || result.outcome === "error";
  return el(
    "dd",
    { "data-field": "last" },
    el("span", { class: `badge ${failed ? "bad" : "ok"}`, text: state }),
    ` ${when(result.at)}`,
    result.text
      ? el(
          "details",
          {},
          el("summary", { text: "What it said" }),
          el("pre", { class: "small", text: result.text }),
        )
      : null,
  );
}

function costLine(entry, days) {
  const { turns, costUsd, lastCostUsd } = entry.cost;
  const total =
    turns === 0
      ? `Nothing in the last ${days} days.`
      : `${formatUsd(costUsd)} over ${turns} firing${turns === 1 ? "" : "s"} in the last ${days} days.`;
  return lastCostUsd === null ? total : `${total} The last one: ${formatUsd(lastCostUsd)}.`;
}

function entryCard(entry, days) {
  const recurring = entry.cronExpression !== null;
  const kind = el(
    "select",
    { name: "kind", "aria-label": "Kind of schedule" },
    el("option", { value: "cron", text: "Repeats (cron expression)", selected: recurring }),
    el("option", { value: "once", text: "Once, at", selected: !recurring }),
  );
  const cronInput = el("input", {
    type: "text",
    name: "cronExpression",
    class: "grow",
    value: entry.cronExpression ?? "",
    placeholder: "0 9 * * 1-5",
    "aria-label": "Cron expression",
    spellcheck: "false",
    autocomplete: "off",
    hidden: !recurring,
  });
  const onceInput = el("input", {
    type: "datetime-local",
    name: "fireAt",
    class: "grow",
    value: entry.fireAt ? localInput(entry.fireAt) : "",
    "aria-label": "Fires at",
    hidden: recurring,
  });
  kind.addEventListener("change", () => {
    cronInput.hidden = kind.value !== "cron";
    onceInput.hidden = kind.value !== "once";
  });
  const note = el("textarea", { name: "note", rows: "4", "aria-label": "What to do when it fires" });
  note.value = entry.note;
  const save = el("button", { type: "submit", class: "primary", text: "Save" });
  const remove = el("button", { type: "button", class: "danger", text: "Delete" });
  const form = el(
    "form",
    { class: "stack" },
    el("div", { class: "row" }, kind, cronInput, onceInput),
    note,
    el("div", { class: "actions" }, save, remove),
  );
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const body = { note: note.value };
    if (kind.value === "cron") body.cronExpression = cronInput.value;
    else body.fireAt = onceInput.value;
    void change(save, `/api/schedule/${entry.id}`, "PUT", body, `Entry ${entry.id} saved.`);
  });
  remove.addEventListener("click", () => {
    const label = entry.name ?? `entry ${entry.id}`;
    if (!window.confirm(`Delete ${label}? It will not fire again.`)) return;
    void change(remove, `/api/schedule/${entry.id}`, "DELETE", undefined, `Entry ${entry.id} deleted.`);
  });
  return el(
    "section",
    { class: "card", "data-entry": String(entry.id), "aria-label": entry.name ?? `Entry ${entry.id}` },
    el(
      "h2",
      {},
      entry.name ?? `Entry ${entry.id}`,
      " ",
      el("span", { class: "badge", text: recurring ? entry.cronExpression : "once" }),
    ),
    el(
      "dl",
      { class: "facts" },
      el("dt", { text: "Next firing" }),
      el("dd", { "data-field": "next", text: entry.nextFire ? when(entry.nextFire) : "Not scheduled." }),
      el("dt", { text: "Last firing" }),
      lastResult(entry.lastResult),
      el("dt", { text: "Cost" }),
      el("dd", { "data-field": "cost", text: costLine(entry, days) }),
    ),
    el("details", {}, el("summary", { text: "Edit" }), form),
  );
}

function render(data) {
  timezone = data.timezone;
  byId("schedule-timezone").textContent = data.timezone;
  const total = data.entries.reduce((sum, entry) => sum + entry.cost.costUsd, 0);
  byId("schedule-total").textContent =
    data.entries.length === 0
      ? ""
      : `Scheduled turns cost ${formatUsd(total)} in the last ${data.costDays} days (also counted on the Usage page, by source cron:<id>).`;
  fill(
    byId("entries"),
    data.entries.length === 0
      ? el("p", {
          class: "muted",
          text: "Nothing is scheduled. Ask the assistant for a reminder and it appears here.",
        })
      : data.entries.map((entry) => entryCard(entry, data.costDays)),
  );
}

async function change(button, path, method, body, done) {
  byId("schedule-status").textContent = "";
  await busy(button, async () => {
    try {
      render(await api(path, { method, body }));
      showError(byId("schedule-error"));
      byId("schedule-status").textContent = done;
    } catch (error) {
      showError(byId("schedule-error"), error);
    }
  });
}

try {
  render(await api("/api/schedule"));
} catch (error) {
  fill(byId("entries"));
  showError(byId("schedule-error"), error);
}
