// The allowlist editor: one list per configured channel (an identifier and an optional note per
// entry), the owner's identities shown but locked. Only the channels config.toml sets up are shown;
// saving sends their lists as edited and every other list as it was read (nothing kept for a
// channel switched off is lost). The server checks every entry and answers with what it stored.
import { api } from "./lib/api.js";
import { busy, byId, el, fill, showError } from "./lib/dom.js";

const SERVICES = [
  { id: "signal", label: "Signal", placeholder: "+15551234567" },
  { id: "telegram", label: "Telegram", placeholder: "123456789 (a chat id)" },
  { id: "whatsapp", label: "WhatsApp", placeholder: "+15551234567" },
  { id: "email", label: "Email", placeholder: "someone@example.com or *@example.com" },
];

function entryRow(service, identifier, note, owner) {
  const row = el(
    "li",
    { class: "row", "data-entry": "" },
    el("input", {
      type: "text",
      class: "grow",
      name: "identifier",
      value: identifier,
      placeholder: service.placeholder,
      "aria-label": `${service.label} identifier`,
      disabled: owner,
      spellcheck: "false",
      autocomplete: "off",
    }),
    el("input", {
      type: "text",
      class: "grow",
      name: "note",
      value: note,
      placeholder: "Note (who is this?)",
      "aria-label": `Note for this ${service.label} entry`,
    }),
    owner
      ? el("span", { class: "badge", text: "you (locked)" })
      : el("button", { type: "button", class: "danger", text: "Remove", on: { click: () => row.remove() } }),
  );
  if (owner) row.dataset.owner = "";
  return row;
}

/** What the server answered last: the lists of the channels not shown go back unchanged. */
let stored = { allowlist: {}, channels: [] };

const shown = () => SERVICES.filter((service) => stored.channels.includes(service.id));

function render(answer) {
  stored = answer;
  const { allowlist, ownerIdentities } = answer;
  byId("allowlist-save").hidden = shown().length === 0;
  if (shown().length === 0) {
    fill(
      byId("services"),
      el("p", {
        class: "muted",
        id: "no-channels",
        text:
          "No channel is configured, so nobody but you can write to the assistant. Add a [telegram] or " +
          "[signal] section to config.toml (see config.example.toml) and restart; its list appears here.",
      }),
    );
    return;
  }
  fill(
    byId("services"),
    shown().map((service) => {
      const owners = new Set(ownerIdentities[service.id].map(String));
      const add = () => {
        const row = entryRow(service, "", "", false);
        list.append(row);
        row.querySelector("input").focus();
      };
      const list = el(
        "ul",
        { class: "list entries", "data-service": service.id },
        allowlist[service.id].map((entry) =>
          entryRow(service, String(entry), allowlist.notes[String(entry)] ?? "", owners.has(String(entry))),
        ),
      );
      return el(
        "section",
        { class: "card", "aria-label": service.label },
        el("h2", { text: service.label }),
        list,
        el(
          "div",
          { class: "actions" },
          el("button", {
            type: "button",
            "data-add": service.id,
            text: `Add ${service.label} entry`,
            on: { click: add },
          }),
        ),
      );
    }),
  );
}

function collect() {
  const body = { notes: {} };
  for (const service of SERVICES) {
    if (!stored.channels.includes(service.id)) {
      body[service.id] = stored.allowlist[service.id] ?? [];
      for (const entry of body[service.id]) {
        const note = stored.allowlist.notes?.[String(entry)];
        if (note) body.notes[String(entry)] = note;
      }
      continue;
    }
    body[service.id] = [];
    for (const row of byId("services").querySelectorAll(`[data-service="${service.id}"] [data-entry]`)) {
      const identifier = row.querySelector("[name=identifier]").value.trim();
      const note = row.querySelector("[name=note]").value.trim();
      if (!identifier) continue;
      body[service.id].push(identifier);
      if (note) body.notes[identifier] = note;
    }
  }
  return body;
}

byId("allowlist-form").addEventListener("submit", (event) => {
  event.preventDefault();
  void busy(byId("allowlist-save"), async () => {
    byId("allowlist-status").textContent = "";
    try {
      render(await api("/api/settings/allowlist", { method: "PUT", body: collect() }));
      showError(byId("allowlist-error"));
      byId("allowlist-status").textContent = "Saved.";
    } catch (error) {
      showError(byId("allowlist-error"), error);
    }
  });
});

try {
  render(await api("/api/settings/allowlist"));
} catch (error) {
  fill(byId("services"));
  showError(byId("allowlist-error"), error);
}
