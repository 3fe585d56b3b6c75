// Contacts, lists and segments changed as the API and the dashboard both change them, with the errors both answer.

import type { AccountDb } from "../db/client";
import type { z } from "zod";
import { campaignUsing } from "../domain/campaigns/campaigns";
import { givenTextFields, updateContact as changeContact } from "../domain/contacts/contacts";
import { contactAddress, type ContactAddress } from "../domain/contacts/email";
import type { contactChangeInput } from "../domain/contacts/input";
import { deleteList as removeList } from "../domain/contacts/lists";
import { deleteSegment as removeSegment } from "../domain/segments/segments";
import { AppError, audienceInUse, notFound, validationError } from "../errors";

/** The validated address of a body field the schema already checked. */
export function addressOf(email: string): ContactAddress {
  const address = contactAddress(email);
  if ("error" in address) throw validationError({ email: [address.error] });
  return address;
}

/** Applies a PATCH body (the API's or the dashboard's contact form), or throws the error both answer with. */
export async function patchContactOrThrow(db: AccountDb, accountId: string, id: string, body: z.infer<typeof contactChangeInput>) {
  const outcome = await changeContact(db, accountId, id, {
    address: body.email !== undefined ? addressOf(body.email) : undefined,
    fields: givenTextFields(body),
    customFields: body.custom_fields,
    status: body.status,
  });
  switch (outcome.kind) {
    case "not_found":
      throw notFound("Contact");
    case "address_taken":
      throw new AppError("conflict", "Another contact already has this address");
    case "invalid":
      throw validationError(outcome.errors);
    case "updated":
      return outcome.contact;
  }
}

/** Deletes the list as DELETE /lists/{id} does (the dashboard too): refused while an unfinished campaign targets it. */
export async function deleteListOrThrow(db: AccountDb, accountId: string, id: string): Promise<void> {
  const user = await campaignUsing(db, accountId, id);
  if (user) throw audienceInUse("list", user);
  if (!(await removeList(db, accountId, id))) throw notFound("List");
}

/** Deletes a segment no unfinished campaign targets, or throws the error both the API and the dashboard answer with. */
export async function deleteSegmentOrThrow(db: AccountDb, accountId: string, id: string): Promise<void> {
  const user = await campaignUsing(db, accountId, id);
  if (user) throw audienceInUse("segment", user);
  if (!(await removeSegment(db, accountId, id))) throw notFound("Segment");
}
