/**
 * The checks of the compose end-to-end test, run by compose-e2e.sh once the images are built: it
 * starts the stack and uses it as its owner would, through the published port, then takes it
 * down and up again and kills the app. Each check prints how long it took; the process exits
 * non-zero when any failed. Settings come from the environment (compose-e2e.sh sets them):
 * E2E_DIR, E2E_COMPOSE (JSON array), E2E_PROJECT, E2E_APP_URL, E2E_PASSWORD.
 */
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { checkPluginIsolation, checkRunnersUseNamespaces } from "./isolation.js";
import { Stack, eventually, toolTurn } from "./stack.js";
import { HealthWatch } from "./health.js";
import { checkOsaurusPlugin } from "./osaurus.js";
import { checkReadmeRestore, checkRestoredPlugin, checkWebBackup, restoreFullBackup } from "./restore.js";
import { checkWhatsAppBridge } from "./whatsapp.js";

const env = (name: string): string => {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set (run scripts/compose-e2e.sh)`);
  return value;
};

const stack = new Stack({
  dir: env("E2E_DIR"),
  compose: JSON.parse(env("E2E_COMPOSE")) as string[],
  project: env("E2E_PROJECT"),
  appUrl: env("E2E_APP_URL"),
  password: env("E2E_PASSWORD"),
});
const fixtures = join(import.meta.dirname, "fixtures");

const results: { name: string; ok: boolean; seconds: number; detail: string }[] = [];

async function check(name: string, run: () => Promise<string | void>): Promise<boolean> {
  const started = Date.now();
  let ok = true;
  let detail = "";
  try {
    detail = (await run()) ?? "";
  } catch (error) {
    ok = false;
    detail = error instanceof Error ? error.message : String(error);
  }
  const seconds = (Date.now() - started) / 1000;
  results.push({ name, ok, seconds, detail });
  const head = `[check] ${ok ? "ok    " : "FAILED"} ${seconds.toFixed(1).padStart(6)} s  ${name}`;
  console.log(detail ? `${head}\n         ${detail.split("\n").join("\n         ")}` : head);
  return ok;
}

function expectIncludes(text: string, part: string, what: string): void {
  if (!text.includes(part))
    throw new Error(`${what}: expected ${JSON.stringify(part)} in ${JSON.stringify(text)}`);
}

async function main(): Promise<void> {
  const health = new HealthWatch(stack);
  const up = await check("the stack starts (docker-compose up -d)", async () => {
    stack.compose(["up", "-d"]);
    health.start();
    await health.untilHealthy(["app"], 90_000);
  });
  if (!up) return;

  await check("GET /health on the published port", async () => {
    const response = await stack.app("/health", {}, false);
    if (response.status !== 200) throw new Error(`answered ${response.status}`);
  });

  await check("the runners' GET /health reports namespaces", () => checkRunnersUseNamespaces(stack, health));

  await check("whatsapp-bridge is healthy and the app reports WhatsApp's own state (unlinked)", () =>
    checkWhatsAppBridge(stack, health),
  );

  // The reminder is set first: it fires while the other checks run.
  const reminder = `R-${Date.now()}`;
  const fireAt = new Date(Date.now() + 25_000).toISOString().slice(0, 19);
  await check("a reminder is set (manage_cron)", async () => {
    await stack.plan("[[m-cron]]", [
      toolTurn("manage_cron", { action: "create", fire_at: fireAt, note: `water the plants ${reminder}` }),
    ]);
    const { response } = await stack.chat({ message: "[[m-cron]] remind me to water the plants" });
    expectIncludes(response, "result:", "the reply after the tool");
    return `fires at ${fireAt} UTC`;
  });

  await check("/chat answers on the published port", async () => {
    const { response } = await stack.chat({ message: "hello from the e2e test [[m-chat]]" });
    // The model gets the message with its time, source and sender; the fake answers it whole.
    expectIncludes(response, "Text: hello from the e2e test [[m-chat]]", "the reply");
  });

  await check("a tool call (execute_sql against PostgreSQL)", async () => {
    await stack.plan("[[m-sql]]", [toolTurn("execute_sql", { query: "SELECT 40 + 2 AS answer" })]);
    const { response } = await stack.chat({ message: "[[m-sql]] what is 40 + 2?" });
    expectIncludes(response, "42", "the tool's result in the reply");
  });

  await check("run_python through python-runner", async () => {
    await stack.plan("[[m-python]]", [
      toolTurn("run_python", { code: "import sys\nprint('python', 6 * 7, sys.version_info[0])" }),
    ]);
    const { response } = await stack.chat({ message: "[[m-python]] run some python" });
    expectIncludes(response, "python 42 3", "the script's output in the reply");
  });

  await check(
    "a plugin from the git server is installed and run, and sees no other plugin's files nor the secrets",
    () => checkPluginIsolation(stack),
  );

  await check("an Osaurus plugin (a C library) is installed by URL, runs, and is back after a crash", () =>
    checkOsaurusPlugin(stack),
  );

  const webBackup = await check("the Settings page's backup holds the plugins and their state", () =>
    checkWebBackup(stack),
  );

  for (const [file, mimeType] of [
    ["voice.aac", "audio/aac"],
    ["voice.amr", "audio/amr"],
  ] as const) {
    await check(
      `a voice note in ${mimeType} is converted to mp3 by the image's ffmpeg and transcribed`,
      async () => {
        const before = (await stack.control<unknown[]>("/transcriptions")).length;
        const audio = readFileSync(join(fixtures, file)).toString("base64");
        const { response } = await stack.chat({ audio, audioContentType: mimeType });
        expectIncludes(response, "Text: hello from the fake", "the transcript as the message");
        const calls =
          await stack.control<{ fileName: string; mimeType: string; bytes: number; head: string }[]>(
            "/transcriptions",
          );
        const call = calls[before];
        if (!call || call.mimeType !== "audio/mpeg" || !call.fileName.endsWith(".mp3"))
          throw new Error(`the speech service got ${JSON.stringify(call)}, not an mp3`);
        return `${call.bytes} bytes of mp3 sent`;
      },
    );
  }

  await check("an upload (POST /api/upload) is stored and told to the assistant", async () => {
    const name = `e2e-upload-${Date.now()}.txt`;
    const content = `an uploaded file, ${name}\n`;
    const form = new FormData();
    form.append("file", new Blob([content], { type: "text/plain" }), name);
    const response = await stack.app("/api/upload", { method: "POST", body: form });
    if (response.status !== 200) throw new Error(`answered ${response.status}: ${await response.text()}`);
    await eventually("the assistant being told of the upload", 60_000, async () =>
      (await stack.modelRequests()).some((request) => request.lastUserText.includes(name)) ? true : undefined,
    );
    const stored = findFile(
      join(stack.options.dir, "data", "app"),
      (path) => statSync(path).size === content.length && readFileSync(path, "utf8") === content,
    );
    if (!stored) throw new Error(`${name} is not stored under data/app`);
    return `stored as ${stored.slice(stack.options.dir.length + 1)}`;
  });

  await check(
    "the web admin's pages ask for the password and serve the subscription and schedule pages",
    async () => {
      const anonymous = await stack.app("/", {}, false);
      if (anonymous.status !== 401 || !/^Basic/i.test(anonymous.headers.get("www-authenticate") ?? ""))
        throw new Error(`without the password / answered ${anonymous.status}`);
      for (const path of ["/", "/settings/subscription", "/schedule"]) {
        const page = await stack.app(path);
        const html = await page.text();
        if (page.status !== 200 || !html.includes("<html"))
          throw new Error(`${path} answered ${page.status}`);
      }
    },
  );

  await check("the reminder fires and its answer is kept for the owner", async () => {
    await eventually("the reminder's turn", 120_000, async () =>
      (await stack.modelRequests()).some((request) => request.lastUserText.includes(reminder))
        ? true
        : undefined,
    );
    await eventually("the reminder's answer among the pending answers", 30_000, async () => {
      const pending = await stack.app("/api/answers/pending");
      return (await pending.text()).includes(reminder) ? true : undefined;
    });
  });

  let latestBackup = "";
  await check(
    "pg-backup writes a backup that scripts/pg-restore.sh restores into a fresh database",
    async () => {
      const backups = join(stack.options.dir, "data", "db-backups");
      await eventually("the backup written at start", 60_000, () =>
        listBackups(backups).length > 0 ? true : undefined,
      );
      stack.exec("pg-backup", ["/scripts/pg-backup.sh", "--once"]);
      const latest = listBackups(backups).at(-1) as string;
      latestBackup = latest;
      const database = `e2e_restore_${Date.now()}`;
      stack.exec("pg-backup", ["psql", "-X", "-q", "-c", `CREATE DATABASE ${database}`], {
        PGDATABASE: "postgres",
      });
      stack.exec("pg-backup", ["/scripts/pg-restore.sh", `/backups/${latest}`], { PGDATABASE: database });
      const count = (db: string) =>
        stack
          .exec("pg-backup", ["psql", "-X", "-At", "-c", "SELECT count(*) FROM messages"], { PGDATABASE: db })
          .trim();
      const restored = count(database);
      const live = count(stack.exec("pg-backup", ["sh", "-c", 'printf %s "$PGDATABASE"']));
      if (restored === "0" || restored !== live)
        throw new Error(`the restored database has ${restored} messages, the live one ${live}`);
      return `${latest}: ${restored} messages restored`;
    },
  );

  await check("every service was healthy within its first minute", () => health.report());

  if (latestBackup)
    await check("scripts/README.md's restore: stop app, pg-restore.sh --force, start app", () =>
      checkReadmeRestore(stack, latestBackup),
    );

  const restore = webBackup ? " with the data directories lost and the web backup restored" : "";
  await check(`down, then up${restore}, keeps the conversation`, async () => {
    stack.compose(["down"]);
    const restored = webBackup ? await restoreFullBackup(stack) : "";
    const restarted = new HealthWatch(stack);
    stack.compose(["up", "-d"]);
    restarted.start();
    await restarted.untilHealthy(["app"], 90_000);
    restarted.stop();
    await stack.chat({ message: "[[m-after]] what did I say before?" });
    const last = (await stack.modelRequests()).at(-1);
    const history = last?.messages.map((message) => message.text).join("\n") ?? "";
    expectIncludes(history, "hello from the e2e test [[m-chat]]", "the history sent to the model");
    if (webBackup) await checkRestoredPlugin(stack);
    return restored;
  });

  await check("kill -9 of the app loses no accepted message", async () => {
    const marker = `K-${Date.now()}`;
    const pending = stack
      .chat({ message: `[[hold]] ${marker} do not lose me` })
      .catch((error: Error) => error);
    await eventually("the message reaching the model", 30_000, async () =>
      (await stack.modelRequests()).some((request) => request.lastUserText.includes(marker))
        ? true
        : undefined,
    );
    // A turn may start while its inbox row is being written: the message is accepted once it is.
    await eventually("the message's inbox row", 30_000, async () => {
      const rows = await stack.app("/api/explorer/tables/inbox/rows?orderBy=id&orderDirection=desc&limit=5");
      return (await rows.text()).includes(marker) ? true : undefined;
    });
    const app = stack.container("app") as string;
    const pid = stack.inspect(app, "{{.State.Pid}}");
    process.kill(Number(pid), "SIGKILL");
    const lost = await pending;
    await stack.control("/release", { marker });
    const restarts = await eventually("the app restarted by its restart policy", 60_000, () => {
      const state = stack.inspect(app, "{{.RestartCount}} {{.State.Running}}");
      return state.endsWith("true") && !state.startsWith("0 ") ? state.split(" ")[0] : undefined;
    });
    await eventually("the answer among the pending answers", 90_000, async () => {
      const answers = await stack.app("/api/answers/pending");
      return (await answers.text()).includes(`[[hold]] ${marker} do not lose me`) ? true : undefined;
    });
    const first =
      lost instanceof Error ? `the waiting /chat failed (${lost.message})` : "the waiting /chat was answered";
    return `${first}; restarted (${restarts}); the answer was kept`;
  });
}

function listBackups(dir: string): string[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir)
    .filter((name) => /^stavrobot-.*\.sql\.gz$/.test(name))
    .sort();
}

function findFile(dir: string, match: (path: string) => boolean): string | undefined {
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) {
      const found = findFile(path, match);
      if (found) return found;
    } else if (match(path)) return path;
  }
  return undefined;
}

try {
  await main();
} catch (error) {
  results.push({ name: "the checks themselves", ok: false, seconds: 0, detail: String(error) });
  console.log(`[check] FAILED: ${String(error)}`);
}
const failed = results.filter((result) => !result.ok);
console.log(`compose: ${results.length - failed.length} passed, ${failed.length} failed`);
process.exit(failed.length > 0 ? 1 : 0);
