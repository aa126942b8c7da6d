// Which tools of a plugin the assistant may use: all (["*"]), the chosen ones (their names), or
// none ([]: the plugin is disabled and the model does not see it). Only the owner can set this.
import { postJson } from "./lib/api.js";
import { busy, el } from "./lib/dom.js";

export function describePermissions(permissions) {
  if (permissions.includes("*")) return "all tools";
  if (permissions.length === 0) return "disabled";
  return `${permissions.length} tool${permissions.length === 1 ? "" : "s"} enabled`;
}

export function renderPermissions(plugin, tools, permissions, { status, onChange }) {
  const mode = permissions.includes("*") ? "all" : permissions.length === 0 ? "none" : "chosen";
  const group = `permissions-${plugin}`;
  const radio = (value, label) =>
    el(
      "label",
      { class: "check" },
      el("input", { type: "radio", name: group, value, checked: mode === value, "data-mode": value }),
      label,
    );
  const toolBoxes = tools.map((tool) =>
    el(
      "label",
      { class: "check" },
      el("input", {
        type: "checkbox",
        value: tool.name,
        "data-tool": tool.name,
        checked: permissions.includes("*") || permissions.includes(tool.name),
      }),
      el(
        "span",
        {},
        el("strong", { text: tool.name }),
        tool.async ? " (async)" : "",
        el("div", { class: "hint", text: tool.description }),
      ),
    ),
  );
  const save = el("button", { type: "submit", class: "primary", text: "Save permissions" });
  const form = el(
    "form",
    { class: "permissions" },
    el(
      "fieldset",
      {},
      el("legend", { class: "visually-hidden", text: "Which tools may run" }),
      radio("all", "All tools"),
      radio("chosen", "Only the tools ticked below"),
      radio("none", "Disabled"),
    ),
    tools.length === 0
      ? el("p", { class: "muted", text: "This plugin has no tools." })
      : el("div", { class: "tools" }, toolBoxes),
    el("div", { class: "actions" }, save),
  );
  const chosenMode = () => form.querySelector("input[type=radio]:checked")?.value ?? "all";
  const sync = () => {
    for (const box of form.querySelectorAll("input[type=checkbox]")) box.disabled = chosenMode() !== "chosen";
  };
  form.addEventListener("change", sync);
  sync();
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    void busy(save, async () => {
      const chosen = chosenMode();
      const list =
        chosen === "all"
          ? ["*"]
          : chosen === "none"
            ? []
            : [...form.querySelectorAll("input[type=checkbox]:checked")].map((box) => box.value);
      try {
        const result = await postJson("/api/settings/plugins/configure", {
          name: plugin,
          config: { permissions: list },
        });
        await onChange(result.message);
      } catch (error) {
        status.textContent = error.message;
      }
    });
  });
  return form;
}
