// The Settings page: the model provider (checked by the app with the provider before it is saved,
// or saved anyway on purpose; the key is never shown back, only whether one is set; a provider
// that waits for a restart is one button away from use) and the backup's download.
import { api } from "./lib/api.js";
import { busy, byId, el, fill, showError } from "./lib/dom.js";
import { restartAssistant } from "./lib/restart.js";

/** What a server of the owner's is called unless they name the provider it stands in for (free). */
const LOCAL = "local";

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
      ? `"${LOCAL}" for a model of your own (its use counts as free unless config.toml sets its cost), or ` +
        "the provider a proxy stands in for (then priced by that provider's list)."
      : "One of the providers listed, e.g. anthropic.";
}

/** Switched to a server of one's own: the provider's service named in the field is not that server. */
function switchedWhere() {
  const typed = field("provider").value.trim();
  // (A proxy saved under the provider it stands in for keeps that name.)
  const savedProxy = shown?.baseUrl && shown.provider === typed;
  if (where() === "endpoint" && shown?.providers.includes(typed) && !savedProxy)
    field("provider").value = LOCAL;
  if (where() === "provider" && field("provider").value.trim() === LOCAL)
    field("provider").value = shown && !shown.baseUrl ? shown.provider : "";
  showWhere();
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
  byId("provider-restart").hidden = !settings.restartNeeded;
  byId("provider-restart-now").hidden = !settings.canRestart;
  byId("provider-restart-text").textContent = !settings.restartNeeded
    ? ""
    : settings.canRestart
      ? "config.toml holds a choice the running assistant does not use yet. Restart now to use it (a reply " +
        "being written is interrupted, and answered again after the restart)."
      : "config.toml holds a choice the running assistant does not use yet: restart it (stop npm start with " +
        "Ctrl-C and run it again; with Docker, docker compose restart app) to use it.";
  showWhere();
  void listModels();
}

function choice(saveAnyway = false) {
  const body = { provider: field("provider").value.trim(), model: field("model").value.trim() };
  if (saveAnyway) body.saveAnyway = true;
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
  if (event.target.name === "where") switchedWhere();
});
field("provider").addEventListener("change", () => void listModels());

/** The names the provider has closest to the one typed, each a button that puts it in its field. */
function showSuggestions(body) {
  const node = byId("provider-suggestions");
  const names = body?.suggestions ?? [];
  const target = body?.reason === "unknown-provider" ? "provider" : "model";
  node.hidden = names.length === 0;
  fill(
    node,
    names.length > 0 ? "Did you mean " : null,
    names.flatMap((name, index) => [
      index > 0 ? " " : null,
      el("button", {
        type: "button",
        class: "suggestion",
        "data-name": name,
        text: name,
        on: {
          click: () => {
            field(target).value = name;
            if (target === "provider") void listModels();
            showSuggestions(undefined);
            byId("provider-save-anyway").hidden = true;
          },
        },
      }),
    ]),
    names.length > 0 ? "?" : null,
  );
}

async function save(saveAnyway) {
  const status = byId("provider-status");
  status.textContent = "Asking the provider…";
  showError(byId("provider-error"));
  showSuggestions(undefined);
  byId("provider-save-anyway").hidden = true;
  try {
    const saved = await api("/api/settings/provider", { method: "PUT", body: choice(saveAnyway) });
    await load();
    status.textContent = saved.message;
  } catch (error) {
    status.textContent = "";
    const fix = error.body?.fix;
    showError(byId("provider-error"), fix ? `${error.message}\n→ ${fix}` : error);
    showSuggestions(error.body);
    // It would start as it is: the owner may know better than the check (a server down for now).
    byId("provider-save-anyway").hidden = error.body?.saveAnyway !== true;
  }
}

form.addEventListener("submit", (event) => {
  event.preventDefault();
  void busy(byId("provider-save"), () => save(false));
});
byId("provider-save-anyway").addEventListener("click", () => {
  void busy(byId("provider-save-anyway"), () => save(true));
});
byId("provider-restart-now").addEventListener("click", () => {
  const status = byId("provider-status");
  showError(byId("provider-error"));
  status.textContent = "Restarting the assistant…";
  void busy(byId("provider-restart-now"), async () => {
    try {
      show(await restartAssistant());
      const running = shown.running;
      status.textContent = `Restarted: ${running.provider}/${running.model} is in use now.`;
    } catch (error) {
      status.textContent = "";
      showError(byId("provider-error"), error);
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

// Search by meaning: [embeddings] and [memory] autoRecall.
function showEmbeddings(settings) {
  byId("embeddings-on").checked = settings.configured;
  byId("embeddings-base-url").value = settings.baseUrl;
  byId("embeddings-model").value = settings.model;
  byId("embeddings-key").value = "";
  byId("embeddings-key-state").textContent = settings.apiKeySet
    ? "A key is set; leave this empty to keep it."
    : "No key set (local servers need none).";
  byId("embeddings-dimensions").value = String(settings.dimensions);
  byId("embeddings-recall").checked = settings.autoRecall;
  byId("embeddings-fields").hidden = !settings.configured;
}

async function loadEmbeddings() {
  try {
    showEmbeddings(await api("/api/settings/embeddings"));
  } catch (error) {
    showError(byId("embeddings-error"), error);
  }
}

async function saveEmbeddings(saveAnyway) {
  const status = byId("embeddings-status");
  status.textContent = byId("embeddings-on").checked ? "Asking the endpoint…" : "";
  showError(byId("embeddings-error"));
  byId("embeddings-save-anyway").hidden = true;
  const dimensions = byId("embeddings-dimensions").value.trim();
  const key = byId("embeddings-key").value;
  const body = byId("embeddings-on").checked
    ? {
        baseUrl: byId("embeddings-base-url").value.trim(),
        model: byId("embeddings-model").value.trim(),
        dimensions: dimensions === "" ? "" : Number(dimensions),
        autoRecall: byId("embeddings-recall").checked,
        saveAnyway,
        ...(key ? { apiKey: key } : {}),
      }
    : { off: true };
  try {
    const saved = await api("/api/settings/embeddings", { method: "PUT", body });
    await loadEmbeddings();
    status.textContent = saved.message;
    byId("embeddings-restart").hidden = false;
  } catch (error) {
    status.textContent = "";
    showError(byId("embeddings-error"), error);
    byId("embeddings-save-anyway").hidden = error.body?.check === undefined;
  }
}

byId("embeddings-on").addEventListener("change", () => {
  byId("embeddings-fields").hidden = !byId("embeddings-on").checked;
});
byId("embeddings-form").addEventListener("submit", (event) => {
  event.preventDefault();
  void busy(byId("embeddings-save"), () => saveEmbeddings(false));
});
byId("embeddings-save-anyway").addEventListener("click", () => {
  void busy(byId("embeddings-save-anyway"), () => saveEmbeddings(true));
});
byId("embeddings-restart").addEventListener("click", () => {
  const status = byId("embeddings-status");
  status.textContent = "Restarting the assistant…";
  void busy(byId("embeddings-restart"), async () => {
    try {
      await restartAssistant();
      status.textContent = "Restarted: the settings above are in use.";
      byId("embeddings-restart").hidden = true;
    } catch (error) {
      status.textContent = "";
      showError(byId("embeddings-error"), error);
    }
  });
});

await Promise.all([load(), showBackup(), loadEmbeddings()]);
