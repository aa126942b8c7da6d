import { setBedrockProviderModule, type Api, type Model } from "@mariozechner/pi-ai";
import { chatRequestSchema, type Logger } from "@stavrobot/common";
import type { Database } from "../db/database.js";
import type { InboxStore } from "../db/inbox.js";
import type { StartupPhases } from "../startup-phases.js";
import { AnthropicWire } from "./anthropic/client.js";
import type { ConversationStore } from "./conversation.js";
import { modelStreamVia, type ModelStream } from "./model-stream.js";
import type { SystemPromptCache } from "./prompt-cache.js";
import { rehearseTurnCode, rehearseTurnWrites } from "./rehearsal.js";
import type { TokenBudget } from "./tokens.js";
import { truncateToBudget } from "./truncate.js";

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

/** The model calls' client, set up while the app starts. */
export interface ModelClient {
  /** The assistant's own Messages API client (`agent/anthropic`). */
  wire: AnthropicWire;
  /** Every model call: through `wire` where it serves the model and key, through pi-ai elsewhere. */
  callModels: ModelStream;
  /** Whether `wire` serves the configured model with the key known at start. */
  direct: boolean;
  /** Settles once pi-ai's provider module is loaded (at once when `wire` serves the model). */
  providerLoaded: Promise<void>;
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
  void (direct ? wire.preconnect(model.baseUrl) : preconnect(model.baseUrl));
  return { wire, callModels: modelStreamVia(wire), direct, providerLoaded };
}

export interface FirstTurnWarmUp {
  db: Database;
  timezone: string;
  model: Model<Api>;
  client: ModelClient;
  conversation: ConversationStore;
  inbox: InboxStore;
  budget: TokenBudget;
  systemPrompt: { prime: SystemPromptCache<unknown>["prime"] };
  /** Whether the plugin-runner answers (the system prompt lists its plugins). */
  runnerAnswers: () => Promise<boolean>;
  /** Stops composing the system prompt in the background (the app is closing). */
  signal: AbortSignal;
  phases: StartupPhases;
  logger: Logger;
}

/**
 * What the first turn would otherwise wait for, done before the app listens: the conversation
 * loaded, the provider's library and the database connections ready, the inbox's next id drawn,
 * the `/chat` body's schema compiled, and a turn rehearsed (`rehearsal.ts`, which never fails the
 * start). The system prompt is composed in the background once the plugin-runner answers.
 */
export async function warmUpFirstTurn(w: FirstTurnWarmUp): Promise<void> {
  void w.systemPrompt.prime(w.runnerAnswers, { signal: w.signal });
  await Promise.all([
    w.conversation.current(),
    w.client.providerLoaded,
    w.db.relaxed.query("SELECT 1"),
    w.inbox.drawAhead(),
  ]);
  w.phases.end("warm-up");
  // zod compiles an object schema on its first use (~3 ms): the first /chat body finds it done.
  chatRequestSchema.safeParse({ message: "rehearsal" });
  await rehearseTurnWrites(w.db, w.timezone);
  if (w.client.direct) {
    const complete = await rehearseTurnCode({
      wire: w.client.wire,
      model: w.model,
      history: (await w.conversation.current()).messages.map((row) => row.message),
      transformContext: async (context) => truncateToBudget(context, w.budget.truncateAbove),
    });
    if (!complete) w.logger.debug("the rehearsal of a turn's code did not run to its end");
  }
  w.phases.end("rehearsal");
}
