/**
 * Whether an accepted message's inbox row is written: the one place that knows. A row the idle
 * queue reserved (`InboxStore.reserve`) is still being written while its turn starts; every
 * other row is written before its message is accepted. The queue, the turn and the conversation
 * ask this instead of keeping their own flags.
 */
export class RowWrite {
  private state: "writing" | "written" | "failed";
  private readonly failures: ((error: unknown) => void)[] = [];
  /** Resolves once the row is written; rejects with the insert's error. */
  readonly done: Promise<void>;

  private constructor(write: Promise<void> | undefined) {
    this.state = write ? "writing" : "written";
    this.done = write ?? Promise.resolve();
    write?.then(
      () => {
        this.state = "written";
      },
      (error: unknown) => {
        this.state = "failed";
        for (const listener of this.failures.splice(0)) listener(error);
      },
    );
  }

  /** A row written before its message was accepted. */
  static written(): RowWrite {
    return new RowWrite(undefined);
  }

  /** A row still being written. */
  static writing(write: Promise<void>): RowWrite {
    return new RowWrite(write);
  }

  /** Whether the write is still under way (nothing of the turn may be written or heard meanwhile). */
  get pending(): boolean {
    return this.state === "writing";
  }

  /** Whether it is known to have failed (the message was never accepted). */
  get failed(): boolean {
    return this.state === "failed";
  }

  /** Whether the write failed, once it is settled. */
  async lost(): Promise<boolean> {
    return this.done.then(
      () => false,
      () => true,
    );
  }

  /** Called (once) if the write fails. */
  onFailure(listener: (error: unknown) => void): void {
    if (this.state === "writing") this.failures.push(listener);
  }
}
