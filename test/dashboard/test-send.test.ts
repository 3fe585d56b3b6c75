// The campaign editor's test send: the mail reaches the sink, rendered for the chosen contact with every placeholder
// filled, and an address the API would refuse is refused.
import PostalMime from "postal-mime";
import { describe, expect, it } from "vitest";
import { campaignAccount } from "../support/campaigns";
import { call, json } from "../support/helpers";
import { eventually, sinkMessagesTo, sinkRaw } from "../support/sending";
import { signIn } from "../support/dashboard";

describe("the campaign editor's test send", { timeout: 60_000 }, () => {
  it("delivers the draft to the address given, filled in for the chosen contact, subject marked [Test]", async () => {
    const { key, sender } = await campaignAccount();
    const list = await json<{ id: string }>(await call("/api/v1/lists", { key, body: { name: "Readers" } }));
    const ann = await json<{ id: string; email: string }>(
      await call("/api/v1/contacts", {
        key,
        body: { email: `ann-${crypto.randomUUID().slice(0, 8)}@example.org`, first_name: "Ann", lists: [list.id], custom_fields: { plan: "pro" } },
      }),
    );
    await call("/api/v1/contacts", {
      key,
      body: { email: `bob-${crypto.randomUUID().slice(0, 8)}@example.org`, first_name: "Bob", lists: [list.id] },
    });
    const template = await json<{ id: string }>(
      await call("/api/v1/templates", {
        key,
        body: {
          name: "News",
          subject: "News for {{first_name|friend}}",
          html: "<p>Hello {{first_name}}, this is for {{email}} on {{custom_fields.plan|free}}.</p>",
        },
      }),
    );
    const campaign = await json<{ id: string }>(
      await call("/api/v1/campaigns", { key, body: { name: "News", sender_id: sender, template_id: template.id, lists: [list.id] } }),
    );
    const browser = await signIn(key);
    const to = `tester-${crypto.randomUUID().slice(0, 8)}@example.org`;
    const response = await browser.post(`/dashboard/campaigns/${campaign.id}/test`, { to, contact: ann.id });
    expect(response.status).toBe(303);
    expect(response.headers.get("Location")).toBe(`/dashboard/campaigns/${campaign.id}?tested=${encodeURIComponent(to)}`);

    const [delivered] = await eventually(async () => {
      const found = await sinkMessagesTo(to);
      return found.length > 0 ? found : undefined;
    });
    const mail = await PostalMime.parse(await sinkRaw(delivered!.id));
    expect(mail.subject).toBe("[Test] News for Ann");
    expect(mail.html).toContain(`Hello Ann, this is for ${ann.email} on pro.`);
    expect(`${mail.subject} ${mail.html} ${mail.text}`).not.toContain("{{");
    expect(mail.to?.map((address) => address.address)).toEqual([to]);
    // The campaign itself is still a draft: a test sends nothing to its audience.
    expect((await json<{ status: string }>(await call(`/api/v1/campaigns/${campaign.id}`, { key }))).status).toBe("draft");
    expect(await sinkMessagesTo(ann.email)).toEqual([]);
  });

  it("refuses an address that is not one, as POST /send does, and sends nothing", async () => {
    const { key, sender, domain } = await campaignAccount();
    await call("/api/v1/contacts", { key, body: { email: "ann@example.org", first_name: "Ann" } });
    const campaign = await json<{ id: string }>(
      await call("/api/v1/campaigns", { key, body: { name: "News", sender_id: sender, subject: "Hi", text: "Hello", lists: [] } }),
    );
    const api = await call("/api/v1/send", { key, body: { from: `hello@${domain.name}`, to: ["not an address"], subject: "Hi", text: "Hello" } });
    expect(api.status).toBe(422);
    const [reason] = (await json<{ errors: Record<string, string[]> }>(api)).errors["to.0"]!;
    expect(reason).toMatch(/^Not a valid email address/);

    const browser = await signIn(key);
    const response = await browser.post(`/dashboard/campaigns/${campaign.id}/test`, { to: "not an address" });
    expect(response.status).toBe(422);
    expect(await response.text()).toContain(`to: ${reason}`);
    expect((await json<{ data: unknown[] }>(await call("/api/v1/messages", { key }))).data).toEqual([]);
    expect((await json<{ send: { balance: number } }>(await call("/api/v1/credits", { key }))).send.balance).toBe(100);
  });

  it("shows the API's refusal when the test cannot be accepted (no credits), instead of saying it was sent", async () => {
    const { key, sender } = await campaignAccount({ sendCredits: 0 });
    await call("/api/v1/contacts", { key, body: { email: "ann@example.org", first_name: "Ann" } });
    const campaign = await json<{ id: string }>(
      await call("/api/v1/campaigns", { key, body: { name: "News", sender_id: sender, subject: "Hi", text: "Hello", lists: [] } }),
    );
    const to = `tester-${crypto.randomUUID().slice(0, 8)}@example.org`;
    const browser = await signIn(key);
    const response = await browser.post(`/dashboard/campaigns/${campaign.id}/test`, { to });
    expect(response.status).toBe(402);
    expect(await response.text()).toContain("Not enough sending credits");
    expect(await sinkMessagesTo(to)).toEqual([]);
  });
});
