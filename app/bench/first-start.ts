/**
 * Section "firststart" of `npm run bench`: `npm start` on an empty embedded database, against a
 * later start on the database it made. Each start is timed from spawn to the first authenticated
 * 200 and its app process's memory read once it has been idle (and its peak, VmHWM).
 *
 * Two kinds of first start: with the prepared database already kept (as `npm install` leaves it:
 * scripts/prepare.mjs), and without one (PGLITE_TEMPLATE_DIR pointed at an empty directory, as
 * after `npm install --ignore-scripts`: the prepared database is made first, in a child process).
 * Beside them, what `npm install`'s preparation takes (its bundles already made).
 *
 * Every directory the section makes is removed only when it ends. On ext4 without a journal, as
 * on the machines this runs on, a new file skips every inode freed in the last ~30 s (the kernel's
 * `recently_deleted`, one inode-table read each), so removing a round's ~1,000-file database just
 * before the next round copied one made that copy ~10× slower (1.1–1.4 s against 0.1 s): the
 * section measured its own cleanup, which no owner's first start follows.
 */
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { FakeLlmServer } from "@stavrobot/common/test-support";
import { configFor } from "../test/helpers/app.js";
import { runToExit } from "../test/helpers/process.js";
import { median, treeRssMb } from "./measure.js";
import { launchProduct } from "./product.js";
import { environment } from "./setup.js";
import { scaledReference } from "./turns.js";

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);
/** Idle time before memory is read, as the turns section waits. */
const SETTLE_MS = 2_000;

interface StartFigures {
  ms: number;
  /** Of `ms`, what the product logged creating the embedded database (NaN when it made none). */
  createMs: number;
  /** Resident memory of the launcher + app process after SETTLE_MS, MB. */
  idle: number;
  /** Its highest resident memory since it started (VmHWM), MB. */
  peak: number;
}

function peakMb(pid: number): number {
  try {
    return Number(/VmHWM:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))?.[1] ?? NaN) / 1024;
  } catch {
    return NaN;
  }
}

/** The `ms` of the product's "created the embedded database" log line. */
function creationMs(log: string): number {
  const line = log.split("\n").find((text) => text.includes("created the embedded database"));
  return Number(/"ms":(\d+)/.exec(line ?? "")?.[1] ?? NaN);
}

async function measuredStart(env: NodeJS.ProcessEnv): Promise<StartFigures> {
  const product = await launchProduct(env);
  try {
    const createMs = creationMs(product.log());
    await new Promise((resolve) => setTimeout(resolve, SETTLE_MS));
    const pid = product.child.pid as number;
    return { ms: product.startMs, createMs, idle: treeRssMb(pid).own, peak: peakMb(pid) };
  } finally {
    await product.stop();
  }
}

interface Round {
  first: StartFigures;
  later: StartFigures;
  install?: StartFigures;
  /** `npm install`'s preparation (scripts/prepare.mjs) into an empty directory of prepared databases, ms. */
  prepare: number;
}

async function timedPreparation(env: NodeJS.ProcessEnv, templateDir: string): Promise<number> {
  const started = performance.now();
  const { code, output } = await runToExit(
    ["scripts/prepare.mjs"],
    { ...env, PGLITE_TEMPLATE_DIR: templateDir },
    { javascript: true, timeoutMs: 300_000 },
  );
  if (code !== 0 || !output.includes("Prepared embedded database"))
    throw new Error(`npm install's preparation: ${output}`);
  return performance.now() - started;
}

/** Removals put off until the section ends (see the top of this file). */
type Cleanups = (() => Promise<void>)[];

async function round(fake: FakeLlmServer, cleanups: Cleanups): Promise<Round> {
  const env = await environment("pglite", configFor(fake));
  cleanups.push(() => env.cleanup());
  const templates = mkdtempSync(join(tmpdir(), "stavrobot-bench-templates-"));
  cleanups.push(async () => rmSync(templates, { recursive: true, force: true }));
  const fresh = await environment("pglite", configFor(fake));
  cleanups.push(() => fresh.cleanup());
  const first = await measuredStart(env.env);
  const later = await measuredStart(env.env);
  const install = await measuredStart({ ...fresh.env, PGLITE_TEMPLATE_DIR: templates });
  const prepared = mkdtempSync(join(tmpdir(), "stavrobot-bench-prepared-"));
  cleanups.push(async () => rmSync(prepared, { recursive: true, force: true }));
  const prepare = await timedPreparation(env.env, prepared);
  return { first, later, install, prepare };
}

/** `floorTool`: the floor's tool turn in this run (ms), to scale the reference's first start by. */
export async function firstStart(fake: FakeLlmServer, floorTool: number): Promise<string[]> {
  const cleanups: Cleanups = [];
  const rounds: Round[] = [];
  try {
    // A start that bundles (after a source changed) or makes the prepared database is not timed.
    const warm = await environment("pglite", configFor(fake));
    cleanups.push(() => warm.cleanup());
    await (await launchProduct(warm.env)).stop();
    for (let i = 1; i <= ROUNDS; i++) {
      process.stderr.write(`bench: first start, round ${i}/${ROUNDS}\n`);
      rounds.push(await round(fake, cleanups));
    }
  } finally {
    for (const cleanup of cleanups) await cleanup();
  }
  const spread = (all: number[], unit: string) => {
    const values = all.filter(Number.isFinite);
    if (values.length === 0) return "n/a";
    const digits = unit === "s" ? 2 : 0;
    const show = (n: number) => (unit === "s" ? (n / 1000).toFixed(digits) : n.toFixed(digits));
    return `${show(median(values))} ${unit} (${show(Math.min(...values))}–${show(Math.max(...values))})`;
  };
  const figure = (pick: (r: Round) => StartFigures | undefined, key: keyof StartFigures, unit: string) =>
    spread(
      rounds.map((r) => pick(r)?.[key] ?? NaN),
      unit,
    );
  const row = (label: string, pick: (r: Round) => StartFigures | undefined) =>
    `| ${label} | ${figure(pick, "ms", "s")} | ${figure(pick, "createMs", "s").replace("n/a", "—")} | ${figure(pick, "idle", "MB")} | ${figure(pick, "peak", "MB")} |`;
  return [
    `| embedded database, start → first authenticated 200 (median of ${ROUNDS}, lowest–highest) | time | of it, creating the database (as logged) | idle RSS, launcher + app | peak RSS (VmHWM) |`,
    "|---|---|---|---|---|",
    row("first start, empty database (prepared database kept)", (r) => r.first),
    row("later start on that database", (r) => r.later),
    row(
      "first start without a prepared database (`npm install --ignore-scripts`: made first)",
      (r) => r.install,
    ),
    `| \`npm install\`'s preparation (scripts/prepare.mjs, bundles already made): the prepared database | ${spread(
      rounds.map((r) => r.prepare),
      "s",
    )} | | | |`,
    `| the reference's first start on an empty embedded database, scaled by this run's floor (${floorTool.toFixed(1)} ms) | ≈ ${(scaledReference("firstStartMs", floorTool) / 1000).toFixed(2)} s | | | |`,
  ];
}
