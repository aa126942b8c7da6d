import { execFileSync } from "node:child_process";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { HealthWatch } from "./health.js";
import { type Stack, toolTurn } from "./stack.js";

/** Each runner and the port its GET /health answers on inside its container. */
const RUNNERS = { "plugin-runner": 3003, "python-runner": 3004, coder: 3002 };

/** `GET /health` of each runner, from inside its container (they are not published). */
export async function checkRunnersUseNamespaces(stack: Stack, health: HealthWatch): Promise<string> {
  await health.untilHealthy(Object.keys(RUNNERS), 90_000);
  const lines: string[] = [];
  const plain: string[] = [];
  for (const [service, port] of Object.entries(RUNNERS)) {
    const script = `fetch("http://127.0.0.1:${port}/health").then((r) => r.text()).then((t) => process.stdout.write(t))`;
    const body = JSON.parse(stack.exec(service, ["node", "-e", script])) as {
      sandbox?: { mode?: string; tool?: string; reason?: string };
    };
    const sandbox = body.sandbox ?? {};
    lines.push(
      `${service}: ${sandbox.mode ?? "?"} (${sandbox.tool ?? "no tool"}${sandbox.reason ? `; ${sandbox.reason}` : ""})`,
    );
    if (sandbox.mode !== "namespaces") plain.push(service);
  }
  if (plain.length > 0) throw new Error(`not in namespaces mode: ${plain.join(", ")}\n${lines.join("\n")}`);
  return lines.join("\n");
}

const PEEK = `#!/bin/sh
# Prints its own file, then tries what a plugin must never read.
attempt() {
  if out=$(cat "$1" 2>/dev/null); then printf '%s READ %s\\n' "$1" "$out"; else printf '%s refused\\n' "$1"; fi
}
printf 'own %s\\n' "$(cat ./own.txt)"
attempt /plugins/e2e-beta/note/secret.txt
attempt /proc/1/root/plugins/e2e-beta/note/secret.txt
attempt /root/secrets/internal-secret
attempt /proc/1/root/root/secrets/internal-secret
printf 'plugins %s\\n' "$(ls /plugins 2>&1 | tr '\\n' ' ')"
printf 'uid %s\\n' "$(id -u)"
`;

function git(dir: string, ...args: string[]): void {
  execFileSync("git", ["-C", dir, ...args], { stdio: "ignore" });
}

/** A plugin repository with one shell tool, served by the git server as git://git-server/NAME. */
function makePlugin(repos: string, name: string, tool: string, files: Record<string, string>): void {
  const dir = join(repos, name);
  mkdirSync(join(dir, tool), { recursive: true });
  writeFileSync(join(dir, "manifest.json"), JSON.stringify({ name, description: `The e2e test's ${name}.` }));
  writeFileSync(
    join(dir, tool, "manifest.json"),
    JSON.stringify({ name: tool, description: `${tool} of ${name}`, entrypoint: "run.sh", parameters: {} }),
  );
  for (const [file, text] of Object.entries(files))
    writeFileSync(join(dir, tool, file), text, { mode: file.endsWith(".sh") ? 0o755 : 0o644 });
  git(dir, "init", "-q", "-b", "main");
  git(dir, "add", ".");
  git(dir, "-c", "user.email=e2e@example.com", "-c", "user.name=e2e", "commit", "-q", "-m", "plugin");
}

/**
 * Two plugins from the git server on the compose network: e2e-beta keeps a secret, e2e-alpha's
 * tool reads its own file and tries beta's files and the internal secret, by their paths in the
 * runner's container and through /proc (which, in a user namespace under Docker, is the
 * container's).
 */
export async function checkPluginIsolation(stack: Stack): Promise<string> {
  const repos = join(stack.options.dir, "e2e", "repos");
  const betaSecret = `BETA-SECRET-${Date.now()}`;
  makePlugin(repos, "e2e-beta", "note", {
    "run.sh": "#!/bin/sh\ncat ./secret.txt\n",
    "secret.txt": `${betaSecret}\n`,
  });
  makePlugin(repos, "e2e-alpha", "peek", { "run.sh": PEEK, "own.txt": "ALPHA-OWN\n" });
  for (const name of ["e2e-beta", "e2e-alpha"]) {
    await stack.plan(`[[m-install-${name}]]`, [
      toolTurn("manage_plugins", { action: "install", url: `git://git-server/${name}` }),
    ]);
    const { response } = await stack.chat({ message: `[[m-install-${name}]] install ${name}` });
    if (!response.includes(name) || /error|fail/i.test(response))
      throw new Error(`installing ${name}: ${response}`);
  }
  await stack.plan("[[m-beta]]", [
    toolTurn("run_plugin_tool", { plugin: "e2e-beta", tool: "note", parameters: "{}" }),
  ]);
  const beta = (await stack.chat({ message: "[[m-beta]] run beta" })).response;
  if (!beta.includes(betaSecret)) throw new Error(`e2e-beta could not read its own file: ${beta}`);

  await stack.plan("[[m-peek]]", [
    toolTurn("run_plugin_tool", { plugin: "e2e-alpha", tool: "peek", parameters: "{}" }),
  ]);
  const peek = (await stack.chat({ message: "[[m-peek]] run alpha" })).response;
  const secret = readFileSync(join(stack.options.dir, "data", "secrets", "internal-secret"), "utf8").trim();
  if (!peek.includes("own ALPHA-OWN")) throw new Error(`e2e-alpha did not run as expected: ${peek}`);
  if (peek.includes(" READ ") || peek.includes(betaSecret) || (secret && peek.includes(secret)))
    throw new Error(`e2e-alpha read what it must not:\n${peek}`);
  const refused = peek.split("\n").filter((line) => line.endsWith(" refused")).length;
  if (refused !== 4) throw new Error(`expected 4 refusals:\n${peek}`);
  return peek
    .replace(/^result: /, "")
    .split("\n")
    .filter((line) => /refused|^plugins|^uid/.test(line))
    .join("; ");
}
