import { setBedrockProviderModule, type Api, type Model } from "@mariozechner/pi-ai";
import { AnthropicWire } from "./anthropic/client.js";
import type { JsonPost } from "./one-shot.js";
import { modelStreamVia, type ModelStream } from "./stream.js";

/**
 * The one way out to the model's provider. Turns and compaction stream through `callModels`; the
 * web tools' own Messages calls go through `post`. Both use this client's kept-alive connections
 * where its Messages API client serves the model (pi-ai's provider, with its own connections,
 * serves the others), and the host is connected to once, while the app starts.
 */
export interface ModelClient {
  /** The assistant's own Messages API client (`model/anthropic`). */
  wire: AnthropicWire;
  /** Every model call of a turn: through `wire` where it serves the model and key, through pi-ai elsewhere. */
  callModels: ModelStream;
  /** A JSON POST on `wire`'s connections (the web tools' Messages calls). */
  post: JsonPost;
  /** Whether `wire` serves the configured model with the key known at start. */
  direct: boolean;
  /** Settles once pi-ai's provider module is loaded (at once when `wire` serves the model). */
  providerLoaded: Promise<void>;
  close(): void;
}

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
 * client's code once): a HEAD request to the host's root, with no credentials and no effect, in
 * the pool the turns will use (the wire's, or `fetch`'s for pi-ai). The connection stays open
 * while the host keeps it alive. Never throws.
 */
function preconnect(baseUrl: string, wire: AnthropicWire | undefined): Promise<void> {
  return wire ? wire.preconnect(baseUrl) : preconnectFetch(baseUrl);
}

async function preconnectFetch(baseUrl: string): Promise<void> {
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

/**
 * Opens the model's client and a connection to its host, which the first turn would otherwise
 * load and open. A Messages API model with an API key is served by the assistant's own client,
 * which needs no library of pi-ai's loaded.
 */
export function openModelClient(model: Model<Api>, startKey: string | undefined): ModelClient {
  const wire = new AnthropicWire();
  const direct = AnthropicWire.handles(model, startKey);
  const providerLoaded = direct ? Promise.resolve() : loadProviderModule(model.api);
  void preconnect(model.baseUrl, direct ? wire : undefined);
  return {
    wire,
    callModels: modelStreamVia(wire),
    post: (url, headers, body, options) => wire.postJson(url, headers, body, options),
    direct,
    providerLoaded,
    close: () => wire.close(),
  };
}
