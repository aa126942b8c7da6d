/**
 * Sections 1 and 2 of `npm run bench`: turns against two floors (a bare agent, and one that keeps
 * the product's conversation), start-up, memory; and the turn of a message sent to an idle queue
 * with and without starting it while its inbox row is written.
 */
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { FakeLlmServer, RecordedRequest } from "@stavrobot/common/test-support";
import { configFor } from "../test/helpers/app.js";
import { repoRoot } from "../test/helpers/process.js";
import {
  median,
  ms,
  percentile,
  postChat,
  ratio,
  scriptTurns,
  timeTurns,
  treeRssMb,
  type ChatTarget,
} from "./measure.js";
import { launchProduct } from "./product.js";
import { DATABASES, environment, type DbKind } from "./setup.js";

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);
const TURNS = Number(process.env.BENCH_TURNS ?? 100);
/**
 * The reference product's figures from the side-by-side run that set this bench's goals, with the
 * floor measured in that run (4.3–4.7 ms): its first /chat after a start, a start on an existing
 * database and a first start on an empty embedded one. Absolute times drift between days: the
 * tables show them scaled by this run's floor.
 */
const REFERENCE = { floorMs: 4.5, firstChatMs: 69, startMs: 775, firstStartMs: 870 };

/** A reference time (ms) as it would have been on a day whose floor tool turn took `floorTool` ms. */
export function scaledReference(key: "firstChatMs" | "startMs" | "firstStartMs", floorTool: number): number {
  return (REFERENCE[key] * floorTool) / REFERENCE.floorMs;
}

interface RoundFigures {
  tool: number;
  echo: number;
  firstChat?: number;
  start?: number;
  rssApp?: number;
  rssAll?: number;
  pssAll?: number;
  /** The size of the last request of the timed tool turns (the history grows turn by turn). */
  toolRequestBytes?: number;
}

/**
 * Watches the requests a round sends: the first one's system prompt and tools (what the
 * conversation floor is given) and the size of the latest one.
 */
class RequestWatch {
  first: { system: string; tools: unknown[] } | undefined;
  lastBytes = NaN;

  observe = (request: RecordedRequest): void => {
    this.lastBytes = Number(request.headers["content-length"]);
    if (this.first) return;
    const body = request.body as { system?: string | { text: string }[]; tools?: unknown[] };
    const system = Array.isArray(body.system)
      ? body.system.map((block) => block.text).join("\n\n")
      : body.system;
    this.first = { system: system ?? "", tools: body.tools ?? [] };
  };
}

/**
 * One round of the floor: the bare one, or (with `conversationFile`) the one that keeps the
 * product's conversation, starting it with the product's own first message.
 */
async function floorRound(fake: FakeLlmServer, conversationFile?: string): Promise<RoundFigures> {
  const child = spawn(process.execPath, ["--conditions=source", "--import", "tsx", "app/bench/floor.ts"], {
    cwd: repoRoot,
    env: {
      ...process.env,
      FLOOR_MODEL_URL: fake.url,
      PORT: "0",
      ...(conversationFile && { FLOOR_CONVERSATION: conversationFile }),
    },
    stdio: ["ignore", "pipe", "inherit"],
  });
  const port = await new Promise<number>((resolve, reject) => {
    child.stdout?.once("data", (chunk: Buffer) => resolve(Number(chunk.toString().trim())));
    child.once("exit", (code) => reject(new Error(`floor exited with ${code}`)));
  });
  try {
    const target: ChatTarget = { url: `http://127.0.0.1:${port}` };
    const watch = new RequestWatch();
    scriptTurns(fake, watch.observe);
    if (conversationFile) await postChat(target, "tool first");
    const tool = percentile(await timeTurns(target, "tool", TURNS), 50);
    const toolRequestBytes = watch.lastBytes;
    const echo = percentile(await timeTurns(target, "echo", TURNS), 50);
    return { tool, echo, toolRequestBytes };
  } finally {
    child.kill("SIGTERM");
  }
}

async function productRound(fake: FakeLlmServer, kind: DbKind, watch: RequestWatch): Promise<RoundFigures> {
  const env = await environment(kind, configFor(fake));
  try {
    scriptTurns(fake, watch.observe);
    // The first start creates the database; the ones measured start on an existing one: one for
    // the first /chat sent as soon as the start is answered, and the turns; one left idle for memory.
    await (await launchProduct(env.env)).stop();
    const idle = await launchProduct(env.env);
    let rss: ReturnType<typeof treeRssMb>;
    try {
      await new Promise((resolve) => setTimeout(resolve, 2_000));
      rss = treeRssMb(idle.child.pid as number);
    } finally {
      await idle.stop();
    }
    const product = await launchProduct(env.env);
    try {
      const target: ChatTarget = { url: product.url, password: product.password };
      const first = performance.now();
      const answer = await postChat(target, "tool first");
      const firstChat = performance.now() - first;
      if (answer.response !== "done") throw new Error(`unexpected first answer: ${answer.response}`);
      // The app is the launcher's child (the launcher runs it in-process): own = launcher + app.
      const tool = percentile(await timeTurns(target, "tool", TURNS), 50);
      const toolRequestBytes = watch.lastBytes;
      const echo = percentile(await timeTurns(target, "echo", TURNS), 50);
      return {
        tool,
        echo,
        toolRequestBytes,
        firstChat,
        start: median([idle.startMs, product.startMs]),
        rssApp: rss.own,
        rssAll: rss.total,
        pssAll: rss.pss,
      };
    } finally {
      await product.stop();
    }
  } finally {
    await env.cleanup();
  }
}

function spread(rounds: RoundFigures[], floors: RoundFigures[], key: "tool" | "echo"): string {
  const ratios = rounds.map((round, i) => round[key] / (floors[i]?.[key] ?? NaN)).filter(Number.isFinite);
  if (ratios.length === 0) return "n/a";
  return `${Math.min(...ratios).toFixed(2)}–${Math.max(...ratios).toFixed(2)}×`;
}

/** The floor's tool turn, median of `rounds` rounds, for a section that measures no floor itself. */
export async function floorToolMs(fake: FakeLlmServer, rounds: number): Promise<number> {
  const figures: number[] = [];
  for (let round = 1; round <= rounds; round++) figures.push((await floorRound(fake)).tool);
  fake.reset();
  return median(figures);
}

/** The turns section's table, and the floor's tool turn it measured (for the sections after it). */
export async function turnsAndStartUp(fake: FakeLlmServer): Promise<{ rows: string[]; floorTool: number }> {
  const floor: RoundFigures[] = [];
  const conversationFloor: RoundFigures[] = [];
  const product: Record<DbKind, RoundFigures[]> = { postgres: [], pglite: [] };
  const dir = mkdtempSync(join(tmpdir(), "stavrobot-bench-floor-"));
  try {
    for (let round = 1; round <= ROUNDS; round++) {
      process.stderr.write(`bench: turns, round ${round}/${ROUNDS}\n`);
      floor.push(await floorRound(fake));
      const watch = new RequestWatch();
      for (const kind of DATABASES) product[kind].push(await productRound(fake, kind, watch));
      const conversationFile = join(dir, "conversation.json");
      writeFileSync(conversationFile, JSON.stringify(watch.first));
      conversationFloor.push(await floorRound(fake, conversationFile));
      fake.reset();
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  const pick = (rounds: RoundFigures[], key: keyof RoundFigures) => median(rounds.map((r) => r[key] ?? NaN));
  const floorTool = pick(floor, "tool");
  const floorEcho = pick(floor, "echo");
  const withConversation = (key: "tool" | "echo") =>
    `| ${ms(pick(conversationFloor, key))} | ${DATABASES.map((k) => `${ms(pick(product[k], key))} | ${ratio(pick(product[k], key), pick(conversationFloor, key))}`).join(" | ")} |`;
  const kb = (bytes: number) => `${(bytes / 1024).toFixed(1)} KB`;
  const header = `| figure (median of ${ROUNDS} rounds, ${TURNS} turns each) | floor | ${DATABASES.map((k) => `${k} | ×floor`).join(" | ")} |`;
  const rows = [
    header,
    `|---|---|${DATABASES.map(() => "---|---").join("|")}|`,
    `| /chat turn with one tool call, p50 | ${ms(floorTool)} | ${DATABASES.map((k) => `${ms(pick(product[k], "tool"))} | ${ratio(pick(product[k], "tool"), floorTool)}`).join(" | ")} |`,
    `| echo turn (no tool), p50 | ${ms(floorEcho)} | ${DATABASES.map((k) => `${ms(pick(product[k], "echo"))} | ${ratio(pick(product[k], "echo"), floorEcho)}`).join(" | ")} |`,
    // Each round's product against the floor measured just before it: how much one round varies.
    `| ×floor per round, tool turn (lowest–highest) | — | ${DATABASES.map((k) => ` | ${spread(product[k], floor, "tool")}`).join(" | ")} |`,
    `| ×floor per round, echo turn (lowest–highest) | — | ${DATABASES.map((k) => ` | ${spread(product[k], floor, "echo")}`).join(" | ")} |`,
    // The same turns against a floor that sends what the product sends: what is left is what the
    // product does besides the model's requests (the database, the queue, authentication).
    `| floor keeping the product's conversation (its prompt, tools, history): tool turn, p50 ${withConversation("tool")}`,
    `| floor keeping the product's conversation: echo turn, p50 ${withConversation("echo")}`,
    `| ×conversation floor per round, tool turn (lowest–highest) | — | ${DATABASES.map((k) => ` | ${spread(product[k], conversationFloor, "tool")}`).join(" | ")} |`,
    `| size of the last tool turn's request (bare floor; conversation floor) | ${kb(pick(floor, "toolRequestBytes"))}; ${kb(pick(conversationFloor, "toolRequestBytes"))} | ${DATABASES.map((k) => `${kb(pick(product[k], "toolRequestBytes"))} | `).join(" | ")} |`,
    `| first /chat (tool) sent as soon as a start is answered | reference ≈ ${ms(scaledReference("firstChatMs", floorTool))} | ${DATABASES.map((k) => `${ms(pick(product[k], "firstChat"))} | ${ratio(pick(product[k], "firstChat"), floorTool)}`).join(" | ")} |`,
    `| start on an existing database → first authenticated 200 | reference ≈ ${ms(scaledReference("startMs", floorTool))} | ${DATABASES.map((k) => `${ms(pick(product[k], "start"))} | `).join(" | ")} |`,
    `| idle RSS, launcher + app process | — | ${DATABASES.map((k) => `${pick(product[k], "rssApp").toFixed(0)} MB | `).join(" | ")} |`,
    `| idle RSS, every process of \`npm start\` (sum) | — | ${DATABASES.map((k) => `${pick(product[k], "rssAll").toFixed(0)} MB | `).join(" | ")} |`,
    `| idle PSS, every process of \`npm start\` (shared pages once) | — | ${DATABASES.map((k) => `${pick(product[k], "pssAll").toFixed(0)} MB | `).join(" | ")} |`,
  ];
  return { rows, floorTool };
}

/** Turns of one start of the product with `[queue] startWhileWriting` set as given. */
async function writingRound(fake: FakeLlmServer, kind: DbKind, whileWriting: boolean): Promise<RoundFigures> {
  const env = await environment(kind, configFor(fake, "anthropic", `startWhileWriting = ${whileWriting}\n`));
  try {
    scriptTurns(fake);
    const product = await launchProduct(env.env);
    try {
      const target: ChatTarget = { url: product.url, password: product.password };
      // Warmed up as every start is; the first turns are not the ones measured.
      await timeTurns(target, "echo", 10);
      const tool = percentile(await timeTurns(target, "tool", TURNS), 50);
      const echo = percentile(await timeTurns(target, "echo", TURNS), 50);
      return { tool, echo };
    } finally {
      await product.stop();
    }
  } finally {
    await env.cleanup();
  }
}

/**
 * A message reaching an idle queue starts its turn while its inbox row is written, unless
 * `[queue] startWhileWriting = false`. Both ways, rounds alternating, on every database: what the
 * overlap saves per turn, to say whether it earns its own path.
 */
export async function startWhileWriting(fake: FakeLlmServer): Promise<string[]> {
  const figures: Record<DbKind, { on: RoundFigures[]; off: RoundFigures[] }> = {
    postgres: { on: [], off: [] },
    pglite: { on: [], off: [] },
  };
  for (let round = 1; round <= ROUNDS; round++) {
    process.stderr.write(`bench: start while writing, round ${round}/${ROUNDS}\n`);
    for (const kind of DATABASES) {
      figures[kind].on.push(await writingRound(fake, kind, true));
      figures[kind].off.push(await writingRound(fake, kind, false));
    }
    fake.reset();
  }
  const pick = (rounds: RoundFigures[], key: "tool" | "echo") => median(rounds.map((r) => r[key]));
  const row = (label: string, key: "tool" | "echo") =>
    `| ${label} | ${DATABASES.map((k) => {
      const on = pick(figures[k].on, key);
      const off = pick(figures[k].off, key);
      return `${ms(on)} | ${ms(off)} | ${ms(off - on)} | ${ratio(on, off)}`;
    }).join(" | ")} |`;
  return [
    `| start while writing (median of ${ROUNDS} rounds, ${TURNS} turns, p50) | ${DATABASES.map((k) => `${k} on | ${k} off | saved | on ÷ off`).join(" | ")} |`,
    `|---|${DATABASES.map(() => "---|---|---|---").join("|")}|`,
    row("echo turn (no tool)", "echo"),
    row("/chat turn with one tool call", "tool"),
  ];
}
