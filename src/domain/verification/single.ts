import { batch, type Ctx } from "../../db/client";
import type { Account } from "../accounts/accounts";
import { chargeStatements, refundStatements, wasApplied } from "../credits/ledger";
import { createResolver } from "../dns/doh";
import { recordEvents } from "../webhooks/dispatch";
import type { InsufficientCredits } from "./jobs";
import type { VerificationResult } from "./status";
import { contactResultsStatement } from "./contact-results";
import { checkSyntax } from "./syntax";
import { createMailboxProber } from "./mailbox";
import { verifyEmail } from "./verify";
import { config } from "../../config";
import { usageStatements } from "../reports/usage";

export type SingleCheck = { result: VerificationResult; creditsCharged: number; checkedAt: string };

export type SingleCheckOptions = {
  /** Ledger reference of the charge (and the event's dedupe key): unique per request, e.g. its request id. */
  reference: string;
  /** Also record `verification.completed` for this check (single checks are opt-in; jobs always emit). */
  emitEvent?: boolean;
  waitUntil?: (promise: Promise<unknown>) => void;
};

/**
 * One synchronous check, for POST /api/v1/verify {email} and GET /api/validate. Bad syntax is answered without
 * DNS and free, so it needs no credit. Otherwise the credit is charged BEFORE the lookup (a 0 balance is refused
 * and costs no DNS work) and given back if the check itself throws.
 */
export async function verifySingleAddress(
  ctx: Ctx,
  account: Account,
  email: string,
  options: SingleCheckOptions,
): Promise<InsufficientCredits | ({ kind: "checked" } & SingleCheck)> {
  const { env, db } = ctx;
  const settings = config(env);
  const resolver = createResolver({ url: settings.dohUrl, db: ctx.shared, waitUntil: options.waitUntil });
  const deps = { resolver, prober: settings.prober && createMailboxProber(settings.prober), accountId: account.id };
  let creditsCharged = 0;
  if (checkSyntax(email).valid) {
    const charge = { accountId: account.id, balance: "verify" as const, amount: 1, referenceId: options.reference, note: "verification" };
    const [ledger] = await batch(db, chargeStatements(db, charge));
    if (!wasApplied(ledger!)) return { kind: "insufficient_credits", needed: 1, available: 0 };
    creditsCharged = 1;
    let result: VerificationResult;
    try {
      result = await verifyEmail(email, deps);
    } catch (error) {
      await batch(db, refundStatements(db, { ...charge, note: "verification failed" }));
      throw error;
    }
    // The check is done and paid for; a failure to record its event must not refund it.
    return finish(result);
  }
  return finish(await verifyEmail(email, deps));

  async function finish(result: VerificationResult): Promise<{ kind: "checked" } & SingleCheck> {
    const checkedAt = new Date().toISOString();
    // A single check stores no result row: its usage count, and the result on the address's contact if it has one.
    const onContact = contactResultsStatement(db, account.id, [result], checkedAt);
    await batch(db, [...usageStatements(db, account.id, { verifications: 1 }), ...(onContact ? [onContact] : [])]);
    if (options.emitEvent) {
      await recordEvents(ctx, [
        {
          accountId: account.id,
          type: "verification.completed",
          dedupeKey: `verification.completed:${options.reference}`,
          data: {
            verification_id: options.reference,
            kind: "single",
            total: 1,
            counts: { valid: 0, invalid: 0, risky: 0, unknown: 0, [result.result]: 1 },
            ...result,
            credits_charged: creditsCharged,
            checked_at: checkedAt,
          },
        },
      ]);
    }
    return { kind: "checked", result, creditsCharged, checkedAt };
  }
}
