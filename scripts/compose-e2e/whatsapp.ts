/**
 * The whatsapp-bridge's image in the stack: it becomes healthy, and the app reaches it over the
 * compose network (its open health route for the status and the doctor, its secret-protected link
 * route for the WhatsApp page) and reports WhatsApp's own state. No phone links here: the state
 * to see is `unlinked`.
 */
import type { HealthWatch } from "./health.js";
import type { Stack } from "./stack.js";

interface DoctorLine {
  name: string;
  state: string;
  detail: string;
}

export async function checkWhatsAppBridge(stack: Stack, health: HealthWatch): Promise<string> {
  await health.untilHealthy(["whatsapp-bridge"], 90_000);
  const status = (await (await stack.app("/api/status")).json()) as {
    channels?: { whatsapp?: { configured?: boolean; bridgeOk?: boolean; whatsapp?: string } };
  };
  const channel = status.channels?.whatsapp;
  if (!channel?.configured || channel.bridgeOk !== true || channel.whatsapp !== "unlinked")
    throw new Error(
      `/api/status says of WhatsApp ${JSON.stringify(channel)}, not the bridge up and unlinked`,
    );

  const deep = await stack.app("/health?deep=1");
  const doctor = (await deep.json()) as { checks?: DoctorLine[] };
  const line = doctor.checks?.find((entry) => entry.name === "whatsapp");
  if (!line || line.state !== "fail" || !line.detail.startsWith("WhatsApp is unlinked"))
    throw new Error(`/health?deep=1 (${deep.status}) says of WhatsApp ${JSON.stringify(line)}`);

  // Behind the internal secret the app and the bridge share through data/secrets.
  const page = await stack.app("/api/settings/whatsapp");
  const linking = (await page.json()) as { whatsapp?: string; hasQr?: boolean };
  if (page.status !== 200 || linking.whatsapp !== "unlinked" || linking.hasQr !== false)
    throw new Error(`/api/settings/whatsapp answered ${page.status}: ${JSON.stringify(linking)}`);
  return `status, doctor and WhatsApp page: unlinked (${line.detail})`;
}
