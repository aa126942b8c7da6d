import { request as httpRequest } from "node:http";
import type { IncomingMessage } from "node:http";
import { request as httpsRequest } from "node:https";
import type { LookupFunction } from "node:net";
import { isIP } from "node:net";
import type { Readable } from "node:stream";
import { createBrotliDecompress, createGunzip, createInflate } from "node:zlib";
import { FetchRefusedError, resolvePublicAddress } from "./public-address.js";
import type { CheckedAddress, LookupAll } from "./public-address.js";

export interface FetchPageOptions {
  lookup: LookupAll;
  allowPrivateNetworks: boolean;
  /** Body size limit, after decompression. */
  maxBytes: number;
  /** For the whole fetch: every redirect hop and the body. */
  timeoutMs: number;
  maxRedirects: number;
  signal?: AbortSignal;
  /**
   * Test seam: the address to dial for a checked, resolved address (default: that address), like
   * a NAT in front of it. Lets a test stand a loopback server in for a public address while
   * every address check still runs for real. Applies to host names, not to IP literals.
   */
  connectTo?: (address: string) => string;
}

export interface FetchedPage {
  /** After redirects. */
  url: string;
  /** Lower-case media type without parameters; "" when the server sent none. */
  mediaType: string;
  charset: string | undefined;
  body: Buffer;
}

const REDIRECTS = new Set([301, 302, 303, 307, 308]);

/**
 * GETs a URL the way a careful crawler would on the owner's behalf: only http(s), only public
 * addresses (checked again on every redirect hop), a size and a time limit.
 *
 * Why a custom `lookup` on node:http(s) rather than `fetch`: the host name is resolved and
 * checked once, and the socket then connects to exactly that address (the `lookup` hands it
 * back), so a DNS answer that changes between check and connect (rebinding) cannot redirect the
 * request to a private address. The host name itself stays the request's host, so the Host
 * header, TLS SNI and certificate checks are Node's defaults. Node's built-in fetch takes no
 * lookup, and undici (which would) is not a dependency of the app.
 */
export async function fetchPage(url: string, options: FetchPageOptions): Promise<FetchedPage> {
  const deadline = AbortSignal.timeout(options.timeoutMs);
  const signal = options.signal ? AbortSignal.any([options.signal, deadline]) : deadline;
  try {
    let current = parseHttpUrl(url);
    for (let hop = 0; ; hop++) {
      // DNS takes no signal: stop waiting for it when time is up.
      const target = await untilAborted(resolvePublicAddress(current.hostname, options), signal);
      const response = await get(current, target, signal, options.connectTo);
      const location = response.headers.location;
      if (REDIRECTS.has(response.statusCode ?? 0) && location) {
        response.destroy();
        if (hop >= options.maxRedirects) {
          throw new FetchRefusedError(`${url} redirects more than ${options.maxRedirects} times.`);
        }
        current = parseHttpUrl(location, current);
        continue;
      }
      const status = response.statusCode ?? 0;
      if (status >= 400) {
        response.destroy();
        throw new FetchRefusedError(
          `${current.href} answered HTTP ${status} ${response.statusMessage ?? ""}`.trim() + ".",
        );
      }
      const [mediaType = "", ...params] = (response.headers["content-type"] ?? "").split(";");
      const charset = params.map((p) => /^\s*charset\s*=\s*"?([^";\s]+)/i.exec(p)?.[1]).find(Boolean);
      const body = await readBody(response, options.maxBytes, current.href);
      return { url: current.href, mediaType: mediaType.trim().toLowerCase(), charset, body };
    }
  } catch (error) {
    if (deadline.aborted && !options.signal?.aborted) {
      throw new FetchRefusedError(`${url} did not finish loading within ${options.timeoutMs / 1000} s.`);
    }
    throw error;
  }
}

function untilAborted<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  return new Promise((resolve, reject) => {
    const abort = () => reject(signal.reason);
    if (signal.aborted) return abort();
    signal.addEventListener("abort", abort, { once: true });
    promise.then(resolve, reject).finally(() => signal.removeEventListener("abort", abort));
  });
}

function parseHttpUrl(text: string, base?: URL): URL {
  let url: URL;
  try {
    url = new URL(text, base);
  } catch {
    throw new FetchRefusedError(`${text} is not a valid URL.`);
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") {
    throw new FetchRefusedError(`Only http and https URLs can be fetched, not ${url.protocol}.`);
  }
  return url;
}

function get(
  url: URL,
  target: CheckedAddress,
  signal: AbortSignal,
  connectTo: ((address: string) => string) | undefined,
): Promise<IncomingMessage> {
  const address = connectTo?.(target.address) ?? target.address;
  const family = isIP(address) || target.family;
  // Node 20 asks with `all: true` when it races IPv4 and IPv6 (autoSelectFamily): answer both forms.
  const lookup = ((_host: string, opts: { all?: boolean }, callback: (...args: unknown[]) => void) => {
    if (opts.all) callback(null, [{ address, family }]);
    else callback(null, address, family);
  }) as unknown as LookupFunction;
  const send = url.protocol === "https:" ? httpsRequest : httpRequest;
  return new Promise((resolve, reject) => {
    const req = send(url, {
      method: "GET",
      lookup,
      agent: false,
      signal,
      headers: {
        "user-agent": "Mozilla/5.0 (compatible; Stavrobot web_fetch)",
        accept: "text/html,application/xhtml+xml,text/plain;q=0.9,*/*;q=0.5",
        "accept-encoding": "gzip, deflate, br",
      },
    });
    req.once("response", resolve);
    req.once("error", (error) => reject(connectError(url, error)));
    req.end();
  });
}

function connectError(url: URL, error: Error): Error {
  if (error.name === "AbortError") return error;
  const code = (error as { code?: unknown }).code;
  return new FetchRefusedError(
    `Could not load ${url.href} (${typeof code === "string" ? code : error.message}).`,
  );
}

/** Reads the (decompressed) body, refusing it as soon as it passes `maxBytes`. */
async function readBody(response: IncomingMessage, maxBytes: number, url: string): Promise<Buffer> {
  const tooLarge = (size: string) =>
    new FetchRefusedError(`${url} is too large (${size}); web_fetch reads at most ${formatBytes(maxBytes)}.`);
  const declared = Number(response.headers["content-length"]);
  const encoding = (response.headers["content-encoding"] ?? "identity").trim().toLowerCase();
  if (encoding === "identity" && declared > maxBytes) {
    response.destroy();
    throw tooLarge(formatBytes(declared));
  }
  const stream = decoded(response, encoding, url);
  const chunks: Buffer[] = [];
  let size = 0;
  try {
    for await (const chunk of stream) {
      size += (chunk as Buffer).length;
      if (size > maxBytes) throw tooLarge(`over ${formatBytes(maxBytes)}`);
      chunks.push(chunk as Buffer);
    }
  } catch (error) {
    if (error instanceof FetchRefusedError || (error as Error).name === "AbortError") throw error;
    throw new FetchRefusedError(`Could not read ${url} (${(error as Error).message}).`);
  } finally {
    response.destroy();
    stream.destroy();
  }
  return Buffer.concat(chunks);
}

function decoded(response: IncomingMessage, encoding: string, url: string): Readable {
  const decoder =
    encoding === "gzip" || encoding === "x-gzip"
      ? createGunzip()
      : encoding === "deflate"
        ? createInflate()
        : encoding === "br"
          ? createBrotliDecompress()
          : undefined;
  if (!decoder) {
    if (encoding === "identity") return response;
    response.destroy();
    throw new FetchRefusedError(`${url} is sent with an encoding web_fetch cannot read (${encoding}).`);
  }
  response.on("error", (error) => decoder.destroy(error));
  return response.pipe(decoder);
}

export function formatBytes(bytes: number): string {
  if (bytes >= 1024 * 1024) return `${Math.round((bytes / (1024 * 1024)) * 10) / 10} MB`;
  if (bytes >= 1024) return `${Math.round(bytes / 1024)} KB`;
  return `${bytes} bytes`;
}
