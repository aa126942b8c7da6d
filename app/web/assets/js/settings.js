// The Settings page: the model provider (checked by the app with the provider before it is saved;
// the key is never shown back, only whether one is set) and the backup's download.
import { api } from "./lib/api.js";
import { busy, byId, el, fill, showError } from "./lib/dom.js";

const form = byId("provider-form");
const field = (id) => byId(id);
let shown;

function where() {
  return form.querySelector('input[name="where"]:checked').value;
}

function showWhere() {
  byId("endpoint-fields").hidden = where() !== "endpoint";
  field("base-url").required = where() === "endpoint";
  byId("provider-hint").textContent =
    where() === "endpoint"
      ? "A name of your choice for this server (e.g. ollama), or the provider it stands in for."
      : "One of the providers listed, e.g. anthropic.";
}

async function listModels() {
  const provider = field("provider").value.trim();
  if (!provider) return;
  try {
    const { models } = await api(`/api/settings/provider/models?provider=${encodeURIComponent(provider)}`);
    fill(
      byId("model-list"),
      models.map((id) => el("option", { value: id })),
    );
  } catch {
    // Suggestions only: the model can still be typed.
  }
}

function show(settings) {
  shown = settings;
  fill(
    byId("provider-list"),
    settings.providers.map((name) => el("option", { value: name })),
  );
  field("provider").value = settings.provider;
  field("model").value = settings.model;
  form.querySelector(`input[name="where"][value="${settings.baseUrl ? "endpoint" : "provider"}"]`).checked =
    true;
  field("base-url").value = settings.baseUrl ?? "";
  if (settings.api) field("api").value = settings.api;
  field("api-key").value = "";
  field("api-key").placeholder = settings.keySet ? "•••••• (set; leave empty to keep it)" : "";
  byId("key-state").textContent = settings.keySet
    ? "A key is set. It is never shown; type a new one to replace it."
    : settings.subscription
      ? "No key: the assistant uses a subscription login (Provider login). A key typed here replaces it."
      : "No key is set. A local server usually needs none.";
  byId("remove-key-label").hidden = !settings.keySet;
  field("remove-key").checked = false;
  const running = settings.running;
  byId("provider-running").textContent =
    `In use now: ${running.provider}/${running.model}` +
    (running.baseUrl ? ` at ${running.baseUrl}` : "") +
    ".";
  const restart = byId("provider-restart");
  restart.hidden = !settings.restartNeeded;
  restart.textContent = settings.restartNeeded
    ? "config.toml holds a choice the running assistant does not use yet: restart it (stop npm start with " +
      "Ctrl-C and run it again; with Docker, docker compose restart app) to use it."
    : "";
  showWhere();
  void listModels();
}

function choice() {
  const body = { provider: field("provider").value.trim(), model: field("model").value.trim() };
  if (where() === "endpoint") {
    body.baseUrl = field("base-url").value.trim();
    body.api = field("api").value;
  }
  const key = field("api-key").value.trim();
  if (key) body.apiKey = key;
  else if (shown?.keySet && field("remove-key").checked) body.apiKey = null;
  return body;
}

async function load() {
  try {
    show(await api("/api/settings/provider"));
  } catch (error) {
    showError(byId("provider-error"), error);
  }
}

form.addEventListener("change", (event) => {
  if (event.target.name === "where") showWhere();
});
field("provider").addEventListener("change", () => void listModels());
form.addEventListener("submit", (event) => {
  event.preventDefault();
  const status = byId("provider-status");
  status.textContent = "Asking the provider…";
  showError(byId("provider-error"));
  void busy(byId("provider-save"), async () => {
    try {
      const saved = await api("/api/settings/provider", { method: "PUT", body: choice() });
      await load();
      status.textContent = saved.message;
    } catch (error) {
      status.textContent = "";
      const fix = error.body?.fix;
      showError(byId("provider-error"), fix ? `${error.message}\n→ ${fix}` : error);
    }
  });
});

async function showBackup() {
  try {
    const backup = await api("/api/backup");
    const note = byId("backup-note");
    note.hidden = !backup.note;
    note.textContent = backup.note ?? "";
  } catch (error) {
    showError(byId("backup-note"), error);
  }
}

await Promise.all([load(), showBackup()]);
