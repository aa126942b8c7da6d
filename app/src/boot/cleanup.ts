/**
 * What a start set up, undone newest first when the app closes (or when a start fails half-way:
 * what was set up so far). A step that fails does not keep the others from running.
 */
export class Cleanup {
  private readonly steps: (() => Promise<void> | void)[] = [];

  /** Runs before every step added earlier. */
  add(step: () => Promise<void> | void): void {
    this.steps.unshift(step);
  }

  async run(): Promise<void> {
    for (const step of this.steps) {
      try {
        await step();
      } catch {
        // The others still run.
      }
    }
  }
}
