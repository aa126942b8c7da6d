import { request } from "node:http";
import { basicAuthHeader } from "@stavrobot/common";
import { PASSWORD } from "./app.js";

export interface RawResponse {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  json: any;
}

/**
 * One request with the path sent exactly as given (fetch would normalise `..` away) and the
 * owner's password unless `auth` is null.
 */
export function raw(
  port: number,
  method: string,
  path: string,
  options: { headers?: Record<string, string>; body?: string; auth?: string | null } = {},
): Promise<RawResponse> {
  const headers: Record<string, string> = { ...options.headers };
  const auth = options.auth === undefined ? basicAuthHeader(PASSWORD) : options.auth;
  if (auth) headers.Authorization = auth;
  if (options.body !== undefined) headers["Content-Length"] = String(Buffer.byteLength(options.body));
  return new Promise((resolve, reject) => {
    const req = request({ host: "127.0.0.1", port, method, path, headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (chunk: Buffer) => chunks.push(chunk));
      res.on("end", () => {
        const text = Buffer.concat(chunks).toString("utf8");
        let json: unknown;
        try {
          json = JSON.parse(text);
        } catch {
          json = undefined;
        }
        resolve({ status: res.statusCode ?? 0, headers: res.headers, text, json });
      });
      res.on("error", reject);
    });
    req.on("error", reject);
    req.end(options.body);
  });
}

/** A JSON request as a browser page of `origin` would send it (with the owner's cached password). */
export function fromPage(
  port: number,
  method: string,
  path: string,
  body: unknown,
  origin: string | undefined,
): Promise<RawResponse> {
  return raw(port, method, path, {
    headers: { "Content-Type": "application/json", ...(origin === undefined ? {} : { Origin: origin }) },
    body: JSON.stringify(body),
  });
}
