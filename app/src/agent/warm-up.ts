/**
 * Work a first turn would otherwise pay for, done while the app starts: loading the provider's
 * client library (pi-ai imports it on the first model call).
 */
const PROVIDER_MODULES: Record<string, string> = {
  "anthropic-messages": "@mariozechner/pi-ai/anthropic",
  "openai-completions": "@mariozechner/pi-ai/openai-completions",
  "openai-responses": "@mariozechner/pi-ai/openai-responses",
  "azure-openai-responses": "@mariozechner/pi-ai/azure-openai-responses",
  "openai-codex-responses": "@mariozechner/pi-ai/openai-codex-responses",
  "google-generative-ai": "@mariozechner/pi-ai/google",
  "google-vertex": "@mariozechner/pi-ai/google-vertex",
  "mistral-conversations": "@mariozechner/pi-ai/mistral",
};

/** Imports the client module of the model's API (the same module pi-ai loads; never throws). */
export async function loadProviderModule(api: string): Promise<void> {
  const specifier = PROVIDER_MODULES[api];
  if (specifier) await import(specifier).catch(() => undefined);
}
