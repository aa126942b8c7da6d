import { connect as connectTcp, createServer, type Server, type Socket } from "node:net";

/**
 * Where `freePort` draws from: below the kernel's ephemeral ports (32768 and up on Linux, 49152 on
 * macOS), which it hands to every `listen(0)` and every outgoing connection.
 */
export const FREE_PORT_RANGE = { low: 10_000, high: 32_767 };

/**
 * A loopback port that was free a moment ago (connecting to it is refused until someone binds it),
 * for a service a test starts later. Drawn at random below the ephemeral ports and checked by
 * binding it: a port the kernel handed out and took back could be handed to any of the many
 * connections parallel tests open before the service listens on it (seen as EADDRINUSE), and one
 * drawn here can only be taken by another draw that picks the same one.
 */
export async function freePort(): Promise<number> {
  for (let attempt = 0; attempt < 100; attempt++) {
    const port =
      FREE_PORT_RANGE.low + Math.floor(Math.random() * (FREE_PORT_RANGE.high - FREE_PORT_RANGE.low + 1));
    if ((await listenOnce(port)) === port) return port;
  }
  return listenOnce(0);
}

/** Binds `port` (0: any) on loopback and lets it go; the port bound, or 0 when it was taken. */
function listenOnce(port: number): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", (error: NodeJS.ErrnoException) =>
      error.code === "EADDRINUSE" || error.code === "EACCES" ? resolve(0) : reject(error),
    );
    server.listen(port, "127.0.0.1", () => {
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
