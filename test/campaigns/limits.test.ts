import { describe, expect, it } from "vitest";
import { call, json } from "../support/helpers";
import { audienceOf, campaignAccount } from "../support/campaigns";

describe("a campaign's audience query", () => {
  it("answers 422 when its segments together bind more parameters than D1 takes, and reserves nothing", async () => {
    const { key, sender } = await campaignAccount();
    const { list } = await audienceOf(key, 2);
    // A custom field's `within_days` binds two values: three full segments need more than D1's 100 parameters.
    const conditions = Array.from({ length: 20 }, (_, i) => ({ field: "custom_fields.signup", op: "within_days", value: i + 1 }));
    const segments: string[] = [];
    for (const name of ["a", "b", "c"]) {
      const created = await call("/api/v1/segments", { key, body: { name, match: "any", conditions } });
      expect(created.status).toBe(201);
      segments.push((await json<{ id: string }>(created)).id);
    }
    const draft = await json<{ id: string }>(
      await call("/api/v1/campaigns", { key, body: { name: "wide", sender_id: sender, subject: "s", html: "<p>x</p>", lists: [list], segments } }),
    );
    const response = await call(`/api/v1/campaigns/${draft.id}/send`, { key, body: {} });
    expect(response.status).toBe(422);
    expect(await json(response)).toMatchObject({ code: "validation_failed", errors: { segments: [expect.stringContaining("too many conditions")] } });
    const credits = await json<{ send: { reserved: number } }>(await call("/api/v1/credits", { key }));
    expect(credits.send.reserved).toBe(0);
    // One such segment is fine.
    const narrow = await json<{ id: string }>(
      await call("/api/v1/campaigns", {
        key,
        body: { name: "narrow", sender_id: sender, subject: "s", html: "<p>x</p>", lists: [list], segments: [segments[0]] },
      }),
    );
    expect((await call(`/api/v1/campaigns/${narrow.id}/send`, { key, body: {} })).status).toBe(202);
  });
});
