// The assistant's restart, asked for from a page (a provider saved on the Settings page waits for
// one): the app closes and starts again, config.toml read again. The page waits until it answers
// with nothing left waiting for a restart.
import { api } from "./api.js";

const WAIT_MS = 90_000;
const POLL_MS = 500;

/**
 * Asks for the restart and resolves once the assistant is back with the saved provider in use
 * (the new settings); rejects with what to do when it is not back in time.
 */
export async function restartAssistant() {
  await api("/api/settings/restart", { method: "POST", body: {} });
  const until = Date.now() + WAIT_MS;
  while (Date.now() < until) {
    await new Promise((resolve) => setTimeout(resolve, POLL_MS));
    try {
      const settings = await api("/api/settings/provider");
      if (!settings.restartNeeded) return settings;
    } catch {
      // Closed for the restart, or not listening again yet.
    }
  }
  throw new Error(
    "The assistant did not come back within a minute and a half: its log (where npm start runs) says why.",
  );
}
