// A member's optional second factor (docs/dashboard.md, "Second factor"): TOTP (RFC 6238, the otpauth library:
// SHA-1, 6 digits, 30 s, what every authenticator app reads) and ten single-use recovery codes. The secret is
// stored AES-GCM encrypted; a code is accepted once (the last accepted time step is kept); recovery codes only as
// their SHA-256.

import type { Ctx } from "../../db/client";
import { and, eq, isNull, lt, or } from "drizzle-orm";
import { Secret, TOTP } from "otpauth";
import { config } from "../../config";
import { members } from "../../db/schema";
import { decryptSecret, encryptSecret, sha256Hex } from "../../lib/crypto";
import { nowIso, randomBase62 } from "../../lib/ids";
import type { Member } from "./members";

const PERIOD_SECONDS = 30;
const RECOVERY_CODES = 10;

const totpOf = (secret: Secret, email: string) =>
  new TOTP({ issuer: "Mailforge", label: email, secret, algorithm: "SHA1", digits: 6, period: PERIOD_SECONDS });
const recoveryHash = (code: string) => sha256Hex(`recovery code:${code.replace(/[^0-9A-Za-z]/g, "").toLowerCase()}`);

export const hasTotp = (member: Pick<Member, "totpEnabledAt">) => member.totpEnabledAt !== null;

/**
 * The secret for the member to scan, kept (encrypted) until a first code confirms it: the one waiting already, so a
 * mistyped code or a reload keeps what the app has, else a new one. The `otpauth://` URI and the secret to type.
 */
export async function startTotp(ctx: Ctx, member: Member): Promise<{ uri: string; secret: string }> {
  const { env, shared } = ctx;
  const key = config(env).encryptionKey;
  let secret: Secret;
  if (member.totpSecret) secret = Secret.fromBase32(await decryptSecret(member.totpSecret, key));
  else {
    secret = new Secret({ size: 20 });
    await shared
      .update(members)
      .set({ totpSecret: await encryptSecret(secret.base32, key) })
      .where(and(eq(members.id, member.id), isNull(members.totpEnabledAt)));
  }
  return { uri: totpOf(secret, member.email).toString(), secret: secret.base32 };
}

/** The time step `code` belongs to under the member's secret (this one, or one either side), or undefined. */
async function acceptedStep(env: Env, member: Member, code: string): Promise<number | undefined> {
  if (!member.totpSecret || !/^\d{6}$/.test(code)) return undefined;
  const secret = Secret.fromBase32(await decryptSecret(member.totpSecret, config(env).encryptionKey));
  const delta = totpOf(secret, member.email).validate({ token: code, window: 1 });
  if (delta === null) return undefined;
  const step = Math.floor(Date.now() / 1000 / PERIOD_SECONDS) + delta;
  return member.totpLastStep !== null && step <= member.totpLastStep ? undefined : step;
}

/** Turns TOTP on with a first code from the app; the recovery codes, shown once, or undefined for a wrong code. */
export async function confirmTotp(ctx: Ctx, member: Member, code: string): Promise<string[] | undefined> {
  const { env, shared } = ctx;
  if (hasTotp(member)) return undefined;
  const step = await acceptedStep(env, member, code);
  if (step === undefined) return undefined;
  const codes = Array.from({ length: RECOVERY_CODES }, () =>
    randomBase62(10)
      .toLowerCase()
      .replace(/^(.{5})/, "$1-"),
  );
  const updated = await shared
    .update(members)
    .set({ totpEnabledAt: nowIso(), totpLastStep: step, recoveryCodes: await Promise.all(codes.map(recoveryHash)) })
    .where(and(eq(members.id, member.id), isNull(members.totpEnabledAt)))
    .returning({ id: members.id })
    .get();
  return updated ? codes : undefined;
}

/**
 * Checks a second factor: a TOTP code not used before, or an unused recovery code (used up by this). Each check
 * is one conditional UPDATE, so two requests cannot both use one code.
 */
export async function checkSecondFactor(ctx: Ctx, member: Member, code: string): Promise<boolean> {
  const { env, shared } = ctx;
  const step = await acceptedStep(env, member, code.trim());
  if (step !== undefined) {
    const used = await shared
      .update(members)
      .set({ totpLastStep: step })
      .where(and(eq(members.id, member.id), or(isNull(members.totpLastStep), lt(members.totpLastStep, step))))
      .returning({ id: members.id })
      .get();
    return Boolean(used);
  }
  const hash = await recoveryHash(code);
  const left = member.recoveryCodes ?? [];
  if (!left.includes(hash)) return false;
  const used = await shared
    .update(members)
    .set({ recoveryCodes: left.filter((stored) => stored !== hash) })
    .where(and(eq(members.id, member.id), eq(members.recoveryCodes, left)))
    .returning({ id: members.id })
    .get();
  return Boolean(used);
}

/** Turns TOTP off (after the caller checked a second factor). */
export async function disableTotp(ctx: Ctx, memberId: string): Promise<void> {
  const { shared } = ctx;
  await shared
    .update(members)
    .set({ totpSecret: null, totpEnabledAt: null, totpLastStep: null, recoveryCodes: null })
    .where(eq(members.id, memberId));
}
