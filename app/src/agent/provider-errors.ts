/** Provider errors worth retrying: not a 4xx (bad request, auth), except rate limits and timeouts. */
export function isRetryableProviderError(message: string): boolean {
  if (/no api key/i.test(message)) return false;
  const status = /^(\d{3})\b/.exec(message.trim())?.[1];
  if (status && status.startsWith("4")) return status === "429" || status === "408";
  return !/\b(401|403)\b.*(auth|key|permission)/i.test(message);
}
