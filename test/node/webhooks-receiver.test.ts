import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { createWebhookReceiver, type ReceivedRequest } from "../../scripts/dev/webhook-receiver.ts";

// The programmable receiver the Workers tests and the webhook benchmark deliver to.

const receiver = createWebhookReceiver();
let base: string;

beforeAll(async () => {
  base = `http://127.0.0.1:${await receiver.listen(0)}`;
});

afterAll(async () => {
  await receiver.close();
});

beforeEach(async () => {
  await fetch(`${base}/_rules`, { method: "DELETE" });
  await fetch(`${base}/_requests`, { method: "DELETE" });
});

const post = (path: string, body = "{}", headers: Record<string, string> = {}) =>
  fetch(`${base}${path}`, { method: "POST", body, headers: { "Content-Type": "application/json", ...headers } });

const requests = async (path?: string) =>
  (await (await fetch(`${base}/_requests${path ? `?path=${encodeURIComponent(path)}` : ""}`)).json()) as { data: ReceivedRequest[] };

describe("webhook receiver", () => {
  it("records method, path, headers, the raw body and the arrival time, and answers 200 by default", async () => {
    const before = Date.now();
    const response = await post("/hooks/a", '{"id":"evt_1", "spacing kept":true}', { "X-Service-Signature": "t=1,v1=ab" });
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({ ok: true });
    const [request] = (await requests()).data;
    expect(request).toMatchObject({
      method: "POST",
      path: "/hooks/a",
      body: '{"id":"evt_1", "spacing kept":true}',
      answered_status: 200,
      headers: { "x-service-signature": "t=1,v1=ab", "content-type": "application/json" },
    });
    expect(request!.received_at_ms).toBeGreaterThanOrEqual(before);
    expect(new Date(request!.received_at).getTime()).toBe(request!.received_at_ms);
  });

  it("answers by rules matched on the path, `times` times, in order", async () => {
    await post("/_rules", JSON.stringify({ path: "/hooks/b", status: 500, times: 2, body: "boom" }));
    const statuses: number[] = [];
    for (let i = 0; i < 3; i++) statuses.push((await post("/hooks/b")).status);
    expect(statuses).toEqual([500, 500, 200]);
    expect((await post("/hooks/other")).status).toBe(200);
    expect((await requests("/hooks/b")).data.map((r) => r.answered_status)).toEqual([500, 500, 200]);
    const rules = (await (await fetch(`${base}/_rules`)).json()) as { data: { remaining: number | null }[] };
    expect(rules.data).toMatchObject([{ remaining: 0 }]);
  });

  it("a rule without times or path applies to everything until deleted", async () => {
    await post("/_rules", JSON.stringify({ status: 410 }));
    expect((await post("/x")).status).toBe(410);
    expect((await post("/y")).status).toBe(410);
    await fetch(`${base}/_rules`, { method: "DELETE" });
    expect((await post("/x")).status).toBe(200);
  });

  it("delays the answer but records the request on arrival", async () => {
    await post("/_rules", JSON.stringify({ path: "/slow", status: 202, delay_ms: 400 }));
    const started = Date.now();
    const response = await post("/slow");
    const answeredAt = Date.now();
    expect(response.status).toBe(202);
    expect(answeredAt - started).toBeGreaterThanOrEqual(380);
    const [request] = (await requests("/slow")).data;
    // Recorded when it arrived, a whole delay before the answer left; lower bounds hold on any machine.
    expect(request!.received_at_ms).toBeGreaterThanOrEqual(started);
    expect(answeredAt - request!.received_at_ms).toBeGreaterThanOrEqual(380);
  });

  it("refuses invalid rules with 422", async () => {
    expect((await post("/_rules", JSON.stringify({ status: 99 }))).status).toBe(422);
    expect((await post("/_rules", "not json")).status).toBe(400);
  });

  it("forgets requests of one path or all of them", async () => {
    await post("/p/1");
    await post("/p/2");
    await fetch(`${base}/_requests?path=/p/1`, { method: "DELETE" });
    expect((await requests()).data.map((r) => r.path)).toEqual(["/p/2"]);
    expect(receiver.requests("/p/2")).toHaveLength(1);
  });
});
