import { describe, expect, it } from "vitest";
import { formatLocalTime } from "./zoned-date.js";
import { zonedParts } from "./zoned-date.js";

describe("dates in the owner's time zone", () => {
  const instant = new Date("2026-11-21T23:55:02Z");

  it("gives the parts in that zone, with a 24-hour clock", () => {
    expect(zonedParts(instant, "Europe/Athens")).toMatchObject({
      weekday: "Sun",
      year: "2026",
      month: "11",
      day: "22",
      hour: "01",
      minute: "55",
      second: "02",
    });
    expect(zonedParts(new Date("2026-11-21T00:00:00Z"), "UTC").hour).toBe("00");
  });

  it("writes the message header's time", () => {
    expect(formatLocalTime(instant, "UTC")).toBe("Sat 2026-11-21 23:55:02");
    expect(formatLocalTime(instant, "America/New_York")).toBe("Sat 2026-11-21 18:55:02");
  });
});
