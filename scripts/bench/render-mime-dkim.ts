// CPU cost of turning an accepted message into signed bytes: render → MIME → DKIM, with the DKIM key imported
// once (as a queue batch does), plus the MIME builder compared with nodemailer's MailComposer on the same message.
// Run: npx tsx scripts/bench/render-mime-dkim.ts [messages]
// Node's WebCrypto is OpenSSL, workerd's is BoringSSL: absolute numbers differ a little, the proportions hold.

import { cpuUsage } from "node:process";
import MailComposer from "nodemailer/lib/mail-composer";
import { createMimeMessage } from "mimetext/node";
import { generateDkimKeyPair, importDkimPrivateKey, signDkim } from "../../src/domain/sending/dkim.ts";
import { buildMessageId, buildMimeMessage, type MimeMessageInput } from "../../src/domain/sending/mime.ts";
import { renderTemplate } from "../../src/domain/sending/render.ts";

const count = Number(process.argv[2] ?? 2000);
const warmup = Math.min(200, count);

const template = {
  subject: "{{first_name|Hi}}, your {{plan}} receipt for {{month}}",
  html: `<!doctype html><html><body style="font-family:sans-serif">
<h1>Thanks, {{ first_name | friend }}!</h1>
<p>Your {{plan}} plan renews on {{renewal_date}}. Amount: <b>{{amount}}</b>.</p>
${"<p>Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor incididunt ut labore et dolore magna aliqua. {{company}}</p>\n".repeat(20)}
<p><a href="{{unsubscribe_url}}">Unsubscribe</a></p></body></html>`,
  text: `Thanks, {{first_name|friend}}!\n\nYour {{plan}} plan renews on {{renewal_date}}. Amount: {{amount}}.\n${"Lorem ipsum dolor sit amet, consectetur adipiscing elit. {{company}}\n".repeat(20)}\nUnsubscribe: {{unsubscribe_url}}\n`,
};
const attachment = btoa(String.fromCharCode(...new Uint8Array(20_000).map((_, i) => (i * 31) % 256)));

function variables(i: number) {
  return {
    first_name: `Ann & <Co> ${i}`,
    plan: "Pro",
    month: "March",
    renewal_date: "2025-04-01",
    amount: "€49.00",
    company: "Acme Inc.",
    unsubscribe_url: `https://mail.acme.test/u/tok${i}`,
  };
}

function messageInput(i: number, withAttachment = true): MimeMessageInput {
  const vars = variables(i);
  return {
    from: { name: "Acme Billing", address: "billing@acme.test" },
    to: [`customer${i}@example.org`],
    replyTo: "support@acme.test",
    subject: renderTemplate(template.subject, vars, { html: false }),
    html: renderTemplate(template.html, vars, { html: true }),
    text: renderTemplate(template.text, vars, { html: false }),
    attachments: withAttachment ? [{ filename: "receipt.pdf", contentBase64: attachment, contentType: "application/pdf" }] : [],
    headers: {
      "List-Unsubscribe": `<https://mail.acme.test/u/tok${i}>, <mailto:unsubscribe@acme.test?subject=tok${i}>`,
      "List-Unsubscribe-Post": "List-Unsubscribe=One-Click",
    },
    messageId: buildMessageId(`msg_${i}`, "billing@acme.test"),
    date: new Date(),
  };
}

/** CPU microseconds (user + system) per iteration. */
async function measure(label: string, iterations: number, run: (i: number) => unknown): Promise<number> {
  for (let i = 0; i < warmup; i++) await run(i);
  const start = cpuUsage();
  const wallStart = performance.now();
  for (let i = 0; i < iterations; i++) await run(i);
  const used = cpuUsage(start);
  const wall = performance.now() - wallStart;
  const perMessage = (used.user + used.system) / iterations;
  process.stdout.write(
    `${label.padEnd(46)} ${perMessage.toFixed(1).padStart(8)} µs CPU/msg   ${((wall * 1000) / iterations).toFixed(1).padStart(8)} µs wall/msg\n`,
  );
  return perMessage;
}

function mailComposerBuild(input: MimeMessageInput): Promise<Buffer> {
  const composer = new MailComposer({
    from: { name: input.from.name ?? "", address: input.from.address },
    to: input.to.map((to) => (typeof to === "string" ? to : to.address)),
    replyTo: typeof input.replyTo === "string" ? input.replyTo : input.replyTo?.address,
    subject: input.subject,
    html: input.html,
    text: input.text,
    attachments: (input.attachments ?? []).map((a) => ({
      filename: a.filename,
      content: a.contentBase64,
      encoding: "base64",
      contentType: a.contentType,
    })),
    headers: input.headers ?? {},
    messageId: input.messageId,
    date: input.date,
  });
  return new Promise((resolve, reject) => composer.compile().build((error, message) => (error ? reject(error) : resolve(message))));
}

/** mimetext as documented, with none of buildMimeMessage's encoding (its output is not sendable as is). */
function bareMimetext(input: MimeMessageInput): string {
  const message = createMimeMessage();
  message.setSender({ name: input.from.name ?? "", addr: input.from.address });
  message.setTo(input.to.map((to) => (typeof to === "string" ? to : to.address)));
  message.setSubject(input.subject);
  for (const [name, value] of Object.entries(input.headers ?? {})) message.setHeader(name, value);
  message.addMessage({ contentType: "text/plain", data: input.text ?? "" });
  message.addMessage({ contentType: "text/html", data: input.html ?? "" });
  for (const a of input.attachments ?? []) message.addAttachment({ filename: a.filename, contentType: a.contentType, data: a.contentBase64 });
  return message.asRaw();
}

async function main() {
  const pair = await generateDkimKeyPair();
  const key = await importDkimPrivateKey(pair.privateKeyPkcs8B64);
  const inputs = Array.from({ length: count + warmup }, (_, i) => messageInput(i));
  const raws = inputs.map((input) => buildMimeMessage(input));
  const sign = (raw: string) => signDkim(raw, { domain: "acme.test", selector: "s1", privateKey: key });
  process.stdout.write(
    `Node ${process.version}, ${count} messages: html ${inputs[0]!.html!.length} B, text ${inputs[0]!.text!.length} B, 15 KB attachment; raw ${raws[0]!.length} B; RSA-2048\n\n`,
  );

  await measure("render (subject + html + text)", count, (i) => messageInput(i));
  await measure("MIME: buildMimeMessage (mimetext + encoders)", count, (i) => buildMimeMessage(inputs[i]!));
  await measure("DKIM: signDkim rsa-sha256 (key imported once)", count, (i) => sign(raws[i]!));
  for (const withAttachment of [false, true]) {
    const total = await measure(`render + MIME + DKIM (${withAttachment ? "with" : "no"} attachment)`, count, async (i) => {
      const raw = buildMimeMessage(messageInput(i, withAttachment));
      return (await sign(raw)) + raw;
    });
    process.stdout.write(`  → ${(total / 1000).toFixed(3)} ms CPU per message (goal < 2 ms)\n`);
  }
  process.stdout.write("\n");

  const ours = await measure("MIME: buildMimeMessage", count, (i) => buildMimeMessage(inputs[i]!));
  const bare = await measure("MIME: bare mimetext (no body encoding)", count, (i) => bareMimetext(inputs[i]!));
  const composer = await measure("MIME: nodemailer MailComposer", count, (i) => mailComposerBuild(inputs[i]!));
  process.stdout.write(
    `  → MailComposer / buildMimeMessage = ${(composer / ours).toFixed(2)}x, MailComposer / bare mimetext = ${(composer / bare).toFixed(2)}x\n`,
  );
}

await main();
