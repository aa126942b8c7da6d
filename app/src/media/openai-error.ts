/**
 * A readable sentence for a failed OpenAI API call. OpenAI answers errors with
 * `{"error": {"message", "type", "param", "code"}}`; a proxy or gateway may send anything.
 */
export function describeOpenAiError(status: number, body: string): string {
  let message = body.trim().slice(0, 300);
  try {
    const parsed = JSON.parse(body) as { error?: { message?: unknown; code?: unknown } };
    if (typeof parsed.error?.message === "string") message = parsed.error.message;
  } catch {
    // Not JSON: keep the start of the text.
  }
  const hint = status === 429 || status >= 500 ? " This is usually temporary: try again later." : "";
  return `the provider answered HTTP ${status} (${message || "no details"}).${hint}`;
}

/** `fetch` failed before an answer: a timeout or a network error, said plainly. */
export function describeFetchFailure(error: unknown, timedOut: boolean, timeoutMs: number): string {
  if (timedOut) return `the provider did not answer within ${timeoutMs / 1000} s.`;
  const cause = error instanceof Error && error.cause instanceof Error ? `: ${error.cause.message}` : "";
  return `could not reach the provider (${error instanceof Error ? error.message : String(error)}${cause}).`;
}
