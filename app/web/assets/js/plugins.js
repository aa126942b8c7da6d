// The plugin manager: install by git address (with progress), and one card per plugin with its
// tools, permissions, configuration, update and remove (plugin-card.js).
import { api } from "./lib/api.js";
import { byId, el, fill, showError } from "./lib/dom.js";
import { watchInstall } from "./plugin-install.js";
import { renderPluginCard } from "./plugin-card.js";

/** Plugins whose card is open, kept for this tab so a reload (or a change) keeps them open. */
const OPEN_KEY = "stavrobot.openPlugins";
const openCards = {
  names: new Set(JSON.parse(sessionStorage.getItem(OPEN_KEY) ?? "[]")),
  has(name) {
    return this.names.has(name);
  },
  set(name, isOpen) {
    if (isOpen) this.names.add(name);
    else this.names.delete(name);
    sessionStorage.setItem(OPEN_KEY, JSON.stringify([...this.names]));
  },
};

/** `name` and `message`: an action's outcome, shown in that plugin's new card. */
async function loadPlugins(name, message) {
  try {
    const { plugins, network, mcpConfigProblem } = await api("/api/settings/plugins/list");
    showError(byId("plugins-error"));
    showNetworkNote(network);
    // A change to config.toml's [mcpServers] that could not be used: the old servers keep running.
    const mcpNote = byId("mcp-config-note");
    mcpNote.hidden = !mcpConfigProblem;
    mcpNote.textContent = mcpConfigProblem ?? "";
    // An action whose plugin is gone (removed) is reported above the list.
    byId("plugins-note").textContent = plugins.some((plugin) => plugin.name === name) ? "" : (message ?? "");
    if (plugins.length === 0) {
      fill(byId("plugins"), el("p", { class: "muted", text: "No plugins yet. Install one above." }));
      return;
    }
    fill(
      byId("plugins"),
      plugins.map((plugin) =>
        renderPluginCard(plugin, {
          open: openCards.has(plugin.name),
          openCards,
          note: plugin.name === name ? message : undefined,
          onChange: loadPlugins,
        }),
      ),
    );
  } catch (error) {
    fill(byId("plugins"));
    showError(byId("plugins-error"), error);
  }
}

/** Where the sandbox cannot take the network away, the owner is told what follows. */
function showNetworkNote(network) {
  const note = byId("network-note");
  note.hidden = !network || network.enforced;
  note.textContent =
    !network || network.enforced
      ? ""
      : network.allowWithoutCut
        ? "This machine's sandbox cannot take the network away from plugins: those that should run without it (no network asked for, or switched off here) run WITH it, as your configuration allows."
        : "This machine's sandbox cannot take the network away from plugins: those that should run without it (no network asked for, or switched off here) do not run. Install bubblewrap, or allow them with [plugins] allowWithoutNetworkCut = true in config.toml.";
}

byId("install-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  const input = byId("install-url");
  const button = byId("install-button");
  const url = input.value.trim();
  if (!url) return;
  button.disabled = true;
  try {
    const result = await watchInstall(url, {
      steps: byId("install-steps"),
      message: byId("install-message"),
      output: byId("install-output"),
      box: byId("install-progress"),
      error: byId("install-error"),
    });
    if (result) {
      input.value = "";
      openCards.set(result.name, true);
      await loadPlugins();
    }
  } finally {
    button.disabled = false;
  }
});

// Back from an MCP server's sign-in (the app's OAuth callback sends the browser here): its card open.
const signedIn = new URLSearchParams(window.location.search).get("signedIn");
if (signedIn) {
  openCards.set(signedIn, true);
  history.replaceState(null, "", window.location.pathname);
  await loadPlugins(signedIn, `Signed in to the MCP server "${signedIn}".`);
} else await loadPlugins();
