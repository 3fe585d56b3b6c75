import { introspectWorkflow } from "cloudflare:test";
import { env, exports } from "cloudflare:workers";
import { sql } from "drizzle-orm";
import { drizzle } from "drizzle-orm/d1";
import { afterEach, describe, expect, it } from "vitest";
import { databaseTag } from "../../src/db/client";
import { contacts } from "../../src/db/schema";
import { RetryableStepError, stepFailureMessage } from "../../src/domain/automations/execute";
import { verifyWebhook } from "../../sdk/src/verify-webhook";
import { ADMIN_TOKEN, call, createAccount, createKey, d1Of, json } from "../support/helpers";
import { eventually, sinkMessagesTo, verifiedDomain } from "../support/sending";
import { createEndpoint, receiverPath, receiverUrl, waitForRequests } from "../support/webhooks";

type Automation = { id: string; status: string; private_url: string; webhook_secret: string; steps: unknown[] };
type Triggered = { run_id: string; status: string; created: boolean };
type Run = {
  id: string;
  status: string;
  contact: { id: string; email: string };
  event_id: string;
  error: string | null;
  steps: { index: number; type: string; status: string; detail: Record<string, unknown>; started_at: string | null; finished_at: string | null }[];
};

const tag = () => crypto.randomUUID().slice(0, 8);
const rcpt = (label: string) => `${label}-${tag()}@example.org`;

let introspector: Awaited<ReturnType<typeof introspectWorkflow>> | undefined;
afterEach(async () => {
  await introspector?.dispose();
  introspector = undefined;
});

async function setup() {
  const account = await createAccount({ send_credits: 100, features: ["email_api", "automations", "campaigns"] });
  const key = account.api_key;
  const domain = await verifiedDomain(key);
  const sender = await json<{ id: string }>(await call("/api/v1/senders", { key, body: { name: "Acme", email: `hello@${domain.name}` } }));
  const list = await json<{ id: string }>(await call("/api/v1/lists", { key, body: { name: "onboarded" } }));
  return { account, key, domain, sender: sender.id, list: list.id };
}

async function createAutomation(key: string, body: Record<string, unknown>): Promise<Automation> {
  const response = await call("/api/v1/automations", { key, body: { name: "Welcome", ...body } });
  expect(response.status).toBe(201);
  return json<Automation>(response);
}

const runOf = async (key: string, id: string) => json<Run>(await call(`/api/v1/automations/runs/${id}`, { key }));
const waitForRun = (key: string, id: string, status: string, timeoutMs = 15_000) =>
  eventually(async () => {
    const run = await runOf(key, id);
    return run.status === status ? run : undefined;
  }, timeoutMs);
const hookPath = (automation: Automation) => new URL(automation.private_url).pathname;

describe("automations: the resource", () => {
  it("creates, reads, changes, lists and deletes; the private URL is unguessable and rotates", async () => {
    const { account, key, sender, list } = await setup();
    const automation = await createAutomation(key, {
      steps: [
        { type: "send_email", sender_id: sender, subject: "Hi", text: "Welcome" },
        { type: "add_to_list", list_id: list },
      ],
      redirect_url: "https://acme.example/thanks",
    });
    expect(automation).toMatchObject({ id: expect.stringMatching(/^aut_/), status: "active", webhook_secret: expect.stringMatching(/^whsec_/) });
    const segment = hookPath(automation).split("/").at(-1)!;
    expect(hookPath(automation)).toMatch(/^\/hooks\/automations\//);
    // The account database's tag and a dot (none for DB), then 24 random bytes, base64url: 192 bits.
    const tagged = databaseTag(account.database);
    expect(segment.startsWith(tagged === "" ? "" : `${tagged}.`)).toBe(true);
    expect(segment.slice(tagged === "" ? 0 : tagged.length + 1)).toMatch(/^[A-Za-z0-9_-]{32}$/);

    const paused = await call(`/api/v1/automations/${automation.id}`, { key, method: "PATCH", body: { status: "paused" } });
    expect((await json<Automation>(paused)).status).toBe("paused");
    const listed = await json<{ data: Automation[] }>(await call("/api/v1/automations", { key }));
    expect(listed.data.map((item) => item.id)).toEqual([automation.id]);

    const rotated = await json<Automation>(await call(`/api/v1/automations/${automation.id}/rotate-url`, { key, method: "POST" }));
    expect(rotated.private_url).not.toBe(automation.private_url);
    expect((await exports.default.fetch(new Request(`http://localhost${hookPath(automation)}?email=a@example.org`))).status).toBe(404);

    expect((await call(`/api/v1/automations/${automation.id}`, { key, method: "DELETE" })).status).toBe(200);
    expect((await call(`/api/v1/automations/${automation.id}`, { key })).status).toBe(404);
    expect((await exports.default.fetch(new Request(`http://localhost${hookPath(rotated)}?email=a@example.org`))).status).toBe(404);
  });

  it("refuses unknown templates, senders and lists, bad waits and bad conditions with 422 naming the step", async () => {
    const { key, sender } = await setup();
    const response = await call("/api/v1/automations", {
      key,
      body: {
        name: "Broken",
        steps: [
          { type: "send_email", sender_id: "snd_nope", template_id: "tpl_nope" },
          { type: "add_to_list", list_id: "lst_nope" },
          { type: "condition", match: "all", conditions: [{ field: "shoe_size", op: "eq", value: 9 }] },
          { type: "send_email", sender_id: sender, subject: "No body" },
        ],
      },
    });
    expect(response.status).toBe(422);
    const body = await json<{ code: string; errors: Record<string, string[]> }>(response);
    expect(body.code).toBe("validation_failed");
    expect(Object.keys(body.errors).sort()).toEqual(["steps.3"]);
    const references = await call("/api/v1/automations", {
      key,
      body: {
        name: "Broken",
        steps: [
          { type: "send_email", sender_id: "snd_nope", template_id: "tpl_nope" },
          { type: "add_to_list", list_id: "lst_nope" },
          { type: "condition", match: "all", conditions: [{ field: "shoe_size", op: "eq", value: 9 }] },
          { type: "wait", until: new Date(Date.now() + 400 * 86_400_000).toISOString() },
        ],
      },
    });
    const errors = (await json<{ errors: Record<string, string[]> }>(references)).errors;
    expect(Object.keys(errors).sort()).toEqual([
      "steps.0.sender_id",
      "steps.0.template_id",
      "steps.1.list_id",
      "steps.2.conditions.0.field",
      "steps.3.until",
    ]);
    expect((await call("/api/v1/automations", { key, body: { name: "x", steps: [{ type: "wait", seconds: 366 * 86_400 }] } })).status).toBe(422);
  });

  it("needs the automations scope and feature, a live key to change anything, and hides other accounts' automations", async () => {
    const { key, sender } = await setup();
    const automation = await createAutomation(key, { steps: [{ type: "send_email", sender_id: sender, subject: "Hi", text: "x" }] });
    const contactsOnly = await createKey(key, { name: "contacts", scopes: ["contacts"] });
    expect((await call("/api/v1/automations", { key: contactsOnly.key })).status).toBe(403);
    const test = await createKey(key, { name: "test", mode: "test" });
    expect((await call("/api/v1/automations", { key: test.key })).status).toBe(200);
    const refused = await call(`/api/v1/automations/${automation.id}/trigger`, { key: test.key, body: { email: rcpt("t") } });
    expect(refused.status).toBe(403);
    expect((await json<{ code: string }>(refused)).code).toBe("live_key_required");

    const other = await createAccount({ features: ["email_api", "automations"] });
    expect((await call(`/api/v1/automations/${automation.id}`, { key: other.api_key })).status).toBe(404);
    expect((await call(`/api/v1/automations/${automation.id}/trigger`, { key: other.api_key, body: { email: rcpt("x") } })).status).toBe(404);
    const withoutFeature = await createAccount({ features: ["email_api"] });
    expect((await json<{ code: string }>(await call("/api/v1/automations", { key: withoutFeature.api_key }))).code).toBe("feature_disabled");
  });
});

describe("automations: runs on Workflows", () => {
  it("send_email → wait 2 s → add_to_list: the email arrives, the run waits, then completes; the contact is in the list; automation.completed is delivered", async () => {
    const { key, sender, list } = await setup();
    const hooks = receiverPath();
    await createEndpoint(key, { url: receiverUrl(hooks), events: ["automation.completed"] });
    const automation = await createAutomation(key, {
      steps: [
        { type: "send_email", sender_id: sender, subject: "Welcome {{first_name|there}}", html: "<p>Hello {{first_name}} from {{company}}</p>" },
        { type: "wait", seconds: 2 },
        { type: "add_to_list", list_id: list },
      ],
    });
    const to = rcpt("ann");
    const response = await call(`/api/v1/automations/${automation.id}/trigger`, { key, body: { email: to, first_name: "Ann", company: "Initech" } });
    expect(response.status).toBe(202);
    const triggered = await json<Triggered>(response);
    expect(triggered).toMatchObject({ run_id: expect.stringMatching(/^run_/), status: "running", created: true });

    const [mail] = await eventually(async () => {
      const found = await sinkMessagesTo(to);
      return found.length > 0 ? found : undefined;
    });
    expect(mail?.subject).toBe("Welcome Ann");
    const waiting = await waitForRun(key, triggered.run_id, "waiting");
    expect(waiting.steps.map((step) => step.status)).toEqual(["completed", "running", "pending"]);
    expect(waiting.steps[0]!.detail).toMatchObject({ message_id: expect.stringMatching(/^msg_/), credits_charged: 1 });

    const done = await waitForRun(key, triggered.run_id, "completed");
    expect(done.steps.map((step) => step.status)).toEqual(["completed", "completed", "completed"]);
    const waited = Date.parse(done.steps[1]!.finished_at!) - Date.parse(done.steps[1]!.started_at!);
    expect(waited).toBeGreaterThanOrEqual(1_900);
    const contact = await json<{ data: { email: string; lists: string[] }[] }>(
      await call(`/api/v1/contacts?email=${encodeURIComponent(to)}`, { key }),
    );
    expect(contact.data[0]?.lists).toEqual([list]);

    const [delivery] = await waitForRequests(hooks, 1);
    const event = JSON.parse(delivery!.body) as { type: string; data: Record<string, unknown> };
    expect(event).toMatchObject({
      type: "automation.completed",
      data: { run_id: triggered.run_id, automation_id: automation.id, email: to, contact_id: done.contact.id, status: "completed" },
    });
  });

  it("a wait of 3 days resumes and finishes the run (sleeps skipped through the Workflows test introspection)", async () => {
    const { key, sender, list } = await setup();
    introspector = await introspectWorkflow(env.AUTOMATION_WORKFLOW);
    await introspector.modifyAll(async (m) => {
      await m.disableSleeps();
    });
    const automation = await createAutomation(key, {
      steps: [
        { type: "wait", seconds: 3 * 86_400 },
        { type: "add_to_list", list_id: list },
        { type: "send_email", sender_id: sender, subject: "Three days later", text: "Still there?" },
      ],
    });
    const to = rcpt("later");
    const triggered = await json<Triggered>(await call(`/api/v1/automations/${automation.id}/trigger`, { key, body: { email: to } }));
    const [instance] = await introspector.get();
    await instance!.waitForStatus("complete");
    const done = await runOf(key, triggered.run_id);
    expect(done.status).toBe("completed");
    expect(done.steps.map((step) => `${step.type}:${step.status}`)).toEqual(["wait:completed", "add_to_list:completed", "send_email:completed"]);
    const delivered = await eventually(async () => {
      const found = await sinkMessagesTo(to);
      return found.length > 0 ? found : undefined;
    });
    expect(delivered.map((message) => message.subject)).toEqual(["Three days later"]);
  });

  it("a condition with a 200-byte ends_with value decides the run (D1 refuses LIKE patterns over 50 bytes)", async () => {
    const { key, list } = await setup();
    // Retried at once rather than over 7.5 minutes, so a step that fails shows its error within the test.
    introspector = await introspectWorkflow(env.AUTOMATION_WORKFLOW);
    await introspector.modifyAll(async (m) => {
      await m.disableRetryDelays();
    });
    const suffix = `${"Ωmega日本-".repeat(10)}${"Y".repeat(70)}`;
    expect(new TextEncoder().encode(suffix).length).toBe(200);
    const automation = await createAutomation(key, {
      steps: [
        { type: "condition", match: "all", conditions: [{ field: "custom_fields.ref", op: "ends_with", value: suffix }] },
        { type: "add_to_list", list_id: list },
      ],
    });
    const trigger = async (ref: string) =>
      json<Triggered>(await call(`/api/v1/automations/${automation.id}/trigger`, { key, body: { email: rcpt("ref"), custom_fields: { ref } } }));
    const matching = await trigger(`order ${suffix.replace(/Y/g, "y")}`);
    const other = await trigger(`${suffix} and more`);
    const matched = await waitForRun(key, matching.run_id, "completed");
    expect(matched.error).toBeNull();
    expect(matched.steps.map((step) => `${step.type}:${step.status}`)).toEqual(["condition:completed", "add_to_list:completed"]);
    expect(matched.steps[0]!.detail).toEqual({ matched: true });
    const stopped = await waitForRun(key, other.run_id, "completed");
    expect(stopped.steps.map((step) => `${step.type}:${step.status}`)).toEqual(["condition:completed", "add_to_list:pending"]);
    expect(stopped.steps[0]!.detail).toMatchObject({ matched: false });
  });

  it("a fault of ours shows on the run as an internal error, never with its SQL; a retryable failure keeps its message", async () => {
    // D1 refuses the long LIKE pattern only once it meets a row: the account's database holds one.
    const account = await createAccount();
    expect((await call("/api/v1/contacts", { key: account.api_key, body: { email: "fault@example.net" } })).status).toBeLessThan(300);
    const fault = await drizzle(d1Of(account))
      .select()
      .from(contacts)
      .where(sql`${contacts.email} LIKE ${`%${"x".repeat(60)}%`}`)
      .all()
      .catch((error: unknown) => error);
    expect(String(fault)).toMatch(/select .* from "contacts"/);
    const shown = stepFailureMessage(fault, { runId: "run_test", what: "Step 0 (condition)" });
    expect(shown).toBe("Step 0 (condition) failed because of an internal error on our side (logged with the run id)");
    expect(stepFailureMessage(new RetryableStepError("The webhook answered 503: busy"), { runId: "run_test", what: "Step 1 (webhook)" })).toBe(
      "The webhook answered 503: busy",
    );
  });

  it("the same event_id 10 times at once: one run, one email", async () => {
    const { key, sender } = await setup();
    const automation = await createAutomation(key, { steps: [{ type: "send_email", sender_id: sender, subject: "Once", text: "Only once" }] });
    const to = rcpt("once");
    const responses = await Promise.all(
      Array.from({ length: 10 }, () => call(`/api/v1/automations/${automation.id}/trigger`, { key, body: { email: to, event_id: "signup-42" } })),
    );
    const bodies = await Promise.all(responses.map((response) => json<Triggered>(response)));
    expect(new Set(bodies.map((body) => body.run_id)).size).toBe(1);
    expect(bodies.filter((body) => body.created)).toHaveLength(1);
    expect(responses.map((response) => response.status).sort()).toEqual([200, 200, 200, 200, 200, 200, 200, 200, 200, 202]);
    const done = await waitForRun(key, bodies[0]!.run_id, "completed");
    const runs = await json<{ data: Run[] }>(await call(`/api/v1/automations/${automation.id}/runs`, { key }));
    expect(runs.data).toHaveLength(1);
    const messageId = done.steps[0]!.detail.message_id as string;
    await eventually(async () =>
      (await json<{ status: string }>(await call(`/api/v1/messages/${messageId}`, { key }))).status === "sent" ? true : undefined,
    );
    expect(await sinkMessagesTo(to)).toHaveLength(1);
  });

  it("a suppressed or unsubscribed contact gets a run whose email step is skipped, never sent or charged", async () => {
    const { key, sender, list } = await setup();
    const automation = await createAutomation(key, {
      steps: [
        { type: "send_email", sender_id: sender, subject: "Hi", text: "x" },
        { type: "add_to_list", list_id: list },
      ],
    });
    const to = rcpt("gone");
    await call("/api/v1/contacts", { key, body: { email: to } });
    const contact = await json<{ data: { id: string }[] }>(await call(`/api/v1/contacts?email=${encodeURIComponent(to)}`, { key }));
    await call(`/api/v1/contacts/${contact.data[0]!.id}`, { key, method: "PATCH", body: { status: "unsubscribed" } });
    const before = await json<{ send: { balance: number } }>(await call("/api/v1/credits", { key }));
    const triggered = await json<Triggered>(await call(`/api/v1/automations/${automation.id}/trigger`, { key, body: { email: to } }));
    const done = await waitForRun(key, triggered.run_id, "completed");
    expect(done.steps.map((step) => step.status)).toEqual(["skipped", "completed"]);
    expect(done.steps[0]!.detail.reason).toContain("unsubscribed");
    expect(await sinkMessagesTo(to)).toHaveLength(0);
    expect(await json(await call("/api/v1/credits", { key }))).toMatchObject({ send: { balance: before.send.balance } });
  });

  it("a false condition stops the run; a send without credits fails it clearly; cancel stops a waiting run", async () => {
    const { key, list } = await setup();
    const conditional = await createAutomation(key, {
      steps: [
        { type: "condition", match: "all", conditions: [{ field: "country", op: "eq", value: "DE" }] },
        { type: "add_to_list", list_id: list },
      ],
    });
    const stopped = await json<Triggered>(
      await call(`/api/v1/automations/${conditional.id}/trigger`, { key, body: { email: rcpt("fr"), country: "FR" } }),
    );
    const stoppedRun = await waitForRun(key, stopped.run_id, "completed");
    expect(stoppedRun.steps.map((step) => step.status)).toEqual(["completed", "pending"]);
    expect(stoppedRun.steps[0]!.detail).toMatchObject({ matched: false });

    const poor = await createAccount({ send_credits: 0, features: ["email_api", "automations", "campaigns"] });
    const domain = await verifiedDomain(poor.api_key);
    const poorSender = await json<{ id: string }>(
      await call("/api/v1/senders", { key: poor.api_key, body: { name: "P", email: `p@${domain.name}` } }),
    );
    const mailing = await createAutomation(poor.api_key, { steps: [{ type: "send_email", sender_id: poorSender.id, subject: "Hi", text: "x" }] });
    const failed = await json<Triggered>(await call(`/api/v1/automations/${mailing.id}/trigger`, { key: poor.api_key, body: { email: rcpt("p") } }));
    const failedRun = await waitForRun(poor.api_key, failed.run_id, "failed");
    expect(failedRun.error).toContain("insufficient_credits");
    expect(failedRun.steps[0]).toMatchObject({ status: "failed", detail: { error: expect.stringContaining("insufficient_credits") } });

    const slow = await createAutomation(key, {
      steps: [
        { type: "wait", seconds: 3600 },
        { type: "add_to_list", list_id: list },
      ],
    });
    const waiting = await json<Triggered>(await call(`/api/v1/automations/${slow.id}/trigger`, { key, body: { email: rcpt("slow") } }));
    await waitForRun(key, waiting.run_id, "waiting");
    const cancelled = await call(`/api/v1/automations/runs/${waiting.run_id}/cancel`, { key, method: "POST" });
    expect((await json<Run>(cancelled)).status).toBe("cancelled");
    expect((await runOf(key, waiting.run_id)).status).toBe("cancelled");
  });

  it("update_contact, remove_from_list and a webhook step signed with the automation's secret", async () => {
    const { key, list } = await setup();
    const hooks = receiverPath();
    const automation = await createAutomation(key, {
      steps: [
        { type: "update_contact", fields: { company: "Globex" }, custom_fields: { stage: "trial" } },
        { type: "remove_from_list", list_id: list },
        { type: "webhook", url: receiverUrl(hooks) },
      ],
    });
    const to = rcpt("hooked");
    await call("/api/v1/contacts", { key, body: { email: to, lists: [list] } });
    const triggered = await json<Triggered>(
      await call(`/api/v1/automations/${automation.id}/trigger`, { key, body: { email: to, event_id: "e-1" } }),
    );
    const done = await waitForRun(key, triggered.run_id, "completed");
    expect(done.steps.map((step) => step.status)).toEqual(["completed", "completed", "completed"]);
    const contact = await json<{ data: { company: string; custom_fields: Record<string, unknown>; lists: string[] }[] }>(
      await call(`/api/v1/contacts?email=${encodeURIComponent(to)}`, { key }),
    );
    expect(contact.data[0]).toMatchObject({ company: "Globex", custom_fields: { stage: "trial" }, lists: [] });

    const [request] = await waitForRequests(hooks, 1);
    const verified = await verifyWebhook(automation.webhook_secret, request!.headers["x-service-signature"] ?? "", request!.body);
    expect(verified.ok).toBe(true);
    expect(JSON.parse(request!.body)).toMatchObject({
      type: "automation.step",
      data: { automation_id: automation.id, run_id: triggered.run_id, step_index: 2, event_id: "e-1", contact: { email: to, company: "Globex" } },
    });
  });

  it("a paused automation answers 409; another account's run is 404", async () => {
    const { key, sender } = await setup();
    const automation = await createAutomation(key, {
      status: "paused",
      steps: [{ type: "send_email", sender_id: sender, subject: "Hi", text: "x" }],
    });
    const refused = await call(`/api/v1/automations/${automation.id}/trigger`, { key, body: { email: rcpt("p") } });
    expect(refused.status).toBe(409);
    expect((await json<{ code: string }>(refused)).code).toBe("automation_paused");
    await call(`/api/v1/automations/${automation.id}`, { key, method: "PATCH", body: { status: "active" } });
    const triggered = await json<Triggered>(await call(`/api/v1/automations/${automation.id}/trigger`, { key, body: { email: rcpt("p") } }));
    const other = await createAccount({ features: ["email_api", "automations"] });
    expect((await call(`/api/v1/automations/runs/${triggered.run_id}`, { key: other.api_key })).status).toBe(404);
  });
});

describe("the private URL (no key)", () => {
  const hook = (automation: Automation, init: RequestInit & { query?: string } = {}) =>
    exports.default.fetch(new Request(`http://localhost${hookPath(automation)}${init.query ?? ""}`, init));

  it("starts runs from an HTML form post (303 to redirect_url), a JSON post (202) and a GET with a query string", async () => {
    const { key, sender } = await setup();
    const automation = await createAutomation(key, {
      steps: [{ type: "send_email", sender_id: sender, subject: "Hi {{first_name}} on {{plan}}!", text: "x" }],
      redirect_url: "https://acme.example/thanks",
    });
    const formTo = rcpt("form");
    const form = await hook(automation, {
      method: "POST",
      headers: { "Content-Type": "application/x-www-form-urlencoded", Accept: "text/html,application/xhtml+xml" },
      body: new URLSearchParams({ email: formTo, first_name: "Fay", plan: "pro" }).toString(),
      redirect: "manual",
    });
    expect(form.status).toBe(303);
    expect(form.headers.get("Location")).toBe("https://acme.example/thanks");

    const jsonTo = rcpt("json");
    const posted = await hook(automation, {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ email: jsonTo }),
    });
    expect(posted.status).toBe(202);
    expect(await json<Triggered>(posted)).toMatchObject({ run_id: expect.stringMatching(/^run_/), created: true });

    const getTo = rcpt("get");
    const fetched = await hook(automation, { query: `?email=${encodeURIComponent(getTo)}&first_name=Gus` });
    expect(fetched.status).toBe(202);

    const multipart = new FormData();
    const multiTo = rcpt("multi");
    multipart.set("email", multiTo);
    expect((await hook(automation, { method: "POST", body: multipart })).status).toBe(202);

    for (const [to, subject] of [
      [formTo, "Hi Fay on pro!"],
      [jsonTo, "Hi  on !"],
      [getTo, "Hi Gus on !"],
      [multiTo, "Hi  on !"],
    ] as const) {
      const [message] = await eventually(async () => {
        const found = await sinkMessagesTo(to);
        return found.length > 0 ? found : undefined;
      });
      expect(message?.subject).toBe(subject);
    }
    const contact = await json<{ data: { custom_fields: Record<string, unknown> }[] }>(
      await call(`/api/v1/contacts?email=${encodeURIComponent(formTo)}`, { key }),
    );
    expect(contact.data[0]?.custom_fields).toEqual({ plan: "pro" });
  });

  it("answers 404 for a wrong path, 422 without an email, 413 over 64 KB, 403 once the feature is off, CORS preflight, and ignores a filled honeypot", async () => {
    const { account, key, sender } = await setup();
    const automation = await createAutomation(key, { steps: [{ type: "send_email", sender_id: sender, subject: "Hi", text: "x" }] });
    const wrong = await exports.default.fetch(new Request("http://localhost/hooks/automations/not-a-real-path?email=a@example.org"));
    expect(wrong.status).toBe(404);
    const missing = await hook(automation, { method: "POST", headers: { "Content-Type": "application/json" }, body: "{}" });
    expect(missing.status).toBe(422);
    expect(Object.keys((await json<{ errors: Record<string, string[]> }>(missing)).errors)).toEqual(["email"]);
    const large = await hook(automation, {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ email: rcpt("big"), first_name: "x".repeat(70 * 1024) }),
    });
    expect(large.status).toBe(413);
    const preflight = await hook(automation, {
      method: "OPTIONS",
      headers: { Origin: "https://acme.example", "Access-Control-Request-Method": "POST" },
    });
    expect(preflight.status).toBe(204);
    expect(preflight.headers.get("Access-Control-Allow-Origin")).toBe("*");

    const withoutFeature = await call(`/admin/v1/accounts/${account.id}`, {
      key: ADMIN_TOKEN,
      method: "PATCH",
      body: { features: ["email_api"] },
    });
    expect(withoutFeature.status).toBe(200);
    const disabled = await hook(automation, { query: `?email=${encodeURIComponent(rcpt("off"))}` });
    expect(disabled.status).toBe(403);
    expect((await json<{ code: string }>(disabled)).code).toBe("feature_disabled");
    await call(`/admin/v1/accounts/${account.id}`, {
      key: ADMIN_TOKEN,
      method: "PATCH",
      body: { features: ["email_api", "automations", "campaigns"] },
    });

    const bot = rcpt("bot");
    const trapped = await hook(automation, { query: `?email=${encodeURIComponent(bot)}&_honeypot=buy-now` });
    expect(trapped.status).toBe(202);
    const decoy = await json<Triggered>(trapped);
    expect(decoy).toMatchObject({ run_id: expect.stringMatching(/^run_/), status: "running", created: true });
    expect((await call(`/api/v1/automations/runs/${decoy.run_id}`, { key })).status).toBe(404);
    const runs = await json<{ data: Run[] }>(await call(`/api/v1/automations/${automation.id}/runs`, { key }));
    expect(runs.data).toHaveLength(0);
  });

  it("is rate limited per path: 429 with Retry-After", async () => {
    const { key, sender } = await setup();
    const automation = await createAutomation(key, {
      status: "paused",
      steps: [{ type: "send_email", sender_id: sender, subject: "Hi", text: "x" }],
    });
    const statuses: number[] = [];
    let retryAfter: string | null = null;
    // The limit is a bucket of 60 refilled at one a second: a burst of 60 passes, then requests are refused, except
    // the few the bucket regained while the burst was being sent (a loaded machine sends it slowly).
    const started = Date.now();
    while (statuses.length < 100 && retryAfter === null) {
      const response = await hook(automation, { query: `?email=${encodeURIComponent(rcpt("flood"))}` });
      statuses.push(response.status);
      if (response.status === 429) retryAfter = response.headers.get("Retry-After");
    }
    const refilled = Math.ceil((Date.now() - started) / 1000);
    // Paused: each accepted request is a 409, so nothing runs while the limit is measured.
    expect(statuses.slice(0, 60)).toEqual(Array(60).fill(409));
    expect(statuses.at(-1)).toBe(429);
    expect(statuses.length - 1).toBeLessThanOrEqual(60 + refilled);
    expect(Number(retryAfter)).toBeGreaterThan(0);
  });
});
