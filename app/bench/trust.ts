/**
 * The trust boundary's cost to the owner: a benign suite of ordinary multi-step tasks (the owner's
 * notes and reminders, a plugin's result then work on it, messages to people the owner names,
 * contacts answered by their agents) run through the app with a scripted model, counting the
 * tasks in which the owner was asked to approve a call. The gate's goal: at most 1 in 10.
 */
import { basicAuthHeader } from "@stavrobot/common";
import {
  FAKE_TELEGRAM_TOKEN,
  freePort,
  startFakeAnthropic,
  startFakeTelegram,
  textTurn,
  toolTurn,
  type FakeTurn,
} from "@stavrobot/common/test-support";
import { setTimeout as sleep } from "node:timers/promises";
import type { RunningApp } from "../src/app.js";
import { PASSWORD, chat, configFor, handOver, startTestApp } from "../test/helpers/app.js";
import { environment } from "./setup.js";

const OWNER = 1001;
const FRIEND = 2002;
const COUSIN = 4004;

interface Task {
  name: string;
  turns: FakeTurn[];
  run: (deps: {
    say: (text: string) => Promise<void>;
    contact: (chatId: number, text: string) => Promise<void>;
    plugin: (text: string) => Promise<void>;
  }) => Promise<void>;
}

const TASKS: Task[] = [
  {
    name: "a reminder",
    turns: [
      toolTurn("manage_cron", { action: "create", fire_at: "2030-01-01T09:00:00Z", note: "call the bank" }),
      textTurn("Set."),
    ],
    run: ({ say }) => say("remind me on 1 January 2030 at 9 to call the bank"),
  },
  {
    name: "a note",
    turns: [
      toolTurn("manage_knowledge", {
        action: "upsert",
        store: "memory",
        content: "passport is in the drawer",
      }),
      textTurn("Noted."),
    ],
    run: ({ say }) => say("remember that my passport is in the drawer"),
  },
  {
    name: "a plugin's result arrives",
    turns: [textTurn("Rain tomorrow, noted.")],
    run: ({ plugin }) => plugin("Forecast: rain tomorrow, 12°C."),
  },
  {
    name: "the forecast into the notes",
    turns: [
      toolTurn("manage_knowledge", { action: "upsert", store: "memory", content: "rain expected tomorrow" }),
      textTurn("Saved."),
    ],
    run: ({ say }) => say("put tomorrow's forecast in my notes"),
  },
  {
    name: "tell a named person about it",
    turns: [
      toolTurn("send_telegram_message", {
        recipient: "Cousin",
        message: "Rain tomorrow, bring an umbrella.",
      }),
      textTurn("Sent."),
    ],
    run: ({ say }) => say("tell Cousin it will rain tomorrow"),
  },
  {
    name: "a contact's agent answers them",
    turns: [
      toolTurn("send_telegram_message", { recipient: "Friend", message: "Yes, free at 8." }),
      textTurn("Answered."),
    ],
    run: ({ contact }) => contact(FRIEND, "are you free tonight?"),
  },
  {
    name: "a contact says thanks",
    turns: [textTurn("You're welcome!")],
    run: ({ contact }) => contact(FRIEND, "thanks!"),
  },
  {
    name: "search the history",
    turns: [toolTurn("db_search", { query: "forecast" }), textTurn("It said rain.")],
    run: ({ say }) => say("what did the weather plugin say?"),
  },
  {
    name: "a message the owner dictates",
    turns: [
      toolTurn("send_telegram_message", { recipient: "Friend", message: "See you at 8." }),
      textTurn("Sent."),
    ],
    run: ({ say }) => say("message Friend: see you at 8"),
  },
  {
    name: "a daily check",
    turns: [
      toolTurn("manage_cron", { action: "create", cron_expression: "0 7 * * *", note: "check the weather" }),
      textTurn("Scheduled."),
    ],
    run: ({ say }) => say("check the weather every morning at 7"),
  },
];

/** Until no turn runs or waits and the outbox is empty (the tests' `quiet`, without vitest). */
async function quiet(app: RunningApp): Promise<void> {
  for (let i = 0; i < 400; i++) {
    await app.queue.idle();
    const open = await app.db.query(
      `SELECT 1 FROM inbox WHERE status IN ('pending', 'processing')
       UNION ALL SELECT 1 FROM deliveries WHERE status = 'pending'`,
    );
    if (open.rows.length === 0) return;
    await sleep(50);
  }
  throw new Error("the app did not go quiet within 20 s");
}

/** The benign suite on the embedded database: how many of its tasks asked the owner. */
export async function benignRate(): Promise<string[]> {
  const fake = await startFakeAnthropic();
  const telegram = await startFakeTelegram();
  const channels =
    `[owner]\nname = "Ada"\ntelegram = ${OWNER}\n` +
    `[telegram]\nbotToken = "${FAKE_TELEGRAM_TOKEN}"\napiBaseUrl = "${telegram.url}"\n`;
  const port = await freePort();
  // Telegram's updates reach the webhook the app registers at its public address.
  const config = configFor(fake, "anthropic", channels).replace(
    /^\[queue\]/m,
    `publicHostname = "http://127.0.0.1:${port}"\n[queue]`,
  );
  const env = await environment("pglite", config);
  env.env.PORT = String(port);
  const app = await startTestApp(env);
  for (let i = 0; i < 200 && !telegram.webhook; i++) await sleep(50);
  try {
    await fetch(`http://127.0.0.1:${app.port}/api/settings/allowlist`, {
      method: "PUT",
      headers: { "Content-Type": "application/json", Authorization: basicAuthHeader(PASSWORD) },
      body: JSON.stringify({ signal: [], telegram: [FRIEND, COUSIN], whatsapp: [], email: [] }),
    });
    await app.db.query(
      `WITH agent AS (
         INSERT INTO agents (name, system_prompt, allowed_tools) VALUES ('friend', 'Help Friend.', '{send_telegram_message}') RETURNING id),
       friend AS (INSERT INTO interlocutors (display_name, agent_id) SELECT 'Friend', id FROM agent RETURNING id),
       cousin AS (INSERT INTO interlocutors (display_name) VALUES ('Cousin') RETURNING id)
       INSERT INTO interlocutor_identities (interlocutor_id, service, identifier)
       SELECT id, 'telegram', $1 FROM friend UNION ALL SELECT id, 'telegram', $2 FROM cousin`,
      [String(FRIEND), String(COUSIN)],
    );
    const deps = {
      say: async (text: string) => {
        await chat(app, text);
        await quiet(app);
      },
      contact: async (chatId: number, text: string) => {
        await telegram.deliverUpdate(telegram.textUpdate(chatId, text));
        await quiet(app);
      },
      plugin: async (text: string) => {
        await handOver(app, { source: "plugin:weather/forecast", message: text });
        await quiet(app);
      },
    };
    const askedIn: string[] = [];
    for (const task of TASKS) {
      const before = Number(
        (await app.db.query<{ n: string }>("SELECT count(*)::text AS n FROM approvals")).rows[0]?.n ?? 0,
      );
      fake.enqueue(...task.turns);
      await task.run(deps);
      const after = Number(
        (await app.db.query<{ n: string }>("SELECT count(*)::text AS n FROM approvals")).rows[0]?.n ?? 0,
      );
      if (after > before) askedIn.push(task.name);
    }
    return [
      "Trust boundary: the owner asked in benign multi-step tasks (scripted model, embedded database)",
      `  asked in ${askedIn.length} of ${TASKS.length} tasks (${((100 * askedIn.length) / TASKS.length).toFixed(0)} %; goal: at most 10 %)` +
        (askedIn.length > 0 ? `: ${askedIn.join(", ")}` : ""),
    ];
  } finally {
    await app.close();
    await telegram.close();
    await fake.close();
    await env.cleanup();
  }
}
