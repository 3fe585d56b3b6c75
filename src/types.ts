import type { Account } from "./domain/accounts/accounts";
import type { Role } from "./domain/accounts/roles";

export const scopes = ["send", "verify", "contacts", "campaigns", "domains", "webhooks", "automations", "ai", "reports", "inbound"] as const;
export type Scope = (typeof scopes)[number];

export const features = ["email_api", "smtp_relay", "ai", "campaigns", "automations"] as const;
export type Feature = (typeof features)[number];

export type ApiKeyContext = {
  id: string;
  name: string;
  prefix: string;
  /** null: a full-access key. */
  scopes: Scope[] | null;
  mode: "live" | "test";
};

/** A person signed into the dashboard (docs/dashboard.md): what their role allows is read again on every request. */
export type MemberContext = { id: string; email: string; role: Role /** TOTP set up. */; totp: boolean };

/**
 * Who is asking. `apiKey` is the key a request acts with; in a member's dashboard session it is the member's own
 * credential (live, with the scopes of their role), so domain code that takes a key serves people alike.
 */
export type AuthContext = { account: Account; apiKey: ApiKeyContext; member?: MemberContext };

export type AppEnv = {
  Bindings: Env;
  Variables: {
    requestId: string;
    auth: AuthContext;
  };
};
