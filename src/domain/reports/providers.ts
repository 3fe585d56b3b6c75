// The mailbox provider of a recipient (the reports' `provider` dimension). The big consumer providers are known by
// their domains; a company domain hosted by one of them (Google Workspace, Microsoft 365…) is known by its MX.
// Anything else, and any lookup that fails, is `other`: a report must never wait on, or fail with, DNS.

import type { Ctx } from "../../db/client";
import { config } from "../../config";
import { lookupMany, type DnsAnswer, type MxRecord } from "../dns/doh";
import { providers } from "../../db/schema";
import type { Provider } from "./rollups";

// The consumer brands under their usual country domains (hotmail.co.uk, yahoo.fr, live.com.au…), not any domain
// that merely starts with the word (live.example.com is not Microsoft's).
const countryOrCom = String.raw`\.(?:com|[a-z]{2}|co\.[a-z]{2}|com\.[a-z]{2})$`;
const domainRules: [RegExp, Provider][] = [
  [/^(?:gmail|googlemail)\.com$/, "gmail"],
  [new RegExp(`^(?:outlook|hotmail|live|msn)${countryOrCom}`), "microsoft"],
  [new RegExp(`^(?:yahoo|ymail|aol|rocketmail)${countryOrCom}`), "yahoo"],
  [/^(?:icloud|me|mac)\.com$/, "apple"],
];

// Suffixes of MX hosts; matched on a label boundary (aspmx.l.google.com, x.mail.protection.outlook.com).
const mxRules: [string, Provider][] = [
  ["google.com", "gmail"],
  ["googlemail.com", "gmail"],
  ["outlook.com", "microsoft"],
  ["yahoodns.net", "yahoo"],
  ["icloud.com", "apple"],
  ["apple.com", "apple"],
];

/** The domain part of an address, lower-cased. */
export function recipientDomain(email: string): string {
  return email.slice(email.lastIndexOf("@") + 1).toLowerCase();
}

/** A stored provider (message_recipients.provider is plain text), undefined when it is not one. */
export function asProvider(value: string | null | undefined): Provider | undefined {
  return providers.find((provider) => provider === value);
}

/** The provider known from the domain name alone, without DNS; undefined when only its MX can tell. */
export function providerOfDomain(domain: string): Provider | undefined {
  const name = domain.toLowerCase();
  return domainRules.find(([pattern]) => pattern.test(name))?.[1];
}

/** The provider behind a domain's MX records: the preferred (lowest priority) exchange decides. */
export function providerOfMx(records: readonly MxRecord[]): Provider {
  const preferred = [...records].sort((a, b) => a.priority - b.priority)[0];
  if (!preferred) return "other";
  const host = preferred.exchange.toLowerCase();
  return mxRules.find(([suffix]) => host === suffix || host.endsWith(`.${suffix}`))?.[1] ?? "other";
}

const providerOfAnswer = (answer: DnsAnswer<"MX">): Provider => (answer.status === "ok" ? providerOfMx(answer.records) : "other");

/**
 * The provider of each domain: by name when the name tells, else by MX through the DoH resolver and its D1 cache
 * (one D1 read for all names, DoH only for the names not cached). Never throws; what cannot be told is `other`.
 */
export async function resolveProviders(ctx: Ctx, domains: Iterable<string>): Promise<Map<string, Provider>> {
  const { env } = ctx;
  const result = new Map<string, Provider>();
  const unknown: string[] = [];
  for (const domain of new Set([...domains].map((name) => name.toLowerCase()))) {
    const known = providerOfDomain(domain);
    if (known) result.set(domain, known);
    else unknown.push(domain);
  }
  if (unknown.length === 0) return result;
  try {
    const answers = await lookupMany(
      // The resolver's own timeout bounds what a batch can wait; the lookup runs while the batch is being sent.
      { url: config(env).dohUrl, db: ctx.shared },
      unknown.map((name) => ({ name, type: "MX" as const })),
    );
    for (const [i, domain] of unknown.entries()) result.set(domain, providerOfAnswer(answers[i]!));
  } catch {
    // lookupMany turns DNS failures into answers; anything else thrown here must not cost a delivery its outcome.
    for (const domain of unknown) result.set(domain, "other");
  }
  return result;
}
