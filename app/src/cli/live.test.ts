import { afterEach, describe, expect, it, vi } from "vitest";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { basicAuthHeader, closeServer, listen } from "@stavrobot/common";
import { followAnswers, type Following, type KeptAnswer } from "./live.js";

/** A stand-in for the app's `GET /api/events`, each connection answered by the next script. */
let server: Server | undefined;
let following: Following | undefined;
const requests: IncomingMessage[] = [];

afterEach(async () => {
  following?.close();
  following = undefined;
  requests.length = 0;
  if (server) await closeServer(server, 100);
  server = undefined;
});

type Script = (res: ServerResponse) => void | Promise<void>;

async function serve(scripts: Script[]): Promise<string> {
  server = createServer((req, res) => {
    requests.push(req);
    const script = scripts.shift();
    if (!script) {
      res.writeHead(503).end();
      return;
    }
    void script(res);
  });
  return `http://127.0.0.1:${await listen(server, 0)}`;
}

const stream = (res: ServerResponse) =>
  res.writeHead(200, { "Content-Type": "text/event-stream" }).write("retry: 50\n\n");
const answer = (id: number, cursor?: string) =>
  `event: answer\n${cursor ? `id: ${cursor}\n` : ""}data: ${JSON.stringify({ id, source: "cron", message: `m${id}`, response: `r${id}` })}\n\n`;
const ready = (cursor: string, missed: number) =>
  `event: ready\nid: ${cursor}\ndata: ${JSON.stringify({ missed })}\n\n`;

function follow(baseUrl: string): { following: Following; live: KeptAnswer[] } {
  const live: KeptAnswer[] = [];
  following = followAnswers({ baseUrl, password: "pw", onAnswer: (a) => live.push(a), retryMs: 50 });
  return { following, live };
}

describe("followAnswers (the REPL's side of GET /api/events)", () => {
  it("hands over the first catch-up, then each answer once, reconnecting with the last cursor", async () => {
    const url = await serve([
      (res) => {
        stream(res);
        res.write(": keep-alive\n\n");
        res.write(answer(1) + ready("s.1", 1) + answer(2, "s.2"));
        // The connection is lost.
        res.end();
      },
      (res) => {
        stream(res);
        // The same answer again (a catch-up after an unknown cursor), then a new one.
        res.write(answer(2) + answer(3, "s.3") + ready("s.3", 2) + "event: progress\ndata: {}\n\n");
      },
    ]);
    const { following: f, live } = follow(url);
    expect((await f.caughtUp)?.map((a) => a.id)).toEqual([1]);
    await vi.waitFor(() => expect(live.map((a) => a.id)).toEqual([2, 3]));
    expect(requests.map((req) => req.headers["last-event-id"])).toEqual([undefined, "s.2"]);
    expect(requests[0]?.headers.authorization).toBe(basicAuthHeader("pw"));
  });

  it("settles undefined for an app without the stream, and does not ask again", async () => {
    const url = await serve([(res) => void res.writeHead(404).end()]);
    const { following: f } = follow(url);
    expect(await f.caughtUp).toBeUndefined();
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(requests).toHaveLength(1);
  });

  it("given up on while the first catch-up arrives, still hands its answers over", async () => {
    let finish = () => {};
    const url = await serve([
      async (res) => {
        stream(res);
        res.write(answer(7));
        await new Promise<void>((resolve) => (finish = resolve));
        res.write(ready("s.0", 1));
      },
    ]);
    const { following: f, live } = follow(url);
    await vi.waitFor(() => expect(requests).toHaveLength(1));
    f.giveUp();
    expect(await f.caughtUp).toBeUndefined();
    finish();
    await vi.waitFor(() => expect(live.map((a) => a.id)).toEqual([7]));
  });
});
