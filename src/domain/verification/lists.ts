import disposableDomainList from "disposable-email-domains-js/dist/dict/disposable_email_blocklist.json";
import freeDomainList from "free-email-domains/domains.json";
import roleLocalParts from "role-based-email-addresses";

// Data packages are bundled as JSON/arrays and turned into Sets once per isolate, not per lookup.

const disposableDomains: ReadonlySet<string> = new Set(disposableDomainList.map((d) => d.toLowerCase()));

// free-email-domains merges disposable lists into its own; a domain is free-provider only if it is not
// disposable, so the two flags never contradict each other.
const freeProviderDomains: ReadonlySet<string> = new Set(freeDomainList.map((d) => d.toLowerCase()).filter((d) => !disposableDomains.has(d)));

const roleLocalPartSet: ReadonlySet<string> = new Set(roleLocalParts.map((r) => r.toLowerCase()));

/** The domain or any parent domain (mx.mailinator.com counts) is on the disposable list. */
export function isDisposableDomain(domain: string): boolean {
  const labels = domain.toLowerCase().split(".");
  for (let i = 0; i < labels.length - 1; i++) {
    if (disposableDomains.has(labels.slice(i).join("."))) return true;
  }
  return false;
}

export function isFreeProviderDomain(domain: string): boolean {
  return freeProviderDomains.has(domain.toLowerCase());
}

/** Role accounts (admin@, info@, no-reply@ ...); a +tag does not hide the role (admin+billing@). */
export function isRoleBasedLocalPart(localPart: string): boolean {
  const base = localPart.toLowerCase().split("+")[0] ?? "";
  return roleLocalPartSet.has(base);
}
