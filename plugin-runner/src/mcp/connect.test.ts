import { describe, expect, it } from "vitest";
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { InMemoryTransport } from "@modelcontextprotocol/sdk/inMemory.js";
import { newClient } from "./connect.js";

describe("the client's roots", () => {
  it("declares roots and answers roots/list with the paths of the moment as file:// URIs", async () => {
    let roots: string[] = ["/srv/notes", "/srv/mcp state/a file.txt"];
    const client = newClient(() => roots);
    const server = new Server({ name: "probe", version: "1.0.0" }, { capabilities: {} });
    const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
    await Promise.all([server.connect(serverSide), client.connect(clientSide)]);
    expect(server.getClientCapabilities()?.roots).toEqual({});
    expect((await server.listRoots()).roots).toEqual([
      { uri: "file:///srv/notes", name: "notes" },
      { uri: "file:///srv/mcp%20state/a%20file.txt", name: "a file.txt" },
    ]);
    roots = [];
    expect((await server.listRoots()).roots).toEqual([]);
    await client.close();
  });

  it("has none to give by default (a remote server)", async () => {
    const client = newClient();
    const server = new Server({ name: "probe", version: "1.0.0" }, { capabilities: {} });
    const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
    await Promise.all([server.connect(serverSide), client.connect(clientSide)]);
    expect((await server.listRoots()).roots).toEqual([]);
    await client.close();
  });
});
