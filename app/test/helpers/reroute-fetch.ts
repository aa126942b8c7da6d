/**
 * Sends this process's `fetch` calls for the given origins to loopback servers, and refuses any
 * other non-loopback address, so a test exercises the real provider code (pi-ai's Anthropic
 * login and refresh, the Anthropic SDK) without the internet. pi-ai fixes those addresses
 * (the token endpoint, and a model with an authFile may not take a `baseUrl`), so the process's
 * `fetch` is the only place to point them elsewhere. Returns the function that restores `fetch`.
 */
export function rerouteFetch(routes: Record<string, string>): () => void {
  const original = globalThis.fetch;
  const rerouted: typeof fetch = (input, init) => {
    const url = new URL(typeof input === "string" || input instanceof URL ? input : input.url);
    const target = routes[url.origin];
    if (target) {
      const moved = new URL(`${url.pathname}${url.search}`, target).href;
      return original(input instanceof Request ? new Request(moved, input) : moved, init);
    }
    if (!["127.0.0.1", "localhost", "[::1]"].includes(url.hostname)) {
      return Promise.reject(new TypeError(`fetch failed: tests do not reach the internet (${url.origin})`));
    }
    return original(input, init);
  };
  globalThis.fetch = rerouted;
  return () => {
    globalThis.fetch = original;
  };
}
