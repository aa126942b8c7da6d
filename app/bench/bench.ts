/**
 * `npm run bench`: the figures quoted in closing notes, measured in one run so they can be
 * compared (absolute times drift between days; ratios measured together do not).
 *
 * 1. Turns: `/chat` with one tool call and without, p50 per round, median of rounds, for a floor
 *    (a bare pi-agent-core HTTP server, no database: `floor.ts`) and for the product as `npm start`
 *    runs it, on a PostgreSQL server and on the embedded PGlite, rounds alternating between them.
 * 2. Start-up and memory: a start on an existing database until an authenticated request is
 *    answered, the first `/chat` after it, idle memory of the app and of all its processes.
 * 3. Bytes sent to the model over `script-20.json` (the workload the reference was measured on),
 *    with the default configuration and with every tool registered, and how much of each request
 *    the previous one makes cacheable (tools, system, leading messages).
 * 4. History at scale: a database holding a year of use (BENCH_SCALE messages, default 1,000,000,
 *    with compactions): start, first turn, request size, db_search time, against an empty one and
 *    one holding only the same recent conversation.
 * 5. The plugin-runner's own figures and what run_plugin_tool adds to a spawn.
 * 6. Start while writing: turns on an idle queue with `[queue] startWhileWriting` on and off.
 * 7. First start: `npm start` on an empty embedded database and a later one, time (and of it, the
 *    copy of the prepared database) and memory, beside the reference's first start scaled by the
 *    floor (measured here when section 1 did not run) (`first-start.ts`; BENCH_ONLY=firststart).
 *
 * Sections 1, 2 and 6 are in `turns.ts`. BENCH_ROUNDS (5), BENCH_TURNS (100), BENCH_SCALE, BENCH_SCALE_ROUNDS (9),
 * BENCH_ONLY (comma list of turns, bytes, scale, plugins, writing, firststart) adjust it; BENCH_CPU_PROF=<dir> makes each started product write a V8 CPU profile; BENCH_DATABASE_URL or TEST_DATABASE_URL names a PostgreSQL server the
 * bench may create databases on (without one, only PGlite is measured).
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { silentLogger } from "@stavrobot/common";
import {
  startFakeAnthropic,
  startFakeTelegram,
  textTurn,
  toolTurn,
  type FakeLlmServer,
} from "@stavrobot/common/test-support";
import { openDatabase } from "../src/db/database.js";
import { createDbSearchTool } from "../src/tools/db-search.js";
import { configFor, startTestApp, type TestEnv } from "../test/helpers/app.js";
import { COMPACT_EVERY, fillHistory } from "./history.js";
import {
  median,
  ms,
  percentile,
  postChat,
  ratio,
  scriptTurns,
  timeTurns,
  type ChatTarget,
} from "./measure.js";
import { benchRunPluginTool } from "./plugin-tool.js";
import { launchProduct } from "./product.js";
import { DATABASES, environment, type DbKind } from "./setup.js";
import { firstStart } from "./first-start.js";
import { floorToolMs, startWhileWriting, turnsAndStartUp } from "./turns.js";

const SCALE = Number(process.env.BENCH_SCALE ?? 1_000_000);
/**
 * Rounds of the history-at-scale section, alternating between its databases: each a start, its
 * first turn and `SCALE_TURNS` tool turns; figures are medians over rounds, so a drift of the
 * machine's speed falls on every database alike instead of on whichever ran last.
 */
const SCALE_ROUNDS = Number(process.env.BENCH_SCALE_ROUNDS ?? 9);
const SCALE_TURNS = 40;
const ONLY = new Set((process.env.BENCH_ONLY ?? "turns,bytes,scale,plugins,writing,firststart").split(","));

// ---------------------------------------------------------------------------------------------
// 3: bytes to the model
// ---------------------------------------------------------------------------------------------

interface RequestBody {
  system?: unknown;
  tools?: unknown[];
  messages?: unknown[];
}

/**
 * Bytes of `current` a provider's prompt cache can serve after `previous`: the cache key is the
 * request's prefix in the provider's order (tools, then system, then messages), not the JSON's
 * byte order, so this compares those parts, each whole, and the leading messages one by one.
 */
function cacheablePrefix(previous: RequestBody, current: RequestBody): number {
  const bytes = (value: unknown) => Buffer.byteLength(JSON.stringify(value ?? null));
  let shared = 0;
  if (JSON.stringify(previous.tools) !== JSON.stringify(current.tools)) return shared;
  shared += bytes(current.tools);
  if (JSON.stringify(previous.system) !== JSON.stringify(current.system)) return shared;
  shared += bytes(current.system);
  const before = previous.messages ?? [];
  const now = current.messages ?? [];
  for (let i = 0; i < Math.min(before.length, now.length); i++) {
    if (JSON.stringify(before[i]) !== JSON.stringify(now[i])) break;
    shared += bytes(now[i]);
  }
  return shared;
}

/** The workload the reference product's bytes were measured on (`script-20.json`, see the README). */
const SCRIPT_20 = JSON.parse(readFileSync(new URL("./script-20.json", import.meta.url), "utf8")) as string[];
/** What the reference sent for `SCRIPT_20` with its default tools, on a fake answering at once. */
const REFERENCE_BYTES = 891_508;

/** Every optional section, so every tool is registered (none is called). */
function everyToolSections(fake: FakeLlmServer, telegramUrl: string): string {
  return [
    `[webSearch]\napiKey = "k"\nmodel = "claude-sonnet-4-5"\nbaseUrl = "${fake.url}"`,
    `[webFetch]\napiKey = "k"\nmodel = "claude-sonnet-4-5"\nbaseUrl = "${fake.url}"`,
    `[tts]\nprovider = "openai"\napiKey = "k"\nmodel = "tts-1"\nbaseUrl = "http://127.0.0.1:1/v1"`,
    `[stt]\nprovider = "openai"\napiKey = "k"\nmodel = "whisper-1"\nbaseUrl = "http://127.0.0.1:1/v1"`,
    `[coder]\nmodel = "sonnet"`,
    `[owner]\nname = "Ada"\ntelegram = 1001\nsignal = "+15550002222"`,
    `[telegram]\nbotToken = "123456:ABC-bench"\napiBaseUrl = "${telegramUrl}"`,
    `[signal]\naccount = "+15550001111"`,
  ].join("\n");
}

interface BytesFigures {
  requests: number;
  total: number;
  systemBytes: number;
  toolBytes: number;
  tools: number;
  cacheable: number;
  cacheRead: number;
}

/**
 * Sends the 20 messages of `SCRIPT_20` to a fresh conversation, as the reference was measured:
 * a message naming `SQL: …` gets that `execute_sql` call and then a short answer, any other a
 * short answer at once. Sizes are the requests' `content-length`.
 */
async function scriptBytes(fake: FakeLlmServer, sections: string): Promise<BytesFigures> {
  fake.reset();
  const env = await environment("pglite", configFor(fake, "anthropic", sections));
  const app = await startTestApp(env);
  try {
    fake.setResponder((request) => {
      const text = request.lastUserText;
      const sql = /SQL: (.+)$/.exec(text);
      if (sql && text.includes("Text: ")) return toolTurn("execute_sql", { query: sql[1] });
      if (text.includes("Text: ")) return textTurn("Noted. I will keep that in mind.");
      return textTurn("Here are the codes you asked for.");
    });
    const target: ChatTarget = { url: `http://127.0.0.1:${app.port}`, password: "test-password-123" };
    for (const message of SCRIPT_20) await postChat(target, message);
    const bodies = fake.requests.map((request) => JSON.stringify(request.body));
    const sizes = fake.requests.map((request, i) =>
      Number(request.headers["content-length"] ?? Buffer.byteLength(bodies[i] ?? "")),
    );
    const parsed = fake.requests.map((request) => request.body as RequestBody);
    let shared = 0;
    for (let i = 1; i < parsed.length; i++)
      shared += cacheablePrefix(parsed[i - 1] as RequestBody, parsed[i] as RequestBody);
    const later = bodies.slice(1).reduce((sum, body) => sum + Buffer.byteLength(body), 0);
    const first = parsed[0];
    const usage = await app.db.query<{ input: number; cache_read: number; cache_write: number }>(
      `SELECT (content->'usage'->>'input')::int AS input, (content->'usage'->>'cacheRead')::int AS cache_read,
              (content->'usage'->>'cacheWrite')::int AS cache_write FROM messages WHERE role = 'assistant'`,
    );
    let tokens = 0;
    let read = 0;
    for (const row of usage.rows) {
      tokens += row.input + row.cache_read + row.cache_write;
      read += row.cache_read;
    }
    return {
      requests: sizes.length,
      total: sizes.reduce((a, b) => a + b, 0),
      systemBytes: Buffer.byteLength(JSON.stringify(first?.system ?? "")),
      toolBytes: Buffer.byteLength(JSON.stringify(first?.tools ?? [])),
      tools: first?.tools?.length ?? 0,
      cacheable: shared / later,
      cacheRead: read / tokens,
    };
  } finally {
    fake.setResponder(undefined);
    await app.close();
    await env.cleanup();
  }
}

async function bytesToTheModel(fake: FakeLlmServer): Promise<string[]> {
  const telegram = await startFakeTelegram();
  try {
    const plain = await scriptBytes(fake, "");
    const every = await scriptBytes(fake, everyToolSections(fake, telegram.url));
    const row = (label: string, value: (f: BytesFigures) => string) =>
      `| ${label} | ${value(plain)} | ${value(every)} |`;
    const percent = (n: number) => `${(100 * n).toFixed(1)} %`;
    return [
      "| bytes sent to the model (`script-20.json`, a fresh conversation) | default configuration | every optional tool registered |",
      "|---|---|---|",
      row("requests", (f) => String(f.requests)),
      row("total bytes", (f) => f.total.toLocaleString("en")),
      row(
        `÷ the reference (${REFERENCE_BYTES.toLocaleString("en")} B, its default tools)`,
        (f) => `${(f.total / REFERENCE_BYTES).toFixed(3)}×`,
      ),
      row("bytes per request (mean)", (f) => Math.round(f.total / f.requests).toLocaleString("en")),
      row(
        "system prompt / tool definitions per request",
        (f) => `${f.systemBytes} B / ${f.toolBytes} B (${f.tools} tools)`,
      ),
      row("share of each request the previous one makes cacheable (tools, system, leading messages)", (f) =>
        percent(f.cacheable),
      ),
      row("input tokens served from the prompt cache (fake's emulation)", (f) => percent(f.cacheRead)),
    ];
  } finally {
    await telegram.close();
  }
}

// ---------------------------------------------------------------------------------------------
// 4: history at scale
// ---------------------------------------------------------------------------------------------

interface ScaleFigures {
  start: number;
  firstTurn: number;
  firstBytes: number;
  turnP50: number;
  search: number;
  fillSeconds: number;
}

interface ScaleDatabase {
  env: TestEnv;
  messages: number;
  fillSeconds: number;
  starts: number[];
  firstTurns: number[];
  /** p50 of each round's steady tool turns. */
  turns: number[];
  firstBytes?: number;
}

/** A database of `messages` stored messages: migrated with a first start, then filled. */
async function prepareScale(fake: FakeLlmServer, kind: DbKind, messages: number): Promise<ScaleDatabase> {
  const env = await environment(kind, configFor(fake));
  const app = await startTestApp(env);
  await app.close();
  const filled = performance.now();
  if (messages > 0) {
    const db = await openDatabase({ env: env.env, dataDir: join(env.dir, "pglite"), logger: silentLogger });
    try {
      await fillHistory(db, { count: messages });
      // As a year-old database would be: vacuumed and analysed (autovacuum would otherwise work
      // through the fresh million rows during the timed turns).
      await db.query("VACUUM ANALYZE");
    } finally {
      await db.close();
    }
  }
  const fillSeconds = (performance.now() - filled) / 1000;
  return { env, messages, fillSeconds, starts: [], firstTurns: [], turns: [] };
}

/**
 * One round on one database: a start, its first turn (what a start leaves to do shows there),
 * then steady tool turns. Rounds alternate between the databases, so drift in the machine's speed
 * falls on all of them alike and the ratios hold between runs.
 */
async function scaleRound(fake: FakeLlmServer, database: ScaleDatabase): Promise<void> {
  let firstBytes: number | undefined;
  scriptTurns(fake, (request) => (firstBytes ??= Number(request.headers["content-length"] ?? 0)));
  const product = await launchProduct(database.env.env);
  try {
    const target: ChatTarget = { url: product.url, password: product.password };
    database.starts.push(product.startMs);
    database.firstTurns.push(await timeFirstTurn(target));
    database.firstBytes ??= firstBytes;
    database.turns.push(percentile(await timeTurns(target, "tool", SCALE_TURNS, 5), 50));
  } finally {
    await product.stop();
  }
}

/** db_search over the big database (the embedded one is open in the product's process: server only). */
async function timeSearch(kind: DbKind, database: ScaleDatabase): Promise<number> {
  if (kind !== "postgres") return NaN;
  const db = await openDatabase({
    env: database.env.env,
    dataDir: join(database.env.dir, "pglite"),
    logger: silentLogger,
  });
  try {
    const tool = createDbSearchTool({ db });
    const times: number[] = [];
    for (const query of ["garden invoice", "passport dentist", "marathon pension", "nothing matches this"]) {
      const t0 = performance.now();
      await tool.execute("bench", { query });
      times.push(performance.now() - t0);
    }
    return median(times);
  } finally {
    await db.close();
  }
}

async function scaleRuns(fake: FakeLlmServer, kind: DbKind, sizes: number[]): Promise<ScaleFigures[]> {
  const databases: ScaleDatabase[] = [];
  try {
    for (const size of sizes) databases.push(await prepareScale(fake, kind, size));
    for (let round = 0; round < SCALE_ROUNDS; round++) {
      // A different database first each round: the first start after a pause is the slowest.
      for (let i = 0; i < databases.length; i++)
        await scaleRound(fake, databases[(round + i) % databases.length] as ScaleDatabase);
    }
    const search = await timeSearch(kind, databases.at(-1) as ScaleDatabase);
    return databases.map((database) => ({
      start: median(database.starts),
      firstTurn: median(database.firstTurns),
      firstBytes: database.firstBytes ?? NaN,
      turnP50: median(database.turns),
      search: database === databases.at(-1) ? search : NaN,
      fillSeconds: database.fillSeconds,
    }));
  } finally {
    for (const database of databases) await database.env.cleanup();
  }
}

async function timeFirstTurn(target: ChatTarget): Promise<number> {
  const start = performance.now();
  await postChat(target, "tool first");
  return performance.now() - start;
}

/**
 * Three databases per kind: an empty one; a small one holding just the conversation the big one
 * sends (the messages since its last compaction, as many as `COMPACT_EVERY`); and the big one.
 * Against the empty database the big one's turn also carries that conversation; against the small
 * one only the stored history differs.
 */
async function historyAtScale(fake: FakeLlmServer): Promise<string[]> {
  const sizes = [0, 2 * COMPACT_EVERY, SCALE];
  const heads = [
    "empty",
    `${sizes[1]?.toLocaleString("en")} messages`,
    `${SCALE.toLocaleString("en")} messages`,
  ];
  const rows = [
    `| history at scale | ${DATABASES.map((k) => `${heads.map((h) => `${k}, ${h}`).join(" | ")} | big ÷ empty | big ÷ small`).join(" | ")} |`,
    `|---|${DATABASES.map(() => "---|---|---|---|---").join("|")}|`,
  ];
  const results: Record<string, ScaleFigures[]> = {};
  for (const kind of DATABASES) {
    process.stderr.write(`bench: history at scale on ${kind}\n`);
    results[kind] = await scaleRuns(fake, kind, sizes);
  }
  const line = (
    label: string,
    value: (f: ScaleFigures) => number,
    format: (n: number) => string,
    compare = true,
  ) =>
    `| ${label} | ${DATABASES.map((k) => {
      const [empty, small, big] = results[k] as [ScaleFigures, ScaleFigures, ScaleFigures];
      const ratios = compare
        ? `${ratio(value(big), value(empty))} | ${ratio(value(big), value(small))}`
        : "— | —";
      return `${format(value(empty))} | ${format(value(small))} | ${format(value(big))} | ${ratios}`;
    }).join(" | ")} |`;
  rows.push(
    line(`start → first authenticated 200 (median of ${SCALE_ROUNDS} starts)`, (f) => f.start, ms),
    line(`first turn after a start (median of ${SCALE_ROUNDS})`, (f) => f.firstTurn, ms),
    line(
      "first request's size",
      (f) => f.firstBytes,
      (n) => `${Math.round(n).toLocaleString("en")} B`,
    ),
    line(
      `turn with one tool call (median of ${SCALE_ROUNDS} rounds' p50 of ${SCALE_TURNS})`,
      (f) => f.turnP50,
      ms,
    ),
    line("db_search (median of 4 queries; server only)", (f) => f.search, ms),
    line(
      "filling the database",
      (f) => f.fillSeconds * 1000,
      (n) => `${(n / 1000).toFixed(0)} s`,
      false,
    ),
  );
  return rows;
}

// ---------------------------------------------------------------------------------------------
// 5: plugin-runner
// ---------------------------------------------------------------------------------------------

async function pluginFigures(): Promise<string[]> {
  const { benchPluginRunner } = (await import("../../plugin-runner/bench/bench.js")) as {
    benchPluginRunner: () => Promise<Record<string, string>>;
  };
  const figures = { ...(await benchPluginRunner()), ...(await benchRunPluginTool()) };
  return ["| plugin-runner | |", "|---|---|", ...Object.entries(figures).map(([k, v]) => `| ${k} | ${v} |`)];
}

// The timed sections use a fake that only reads each request: its prompt-cache emulation costs
// time in proportion to the history sent, which would be counted as the product's (the floor
// sends no history). The bytes section, which reports cache reads, emulates the cache.
const fake = await startFakeAnthropic({ promptCache: false });
const caching = await startFakeAnthropic();
const sections: string[][] = [];
try {
  let floorTool: number | undefined;
  if (ONLY.has("turns")) {
    const turns = await turnsAndStartUp(fake);
    sections.push(turns.rows);
    floorTool = turns.floorTool;
  }
  if (ONLY.has("bytes")) sections.push(await bytesToTheModel(caching));
  if (ONLY.has("scale")) sections.push(await historyAtScale(fake));
  if (ONLY.has("plugins")) sections.push(await pluginFigures());
  if (ONLY.has("writing")) sections.push(await startWhileWriting(fake));
  if (ONLY.has("firststart"))
    sections.push(await firstStart(fake, floorTool ?? (await floorToolMs(fake, 3))));
} finally {
  await fake.close();
  await caching.close();
}
console.log(sections.map((rows) => rows.join("\n")).join("\n\n"));
