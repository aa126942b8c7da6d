/** Answers kept for the owner (a reminder, a plugin's result), as the client shows them and marks them seen. */
import { basicAuthHeader } from "@stavrobot/common";
import type { Following, KeptAnswer } from "./live.js";

/** What arrived while no console was open, from the event stream's first catch-up (or, for an older app, `/pending`). */
export async function showKeptAnswers(
  live: Following,
  baseUrl: string,
  password: string,
  stdout: NodeJS.WritableStream,
): Promise<void> {
  const wait = setTimeout(() => live.giveUp(), 10_000);
  const answers = await live.caughtUp;
  clearTimeout(wait);
  if (answers === undefined) return showPendingAnswers(baseUrl, password, stdout);
  if (answers.length === 0) return;
  stdout.write(`While you were away:\n\n${formatAnswers(answers)}\n\n`);
  await markSeen(
    baseUrl,
    password,
    answers.map((answer) => answer.id),
  );
}

/** Each answer under its title (else the first line of what it answers), and where that came from. */
export function formatAnswers(answers: KeptAnswer[]): string {
  return answers
    .map((answer) => {
      const about = answer.title || answer.message.split("\n")[0]?.slice(0, 200) || "(attachment)";
      // A firing's `cron:<id>` shows as `cron`. (The client imports nothing outside its folder, so
      // this is not audience.ts's shownSource.)
      const shown = answer.source?.startsWith("cron:") ? "cron" : answer.source;
      const from = shown && shown !== "cli" && shown !== "web" ? ` (${shown})` : "";
      return `> ${about}${from}\n${answer.response}`;
    })
    .join("\n\n");
}

/** Tells the app these answers were shown, so no console and no reply shows them again. */
export async function markSeen(baseUrl: string, password: string, ids: number[]): Promise<void> {
  try {
    await fetch(`${baseUrl.replace(/\/+$/, "")}/api/answers/seen`, {
      method: "POST",
      headers: { Authorization: basicAuthHeader(password), "Content-Type": "application/json" },
      body: JSON.stringify({ ids }),
      signal: AbortSignal.timeout(10_000),
    });
  } catch {
    // Not marked: shown once more later, which beats not at all.
  }
}

/**
 * Answers kept for the owner while no terminal was open (a plugin's result, a cron entry, with no
 * Telegram or Signal to send them to): printed when a session starts, then marked seen. A server
 * that cannot say (unreachable, older) is not an error here: the first reply will say so.
 */
export async function showPendingAnswers(
  baseUrl: string,
  password: string,
  stdout: NodeJS.WritableStream,
): Promise<void> {
  const base = baseUrl.replace(/\/+$/, "");
  try {
    const response = await fetch(`${base}/api/answers/pending`, {
      headers: { Authorization: basicAuthHeader(password) },
      signal: AbortSignal.timeout(10_000),
    });
    if (!response.ok) return;
    const body = (await response.json()) as { answers?: KeptAnswer[] };
    const answers = body.answers ?? [];
    if (answers.length === 0) return;
    stdout.write(`While you were away:\n\n${formatAnswers(answers)}\n\n`);
    await markSeen(
      baseUrl,
      password,
      answers.map((answer) => answer.id),
    );
  } catch {
    // Unreachable or not JSON: nothing to show.
  }
}
