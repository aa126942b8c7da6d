import { type Stack, docker } from "./stack.js";

/** The test's own services (the override's), which have no healthcheck of theirs. */
const HELPERS = new Set(["fake-services", "git-server"]);
/**
 * How long after its start a service may take to be healthy: a minute, plus the few seconds a
 * check itself may take on a busy machine (pg-backup's first check comes a minute after its start).
 */
const LIMIT_MS = 70_000;

interface Probe {
  Start: string;
  End: string;
  ExitCode: number;
}

/** Docker's timestamps have nanoseconds; Date takes milliseconds. */
const time = (stamp: string): number => Date.parse(stamp.replace(/(\.\d{3})\d*/, "$1"));

/**
 * Watches the stack's containers from `up` on and notes, for each service, how long after its
 * container started the first successful healthcheck ended (read from Docker's health log, so the
 * figure does not depend on how often this polls).
 */
export class HealthWatch {
  private readonly healthyAfter = new Map<string, number>();
  private readonly last = new Map<string, string>();
  private timer: NodeJS.Timeout | undefined;
  private running = false;
  private started = 0;

  constructor(private readonly stack: Stack) {}

  start(): void {
    this.started = Date.now();
    this.running = true;
    const poll = () => {
      try {
        this.poll();
      } catch {
        // A container between states; the next poll sees it.
      }
      if (this.running) this.timer = setTimeout(poll, 1_000);
    };
    poll();
  }

  stop(): void {
    this.running = false;
    if (this.timer) clearTimeout(this.timer);
  }

  /** The stack's services that have a container, and their containers. */
  private containers(): Map<string, string> {
    const label = `label=com.docker.compose.project=${this.stack.options.project}`;
    const lines = docker([
      "ps",
      "-a",
      "--filter",
      label,
      "--format",
      '{{.ID}} {{.Label "com.docker.compose.service"}}',
    ]);
    const found = new Map<string, string>();
    for (const line of lines.trim().split("\n")) {
      const [id, service] = line.split(" ");
      if (id && service && !HELPERS.has(service)) found.set(service, id);
    }
    return found;
  }

  private poll(): void {
    const containers = this.containers();
    const pending = [...containers].filter(([service]) => !this.healthyAfter.has(service));
    if (pending.length === 0) return;
    const inspected = JSON.parse(docker(["inspect", ...pending.map(([, id]) => id)])) as {
      Id: string;
      State: { StartedAt: string; Health?: { Status: string; Log: Probe[] } };
    }[];
    for (const [service, id] of pending) {
      const state = inspected.find((entry) => entry.Id.startsWith(id))?.State;
      if (!state) continue;
      this.last.set(service, state.Health?.Status ?? "no healthcheck");
      const started = time(state.StartedAt);
      const passed = state.Health?.Log.filter(
        (probe) => probe.ExitCode === 0 && time(probe.Start) >= started,
      );
      if (state.Health?.Status === "healthy" && passed?.[0])
        this.healthyAfter.set(service, time(passed[0].End) - started);
    }
  }

  /** Waits until the given services are healthy. */
  async untilHealthy(services: string[], ms: number): Promise<void> {
    const deadline = Date.now() + ms;
    while (!services.every((service) => this.healthyAfter.has(service))) {
      if (Date.now() > deadline) {
        const states = services.map((service) => `${service}: ${this.last.get(service) ?? "no container"}`);
        throw new Error(`not healthy within ${ms / 1000} s (${states.join(", ")})`);
      }
      await new Promise((resolve) => setTimeout(resolve, 500));
    }
  }

  /** Waits for every service, then says how long each took; throws if one took too long. */
  async report(): Promise<string> {
    const services = [...this.containers().keys()];
    const wait = Math.max(0, this.started + LIMIT_MS + 15_000 - Date.now());
    await this.untilHealthy(services, wait).catch(() => undefined);
    this.stop();
    const lines = services.map((service) => {
      const ms = this.healthyAfter.get(service);
      return ms === undefined
        ? `${service}: not healthy (${this.last.get(service) ?? "no container"})`
        : `${service}: ${(ms / 1000).toFixed(1)} s`;
    });
    const slow = services.filter((service) => (this.healthyAfter.get(service) ?? Infinity) > LIMIT_MS);
    if (slow.length > 0)
      throw new Error(`${slow.join(", ")} not healthy within ${LIMIT_MS / 1000} s: ${lines.join("; ")}`);
    return lines.join("; ");
  }
}
