import { describe, expect, it } from "vitest";
import { call, createAccount, json } from "../support/helpers";
import { sendBalance, verifiedDomain } from "../support/sending";
import { mailTo, uniqueAddress } from "../support/members";

describe("the platform's own mail", () => {
  it("is plain text from SYSTEM_FROM, DKIM-signed once its domain is verified in any account, and charges no credits", async () => {
    // Some account verifies SYSTEM_FROM's domain; another account's invitations are then signed with its key.
    const platform = await createAccount({ name: "Platform" });
    const domain = await verifiedDomain(platform.api_key, "demo.mailforge.test");
    const selector = domain.records.find((record) => record.purpose === "dkim")!.name.split("._domainkey")[0];
    const account = await createAccount({ send_credits: 5 });
    const email = uniqueAddress("signed");
    expect((await call("/api/v1/members", { key: account.api_key, body: { email, role: "viewer" } })).status).toBe(201);

    const mail = await mailTo(email);
    expect(mail.from).toBe("no-reply@demo.mailforge.test");
    expect(mail.contentType).toBe("text/plain");
    expect(mail.raw).toMatch(/^Auto-Submitted: auto-generated\r$/m);
    const signatures = [...mail.raw.matchAll(/^DKIM-Signature:((?:.|\r\n[ \t])*)/gm)].map((match) => match[1]!.replace(/\s+/g, ""));
    expect(signatures.find((signature) => signature.includes("a=rsa-sha256"))).toMatch(new RegExp(`d=demo\\.mailforge\\.test;s=${selector};`));
    // Not a customer's message: nothing charged, nothing listed.
    expect(await sendBalance(account.api_key)).toBe(5);
    expect((await json<{ data: unknown[] }>(await call("/api/v1/messages", { key: account.api_key }))).data).toEqual([]);
  });
});
