import { describe, expect, it } from "vitest";
import { diversify, reciprocalRankFusion } from "./search.js";
import { withoutEnvelope } from "./sources.js";

describe("reciprocal rank fusion (k = 60)", () => {
  it("sums 1 / (60 + rank) over the lists: found by both beats first in one", () => {
    // 1: 1/61 + 1/62; 3: 1/63 + 1/61; 2: 1/62; 4: 1/62.
    const fused = reciprocalRankFusion([[1, 2, 3], [3, 1], []]);
    expect(fused.map((entry) => entry.id)).toEqual([1, 3, 2]);
    expect(fused[0]?.score).toBeCloseTo(1 / 61 + 1 / 62, 12);
    expect(fused[1]?.score).toBeCloseTo(1 / 63 + 1 / 61, 12);
    expect(fused[2]?.score).toBeCloseTo(1 / 62, 12);
  });

  it("a result only one leg found keeps its place by rank in that leg", () => {
    expect(reciprocalRankFusion([[7, 8], [9]]).map((entry) => entry.id)).toEqual([7, 9, 8]);
  });
});

describe("MMR diversification", () => {
  const unit = (...values: number[]) => {
    const norm = Math.hypot(...values);
    return Float32Array.from(values, (value) => value / norm);
  };
  const day = (n: number) => new Date(Date.UTC(2026, 2, n));

  it("puts a different result before a near copy of one already chosen", () => {
    const vectors = new Map([
      [1, unit(1, 0)],
      [2, unit(1, 0.01)],
      [3, unit(0, 1)],
    ]);
    const ranked = [
      { id: 1, at: day(1), score: 0.033 },
      { id: 2, at: day(2), score: 0.032 },
      { id: 3, at: day(3), score: 0.03 },
    ];
    expect(diversify(ranked, vectors, 3).map((hit) => hit.id)).toEqual([1, 3, 2]);
    expect(diversify(ranked, vectors, 2).map((hit) => hit.id)).toEqual([1, 3]);
  });

  it("the newer wins where scores tie", () => {
    const ranked = [
      { id: 1, at: day(1), score: 0.02 },
      { id: 2, at: day(5), score: 0.02 },
      { id: 3, at: day(3), score: 0.02 },
    ];
    expect(diversify(ranked, new Map(), 3).map((hit) => hit.id)).toEqual([2, 3, 1]);
  });
});

describe("a turn's words", () => {
  it("leave out the envelope the model is given, the header says it once", () => {
    expect(
      withoutEnvelope(
        "Time: Sat 2026-11-28 17:28:59\nSource: cli\nSender: owner\nText: my sister's flat\nis nice",
      ),
    ).toBe("my sister's flat\nis nice");
    expect(
      withoutEnvelope(
        "Time: Sat 2026-11-28 17:28:59\nSource: telegram\nSender: Ada\nA file was received: a.pdf (application/pdf, 3 bytes), stored at x.",
      ),
    ).toBe("A file was received: a.pdf (application/pdf, 3 bytes), stored at x.");
    expect(withoutEnvelope("  plain words ")).toBe("plain words");
  });
});
