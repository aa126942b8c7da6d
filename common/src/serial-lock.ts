/**
 * Runs callbacks one at a time, in the order they were given; a callback that fails does not stop
 * the next. Used wherever work must not interleave: plugin installs and removals, runs that share
 * one directory, reads and writes of one file, useradd/userdel from one process.
 */
export class SerialLock {
  private tail: Promise<unknown> = Promise.resolve();

  run<T>(work: () => Promise<T>): Promise<T> {
    const next = this.tail.then(work, work);
    this.tail = next.catch(() => undefined);
    return next;
  }
}
