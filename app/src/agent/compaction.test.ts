import { describe, expect, it } from "vitest";
import { SummaryBackoff, truncationSummary } from "./compaction.js";

describe("summary backoff", () => {
  /** Of the next `n` compactions, which may ask the summariser. */
  const asks = (backoff: SummaryBackoff, n: number): boolean[] =>
    Array.from({ length: n }, () => backoff.mayAsk());

  it("asks every time while summaries work", () => {
    expect(asks(new SummaryBackoff(), 3)).toEqual([true, true, true]);
  });

  it("after failures in a row, skips 1, 2, 4 … compactions, at most 32; a summary starts over", () => {
    const fresh = new SummaryBackoff();
    const sequence: number[] = [];
    for (let failure = 0; failure < 8; failure++) {
      fresh.failed();
      let skips = 0;
      while (!fresh.mayAsk()) skips++;
      sequence.push(skips);
    }
    expect(sequence).toEqual([1, 2, 4, 8, 16, 32, 32, 32]);
    fresh.succeeded();
    expect(asks(fresh, 2)).toEqual([true, true]);
  });
});

describe("the note a truncation saves instead of a summary", () => {
  it("keeps the previous summary, says what was left out and where it is", () => {
    const text = truncationSummary("Decisions: buy oat milk.", Date.UTC(2025, 2, 4, 9, 30));
    expect(text).toBe(
      "Decisions: buy oat milk.\n\n[Older messages could not be summarised and were left out of the context " +
        "(the newest of them from 2025-03-04 09:30 UTC). They are still in the database, where db_search finds them.]",
    );
  });

  it("replaces an earlier note rather than piling notes up", () => {
    const first = truncationSummary(undefined, Date.UTC(2025, 0, 1));
    const second = truncationSummary(first, Date.UTC(2025, 0, 2));
    expect(second.match(/could not be summarised/g)).toHaveLength(1);
    expect(second).toContain("2025-01-02 00:00 UTC");
  });
});
