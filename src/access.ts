// What an API key may be limited to (scopes), what an account's plan turns on (features) and a member's roles: the vocabulary that the
// schema, the domain and the edges share, in a module that imports nothing, so none of them depends on another for it.

export const scopes = ["send", "verify", "contacts", "campaigns", "domains", "webhooks", "automations", "ai", "reports", "inbound"] as const;
export type Scope = (typeof scopes)[number];

export const features = ["email_api", "smtp_relay", "ai", "campaigns", "automations"] as const;
export type Feature = (typeof features)[number];

/** A member's role (docs/dashboard.md): what each may do is the role table of domain/accounts/roles.ts. */
export const roles = ["owner", "admin", "developer", "marketer", "viewer"] as const;
export type Role = (typeof roles)[number];
