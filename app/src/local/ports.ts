import { createServer } from "node:net";
import { EXIT_IN_USE, StartRefused } from "@stavrobot/common";

/** A port this start will listen on, and the variable that moves it. */
export interface PortClaim {
  port: number;
  host: string;
  variable: string;
}

/**
 * Refuses the start, in one line, when something already listens on any of the claimed ports,
 * naming each with its variable and suggesting free ones: a second `npm start` from another
 * checkout learns every port to move at once, before anything of it has started.
 */
export async function refusePortsInUse(claims: PortClaim[]): Promise<void> {
  const taken: PortClaim[] = [];
  for (const claim of claims) {
    if (claim.port !== 0 && (await inUse(claim.port, claim.host))) taken.push(claim);
  }
  if (taken.length === 0) return;
  const avoid = new Set(claims.map((claim) => claim.port));
  const suggestions: string[] = [];
  for (const claim of taken) {
    const free = await freeNear(claim, avoid);
    if (free !== undefined) {
      avoid.add(free);
      suggestions.push(`${claim.variable}=${free}`);
    }
  }
  const list = taken.map((claim) => `${claim.port} (${claim.variable})`).join(", ");
  const example = suggestions.length > 0 ? `, e.g. ${suggestions.join(" ")} npm start` : "";
  throw new StartRefused(
    `Ports in use by another program (or another Stavrobot): ${list}. Set ${
      taken.length === 1 ? "that variable to a free port" : "those variables to free ports"
    }${example}.`,
    EXIT_IN_USE,
  );
}

/** Whether listening on host:port fails because something listens there. */
function inUse(port: number, host: string): Promise<boolean> {
  return new Promise((resolve) => {
    const probe = createServer();
    probe.once("error", (error: NodeJS.ErrnoException) => resolve(error.code === "EADDRINUSE"));
    probe.listen({ port, host, exclusive: true }, () => probe.close(() => resolve(false)));
  });
}

/** A free port a hundred or a few hundred above the claimed one (3000 → 3100), if one is. */
async function freeNear(claim: PortClaim, avoid: Set<number>): Promise<number | undefined> {
  for (let step = 1; step <= 10; step++) {
    const port = claim.port + step * 100;
    if (port > 65535) return undefined;
    if (!avoid.has(port) && !(await inUse(port, claim.host))) return port;
  }
  return undefined;
}
