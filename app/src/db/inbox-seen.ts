import { withParts, type StatementPart } from "./database.js";

/** Answers received: their flag, as a statement part. */
export function seenChange(ids: number[]): StatementPart {
  return { sql: (p) => `UPDATE inbox SET seen = true WHERE id = ANY($${p}::int[])`, params: [ids] };
}

/** How long a "received" flag may wait for the next insert before it is written alone. */
const SEEN_WRITE_MS = 1_000;

/**
 * "Received" flags of answers not written yet (`InboxStore.noteSeen`): they ride the next
 * inbox insert, or are written alone after `SEEN_WRITE_MS`. A flag rides one statement at a
 * time: inserts run side by side under load, and two statements updating the same rows, each in
 * its own order, deadlock (the insert fails and its message is refused).
 */
export class SeenFlags {
  private readonly unwritten = new Set<number>();
  /** Flags a statement under way carries. */
  private readonly riding = new Set<number>();
  private timer: NodeJS.Timeout | undefined;

  /** `writeAlone` writes flags in a statement of their own (and calls `written` once it did). */
  constructor(private readonly writeAlone: (ids: number[]) => Promise<void>) {}

  /** Whether the flag is noted and not written yet (the answer counts as received). */
  has(id: number): boolean {
    return this.unwritten.has(id);
  }

  note(ids: number[]): void {
    if (ids.length === 0) return;
    for (const id of ids) this.unwritten.add(id);
    this.timer ??= setTimeout(() => {
      this.timer = undefined;
      // Failed (the database is away): kept, and tried again with the next insert or note.
      void this.flush().catch(() => undefined);
    }, SEEN_WRITE_MS).unref();
  }

  /** Writes the flags no statement carries now, alone; kept if that fails. */
  async flush(): Promise<void> {
    clearTimeout(this.timer);
    this.timer = undefined;
    const ids = this.claim();
    try {
      await this.writeAlone(ids);
    } finally {
      this.release(ids);
    }
  }

  /**
   * Runs a statement with the flags no other statement carries riding in it, as a part whose
   * parameters start at `firstParam`; they stay unwritten if it fails.
   */
  async ride<T>(
    firstParam: number,
    write: (parts: { sql: string; params: unknown[] }) => Promise<T>,
  ): Promise<T> {
    const ids = this.claim();
    try {
      const value = await write(withParts(ids.length > 0 ? [seenChange(ids)] : [], firstParam));
      this.written(ids);
      return value;
    } finally {
      this.release(ids);
    }
  }

  written(ids: number[]): void {
    for (const id of ids) this.unwritten.delete(id);
    if (this.unwritten.size === 0) {
      clearTimeout(this.timer);
      this.timer = undefined;
    }
  }

  private claim(): number[] {
    const ids = [...this.unwritten].filter((id) => !this.riding.has(id));
    for (const id of ids) this.riding.add(id);
    return ids;
  }

  private release(ids: number[]): void {
    for (const id of ids) this.riding.delete(id);
  }
}
