import roleLocalParts from "role-based-email-addresses";
// One lower-case domain a line, generated from the npm packages by `npm run lists` (scripts/lib/domain-lists.ts).
import disposableDomainText from "./data/disposable-domains";
import freeDomainText from "./data/free-domains";

// Built on first use, once per isolate: a request that never verifies an address never pays for 14,000 Set entries.
let disposableDomains: ReadonlySet<string> | undefined;
let freeProviderDomains: ReadonlySet<string> | undefined;

function domainSet(text: string): ReadonlySet<string> {
  return new Set(text.split("\n").filter(Boolean));
}

const roleLocalPartSet: ReadonlySet<string> = new Set(roleLocalParts.map((r) => r.toLowerCase()));

/** The domain or any parent domain (mx.mailinator.com counts) is on the disposable list. */
export function isDisposableDomain(domain: string): boolean {
  disposableDomains ??= domainSet(disposableDomainText);
  const labels = domain.toLowerCase().split(".");
  for (let i = 0; i < labels.length - 1; i++) {
    if (disposableDomains.has(labels.slice(i).join("."))) return true;
  }
  return false;
}

export function isFreeProviderDomain(domain: string): boolean {
  freeProviderDomains ??= domainSet(freeDomainText);
  return freeProviderDomains.has(domain.toLowerCase());
}

/** Role accounts (admin@, info@, no-reply@ ...); a +tag does not hide the role (admin+billing@). */
export function isRoleBasedLocalPart(localPart: string): boolean {
  const base = localPart.toLowerCase().split("+")[0] ?? "";
  return roleLocalPartSet.has(base);
}
