// What a plugin may do beyond its tools: its format and version, the permissions it asked for, the
// owner's approval (formats that ask for it: Cyclop One, per version) and whether it has network.
// Only the owner decides these; the model cannot.
import { postJson } from "./lib/api.js";
import { busy, el } from "./lib/dom.js";

const FORMATS = {
  stavrobot: "Stavrobot",
  cyclopone: "Cyclop One",
  workbench: "Workbench",
  mcp: "MCP server",
  osaurus: "Osaurus",
};

export function formatLabel(format) {
  return FORMATS[format ?? "stavrobot"] ?? String(format);
}

/** The badges beside a plugin's name in its card's summary. */
export function trustBadges(plugin) {
  const waiting = plugin.waitingApproval ?? [];
  return [
    el("span", {
      class: "badge",
      "data-format": plugin.format ?? "stavrobot",
      text: formatLabel(plugin.format),
    }),
    waiting.length > 0
      ? el("span", { class: "badge bad", "data-waiting": "", text: "waits for approval" })
      : null,
    plugin.network === false
      ? el("span", { class: "badge", "data-no-network": "", text: "no network" })
      : null,
    plugin.server
      ? el("span", {
          class: plugin.server.state === "running" ? "badge" : "badge bad",
          "data-server-state": plugin.server.state,
          text: plugin.server.state,
        })
      : null,
    plugin.server?.signIn === "needed"
      ? el("span", { class: "badge bad", "data-sign-in": "needed", text: "needs sign-in" })
      : null,
  ];
}

/** An MCP server's transport, state and last error (its declaration lives in config.toml). */
export function renderServer(plugin) {
  const server = plugin.server;
  return el(
    "div",
    { "data-server": "" },
    el("p", {
      text:
        `Declared in config.toml ([mcpServers.${plugin.name}]), over ${server.transport}: ${server.state}` +
        (server.failures > 0 ? ` after ${server.failures} failure(s) in a row.` : "."),
    }),
    server.lastError ? el("pre", { class: "error", "data-last-error": "", text: server.lastError }) : null,
  );
}

/**
 * Connect, for a remote server that signs in with OAuth: the browser goes to the server's
 * authorization page and comes back to the app, which completes the sign-in and returns here.
 */
export function renderConnect(plugin, { status, onChange }) {
  const signIn = plugin.server?.signIn;
  if (signIn === undefined) return null;
  const button = el("button", {
    type: "button",
    "data-action": "connect",
    text: signIn === "needed" ? "Connect" : "Sign in again",
  });
  button.addEventListener("click", () =>
    busy(button, async () => {
      status.textContent = "Opening the server's sign-in page…";
      try {
        const result = await postJson("/api/settings/plugins/mcp-connect", { name: plugin.name });
        if (result.authorizationUrl) window.location.assign(result.authorizationUrl);
        else await onChange(result.message);
      } catch (error) {
        status.textContent = error.message;
      }
    }),
  );
  return el(
    "div",
    { class: "actions", "data-connect": "" },
    el("span", {
      class: "hint",
      text: signIn === "needed" ? "This server needs you to sign in." : "Signed in.",
    }),
    button,
  );
}

export function renderTrust(plugin, { status, onChange }) {
  const asks = plugin.asks ?? [];
  const waiting = plugin.waitingApproval ?? [];
  const act = (button, path, body) =>
    busy(button, async () => {
      try {
        const result = await postJson(path, body);
        await onChange(result.message);
      } catch (error) {
        status.textContent = error.message;
      }
    });
  const approval = [];
  if (plugin.waitingApproval !== undefined) {
    if (waiting.length === 0) {
      approval.push(el("p", { "data-approval": "approved", text: `Approved (version ${plugin.version}).` }));
    } else {
      const all = el("button", {
        type: "button",
        class: "primary",
        "data-action": "approve",
        text: "Approve",
      });
      all.addEventListener("click", () => act(all, "/api/settings/plugins/approve", { name: plugin.name }));
      // An Osaurus plugin's tools each say whether they ask: the owner may approve them one by one.
      const each =
        plugin.format === "osaurus"
          ? waiting.map((tool) => {
              const one = el("button", {
                type: "button",
                "data-action": "approve-tool",
                "data-tool": tool,
                text: `Approve ${tool}`,
              });
              one.addEventListener("click", () =>
                act(one, "/api/settings/plugins/approve", { name: plugin.name, tool }),
              );
              return one;
            })
          : [];
      approval.push(
        el("p", {
          "data-approval": "waiting",
          text: `Version ${plugin.version} waits for your approval before these tools can run: ${waiting.join(", ")}.`,
        }),
        el("div", { class: "actions" }, all, ...each),
      );
    }
  }
  const box = el("input", {
    type: "checkbox",
    "data-network": "",
    checked: plugin.network !== false,
    disabled: plugin.networkAllowed === false,
  });
  box.addEventListener("change", () =>
    act(box, "/api/settings/plugins/network", { name: plugin.name, network: box.checked }),
  );
  return el(
    "div",
    { class: "trust" },
    el(
      "p",
      { "data-asks": "" },
      `Format: ${formatLabel(plugin.format)}${plugin.version ? `, version ${plugin.version}` : ""}. `,
      plugin.format === "cyclopone"
        ? asks.length > 0
          ? `It asks for: ${asks.join(", ")}.`
          : "It asks for no permissions."
        : plugin.format === "osaurus"
          ? `${plugin.verified ? "Its package's signature was verified." : "Its package was not verified."} ` +
            (asks.length > 0 ? `Its tools need: ${asks.join(", ")}.` : "Its tools need no permissions.") +
            (plugin.skills?.length ? ` Skills: ${plugin.skills.map((skill) => skill.name).join(", ")}.` : "")
          : plugin.format === "mcp"
            ? plugin.networkAllowed
              ? "config.toml lets it have network."
              : "config.toml says network = false."
            : "Its format declares no permissions.",
    ),
    ...approval,
    el("label", { class: "check" }, box, "Network (it reaches what this machine reaches, loopback included)"),
    plugin.networkAllowed === false
      ? el("p", { class: "hint", text: "It did not ask for network, so it runs without it." })
      : null,
  );
}
