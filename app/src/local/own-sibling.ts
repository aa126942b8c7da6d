import { ServiceError, type ServiceClient } from "@stavrobot/common";

export interface SiblingIdentity {
  /** e.g. "plugin-runner". */
  name: string;
  /** The id `npm start` gave this instance and its siblings (STAVROBOT_INSTANCE_ID). */
  instance: string;
  /** The variable that moves the sibling to another port (PLUGIN_RUNNER_PORT…). */
  variable: string;
}

/** How long a sibling that showed to be this instance's own is trusted without asking again. */
const TRUSTED_MS = 30_000;

/**
 * `client`, used only while the sibling at its address shows to be this instance's own: its open
 * `GET /health` must carry the instance id `npm start` gave both. Asked before the first request,
 * after a request that found nobody there or was refused with 401 (the sibling restarted, or
 * another took its port), and when the last answer is older than TRUSTED_MS; a `GET /health`
 * through it is checked by its own answer. Another Stavrobot's sibling on that port answers every
 * call `Unauthorized` (its secret differs) or, sharing a secret, would serve another data
 * directory's plugins; either way the call fails saying so, and how to fix it.
 */
export function ownSiblingClient(client: ServiceClient, identity: SiblingIdentity): ServiceClient {
  let checked: { at: number; done: Promise<void> } | undefined;
  const refusal = () =>
    new ServiceError(
      `The ${identity.name} at ${client.baseUrl} is not this Stavrobot's: another program (or another ` +
        `Stavrobot) listens on its port. Set ${identity.variable} to a free port and restart.`,
      503,
    );
  const isOwn = (health: unknown) =>
    (health as { instance?: unknown } | null)?.instance === identity.instance;
  const check = async (): Promise<void> => {
    let health: unknown;
    try {
      health = (await client.request("GET", "/health", { retries: 0, timeoutMs: 2_000 })).data;
    } catch (error) {
      // Nobody there yet (a sibling starting): the request says what is wrong; ask next time.
      checked = undefined;
      if (error instanceof ServiceError && error.status === undefined) return;
      throw error;
    }
    if (isOwn(health)) return;
    checked = undefined;
    throw refusal();
  };
  const ensure = (): Promise<void> => {
    if (!checked || Date.now() - checked.at > TRUSTED_MS) checked = { at: Date.now(), done: check() };
    return checked.done;
  };
  return {
    baseUrl: client.baseUrl,
    async request(method, path, options) {
      if (method === "GET" && path === "/health") {
        const response = await client.request(method, path, options);
        if (!isOwn(response.data)) throw refusal();
        return response;
      }
      await ensure();
      try {
        return await client.request(method, path, options);
      } catch (error) {
        if (error instanceof ServiceError && (error.status === undefined || error.status === 401)) {
          checked = undefined;
          // A 401 from another instance's sibling: say whose it is rather than "Unauthorized".
          if (error.status === 401) await ensure();
        }
        throw error;
      }
    },
    async download(path, options) {
      await ensure();
      return client.download(path, options);
    },
  };
}

/** The siblings `npm start` runs for this instance: the id their /health shows, and each one's port variable. */
export interface OwnSiblings {
  instance: string;
  /** By sibling name: the variable that sets its port. */
  variables: Readonly<Record<string, string>>;
}

/** `client` checked by ownSiblingClient when `name` is one of `own`; as it is otherwise. */
export function checkedIfOwn(
  client: ServiceClient,
  name: string,
  own: OwnSiblings | undefined,
): ServiceClient {
  const variable = own?.variables[name];
  return own && variable ? ownSiblingClient(client, { name, instance: own.instance, variable }) : client;
}
