// A webhook receiver in plain Node: checks the signature over the raw body, then handles the event.
//
//   MAILFORGE_WEBHOOK_SECRET=whsec_… PORT=4000 npx tsx examples/webhook-receiver.ts
//
// Register http://<this host>:4000/ with POST /api/v1/webhooks; the secret is shown once, when it is created.

import { createServer } from "node:http";
import { verifyWebhook } from "@mailforge/sdk";

const secret = process.env.MAILFORGE_WEBHOOK_SECRET;
if (!secret) throw new Error("Set MAILFORGE_WEBHOOK_SECRET");

type WebhookEvent = { id: string; type: string; created_at: string; data: Record<string, unknown> };

const server = createServer(async (request, response) => {
  const chunks: Buffer[] = [];
  for await (const chunk of request) chunks.push(chunk as Buffer);
  // Verify the bytes as received: parsing and re-serialising the JSON first would change them.
  const rawBody = Buffer.concat(chunks).toString("utf8");
  const verified = await verifyWebhook(secret, request.headers, rawBody);
  if (!verified.ok) {
    response.writeHead(400, { "Content-Type": "text/plain" }).end(verified.reason);
    return;
  }
  const event = JSON.parse(rawBody) as WebhookEvent;
  // Deliveries are at least once: a real handler de-duplicates on event.id before acting.
  console.log(JSON.stringify({ id: event.id, type: event.type, message_id: event.data.message_id ?? null }));
  // Answer 2xx quickly; anything else is retried with back-off.
  response.writeHead(204).end();
});

server.listen(Number(process.env.PORT ?? 4000), "127.0.0.1", () => {
  const address = server.address();
  console.log(JSON.stringify({ listening: typeof address === "object" && address ? address.port : null }));
});
