/**
 * The internet services of the compose end-to-end test, run as one container on the compose
 * network (bundled by compose-e2e.sh): the project's fake Anthropic API (the model) on port 8080,
 * its fake OpenAI audio API (speech to text) on 8081, and on 8090 a control API for the checks,
 * published on the host's loopback only.
 *
 * The model's answers are planned by the checks: `POST /plan {marker, turns}` gives the turns to
 * play for the turn whose user message contains `marker`, in order, one per model request of that
 * turn (counted from the conversation itself, so a turn resumed after a crash gets the same
 * answers). A turn without a plan is answered `ok: <its message>`; once its plan is used up, a
 * tool result is answered `result: <the tool's output>`. A message containing `[[hold]]` is
 * answered only once `POST /release {marker}` named a marker it contains. `GET /requests` lists
 * what the model was asked, `GET /transcriptions` what the speech service was sent.
 *
 * On 8082 it serves the files the checks put in `/e2e/files` (plugin packages a tool installs by
 * URL, as from a download site).
 */
import { createServer, connect, type Server } from "node:net";
import { createServer as createHttpServer, type IncomingMessage, type ServerResponse } from "node:http";
import {
  startFakeAnthropic,
  serveDirectory,
  startFakeOpenAiAudio,
  textTurn,
  type FakeTurn,
  type RecordedRequest,
} from "@stavrobot/common/test-support";

interface Plan {
  marker: string;
  turns: FakeTurn[];
}

interface Message {
  role: string;
  content: unknown;
}

const plans: Plan[] = [];
const released = new Set<string>();

async function heldUntilReleased(message: string): Promise<void> {
  while (![...released].some((marker) => message.includes(marker)))
    await new Promise((resolve) => setTimeout(resolve, 200));
}

/** Text of a message's blocks (tool results included). */
function textOf(content: unknown): string {
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return "";
  return content
    .map((block: { type?: string; text?: unknown; content?: unknown }) =>
      block.type === "text" && typeof block.text === "string"
        ? block.text
        : block.type === "tool_result"
          ? textOf(block.content)
          : "",
    )
    .join("\n");
}

function isToolResult(message: Message | undefined): boolean {
  return (
    Array.isArray(message?.content) &&
    (message.content as { type?: string }[]).some((block) => block.type === "tool_result")
  );
}

async function respond(request: RecordedRequest): Promise<FakeTurn> {
  const messages = (request.body?.messages ?? []) as Message[];
  // The turn's own message: the last user message that is not a tool result.
  let start = messages.length - 1;
  while (start >= 0 && (messages[start]?.role !== "user" || isToolResult(messages[start]))) start--;
  const message = textOf(messages[start]?.content);
  const round = messages.slice(start + 1).filter((entry) => entry.role === "assistant").length;
  const plan = plans.find((candidate) => message.includes(candidate.marker));
  const planned = plan?.turns[round];
  if (planned) return planned;
  if (message.includes("[[hold]]")) await heldUntilReleased(message);
  const last = messages.at(-1);
  if (isToolResult(last)) return textTurn(`result: ${textOf(last?.content)}`);
  return textTurn(`ok: ${message.slice(0, 2000)}`);
}

async function readBody(req: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return chunks.length ? JSON.parse(Buffer.concat(chunks).toString("utf8")) : {};
}

function send(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { "content-type": "application/json" });
  res.end(JSON.stringify(body));
}

/** Listens on every address at `port`, passing connections to the fake on loopback. */
function forward(port: number, target: string): Server {
  const { port: targetPort } = new URL(target);
  const server = createServer((socket) => {
    const upstream = connect(Number(targetPort), "127.0.0.1");
    socket.pipe(upstream).pipe(socket);
    const close = () => {
      socket.destroy();
      upstream.destroy();
    };
    socket.on("error", close);
    upstream.on("error", close);
  });
  server.listen(port, "0.0.0.0");
  return server;
}

async function main(): Promise<void> {
  const model = await startFakeAnthropic();
  model.setResponder(respond);
  const audio = await startFakeOpenAiAudio();
  forward(8080, model.url);
  forward(8081, audio.url);
  await serveDirectory("/e2e/files", { host: "0.0.0.0", port: 8082 });

  const control = createHttpServer((req, res) => {
    void (async () => {
      try {
        const path = new URL(req.url ?? "/", "http://localhost").pathname;
        if (req.method === "GET" && path === "/requests") {
          return send(
            res,
            200,
            model.requests.map((request) => ({
              lastUserText: request.lastUserText,
              messages: ((request.body?.messages ?? []) as Message[]).map((message) => ({
                role: message.role,
                text: textOf(message.content),
              })),
            })),
          );
        }
        if (req.method === "GET" && path === "/transcriptions") {
          return send(
            res,
            200,
            audio.transcriptions.map((call) => ({
              fileName: call.fileName,
              mimeType: call.mimeType,
              bytes: call.data.length,
              head: call.data.subarray(0, 4).toString("hex"),
            })),
          );
        }
        if (req.method === "POST" && path === "/plan") {
          const plan = (await readBody(req)) as Plan;
          plans.push(plan);
          return send(res, 200, { ok: true });
        }
        if (req.method === "POST" && path === "/release") {
          released.add(((await readBody(req)) as { marker: string }).marker);
          return send(res, 200, { ok: true });
        }
        send(res, 404, { error: `no route for ${req.method} ${path}` });
      } catch (error) {
        send(res, 500, { error: String(error) });
      }
    })();
  });
  control.listen(8090, "0.0.0.0");
  console.log("fake services: model on 8080, speech to text on 8081, files on 8082, control on 8090");
  const stop = () => process.exit(0);
  process.on("SIGTERM", stop);
  process.on("SIGINT", stop);
}

void main();
