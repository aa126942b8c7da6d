import { readFileSync } from "node:fs";
import { join, posix } from "node:path";
import { describe, expect, it } from "vitest";
import { NPM_START, NPM_START_ENV, repoRoot } from "./helpers/process.js";

/** Seconds of a compose duration such as `2s`, `1m30s` or `1h`. */
function seconds(duration: string): number {
  const units: Record<string, number> = { h: 3600, m: 60, s: 1, ms: 0.001 };
  let total = 0;
  for (const [, value, unit] of duration.matchAll(/(\d+(?:\.\d+)?)(ms|h|m|s)/g)) {
    total += Number(value) * (units[unit as string] as number);
  }
  return total;
}

interface Mount {
  source: string;
  target: string;
  readOnly: boolean;
}

interface ComposeService {
  environment: Record<string, string>;
  volumes: Mount[];
}

/**
 * The services of a compose file with their environment and bind mounts (the short syntax these
 * files use: `- source:target[:ro]`), read by indentation.
 */
function composeServices(text: string): Record<string, ComposeService> {
  const services: Record<string, ComposeService> = {};
  let inServices = false;
  let current: ComposeService | undefined;
  let section: "environment" | "volumes" | undefined;
  for (const line of text.split("\n")) {
    if (/^\S/.test(line)) {
      inServices = /^services:\s*$/.test(line);
      current = undefined;
      continue;
    }
    if (!inServices || /^\s*(#.*)?$/.test(line)) continue;
    const service = /^ {2}([\w-]+):\s*$/.exec(line);
    if (service) {
      current = services[service[1] as string] = { environment: {}, volumes: [] };
      section = undefined;
      continue;
    }
    const key = /^ {4}([\w-]+):/.exec(line);
    if (key) {
      section = key[1] === "environment" || key[1] === "volumes" ? key[1] : undefined;
      continue;
    }
    if (!current || !section) continue;
    if (section === "environment") {
      const variable = /^ {6}([A-Z_]+):\s*"?([^"]*)"?\s*$/.exec(line);
      if (variable) current.environment[variable[1] as string] = variable[2] as string;
    } else {
      const mount = /^ {6}- "?([^":]+):([^":]+)(:ro)?"?\s*$/.exec(line);
      if (mount)
        current.volumes.push({
          source: mount[1] as string,
          target: mount[2] as string,
          readOnly: !!mount[3],
        });
    }
  }
  return services;
}

/** `docker-compose.yml` with an override applied: a mount of the override replaces the one at its target. */
function composeStack(override?: string): Record<string, ComposeService> {
  const base = composeServices(readFileSync(join(repoRoot, "docker-compose.yml"), "utf8"));
  if (!override) return base;
  for (const [name, service] of Object.entries(
    composeServices(readFileSync(join(repoRoot, override), "utf8")),
  )) {
    const merged = base[name] as ComposeService;
    merged.environment = { ...merged.environment, ...service.environment };
    const targets = new Set(service.volumes.map((mount) => mount.target));
    merged.volumes = [...merged.volumes.filter((mount) => !targets.has(mount.target)), ...service.volumes];
  }
  return base;
}

/** The host directory holding the service's `path`: the source of the mount its directory is in. */
function hostDirectory(service: ComposeService, path: string): string | undefined {
  const directory = posix.dirname(path);
  const mount = service.volumes.find((candidate) => candidate.target === directory);
  return mount?.source;
}

/** Where a service's MCP declarations are: MCP_SERVERS_FILE, else beside its internal secret. */
function mcpFile(service: ComposeService): string {
  const secret = service.environment.STAVROBOT_INTERNAL_SECRET_FILE as string;
  return service.environment.MCP_SERVERS_FILE ?? posix.join(posix.dirname(secret), "mcp-servers.json");
}

describe("docker-compose.yml", () => {
  it("checks every service's health at least once a minute (services waiting for a healthy one never wait an hour)", () => {
    for (const file of ["docker-compose.yml", "docker-compose.harbormaster.yml"]) {
      const text = readFileSync(join(repoRoot, file), "utf8");
      const intervals = [...text.matchAll(/^\s+interval:\s*(\S+)/gm)].map((match) => match[1] as string);
      for (const interval of intervals)
        expect(seconds(interval), `${file}: interval ${interval}`).toBeLessThanOrEqual(60);
    }
  });

  it("mounts nothing over a service's code (the images keep each workspace under /srv/<name>)", () => {
    const workspaces = [
      "common",
      "app",
      "plugin-runner",
      "python-runner",
      "coder",
      "signal-bridge",
      "whatsapp-bridge",
    ];
    for (const file of ["docker-compose.yml", "docker-compose.harbormaster.yml"]) {
      const text = readFileSync(join(repoRoot, file), "utf8");
      const targets = [...text.matchAll(/^\s+- "?[^":\n]+:(\/[^":\s]*)/gm)].map(
        (match) => match[1] as string,
      );
      expect(targets.length, file).toBeGreaterThan(5);
      for (const target of targets)
        for (const workspace of workspaces)
          expect(
            target === `/srv/${workspace}` || target.startsWith(`/srv/${workspace}/`),
            `${file}: ${target}`,
          ).toBe(false);
    }
  });

  it.each([["docker-compose.yml"], ["docker-compose.harbormaster.yml"]])(
    "%s: the owner's MCP servers (their tokens) reach the plugin-runner only; the other siblings mount the internal secret alone",
    (file) => {
      const services = composeStack(file === "docker-compose.yml" ? undefined : file);
      const app = services.app as ComposeService;
      const runner = services["plugin-runner"] as ComposeService;
      const mcpDir = hostDirectory(app, mcpFile(app));
      const secretDir = hostDirectory(app, app.environment.STAVROBOT_INTERNAL_SECRET_FILE as string);
      expect(mcpDir, "the app's MCP declarations are in a mounted directory").toBeDefined();
      expect(mcpDir).not.toBe(secretDir);
      // The plugin-runner reads the file the app writes, read-only.
      expect(hostDirectory(runner, mcpFile(runner))).toBe(mcpDir);
      expect(runner.volumes.find((mount) => mount.source === mcpDir)?.readOnly).toBe(true);
      const mounting = Object.entries(services)
        .filter(([, service]) => service.volumes.some((mount) => mount.source === mcpDir))
        .map(([name]) => name);
      expect(mounting.sort()).toEqual(["app", "plugin-runner"]);
      // Every other sibling reads the same secret, from a read-only mount of its directory.
      for (const name of ["python-runner", "coder", "signal-bridge", "whatsapp-bridge"]) {
        const service = services[name] as ComposeService;
        const secret = service.environment.STAVROBOT_INTERNAL_SECRET_FILE as string;
        expect(hostDirectory(service, secret), name).toBe(secretDir);
        expect(service.volumes.find((mount) => mount.source === secretDir)?.readOnly, name).toBe(true);
      }
    },
  );
});

describe("the app's image", () => {
  it("gives the C allocator the settings `npm start` gives it", () => {
    const dockerfile = readFileSync(join(repoRoot, "app/Dockerfile"), "utf8");
    const variables = Object.keys(NPM_START_ENV).filter((name) => name.startsWith("MALLOC_"));
    expect(variables).toContain("MALLOC_TRIM_THRESHOLD_");
    for (const name of variables) expect(dockerfile).toContain(`${name}=${NPM_START_ENV[name]}`);
  });

  it("runs node with the flags `npm start` runs it with", () => {
    const dockerfile = readFileSync(join(repoRoot, "app/Dockerfile"), "utf8");
    const flags = NPM_START.filter((arg) => arg.startsWith("--"));
    expect(flags).toContain("--max-semi-space-size=2");
    const command = /^CMD (\[.*\])$/m.exec(dockerfile)?.[1];
    expect(JSON.parse(command ?? "[]")).toEqual(["node", ...flags, "app/dist/boot/main.js"]);
  });
});
