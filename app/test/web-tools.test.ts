import { createServer } from "node:http";
import type { IncomingMessage, Server, ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { gzipSync } from "node:zlib";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import type { AgentToolResult } from "@mariozechner/pi-agent-core";
import { closeServer, listen } from "@stavrobot/common";
import {
  anthropicErrorReply,
  citedText,
  freePort,
  searchBlocks,
  searchErrorBlocks,
  searchReply,
  startFakeAnthropicSearch,
} from "@stavrobot/common/test-support";
import type { FakeAnthropicSearch } from "@stavrobot/common/test-support";
import type { LookupAll } from "../src/net/public-address.js";
import { ToolError } from "../src/tools/result.js";
import { AnthropicWire } from "../src/model/anthropic/client.js";
import { createWebFetchTool } from "../src/tools/web-fetch.js";
import type { WebFetchDeps } from "../src/tools/web-fetch.js";
import { createWebSearchTool } from "../src/tools/web-search.js";

const KEY = "sk-ant-test";
const MODEL = "claude-test";
const A = { url: "https://a.example/answer", title: "Answer page" };
const B = { url: "https://b.example/other", title: "Other page" };

function text(result: AgentToolResult<unknown>): string {
  return result.content.map((part) => (part.type === "text" ? part.text : "")).join("");
}

let llm: FakeAnthropicSearch;
// The model client's connections, as the app gives the web tools.
const wire = new AnthropicWire();
const post = wire.postJson.bind(wire);
beforeAll(async () => {
  llm = await startFakeAnthropicSearch();
});
afterAll(async () => {
  wire.close();
  await llm.close();
});
beforeEach(() => llm.reset());

describe("web_search", () => {
  const search = (query: string, extra: { timeoutMs?: number; baseUrl?: string } = {}) =>
    createWebSearchTool({ apiKey: KEY, model: MODEL, baseUrl: llm.url, post, ...extra }).execute("id", {
      query,
    });

  it("answers with the text and the cited and found URLs, each once", async () => {
    llm.enqueue({
      content: [
        { type: "text", text: "I'll look that up." },
        ...searchBlocks("meaning of x", [B, A]),
        { type: "text", text: "According to the answer page, " },
        citedText("x is 42.", A),
        { type: "text", text: " Nothing else matters." },
      ],
      usage: { input_tokens: 1200, output_tokens: 80 },
    });
    const result = await search("What is x?");
    expect(text(result)).toBe(
      "I'll look that up.\n\nAccording to the answer page, x is 42. Nothing else matters.\n\n" +
        `Sources:\n- ${A.url} (${A.title})\n- ${B.url} (${B.title})`,
    );
    expect(result.details).toEqual({ usage: { input: 1200, output: 80 }, searches: 0 });
    const [request] = llm.requests;
    expect(request?.headers["x-api-key"]).toBe(KEY);
    expect(request?.headers["anthropic-version"]).toBe("2023-06-01");
    expect(request?.body).toMatchObject({
      model: MODEL,
      messages: [{ role: "user", content: "What is x?" }],
      tools: [{ type: "web_search_20250305", name: "web_search", max_uses: 5 }],
    });
    expect(request?.body.stream).toBeUndefined();
    expect(request?.body.system).toContain("source URL");
  });

  it("continues a paused turn by sending the assistant content back as it was", async () => {
    const paused = [...searchBlocks("first", [A])];
    llm.enqueue(
      { content: paused, stopReason: "pause_turn", usage: { input_tokens: 100, output_tokens: 10 } },
      { content: [citedText("Done: 42.", A)], usage: { input_tokens: 300, output_tokens: 20 } },
    );
    const result = await search("q");
    expect(llm.requests).toHaveLength(2);
    expect(llm.requests[1]?.body.messages).toEqual([
      { role: "user", content: "q" },
      { role: "assistant", content: paused },
    ]);
    expect(text(result)).toBe(`Done: 42.\n\nSources:\n- ${A.url} (${A.title})`);
    expect(result.details).toMatchObject({ usage: { input: 400, output: 30 } });
  });

  it("counts the searches the provider reports", async () => {
    llm.enqueue(
      searchReply([...searchBlocks("a", [A]), ...searchBlocks("b", [B]), { type: "text", text: "ok" }]),
    );
    expect((await search("q")).details).toMatchObject({ searches: 2 });
  });

  it("stops after five continuations and says the answer may be incomplete", async () => {
    for (let i = 0; i < 7; i++)
      llm.enqueue(searchReply([{ type: "text", text: `part ${i}.` }], "pause_turn"));
    const result = await search("q");
    expect(llm.requests).toHaveLength(6);
    expect(text(result)).toContain("part 0.part 1.");
    expect(text(result)).toContain(
      "[The search was stopped before it finished; the answer may be incomplete.]",
    );
  });

  it("turns provider errors into readable tool errors", async () => {
    llm.enqueue(anthropicErrorReply(529, "overloaded_error", "Overloaded"));
    const overloaded = search("q");
    await expect(overloaded).rejects.toBeInstanceOf(ToolError);
    await expect(overloaded).rejects.toThrow(
      "Web search failed: the model provider answered HTTP 529 (overloaded_error: Overloaded). This is usually temporary",
    );
    llm.enqueue(anthropicErrorReply(400, "invalid_request_error", "model: claude-test does not exist"));
    await expect(search("q")).rejects.toThrow(
      "HTTP 400 (invalid_request_error: model: claude-test does not exist).",
    );
    llm.enqueue({ status: 502, body: "<html>Bad gateway</html>" });
    await expect(search("q")).rejects.toThrow("HTTP 502 (<html>Bad gateway</html>)");
  });

  it("reports a search that found nothing, a timeout and an unreachable provider", async () => {
    llm.enqueue(searchReply(searchErrorBlocks("q", "too_many_requests")));
    await expect(search("q")).rejects.toThrow(
      "Web search returned no answer (search errors: too_many_requests)",
    );
    llm.enqueue({ ...searchReply([{ type: "text", text: "late" }]), gate: new Promise(() => {}) });
    await expect(search("q", { timeoutMs: 300 })).rejects.toThrow(
      "Web search failed: the model provider did not answer within 0.3 s.",
    );
    const closed = `http://127.0.0.1:${await freePort()}`;
    await expect(search("q", { baseUrl: closed })).rejects.toThrow("could not reach the model provider");
  });
});

// ---------------------------------------------------------------------------------------------
// web_fetch against real local HTTP servers
// ---------------------------------------------------------------------------------------------

const PAGE = `<!doctype html><html><head><title>Demo page</title><style>body{}</style>
<script>const secret = "do not read";</script></head>
<body><h1>Hello &amp; welcome</h1><p>The opening hours are <b>9&ndash;17</b>.</p>
<p>See <a href="/next">the next page</a>.</p></body></html>`;

function startServer(handler: (req: IncomingMessage, res: ServerResponse) => void) {
  const hits: string[] = [];
  const server: Server = createServer((req, res) => {
    hits.push(req.url ?? "");
    handler(req, res);
  });
  return listen(server, 0).then((port) => ({
    hits,
    origin: `http://127.0.0.1:${port}`,
    port,
    close: () =>
      new Promise<void>((resolve) => (server.close(() => resolve()), server.closeAllConnections())),
  }));
}

function pages(req: IncomingMessage, res: ServerResponse): void {
  const url = new URL(req.url ?? "/", "http://x");
  const hop = /^\/redirect\/(\d+)$/.exec(url.pathname);
  if (hop) {
    const left = Number(hop[1]);
    res.writeHead(302, { location: left > 0 ? `/redirect/${left - 1}` : "/page" }).end();
  } else if (url.pathname === "/page")
    res.writeHead(200, { "content-type": "text/html; charset=utf-8" }).end(PAGE);
  else if (url.pathname === "/gzip") {
    res.writeHead(200, { "content-type": "text/html", "content-encoding": "gzip" }).end(gzipSync(PAGE));
  } else if (url.pathname === "/plain")
    res.writeHead(200, { "content-type": "text/plain" }).end("  just text  ");
  else if (url.pathname === "/huge")
    res.writeHead(200, { "content-type": "text/plain" }).end("y".repeat(500_000));
  else if (url.pathname === "/big") {
    res.writeHead(200, { "content-type": "text/plain", "content-length": 5000 }).end("x".repeat(5000));
  } else if (url.pathname === "/big-chunked") {
    res.writeHead(200, { "content-type": "text/plain" });
    for (let i = 0; i < 10; i++) res.write("z".repeat(500));
    res.end();
  } else if (url.pathname === "/image")
    res.writeHead(200, { "content-type": "image/png" }).end(Buffer.alloc(10));
  else if (url.pathname === "/to")
    res.writeHead(302, { location: url.searchParams.get("location") ?? "/" }).end();
  else if (url.pathname === "/slow") res.writeHead(200, { "content-type": "text/plain" }).write("started");
  else res.writeHead(404).end("no");
}

describe("web_fetch", () => {
  let site: Awaited<ReturnType<typeof startServer>>;
  let inner: Awaited<ReturnType<typeof startServer>>;
  beforeAll(async () => {
    site = await startServer(pages);
    inner = await startServer((_req, res) =>
      res.writeHead(200, { "content-type": "text/plain" }).end("secret"),
    );
  });
  afterAll(async () => {
    await site.close();
    await inner.close();
  });
  beforeEach(() => {
    site.hits.length = 0;
    inner.hits.length = 0;
  });

  const tool = (deps: Partial<WebFetchDeps> = {}) =>
    createWebFetchTool({ apiKey: KEY, model: MODEL, baseUrl: llm.url, post, ...deps });
  const open = (deps: Partial<WebFetchDeps> = {}) => tool({ allowPrivateNetworks: true, ...deps });
  const run = (t: ReturnType<typeof tool>, url: string, task = "What are the opening hours?") =>
    t.execute("id", { url, task });

  it("reads the page as text and returns the model's answer to the task", async () => {
    llm.enqueue(searchReply([{ type: "text", text: "Open 9 to 17." }]));
    const result = await run(open(), `${site.origin}/page`);
    expect(text(result)).toBe(`From ${site.origin}/page:\n\nOpen 9 to 17.`);
    expect(result.details).toMatchObject({
      usage: { input: expect.any(Number), output: expect.any(Number) },
    });
    const [request] = llm.requests;
    expect(request?.body.model).toBe(MODEL);
    expect(request?.body.tools).toBeUndefined();
    const prompt = request?.body.messages[0].content as string;
    expect(prompt).toContain("Task: What are the opening hours?");
    expect(prompt).toContain(
      `<page>\nDemo page\n\n# Hello & welcome\n\nThe opening hours are 9–17.\n\n` +
        `See the next page (${site.origin}/next).\n</page>`,
    );
    expect(prompt).not.toContain("do not read");
  });

  it("reads gzip pages and plain text, and cuts very long text", async () => {
    llm.enqueue(...["a", "b", "c"].map((answer) => searchReply([{ type: "text", text: answer }])));
    await run(open(), `${site.origin}/gzip`);
    expect(llm.requests[0]?.body.messages[0].content).toContain("The opening hours are 9–17.");
    await run(open(), `${site.origin}/plain`);
    expect(llm.requests[1]?.body.messages[0].content).toContain("<page>\njust text\n</page>");
    await run(open(), `${site.origin}/huge`);
    const prompt = llm.requests[2]?.body.messages[0].content as string;
    expect(prompt).toContain("[The page was cut here: it has 500000 characters.]");
    expect(prompt.length).toBeLessThan(401_000);
  });

  it("follows up to five redirects", async () => {
    llm.enqueue(searchReply([{ type: "text", text: "ok" }]));
    // /redirect/4 → /3 → /2 → /1 → /0 → /page: five redirects.
    expect(text(await run(open(), `${site.origin}/redirect/4`))).toBe(`From ${site.origin}/page:\n\nok`);
    expect(site.hits).toHaveLength(6);
    await expect(run(open(), `${site.origin}/redirect/5`)).rejects.toThrow("redirects more than 5 times");
  });

  it("refuses pages that are too large, too slow, missing or not text", async () => {
    const small = open({ maxBytes: 1000 });
    await expect(run(small, `${site.origin}/big`)).rejects.toThrow(`${site.origin}/big is too large (5 KB)`);
    await expect(run(small, `${site.origin}/big-chunked`)).rejects.toThrow("is too large (over 1000 bytes)");
    await expect(run(open({ timeoutMs: 300 }), `${site.origin}/slow`)).rejects.toThrow(
      `${site.origin}/slow did not finish loading within 0.3 s.`,
    );
    const silentDns: LookupAll = () => new Promise(() => {});
    await expect(
      run(open({ timeoutMs: 300, lookup: silentDns }), "http://slow-dns.example/"),
    ).rejects.toThrow("http://slow-dns.example/ did not finish loading within 0.3 s.");
    await expect(run(open(), `${site.origin}/nothing`)).rejects.toThrow(
      `${site.origin}/nothing answered HTTP 404 Not Found.`,
    );
    await expect(run(open(), `${site.origin}/image`)).rejects.toThrow("Web fetch cannot read image/png");
    await expect(run(open(), "file:///etc/passwd")).rejects.toThrow(
      "Only http and https URLs can be fetched, not file:.",
    );
    expect(llm.requests).toHaveLength(0);
  });

  it("passes model errors on as tool errors", async () => {
    llm.enqueue(anthropicErrorReply(529, "overloaded_error", "Overloaded"));
    await expect(run(open(), `${site.origin}/page`)).rejects.toThrow(
      "Web fetch failed: the model provider answered HTTP 529",
    );
  });

  describe("by default, only public addresses", () => {
    /** A DNS that knows a few names; every other name does not exist. */
    function fakeDns(answers: Record<string, string>) {
      const asked: string[] = [];
      const lookup: LookupAll = async (host) => {
        asked.push(host);
        const address = answers[host];
        if (!address) throw Object.assign(new Error("not found"), { code: "ENOTFOUND" });
        return [{ address, family: address.includes(":") ? 6 : 4 }];
      };
      return { asked, lookup };
    }

    it.each([
      ["127.0.0.1", () => `${site.origin}/page`, "127.0.0.1 is not a public address (loopback)"],
      ["[::1]", () => `http://[::1]:${site.port}/page`, "::1 is not a public address (loopback)"],
      [
        "the metadata address",
        () => "http://169.254.169.254/latest/meta-data/",
        "not a public address (link-local)",
      ],
      ["localhost", () => "http://localhost/", "localhost is not a public address (this machine)"],
    ])("refuses %s before connecting", async (_name, url, message) => {
      await expect(run(tool(), url())).rejects.toThrow(message);
      expect(site.hits).toEqual([]);
      expect(llm.requests).toEqual([]);
    });

    it("refuses a public-looking name whose DNS answer is private", async () => {
      const dns = fakeDns({ "intranet.example.com": "10.0.0.7" });
      await expect(
        run(tool({ lookup: dns.lookup }), `http://intranet.example.com:${site.port}/page`),
      ).rejects.toThrow("intranet.example.com resolves to 10.0.0.7, which is not a public address (private)");
    });

    /*
     * Redirects to private addresses. The first hop must be a host that passes the real checks yet
     * is served by our loopback server. The fake DNS answers "public.example" with a public address
     * (93.184.216.34), which is checked for real; the `connectTo` seam then dials 127.0.0.1 for it,
     * as a NAT in front of that address would. Every later hop is checked by the same real rules:
     * a redirect to a loopback literal or to a name whose DNS answer is private must be refused
     * without the inner server (the "private" target) ever seeing a request. The first case shows
     * the setup itself works, so the refusals are meaningful.
     */
    const natted = (answers: Record<string, string>) => {
      const dns = fakeDns({ "public.example": "93.184.216.34", ...answers });
      const connectTo = (address: string) => (address === "93.184.216.34" ? "127.0.0.1" : address);
      return { dns, t: tool({ lookup: dns.lookup, connectTo }) };
    };
    const viaRedirect = (location: string) =>
      `http://public.example:${site.port}/to?location=${encodeURIComponent(location)}`;

    it("follows a redirect between public hosts, connecting to the checked address only", async () => {
      const { dns, t } = natted({});
      llm.enqueue(searchReply([{ type: "text", text: "fine" }]));
      const result = await run(t, viaRedirect(`http://public.example:${site.port}/page`));
      expect(text(result)).toBe(`From http://public.example:${site.port}/page:\n\nfine`);
      expect(site.hits).toHaveLength(2);
      // One lookup per hop: the socket reused the checked answer instead of asking DNS again.
      expect(dns.asked).toEqual(["public.example", "public.example"]);
    });

    it("refuses a redirect to a loopback address", async () => {
      const { t } = natted({});
      await expect(run(t, viaRedirect(`http://127.0.0.1:${inner.port}/secret`))).rejects.toThrow(
        "127.0.0.1 is not a public address (loopback)",
      );
      expect(site.hits).toHaveLength(1);
      expect(inner.hits).toEqual([]);
    });

    it("refuses a redirect to [::1]", async () => {
      // A server really listening on the IPv6 loopback: were the redirect followed, it would answer.
      const hits6: string[] = [];
      const inner6 = createServer((req, res) => {
        hits6.push(req.url ?? "");
        res.writeHead(200, { "content-type": "text/plain" }).end("secret");
      });
      await new Promise<void>((resolve, reject) => {
        inner6.once("error", reject);
        inner6.listen(0, "::1", () => resolve());
      });
      try {
        const port = (inner6.address() as AddressInfo).port;
        const { t } = natted({});
        await expect(run(t, viaRedirect(`http://[::1]:${port}/secret`))).rejects.toThrow(
          "::1 is not a public address (loopback)",
        );
        expect(site.hits).toHaveLength(1);
        expect(hits6).toEqual([]);
        expect(llm.requests).toEqual([]);
      } finally {
        await closeServer(inner6);
      }
    });

    it("refuses a redirect to the cloud metadata address", async () => {
      const { t } = natted({});
      await expect(
        run(t, viaRedirect("http://169.254.169.254/latest/meta-data/iam/security-credentials/")),
      ).rejects.toThrow("169.254.169.254 is not a public address (link-local)");
      expect(site.hits).toHaveLength(1);
      expect(llm.requests).toEqual([]);
    });

    it("refuses a redirect to a name whose DNS answer is private", async () => {
      const { t } = natted({ "metadata.example": "127.0.0.1" });
      await expect(run(t, viaRedirect(`http://metadata.example:${inner.port}/secret`))).rejects.toThrow(
        "metadata.example resolves to 127.0.0.1, which is not a public address (loopback)",
      );
      expect(inner.hits).toEqual([]);
      expect(llm.requests).toEqual([]);
    });
  });
});
