/**
 * The system prompt, kept between turns: it is the same text every turn (so the provider's prompt
 * cache keeps hitting) and costs no query or HTTP call until one of its parts changes. Parts are
 * rebuilt when told they changed (a tool that writes memories, a plugin installed) and, for the
 * plugin list, which can change outside the app (the coder, a plugin's own init), after a while.
 */
export interface PromptSources<K> {
  /** Memories and scratchpad titles. */
  knowledge(): Promise<K>;
  /** The plugin list, as prompt text ("" when there are none), or undefined when it could not be read. */
  plugins(): Promise<string | undefined>;
  /** The whole prompt from its parts. */
  compose(parts: { knowledge: K; plugins: string }): string;
}

export class SystemPromptCache<K> {
  private knowledge: Promise<K> | undefined;
  private plugins: { text: Promise<string | undefined>; at: number } | undefined;
  private composed: { knowledge: K; plugins: string; prompt: string } | undefined;

  constructor(
    private readonly sources: PromptSources<K>,
    private readonly pluginsMaxAgeMs = 30_000,
    private readonly now: () => number = Date.now,
  ) {}

  async get(): Promise<string> {
    this.knowledge ??= this.sources.knowledge();
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
    if (last && last.knowledge === knowledge && last.plugins === plugins) return last.prompt;
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
}
