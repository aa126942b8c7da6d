import { spawn, type ChildProcess } from "node:child_process";
import type { Logger } from "@stavrobot/common";

export interface SiblingSpec {
  name: string;
  /** Entry file, absolute; run with the same Node flags as this process (tsx in development). */
  entry: string;
  env: NodeJS.ProcessEnv;
}

export interface Sibling {
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

  const launch = () => {
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
      if (Date.now() - startedAt > 60_000) delay = 1_000;
      logger.error(`${spec.name} exited; restarting`, { code, signal, inMs: delay });
      timer = setTimeout(launch, delay);
      delay = Math.min(delay * 2, 30_000);
    });
  };
  launch();

  return {
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
