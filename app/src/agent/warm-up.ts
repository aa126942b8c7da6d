import { setBedrockProviderModule } from "@mariozechner/pi-ai";

/**
 * Work a first turn would otherwise pay for, done while the app starts: loading the provider's
 * client library (pi-ai imports it on the first model call). Each import is written out, not
 * built from a name, so a bundler maps it to the same module pi-ai loads.
 */
const PROVIDER_MODULES: Record<string, () => Promise<unknown>> = {
  "anthropic-messages": () => import("@mariozechner/pi-ai/anthropic"),
  "openai-completions": () => import("@mariozechner/pi-ai/openai-completions"),
  "openai-responses": () => import("@mariozechner/pi-ai/openai-responses"),
  "azure-openai-responses": () => import("@mariozechner/pi-ai/azure-openai-responses"),
  "openai-codex-responses": () => import("@mariozechner/pi-ai/openai-codex-responses"),
  "google-generative-ai": () => import("@mariozechner/pi-ai/google"),
  "google-vertex": () => import("@mariozechner/pi-ai/google-vertex"),
  "mistral-conversations": () => import("@mariozechner/pi-ai/mistral"),
  // pi-ai loads Bedrock's module by a path computed at run time, which a bundle cannot follow;
  // handing it the module is pi-ai's own way around that.
  "bedrock-converse-stream": async () =>
    setBedrockProviderModule((await import("@mariozechner/pi-ai/bedrock-provider")).bedrockProviderModule),
};

/** Imports the client module of the model's API (the same module pi-ai loads; never throws). */
export async function loadProviderModule(api: string): Promise<void> {
  await PROVIDER_MODULES[api]?.().catch(() => undefined);
}

/**
 * Opens a connection to the model's host before the first turn needs one (and runs the HTTP
 * client's code once): a HEAD request to the host's root, with no credentials and no effect.
 * The connection stays open while the host keeps it alive. Never throws.
 */
export async function preconnect(baseUrl: string): Promise<void> {
  try {
    const answer = await fetch(new URL(baseUrl).origin, {
      method: "HEAD",
      signal: AbortSignal.timeout(5_000),
    });
    await answer.arrayBuffer();
  } catch {
    // Offline, a refused connection, a bad URL: the first turn finds out for itself.
  }
}
