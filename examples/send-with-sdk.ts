// Send an email with the SDK and read it back.
//
//   npm run build -w sdk
//   MAILFORGE_API_KEY=sk_live_… npx tsx examples/send-with-sdk.ts you@example.org
//
// MAILFORGE_URL defaults to the local stack (`npm run dev`), MAILFORGE_FROM to its verified demo domain.

import { createClient } from "@mailforge/sdk";

const apiKey = process.env.MAILFORGE_API_KEY;
if (!apiKey) throw new Error("Set MAILFORGE_API_KEY (npm run dev prints the demo key)");
const to = process.argv[2] ?? "someone@example.org";

const mf = createClient({ baseUrl: process.env.MAILFORGE_URL ?? "http://127.0.0.1:8787", apiKey });

const sent = await mf.POST("/api/v1/send", {
  body: {
    from: process.env.MAILFORGE_FROM ?? "Demo <hello@demo.mailforge.test>",
    to: [to],
    subject: "Hello {{name|there}}",
    html: "<p>Hello {{name|there}}, this came through the Mailforge SDK.</p>",
    variables: { name: "Ann" },
    tags: ["sdk-example"],
  },
  // A retried request with the same key is answered with the first answer instead of sending twice.
  headers: { "Idempotency-Key": crypto.randomUUID() },
});
if (sent.error) {
  console.error(`send refused (${sent.response.status} ${sent.error.code}): ${sent.error.message}`);
  process.exit(1);
}

// Delivery happens on a queue: poll the message until it has left the queue.
let status: string = sent.data.status;
for (let attempt = 0; attempt < 30 && ["queued", "sending", "deferred"].includes(status); attempt++) {
  await new Promise((resolve) => setTimeout(resolve, 500));
  const message = await mf.GET("/api/v1/messages/{id}", { params: { path: { id: sent.data.id } } });
  if (message.error) throw new Error(`${message.error.code}: ${message.error.message}`);
  status = message.data.status;
}
console.log(JSON.stringify({ id: sent.data.id, credits_charged: sent.data.credits_charged, status }));
