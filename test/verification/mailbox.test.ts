import { openCtx, sharedDb } from "../../src/db/client";
import { createExecutionContext, createMessageBatch, getQueueResult } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { SINGLE_CHECK_BUDGET_MS } from "@mailforge/bridge-contract";
import { describe, expect, it } from "vitest";
import { config } from "../../src/config";
import { findAccount } from "../../src/domain/accounts/accounts";
import { createResolver } from "../../src/domain/dns/doh";
import { verifyEmail, type VerificationResult } from "../../src/domain/verification";
import { createVerificationJob } from "../../src/domain/verification/jobs";
import { createMailboxProber } from "../../src/domain/verification/mailbox";
import { verifySingleAddress } from "../../src/domain/verification/single";
import { consumeVerifyQueue } from "../../src/queues/verify-queue";
import { call, createAccount, json } from "../support/helpers";
import type { JobBody } from "../support/verification";

// Mailbox-level verification against the MX hosts of test/setup/global-setup.ts (smtp-server on 127.0.0.2…, see
// scripts/dev/mx-hosts.ts: *.mailbox.test) through the real prober, as a deployment with PROBER_URL and
// PROBER_SECRET runs it. The Worker's own bindings leave the prober unset, which is the "mailbox checks off" case.

const proberEnv = { ...env, PROBER_URL: env.TEST_PROBER_URL, PROBER_SECRET: env.TEST_PROBER_SECRET } as Env;
const deps = () => ({
  resolver: createResolver({ url: config(env).dohUrl, db: sharedDb(env) }),
  prober: createMailboxProber({ url: env.TEST_PROBER_URL, secret: env.TEST_PROBER_SECRET }),
});
const check = (email: string) => verifyEmail(email, deps());

const fields = (result: VerificationResult) => ({
  result: result.result,
  status: result.status,
  sub_status: result.sub_status,
  quality: result.quality,
  score: result.score,
  mx_record: result.mx_record,
  mailbox_check: result.mailbox_check,
});

describe("the reply table, one row each", () => {
  it("250: a known mailbox on a domain that refuses a random one is valid, score 1", async () => {
    expect(fields(await check("alice@mailbox.test"))).toEqual({
      result: "valid",
      status: "valid",
      sub_status: null,
      quality: "safe",
      score: 1,
      mx_record: "mx.mailbox.test",
      mailbox_check: "checked",
    });
  });

  it("5.1.x: an unknown mailbox is invalid / mailbox_not_found", async () => {
    expect(fields(await check("zed@mailbox.test"))).toMatchObject({ result: "invalid", status: "mailbox_not_found", quality: "bad", score: 0 });
  });

  it("5.2.1: a disabled mailbox is invalid / mailbox_disabled", async () => {
    expect(fields(await check("carol@mailbox.test"))).toMatchObject({ result: "invalid", status: "mailbox_disabled", quality: "bad", score: 0 });
  });

  it("4.2.2 and 5.2.2: a full mailbox is risky / mailbox_full", async () => {
    for (const email of ["dave@mailbox.test", "erin@mailbox.test"]) {
      expect(fields(await check(email))).toMatchObject({ result: "risky", status: "mailbox_full", quality: "risky", score: 0.3 });
    }
  });

  it("every address accepted: a catch-all domain is risky / catch_all", async () => {
    expect(fields(await check("whoever@catchall.mailbox.test"))).toEqual({
      result: "risky",
      status: "catch_all",
      sub_status: null,
      quality: "risky",
      score: 0.6,
      mx_record: "mx.catchall.mailbox.test",
      mailbox_check: "checked",
    });
  });

  it("4.x greylisting: retried after the server's delay when it fits a single check, and says greylisted", async () => {
    expect(fields(await check("grace@greylist.mailbox.test"))).toMatchObject({ result: "valid", status: "valid", sub_status: "greylisted" });
  });

  it("421: unknown / mailbox_error, smtp_unavailable; the next MX host is tried and named", async () => {
    expect(fields(await check("jane@busy.mailbox.test"))).toMatchObject({
      result: "unknown",
      status: "mailbox_error",
      sub_status: "smtp_unavailable",
    });
    expect(fields(await check("alice@fallback.mailbox.test"))).toMatchObject({ result: "valid", status: "valid", mx_record: "mx.mailbox.test" });
  });

  it("5.7.x refusing our probe: unknown with policy_refused, never invalid", async () => {
    expect(fields(await check("jane@blocking.mailbox.test"))).toMatchObject({
      result: "unknown",
      status: "mailbox_error",
      sub_status: "policy_refused",
      quality: "unknown",
    });
  });

  it("a tarpit that never greets: a single check answers unknown / smtp_timeout within its budget", async () => {
    const account = await createAccount({ verify_credits: 5 });
    const row = await findAccount(sharedDb(env), account.id);
    const started = Date.now();
    const checked = await verifySingleAddress(openCtx(proberEnv, undefined, account), row!, "jane@tarpit.mailbox.test", {
      reference: `tarpit-${crypto.randomUUID()}`,
    });
    expect(Date.now() - started).toBeLessThan(SINGLE_CHECK_BUDGET_MS);
    if (checked.kind !== "checked") throw new Error(checked.kind);
    expect(fields(checked.result)).toMatchObject({
      result: "unknown",
      status: "mailbox_error",
      sub_status: "smtp_timeout",
      mx_record: "mx.tarpit.mailbox.test",
    });
    expect(checked.creditsCharged).toBe(1);
  }, 15_000);

  it("a role account keeps role_based when its mailbox exists, and is invalid when it does not", async () => {
    expect(fields(await check("info@mailbox.test"))).toMatchObject({ result: "risky", status: "role_based", mailbox_check: "checked" });
    expect(fields(await check("admin@mailbox.test"))).toMatchObject({ result: "invalid", status: "mailbox_not_found" });
  });
});

describe("without PROBER_URL", () => {
  it("POST /verify works as before and says mailbox checks are off", async () => {
    const account = await createAccount({ verify_credits: 5 });
    const response = await call("/api/v1/verify", { key: account.api_key, body: { email: "zed@mailbox.test" } });
    expect(response.status).toBe(200);
    expect(await response.json()).toMatchObject({ result: "valid", status: "valid", score: 0.9, mx_record: "mx.mailbox.test", mailbox_check: "off" });
  });
});

describe("a bulk job with mailbox checks", () => {
  it("uses the evidence per address, counts it, and charges exactly as before", async () => {
    const account = await createAccount({ verify_credits: 50 });
    const row = await findAccount(sharedDb(env), account.id);
    const emails = [
      "alice@mailbox.test",
      "bob@mailbox.test",
      "zed@mailbox.test",
      "carol@mailbox.test",
      "dave@mailbox.test",
      "someone@catchall.mailbox.test",
      "jane@blocking.mailbox.test",
      "ALICE@mailbox.test",
      "not an address",
    ];
    const created = await createVerificationJob(openCtx(env, undefined, account), { account: row!, emails, source: "api" });
    if (created.kind !== "created") throw new Error(created.kind);
    const batch = createMessageBatch(
      "mailforge-verify",
      created.plan.chunks.map((chunk, i) => ({
        id: `mailbox-${i}`,
        timestamp: new Date(),
        attempts: 1,
        body: { kind: "verification_chunk", job_id: created.job.id, database: account.database, ...chunk },
      })),
    );
    const ctx = createExecutionContext();
    await consumeVerifyQueue(batch, proberEnv, ctx);
    expect((await getQueueResult(batch, ctx)).explicitAcks).toHaveLength(created.plan.chunks.length);

    const job = await json<JobBody>(await call(`/api/v1/verify/${created.job.id}?limit=100`, { key: account.api_key }));
    expect(job).toMatchObject({ status: "completed", total: 9, processed: 9, credits_charged: 7 });
    expect(job.counts).toEqual({ valid: 2, invalid: 3, risky: 2, unknown: 1, duplicates: 1, bad_syntax: 1 });
    const byEmail = Object.fromEntries(job.results.data.map((r) => [r.email, r]));
    expect(byEmail["alice@mailbox.test"]).toMatchObject({ result: "valid", score: 1, mailbox_check: "checked" });
    expect(byEmail["zed@mailbox.test"]).toMatchObject({ result: "invalid", status: "mailbox_not_found" });
    expect(byEmail["carol@mailbox.test"]).toMatchObject({ result: "invalid", status: "mailbox_disabled" });
    expect(byEmail["dave@mailbox.test"]).toMatchObject({ result: "risky", status: "mailbox_full" });
    expect(byEmail["someone@catchall.mailbox.test"]).toMatchObject({ result: "risky", status: "catch_all" });
    expect(byEmail["jane@blocking.mailbox.test"]).toMatchObject({ result: "unknown", sub_status: "policy_refused" });
    const balance = await json<{ verify: { balance: number } }>(await call("/api/v1/credits", { key: account.api_key }));
    expect(balance.verify.balance).toBe(50 - 7);
  });
});
