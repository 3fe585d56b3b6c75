import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { eventDataSchemas, eventTypes, type EventType } from "../../src/domain/events/events";
import { call, createAccount, createKey, d1Of, json } from "../support/helpers";
import { createEndpoint, deliveriesOf, receivedOn, receiverPath, receiverUrl, specVerify, type Endpoint } from "../support/webhooks";

describe("webhook endpoints API: happy paths", () => {
  it("creates an endpoint with its secret shown once, then lists and gets it with the secret masked", async () => {
    const account = await createAccount();
    const created = await call("/api/v1/webhooks", {
      key: account.api_key,
      body: { url: receiverUrl("/created"), events: ["relay.delivered", "relay.bounced", "relay.delivered"], description: "CRM sync" },
    });
    expect(created.status).toBe(201);
    const endpoint = await json<Endpoint>(created);
    expect(endpoint).toMatchObject({
      id: expect.stringMatching(/^wh_/),
      url: receiverUrl("/created"),
      events: ["relay.delivered", "relay.bounced"],
      enabled: true,
      description: "CRM sync",
      disabled_reason: null,
      failing_since: null,
      previous_secret_expires_at: null,
    });
    expect(endpoint.secret).toMatch(/^whsec_[A-Za-z0-9+/]{32}$/);

    const masked = `whsec_…${endpoint.secret.slice(-4)}`;
    const list = await json<{ data: Endpoint[]; has_more: boolean; next_cursor: string | null }>(
      await call("/api/v1/webhooks", { key: account.api_key }),
    );
    expect(list).toMatchObject({ has_more: false, next_cursor: null });
    expect(list.data.map((e) => [e.id, e.secret])).toEqual([[endpoint.id, masked]]);
    expect(JSON.stringify(list)).not.toContain(endpoint.secret);

    const one = await call(`/api/v1/webhooks/${endpoint.id}`, { key: account.api_key });
    expect(one.status).toBe(200);
    expect(await json(one)).toMatchObject({ id: endpoint.id, secret: masked });
  });

  it("stores the secret encrypted, never in clear", async () => {
    const account = await createAccount();
    const endpoint = await createEndpoint(account.api_key, { url: receiverUrl("/enc"), events: ["*"] });
    const row = await d1Of(account).prepare("SELECT secret FROM webhook_endpoints WHERE id = ?").bind(endpoint.id).first<{ secret: string }>();
    expect(row?.secret).toMatch(/^v1\./);
    expect(row?.secret).not.toContain(endpoint.secret.slice(6));
  });

  it("`*` stands for every type and absorbs the others", async () => {
    const account = await createAccount();
    const endpoint = await createEndpoint(account.api_key, { url: receiverUrl("/all"), events: ["delivered", "*"] });
    expect(endpoint.events).toEqual(["*"]);
  });

  it("paginates the list with a cursor", async () => {
    const account = await createAccount();
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) ids.push((await createEndpoint(account.api_key, { url: receiverUrl(`/page/${i}`), events: ["*"] })).id);
    const first = await json<{ data: Endpoint[]; has_more: boolean; next_cursor: string }>(
      await call("/api/v1/webhooks?limit=2", { key: account.api_key }),
    );
    expect(first.data).toHaveLength(2);
    expect(first.has_more).toBe(true);
    const second = await json<{ data: Endpoint[]; has_more: boolean }>(
      await call(`/api/v1/webhooks?limit=2&cursor=${first.next_cursor}`, { key: account.api_key }),
    );
    expect(second).toMatchObject({ has_more: false });
    expect([...first.data, ...second.data].map((e) => e.id).sort()).toEqual([...ids].sort());
  });

  it("updates url, events, description and enabled", async () => {
    const account = await createAccount();
    const endpoint = await createEndpoint(account.api_key, { url: receiverUrl("/v1"), events: ["*"], description: "old" });
    const response = await call(`/api/v1/webhooks/${endpoint.id}`, {
      key: account.api_key,
      method: "PATCH",
      body: { url: receiverUrl("/v2"), events: ["relay.bounced"], description: null, enabled: false },
    });
    expect(response.status).toBe(200);
    const updated = await json<Endpoint>(response);
    expect(updated).toMatchObject({ url: receiverUrl("/v2"), events: ["relay.bounced"], description: null, enabled: false });
    expect(updated.secret).toBe(`whsec_…${endpoint.secret.slice(-4)}`);
  });

  it("re-enabling clears the automatic disable reason and the failure streak", async () => {
    const account = await createAccount();
    const endpoint = await createEndpoint(account.api_key, { url: receiverUrl("/re"), events: ["*"] });
    await d1Of(account)
      .prepare("UPDATE webhook_endpoints SET enabled = 0, disabled_reason = 'failing', failing_since = '2026-01-01T00:00:00.000Z' WHERE id = ?")
      .bind(endpoint.id)
      .run();
    const response = await call(`/api/v1/webhooks/${endpoint.id}`, { key: account.api_key, method: "PATCH", body: { enabled: true } });
    expect(await json(response)).toMatchObject({ enabled: true, disabled_reason: null, failing_since: null });
  });

  it("rotating the secret returns the new one once; the old one keeps signing for 24 hours", async () => {
    const account = await createAccount();
    const endpoint = await createEndpoint(account.api_key, { url: receiverUrl("/rot"), events: ["*"] });
    const before = Date.now();
    const response = await call(`/api/v1/webhooks/${endpoint.id}`, { key: account.api_key, method: "PATCH", body: { rotate_secret: true } });
    const after = Date.now();
    expect(response.status).toBe(200);
    const rotated = await json<Endpoint>(response);
    expect(rotated.secret).toMatch(/^whsec_[A-Za-z0-9+/]{32}$/);
    expect(rotated.secret).not.toBe(endpoint.secret);
    const expires = Date.parse(rotated.previous_secret_expires_at ?? "");
    expect(expires - before).toBeGreaterThanOrEqual(24 * 3600 * 1000 - 1000);
    expect(expires - after).toBeLessThanOrEqual(24 * 3600 * 1000);
    const again = await json<Endpoint>(await call(`/api/v1/webhooks/${endpoint.id}`, { key: account.api_key }));
    expect(again.secret).toBe(`whsec_…${rotated.secret.slice(-4)}`);
  });

  it("deletes an endpoint and its delivery log", async () => {
    const account = await createAccount();
    const path = receiverPath();
    const endpoint = await createEndpoint(account.api_key, { url: receiverUrl(path), events: ["*"] });
    await call(`/api/v1/webhooks/${endpoint.id}/test`, { key: account.api_key, method: "POST" });
    const response = await call(`/api/v1/webhooks/${endpoint.id}`, { key: account.api_key, method: "DELETE" });
    expect(response.status).toBe(200);
    expect(await json(response)).toEqual({ id: endpoint.id, deleted: true });
    expect((await call(`/api/v1/webhooks/${endpoint.id}`, { key: account.api_key })).status).toBe(404);
    const rows = await d1Of(account)
      .prepare("SELECT COUNT(*) AS n FROM webhook_deliveries WHERE endpoint_id = ?")
      .bind(endpoint.id)
      .first<{ n: number }>();
    expect(rows?.n).toBe(0);
  });
});

describe("POST /webhooks/{id}/test", () => {
  it("sends a signed event of the chosen type now and reports the answer; it is logged", async () => {
    const account = await createAccount();
    const path = receiverPath();
    const endpoint = await createEndpoint(account.api_key, { url: receiverUrl(path), events: ["relay.bounced"] });
    const response = await call(`/api/v1/webhooks/${endpoint.id}/test`, { key: account.api_key, body: { type: "relay.bounced" } });
    expect(response.status).toBe(200);
    const result = await json<{
      ok: boolean;
      status_code: number;
      duration_ms: number;
      response_snippet: string;
      event: { id: string; type: string };
    }>(response);
    expect(result).toMatchObject({ ok: true, status_code: 200, response_snippet: '{"ok":true}', event: { type: "relay.bounced" } });
    expect(result.duration_ms).toBeGreaterThanOrEqual(0);

    const [request] = await receivedOn(path);
    expect(request).toBeDefined();
    const body = JSON.parse(request!.body);
    expect(Object.keys(body)).toEqual(["id", "type", "created_at", "data"]);
    expect(body).toMatchObject({
      id: result.event.id,
      type: "relay.bounced",
      data: { bounce_type: "hard", recipient: "jane@example.com", message_id: expect.stringContaining("_test") },
    });
    expect(await specVerify(endpoint.secret, request!.headers["x-service-signature"]!, request!.body, Math.floor(Date.now() / 1000))).toBe(true);

    const [logged] = await deliveriesOf(account.api_key, endpoint.id);
    expect(logged).toMatchObject({ event_id: result.event.id, event_type: "relay.bounced", attempt: 1, status: "succeeded", status_code: 200 });
  });

  it("defaults to relay.delivered without a body, and reports a failing endpoint without retrying it", async () => {
    const account = await createAccount();
    const path = receiverPath();
    await fetch(`${env.TEST_WEBHOOK_RECEIVER_URL}/_rules`, {
      method: "POST",
      body: JSON.stringify({ path, status: 503, body: "down for maintenance" }),
    });
    const endpoint = await createEndpoint(account.api_key, { url: receiverUrl(path), events: ["*"] });
    const response = await call(`/api/v1/webhooks/${endpoint.id}/test`, { key: account.api_key, method: "POST" });
    expect(await json(response)).toMatchObject({
      ok: false,
      status_code: 503,
      response_snippet: "down for maintenance",
      event: { type: "relay.delivered" },
    });
    expect(await deliveriesOf(account.api_key, endpoint.id)).toMatchObject([{ status: "failed", next_retry_at: null }]);
  });
  it("can send every event type, each with sample data that matches its documented `data` schema", async () => {
    const account = await createAccount();
    const path = receiverPath();
    const endpoint = await createEndpoint(account.api_key, { url: receiverUrl(path), events: ["*"] });
    for (const type of eventTypes) {
      const response = await call(`/api/v1/webhooks/${endpoint.id}/test`, { key: account.api_key, body: { type } });
      expect(await json(response), type).toMatchObject({ ok: true, event: { type } });
    }
    const received = (await receivedOn(path)).map((request) => JSON.parse(request.body) as { type: EventType; data: unknown });
    expect(received.map((body) => body.type)).toEqual([...eventTypes]);
    for (const body of received) expect(eventDataSchemas[body.type].safeParse(body.data).success, body.type).toBe(true);
  });

  it("refuses an unknown test event type with 422", async () => {
    const account = await createAccount();
    const endpoint = await createEndpoint(account.api_key, { url: receiverUrl(receiverPath()), events: ["*"] });
    const response = await call(`/api/v1/webhooks/${endpoint.id}/test`, { key: account.api_key, body: { type: "webhook.nope" } });
    expect(response.status).toBe(422);
  });
});

describe("webhook endpoints API: errors", () => {
  it("refuses unknown event types with 422 naming the field", async () => {
    const account = await createAccount();
    const response = await call("/api/v1/webhooks", {
      key: account.api_key,
      body: { url: receiverUrl("/x"), events: ["relay.sent", "email.opened"] },
    });
    expect(response.status).toBe(422);
    expect(await json(response)).toMatchObject({ code: "validation_failed", errors: { "events.1": [expect.any(String)] } });
    const empty = await call("/api/v1/webhooks", { key: account.api_key, body: { url: receiverUrl("/x"), events: [] } });
    expect(empty.status).toBe(422);
  });

  it("refuses a missing or invalid URL with 422", async () => {
    const account = await createAccount();
    for (const url of [undefined, "", "not a url", "ftp://example.com/x"]) {
      const response = await call("/api/v1/webhooks", { key: account.api_key, body: { url, events: ["*"] } });
      expect(response.status, String(url)).toBe(422);
      expect((await json<{ errors: Record<string, string[]> }>(response)).errors).toHaveProperty("url");
    }
  });

  it("refuses unknown fields", async () => {
    const account = await createAccount();
    const response = await call("/api/v1/webhooks", { key: account.api_key, body: { url: receiverUrl("/x"), events: ["*"], secret: "mine" } });
    expect(response.status).toBe(422);
  });

  it("another account's endpoint is a 404 on every route", async () => {
    const owner = await createAccount({ name: "Owner" });
    const other = await createAccount({ name: "Other" });
    const endpoint = await createEndpoint(owner.api_key, { url: receiverUrl("/mine"), events: ["*"] });
    const routes: [string, string, unknown?][] = [
      ["GET", `/api/v1/webhooks/${endpoint.id}`],
      ["PATCH", `/api/v1/webhooks/${endpoint.id}`, { enabled: false }],
      ["DELETE", `/api/v1/webhooks/${endpoint.id}`],
      ["POST", `/api/v1/webhooks/${endpoint.id}/test`, {}],
      ["GET", `/api/v1/webhooks/${endpoint.id}/deliveries`],
    ];
    for (const [method, path, body] of routes) {
      const response = await call(path, { key: other.api_key, method, body });
      expect(response.status, `${method} ${path}`).toBe(404);
      expect((await json(response)).code).toBe("not_found");
    }
    const list = await json<{ data: Endpoint[] }>(await call("/api/v1/webhooks", { key: other.api_key }));
    expect(list.data).toEqual([]);
    expect(await json(await call(`/api/v1/webhooks/${endpoint.id}`, { key: owner.api_key }))).toMatchObject({ enabled: true });
  });

  it("needs the webhooks scope", async () => {
    const account = await createAccount();
    const sendOnly = await createKey(account.api_key, { name: "send", scopes: ["send"] });
    const response = await call("/api/v1/webhooks", { key: sendOnly.key });
    expect(response.status).toBe(403);
    expect(await json(response)).toMatchObject({ code: "scope_missing", message: expect.stringContaining("webhooks") });
    const scoped = await createKey(account.api_key, { name: "hooks", scopes: ["webhooks"] });
    expect((await call("/api/v1/webhooks", { key: scoped.key })).status).toBe(200);
    expect((await call("/api/v1/webhooks")).status).toBe(401);
  });

  it("received mail goes only where an inbound key sends it: email.received and * need the inbound scope", async () => {
    const account = await createAccount();
    const hooks = await createKey(account.api_key, { name: "reports and hooks", scopes: ["reports", "webhooks"] });
    for (const events of [["email.received"], ["*"], ["relay.sent", "email.received"]]) {
      const refused = await call("/api/v1/webhooks", { key: hooks.key, body: { url: receiverUrl("/spy"), events } });
      expect(refused.status, JSON.stringify(events)).toBe(403);
      expect(await json(refused)).toMatchObject({ code: "scope_missing", message: expect.stringContaining("inbound") });
    }
    const allowed = await createEndpoint(hooks.key, { url: receiverUrl("/sent"), events: ["relay.sent", "replied"] });
    // Nor by a change: subscribing it later, or re-pointing one that an inbound key set up.
    const widened = await call(`/api/v1/webhooks/${allowed.id}`, { key: hooks.key, method: "PATCH", body: { events: ["*"] } });
    expect(widened.status).toBe(403);
    const inbox = await createEndpoint(account.api_key, { url: receiverUrl("/inbox"), events: ["email.received"] });
    for (const body of [{ url: receiverUrl("/spy") }, { rotate_secret: true }, { events: ["relay.sent"] }]) {
      const changed = await call(`/api/v1/webhooks/${inbox.id}`, { key: hooks.key, method: "PATCH", body });
      expect(changed.status, JSON.stringify(body)).toBe(403);
    }
    expect(await json(await call(`/api/v1/webhooks/${inbox.id}`, { key: account.api_key }))).toMatchObject({
      url: receiverUrl("/inbox"),
      events: ["email.received"],
    });
    expect(await json(await call(`/api/v1/webhooks/${allowed.id}`, { key: account.api_key }))).toMatchObject({ events: ["relay.sent", "replied"] });

    const reader = await createKey(account.api_key, { name: "inbox hooks", scopes: ["webhooks", "inbound"] });
    expect((await call("/api/v1/webhooks", { key: reader.key, body: { url: receiverUrl("/inbox2"), events: ["*"] } })).status).toBe(201);
    expect((await call(`/api/v1/webhooks/${inbox.id}`, { key: reader.key, method: "PATCH", body: { description: "support" } })).status).toBe(200);
  });

  it("caps an account at 20 endpoints", async () => {
    const account = await createAccount();
    for (let i = 0; i < 20; i++) await createEndpoint(account.api_key, { url: receiverUrl(`/cap/${i}`), events: ["*"] });
    const response = await call("/api/v1/webhooks", { key: account.api_key, body: { url: receiverUrl("/cap/21"), events: ["*"] } });
    expect(response.status).toBe(422);
    expect(await json(response)).toMatchObject({ errors: { url: [expect.stringContaining("at most 20")] } });
  });
});
