import type { accounts } from "./db/schema";
import type { Role, Scope } from "./access";
import type { Ctx } from "./db/client";

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
export type AuthContext = { account: typeof accounts.$inferSelect; apiKey: ApiKeyContext; member?: MemberContext };

export type AppEnv = {
  Bindings: Env;
  Variables: {
    requestId: string;
    auth: AuthContext;
    /** The authenticated account's data and bindings, set with `auth`. */
    ctx: Ctx;
  };
};
