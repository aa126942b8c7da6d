// A plugin's configuration: every key its manifest declares, whether it is set, and a field to
// replace it. Stored values are never sent to the page (the API says only which keys are set),
// so a secret cannot be shown; an empty field leaves the value as it is.
import { postJson } from "./lib/api.js";
import { busy, el } from "./lib/dom.js";

export function renderConfig(plugin, { schema, configured }, { status, onChange }) {
  const keys = Object.keys(schema);
  if (keys.length === 0) return el("p", { class: "muted", text: "This plugin has no settings." });
  const save = el("button", { type: "submit", class: "primary", text: "Save configuration" });
  const send = (config) =>
    busy(save, async () => {
      try {
        const result = await postJson("/api/settings/plugins/configure", { name: plugin, config });
        await onChange([result.message, ...(result.warnings ?? [])].join(" "));
      } catch (error) {
        status.textContent = error.message;
      }
    });
  const fields = keys.map((key) => {
    const entry = schema[key];
    const isSet = configured[key] === true;
    const id = `config-${plugin}-${key}`;
    return el(
      "div",
      { class: "field", "data-config-key": key },
      el(
        "label",
        { for: id },
        key,
        " ",
        el("span", {
          class: isSet ? "badge ok" : "badge",
          "data-config-state": isSet ? "set" : "unset",
          text: isSet ? "set" : "not set",
        }),
        entry.required ? el("span", { class: "badge", text: "required" }) : null,
      ),
      el("div", { class: "row" }, [
        el("input", {
          id,
          class: "grow",
          type: "password",
          name: key,
          autocomplete: "new-password",
          spellcheck: "false",
          placeholder: isSet ? "Set. Type a new value to replace it" : "Not set. Type a value",
        }),
        isSet
          ? el("button", {
              type: "button",
              "data-clear": key,
              text: "Clear",
              on: { click: () => confirm(`Clear "${key}"?`) && send({ [key]: null }) },
            })
          : null,
      ]),
      entry.description ? el("p", { class: "hint", text: entry.description }) : null,
    );
  });
  const form = el(
    "form",
    { class: "config", autocomplete: "off" },
    fields,
    el("div", { class: "actions" }, save),
  );
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const config = {};
    for (const input of form.querySelectorAll("input[type=password]"))
      if (input.value !== "") config[input.name] = input.value;
    if (Object.keys(config).length === 0) {
      status.textContent = "Nothing to save: type a new value first.";
      return;
    }
    void send(config);
  });
  return form;
}
