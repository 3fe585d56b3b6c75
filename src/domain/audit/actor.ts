// Who did something, as the audit log and invitations name them.

import type { AuthContext } from "../../types";

export type Actor = { type: "member" | "api_key" | "operator"; id: string; name: string };

export const operatorActor: Actor = { type: "operator", id: "operator", name: "the operator" };

/** A member by their address; a key by its name and prefix (the secret is never stored, the prefix recognises it). */
export function actorOf(auth: AuthContext): Actor {
  if (auth.member) return { type: "member", id: auth.member.id, name: auth.member.email };
  return { type: "api_key", id: auth.apiKey.id, name: `${auth.apiKey.name} (${auth.apiKey.prefix}…)` };
}
