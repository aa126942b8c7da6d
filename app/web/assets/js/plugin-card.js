// One installed plugin: a collapsible card whose body (instructions, tools and permissions,
// configuration, update and remove) is fetched when it is opened.
import { api, postJson } from "./lib/api.js";
import { busy, el, fill } from "./lib/dom.js";
import { renderPermissions, describePermissions } from "./plugin-permissions.js";
import { renderConfig } from "./plugin-config.js";
import { renderConnect, renderServer, renderTrust, trustBadges } from "./plugin-trust.js";

const pluginPath = (name) => `/api/settings/plugins/${encodeURIComponent(name)}`;

/**
 * `onChange(name, message)` reloads the list after an action; the new card shows `note` (the
 * action's outcome), since the card the action ran in is replaced.
 */
export function renderPluginCard(plugin, { open, openCards, note, onChange: reload }) {
  const body = el("div", { class: "plugin-body" }, el("p", { class: "muted", text: "Loading…" }));
  const status = el("p", { class: "hint", role: "status", "data-status": "", text: note ?? "" });
  const onChange = (message) => reload(plugin.name, message);
  const card = el(
    "details",
    { class: "card plugin", "data-plugin": plugin.name, open },
    el(
      "summary",
      {},
      el("span", { class: "plugin-name", text: plugin.name }),
      el("span", { class: "badge", "data-permissions": "", text: describePermissions(plugin.permissions) }),
      ...trustBadges(plugin),
      plugin.editable ? el("span", { class: "badge", text: "editable" }) : null,
    ),
    el("p", { class: "muted", text: plugin.description }),
    status,
    body,
  );
  let loaded = false;
  const load = async () => {
    try {
      await fillBody(body, plugin, { status, onChange });
      loaded = true;
    } catch (error) {
      fill(body, el("p", { class: "error", text: error.message }));
    }
  };
  card.addEventListener("toggle", () => {
    openCards.set(plugin.name, card.open);
    if (card.open && !loaded) void load();
  });
  if (open) void load();
  return card;
}

async function fillBody(body, plugin, context) {
  const [detail, config] = await Promise.all([
    api(`${pluginPath(plugin.name)}/detail`),
    api(`${pluginPath(plugin.name)}/config`),
  ]);
  if (plugin.server) {
    // An MCP server: config.toml holds its settings; here are its state, tools and permissions.
    fill(
      body,
      el("h3", { text: "Server" }),
      renderServer(detail.server ? detail : plugin),
      renderConnect(detail.server ? detail : plugin, context),
      el("h3", { text: "Network" }),
      renderTrust(plugin, context),
      el("h3", { text: "Tools" }),
      renderPermissions(plugin.name, detail.tools, config.permissions, context),
    );
    return;
  }
  fill(
    body,
    detail.instructions
      ? [el("h3", { text: "Instructions" }), el("pre", { class: "instructions", text: detail.instructions })]
      : null,
    el("h3", { text: "Approval and network" }),
    renderTrust(plugin, context),
    el("h3", { text: "Tools" }),
    renderPermissions(plugin.name, detail.tools, config.permissions, context),
    el("h3", { text: "Configuration" }),
    renderConfig(plugin.name, config, context),
    el("h3", { text: "Manage" }),
    renderManage(plugin, context),
  );
}

function renderManage(plugin, { status, onChange }) {
  const update = el("button", { type: "button", "data-action": "update", text: "Update" });
  const remove = el("button", { type: "button", class: "danger", "data-action": "remove", text: "Remove" });
  update.addEventListener("click", () =>
    busy(update, async () => {
      status.textContent = "Updating…";
      try {
        const result = await postJson("/api/settings/plugins/update", { name: plugin.name });
        await onChange(result.message);
      } catch (error) {
        status.textContent = error.message;
      }
    }),
  );
  remove.addEventListener("click", () =>
    busy(remove, async () => {
      if (!confirm(`Remove the plugin "${plugin.name}" with its configuration and files?`)) return;
      try {
        const result = await postJson("/api/settings/plugins/remove", { name: plugin.name });
        await onChange(result.message);
      } catch (error) {
        status.textContent = error.message;
      }
    }),
  );
  return el(
    "div",
    { class: "actions" },
    plugin.editable
      ? el("span", { class: "hint", text: "Written here (not from git): nothing to update." })
      : update,
    remove,
  );
}
