// The campaign editor's and the schedule form's fields, read back as the API's request bodies: the editor posts
// only what changed, in PATCH /campaigns/{id}'s field names, and the routes parse that with the API's own schemas.

import type { CampaignRow } from "../../../domain/campaigns/campaigns";

export type Form = Record<string, string | File | (string | File)[]>;

const strings = (form: Form, name: string) =>
  ([] as unknown[]).concat(form[name] ?? []).filter((value): value is string => typeof value === "string");
/** A text field as the API takes it: absent stays absent, empty is null. */
const nullable = (form: Form, name: string) => {
  const value = form[name];
  if (typeof value !== "string") return undefined;
  return value.trim() === "" ? null : value;
};
/** Browsers send a textarea with CRLF line ends and drop one leading newline: equal after that is unchanged. */
const sameText = (a: string | null, b: string | null) =>
  (a ?? "").replace(/\r\n?/g, "\n").replace(/^\n/, "") === (b ?? "").replace(/\r\n?/g, "\n").replace(/^\n/, "");

/**
 * Ids chosen with checkboxes: only the ids the form offered (`<name>_offered`) can be added or removed, so ids it did
 * not show (lists past the first page, or a field the form has no control for) stay as saved.
 */
export function chosenIds(form: Form, name: string, saved: string[] | undefined): string[] | undefined {
  const checked = strings(form, name).filter(Boolean);
  // Without the marker only a new draft takes the ids given (a form posted without the editor's markup).
  if (!(`${name}_offered` in form)) return saved === undefined && name in form ? [...new Set(checked)] : undefined;
  const offered = new Set(strings(form, `${name}_offered`));
  return [...new Set([...(saved ?? []).filter((id) => !offered.has(id)), ...checked])];
}

const textFields = {
  name: "name",
  subject: "subject",
  preheader: "preheader",
  html: "html",
  text: "text",
  sender_id: "senderId",
  template_id: "templateId",
  topic_id: "topicId",
} as const;
const idFields = { lists: "lists", segments: "segments", exclude_lists: "excludeLists" } as const;

/**
 * The request body the editor's form stands for, in the API's field names: only fields the form has, and on an
 * existing draft only those whose value differs from the saved one, so a save changes only what the person changed.
 */
export function editorBody(form: Form, saved?: CampaignRow): Record<string, unknown> {
  const body: Record<string, unknown> = {};
  for (const [name, key] of Object.entries(textFields)) {
    const value = name === "name" ? (typeof form.name === "string" ? form.name : undefined) : nullable(form, name);
    if (value === undefined || (saved && sameText(value, saved[key]))) continue;
    body[name] = value;
  }
  if (typeof form.tags === "string") {
    const tags = form.tags
      .split(",")
      .map((tag) => tag.trim())
      .filter(Boolean);
    if (!saved || tags.join(",") !== saved.tags.join(",")) body.tags = tags;
  }
  if (typeof form.verification === "string" && form.verification !== saved?.verification) body.verification = form.verification;
  for (const [name, key] of Object.entries(idFields)) {
    const ids = chosenIds(form, name, saved?.[key]);
    if (ids === undefined) continue;
    if (saved && ids.length === saved[key].length && ids.every((id) => saved[key].includes(id))) continue;
    body[name] = ids;
  }
  return body;
}

/** The schedule field: a date and a 24-hour time in UTC, as the dashboard shows times (`T` accepted too). */
export const SEND_AT_PATTERN = "(\\d{4}-\\d{2}-\\d{2})[ T](\\d{2}:\\d{2})";
