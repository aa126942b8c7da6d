/**
 * The system prompt, kept between turns: it is the same text every turn (so the provider's prompt
 * cache keeps hitting) and costs no query or HTTP call until one of its parts changes. Parts are
 * rebuilt when told they changed (a tool that writes memories, a plugin installed) and, for the
 * plugin list, which can change outside the app (the coder, a plugin's own init), after a while.
 */
export interface PromptSources<K> {
  /** Memories and scratchpad titles. */
  knowledge(): Promise<K>;
  /** A short text that changes whenever the knowledge does (its rows' versions), for `recheck`. */
  knowledgeVersion?(): Promise<string>;
  /** The plugin list, as prompt text ("" when there are none), or undefined when it could not be read. */
  plugins(): Promise<string | undefined>;
  /** The whole prompt from its parts. */
  compose(parts: { knowledge: K; plugins: string }): string;
}

export class SystemPromptCache<K> {
  private knowledge: Promise<K> | undefined;
  /** The knowledge's version when it was read, and whether something may have changed it since. */
  private knowledgeRead: { version: Promise<string | undefined>; uncertain: boolean } | undefined;
  private plugins: { text: Promise<string | undefined>; at: number } | undefined;
  private composed: { knowledge: K; plugins: string; prompt: string } | undefined;

  constructor(
    private readonly sources: PromptSources<K>,
    private readonly pluginsMaxAgeMs = 30_000,
    private readonly now: () => number = Date.now,
  ) {}

  async get(): Promise<string> {
    await this.confirmKnowledge();
    if (!this.knowledge) {
      // The version first: a write between the two reads makes the next check read again.
      this.knowledgeRead = { version: this.readKnowledgeVersion(), uncertain: false };
      this.knowledge = this.sources.knowledge();
    }
    if (!this.plugins || this.now() - this.plugins.at > this.pluginsMaxAgeMs) {
      this.plugins = { text: this.sources.plugins(), at: this.now() };
    }
    let knowledge: K;
    let listed: string | undefined;
    try {
      [knowledge, listed] = await Promise.all([this.knowledge, this.plugins.text]);
    } catch (error) {
      // A failed read is not kept: the next turn asks again.
      this.knowledge = undefined;
      this.plugins = undefined;
      throw error;
    }
    // The runner was not reachable (it may still be starting): no list this turn, ask next turn.
    if (listed === undefined) this.plugins = undefined;
    const plugins = listed ?? "";
    const last = this.composed;
    // Read again but the same (a check that found nothing new): the very same prompt, not a copy.
    if (last && last.plugins === plugins && sameKnowledge(last.knowledge, knowledge)) {
      last.knowledge = knowledge;
      return last.prompt;
    }
    const prompt = this.sources.compose({ knowledge, plugins });
    this.composed = { knowledge, plugins, prompt };
    return prompt;
  }

  /**
   * Composes the prompt before the first turn needs it. The plugin list comes from the
   * plugin-runner, which starts beside the app and may answer later than the app does: this waits
   * (every `delayMs`, `attempts` times at most, until `signal` aborts) for `ready` to say it
   * answers, so the first turn neither asks for the list itself nor finds a prompt without it.
   */
  async prime(
    ready: () => Promise<boolean>,
    {
      attempts = 100,
      delayMs = 100,
      signal,
    }: { attempts?: number; delayMs?: number; signal?: AbortSignal } = {},
  ): Promise<boolean> {
    for (let attempt = 1; attempt <= attempts && !signal?.aborted; attempt++) {
      if (await ready()) {
        if (signal?.aborted) break;
        await this.get().catch(() => undefined);
        if (this.plugins) return true;
      }
      await new Promise((resolve) => setTimeout(resolve, delayMs).unref());
    }
    return false;
  }

  invalidate(part: "knowledge" | "plugins"): void {
    if (part === "knowledge") this.knowledge = undefined;
    else this.plugins = undefined;
  }

  /**
   * Something may have changed the knowledge (SQL the model ran): before the next use its version
   * is compared with the one read, and the knowledge is read again only if it differs. Without a
   * version source this is `invalidate`.
   */
  recheck(part: "knowledge"): void {
    if (this.knowledgeRead && this.sources.knowledgeVersion) this.knowledgeRead.uncertain = true;
    else this.invalidate(part);
  }

  private async confirmKnowledge(): Promise<void> {
    const read = this.knowledgeRead;
    if (!read?.uncertain || !this.knowledge) return;
    read.uncertain = false;
    const [before, now] = await Promise.all([read.version, this.readKnowledgeVersion()]);
    if (this.knowledgeRead !== read) return;
    if (before === undefined || now === undefined || before !== now) this.knowledge = undefined;
  }

  private readKnowledgeVersion(): Promise<string | undefined> {
    return this.sources.knowledgeVersion
      ? this.sources.knowledgeVersion().catch(() => undefined)
      : Promise.resolve(undefined);
  }
}

function sameKnowledge<K>(a: K, b: K): boolean {
  return a === b || JSON.stringify(a) === JSON.stringify(b);
}
