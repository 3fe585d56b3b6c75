import { hmac } from "@noble/hashes/hmac.js";
import { sha256 } from "@noble/hashes/sha2.js";
import { bytesToHex } from "@noble/hashes/utils.js";
import { z } from "zod";

// The one contract between the Worker's /internal/relay routes (src/internal/bridge-api.ts) and the SMTP bridge's client
// (smtp-bridge/src/worker-client.ts): paths, request and response bodies, and the request signature. Both import
// this file, so a change to either side that the other would not understand fails to typecheck.
//
// The mailbox prober's contract (smtp-bridge/src/prober/ and src/domain/verification/mailbox.ts) is at the end.
//
// It runs in workerd and in Node 22 (the bridge's Docker image strips the types itself): web platform globals only,
// no node: modules, no imports of other project files.

/** Where the Worker mounts the relay routes. */
export const RELAY_BASE_PATH = "/internal/relay";

/**
 * The largest body the Worker takes on /messages. The raw message travels base64-encoded (4/3) inside JSON, so the
 * bridge derives its own DATA ceiling from this (`maxRawMessageBytes`).
 */
export const RELAY_MESSAGES_MAX_BODY_BYTES = 40 * 1024 * 1024;

// What the JSON around `raw` may take at most: ids, MAIL FROM and the recipients, with room to spare.
const ENVELOPE_ALLOWANCE_BYTES = 64 * 1024;

/** The largest message (DATA bytes) whose /messages request still fits under RELAY_MESSAGES_MAX_BODY_BYTES. */
export const maxRawMessageBytes = Math.floor(((RELAY_MESSAGES_MAX_BODY_BYTES - ENVELOPE_ALLOWANCE_BYTES) / 4) * 3);

const id = z.string().min(1).max(64);
const mailbox = z
  .string()
  .min(3)
  .max(320)
  .regex(/^[^@\s]+@[^@\s]+$/, "Not an email address");
const queuedOrSuppressed = z.enum(["queued", "suppressed"]);

/** AUTH: the username and password the client gave. */
export const AuthRequest = z.object({ username: z.string().min(1).max(200), password: z.string().min(1).max(200) });
/**
 * The credential's identity, and the recipient cap the pipeline will enforce, so the bridge can refuse the
 * recipient past it at RCPT TO (452 4.5.3) without a cap of its own.
 */
export const AuthResponse = z.object({
  credential_id: id,
  account_id: id,
  mode: z.enum(["live", "test"]),
  max_recipients: z.number().int().positive(),
});

/** MAIL FROM: may this credential's account send from that address's domain? */
export const SenderRequest = z.object({ credential_id: id, mail_from: mailbox });
export const SenderResponse = z.object({ credential_id: id, account_id: id, domain: z.object({ id, name: z.string().min(1) }) });

/**
 * End of DATA: the message exactly as received, base64 in `raw`. The recipient cap is not repeated here:
 * acceptMessage enforces it (after de-duplication) for every door, this one included.
 */
export const MessageRequest = z.object({
  credential_id: id,
  mail_from: mailbox,
  rcpt_to: z.array(z.string().min(1).max(320)).min(1),
  raw: z
    .string()
    .min(1)
    .regex(/^[A-Za-z0-9+/]+={0,2}$/, "Not base64"),
});
/**
 * The stored message. `replayed`: this submission (same credential, envelope and bytes) was already accepted, and
 * this is that first acceptance's answer; nothing new was stored or charged (src/domain/sending/accept-relayed.ts).
 */
export const MessageResponse = z.object({
  id: id,
  recipients: z.array(z.object({ email: z.string(), status: queuedOrSuppressed })),
  credits_charged: z.number().int().nonnegative(),
  status: queuedOrSuppressed,
  test_mode: z.boolean(),
  replayed: z.boolean(),
});

/** Every refusal, in the API's error shape. */
export const ErrorResponse = z.object({
  message: z.string(),
  code: z.string(),
  errors: z.record(z.string(), z.array(z.string())).optional(),
});

/** Each route: its path under RELAY_BASE_PATH, its bodies, and the status that means success. */
export const relayEndpoints = {
  auth: { path: "/auth", request: AuthRequest, response: AuthResponse, status: 200 },
  sender: { path: "/sender", request: SenderRequest, response: SenderResponse, status: 200 },
  messages: { path: "/messages", request: MessageRequest, response: MessageResponse, status: 202 },
} as const;

// Every request carries `X-Bridge-Signature: t=<unix>,v2=<hex>`, where hex is HMAC-SHA256 keyed with BRIDGE_SECRET
// over `<t>.<METHOD>.<path>.<hex SHA-256 of the body as sent>` (the Standard Webhooks / Stripe shape, with the
// request line added). The method and path bind a signature to one route: a captured /auth request cannot be
// replayed to /messages, nor /messages to /sender (whose schema would take its body). The timestamp bounds a replay
// to the tolerance window; within it, /auth and /sender only read, and /messages is de-duplicated by the Worker (the
// same submission answers with the first stored message), so no nonce store is needed. The body is signed through
// its digest, byte for byte as sent, so the bridge hashes it as it streams the parts and nothing is re-serialised
// before checking. (v1 signed `<t>.<body>` alone; its headers are refused as malformed.)

export const BRIDGE_SIGNATURE_HEADER = "X-Bridge-Signature";
export const BRIDGE_SIGNATURE_TOLERANCE_SECONDS = 300;
/**
 * The error code of a 401 for the bridge itself (bad or stale signature, no BRIDGE_SECRET), as opposed to the
 * client's credential: the bridge's secret, clock or version is wrong, which no SMTP client can fix, so the client
 * hears a temporary failure and keeps its message instead of a 535/530 that would bounce it.
 */
export const BRIDGE_SIGNATURE_REFUSED = "bridge_signature_refused";

const headerPattern = /^t=(\d{1,12}),\s*v2=([0-9a-f]{64})$/;
const encoder = new TextEncoder();
const nowInSeconds = () => Math.floor(Date.now() / 1000);

/** A request body whole, or in parts (a large one is never held whole: the bridge streams it from its spool). */
export type SignedBody = string | Uint8Array | Iterable<Uint8Array> | AsyncIterable<Uint8Array>;

/** What a signature covers: the request line as well as the body. `path` is the URL's path, query excluded. */
export interface SignedRequest<B = SignedBody> {
  method: string;
  path: string;
  body: B;
}

/** The string the HMAC covers. The method is letters and the digest fixed-length hex, so no two requests share one. */
const signedString = (timestamp: string, request: SignedRequest<unknown>, bodyDigestHex: string) =>
  `${timestamp}.${request.method.toUpperCase()}.${request.path}.${bodyDigestHex}`;

/**
 * The signature header for `request`. The body's SHA-256 is computed part by part with @noble/hashes (WebCrypto only
 * digests a whole buffer), so a 30 MB message is never held whole to be signed; the result is what
 * `verifyBridgeSignature` (WebCrypto) and any other implementation compute over the whole body.
 */
export async function signBridgeRequest(secret: string, request: SignedRequest, nowSeconds = nowInSeconds()): Promise<string> {
  const digest = sha256.create();
  const { body } = request;
  if (typeof body === "string") digest.update(encoder.encode(body));
  else if (body instanceof Uint8Array) digest.update(body);
  else for await (const part of body) digest.update(part);
  const timestamp = String(nowSeconds);
  const mac = hmac(sha256, encoder.encode(secret), encoder.encode(signedString(timestamp, request, bytesToHex(digest.digest()))));
  return `t=${timestamp},v2=${bytesToHex(mac)}`;
}

/**
 * The header's timestamp and digest when it is well formed and within the tolerance, else undefined: a receiver
 * checks this before reading a (possibly 40 MB) body, so an unsigned or stale request costs it nothing.
 */
export function freshSignatureHeader(
  header: string | null | undefined,
  nowSeconds = nowInSeconds(),
): { timestamp: string; presented: string } | undefined {
  const match = headerPattern.exec(header?.trim() ?? "");
  if (!match) return undefined;
  const [, timestamp = "", presented = ""] = match;
  if (Math.abs(nowSeconds - Number(timestamp)) > BRIDGE_SIGNATURE_TOLERANCE_SECONDS) return undefined;
  return { timestamp, presented };
}

// The receiver checks every request with the same secret: its key is imported once per process (isolate).
// (the type spelled through crypto.subtle: Node's and workerd's globals do not both name CryptoKey)
type ImportedKey = ReturnType<typeof crypto.subtle.importKey>;
const verifyingKeys = new Map<string, ImportedKey>();
function verifyingKey(secret: string): ImportedKey {
  let key = verifyingKeys.get(secret);
  if (!key) {
    key = crypto.subtle.importKey("raw", encoder.encode(secret), { name: "HMAC", hash: "SHA-256" }, false, ["verify"]);
    // a rejected import is not kept: the next request tries again
    key.catch(() => verifyingKeys.delete(secret));
    verifyingKeys.set(secret, key);
  }
  return key;
}

const hexToBytes = (hex: string) => Uint8Array.from(hex.match(/../g) ?? [], (pair) => Number.parseInt(pair, 16));

/**
 * True when `header` signs this method, path and body with `secret` and its timestamp is within
 * BRIDGE_SIGNATURE_TOLERANCE_SECONDS of now. The receiver holds the body whole, so digest and HMAC are WebCrypto's
 * (native, and constant-time in its comparison).
 */
export async function verifyBridgeSignature(
  secret: string,
  header: string | null | undefined,
  request: SignedRequest<string | Uint8Array>,
  nowSeconds = nowInSeconds(),
): Promise<boolean> {
  const parts = freshSignatureHeader(header, nowSeconds);
  if (!parts) return false;
  const body = typeof request.body === "string" ? encoder.encode(request.body) : request.body;
  const bodyDigest = bytesToHex(new Uint8Array(await crypto.subtle.digest("SHA-256", body)));
  const signed = encoder.encode(signedString(parts.timestamp, request, bodyDigest));
  return crypto.subtle.verify("HMAC", await verifyingKey(secret), hexToBytes(parts.presented), signed);
}

// ---- The mailbox prober ----

// The contract between the Worker's verification engine (src/domain/verification/mailbox.ts) and the mailbox
// prober (smtp-bridge/src/prober/): the path, the request and response bodies, and the reply classification both
// sides name. Requests are signed exactly like the relay's (`signBridgeRequest` / `verifyBridgeSignature`, header
// X-Bridge-Signature), keyed with PROBER_SECRET instead of BRIDGE_SECRET, so a relay signature never opens the
// prober and the other way round.

export const PROBE_PATH = "/v1/probe";

/** Addresses one request may carry: a bulk chunk (500) fits, with room to spare. */
export const PROBE_MAX_ADDRESSES = 1_000;

/** The largest request body the prober reads; a longer one is refused (413) before it is read. */
export const PROBE_MAX_BODY_BYTES = 512 * 1024;

/**
 * A single check's budget: POST /verify answers within SINGLE_CHECK_BUDGET_MS whatever the mail server does, so the
 * prober gets PROBE_SINGLE_BUDGET_MS for its part and the Worker gives up on it PROBE_CLIENT_GRACE_MS after that.
 */
export const SINGLE_CHECK_BUDGET_MS = 10_000;
export const PROBE_SINGLE_BUDGET_MS = 7_000;
export const PROBE_CLIENT_GRACE_MS = 1_500;

/** A bulk chunk's budget: long enough to wait out a greylisting server (typically 1 to 5 minutes). */
export const PROBE_BULK_BUDGET_MS = 6 * 60_000;
export const PROBE_MAX_BUDGET_MS = 10 * 60_000;
/** Less time than this is not worth a probe. */
export const PROBE_MIN_BUDGET_MS = 500;

const probedAddress = z
  .string()
  .min(3)
  .max(320)
  .regex(/^[^@\s<>]+@[^@\s<>]+$/, "Not an email address");

/** A single check (POST /verify {email}, /api/validate) or a bulk job's chunk. */
export const PROBE_KINDS = ["single", "bulk"] as const;
export type ProbeKind = (typeof PROBE_KINDS)[number];

export const ProbeRequest = z
  .object({
    /** Addresses in their normalized form (punycode domain); duplicates are probed once. */
    addresses: z.array(probedAddress).min(1).max(PROBE_MAX_ADDRESSES),
    /**
     * How long the prober may take, retries included; it answers with what it knows when the time is up. A greylisted
     * address is tried again only when the server's delay ends inside it, so a bulk chunk (PROBE_BULK_BUDGET_MS) waits
     * greylisting out and a single check (PROBE_SINGLE_BUDGET_MS) usually reports it.
     */
    budget_ms: z.number().int().min(PROBE_MIN_BUDGET_MS).max(PROBE_MAX_BUDGET_MS),
    /**
     * Each MX host keeps connections for single checks that bulk chunks never take, so a bulk job cannot make a single
     * check wait. A single check asks about one address within PROBE_SINGLE_BUDGET_MS, so it cannot hold them long.
     * Missing (a Worker from before this field): a bulk chunk.
     */
    kind: z.enum(PROBE_KINDS).optional(),
    /**
     * Whose check it is: a host's next free connection goes to the waiting account served least recently. Missing: one
     * shared "unknown" account.
     */
    account_id: id.optional(),
  })
  .refine((request) => request.kind !== "single" || request.addresses.length === 1, {
    path: ["kind"],
    message: "A single check asks about one address",
  })
  .refine((request) => request.kind !== "single" || request.budget_ms <= PROBE_SINGLE_BUDGET_MS, {
    path: ["budget_ms"],
    message: `A single check's budget is at most ${PROBE_SINGLE_BUDGET_MS} ms`,
  });
export type ProbeRequest = z.infer<typeof ProbeRequest>;

/**
 * What the mail server's replies mean for one address (docs/verification.md has the table):
 * - `accepted`: 250/251 to RCPT TO;
 * - `mailbox_not_found`: 5.1.x (or a 550/551/553 without an enhanced code);
 * - `mailbox_disabled`: 5.2.1;
 * - `mailbox_full`: 4.2.2 or 5.2.2;
 * - `greylisted`: a temporary 4.x refusal that did not lift within the budget;
 * - `policy_refused`: 5.7.x, the server refuses our probe (blocklisted IP, no PTR), not the mailbox;
 * - `unavailable`: 421, time-outs, refused or dropped connections, no reachable MX host;
 * - `private_address`: every MX host resolves to a private, loopback or link-local address (PROBE_ALLOW_PRIVATE off);
 * - `rejected`: any other permanent refusal, which names no mailbox reason.
 */
export const PROBE_OUTCOMES = [
  "accepted",
  "mailbox_not_found",
  "mailbox_disabled",
  "mailbox_full",
  "greylisted",
  "policy_refused",
  "unavailable",
  "private_address",
  "rejected",
] as const;
export type ProbeOutcome = (typeof PROBE_OUTCOMES)[number];

export const ProbeAddressResult = z.object({
  address: z.string(),
  outcome: z.enum(PROBE_OUTCOMES),
  /** The MX host that gave the answer (or was last tried), null when none was reached. */
  mx_host: z.string().nullable(),
  /** The last SMTP reply about this address, e.g. "550 5.1.1 No such user"; null without one (time-out). */
  reply: z.string().nullable(),
  /** The domain accepted a random local part too: an `accepted` proves nothing. Null when that was not learned. */
  catch_all: z.boolean().nullable(),
  /** The address was refused at least once with a temporary 4.x (greylisting) before its final outcome. */
  greylisted: z.boolean(),
  /** What went wrong when `unavailable`: `timeout`, `connection_refused`, `service_unavailable` (421), `no_mx_address`… */
  detail: z.string().nullable(),
});
export type ProbeAddressResult = z.infer<typeof ProbeAddressResult>;

export const ProbeResponse = z.object({
  results: z.array(ProbeAddressResult),
  /** Connections the prober opened for this request, per MX host. */
  connections: z.record(z.string(), z.number().int().nonnegative()),
  elapsed_ms: z.number().int().nonnegative(),
});
export type ProbeResponse = z.infer<typeof ProbeResponse>;
