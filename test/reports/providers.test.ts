import { openCtx } from "../../src/db/client";
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { providerOfDomain, providerOfMx, resolveProviders } from "../../src/domain/reports/providers";
import { call, createAccount, d1Of } from "../support/helpers";
import { eventually, messageOf, publish, verifiedDomain } from "../support/sending";

// Mailbox providers by domain name, and by MX through the real dev DoH server and the D1 DNS cache.

async function dohQueries(name: string): Promise<number> {
  const stats = await (await fetch(`${env.TEST_DOH_ADMIN_URL}/stats`)).json<{ byName: Record<string, number> }>();
  return stats.byName[`${name}/MX`] ?? 0;
}

const fresh = (label: string) => `${label}-${crypto.randomUUID().slice(0, 8)}.reports-test`;

describe("mailbox provider by domain name", () => {
  it("knows the consumer domains under their country domains, and nothing that only starts like one", () => {
    const cases: [string, string | undefined][] = [
      ["gmail.com", "gmail"],
      ["GoogleMail.com", "gmail"],
      ["outlook.com", "microsoft"],
      ["hotmail.co.uk", "microsoft"],
      ["live.fr", "microsoft"],
      ["msn.com", "microsoft"],
      ["yahoo.com", "yahoo"],
      ["yahoo.co.jp", "yahoo"],
      ["ymail.com", "yahoo"],
      ["aol.com", "yahoo"],
      ["rocketmail.com", "yahoo"],
      ["icloud.com", "apple"],
      ["me.com", "apple"],
      ["mac.com", "apple"],
      ["live.example.com", undefined],
      ["gmail.example.org", undefined],
      ["mygmail.com", undefined],
      ["example.com", undefined],
    ];
    expect(cases.map(([domain]) => [domain, providerOfDomain(domain)])).toEqual(cases);
  });

  it("tells the provider from the preferred MX host, on a label boundary", () => {
    expect(providerOfMx([{ priority: 1, exchange: "aspmx.l.google.com" }])).toBe("gmail");
    expect(providerOfMx([{ priority: 0, exchange: "acme-com.mail.protection.outlook.com" }])).toBe("microsoft");
    expect(providerOfMx([{ priority: 1, exchange: "mta5.am0.yahoodns.net" }])).toBe("yahoo");
    expect(providerOfMx([{ priority: 10, exchange: "mx01.mail.icloud.com" }])).toBe("apple");
    // The preferred exchange decides: a filtering gateway in front of Google is not Google.
    expect(
      providerOfMx([
        { priority: 20, exchange: "alt1.aspmx.l.google.com" },
        { priority: 10, exchange: "mx1.gateway.example" },
      ]),
    ).toBe("other");
    expect(providerOfMx([{ priority: 10, exchange: "notgoogle.com" }])).toBe("other");
    expect(providerOfMx([])).toBe("other");
  });
});

describe("mailbox provider by MX, through the dev DoH server", () => {
  it("classifies hosted domains by their MX, unknown ones as other, and asks DoH once per domain thanks to the D1 cache", async () => {
    const workspace = fresh("workspace");
    const m365 = fresh("m365");
    const yahooHosted = fresh("yahoo");
    const icloudHosted = fresh("icloud");
    const selfHosted = fresh("self");
    await publish(workspace, { MX: [{ priority: 1, exchange: "aspmx.l.google.com" }] });
    await publish(m365, { MX: [{ priority: 0, exchange: `${m365.replace(/\./g, "-")}.mail.protection.outlook.com` }] });
    await publish(yahooHosted, { MX: [{ priority: 1, exchange: "mx-biz.mail.am0.yahoodns.net" }] });
    await publish(icloudHosted, { MX: [{ priority: 10, exchange: "mx01.mail.icloud.com" }] });
    await publish(selfHosted, { MX: [{ priority: 10, exchange: `mx.${selfHosted}` }] });
    const missing = fresh("missing");

    // A provider's own domain is told by its name: no DNS (hotmail.com.ar, which no other test asks the DoH server about).
    const domains = [workspace, m365, yahooHosted, icloudHosted, selfHosted, missing, "hotmail.com.ar", "servfail.verify-test"];
    const expected = new Map([
      [workspace, "gmail"],
      [m365, "microsoft"],
      [yahooHosted, "yahoo"],
      [icloudHosted, "apple"],
      [selfHosted, "other"],
      [missing, "other"],
      ["hotmail.com.ar", "microsoft"],
      // A lookup that fails is `other`, never an error.
      ["servfail.verify-test", "other"],
    ]);
    expect(await resolveProviders(openCtx(env), domains)).toEqual(expected);
    expect(await dohQueries("hotmail.com.ar")).toBe(0);
    expect(await dohQueries(workspace)).toBe(1);

    // A second delivery batch reads the answers from the D1 cache instead of asking again.
    expect(await resolveProviders(openCtx(env), [workspace.toUpperCase(), m365])).toEqual(
      new Map([
        [workspace, "gmail"],
        [m365, "microsoft"],
      ]),
    );
    expect(await dohQueries(workspace)).toBe(1);
  });

  it("stores the provider on the recipient when its outcome is recorded: a Google Workspace domain is gmail", async () => {
    const account = await createAccount({ send_credits: 10 });
    const domain = await verifiedDomain(account.api_key);
    const workspace = fresh("corp");
    await publish(workspace, { MX: [{ priority: 1, exchange: "smtp.google.com" }] });
    const to = [`ann@${workspace}`, `bob@hotmail.com`, `cy@${fresh("nowhere")}`];
    const sent = await call("/api/v1/send", { key: account.api_key, body: { from: `hi@${domain.name}`, to, subject: "Hi", text: "Hello" } });
    expect(sent.status).toBe(202);
    const { id } = (await sent.json()) as { id: string };
    await eventually(async () => ((await messageOf(account.api_key, id)).status === "sent" ? true : undefined));
    const rows = await d1Of(account).prepare("SELECT email, provider FROM message_recipients WHERE message_id = ?1 ORDER BY email").bind(id).all();
    expect(rows.results).toEqual([
      { email: to[0], provider: "gmail" },
      { email: to[1], provider: "microsoft" },
      { email: to[2], provider: "other" },
    ]);
  });
});
