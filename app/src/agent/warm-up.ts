import type { Api, Model } from "@mariozechner/pi-ai";
import { chatRequestSchema, type Logger } from "@stavrobot/common";
import type { Database } from "../db/database.js";
import type { InboxStore } from "../db/inbox.js";
import type { StartupPhases } from "../boot/startup-phases.js";
import type { ModelClient } from "../model/client.js";
import type { ConversationStore } from "./conversation.js";
import type { SystemPromptCache } from "./prompt-cache.js";
import { rehearseTurnCode, rehearseTurnWrites } from "./rehearsal.js";
import type { TokenBudget } from "./tokens.js";
import { truncateToBudget } from "./truncate.js";

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

/** Database connections opened before listening (see warmUpFirstTurn). */
const FIRST_TURN_CONNECTIONS = 4;

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
    // As many connections as a first turn uses at once (its inbox row written while the system
    // prompt's parts are read), so it opens none; on PGlite these are four trivial statements.
    ...Array.from({ length: FIRST_TURN_CONNECTIONS }, () => w.db.query("SELECT 1")),
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
