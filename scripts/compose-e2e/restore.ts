/**
 * The compose stack's backups as its owner uses them: the Settings page's full backup holding the
 * plugins, the database restored over the live one with the three commands scripts/README.md
 * gives, and the full backup put back on a machine that lost its data directories with
 * scripts/compose-restore.sh.
 */
import { execFileSync } from "node:child_process";
import { existsSync, readdirSync, renameSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { type Stack, eventually, toolTurn } from "./stack.js";

/** Where the Settings page's download is kept for the restore check (in the stack's directory). */
const FULL_BACKUP = "e2e/stavrobot-full.tar.gz";

/** GET /api/backup/download (the Settings page's button): it holds the plugins and their state. */
export async function checkWebBackup(stack: Stack): Promise<string> {
  const response = await stack.app("/api/backup/download");
  if (response.status !== 200) throw new Error(`answered ${response.status}: ${await response.text()}`);
  const bytes = Buffer.from(await response.arrayBuffer());
  writeFileSync(join(stack.options.dir, FULL_BACKUP), bytes);
  const names = execFileSync("tar", ["-tzf", FULL_BACKUP], { cwd: stack.options.dir })
    .toString()
    .split("\n")
    .map((name) => name.replace(/^\.\//, ""));
  const wanted = [
    "stavrobot-backup.json",
    "main/config.toml",
    "main/internal-secret",
    "plugins/e2e-alpha/peek/run.sh",
    "plugins/e2e-beta/note/secret.txt",
    "plugin-runner/",
  ];
  const missing = wanted.filter((name) => !names.includes(name));
  if (missing.length > 0) throw new Error(`the backup lacks ${missing.join(", ")}`);
  return `${bytes.length} bytes, ${names.filter(Boolean).length} entries, the plugins among them`;
}

/** `SELECT count(*) FROM messages` (with a condition) on the live database, through pg-backup. */
function countMessages(stack: Stack, where = "true"): number {
  const sql = `SELECT count(*) FROM messages WHERE ${where}`;
  return Number(stack.exec("pg-backup", ["psql", "-X", "-At", "-c", sql]).trim());
}

/**
 * scripts/README.md's restore, as written there: stop the app, pg-restore.sh --force over the live
 * database, start the app. A message sent after the backup is gone; what the backup held is back.
 */
export async function checkReadmeRestore(stack: Stack, backup: string): Promise<string> {
  const inBackup = countMessages(stack);
  const marker = `after-backup-${Date.now()}`;
  await stack.chat({ message: `[[m-later]] ${marker}` });
  if (countMessages(stack, `content::text LIKE '%${marker}%'`) === 0)
    throw new Error("the message sent after the backup was not saved");
  stack.compose(["stop", "app"]);
  stack.exec("pg-backup", ["/scripts/pg-restore.sh", "--force", `/backups/${backup}`]);
  stack.compose(["start", "app"]);
  await eventually("the app answering again", 90_000, async () =>
    (await stack.app("/health", {}, false)).status === 200 ? true : undefined,
  );
  const later = countMessages(stack, `content::text LIKE '%${marker}%'`);
  const restored = countMessages(stack);
  if (later !== 0 || restored !== inBackup)
    throw new Error(
      `after the restore: ${restored} messages (the backup held ${inBackup}), ${later} sent later`,
    );
  return `${backup}: ${restored} messages back, the later one gone`;
}

/** What a new machine lacks: every directory of data/ but the database server's and its backups. */
const LOST = ["app", "main", "secrets", "plugins", "plugin-data", "plugin-runner", "whatsapp-bridge"];

/**
 * With the stack down, the data directories the app and the runners use are moved away (a new
 * machine), scripts/compose-restore.sh puts the Settings page's backup back, and the stack comes
 * up with its password, its conversation and its plugins (one of which reads its own file).
 */
export async function restoreFullBackup(stack: Stack): Promise<string> {
  const data = join(stack.options.dir, "data");
  const aside = join(stack.options.dir, "e2e", `lost-${Date.now()}`);
  execFileSync("mkdir", ["-p", aside]);
  for (const name of LOST) if (existsSync(join(data, name))) renameSync(join(data, name), join(aside, name));
  const output = execFileSync("bash", ["scripts/compose-restore.sh", FULL_BACKUP], {
    cwd: stack.options.dir,
    stdio: ["ignore", "pipe", "pipe"],
  }).toString();
  const back = LOST.filter((name) => existsSync(join(data, name)));
  if (back.length !== LOST.length)
    throw new Error(`restored only ${back.join(", ")}: ${output}\n${readdirSync(data).join(" ")}`);
  return output.trim().split("\n")[0] ?? "";
}

/** After restoreFullBackup and `up`: a restored plugin's tool runs and reads its own file. */
export async function checkRestoredPlugin(stack: Stack): Promise<void> {
  await stack.plan("[[m-restored]]", [
    toolTurn("run_plugin_tool", { plugin: "e2e-beta", tool: "note", parameters: "{}" }),
  ]);
  const { response } = await stack.chat({ message: "[[m-restored]] run beta again" });
  if (!response.includes("BETA-SECRET-")) throw new Error(`the restored e2e-beta answered: ${response}`);
}
