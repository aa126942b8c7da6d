/**
 * The logger Baileys is given: pino's shape (`level`, the level methods, `child`), printing
 * nothing. Baileys logs every frame and key exchange; the bridge says what matters itself through
 * the service's logger. Building it here keeps pino's transports out of the bridge.
 */
export interface PinoLike {
  level: string;
  child(bindings: Record<string, unknown>): PinoLike;
  trace(...args: unknown[]): void;
  debug(...args: unknown[]): void;
  info(...args: unknown[]): void;
  warn(...args: unknown[]): void;
  error(...args: unknown[]): void;
  fatal(...args: unknown[]): void;
}

const nothing = (): void => undefined;

export function silentPinoLogger(): PinoLike {
  const logger: PinoLike = {
    level: "silent",
    child: () => logger,
    trace: nothing,
    debug: nothing,
    info: nothing,
    warn: nothing,
    error: nothing,
    fatal: nothing,
  };
  return logger;
}
