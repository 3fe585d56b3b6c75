// What the step forms offer and the step descriptions name: the account's senders, templates, lists and topics.

import type { AccountDb } from "../../../db/client";
import { listSenders } from "../../../domain/campaigns/senders";
import { listLists } from "../../../domain/contacts/lists";
import { listTemplates } from "../../../domain/templates/templates";
import { allTopics } from "../../../domain/topics/topics";

/** What the step form needs to offer choices: the account's senders, templates, lists and topics. */
export async function choicesOf(db: AccountDb, accountId: string) {
  const [senders, templates, lists, topics] = await Promise.all([
    listSenders(db, accountId, { limit: 100 }),
    listTemplates(db, accountId, { limit: 100 }),
    listLists(db, accountId, { limit: 100 }),
    allTopics(db, accountId),
  ]);
  return { senders: senders.slice(0, 100), templates: templates.slice(0, 100), lists: lists.slice(0, 100), topics };
}
export type Choices = Awaited<ReturnType<typeof choicesOf>>;

export const namesOf = (choices: Choices) =>
  new Map([
    ...choices.senders.map((sender) => [sender.id, `${sender.name} <${sender.email}>`] as const),
    ...choices.templates.map((template) => [template.id, template.name] as const),
    ...choices.lists.map((list) => [list.id, list.name] as const),
    ...choices.topics.map((topic) => [topic.id, topic.name] as const),
  ]);
