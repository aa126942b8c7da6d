import { describe, it, expect } from "vitest";
import { Router } from "./router.js";
import type { Handler, RouteMatch } from "./router.js";

const named =
  (name: string): Handler =>
  () => ({ json: { name } });

function found(match: RouteMatch): { handler: Handler; params: Record<string, string> } {
  if (match.kind !== "found") throw new Error(`expected a found match, got ${match.kind}`);
  return match;
}

describe("Router", () => {
  it("matches static routes by method and path, returning the registered handler", () => {
    const health = named("health");
    const chat = named("chat");
    const router = new Router().get("/health", health).post("/chat", chat);

    const h = found(router.match("GET", "/health"));
    expect(h.handler).toBe(health);
    expect(h.params).toEqual({});
    expect(found(router.match("POST", "/chat")).handler).toBe(chat);
  });

  it("treats the request method case-insensitively and ignores extra slashes", () => {
    const handler = named("x");
    const router = new Router().add("delete", "/items", handler);
    expect(found(router.match("DELETE", "/items")).handler).toBe(handler);
    expect(found(router.match("delete", "/items/")).handler).toBe(handler);
    expect(found(router.match("DELETE", "//items")).handler).toBe(handler);
  });

  it("does not match a static route with more or fewer segments", () => {
    const router = new Router().get("/a/b", named("ab"));
    expect(router.match("GET", "/a").kind).toBe("not-found");
    expect(router.match("GET", "/a/b/c").kind).toBe("not-found");
    expect(router.match("GET", "/a/c").kind).toBe("not-found");
  });

  it("captures :param segments and URL-decodes them", () => {
    const run = named("run");
    const router = new Router().post("/bundles/:name/tools/:tool/run", run);
    const m = found(router.match("POST", "/bundles/my%20bundle/tools/caf%C3%A9%2Fx/run"));
    expect(m.handler).toBe(run);
    expect(m.params).toEqual({ name: "my bundle", tool: "café/x" });
  });

  it("keeps a malformed percent-escape as-is instead of throwing", () => {
    const router = new Router().get("/files/:name", named("f"));
    expect(found(router.match("GET", "/files/100%")).params).toEqual({ name: "100%" });
  });

  it("a :param needs a segment to be present", () => {
    const router = new Router().get("/users/:id", named("u"));
    expect(router.match("GET", "/users").kind).toBe("not-found");
    expect(router.match("GET", "/users/").kind).toBe("not-found");
  });

  it("a trailing * captures the decoded rest of the path (possibly empty)", () => {
    const pages = named("pages");
    const router = new Router().get("/pages/*", pages);
    const deep = found(router.match("GET", "/pages/a/b%20c/index.html"));
    expect(deep.handler).toBe(pages);
    expect(deep.params).toEqual({ "*": "a/b c/index.html" });
    expect(found(router.match("GET", "/pages")).params).toEqual({ "*": "" });
    expect(router.match("GET", "/other/a").kind).toBe("not-found");
  });

  it("combines :param and * captures", () => {
    const router = new Router().get("/plugins/:name/files/*", named("pf"));
    expect(found(router.match("GET", "/plugins/weather/files/src/main.py")).params).toEqual({
      name: "weather",
      "*": "src/main.py",
    });
  });

  it("the first registered matching route wins", () => {
    const specific = named("specific");
    const generic = named("generic");
    const router = new Router().get("/items/new", specific).get("/items/:id", generic);
    expect(found(router.match("GET", "/items/new")).handler).toBe(specific);
    const other = found(router.match("GET", "/items/42"));
    expect(other.handler).toBe(generic);
    expect(other.params).toEqual({ id: "42" });
  });

  it("reports method-not-allowed with every allowed method when the path exists", () => {
    const router = new Router()
      .get("/things/:id", named("get"))
      .add("put", "/things/:id", named("put"))
      .post("/other", named("other"));
    const match = router.match("POST", "/things/1");
    expect(match).toEqual({ kind: "method-not-allowed", allowed: ["GET", "PUT"] });
  });

  it("reports not-found (not 405) when no route has the path", () => {
    const router = new Router().get("/things/:id", named("get"));
    expect(router.match("POST", "/nothing")).toEqual({ kind: "not-found" });
    expect(new Router().match("GET", "/")).toEqual({ kind: "not-found" });
  });

  it("a root route matches only the root", () => {
    const root = named("root");
    const router = new Router().get("/", root);
    expect(found(router.match("GET", "/")).handler).toBe(root);
    expect(router.match("GET", "/x").kind).toBe("not-found");
  });
});
