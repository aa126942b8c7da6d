/**
 * `npm run doctor`: what works and what does not, with what to do, and exit code 0 (nothing
 * failing) or 1. The config is checked here; when the app runs on this data directory, it is asked
 * for everything else (`GET /health?deep=1` with the owner's password: the database, each sibling
 * and its sandbox, the provider and its key, each configured channel, disk space, backups); when it
 * does not run, what can be checked without it is (the provider and its key, asked with config.toml's
 * settings as a start would, disk space, backups), and its absence is the first failure.
 */
import { basicAuthHeader, errorMessage, silentLogger } from "@stavrobot/common";
import { backupCheck, diskCheck, summarise, type Check, type Checked } from "../doctor/checks.js";
import { embeddingsCheck } from "../doctor/embeddings.js";
import { createEmbeddingsClient } from "../embeddings/client.js";
import { providerCheck } from "../doctor/provider.js";
import { createApiKeySource, resolveModel } from "../model/model.js";
import { loadConfig, type AppConfig } from "./config.js";
import { parseAppEnv } from "./env.js";
import { runningInstance } from "./instance-lock.js";
import { resolvePaths } from "./paths.js";

const MARKS = { ok: "ok  ", warn: "warn", fail: "FAIL" } as const;

async function main(): Promise<number> {
  const settings = parseAppEnv(process.env);
  const paths = resolvePaths(settings);
  let config: Readonly<AppConfig> | undefined;
  const configCheck: Check = (() => {
    try {
      config = loadConfig(paths.configPath);
      return { name: "config", state: "ok", detail: paths.configPath } satisfies Check;
    } catch (error) {
      const missing = (error as { message?: string }).message?.includes("ENOENT") === true;
      return {
        name: "config",
        state: "fail",
        detail: errorMessage(error),
        fix: missing
          ? "npm start writes one with a generated password on its first run."
          : `Correct it in ${paths.configPath}; config.example.toml documents every key.`,
      } satisfies Check;
    }
  })();
  const password = config?.password;
  const running = runningInstance(paths.dataDir);
  let checked: Checked;
  if (running?.port !== undefined && password !== undefined) {
    checked = await askRunningApp(running.port, password);
  } else {
    const absent: Check = running
      ? {
          name: "app",
          state: "fail",
          detail: `the app (pid ${running.pid}) is ${password === undefined ? "running, but the config cannot be read to ask it" : "still starting"}`,
          fix:
            password === undefined
              ? "Fix config.toml and restart it."
              : "Run npm run doctor again in a moment.",
        }
      : {
          name: "app",
          state: "fail",
          detail: `not running on ${paths.dataDir}`,
          fix: "Start it with npm start (or docker compose up).",
        };
    checked = summarise([
      absent,
      // Stopped, the app cannot be asked; the provider can, with what the next start would use.
      ...(config && !running ? [await stoppedProviderCheck(config, paths.configPath)] : []),
      ...(config
        ? [
            await embeddingsCheck(
              config.embeddings ? { client: createEmbeddingsClient(config.embeddings) } : undefined,
            ),
          ]
        : []),
      await diskCheck(paths.dataDir),
      await backupCheck(paths.backupDir, settings.BACKUP_INTERVAL_SECONDS),
    ]);
  }
  const all = summarise([configCheck, ...checked.checks]);
  print(all.checks);
  console.log(
    all.status === "fail"
      ? "\nSomething needs fixing: see FAIL above."
      : all.status === "warn"
        ? "\nEverything works; see warn above."
        : "\nEverything works.",
  );
  return all.status === "fail" ? 1 : 0;
}

/** The provider check the running app makes, with its model and key taken from config.toml. */
async function stoppedProviderCheck(config: Readonly<AppConfig>, configPath: string): Promise<Check> {
  let model;
  try {
    model = resolveModel(config).model;
  } catch (error) {
    return {
      name: "provider",
      state: "fail",
      detail: errorMessage(error),
      fix: `Correct provider and model in ${configPath}; config.example.toml names the providers.`,
    };
  }
  const { getApiKey, oauth } = createApiKeySource(config, { logger: silentLogger });
  const key = oauth ? undefined : await getApiKey(model.provider);
  const { reason: _reason, ...check } = await providerCheck({
    model,
    getApiKey,
    subscription: oauth !== undefined,
    notConfigured:
      oauth || key
        ? undefined
        : `${model.provider}/${model.id}: no key. Set one on the Settings page once started, or add apiKey = "..." to ${configPath}.`,
    configPath,
    ownServer: config.baseUrl !== undefined,
    // Run by the owner, now: a server without a model list is asked with one tiny request.
    probe: {},
  });
  return check;
}

async function askRunningApp(port: number, password: string): Promise<Checked> {
  const url = `http://127.0.0.1:${port}/health?deep=1`;
  try {
    const response = await fetch(url, {
      headers: { Authorization: basicAuthHeader(password) },
      signal: AbortSignal.timeout(30_000),
    });
    const body = (await response.json()) as Partial<Checked>;
    if (!Array.isArray(body.checks)) throw new Error(`it answered HTTP ${response.status}`);
    return summarise(body.checks);
  } catch (error) {
    return summarise([
      {
        name: "app",
        state: "fail",
        detail: `running, but ${url} did not answer: ${errorMessage(error)}`,
        fix: "Its log says why; restart it if it hangs.",
      },
    ]);
  }
}

function print(checks: Check[]): void {
  const width = Math.max(...checks.map((check) => check.name.length));
  for (const check of checks) {
    console.log(`${MARKS[check.state]}  ${check.name.padEnd(width)}  ${check.detail}`);
    if (check.fix && check.state !== "ok") console.log(`${" ".repeat(width + 8)}→ ${check.fix}`);
  }
}

process.exitCode = await main();
