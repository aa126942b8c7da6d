/**
 * `npm run bench`: the figures quoted in closing notes, measured in one run so they can be
 * compared (absolute times drift between days; ratios measured together do not).
 *
 * 1. Turns: `/chat` with one tool call and without, p50 per round, median of rounds, for a floor
 *    (a bare pi-agent-core HTTP server, no database: `floor.ts`) and for the product as `npm start`
 *    runs it, on a PostgreSQL server and on the embedded PGlite, rounds alternating between them.
 * 2. Start-up and memory: a start on an existing database until an authenticated request is
 *    answered, the first `/chat` after it, idle memory of the app and of all its processes.
 * 3. Bytes sent to the model over `script-20.json` on the team's shared benchmark fake (the
 *    workload and model the reference's 891,508 bytes were measured on), `npm start` with the
 *    default configuration and with every tool registered, and the fake's analyser's simulated
 *    prompt-cache share (`bytes.ts`; STAVROBOT_BENCH_FAKE names the fake, by default
 *    `../shared/bench/fake-anthropic.mjs` from the repository's root: without it, it says so).
 * 4. History at scale: a database holding a year of use (BENCH_SCALE messages, default 1,000,000,
 *    with compactions): start, first turn, request size, db_search time, against an empty one and
 *    one holding only the same recent conversation.
 * 5. The plugin-runner's own figures and what run_plugin_tool adds to a spawn.
 * 6. Start while writing: turns on an idle queue with `[queue] startWhileWriting` on and off.
 * 7. First start: `npm start` on an empty embedded database and a later one, time (and of it, the
 *    copy of the prepared database) and memory, beside the reference's first start scaled by the
 *    floor (measured here when section 1 did not run) (`first-start.ts`; BENCH_ONLY=firststart).
 * 8. Skills: what the approved skills' list adds to a request with 0, 10 and 100 skills
 *    (`skills.ts`; BENCH_ONLY=skills).
 *
 * Sections 1, 2 and 6 are in `turns.ts`. BENCH_ROUNDS (5), BENCH_TURNS (100), BENCH_SCALE, BENCH_SCALE_ROUNDS (9),
 * BENCH_ONLY (comma list of turns, bytes, scale, plugins, writing, firststart, trust, recall, skills) adjust it; BENCH_CPU_PROF=<dir> makes each started product write a V8 CPU profile; STAVROBOT_BENCH_FAKE names the shared fake of section 3; BENCH_DATABASE_URL or TEST_DATABASE_URL names a PostgreSQL server the
 * bench may create databases on (without one, only PGlite is measured).
 */
import { benignRate } from "./trust.js";
import { recallBench } from "./recall.js";
import { skillsListBytes } from "./skills.js";
import { join } from "node:path";
import { silentLogger } from "@stavrobot/common";
import { startFakeAnthropic, type FakeLlmServer } from "@stavrobot/common/test-support";
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
import { bytesToTheModel } from "./bytes.js";
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
const ONLY = new Set(
  (process.env.BENCH_ONLY ?? "turns,bytes,scale,plugins,writing,firststart,trust,recall,skills").split(","),
);

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
// sends no history). The bytes section runs the shared benchmark fake instead.
const fake = await startFakeAnthropic({ promptCache: false });
const sections: string[][] = [];
try {
  let floorTool: number | undefined;
  if (ONLY.has("turns")) {
    const turns = await turnsAndStartUp(fake);
    sections.push(turns.rows);
    floorTool = turns.floorTool;
  }
  if (ONLY.has("bytes")) sections.push(await bytesToTheModel());
  if (ONLY.has("scale")) sections.push(await historyAtScale(fake));
  if (ONLY.has("plugins")) sections.push(await pluginFigures());
  if (ONLY.has("writing")) sections.push(await startWhileWriting(fake));
  if (ONLY.has("firststart"))
    sections.push(await firstStart(fake, floorTool ?? (await floorToolMs(fake, 3))));
  if (ONLY.has("trust")) sections.push(await benignRate());
  if (ONLY.has("recall")) sections.push(await recallBench());
  if (ONLY.has("skills")) sections.push(await skillsListBytes());
} finally {
  await fake.close();
}
console.log(sections.map((rows) => rows.join("\n")).join("\n\n"));
