/**
 * Small measuring helpers shared by the benchmark's scenarios: timing a chat client, reading a
 * process tree's memory, medians.
 */
import { readFileSync, readdirSync } from "node:fs";
import { basicAuthHeader } from "@stavrobot/common";
import { textTurn, toolTurn, type FakeLlmServer, type RecordedRequest } from "@stavrobot/common/test-support";

export function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  if (sorted.length === 0) return NaN;
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2
    ? (sorted[middle] as number)
    : ((sorted[middle - 1] as number) + (sorted[middle] as number)) / 2;
}

export function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? NaN;
}

/** A chat endpoint: the product's `POST /chat` (with its password) or the floor's. */
export interface ChatTarget {
  url: string;
  password?: string;
}

export async function postChat(
  target: ChatTarget,
  message: string,
): Promise<{ status: number; response: string }> {
  const headers: Record<string, string> = { "Content-Type": "application/json" };
  if (target.password) headers.Authorization = basicAuthHeader(target.password);
  const answer = await fetch(`${target.url}/chat`, {
    method: "POST",
    headers,
    body: JSON.stringify({ message, source: "cli" }),
  });
  const body = (await answer.json()) as { response?: string; error?: string };
  return { status: answer.status, response: body.response ?? body.error ?? "" };
}

/**
 * The model's script for the turn benchmarks: a message starting "tool" gets one execute_sql call
 * then "done"; any other gets "done" at once. `observe` sees each request as it arrives (the fake
 * keeps none).
 */
export function scriptTurns(fake: FakeLlmServer, observe?: (request: RecordedRequest) => void): void {
  fake.setResponder((request) => {
    observe?.(request);
    // Nothing reads these requests back; keeping hundreds of history-sized bodies would only grow
    // the bench's own heap (and its collections) as a product round goes on, which the floor's
    // tiny requests never do.
    fake.requests.length = 0;
    const text = request.lastUserText;
    if (/(^|Text: )tool\b/.test(text)) return toolTurn("execute_sql", { query: "SELECT 1 AS one" });
    return textTurn("done");
  });
}

/** Times `count` turns of one kind (after `warmUp` untimed ones); returns each turn's milliseconds. */
export async function timeTurns(
  target: ChatTarget,
  kind: "tool" | "echo",
  count: number,
  warmUp = 5,
): Promise<number[]> {
  for (let i = 0; i < warmUp; i++) await expectDone(target, `${kind} warm-up ${i}`);
  const times: number[] = [];
  for (let i = 0; i < count; i++) {
    const start = performance.now();
    await expectDone(target, `${kind} ${i}`);
    times.push(performance.now() - start);
  }
  return times;
}

async function expectDone(target: ChatTarget, message: string): Promise<void> {
  const answer = await postChat(target, message);
  if (answer.status !== 200 || !answer.response.endsWith("done")) {
    throw new Error(`unexpected answer to "${message}": ${answer.status} ${answer.response.slice(0, 300)}`);
  }
}

/**
 * Resident memory of a process and all its descendants, in MB (Linux /proc): `total` sums each
 * process's RSS, which counts pages they share (the node executable's, ~40 MB a process) once per
 * process; `pss` shares each such page among the processes using it, so it sums to what the tree
 * holds together.
 */
export function treeRssMb(pid: number): { total: number; own: number; pss: number } {
  const children = new Map<number, number[]>();
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      const parent = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
      const list = children.get(parent) ?? [];
      list.push(Number(entry));
      children.set(parent, list);
    } catch {
      // Gone meanwhile.
    }
  }
  const rss = (id: number): number => {
    try {
      return Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${id}/status`, "utf8"))?.[1] ?? 0) / 1024;
    } catch {
      return 0;
    }
  };
  const pss = (id: number): number => {
    try {
      return Number(/^Pss:\s+(\d+)/m.exec(readFileSync(`/proc/${id}/smaps_rollup`, "utf8"))?.[1] ?? 0) / 1024;
    } catch {
      return 0;
    }
  };
  let total = 0;
  let shared = 0;
  const stack = [pid];
  while (stack.length > 0) {
    const id = stack.pop() as number;
    total += rss(id);
    shared += pss(id);
    stack.push(...(children.get(id) ?? []));
  }
  return { total, own: rss(pid), pss: shared };
}

/** Polls `check` until it resolves true; returns the milliseconds it took. */
export async function timeUntil(check: () => Promise<boolean>, timeoutMs = 120_000): Promise<number> {
  const start = performance.now();
  for (;;) {
    if (await check().catch(() => false)) return performance.now() - start;
    if (performance.now() - start > timeoutMs) throw new Error("timed out");
    await new Promise((resolve) => setTimeout(resolve, 2));
  }
}

export const ms = (value: number): string => (Number.isFinite(value) ? `${value.toFixed(1)} ms` : "n/a");
export const ratio = (value: number, base: number): string =>
  Number.isFinite(value) && Number.isFinite(base) && base > 0 ? `${(value / base).toFixed(2)}×` : "n/a";
