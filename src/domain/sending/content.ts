import { z } from "zod";

/**
 * What the send consumer builds a message from, stored with the message (inline when small, else in R2).
 * `compose`: an API send, rendered by the consumer (template placeholders, MIME, DKIM). `raw`: a message that
 * arrived over SMTP, delivered with its own headers and structure; only DKIM and missing Message-ID/Date are added.
 * `campaign`: one recipient of a campaign (`messages.campaign_id`), rendered from the campaign and the contact.
 */
export const messageContentSchema = z.discriminatedUnion("kind", [
  z.object({
    kind: z.literal("compose"),
    /** The `to` list as the sender wrote it, for the To header; the envelope only carries deliverable recipients. */
    to: z.array(z.string()),
    /** The Cc header, as written; like `to`, every entry is also a recipient. */
    cc: z.array(z.string()).optional(),
    /** Blind copies: recipients that no header names. Kept to know whether a message has a single recipient. */
    bcc: z.array(z.string()).optional(),
    /** The sender's own header fields (checked at acceptance: none the platform sets). */
    headers: z.record(z.string(), z.string()).optional(),
    html: z.string().optional(),
    text: z.string().optional(),
    variables: z.record(z.string(), z.string()),
    attachments: z.array(z.object({ filename: z.string(), content_type: z.string(), content: z.string(), content_id: z.string().optional() })),
  }),
  z.object({ kind: z.literal("raw"), raw: z.string().describe("base64 of the bytes received") }),
  z.object({ kind: z.literal("campaign"), contact_id: z.string() }),
]);
export type MessageContent = z.infer<typeof messageContentSchema>;

// Inline in the D1 row below this size; above, the content goes to R2 and the row keeps its key.
export const inlineContentLimit = 64 * 1024;
export const contentObjectKey = (messageId: string) => `messages/${messageId}.json`;
/** The signed bytes of the last delivery attempt (GET /messages/{id}/raw and /content), kept until retention. */
export const rawObjectKey = (messageId: string) => `messages/${messageId}.eml`;

// `database`: the account database that holds the message; absent in messages enqueued before account databases,
// whose rows are all in `DB`.
export const sendQueueMessageSchema = z.object({ message_id: z.string().startsWith("msg_"), database: z.string().default("DB") });
export type SendQueueMessage = z.input<typeof sendQueueMessageSchema>;

export async function loadContent(env: Pick<Env, "BLOBS">, row: { content: string | null; contentKey: string | null }): Promise<MessageContent> {
  if (row.content !== null) return messageContentSchema.parse(JSON.parse(row.content));
  if (!row.contentKey) throw new Error("message has no content");
  const object = await env.BLOBS.get(row.contentKey);
  if (!object) throw new Error(`message content ${row.contentKey} is missing from R2`);
  return messageContentSchema.parse(await object.json());
}
