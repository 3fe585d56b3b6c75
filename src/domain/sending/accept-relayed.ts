import type { Ctx, SharedDb } from "../../db/client";
import PostalMime, { addressParser } from "postal-mime";
import { hasFeature, type Account } from "../accounts/accounts";
import { verifiedDomainNames } from "../domains/domains";
import type { FieldErrors } from "../../errors";
import { refused, type Refusal } from "../refusal";
import { bytesToBase64, sha256Hex } from "../../lib/crypto";
import { acceptMessage, type AcceptOutcome, type Sender } from "./accept";
import type { Idempotency } from "./idempotency";
import { mailboxText, parseMailbox } from "./addresses";
import { headerBlock, withoutHeaderFields } from "./header-block";
import { sendLimits, tagPattern } from "./rules";
import { domainOf } from "./mime";
import { relayTracking, relayTrackingHeader } from "../tracking/track-relayed";

/** The relay, like POST /send, needs both the Email API and the SMTP relay features (spec, Endpoints rule 1). */
export function relayFeatureRefusal(account: Account): Refusal | undefined {
  const missing = (["email_api", "smtp_relay"] as const).filter((feature) => !hasFeature(account, feature));
  return missing.length > 0
    ? refused("feature_disabled", `SMTP relay is not enabled for this account (${missing.join(", ")}); ask the operator to enable it`)
    : undefined;
}

const tagHeader = "x-mailforge-tag";
/** `X-Mailforge-Stream: broadcast` puts a relayed message in the broadcast stream (docs/smtp-relay.md); removed before storing. */
export const relayStreamHeader = "x-mailforge-stream";
// Blind copies travel in the envelope only; left in the header, every recipient would see who else got one.
const blindCopyHeaders: ReadonlySet<string> = new Set(["bcc", "resent-bcc"]);
// Bcc must not reach the recipients; the tracking opt-in and the stream are instructions to us, not part of the message.
const strippedHeaders: ReadonlySet<string> = new Set([...blindCopyHeaders, relayTrackingHeader, relayStreamHeader]);

type ParsedEmail = Awaited<ReturnType<typeof PostalMime.parse>>;

const mailboxesIn = (parsed: ParsedEmail, field: string) =>
  parsed.headers
    .filter((header) => header.key === field)
    .flatMap((header) => addressParser(header.value, { flatten: true }).map((mailbox) => mailbox.address ?? ""));

/** The stream a relayed message asks for: broadcast when its (last) X-Mailforge-Stream says so, else transactional. */
function relayStream(headers: ParsedEmail["headers"]): "transactional" | "broadcast" {
  const asked = headers
    .filter((header) => header.key === relayStreamHeader)
    .at(-1)
    ?.value.trim()
    .toLowerCase();
  return asked === "broadcast" ? "broadcast" : "transactional";
}

/**
 * Recipients see the From and Sender header fields, not MAIL FROM, so each address in them must be on a verified
 * domain of the account, as the API's `from` must. A second From field is refused outright: RFC 5322 allows one,
 * and a client that shows the other one would show a sender no check looked at.
 */
async function unverifiedAuthors(shared: SharedDb, accountId: string, parsed: ParsedEmail): Promise<Refusal | undefined> {
  const fromFields = parsed.headers.filter((header) => header.key === "from").length;
  if (fromFields > 1) return refused("forbidden", `The message has ${fromFields} From header fields; exactly one is allowed`);
  const from = mailboxesIn(parsed, "from");
  const sender = mailboxesIn(parsed, "sender");
  // acceptMessage checks the From address postal-mime reports (or MAIL FROM when there is none); only other
  // addresses need this extra read. A group (`From: Team: a@x, b@y;`) has no such address, so each member is checked.
  const checkedByAccept = parsed.from?.address?.toLowerCase();
  if (sender.length === 0 && (from.length === 0 || (from.length === 1 && from[0]!.toLowerCase() === checkedByAccept))) return undefined;
  const verified = await verifiedDomainNames(shared, accountId, [...new Set([...from, ...sender].map(domainOf))]);
  const foreign = [...new Set([...from, ...sender].filter((address) => !address.includes("@") || !verified.has(domainOf(address))))];
  if (foreign.length === 0) return undefined;
  return refused(
    "domain_not_verified",
    `Every From and Sender address must be on a verified sending domain of this account; not verified: ${foreign
      .slice(0, 5)
      .map((address) => address || "<>")
      .join(", ")}`,
  );
}

const invalid = (errors: FieldErrors) => refused("validation_failed", "The request is invalid", { errors });

/** A message as the bridge hands it over: the credential that sent it, the envelope, and the DATA bytes as received. */
export type RelaySubmission = { credentialId: string; mailFrom: string; rcptTo: string[]; raw: Uint8Array<ArrayBuffer> };

/**
 * What makes a retried submission recognisable. The bridge answers 4xx when it cannot confirm a message (the Worker
 * did not answer in time, the connection broke), even if the Worker stored it; the SMTP client then sends the same
 * DATA again, byte for byte (its own Message-ID and Date included), over the same credential and envelope. Keyed by
 * all of them, the retry finds the first message's stored answer in the Idempotency-Key store and gets it back: same
 * id, no second charge, no second delivery, for the store's 24 hours. The Worker derives the key from what the
 * bridge's signature covers, so it needs nothing from the bridge and cannot be chosen by anyone else; a signed
 * request replayed within the signature's window is recognised the same way.
 */
async function submissionKey(submission: RelaySubmission): Promise<Idempotency> {
  const identity = [submission.credentialId, submission.mailFrom, submission.rcptTo, await sha256Hex(submission.raw)];
  const key = await sha256Hex(JSON.stringify(identity));
  // The key is a digest of the whole request: a second request under it can only be the same one.
  return { key, route: "SMTP relay", requestHash: key };
}

/**
 * A message that arrived through the SMTP bridge enters the same pipeline as POST /send (`acceptMessage`):
 * same checks, credits, suppressions, daily limit and queue, in test mode for a test credential. Its bytes are kept
 * as received apart from Bcc fields, so the user's own headers, attachments and MIME structure reach the recipient;
 * only DKIM (and a missing Message-ID or Date) is added at delivery.
 */
export async function acceptRelayMessage(ctx: Ctx, sender: Sender, message: RelaySubmission): Promise<AcceptOutcome> {
  const { account } = sender;
  const disabled = relayFeatureRefusal(account);
  if (disabled) return disabled;

  let parsed: ParsedEmail;
  try {
    // Only header fields are read from it (From, Sender, Reply-To, Subject, tags, tracking): parsing the body and its
    // attachments too would cost the relay time and memory in proportion to the message for nothing.
    parsed = await PostalMime.parse(headerBlock(message.raw));
  } catch {
    return invalid({ raw: ["The message could not be parsed as RFC 5322"] });
  }
  const headerFrom = parsed.from?.address ? parseMailbox(parsed.from.address) : parseMailbox(message.mailFrom);
  if (!headerFrom.ok) return invalid({ from: [headerFrom.error] });
  const unverified = await unverifiedAuthors(ctx.shared, account.id, parsed);
  if (unverified) return unverified;
  // removed before storing: DKIM is signed at delivery over the stored bytes, and they are what the provider gets
  const raw = withoutHeaderFields(message.raw, strippedHeaders);

  const tags = parsed.headers
    .filter((header) => header.key === tagHeader)
    .flatMap((header) => header.value.split(","))
    .map((tag) => tag.trim())
    // Headers are whatever the client wrote: tags that break the rule are dropped rather than failing the message.
    .filter((tag) => tagPattern.test(tag));
  const from = { ...headerFrom.mailbox, ...(parsed.from?.name ? { name: parsed.from.name } : {}) };
  // Only the record shows it (the bytes keep the client's header), as the API's messages show theirs.
  const [replyTo] = parsed.replyTo ?? [];
  return acceptMessage(
    ctx,
    sender,
    {
      source: "smtp",
      stream: relayStream(parsed.headers),
      from,
      recipients: message.rcptTo,
      replyTo: replyTo?.address ? mailboxText({ address: replyTo.address, ...(replyTo.name ? { name: replyTo.name } : {}) }) : undefined,
      tags: [...new Set(tags)].slice(0, sendLimits.tags),
      metadata: {},
      tracking: relayTracking(parsed.headers),
      compose: () => ({ subject: (parsed.subject ?? "").replace(/[\r\n]+/g, " ").slice(0, 998), content: { kind: "raw", raw: bytesToBase64(raw) } }),
    },
    await submissionKey(message),
  );
}
