// The rules every message obeys, whichever door it enters by (POST /send, the SMTP relay, campaigns). acceptMessage
// enforces them; the entry points only use these constants to describe them (the OpenAPI schema, the bridge).

import type { FieldErrors } from "../../errors";
import { parseMailbox } from "./addresses";

export const sendLimits = {
  recipients: 50,
  tags: 20,
  metadataKeys: 50,
  metadataKeyLength: 64,
  metadataValueLength: 500,
  attachmentBytes: 10 * 1024 * 1024,
} as const;

export const tagPattern = /^[A-Za-z0-9_.:-]{1,64}$/;
export const tagRule = "Tags are 1-64 characters of letters, digits, _ . : -";

export type SendRulesInput = { recipients: string[]; tags: string[]; metadata: Record<string, string> };

/**
 * Recipients as bare addresses, each once (compared case-insensitively; the first spelling is kept), tags each once,
 * or the field errors. `recipientsField` names the recipients as the caller's request does (`to`, `rcpt_to`).
 */
export function applySendRules(
  input: SendRulesInput,
  recipientsField: string,
): { ok: true; recipients: string[]; tags: string[] } | { ok: false; errors: FieldErrors } {
  const errors: FieldErrors = {};
  const recipients: string[] = [];
  const seen = new Set<string>();
  input.recipients.forEach((entry, i) => {
    const parsed = parseMailbox(entry);
    if (!parsed.ok) {
      errors[`${recipientsField}.${i}`] = [parsed.error];
      return;
    }
    const key = parsed.mailbox.address.toLowerCase();
    if (seen.has(key)) return;
    seen.add(key);
    recipients.push(parsed.mailbox.address);
  });
  if (input.recipients.length === 0) errors[recipientsField] = ["At least one recipient"];
  else if (recipients.length > sendLimits.recipients) errors[recipientsField] = [`At most ${sendLimits.recipients} recipients per message`];

  const tags = [...new Set(input.tags)];
  if (tags.length > sendLimits.tags) errors.tags = [`At most ${sendLimits.tags} tags`];
  input.tags.forEach((tag, i) => {
    if (!tagPattern.test(tag)) errors[`tags.${i}`] = [tagRule];
  });

  const keys = Object.keys(input.metadata);
  if (keys.length > sendLimits.metadataKeys) errors.metadata = [`At most ${sendLimits.metadataKeys} keys`];
  for (const key of keys) {
    if (key.length === 0 || key.length > sendLimits.metadataKeyLength)
      errors[`metadata.${key}`] = [`Keys are 1-${sendLimits.metadataKeyLength} characters`];
    else if ((input.metadata[key] ?? "").length > sendLimits.metadataValueLength)
      errors[`metadata.${key}`] = [`At most ${sendLimits.metadataValueLength} characters`];
  }
  return Object.keys(errors).length > 0 ? { ok: false, errors } : { ok: true, recipients, tags };
}
