/**
 * The id the next message takes when its turn starts while its row is written
 * (`InboxStore.reserve`): every inbox insert also draws the next value of the sequence, and offers
 * it here. On a server, inserts run side by side and return in any order, so the id offered last
 * may be older than one an insert that returned earlier gave its row. An id is kept only if it is
 * newer than every id offered or taken before: the message that takes it is then newer than every
 * entry already saved, and ids keep the order messages were accepted in (recovery and the missed
 * answers rely on it).
 */
export class NextInboxId {
  private id: number | undefined;
  /** The newest id offered (or taken) since start, or since `forget`. */
  private newest = 0;

  /** An id an insert drew ahead of need. */
  offer(id: number | undefined): void {
    if (id === undefined || id <= this.newest) return;
    this.newest = id;
    this.id = id;
  }

  /** The id for the next message, once; undefined when none is at hand. */
  take(): number | undefined {
    const id = this.id;
    this.id = undefined;
    return id;
  }

  /** The sequence may have been reset (SQL on `inbox`): start over from what the next insert draws. */
  forget(): void {
    this.id = undefined;
    this.newest = 0;
  }
}
