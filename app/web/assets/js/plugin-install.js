// Installing a plugin with progress: the install is started as a job (Prefer: respond-async) and
// its state is polled until it is done or failed: cloning, then the init script, then done.
import { api, postJson } from "./lib/api.js";
import { el, fill, showError } from "./lib/dom.js";

const POLL_MS = 400;
const STEPS = [
  ["cloning", "Cloning the repository"],
  ["init", "Setting up (init script)"],
  ["done", "Installed"],
];

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

function showSteps(list, state, failedAt) {
  const reached = STEPS.findIndex(([name]) => name === (failedAt ?? state));
  fill(
    list,
    STEPS.map(([name, label], index) => {
      let step = index < reached ? "done" : index === reached ? "active" : "waiting";
      if (name === "done" && state === "done") step = "done";
      if (failedAt && index === reached) step = "failed";
      return el("li", { "data-step": name, "data-state": step, text: label });
    }),
  );
}

/** Installs from `url`, showing progress in `ui`; resolves with the install's answer, or undefined when it failed. */
export async function watchInstall(url, ui) {
  ui.box.hidden = false;
  ui.output.hidden = true;
  fill(ui.message);
  showError(ui.error);
  showSteps(ui.steps, "cloning");
  let lastState = "cloning";
  try {
    const { jobId } = await postJson("/api/settings/plugins/install", { url }, { Prefer: "respond-async" });
    for (;;) {
      const job = await api(`/api/settings/plugins/jobs/${encodeURIComponent(jobId)}`);
      if (job.output) {
        ui.output.textContent = job.output;
        ui.output.hidden = false;
      }
      if (job.state === "done") {
        showSteps(ui.steps, "done");
        const result = job.result;
        fill(
          ui.message,
          // The summary is written for the owner; `message` is the model's (older runners send only it).
          result.summary ?? result.message,
          result.instructions ? el("pre", { class: "small", text: result.instructions }) : null,
        );
        return result;
      }
      if (job.state === "failed") {
        showSteps(ui.steps, lastState, lastState);
        showError(ui.error, job.error ?? "The install failed.");
        return undefined;
      }
      lastState = job.state;
      showSteps(ui.steps, job.state);
      await sleep(POLL_MS);
    }
  } catch (error) {
    showSteps(ui.steps, lastState, lastState);
    showError(ui.error, error);
    return undefined;
  }
}
