import type { Server } from "node:http";
import { StartRefused } from "../errors.js";
import { listen } from "../http/serve.js";
import { EXIT_IN_USE } from "./env.js";

export interface ListenTarget {
  /** e.g. "plugin-runner"; starts the message. */
  service: string;
  port: number;
  host: string;
  /** The environment variable that sets this port where the user starts it (PORT, PLUGIN_RUNNER_PORT…). */
  variable: string;
}

/**
 * listen(), with the two failures a user fixes by choosing another port told in one line (a
 * StartRefused naming the port and the variable) instead of a stack trace.
 */
export async function listenOrRefuse(server: Server, target: ListenTarget): Promise<number> {
  try {
    return await listen(server, target.port, target.host);
  } catch (error) {
    throw listenRefusal(error, target) ?? error;
  }
}

/** The StartRefused for a port that cannot be listened on, or undefined for any other error. */
export function listenRefusal(error: unknown, target: ListenTarget): StartRefused | undefined {
  const code = (error as NodeJS.ErrnoException | undefined)?.code;
  const { service, port, host, variable } = target;
  if (code === "EADDRINUSE") {
    return new StartRefused(
      `${service}: port ${port} on ${host} is in use by another program (or another Stavrobot): ` +
        `set ${variable} to a free port, or stop the other program.`,
      EXIT_IN_USE,
    );
  }
  if (code === "EACCES") {
    return new StartRefused(
      `${service}: this user may not listen on port ${port} (below 1024 only root may): ` +
        `set ${variable} to a port above 1023.`,
      EXIT_IN_USE,
    );
  }
  return undefined;
}
