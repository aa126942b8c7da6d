import { existsSync, readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { repoRoot } from "./helpers/process.js";

/**
 * Every shell command the READMEs show (fenced `sh`, `bash`, `shell` or `console` blocks of the
 * top README.md and each folder's README.md) is either run by CI (.ci/run, a test, the compose
 * end-to-end script), named here with the file that runs it and the words in that file that do,
 * or listed as not run with the reason. A command added to a README without an entry here fails
 * this test; so does an entry whose file no longer runs it, or one no README shows any more.
 */

interface RunBy {
  /** A file, from the repository's root, that runs the command. */
  file: string;
  /** Text in that file that runs it. */
  evidence: string;
}

type Entry =
  | { runBy: RunBy[]; npmScript?: { name: string; runs: string } }
  /** Not run by CI, and why; with what runs nearest to it. */
  | { notRun: string };

const COMPOSE_E2E = "scripts/compose-e2e.sh";
const COMPOSE_CHECKS = "scripts/compose-e2e/checks.ts";
const COMPOSE_RESTORE = "scripts/compose-e2e/restore.ts";

const COMMANDS: Record<string, Entry> = {
  // README.md
  "npm install && npm start": {
    runBy: [
      { file: ".ci/run", evidence: "npm ci --no-audit --no-fund" },
      { file: "app/test/helpers/process.ts", evidence: "NPM_START: string[] = startScript.args" },
      { file: "app/test/startup.test.ts", evidence: "startAppProcess(testEnv.env, 120_000, NPM_START)" },
    ],
    npmScript: { name: "start", runs: "scripts/start.mjs" },
  },
  "npm install && npm test": {
    runBy: [
      {
        file: ".ci/run",
        evidence: 'TEST_DATABASE_URL="postgres://postgres@127.0.0.1:5432/postgres" npm test',
      },
    ],
    npmScript: { name: "test", runs: "vitest run" },
  },
  "STAVROBOT_PASSWORD=<password from config.toml> npm run chat": {
    runBy: [
      { file: "app/test/helpers/cli.ts", evidence: 'CLIENT = "app/src/cli/client.ts"' },
      { file: "app/test/cli-client.test.ts", evidence: 'describe("CLI client as a process (npm run chat)"' },
    ],
    npmScript: { name: "chat", runs: "app/src/cli/client.ts" },
  },
  'STAVROBOT_PASSWORD=... npm run chat -- -m "What\'s on my list today?"': {
    runBy: [{ file: "app/test/cli-client.test.ts", evidence: 'run(["-m", "hi"], env())' }],
    npmScript: { name: "chat", runs: "app/src/cli/client.ts" },
  },
  "docker compose up -d --build": {
    runBy: [
      { file: COMPOSE_E2E, evidence: 'compose build "$service"' },
      { file: COMPOSE_CHECKS, evidence: 'stack.compose(["up", "-d"])' },
    ],
  },
  // scripts/README.md
  "dockerd --storage-driver overlay2 &": {
    runBy: [{ file: COMPOSE_E2E, evidence: "dockerd --storage-driver overlay2" }],
  },
  "scripts/compose-e2e/standins.sh": { runBy: [{ file: COMPOSE_E2E, evidence: '"$here/standins.sh"' }] },
  "docker-compose build && COMPOSE_PROFILES=coder docker-compose build coder": {
    runBy: [{ file: COMPOSE_E2E, evidence: 'compose build "$service"' }],
  },
  "docker-compose up -d": { runBy: [{ file: COMPOSE_CHECKS, evidence: 'stack.compose(["up", "-d"])' }] },
  "npm run mcp:import -- ~/.config/Claude/claude_desktop_config.json": {
    runBy: [
      {
        file: "app/test/mcp-servers-e2e.test.ts",
        evidence: 'runNpm(["run", "--silent", "mcp:import", "--", file], testEnv.env)',
      },
    ],
    npmScript: { name: "mcp:import", runs: "app/src/boot/mcp-import-cli.ts" },
  },
  "npm run backup": {
    runBy: [{ file: "app/test/backup-running-app.test.ts", evidence: 'runToExit([BACKUP_CLI, "backup"]' }],
    npmScript: { name: "backup", runs: "app/src/boot/backup-cli.ts backup" },
  },
  "npm run restore -- data/backups/stavrobot-2025-06-15T10-20-30Z.pglite.tar.gz [--force]": {
    runBy: [
      {
        file: "app/test/backup-running-app.test.ts",
        evidence: '[BACKUP_CLI, "restore", join(backupDir(), newest)]',
      },
      {
        file: "app/test/backup-running-app.test.ts",
        evidence: '[BACKUP_CLI, "restore", archive, "--force"]',
      },
    ],
    npmScript: { name: "restore", runs: "app/src/boot/backup-cli.ts restore" },
  },
  "docker compose stop app": {
    runBy: [{ file: COMPOSE_RESTORE, evidence: 'stack.compose(["stop", "app"])' }],
  },
  "docker compose exec pg-backup /scripts/pg-restore.sh --force /backups/stavrobot-2025-06-15T03-00-00Z.sql.gz":
    {
      runBy: [
        {
          file: COMPOSE_RESTORE,
          evidence: 'stack.exec("pg-backup", ["/scripts/pg-restore.sh", "--force", `/backups/${backup}`])',
        },
      ],
    },
  "docker compose start app": {
    runBy: [{ file: COMPOSE_RESTORE, evidence: 'stack.compose(["start", "app"])' }],
  },
  "docker compose down": { runBy: [{ file: COMPOSE_CHECKS, evidence: 'stack.compose(["down"])' }] },
  "scripts/compose-restore.sh stavrobot-full-2026-11-26T10-00-00Z.tar.gz": {
    runBy: [
      { file: COMPOSE_RESTORE, evidence: 'execFileSync("bash", ["scripts/compose-restore.sh", FULL_BACKUP]' },
      { file: "app/test/compose-restore.test.ts", evidence: 'restore(dir, "--force", archive)' },
    ],
  },
  "docker compose up -d": { runBy: [{ file: COMPOSE_CHECKS, evidence: 'stack.compose(["up", "-d"])' }] },
  // signal-bridge/README.md
  "alias signal-cli='docker compose run --rm --entrypoint signal-cli signal-bridge --config /data/signal-cli'":
    {
      notRun:
        "signal-bridge's image is built only with a signal-cli release checksum set (SIGNAL_CLI_SHA256); CI " +
        "builds it when that is set (scripts/compose-e2e.sh build_signal_bridge) but runs no signal-cli command",
    },
  "signal-cli -a +15555550123 register": {
    notRun: "registering needs a real phone number and Signal's servers; the tests use a fake signal-cli",
  },
  "signal-cli -a +15555550123 verify 123-456": { notRun: "needs the code Signal sends to a real number" },
  "signal-cli -a +15555550123 updateProfile --given-name Stavrobot": {
    notRun: "needs a registered account on Signal's servers",
  },
};

const SHELL_FENCE = /^\s*```(sh|bash|shell|console)\s*$/;

/** The READMEs: the top one and each top-level folder's. */
function readmes(): string[] {
  const folders = readdirSync(repoRoot, { withFileTypes: true })
    .filter((entry) => entry.isDirectory() && !entry.name.startsWith(".") && entry.name !== "node_modules")
    .map((entry) => join(entry.name, "README.md"))
    .filter((path) => existsSync(join(repoRoot, path)));
  return ["README.md", ...folders.sort()];
}

/** The commands of a README's shell blocks: one a line, comments and a trailing `# …` left out. */
export function shellCommands(markdown: string): string[] {
  const commands: string[] = [];
  let inShell = false;
  for (const line of markdown.split("\n")) {
    if (!inShell) {
      inShell = SHELL_FENCE.test(line);
      continue;
    }
    if (/^\s*```/.test(line)) {
      inShell = false;
      continue;
    }
    const command = line
      .replace(/\s+#\s.*$/, "")
      .replace(/\s+/g, " ")
      .trim();
    if (command && !command.startsWith("#")) commands.push(command);
  }
  return commands;
}

const shown = new Map<string, string>();
for (const readme of readmes()) {
  for (const command of shellCommands(readFileSync(join(repoRoot, readme), "utf8")))
    shown.set(command, readme);
}

describe("the READMEs' commands", () => {
  it("reads the commands of shell blocks, without comments", () => {
    expect(shellCommands("```sh\n# a comment\nnpm test   # runs it\n\n```\n```toml\nx = 1\n```\n")).toEqual([
      "npm test",
    ]);
    expect(shown.size).toBeGreaterThan(10);
  });

  it("each has an entry here, and each entry is a command a README shows", () => {
    const missing = [...shown]
      .filter(([command]) => !(command in COMMANDS))
      .map(([c, readme]) => `${readme}: ${c}`);
    expect(missing, "add these to COMMANDS with the file that runs them").toEqual([]);
    expect(Object.keys(COMMANDS).filter((command) => !shown.has(command))).toEqual([]);
  });

  it.each(Object.entries(COMMANDS).filter(([, entry]) => "runBy" in entry))(
    "is run by CI: %s",
    (_command, entry) => {
      if (!("runBy" in entry)) return;
      for (const { file, evidence } of entry.runBy) {
        const path = join(repoRoot, file);
        expect(existsSync(path), file).toBe(true);
        expect(readFileSync(path, "utf8"), `${file} runs it`).toContain(evidence);
      }
      if (entry.npmScript) {
        const scripts = JSON.parse(readFileSync(join(repoRoot, "package.json"), "utf8")).scripts as Record<
          string,
          string
        >;
        expect(scripts[entry.npmScript.name], `npm run ${entry.npmScript.name}`).toContain(
          entry.npmScript.runs,
        );
      }
      // CI runs every test file, the compose script included.
      const ci = readFileSync(join(repoRoot, ".ci/run"), "utf8");
      expect(ci).toContain("npm test");
      expect(ci).toContain("npm run test:compose");
    },
  );

  it("says why the others are not run", () => {
    const notRun = Object.entries(COMMANDS).flatMap(([command, entry]) =>
      "notRun" in entry ? [`${command}: ${entry.notRun}`] : [],
    );
    for (const line of notRun) expect(line.length).toBeGreaterThan(40);
    // Shown in the test's output, so the gap stays visible.
    console.info(`README commands CI does not run as written:\n- ${notRun.join("\n- ")}`);
  });
});
