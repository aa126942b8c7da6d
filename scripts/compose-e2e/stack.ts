/**
 * The compose stack as the checks see it: docker-compose commands in the test's project
 * directory, the services' containers and health, the app's published port, the fake services'
 * control API.
 */
import { execFileSync, spawn } from "node:child_process";

export interface StackOptions {
  /** The project directory: the sources, docker-compose.yml, the test's override and data/. */
  dir: string;
  /** docker-compose and its arguments before the command (project name, -f files). */
  compose: string[];
  /** The compose project's name (docker-compose -p). */
  project: string;
  appUrl: string;
  password: string;
}

export class Stack {
  constructor(readonly options: StackOptions) {}

  /** Runs a docker-compose command, returning its output; throws with its output on failure. */
  compose(args: string[], input?: string): string {
    const [command, ...prefix] = this.options.compose;
    try {
      return execFileSync(command as string, [...prefix, ...args], {
        cwd: this.options.dir,
        input: input ?? "",
        stdio: ["pipe", "pipe", "pipe"],
        maxBuffer: 64 * 1024 * 1024,
      }).toString();
    } catch (error) {
      const failed = error as { stdout?: Buffer; stderr?: Buffer; message: string };
      const output = `${failed.stdout?.toString() ?? ""}${failed.stderr?.toString() ?? ""}`.trim();
      throw new Error(`docker-compose ${args.join(" ")} failed: ${output.split("\n").slice(-15).join("\n")}`);
    }
  }

  /** The same, in the background (a command whose output nobody waits for). */
  composeLater(args: string[]): Promise<number | null> {
    const [command, ...prefix] = this.options.compose;
    const child = spawn(command as string, [...prefix, ...args], { cwd: this.options.dir, stdio: "ignore" });
    return new Promise((resolve) => child.on("exit", (code) => resolve(code)));
  }

  /** The container of a service (its id), or undefined when it has none. */
  container(service: string): string | undefined {
    return this.compose(["ps", "-q", service]).trim().split("\n")[0] || undefined;
  }

  /** `docker inspect` of a container, one Go template. */
  inspect(container: string, format: string): string {
    return docker(["inspect", "-f", format, container]).trim();
  }

  /** A command in a service's running container. */
  exec(service: string, command: string[], env: Record<string, string> = {}): string {
    const vars = Object.entries(env).flatMap(([key, value]) => ["-e", `${key}=${value}`]);
    return this.compose(["exec", "-T", ...vars, service, ...command]);
  }

  /** GET (or another method) on the app's published port, with the owner's password. */
  async app(path: string, init: RequestInit = {}, auth = true): Promise<Response> {
    const headers = new Headers(init.headers);
    if (auth)
      headers.set("authorization", `Basic ${Buffer.from(`:${this.options.password}`).toString("base64")}`);
    return fetch(`${this.options.appUrl}${path}`, {
      ...init,
      headers,
      signal: init.signal ?? AbortSignal.timeout(120_000),
    });
  }

  /** POST /chat and its JSON answer; throws unless it is a 200. */
  async chat(body: Record<string, unknown>): Promise<{ response: string }> {
    const response = await this.app("/chat", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(body),
    });
    const text = await response.text();
    if (response.status !== 200) throw new Error(`/chat answered ${response.status}: ${text}`);
    return JSON.parse(text) as { response: string };
  }

  /**
   * Where the fake services' control port is published: found again for each new container,
   * since `down` and `up` publish it on another port.
   */
  private controlUrl(): string {
    const labels = [
      `com.docker.compose.project=${this.options.project}`,
      "com.docker.compose.service=fake-services",
    ];
    const id = docker(["ps", "-q", ...labels.flatMap((label) => ["--filter", `label=${label}`])]).trim();
    if (!id) throw new Error("the fake services are not running");
    if (this.control_?.id !== id) {
      const address = docker(["port", id, "8090/tcp"]).trim().split("\n")[0];
      this.control_ = { id, url: `http://${address}` };
    }
    return this.control_.url;
  }

  private control_: { id: string; url: string } | undefined;

  async control<T>(path: string, body?: unknown): Promise<T> {
    const response = await fetch(`${this.controlUrl()}${path}`, {
      method: body === undefined ? "GET" : "POST",
      ...(body === undefined
        ? {}
        : { headers: { "content-type": "application/json" }, body: JSON.stringify(body) }),
      signal: AbortSignal.timeout(10_000),
    });
    if (!response.ok) throw new Error(`fake services ${path}: ${response.status} ${await response.text()}`);
    return (await response.json()) as T;
  }

  /** Plans the model's answers for the turn whose message contains `marker`. */
  plan(marker: string, turns: unknown[]): Promise<unknown> {
    return this.control("/plan", { marker, turns });
  }

  modelRequests(): Promise<ModelRequest[]> {
    return this.control<ModelRequest[]>("/requests");
  }
}

export interface ModelRequest {
  lastUserText: string;
  messages: { role: string; text: string }[];
}

export function docker(args: string[]): string {
  return execFileSync("docker", args, { stdio: ["ignore", "pipe", "pipe"] }).toString();
}

/** Polls `check` until it returns a value, or throws what it last threw once `ms` have passed. */
export async function eventually<T>(
  what: string,
  ms: number,
  check: () => Promise<T | undefined> | T | undefined,
): Promise<T> {
  const deadline = Date.now() + ms;
  let last: unknown;
  for (;;) {
    try {
      const value = await check();
      if (value !== undefined) return value;
    } catch (error) {
      last = error;
    }
    if (Date.now() > deadline) {
      const why = last instanceof Error ? `: ${last.message}` : "";
      throw new Error(`${what} did not happen within ${Math.round(ms / 1000)} s${why}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 500));
  }
}

export function toolTurn(name: string, input: Record<string, unknown>): unknown {
  return { content: [{ type: "tool_use", name, input }] };
}
