import type { Client } from "@modelcontextprotocol/sdk/client/index.js";

/** At most this many resources are subscribed to per connection. */
const MAX_SUBSCRIBED = 100;

/**
 * A server's resources the model read, followed where the server offers `resources/subscribe`:
 * after a read the client subscribes to its URI, and `notifications/resources/updated` marks it
 * until it is read again, so `resources/list` can say which changed. Subscriptions live as long as
 * the connection: a new one starts with none.
 */
export class ResourceWatch {
  private subscribed = new Set<string>();
  private updated = new Set<string>();
  private client: Client | undefined;

  /** A new connection: what was subscribed on the last one is gone. */
  connected(client: Client, canSubscribe: boolean): void {
    this.client = canSubscribe ? client : undefined;
    this.subscribed = new Set();
    this.updated = new Set();
  }

  /** The server said `uri` changed. */
  changed(uri: string): void {
    if (this.subscribed.has(uri)) this.updated.add(uri);
  }

  /** ` (updated since it was read)` for a resource that changed since the model read it. */
  mark(uri: string): string {
    return this.updated.has(uri) ? " (updated since it was read)" : "";
  }

  /** The model read `uri`: no longer changed, and followed from now on (best effort). */
  async read(uri: string, timeoutMs: number): Promise<void> {
    this.updated.delete(uri);
    const client = this.client;
    if (!client || this.subscribed.has(uri) || this.subscribed.size >= MAX_SUBSCRIBED) return;
    this.subscribed.add(uri);
    await client.subscribeResource({ uri }, { timeout: timeoutMs }).catch(() => this.subscribed.delete(uri));
  }
}
