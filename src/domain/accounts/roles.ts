// Who may use what: one table says, for each area of the product, the scope an API key needs for it and the member
// roles that may change it. The dashboard's sections and actions name an area (src/dashboard/layout.tsx, guard.ts);
// the API's routes name the area's scope (keyedRoute). A viewer reads every area a developer or a marketer may use,
// and changes nothing.

import type { ApiKeyContext } from "../../types";
import type { Role, Scope } from "../../access";

/** Full-access keys only: managing keys, members and reading the audit log. */
export type Access = Scope | "full_access";

type Area = { scope: Access; roles: readonly Role[] };

const developer = ["owner", "admin", "developer"] as const;
const marketer = ["owner", "admin", "marketer"] as const;
const both = ["owner", "admin", "developer", "marketer"] as const;

export const areas = {
  /** Messages, test email, SMTP credentials. */
  send: { scope: "send", roles: developer },
  /** Stored templates: the `send` scope covers them for keys; developers send with them, marketers write them. */
  templates: { scope: "send", roles: both },
  /** A test email of a campaign: what POST /send needs for keys, and a marketer's own check before sending. */
  test_email: { scope: "send", roles: both },
  /** Addresses kept from mail: unsubscribes and bounces matter to both. */
  suppressions: { scope: "send", roles: both },
  domains: { scope: "domains", roles: developer },
  webhooks: { scope: "webhooks", roles: developer },
  inbound: { scope: "inbound", roles: developer },
  verify: { scope: "verify", roles: both },
  reports: { scope: "reports", roles: both },
  /** Contacts, lists, segments, topics, sign-up forms. */
  contacts: { scope: "contacts", roles: marketer },
  /** Campaigns and senders. */
  campaigns: { scope: "campaigns", roles: marketer },
  automations: { scope: "automations", roles: marketer },
  ai: { scope: "ai", roles: marketer },
  api_keys: { scope: "full_access", roles: developer },
  members: { scope: "full_access", roles: ["owner", "admin"] },
  audit_log: { scope: "full_access", roles: ["owner", "admin"] },
} as const satisfies Record<string, Area>;

export type AreaName = keyof typeof areas;

/** What a viewer may not even read: who the people are and what they did. */
const hiddenFromViewers: ReadonlySet<AreaName> = new Set(["members", "audit_log"]);

/** Whether `role` may read the area (`change: false`) or change it. */
export function roleMay(role: Role, area: AreaName, change: boolean): boolean {
  if (role === "viewer") return !change && !hiddenFromViewers.has(area);
  return (areas[area].roles as readonly Role[]).includes(role);
}

/**
 * The scopes a member's dashboard session acts with (null: every one, as a full-access key): what the domain code
 * that takes a key's scopes sees of a person, and the most a key they create may be given.
 */
export function scopesOfRole(role: Role): Scope[] | null {
  if (role === "owner" || role === "admin") return null;
  const scopes = new Set<Scope>();
  for (const [name, area] of Object.entries(areas) as [AreaName, Area][]) {
    if (area.scope !== "full_access" && roleMay(role, name, role !== "viewer")) scopes.add(area.scope);
  }
  return [...scopes];
}

/** Whether a key with `key`'s scopes may use the area. */
export const keyMay = (key: Pick<ApiKeyContext, "scopes">, area: AreaName) => {
  const scope = areas[area].scope;
  return key.scopes === null || (scope !== "full_access" && key.scopes.includes(scope));
};
