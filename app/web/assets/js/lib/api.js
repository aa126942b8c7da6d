// The pages' one way to call the app's JSON API. The browser sends the owner's Basic credentials
// by itself (same origin); state-changing calls are JSON, which the API requires.

export class ApiError extends Error {
  constructor(status, message, body) {
    super(message);
    this.name = "ApiError";
    this.status = status;
    this.body = body;
  }
}

/** Calls the API; resolves with the parsed body, or rejects with an ApiError carrying its `error`. */
export async function api(path, { method = "GET", body, headers = {} } = {}) {
  const init = { method, headers: { Accept: "application/json", ...headers }, credentials: "same-origin" };
  if (body !== undefined) {
    init.body = JSON.stringify(body);
    init.headers["Content-Type"] = "application/json";
  }
  let response;
  try {
    response = await fetch(path, init);
  } catch {
    throw new ApiError(0, "The assistant could not be reached. Is it running?");
  }
  const text = await response.text();
  let data = text;
  try {
    data = text ? JSON.parse(text) : undefined;
  } catch {
    // Not JSON: keep the text.
  }
  if (!response.ok) {
    const message =
      data && typeof data === "object" && typeof data.error === "string"
        ? data.error
        : `The request failed (HTTP ${response.status}).`;
    throw new ApiError(response.status, message, data);
  }
  return data;
}

export const postJson = (path, body, headers) => api(path, { method: "POST", body, headers });
