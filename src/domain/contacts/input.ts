// The request bodies of the lists API, parsed by the API routes and the dashboard's forms alike.

import { evenWithFieldErrors, z } from "../../lib/schema";

/** Contact ids or addresses one POST /lists/{id}/members takes. */
export const MEMBERS_PER_REQUEST = 1000;

/** The body of POST /lists. */
export const listInput = z
  .object({
    name: z.string().trim().min(1).max(200),
    description: z.string().trim().max(1000).nullable().optional(),
  })
  .strict()
  .openapi("CreateList");

/** The body of PATCH /lists/{id}: the fields to change. */
export const listChangeInput = z
  .object({
    name: z.string().trim().min(1).max(200).optional(),
    description: z.string().trim().max(1000).nullable().optional(),
  })
  .strict()
  .refine((body) => Object.keys(body).length > 0, { message: "Send name or description" })
  .openapi("UpdateList");

/** The body of POST /lists/{id}/members: contact ids or addresses. */
export const listMembersInput = z
  .object({
    contact_ids: z.array(z.string().min(1).max(64)).min(1).max(MEMBERS_PER_REQUEST).optional(),
    emails: z
      .array(z.string().max(320))
      .min(1)
      .max(MEMBERS_PER_REQUEST)
      .optional()
      .openapi({ description: "Addresses; each is created as a contact if new (stored `unsubscribed` if suppressed)" }),
  })
  .strict()
  .refine((body) => (body.contact_ids === undefined) !== (body.emails === undefined), {
    message: "Send either contact_ids or emails",
    ...evenWithFieldErrors,
  })
  .openapi("AddListMembers");
