import type { Account } from "./domain/accounts/accounts";

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

export type AuthContext = { account: Account; apiKey: ApiKeyContext };

export type AppEnv = {
  Bindings: Env;
  Variables: {
    requestId: string;
    auth: AuthContext;
  };
};
