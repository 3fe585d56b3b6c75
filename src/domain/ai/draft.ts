// What is asked of the model and what its answer must be. The request's fields become one prompt; the answer is
// JSON checked with zod (the counts asked for, lengths a campaign accepts). A malformed answer is asked for again
// once, with the validation errors; its HTML is sanitised and a plain-text part made from it when the model gave none.

import { z } from "zod";
import { sanitizeEmailHtml, textFromHtml } from "./html";
import type { AiProvider, ChatMessage, TokenUsage } from "./adapter";

export const MAX_PROMPT_LENGTH = 4_000;
export const MAX_VARIATIONS = 5;
export const MAX_FOLLOWUPS = 3;

const hint = z.string().trim().min(1).max(500);

/** The body of POST /ai/campaign, stored as the request's `input`. */
export const aiRequestInputSchema = z
  .object({
    prompt: z.string().trim().min(1).max(MAX_PROMPT_LENGTH).describe("What the campaign is about, in your words"),
    objective: hint.optional().describe("What the email should achieve, e.g. `announce the spring sale`"),
    audience: hint.optional().describe("Who receives it"),
    tone: hint.optional().describe("e.g. `friendly`, `formal`"),
    language: z
      .string()
      .regex(/^[A-Za-z]{2,3}(-[A-Za-z0-9]{2,8})*$/, "A BCP 47 language tag such as `en`, `fr-CA`, `pt-BR`")
      .optional()
      .describe("BCP 47 tag of the language to write in; default English"),
    offer: hint.optional(),
    cta: hint.optional().describe("The call to action"),
    length: z.enum(["short", "medium", "long"]).optional(),
    variations: z.number().int().min(1).max(MAX_VARIATIONS).default(1).describe("Alternative versions of the email, each a draft campaign"),
    followups: z.number().int().min(0).max(MAX_FOLLOWUPS).default(0).describe("Follow-up emails, each a draft campaign"),
  })
  .strict();

export type AiRequestInput = z.output<typeof aiRequestInputSchema>;

const noLineBreaks = (value: string) => !/[\r\n]/.test(value);

const email = {
  subject: z.string().trim().min(1).max(200).refine(noLineBreaks, "The subject must be one line"),
  preheader: z.string().trim().max(300).nullish(),
  html: z.string().min(1).max(200_000),
  text: z.string().max(100_000).nullish(),
};
const emailSchema = z.object(email);
const followupSchema = z.object({ ...email, delay_days: z.number().int().min(1).max(60) });

/** The answer this request needs: exactly the counts asked for. */
export function answerSchema(input: Pick<AiRequestInput, "variations" | "followups">) {
  return z.object({
    variations: z.array(emailSchema).length(input.variations, `Exactly ${input.variations} variation(s)`),
    followups: z.array(followupSchema).length(input.followups, `Exactly ${input.followups} follow-up(s)`),
  });
}

// Constraints outside the subset every structured-output implementation accepts (OpenAI's strict mode rejects them);
// the prompt states them and zod checks them.
const unsupportedKeywords = new Set(["$schema", "minLength", "maxLength", "minItems", "maxItems", "minimum", "maximum", "pattern"]);

function portable(schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map(portable);
  if (schema === null || typeof schema !== "object") return schema;
  return Object.fromEntries(
    Object.entries(schema)
      .filter(([key]) => !unsupportedKeywords.has(key))
      .map(([key, value]) => [key, portable(value)]),
  );
}

// What the model is told to produce: every field present (strict mode wants them all required), nothing else.
const strictEmail = { subject: z.string(), preheader: z.string(), html: z.string(), text: z.string() };
const providerSchema = portable(
  z.toJSONSchema(
    z
      .object({
        variations: z.array(z.object(strictEmail).strict()),
        followups: z.array(z.object({ ...strictEmail, delay_days: z.number().int() }).strict()),
      })
      .strict(),
    { target: "draft-7" },
  ),
) as Record<string, unknown>;

export const ANSWER_SCHEMA_NAME = "campaign_drafts";

const lengths = { short: "under 120 words", medium: "120 to 250 words", long: "250 to 450 words" } as const;

const systemPrompt = [
  "You write marketing emails for a business's newsletter campaigns.",
  "Answer with one JSON object only, matching the given schema: `variations` (alternative versions of the same email) and `followups` (later emails to the same audience, each with `delay_days` after the first).",
  "Each email has `subject` (one line, at most 200 characters), `preheader` (preview text, at most 300 characters), `html` (the body: simple email HTML with inline styles; no <script>, <style>, forms or external CSS) and `text` (the same body as plain text).",
  'Personalise with placeholders exactly as written: {{first_name|there}} for the recipient\'s first name. End the html with a small footer link <a href="{{unsubscribe_url}}">Unsubscribe</a>, and the text with `Unsubscribe: {{unsubscribe_url}}`.',
  "Do not invent prices, dates, discounts or facts that the brief does not give.",
].join("\n");

export function promptMessages(input: AiRequestInput): ChatMessage[] {
  const brief = [
    `Brief: ${input.prompt}`,
    input.objective && `Objective: ${input.objective}`,
    input.audience && `Audience: ${input.audience}`,
    input.tone && `Tone: ${input.tone}`,
    `Language: ${input.language ?? "en"} (BCP 47); write every field in it`,
    input.offer && `Offer: ${input.offer}`,
    input.cta && `Call to action: ${input.cta}`,
    input.length && `Length of each body: ${lengths[input.length]}`,
    `Write exactly ${input.variations} variation(s) and exactly ${input.followups} follow-up(s).`,
  ].filter(Boolean);
  return [
    { role: "system", content: systemPrompt },
    { role: "user", content: brief.join("\n") },
  ];
}

export type DraftEmail = { subject: string; preheader: string | null; html: string; text: string };
export type GeneratedDrafts = { variations: DraftEmail[]; followups: (DraftEmail & { delayDays: number })[] };

export type GenerationOutcome =
  | { kind: "generated"; drafts: GeneratedDrafts; usage: TokenUsage }
  | { kind: "invalid"; error: string; usage: TokenUsage };

/** Models without strict JSON often wrap the object in a Markdown code fence. */
function jsonText(content: string): string {
  const fenced = /^\s*```(?:json)?\s*([\s\S]*?)\s*```\s*$/i.exec(content);
  return fenced ? fenced[1]! : content;
}

/** The email with its HTML sanitised and a text part; undefined when the HTML has nothing left to show. */
function finish(message: z.output<typeof emailSchema>): DraftEmail | undefined {
  const html = sanitizeEmailHtml(message.html);
  const htmlText = textFromHtml(html);
  if (htmlText === "" && !/<img\b/i.test(html)) return undefined;
  const text = message.text?.trim() ? message.text.trim() : htmlText;
  return { subject: message.subject, preheader: message.preheader || null, html, text };
}

type Checked = { ok: true; drafts: GeneratedDrafts } | { ok: false; problems: string[] };

/** Parses, validates and sanitises one answer; the problems are phrased for the model's second try and the request's error. */
function check(content: string, input: AiRequestInput): Checked {
  let value: unknown;
  try {
    value = JSON.parse(jsonText(content));
  } catch (error) {
    return { ok: false, problems: [`The answer is not valid JSON (${(error as Error).message})`] };
  }
  const parsed = answerSchema(input).safeParse(value);
  if (!parsed.success) {
    return { ok: false, problems: parsed.error.issues.map((issue) => `${issue.path.join(".") || "(root)"}: ${issue.message}`) };
  }
  const problems: string[] = [];
  const finishAt = (message: z.output<typeof emailSchema>, path: string) => {
    const draft = finish(message);
    if (!draft) problems.push(`${path}.html: nothing is left once scripts, styles, forms and unsafe links are removed`);
    return draft;
  };
  const variations = parsed.data.variations.map((variation, i) => finishAt(variation, `variations.${i}`));
  const followups = parsed.data.followups.map((followup, i) => {
    const draft = finishAt(followup, `followups.${i}`);
    return draft && { ...draft, delayDays: followup.delay_days };
  });
  if (problems.length > 0) return { ok: false, problems };
  return { ok: true, drafts: { variations: variations.filter((d) => d !== undefined), followups: followups.filter((d) => d !== undefined) } };
}

const add = (a: TokenUsage, b: TokenUsage): TokenUsage => ({
  inputTokens: a.inputTokens + b.inputTokens,
  outputTokens: a.outputTokens + b.outputTokens,
});

/**
 * Asks the provider for the drafts; a malformed answer is asked for again once, with what was wrong. Throws
 * ProviderError when the provider does not answer (the caller decides whether to retry later).
 */
export async function generateDrafts(provider: AiProvider, input: AiRequestInput): Promise<GenerationOutcome> {
  const messages = promptMessages(input);
  const schema = { name: ANSWER_SCHEMA_NAME, schema: providerSchema };
  const first = await provider.complete({ messages, schema });
  const checked = check(first.content, input);
  if (checked.ok) return { kind: "generated", drafts: checked.drafts, usage: first.usage };

  const second = await provider.complete({
    schema,
    messages: [
      ...messages,
      { role: "assistant", content: first.content },
      {
        role: "user",
        content: `That answer cannot be used:\n- ${checked.problems.join("\n- ")}\nAnswer again with only the JSON object, matching the schema and the counts asked for.`,
      },
    ],
  });
  const usage = add(first.usage, second.usage);
  const rechecked = check(second.content, input);
  if (rechecked.ok) return { kind: "generated", drafts: rechecked.drafts, usage };
  return { kind: "invalid", error: `The model's answer was malformed twice: ${rechecked.problems.slice(0, 5).join("; ")}`, usage };
}
