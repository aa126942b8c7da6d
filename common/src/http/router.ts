import type { IncomingMessage, ServerResponse } from "node:http";

export interface RequestContext {
  req: IncomingMessage;
  res: ServerResponse;
  url: URL;
  /** Named segments (`:name`) and the rest of the path for a trailing `*` (as `params["*"]`). */
  params: Record<string, string>;
}

/** What a handler returns; `undefined` means the handler already wrote the response itself. */
export interface Reply {
  status?: number;
  json?: unknown;
  body?: string | Buffer;
  headers?: Record<string, string>;
}

export type Handler = (ctx: RequestContext) => Promise<Reply | undefined> | Reply | undefined;

/** What a route says of itself where it is declared. */
export interface RouteOptions {
  /**
   * Anyone may call it: the listener's guard lets it through without credentials (a handler
   * that serves both kinds, such as a page public or not, checks for itself).
   */
  public?: boolean;
}

interface Route {
  method: string;
  segments: string[];
  handler: Handler;
  public: boolean;
}

export type RouteMatch =
  | { kind: "found"; handler: Handler; params: Record<string, string>; public: boolean }
  | { kind: "method-not-allowed"; allowed: string[] }
  | { kind: "not-found" };

/** A tiny method + path router. Patterns: `/bundles/:name/tools/:tool/run`, `/pages/*`. */
export class Router {
  private readonly routes: Route[] = [];

  add(method: string, pattern: string, handler: Handler, options: RouteOptions = {}): this {
    this.routes.push({
      method: method.toUpperCase(),
      segments: split(pattern),
      handler,
      public: options.public === true,
    });
    return this;
  }

  get(pattern: string, handler: Handler, options?: RouteOptions): this {
    return this.add("GET", pattern, handler, options);
  }

  post(pattern: string, handler: Handler, options?: RouteOptions): this {
    return this.add("POST", pattern, handler, options);
  }

  /** Adds every route of another router (after this one's). */
  include(other: Router): this {
    this.routes.push(...other.routes);
    return this;
  }

  match(method: string, pathname: string): RouteMatch {
    const parts = split(pathname);
    const allowed: string[] = [];
    for (const route of this.routes) {
      const params = matchSegments(route.segments, parts);
      if (!params) continue;
      if (route.method === method.toUpperCase()) {
        return { kind: "found", handler: route.handler, params, public: route.public };
      }
      allowed.push(route.method);
    }
    return allowed.length > 0 ? { kind: "method-not-allowed", allowed } : { kind: "not-found" };
  }
}

function split(path: string): string[] {
  return path.split("/").filter((part) => part.length > 0);
}

function matchSegments(pattern: string[], parts: string[]): Record<string, string> | undefined {
  const params: Record<string, string> = {};
  for (let i = 0; i < pattern.length; i++) {
    const segment = pattern[i] as string;
    if (segment === "*") {
      params["*"] = parts.slice(i).map(decode).join("/");
      return params;
    }
    const part = parts[i];
    if (part === undefined) return undefined;
    if (segment.startsWith(":")) params[segment.slice(1)] = decode(part);
    else if (segment !== part) return undefined;
  }
  return parts.length === pattern.length ? params : undefined;
}

function decode(part: string): string {
  try {
    return decodeURIComponent(part);
  } catch {
    return part;
  }
}
