import { upsertRecords } from "../dev/doh-server.ts";

type Domain = { id: string; name: string; status: string; records: { type: string; name: string; value: string }[] };

/**
 * The demo account's sending domain, idempotently: created once, its DNS records published into the dev DoH zone
 * (as a user would at their DNS host) and verified through the API, so a first send works right away.
 */
export async function seedDemoDomain(workerUrl: string, apiKey: string, zonePath: string, name: string): Promise<Domain> {
  const headers = { Authorization: `Bearer ${apiKey}`, "Content-Type": "application/json" };
  const listed = (await (await fetch(`${workerUrl}/api/v1/domains?limit=100`, { headers })).json()) as { data: Domain[] };
  let domain = listed.data.find((candidate) => candidate.name === name);
  if (!domain) {
    const created = await fetch(`${workerUrl}/api/v1/domains`, { method: "POST", headers, body: JSON.stringify({ name }) });
    if (created.status !== 201) throw new Error(`creating the demo domain failed: ${created.status} ${await created.text()}`);
    domain = (await created.json()) as Domain;
  }
  for (const record of domain.records) {
    // The return path's MX (BOUNCE_DOMAIN) is the operator's; the dev stack is both, so it publishes that too.
    await upsertRecords(zonePath, record.name, record.type === "MX" ? { MX: [{ priority: 10, exchange: record.value }] } : { TXT: [record.value] });
  }
  if (domain.status === "verified") return domain;
  const verified = await fetch(`${workerUrl}/api/v1/domains/${domain.id}/verify`, { method: "POST", headers });
  domain = (await verified.json()) as Domain;
  if (domain.status !== "verified") throw new Error(`the demo domain did not verify: ${JSON.stringify(domain.records)}`);
  return domain;
}
