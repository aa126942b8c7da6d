/**
 * What a turn is doing while its sender waits: the text as the model writes it, each tool call
 * by name, each retry with its reason. Reported per inbox entry and heard by whoever follows that
 * entry (`POST /chat` asked with `Accept: text/event-stream`); nothing is kept.
 */
export type TurnProgressEvent =
  | { type: "text"; delta: string }
  | { type: "tool"; name: string }
  | { type: "retry"; attempt: number; of: number; reason: string; inSeconds: number }
  /** How far a tool has got, where it says (an MCP server's progress notifications). */
  | { type: "progress"; plugin: string; tool: string; progress: number; total?: number; message?: string };

type Listener = (event: TurnProgressEvent) => void;

export class TurnProgress {
  private readonly listeners = new Map<number, Set<Listener>>();

  /** Hears the entry's progress until the returned function is called. */
  listen(inboxId: number, listener: Listener): () => void {
    const set = this.listeners.get(inboxId) ?? new Set<Listener>();
    set.add(listener);
    this.listeners.set(inboxId, set);
    return () => {
      set.delete(listener);
      if (set.size === 0) this.listeners.delete(inboxId);
    };
  }

  /** Tells whoever follows the entry; a listener's failure is its own. */
  report(inboxId: number, event: TurnProgressEvent): void {
    for (const listener of this.listeners.get(inboxId) ?? []) {
      try {
        listener(event);
      } catch {
        // A listener that cannot write (a closed connection) is removed by its owner.
      }
    }
  }
}
