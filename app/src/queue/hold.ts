/**
 * Turns no person started (a cron prompt, a plugin's result) that the budget refuses for now: held
 * in memory, with their inbox entries still pending so a restart keeps them, and handed back when
 * the budget's period ends. Checked at least hourly, since a budget may also be raised (a restart
 * with a new config).
 */
export class HeldTurns<T> {
  private held: T[] = [];
  private timer: NodeJS.Timeout | undefined;

  /** `release` gets every held turn back at once, oldest first. */
  constructor(private readonly release: (turns: T[]) => void) {}

  hold(turn: T, until: Date): void {
    this.held.push(turn);
    if (this.timer) clearTimeout(this.timer);
    const delay = Math.min(Math.max(until.getTime() - Date.now(), 1_000), 3_600_000);
    this.timer = setTimeout(() => {
      this.timer = undefined;
      const turns = this.held;
      this.held = [];
      this.release(turns);
    }, delay);
    // A held turn does not keep the process alive: its entry is pending, a restart runs it.
    this.timer.unref();
  }
}
