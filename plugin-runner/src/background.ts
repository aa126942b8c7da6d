import type { Logger } from "@stavrobot/common";
import { errorMessage } from "@stavrobot/common";

/** Work that outlives its HTTP request (async tools, async init), tracked so tests can wait for it. */
export class BackgroundTasks {
  private readonly tasks = new Set<Promise<void>>();

  constructor(private readonly logger: Logger) {}

  run(label: string, work: () => Promise<void>): void {
    const task = Promise.resolve()
      .then(work)
      .catch((error: unknown) =>
        this.logger.error("background task failed", { label, error: errorMessage(error) }),
      )
      .finally(() => this.tasks.delete(task));
    this.tasks.add(task);
  }

  get size(): number {
    return this.tasks.size;
  }

  /** Resolves once every task started so far (and any they start) has finished. */
  async idle(): Promise<void> {
    while (this.tasks.size > 0) await Promise.all([...this.tasks]);
  }
}
