// One message sent in several SMTP transactions: the same signed bytes, each copy with its own envelope (with
// BOUNCE_DOMAIN, every recipient has its own VERP return path, src/domain/feedback/return-path.ts). The copies go over
// the caller's transport one behind another, so an SMTP connection carries them all (RSET between transactions,
// pipelined where the server allows), and their outcomes are combined into one with an entry per recipient, which
// is what recordOutcome reads.

import type { Envelope, RecipientOutcome, SendFailure, SendOutcome, Transport } from "./types";

/** Sends `raw` once per envelope over `transport`; one outcome naming every recipient of every envelope. */
export async function sendCopies(transport: Transport, envelopes: readonly Envelope[], raw: string | Uint8Array): Promise<SendOutcome> {
  if (envelopes.length === 1) return transport.send(envelopes[0]!, raw);
  // Every send is queued before any is awaited: the transport writes each behind the previous one's final dot.
  const outcomes = await Promise.all(envelopes.map((envelope) => transport.send(envelope, raw)));
  return combineOutcomes(envelopes, outcomes);
}

/** Each recipient's result in one transaction's outcome; recipients without an entry share the transaction's. */
function recipientsOf(envelope: Envelope, outcome: SendOutcome): RecipientOutcome[] {
  const own = new Map((outcome.perRecipient ?? []).filter((result) => outcome.ok || !result.ok).map((result) => [result.recipient, result]));
  return envelope.rcptTo.map((recipient): RecipientOutcome => {
    const result = own.get(recipient);
    if (result) return result;
    const { code, response, enhanced } = outcome;
    const reply = { code, response, ...(enhanced ? { enhanced } : {}) };
    return outcome.ok ? { recipient, ok: true, ...reply } : { recipient, ok: false, kind: outcome.kind, stage: outcome.stage, ...reply };
  });
}

/**
 * The outcomes of a message's transactions as one: accepted when any copy was (the rest are refused entries), else
 * the first failure, permanent only when every recipient's refusal is.
 */
export function combineOutcomes(envelopes: readonly Envelope[], outcomes: readonly SendOutcome[]): SendOutcome {
  const perRecipient = envelopes.flatMap((envelope, i) => recipientsOf(envelope, outcomes[i]!));
  const accepted = outcomes.find((outcome) => outcome.ok);
  if (accepted) return { ...accepted, perRecipient };
  const first = outcomes[0] as SendFailure;
  const permanent = perRecipient.every((result) => !result.ok && result.kind === "permanent");
  return { ...first, kind: permanent ? "permanent" : "temporary", perRecipient };
}
