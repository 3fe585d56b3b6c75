// The request bodies of the members API, parsed by the API routes, the operator's account creation and the
// dashboard's Members page alike.

import { z } from "../../lib/schema";
import { roles } from "../../access";
import { contactAddress, contactEmailKey } from "../contacts/email";

/** A member's address: checked like a contact's, kept lower-cased (sign-in looks it up as typed). */
export const memberEmail = z
  .string()
  .max(320)
  .superRefine((value, ctx) => {
    const address = contactAddress(value);
    if ("error" in address) ctx.addIssue({ code: "custom", message: address.error });
  })
  .transform(contactEmailKey)
  .openapi({ example: "ann@example.com" });

export const roleInput = z.enum(roles).openapi("Role", {
  description:
    "owner: everything, members and ownership included (one per account); admin: everything but ownership; developer: API keys (within " +
    "its scopes), SMTP, domains, webhooks, messages, inbound, templates, verification, reports; marketer: contacts, lists, segments, " +
    "topics, forms, templates, senders, campaigns, automations, AI drafts, verification, reports; viewer: reads what a developer and a " +
    "marketer read, changes nothing.",
});

/** The body of POST /members. */
export const memberInput = z.object({ email: memberEmail, role: roleInput }).strict().openapi("InviteMember");

/** The body of PATCH /members/{id}. */
export const memberChangeInput = z.object({ role: roleInput }).strict().openapi("ChangeMemberRole");
