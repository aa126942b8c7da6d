import { connect as connectTcp, createServer, type Server, type Socket } from "node:net";

/** A loopback port that was free a moment ago (connecting to it is refused until someone binds it). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      server.close(() => resolve(typeof address === "object" && address ? address.port : 0));
    });
  });
}

export interface TcpProxy {
  /** The loopback port clients connect to. */
  port: number;
  /** Drops every open connection and refuses new ones, like a server that went down. */
  cut(): Promise<void>;
  /** Accepts connections again (on the same port). */
  restore(): Promise<void>;
  close(): Promise<void>;
}

/**
 * A TCP proxy in front of a real server (e.g. PostgreSQL), so a test can take that server away
 * and bring it back without touching the server itself, which other tests may share.
 */
export async function startTcpProxy(targetPort: number, targetHost = "127.0.0.1"): Promise<TcpProxy> {
  const sockets = new Set<Socket>();
  const server: Server = createServer((client) => {
    const upstream = connectTcp(targetPort, targetHost);
    for (const socket of [client, upstream]) {
      sockets.add(socket);
      socket.on("close", () => sockets.delete(socket));
      socket.on("error", () => {
        client.destroy();
        upstream.destroy();
      });
    }
    client.pipe(upstream);
    upstream.pipe(client);
  });
  const listenOn = (port: number) =>
    new Promise<number>((resolve, reject) => {
      server.once("error", reject);
      server.listen(port, "127.0.0.1", () => {
        server.off("error", reject);
        const address = server.address();
        resolve(typeof address === "object" && address ? address.port : port);
      });
    });
  const port = await listenOn(0);
  const stop = () =>
    new Promise<void>((resolve) => {
      if (!server.listening) return resolve();
      server.close(() => resolve());
      for (const socket of sockets) socket.destroy();
    });
  return {
    port,
    cut: stop,
    restore: async () => {
      if (!server.listening) await listenOn(port);
    },
    close: stop,
  };
}
