// Send through the SMTP relay with nodemailer: any SMTP client or framework mailer works the same way.
//
//   MAILFORGE_SMTP_USER=smtp_… MAILFORGE_SMTP_PASS=… npx tsx examples/smtp-nodemailer.ts you@example.org
//
// MAILFORGE_SMTP_HOST/PORT default to the local bridge (127.0.0.1:2587, STARTTLS). The local bridge uses a
// self-signed certificate: MAILFORGE_SMTP_INSECURE_TLS=1 accepts it (never set this against a real server).

import nodemailer from "nodemailer";

const user = process.env.MAILFORGE_SMTP_USER;
const pass = process.env.MAILFORGE_SMTP_PASS;
if (!user || !pass) throw new Error("Set MAILFORGE_SMTP_USER and MAILFORGE_SMTP_PASS (npm run dev prints them)");

const transport = nodemailer.createTransport({
  host: process.env.MAILFORGE_SMTP_HOST ?? "127.0.0.1",
  port: Number(process.env.MAILFORGE_SMTP_PORT ?? 2587),
  secure: false,
  requireTLS: true,
  auth: { user, pass },
  tls: { rejectUnauthorized: process.env.MAILFORGE_SMTP_INSECURE_TLS !== "1" },
});

const info = await transport.sendMail({
  from: process.env.MAILFORGE_FROM ?? "Demo <hello@demo.mailforge.test>",
  to: process.argv[2] ?? "someone@example.org",
  subject: "Hello over SMTP",
  text: "Sent with nodemailer through the Mailforge SMTP relay.",
});
// The relay answers `250 2.0.0 Ok: queued as msg_…`: the id works with GET /api/v1/messages/{id}.
console.log(JSON.stringify({ response: info.response, accepted: info.accepted }));
