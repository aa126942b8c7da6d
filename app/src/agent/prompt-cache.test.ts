import { describe, expect, it } from "vitest";
import { SystemPromptCache } from "./prompt-cache.js";

/** Sources that count their reads; the plugin list is unreadable until `runnerUp` is set. */
function sources() {
  const reads = { knowledge: 0, plugins: 0, compose: 0 };
  const state = { runnerUp: false, memories: "m1" };
  return {
    reads,
    state,
    cache: new SystemPromptCache({
      knowledge: async () => {
        reads.knowledge++;
        return state.memories;
      },
      plugins: async () => {
        reads.plugins++;
        return state.runnerUp ? "Available plugins:\n- weather: forecasts" : undefined;
      },
      compose: ({ knowledge, plugins }) => {
        reads.compose++;
        return `${knowledge}|${plugins}`;
      },
    }),
  };
}

describe("SystemPromptCache", () => {
  it("after a recheck, reads the knowledge again only when its version changed", async () => {
    let version = "v1";
    let versionReads = 0;
    let memories = "m1";
    let knowledgeReads = 0;
    let composed = 0;
    const cache = new SystemPromptCache({
      knowledge: async () => (knowledgeReads++, memories),
      knowledgeVersion: async () => (versionReads++, version),
      plugins: async () => "",
      compose: ({ knowledge }) => (composed++, `prompt: ${knowledge}`),
    });
    const first = await cache.get();
    cache.recheck("knowledge");
    // Nothing changed: one version read, no knowledge read, the very same prompt.
    expect(await cache.get()).toBe(first);
    expect({ knowledgeReads, composed }).toEqual({ knowledgeReads: 1, composed: 1 });
    const checks = versionReads;
    // Without a recheck, the version is not asked again.
    await cache.get();
    expect(versionReads).toBe(checks);
    memories = "m2";
    version = "v2";
    cache.recheck("knowledge");
    expect(await cache.get()).toBe("prompt: m2");
    expect({ knowledgeReads, composed }).toEqual({ knowledgeReads: 2, composed: 2 });
  });

  it("keeps the very same prompt when knowledge read again is the same", async () => {
    const { cache, reads, state } = sources();
    state.runnerUp = true;
    const first = await cache.get();
    cache.invalidate("knowledge");
    expect(await cache.get()).toBe(first);
    expect(reads).toEqual({ knowledge: 2, plugins: 1, compose: 1 });
  });

  it("keeps the prompt between turns until a part is invalidated", async () => {
    const { cache, reads, state } = sources();
    state.runnerUp = true;
    expect(await cache.get()).toBe("m1|Available plugins:\n- weather: forecasts");
    expect(await cache.get()).toBe("m1|Available plugins:\n- weather: forecasts");
    expect(reads).toEqual({ knowledge: 1, plugins: 1, compose: 1 });
    state.memories = "m2";
    cache.invalidate("knowledge");
    expect(await cache.get()).toBe("m2|Available plugins:\n- weather: forecasts");
    expect(reads).toEqual({ knowledge: 2, plugins: 1, compose: 2 });
  });

  it("asks for the plugin list again on the next turn while the runner is not answering", async () => {
    const { cache, reads, state } = sources();
    expect(await cache.get()).toBe("m1|");
    state.runnerUp = true;
    expect(await cache.get()).toBe("m1|Available plugins:\n- weather: forecasts");
    expect(reads.plugins).toBe(2);
  });

  it("primes the prompt once the runner answers, so the first turn reads nothing", async () => {
    const { cache, reads, state } = sources();
    let checks = 0;
    const ready = async () => {
      checks++;
      if (checks === 3) state.runnerUp = true;
      return state.runnerUp;
    };
    expect(await cache.prime(ready, { delayMs: 1 })).toBe(true);
    expect(checks).toBe(3);
    // Not asked while the runner was down: no warning about an unreachable runner at each start.
    expect(reads.plugins).toBe(1);
    const before = { ...reads };
    expect(await cache.get()).toBe("m1|Available plugins:\n- weather: forecasts");
    expect(reads).toEqual(before);
  });

  it("gives up priming after its attempts, or when stopped, and the first turn then asks itself", async () => {
    const { cache, reads } = sources();
    expect(await cache.prime(async () => false, { attempts: 3, delayMs: 1 })).toBe(false);
    const stopped = new AbortController();
    stopped.abort();
    expect(await cache.prime(async () => true, { signal: stopped.signal })).toBe(false);
    expect(reads).toEqual({ knowledge: 0, plugins: 0, compose: 0 });
    expect(await cache.get()).toBe("m1|");
  });
});
