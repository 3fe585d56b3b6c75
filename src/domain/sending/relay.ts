import PostalMime from "postal-mime";
import { hasFeature, type Account } from "../accounts/accounts";
import { AppError, validationError, type FieldErrors } from "../../errors";
import { bytesToBase64 } from "../../lib/crypto";
import { acceptMessage, type SendAccepted, type WaitUntil } from "./accept";
import { parseMailbox } from "./addresses";

const maxRelayRecipients = 50;

/** The relay, like POST /send, needs both the Email API and the SMTP relay features (spec, Endpoints rule 1). */
export function assertRelayEnabled(account: Account): void {
  const missing = (["email_api", "smtp_relay"] as const).filter((feature) => !hasFeature(account, feature));
  if (missing.length > 0) {
    throw new AppError("feature_disabled", `SMTP relay is not enabled for this account (${missing.join(", ")}); ask the operator to enable it`);
  }
}
const tagHeader = "x-mailforge-tag";

/**
 * A message that arrived through the SMTP bridge enters the same pipeline as POST /send (`acceptMessage`):
 * same checks, credits, suppressions, daily limit and queue. Its bytes are kept as received, so the user's own
 * headers, attachments and MIME structure reach the recipient; only DKIM (and a missing Message-ID or Date) is
 * added at delivery.
 */
export async function acceptRelayMessage(
  env: Env,
  ctx: WaitUntil,
  account: Account,
  message: { mailFrom: string; rcptTo: string[]; raw: Uint8Array },
): Promise<SendAccepted> {
  assertRelayEnabled(account);

  const errors: FieldErrors = {};
  if (message.rcptTo.length === 0) errors.rcpt_to = ["At least one recipient"];
  if (message.rcptTo.length > maxRelayRecipients) errors.rcpt_to = [`At most ${maxRelayRecipients} recipients per message`];
  const recipients: string[] = [];
  message.rcptTo.forEach((rcpt, i) => {
    const parsed = parseMailbox(rcpt);
    if (!parsed.ok) errors[`rcpt_to.${i}`] = [parsed.error];
    else if (!recipients.some((known) => known.toLowerCase() === parsed.mailbox.address.toLowerCase())) recipients.push(parsed.mailbox.address);
  });

  let parsed: Awaited<ReturnType<typeof PostalMime.parse>>;
  try {
    parsed = await PostalMime.parse(message.raw);
  } catch {
    throw validationError({ raw: ["The message could not be parsed as RFC 5322"] });
  }
  const headerFrom = parsed.from?.address ? parseMailbox(parsed.from.address) : parseMailbox(message.mailFrom);
  if (!headerFrom.ok) errors.from = [headerFrom.error];
  if (Object.keys(errors).length > 0) throw validationError(errors);

  const tags = parsed.headers
    .filter((header) => header.key === tagHeader)
    .flatMap((header) => header.value.split(","))
    .map((tag) => tag.trim())
    .filter((tag) => /^[A-Za-z0-9_.:-]{1,64}$/.test(tag));
  const from = headerFrom.ok ? { ...headerFrom.mailbox, ...(parsed.from?.name ? { name: parsed.from.name } : {}) } : { address: "" };
  const result = await acceptMessage(
    env,
    ctx,
    { account, testMode: false },
    {
      source: "smtp",
      from,
      recipients,
      replyTo: parsed.replyTo?.[0]?.address,
      tags: [...new Set(tags)].slice(0, 20),
      metadata: {},
      compose: () => ({ subject: (parsed.subject ?? "").replace(/[\r\n]+/g, " ").slice(0, 998), content: { kind: "raw", raw: bytesToBase64(message.raw) } }),
    },
  );
  return result.body;
}
