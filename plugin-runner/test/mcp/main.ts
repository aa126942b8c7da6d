// The fixture server over stdio (bundled into one file by the tests, so a sandbox needs no node_modules).
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { buildFixtureServer } from "./fixture-server.js";

await buildFixtureServer().connect(new StdioServerTransport());
