import { performance } from "node:perf_hooks";
import type { Logger } from "@stavrobot/common";

/** Durations of the start-up's phases, each logged at debug level as it ends. */
export class StartupPhases {
  private readonly startedAt = performance.now();
  private last = this.startedAt;

  constructor(private readonly logger: Logger) {}

  /** Ends the phase running since the previous mark (or the start). */
  end(phase: string): void {
    const now = performance.now();
    this.logger.debug("start-up phase", { phase, ms: round(now - this.last) });
    this.last = now;
  }

  /** Milliseconds since the start. */
  total(): number {
    return round(performance.now() - this.startedAt);
  }
}

function round(ms: number): number {
  return Math.round(ms * 10) / 10;
}
