import { spawn, type ChildProcess } from "node:child_process";
import { EXIT_IN_USE, type Logger, type ServiceClient } from "@stavrobot/common";

export interface SiblingSpec {
  name: string;
  /** Entry file, absolute; run with the same Node flags as this process (tsx in development). */
  entry: string;
  env: NodeJS.ProcessEnv;
  /**
   * Started by the first `wake()` instead of at once: a service most turns never use costs no
   * memory until one does. `wake()` then waits until it answers `GET <health>`.
   */
  lazy?: { health: string };
  /**
   * Its first run could not listen (it exits with EXIT_IN_USE, having said which port and which
   * variable moves it): called instead of restarting it, so `npm start` stops rather than run
   * with another program's service on that port.
   */
  onPortInUse?: () => void;
}

export interface Sibling {
  /**
   * Starts a lazy sibling if it is not running yet and resolves once it answers its health check
   * (or after 15 s: the caller's request then reports what is wrong). Resolves at once otherwise.
   */
  wake(): Promise<void>;
  stop(): Promise<void>;
  /**
   * Stops supervising without signalling: a child that exits from now on is not restarted (for a
   * signal the whole process group got, such as Ctrl-C, which the child handles itself).
   */
  release(): void;
}

/**
 * Runs a sibling service as a child process for `npm start`, forwarding its log lines and
 * restarting it (with growing delays) if it dies, so a crash of a sibling never takes the
 * assistant down.
 */
export function startSibling(spec: SiblingSpec, logger: Logger): Sibling {
  let child: ChildProcess | undefined;
  let stopping = false;
  let delay = 1_000;
  let timer: NodeJS.Timeout | undefined;
  let launches = 0;

  const launch = () => {
    launches++;
    const startedAt = Date.now();
    // stdin stays an open pipe: when this process dies, the child sees it end and exits.
    const current = spawn(process.execPath, [...process.execArgv, spec.entry], {
      env: { ...spec.env, STAVROBOT_EXIT_WITH_PARENT: "1" },
      stdio: ["pipe", "inherit", "inherit"],
    });
    child = current;
    current.once("exit", (code, signal) => {
      child = undefined;
      if (stopping) return;
      if (code === EXIT_IN_USE && launches === 1 && spec.onPortInUse) {
        stopping = true;
        spec.onPortInUse();
        return;
      }
      if (Date.now() - startedAt > 60_000) delay = 1_000;
      logger.error(`${spec.name} exited; restarting`, { code, signal, inMs: delay });
      timer = setTimeout(launch, delay);
      delay = Math.min(delay * 2, 30_000);
    });
  };
  if (!spec.lazy) launch();
  let woken: Promise<void> | undefined;

  return {
    wake() {
      const lazy = spec.lazy;
      if (!lazy) return Promise.resolve();
      woken ??= (async () => {
        if (stopping) return;
        logger.info(`starting ${spec.name} (first use)`);
        launch();
        await untilHealthy(lazy.health, 15_000);
      })();
      return woken;
    },
    release() {
      stopping = true;
      if (timer) clearTimeout(timer);
    },
    async stop() {
      stopping = true;
      if (timer) clearTimeout(timer);
      const current = child;
      if (!current) return;
      const exited = new Promise<void>((resolve) => current.once("exit", () => resolve()));
      current.kill("SIGTERM");
      const killer = setTimeout(() => current.kill("SIGKILL"), 5_000);
      await exited;
      clearTimeout(killer);
    },
  };
}

async function untilHealthy(url: string, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const answered = await fetch(url, { signal: AbortSignal.timeout(1_000) }).then(
      async (response) => (await response.arrayBuffer(), response.ok),
      () => false,
    );
    if (answered) return;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

/** `client`, waking its sibling (`Sibling.wake`) before every request. */
export function wakingClient(client: ServiceClient, wake: (() => Promise<void>) | undefined): ServiceClient {
  if (!wake) return client;
  return {
    baseUrl: client.baseUrl,
    async request(method, path, options) {
      await wake();
      return client.request(method, path, options);
    },
    async download(path, options) {
      await wake();
      return client.download(path, options);
    },
  };
}
