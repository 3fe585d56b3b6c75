// `npm run dkim:check <id>`: checks the DKIM signatures of a message the running dev stack delivered, the way a
// receiving server would. The bytes come from the dev mail sink (what the provider received) and the keys from the
// dev DoH server (what the world would see in DNS); mailauth, an implementation independent of ours, verifies them.
//
// <id> is our message id (msg_…, as POST /send or the relay's "queued as" returned it), a sink message id (digits)
// or a Message-ID header value. It finds the running stack on whatever ports it was given (the addresses `npm run dev`
// writes to its state directory); ports exported as for `npm run dev` win, and DEV_STATE_DIR names another stack.
import { existsSync, readFileSync } from "node:fs";
import { setTimeout as sleep } from "node:timers/promises";
import { type DKIMResult, dkimVerify, dmarc } from "mailauth";
import { z } from "zod";
import { devStackAddresses, devStackUrl } from "./lib/dev-vars.ts";

const port = z.coerce.number().int().min(1).max(65535);
const env = z
  .object({
    WORKER_PORT: port.default(8787),
    DOH_PORT: port.default(8053),
    SINK_HTTP_PORT: port.default(8025),
    DEV_STATE_DIR: z.string().min(1).default(".dev"),
    DEV_HOST: z.string().default("127.0.0.1"),
    /** An API key of the account that sent the message; defaults to the demo key `npm run dev` seeded. */
    MAILFORGE_API_KEY: z.string().optional(),
  })
  .parse(process.env);

// A port exported as for `npm run dev` wins; otherwise the addresses the running stack wrote, then the defaults.
const stack = devStackAddresses();
const sinkUrl = process.env.SINK_HTTP_PORT || !stack ? `http://${env.DEV_HOST}:${env.SINK_HTTP_PORT}` : stack.sinkUrl;
const dohUrl = process.env.DOH_PORT || !stack ? `http://${env.DEV_HOST}:${env.DOH_PORT}/dns-query` : stack.dohUrl;
const workerUrl = process.env.WORKER_PORT
  ? `http://${env.DEV_HOST}:${env.WORKER_PORT}`
  : (stack?.workerUrl ?? devStackUrl() ?? `http://${env.DEV_HOST}:${env.WORKER_PORT}`);
// A message accepted a moment ago may still be on the queue; delivery in the dev stack takes about a second.
const waitForDeliveryMs = 15_000;

type SinkSummary = { id: string; message_id: string | null; mail_from: string; rcpt_to: string[]; subject: string | null; received_at: string };

class CheckError extends Error {}

async function getJson<T>(url: string, init?: RequestInit): Promise<T> {
  let response: Response;
  try {
    response = await fetch(url, init);
  } catch {
    throw new CheckError(`nothing answers at ${url}: is \`npm run dev\` running (with the same ports and DEV_STATE_DIR)?`);
  }
  if (!response.ok) throw new CheckError(`${url} answered ${response.status}: ${await response.text()}`);
  return (await response.json()) as T;
}

const bareMessageId = (value: string) => value.trim().replace(/^<|>$/g, "");

/** The sink messages the argument names, without asking the Worker. */
async function findInSink(id: string): Promise<SinkSummary[]> {
  const { data } = await getJson<{ data: SinkSummary[] }>(`${sinkUrl}/api/messages`);
  if (/^\d+$/.test(id)) return data.filter((message) => message.id === id);
  const wanted = bareMessageId(id).toLowerCase();
  return data.filter((message) => {
    const header = message.message_id ? bareMessageId(message.message_id).toLowerCase() : "";
    // Our composed messages carry Message-ID <msg_…@sender-domain> (mime.ts buildMessageId).
    return header === wanted || (wanted.startsWith("msg_") && header.startsWith(`${wanted}@`));
  });
}

function apiKey(): string | undefined {
  if (env.MAILFORGE_API_KEY) return env.MAILFORGE_API_KEY;
  const demoPath = `${env.DEV_STATE_DIR}/demo.json`;
  if (!existsSync(demoPath)) return undefined;
  return z.object({ api_key: z.string() }).parse(JSON.parse(readFileSync(demoPath, "utf8"))).api_key;
}

type ApiMessage = { status: string; smtp_response: string | null };

/**
 * A relayed message keeps its own Message-ID, so the sink cannot be searched by ours. The Worker keeps the provider's
 * reply to the final dot, and the sink's reply names its message: `250 Ok: queued as <sink id>`.
 */
async function findThroughWorker(id: string): Promise<{ sinkIds: string[]; status?: string }> {
  const key = apiKey();
  if (!key) return { sinkIds: [] };
  const response = await fetch(`${workerUrl}/api/v1/messages/${encodeURIComponent(id)}`, { headers: { Authorization: `Bearer ${key}` } }).catch(
    () => undefined,
  );
  if (!response?.ok) return { sinkIds: [] };
  const message = (await response.json()) as ApiMessage;
  const sinkId = /queued as (\d+)/.exec(message.smtp_response ?? "")?.[1];
  return { sinkIds: sinkId ? [sinkId] : [], status: message.status };
}

async function locate(id: string): Promise<string[]> {
  const deadline = Date.now() + waitForDeliveryMs;
  let status: string | undefined;
  for (;;) {
    const found = (await findInSink(id)).map((message) => message.id);
    if (found.length > 0) return found;
    if (id.startsWith("msg_")) {
      const viaWorker = await findThroughWorker(id);
      if (viaWorker.sinkIds.length > 0) return viaWorker.sinkIds;
      status = viaWorker.status;
      // Nothing more will reach the sink for a message in one of these states.
      if (status && ["bounced", "failed", "suppressed", "delivered", "unknown"].includes(status)) break;
    }
    if (Date.now() > deadline) break;
    await sleep(500);
  }
  const why = status ? ` (the message is ${status}${status === "delivered" ? ": test-mode messages are simulated, never sent" : ""})` : "";
  throw new CheckError(`no message in the dev mail sink (${sinkUrl}) matches ${id}${why}`);
}

// mailauth asks for TXT records only here (DKIM keys, DMARC policies); the answers come from the dev DoH server, as
// the Worker's own DNS checks do, TXT strings kept apart as a resolver returns them.
async function resolveTxt(name: string, type: string): Promise<string[][]> {
  const notFound = (code: string) => Object.assign(new Error(`${code} ${name} ${type}`), { code });
  if (type !== "TXT") throw notFound("ENODATA");
  const answer = await getJson<{ Status: number; Answer?: { type: number; data: string }[] }>(`${dohUrl}?name=${encodeURIComponent(name)}&type=TXT`);
  if (answer.Status === 3) throw notFound("ENOTFOUND");
  if (answer.Status !== 0) throw notFound("ESERVFAIL");
  const records = (answer.Answer ?? [])
    .filter((record) => record.type === 16)
    .map((record) => [...record.data.matchAll(/"((?:[^"\\]|\\.)*)"/g)].map((match) => (match[1] ?? "").replace(/\\(.)/g, "$1")));
  if (records.length === 0) throw notFound("ENODATA");
  return records;
}

function describeSignature(result: DKIMResult): string {
  // mailauth's typings name fields its results do not have (algorithm); the signature's own tags are reliable.
  const algorithm = (result.status.header?.a as string | undefined) ?? "?";
  const verdict =
    result.status.result === "pass" ? "PASS" : `FAIL (${result.status.result}${result.status.comment ? `: ${result.status.comment}` : ""})`;
  const alignment = result.status.aligned ? "aligned with the From domain" : "not aligned with the From domain";
  return `  DKIM ${verdict}  d=${result.signingDomain} s=${result.selector ?? "?"} a=${algorithm}, ${alignment}`;
}

async function check(sinkId: string): Promise<boolean> {
  const summary = await getJson<SinkSummary>(`${sinkUrl}/api/messages/${sinkId}`);
  const raw = Buffer.from(await (await fetch(`${sinkUrl}/api/messages/${sinkId}/raw`)).arrayBuffer());
  console.log(`Sink message ${sinkId}: "${summary.subject ?? ""}" from ${summary.mail_from || "<>"} to ${summary.rcpt_to.join(", ")}`);
  console.log(`  Message-ID ${summary.message_id ?? "(none)"}, ${raw.length} bytes, received ${summary.received_at}`);

  const verified = await dkimVerify(raw, { resolver: resolveTxt });
  const signatures = verified.results.filter((result) => result.status.result !== "none");
  if (signatures.length === 0) console.log("  DKIM FAIL: the message carries no DKIM-Signature");
  for (const result of signatures) console.log(describeSignature(result));

  const passed = signatures.filter((result) => result.status.result === "pass");
  const policy = await dmarc({
    headerFrom: verified.headerFrom,
    // SPF is judged by the receiving server against the IP that connects to it (your smarthost's), which this local
    // copy cannot reproduce; DMARC is therefore evaluated on DKIM alone, as a receiver does when SPF does not align.
    spfDomains: [],
    dkimDomains: passed.map((result) => ({
      id: result.id,
      domain: result.signingDomain,
      aligned: result.status.aligned,
      underSized: result.status.underSized,
    })),
    resolver: resolveTxt,
  });
  if (policy) {
    const verdict = policy.status.result === "pass" ? "PASS" : policy.status.result.toUpperCase();
    console.log(`  DMARC ${verdict} for ${verified.headerFrom.join(", ")} (p=${policy.p || "none"}; judged on DKIM alone)`);
  }
  console.log("  SPF not evaluated here: receivers check it against your smarthost's IP (SPF_INCLUDE must cover it)");
  return signatures.length > 0 && passed.length === signatures.length;
}

const id = process.argv[2]?.trim();
if (!id) {
  console.error("usage: npm run dkim:check <msg_… | sink message id | Message-ID>");
  process.exit(2);
}
try {
  const results = [];
  for (const sinkId of await locate(id)) results.push(await check(sinkId));
  const ok = results.every(Boolean);
  console.log(ok ? "\nDKIM passes." : "\nDKIM does not pass.");
  process.exit(ok ? 0 : 1);
} catch (error) {
  if (!(error instanceof CheckError)) throw error;
  console.error(`dkim:check: ${error.message}`);
  process.exit(2);
}
