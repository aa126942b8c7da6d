import { describe, expect, it } from "vitest";
import { SerialLock } from "./serial-lock.js";

describe("SerialLock", () => {
  it("runs work one at a time, in order, and goes on after a failure", async () => {
    const lock = new SerialLock();
    const events: string[] = [];
    let release: () => void = () => undefined;
    const held = new Promise<void>((resolve) => (release = resolve));
    const first = lock.run(async () => {
      events.push("first starts");
      await held;
      events.push("first ends");
      return 1;
    });
    const failing = lock.run(async () => {
      events.push("second runs");
      throw new Error("second failed");
    });
    const third = lock.run(async () => {
      events.push("third runs");
      return 3;
    });
    await Promise.resolve();
    expect(events).toEqual(["first starts"]);
    release();
    expect(await first).toBe(1);
    await expect(failing).rejects.toThrow("second failed");
    expect(await third).toBe(3);
    expect(events).toEqual(["first starts", "first ends", "second runs", "third runs"]);
  });
});
