import { readFile } from "node:fs/promises";
import { createServer, type Server } from "node:http";
import { basename, join } from "node:path";

export interface FileServer {
  url: string;
  close(): Promise<void>;
}

/**
 * A download site: `GET /<name>` answers the file `<dir>/<name>`, and 404 for anything else (no
 * subfolders, no hidden files, nothing outside `dir`). On loopback at a free port unless told.
 */
export async function serveDirectory(
  dir: string,
  options: { host?: string; port?: number } = {},
): Promise<FileServer> {
  const server: Server = createServer((req, res) => {
    const name = decodeURIComponent(new URL(req.url ?? "/", "http://localhost").pathname.slice(1));
    const notFound = () => res.writeHead(404).end(`no file ${name}`);
    if (req.method !== "GET" || !name || name !== basename(name) || name.startsWith(".")) return notFound();
    readFile(join(dir, name)).then((data) => {
      const type = name.endsWith(".zip") ? "application/zip" : "application/octet-stream";
      res.writeHead(200, { "content-type": type }).end(data);
    }, notFound);
  });
  const host = options.host ?? "127.0.0.1";
  await new Promise<void>((resolve) => server.listen(options.port ?? 0, host, resolve));
  const address = server.address();
  const port = typeof address === "object" && address ? address.port : 0;
  return {
    url: `http://${host}:${port}`,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}
