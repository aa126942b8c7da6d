import type { LongLivedProcess } from "@stavrobot/common";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import { JSONRPCMessageSchema, type JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js";

/**
 * MCP's stdio transport (one JSON-RPC message per line each way) over a process the sandbox
 * started. The SDK's own stdio transport spawns its child itself, with no user, mounts or network
 * of ours; this one speaks through the kept process the plugin sandbox made. Lines that are not
 * JSON-RPC are reported as errors and skipped (a server that logs to stdout), never fatal.
 */
export class ProcessTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: (message: JSONRPCMessage) => void;
  private closed = false;
  /** Messages heard and not yet handed on (one per turn of the event loop, in order). */
  private readonly heard: JSONRPCMessage[] = [];

  constructor(private readonly process: LongLivedProcess) {
    process.onLine((line) => this.hear(line));
    void process.exited.then(() => this.close());
  }

  async start(): Promise<void> {
    if (!this.process.running) throw new Error("the server's process is not running");
  }

  async send(message: JSONRPCMessage): Promise<void> {
    if (!this.process.write(JSON.stringify(message) + "\n"))
      throw new Error("the server's process is not running");
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.process.kill();
    this.onclose?.();
  }

  private hear(line: string): void {
    if (line.trim() === "") return;
    let parsed: JSONRPCMessage;
    try {
      parsed = JSONRPCMessageSchema.parse(JSON.parse(line));
    } catch {
      this.onerror?.(
        new Error(`the server wrote a line that is not a JSON-RPC message (${line.length} characters)`),
      );
      return;
    }
    // One message per turn of the event loop: the SDK handles a notification a microtask later,
    // and a response at once (dropping the request's progress handler), so a server's last
    // progress step, sent just before its result on the same read, would otherwise be lost.
    this.heard.push(parsed);
    if (this.heard.length === 1) setImmediate(() => this.handOn());
  }

  private handOn(): void {
    const message = this.heard.shift();
    if (message) this.onmessage?.(message);
    if (this.heard.length > 0) setImmediate(() => this.handOn());
  }
}
