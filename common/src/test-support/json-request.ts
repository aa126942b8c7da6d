/** Response bodies in tests: loosely typed so assertions stay readable. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type Json = any;

export type JsonRequest = (
  method: string,
  path: string,
  body?: unknown,
  secret?: string,
) => Promise<{ status: number; body: Json }>;

/**
 * Requests to a service as its siblings make them: `Authorization: Bearer <secret>` and a JSON
 * body (a string is sent as it is). The answer's body is parsed as JSON when it is JSON.
 */
export function jsonRequester(baseUrl: string, defaultSecret: string): JsonRequest {
  return async (method, path, body, secret = defaultSecret) => {
    const response = await fetch(baseUrl + path, {
      method,
      headers: { Authorization: `Bearer ${secret}`, "Content-Type": "application/json" },
      body: body === undefined ? undefined : typeof body === "string" ? body : JSON.stringify(body),
    });
    const text = await response.text();
    let parsed: unknown = text;
    try {
      parsed = JSON.parse(text);
    } catch {
      // Not JSON: the text itself.
    }
    return { status: response.status, body: parsed };
  };
}
