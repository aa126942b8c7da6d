/**
 * Section 3 of `npm run bench`: bytes sent to the model over `script-20.json`, on the workload the
 * reference product's 891,508 bytes were measured on. That figure is comparable only on the same
 * model: the team's shared benchmark fake (`fake-anthropic.mjs`, whose echoing answers go back
 * into the history), run here as its own process, with the product as `npm start` runs it. The
 * fake is found at STAVROBOT_BENCH_FAKE, by default `../shared/bench/fake-anthropic.mjs` from the
 * repository's root (where the team keeps it); without it the section says the figure was not
 * measured rather than measure another workload. `analyse-llm-log.mjs` beside it, when there,
 * gives its simulated prompt-cache share.
 */
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { startFakeTelegram } from "@stavrobot/common/test-support";
import { configFor } from "../test/helpers/app.js";
import { repoRoot } from "../test/helpers/process.js";
import { postChat, type ChatTarget } from "./measure.js";
import { launchProduct } from "./product.js";
import { environment } from "./setup.js";

/** The workload the reference product's bytes were measured on. */
const SCRIPT_20 = JSON.parse(readFileSync(new URL("./script-20.json", import.meta.url), "utf8")) as string[];
/** What the reference sent for `SCRIPT_20` with its default tools (sum of the requests' content-length). */
export const REFERENCE_BYTES = 891_508;
/** The reference's simulated prompt-cache read share on the same run (`analyse-llm-log.mjs`). */
const REFERENCE_CACHE_READ = 0.952;

/** Where the shared benchmark fake is: STAVROBOT_BENCH_FAKE, else beside the repository. */
export function benchFakePath(env: NodeJS.ProcessEnv = process.env): string {
  return resolve(repoRoot, env.STAVROBOT_BENCH_FAKE ?? "../shared/bench/fake-anthropic.mjs");
}

interface LoggedRequest {
  headers: Record<string, string>;
  body: { system?: unknown; tools?: unknown[]; messages?: unknown[] };
}

/** What `analyse-llm-log.mjs` prints for a log. */
interface Analysis {
  requests: number;
  totalBytes: number;
  cacheReadBytes: number;
}

export interface BytesFigures {
  requests: number;
  /** Sum of the requests' content-length, as the reference's figure. */
  total: number;
  systemBytes: number;
  toolBytes: number;
  tools: number;
  /** Simulated prompt-cache reads ÷ all bytes, as `analyse-llm-log.mjs` counts them. */
  cacheRead?: number;
}

/** Starts `node <fake> 0 <log>`; resolves with its URL once it printed its port. */
async function startSharedFake(fake: string, log: string): Promise<{ child: ChildProcess; url: string }> {
  const child = spawn(process.execPath, [fake, "0", log], { stdio: ["ignore", "pipe", "inherit"] });
  const port = await new Promise<number>((resolvePort, reject) => {
    child.stdout?.once("data", (chunk: Buffer) => resolvePort(Number(chunk.toString().trim())));
    child.once("exit", (code) => reject(new Error(`${fake} exited with ${code}`)));
  });
  return { child, url: `http://127.0.0.1:${port}` };
}

function analyse(fake: string, log: string): Analysis | undefined {
  const analyser = join(dirname(fake), "analyse-llm-log.mjs");
  if (!existsSync(analyser)) return undefined;
  const run = spawnSync(process.execPath, [analyser, log], { encoding: "utf8" });
  if (run.status !== 0) throw new Error(`${analyser} failed: ${run.stderr}`);
  return JSON.parse(run.stdout) as Analysis;
}

/**
 * Sends the 20 messages of `SCRIPT_20`, one `POST /chat` each, to a fresh conversation of the
 * product started as `npm start` runs it (config.toml holding only the model and `sections`).
 */
async function scriptBytes(fake: string, sections: (modelUrl: string) => string): Promise<BytesFigures> {
  const dir = mkdtempSync(join(tmpdir(), "stavrobot-bench-bytes-"));
  const log = join(dir, "requests.jsonl");
  const model = await startSharedFake(fake, log);
  try {
    const env = await environment("pglite", configFor(model, "anthropic", sections(model.url)));
    try {
      const product = await launchProduct(env.env);
      try {
        const target: ChatTarget = { url: product.url, password: product.password };
        for (const message of SCRIPT_20) {
          const answer = await postChat(target, message);
          if (answer.status !== 200) throw new Error(`"${message}": ${answer.status} ${answer.response}`);
        }
      } finally {
        await product.stop();
      }
    } finally {
      await env.cleanup();
    }
    const requests = readFileSync(log, "utf8")
      .split("\n")
      .filter(Boolean)
      .map((line) => JSON.parse(line) as LoggedRequest);
    const first = requests[0]?.body;
    const analysis = analyse(fake, log);
    return {
      requests: requests.length,
      total: requests.reduce((sum, request) => sum + Number(request.headers["content-length"]), 0),
      systemBytes: Buffer.byteLength(JSON.stringify(first?.system ?? "")),
      toolBytes: Buffer.byteLength(JSON.stringify(first?.tools ?? [])),
      tools: first?.tools?.length ?? 0,
      ...(analysis && { cacheRead: analysis.cacheReadBytes / analysis.totalBytes }),
    };
  } finally {
    model.child.kill("SIGTERM");
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Every optional section, so every tool is registered (none is called). */
function everyToolSections(telegramUrl: string): (modelUrl: string) => string {
  return (modelUrl) =>
    [
      `[webSearch]\napiKey = "k"\nmodel = "claude-sonnet-4-5"\nbaseUrl = "${modelUrl}"`,
      `[webFetch]\napiKey = "k"\nmodel = "claude-sonnet-4-5"\nbaseUrl = "${modelUrl}"`,
      `[tts]\nprovider = "openai"\napiKey = "k"\nmodel = "tts-1"\nbaseUrl = "http://127.0.0.1:1/v1"`,
      `[stt]\nprovider = "openai"\napiKey = "k"\nmodel = "whisper-1"\nbaseUrl = "http://127.0.0.1:1/v1"`,
      `[coder]\nmodel = "sonnet"`,
      `[owner]\nname = "Ada"\ntelegram = 1001\nsignal = "+15550002222"`,
      `[telegram]\nbotToken = "123456:ABC-bench"\napiBaseUrl = "${telegramUrl}"`,
      `[signal]\naccount = "+15550001111"`,
    ].join("\n");
}

/** The section's table, or the one line saying why the figure was not measured. */
export async function bytesToTheModel(env: NodeJS.ProcessEnv = process.env): Promise<string[]> {
  const fake = benchFakePath(env);
  if (!existsSync(fake)) {
    return [
      `bytes to the model: NOT MEASURED: the shared benchmark fake is not at ${fake} (set ` +
        "STAVROBOT_BENCH_FAKE to its fake-anthropic.mjs); the ratio to the reference's " +
        `${REFERENCE_BYTES.toLocaleString("en")} bytes holds only on that fake's workload.`,
    ];
  }
  process.stderr.write("bench: bytes to the model\n");
  const telegram = await startFakeTelegram();
  try {
    const plain = await scriptBytes(fake, () => "");
    const every = await scriptBytes(fake, everyToolSections(telegram.url));
    const row = (label: string, value: (f: BytesFigures) => string) =>
      `| ${label} | ${value(plain)} | ${value(every)} |`;
    const percent = (n: number | undefined) => (n === undefined ? "n/a" : `${(100 * n).toFixed(1)} %`);
    return [
      "| bytes sent to the model (`script-20.json` on the shared fake, a fresh conversation, `npm start`) | default configuration | every optional tool registered |",
      "|---|---|---|",
      row("requests", (f) => String(f.requests)),
      row("total bytes (sum of content-length)", (f) => f.total.toLocaleString("en")),
      row(
        `÷ the reference (${REFERENCE_BYTES.toLocaleString("en")} B, its default tools)`,
        (f) => `${(f.total / REFERENCE_BYTES).toFixed(3)}×`,
      ),
      row("bytes per request (mean)", (f) => Math.round(f.total / f.requests).toLocaleString("en")),
      row(
        "system prompt / tool definitions of the first request",
        (f) =>
          `${f.systemBytes.toLocaleString("en")} B / ${f.toolBytes.toLocaleString("en")} B (${f.tools} tools)`,
      ),
      row(
        `simulated prompt-cache reads (\`analyse-llm-log.mjs\`; the reference: ${percent(REFERENCE_CACHE_READ)})`,
        (f) => percent(f.cacheRead),
      ),
    ];
  } finally {
    await telegram.close();
  }
}
