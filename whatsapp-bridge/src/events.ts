import type { ServerResponse } from "node:http";
import type { Router, WhatsAppLinkStatus } from "@stavrobot/common";

/**
 * `GET /events` (behind the secret): the connection's state as server-sent events, one `state`
 * event at once and one at every change (with the QR code or pairing code while linking), and a
 * comment every 30 s so proxies keep the stream open. `close()` ends every stream (on stop).
 */
export class StateEvents {
  private readonly streams = new Set<ServerResponse>();
  private readonly keepAlive: NodeJS.Timeout;

  constructor(private readonly current: () => WhatsAppLinkStatus) {
    this.keepAlive = setInterval(() => {
      for (const res of this.streams) res.write(": keep-alive\n\n");
    }, 30_000);
    this.keepAlive.unref();
  }

  publish(status: WhatsAppLinkStatus): void {
    const frame = `event: state\ndata: ${JSON.stringify(status)}\n\n`;
    for (const res of this.streams) res.write(frame);
  }

  addRoute(router: Router): Router {
    return router.get("/events", async ({ req, res }) => {
      res.writeHead(200, {
        "Content-Type": "text/event-stream",
        "Cache-Control": "no-store",
        Connection: "keep-alive",
      });
      res.write(`event: state\ndata: ${JSON.stringify(this.current())}\n\n`);
      this.streams.add(res);
      await new Promise<void>((resolve) => {
        const done = () => {
          this.streams.delete(res);
          resolve();
        };
        req.on("close", done);
        res.on("close", done);
      });
      return undefined;
    });
  }

  close(): void {
    clearInterval(this.keepAlive);
    for (const res of this.streams) res.end();
    this.streams.clear();
  }
}
