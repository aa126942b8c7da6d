import type { AssistantMessage, UserMessage } from "@mariozechner/pi-ai";

/**
 * A turn's tool rounds (model answers that call tools), against the cap `maxToolRounds`. A model
 * that keeps calling tools is stopped before its next call once the cap is reached: the person is
 * told what happened and that they can ask it to go on, and a note in the conversation tells the
 * next turn.
 */
export class ToolRounds {
  private rounds = 0;
  private readonly calls = new Map<string, number>();

  constructor(readonly cap: number) {}

  /** Told of every complete answer of the turn's model. */
  count(message: AssistantMessage): void {
    const names = message.content.flatMap((block) => (block.type === "toolCall" ? [block.name] : []));
    if (names.length === 0) return;
    this.rounds++;
    for (const name of names) this.calls.set(name, (this.calls.get(name) ?? 0) + 1);
  }

  /** Whether the model may not be called again this turn. */
  get reached(): boolean {
    return this.rounds >= this.cap;
  }

  /** What the person is told instead of an answer. */
  reply(): string {
    return (
      `I stopped after ${this.rounds} rounds of tool calls (${this.tools()}) without finishing: ` +
      `that is the most one request may take (maxToolRounds in config.toml). ` +
      `What I did so far is kept. Ask me to continue and I will pick up from there.`
    );
  }

  /** Saved in the conversation, so the next turn knows the request was cut short, and why. */
  note(): UserMessage {
    const text =
      `[The previous request was stopped after ${this.rounds} rounds of tool calls (${this.tools()}) ` +
      `without a final answer: the limit per request (maxToolRounds). The person was told and can ` +
      `ask to continue; if they do, carry on from the results above instead of starting over.]`;
    return { role: "user", content: [{ type: "text", text }], timestamp: Date.now() };
  }

  /** The tools called, most called first: "db_search ×38, execute_sql ×2". */
  private tools(): string {
    return [...this.calls]
      .sort((a, b) => b[1] - a[1])
      .slice(0, 3)
      .map(([name, count]) => `${name} ×${count}`)
      .join(", ");
  }
}
