import { randomUUID } from "node:crypto";
import { DOMAIN_ERROR_STATUS, DomainError, errorMessage } from "@stavrobot/common";
import type { InstallJob, InstallJobState, InstallResponse, Logger } from "@stavrobot/common";
import type { BackgroundTasks } from "./background.js";
import { parseInstallUrl } from "./sources.js";

/** What an install reports while it runs: the step it reached, and the init output once known. */
export type InstallProgress = (state: Extract<InstallJobState, "cloning" | "init">) => void;

/** The part of the lifecycle a job drives. */
export interface Installer {
  install(url: string, progress?: InstallProgress): Promise<InstallResponse>;
}

export interface InstallJobsDeps {
  installer: Installer;
  background: BackgroundTasks;
  logger: Logger;
  /** How long a finished job can still be read. */
  ttlMs?: number;
  /** Finished jobs kept at most (the oldest go first); running ones are always kept. */
  maxFinished?: number;
  now?: () => number;
}

const OUTPUT_CHARS = 8_000;

interface JobRecord {
  job: InstallJob;
  finishedAtMs?: number;
}

/**
 * Installs that answer at once and report their progress (`POST /install` with
 * `Prefer: respond-async`, then `GET /jobs/:id`), for the owner's settings page. Jobs live in
 * memory only: a restart forgets them (and ends the install with the process, as a blocking one
 * would); a finished job can be read for `ttlMs`. The install itself is the same code as the
 * blocking call, so both answer the same result or error.
 */
export class InstallJobs {
  private readonly jobs = new Map<string, JobRecord>();
  private readonly ttlMs: number;
  private readonly maxFinished: number;
  private readonly now: () => number;

  constructor(private readonly deps: InstallJobsDeps) {
    this.ttlMs = deps.ttlMs ?? 15 * 60_000;
    this.maxFinished = deps.maxFinished ?? 50;
    this.now = deps.now ?? Date.now;
  }

  /** Starts an install; a URL the blocking call would refuse is refused here too, before any job exists. */
  start(url: string): string {
    parseInstallUrl(url);
    this.prune();
    const id = randomUUID();
    const record: JobRecord = {
      job: { id, state: "cloning", url, startedAt: new Date(this.now()).toISOString() },
    };
    this.jobs.set(id, record);
    const progress: InstallProgress = (state) => {
      record.job.state = state;
    };
    this.deps.background.run(`install ${url}`, async () => {
      try {
        const result = await this.deps.installer.install(url, progress);
        const output = result.init_output ? cap(result.init_output) : undefined;
        this.finish(record, { state: "done", result, ...(output ? { output } : {}) });
      } catch (error) {
        this.finish(record, { state: "failed", ...this.describe(error, url) });
      }
    });
    return id;
  }

  get(id: string): InstallJob | undefined {
    this.prune();
    const record = this.jobs.get(id);
    return record ? { ...record.job } : undefined;
  }

  private finish(record: JobRecord, outcome: Partial<InstallJob>): void {
    record.finishedAtMs = this.now();
    record.job = { ...record.job, ...outcome, finishedAt: new Date(record.finishedAtMs).toISOString() };
  }

  /** The failure as the blocking call would have answered it; an unexpected error's text stays in the log. */
  private describe(error: unknown, url: string): { error: string; status: number } {
    if (error instanceof DomainError)
      return { error: error.message, status: DOMAIN_ERROR_STATUS[error.kind] };
    this.deps.logger.error("install job failed", { url, error: errorMessage(error) });
    return { error: "Internal server error", status: 500 };
  }

  private prune(): void {
    const finished = [...this.jobs.entries()]
      .filter(([, record]) => record.finishedAtMs !== undefined)
      .sort(([, a], [, b]) => (a.finishedAtMs ?? 0) - (b.finishedAtMs ?? 0));
    const expired = this.now() - this.ttlMs;
    let over = finished.length - this.maxFinished;
    for (const [id, record] of finished) {
      if ((record.finishedAtMs ?? 0) <= expired || over > 0) {
        this.jobs.delete(id);
        over--;
      }
    }
  }
}

function cap(text: string): string {
  return text.length > OUTPUT_CHARS ? "…" + text.slice(-OUTPUT_CHARS) : text;
}
