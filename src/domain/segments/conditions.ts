// The condition language of segments (and of an automation's condition step, whose conditions are a segment's): one
// condition `{field, op, value}` on a contact field, a custom field, list membership or topic subscriptions, checked and
// compiled to SQL over `contacts`. segments.ts combines a segment's conditions into the one condition its count,
// preview and a campaign's fan-out share.
//
// Compilation rules:
// - Every value is a bound parameter. The only text written into the SQL is a custom field's JSON path, built from
//   a key restricted to [A-Za-z0-9_-] (checked again when compiling): it is repeated several times per condition, and
//   binding it each time would spend D1's 100 parameters per statement that a campaign's own query also needs.
//   That keeps a condition at one or two parameters, 20 conditions well under the cap.
// - Text compares without ASCII case (`lower()` on both sides, which folds ASCII only), as peers' segment editors
//   do; `contains`, `starts_with` and `ends_with` use instr/substr, not LIKE, whose patterns D1 caps at 50 bytes.
//   `email` compares the contact's `email_key`, which is lower-cased already.
// - `neq` is the negation of `eq`: a contact without the field matches it.
// - Custom fields come from the API (typed JSON) or from CSV imports (always strings), so a number compares
//   numerically with JSON numbers AND with strings that are plain decimals ("12", "-3.5"); a date compares with
//   string values SQLite's julianday() reads (`2026-01-05`, `2026-01-05T10:00:00Z`); a boolean matches JSON
//   true/false and the strings "true"/"false".

import { sql, type SQL } from "drizzle-orm";
import type { SQLiteColumn } from "drizzle-orm/sqlite-core";
import { contacts, type SegmentCondition } from "../../db/schema";
import type { FieldErrors } from "../../errors";
import { CONTACT_TEXT_MAX_LENGTH, contactStatuses, contactTextFields, type ContactTextField } from "../contacts/contacts";
import { contactAddress } from "../contacts/email";
import { VERIFICATION_RESULTS } from "../verification/status";

export const segmentOperators = [
  "eq",
  "neq",
  "contains",
  "starts_with",
  "ends_with",
  "exists",
  "not_exists",
  "gt",
  "gte",
  "lt",
  "lte",
  "in",
  "not_in",
  "within_days",
] as const;
export type SegmentOperator = (typeof segmentOperators)[number];

export const SEGMENT_MAX_CONDITIONS = 20;
const IN_MAX_VALUES = 100;
const WITHIN_DAYS_MAX = 3650;
const CUSTOM_VALUE_MAX_LENGTH = 2048;
const CUSTOM_FIELD_PREFIX = "custom_fields.";
const customFieldKeyPattern = /^[A-Za-z0-9_-]{1,64}$/;
// ISO 8601 date, or date-time with seconds optional and an offset; Date.parse settles the rest.
const isoDatePattern = /^\d{4}-\d{2}-\d{2}(?:T\d{2}:\d{2}(?::\d{2}(?:\.\d{1,9})?)?(?:Z|[+-]\d{2}:\d{2}))?$/;

/** The fields a condition may name, for messages and documentation. */
export const segmentFields = [
  "email",
  ...contactTextFields,
  "status",
  "created_at",
  `${CUSTOM_FIELD_PREFIX}<key>`,
  "list",
  "topic",
  "verification.result",
  "verification.checked_at",
] as const;

const textOps = ["eq", "neq", "contains", "starts_with", "ends_with", "exists", "not_exists", "in"] as const;
const operatorsOf = {
  email: ["eq", "neq", "contains", "starts_with", "ends_with", "in"],
  text: textOps,
  status: ["eq", "neq", "in"],
  created_at: ["gt", "gte", "lt", "lte", "within_days"],
  custom: ["eq", "neq", "contains", "starts_with", "ends_with", "exists", "not_exists", "gt", "gte", "lt", "lte", "in", "within_days"],
  list: ["in", "not_in"],
  // `in`: subscribed to any of the topics (its own choice, else the topic's default); `not_in`: to none of them.
  topic: ["in", "not_in"],
  // The contact's last verification (docs/contacts.md); not_exists: never verified.
  "verification.result": ["eq", "neq", "in", "exists", "not_exists"],
  "verification.checked_at": ["gt", "gte", "lt", "lte", "within_days", "exists", "not_exists"],
} as const satisfies Record<string, readonly SegmentOperator[]>;
type FieldKind = keyof typeof operatorsOf;

const textColumns = {
  first_name: contacts.firstName,
  last_name: contacts.lastName,
  company: contacts.company,
  phone: contacts.phone,
  country: contacts.country,
} as const satisfies Record<ContactTextField, unknown>;

const comparison = { gt: sql.raw(">"), gte: sql.raw(">="), lt: sql.raw("<"), lte: sql.raw("<=") } as const;
type Comparison = keyof typeof comparison;

/** A compiled condition, or the first thing wrong with it (which key of the condition, and why). */
export type Compiled = { sql: SQL; listIds: string[]; topicIds: string[] } | { problem: "field" | "op" | "value"; message: string };
const bad = (problem: "field" | "op" | "value", message: string): Compiled => ({ problem, message });
const ok = (condition: SQL, listIds: string[] = [], topicIds: string[] = []): Compiled => ({ sql: condition, listIds, topicIds });

// --- values --------------------------------------------------------------------------------------------------------

type Parsed<T> = { value: T } | { error: string };

function text(value: unknown, max: number): Parsed<string> {
  if (typeof value !== "string" || value.length === 0) return { error: "Give a non-empty string" };
  if (value.length > max) return { error: `At most ${max} characters` };
  return { value };
}

function textList(value: unknown, max: number): Parsed<string[]> {
  if (!Array.isArray(value) || value.length === 0 || value.length > IN_MAX_VALUES) return { error: `Give an array of 1 to ${IN_MAX_VALUES} strings` };
  const items = value.map((item) => text(item, max));
  return items.every((item): item is { value: string } => "value" in item)
    ? { value: items.map((item) => item.value) }
    : { error: `Give an array of 1 to ${IN_MAX_VALUES} non-empty strings` };
}

function isoDate(value: unknown): Parsed<string> {
  if (typeof value !== "string" || !isoDatePattern.test(value) || Number.isNaN(Date.parse(value))) {
    return { error: "Give an ISO 8601 date (2026-01-31) or date-time with offset (2026-01-31T09:00:00Z)" };
  }
  return { value: new Date(value).toISOString() };
}

function dayCount(value: unknown): Parsed<number> {
  return Number.isInteger(value) && (value as number) >= 1 && (value as number) <= WITHIN_DAYS_MAX
    ? { value: value as number }
    : { error: `Give a whole number of days from 1 to ${WITHIN_DAYS_MAX}` };
}

const noValue = (value: unknown) => value === undefined || value === null;

// --- SQL pieces ----------------------------------------------------------------------------------------------------

/**
 * `contains`, `starts_with`, `ends_with` as plain string comparisons, never LIKE: D1 refuses LIKE patterns over 50
 * bytes, and every character of the value matches literally. Both sides go through SQLite's `lower()`, which folds
 * ASCII only, the same rule LIKE followed. One bound parameter: `ends_with` compares the expression's last
 * characters, counted in code points as SQLite's `length()` and `substr()` count them, and the count is written as
 * an integer literal computed here.
 */
const textMatch = (expression: SQL, op: "contains" | "starts_with" | "ends_with", value: string) => {
  const haystack = sql`lower(${expression})`;
  if (op === "contains") return sql`instr(${haystack}, lower(${value})) > 0`;
  if (op === "starts_with") return sql`instr(${haystack}, lower(${value})) = 1`;
  const characters = sql.raw(String([...value].length));
  return sql`substr(${haystack}, -${characters}) = lower(${value})`;
};
const jsonValues = (values: unknown[]) => sql`(SELECT value FROM json_each(${JSON.stringify(values)}))`;
const lowerJsonValues = (values: unknown[]) => sql`(SELECT lower(value) FROM json_each(${JSON.stringify(values)}))`;
/** `eq`'s negation, true where `eq` is false or unknown (field missing). */
const not = (condition: SQL) => sql`NOT coalesce(${condition}, 0)`;

type CustomField = { value: SQL; type: SQL };

function customField(key: string): CustomField {
  if (!customFieldKeyPattern.test(key)) throw new Error(`Unsafe custom field key reached the segment compiler: ${JSON.stringify(key)}`);
  // Safe to write into the statement: the key's characters cannot close the string literal or the quoted label.
  const path = sql.raw(`'$."${key}"'`);
  return { value: sql`json_extract(${contacts.customFields}, ${path})`, type: sql`json_type(${contacts.customFields}, ${path})` };
}

const isScalar = (field: CustomField) => sql`${field.type} IN ('text', 'integer', 'real')`;

/** The field as a number: a JSON number, or a string that is a plain decimal (optional minus, digits, one dot). */
function numberOf(field: CustomField): SQL {
  const trimmed = sql`trim(${field.value})`;
  const unsigned = sql`(CASE WHEN substr(${trimmed}, 1, 1) = '-' THEN substr(${trimmed}, 2) ELSE ${trimmed} END)`;
  return sql`(CASE WHEN ${field.type} IN ('integer', 'real') THEN ${field.value}
    WHEN ${field.type} = 'text' AND ${unsigned} GLOB '*[0-9]*' AND ${unsigned} NOT GLOB '*[^0-9.]*' AND ${unsigned} NOT GLOB '*.*.*'
    THEN CAST(${trimmed} AS REAL) END)`;
}

const dateOf = (field: CustomField) => sql`(CASE WHEN ${field.type} = 'text' THEN julianday(${field.value}) END)`;

// --- conditions ----------------------------------------------------------------------------------------------------

function fieldKind(field: string): FieldKind | undefined {
  if (field === "email" || field === "status" || field === "created_at" || field === "list" || field === "topic") return field;
  if (field === "verification.result" || field === "verification.checked_at") return field;
  if ((contactTextFields as readonly string[]).includes(field)) return "text";
  if (field.startsWith(CUSTOM_FIELD_PREFIX)) return "custom";
  return undefined;
}

/** One condition as SQL over `contacts` (with the list and topic ids it names), or the first thing wrong with it. */
export function compileCondition(condition: SegmentCondition, now: Date): Compiled {
  const { field, op, value } = condition;
  const kind = fieldKind(field);
  if (!kind) return bad("field", `Unknown field; use one of ${segmentFields.join(", ")}`);
  if (kind === "custom" && !customFieldKeyPattern.test(field.slice(CUSTOM_FIELD_PREFIX.length))) {
    return bad("field", "A custom field key is 1 to 64 letters, digits, `_` or `-`");
  }
  const allowed: readonly string[] = operatorsOf[kind];
  if (!allowed.includes(op)) {
    const known = (segmentOperators as readonly string[]).includes(op);
    return bad("op", known ? `${field} takes ${allowed.join(", ")}` : `Unknown operator; use one of ${segmentOperators.join(", ")}`);
  }
  const operator = op as SegmentOperator;
  switch (kind) {
    case "email":
      return emailCondition(operator, value);
    case "text":
      return textCondition(textColumns[field as ContactTextField], operator, value);
    case "status":
      return statusCondition(operator, value);
    case "created_at":
      return dateCondition(contacts.createdAt, operator, value, now);
    case "custom":
      return customCondition(customField(field.slice(CUSTOM_FIELD_PREFIX.length)), operator, value, now);
    case "list":
      return listCondition(operator, value);
    case "topic":
      return topicCondition(operator, value);
    case "verification.result":
      return verificationResultCondition(operator, value);
    case "verification.checked_at":
      if (operator === "exists" || operator === "not_exists") return presence(contacts.verifiedAt, operator, value);
      return dateCondition(contacts.verifiedAt, operator, value, now);
  }
}

function presence(column: SQLiteColumn, op: "exists" | "not_exists", value: unknown): Compiled {
  if (!noValue(value)) return bad("value", `${op} takes no value`);
  return ok(op === "exists" ? sql`${column} IS NOT NULL` : sql`${column} IS NULL`);
}

function verificationResultCondition(op: SegmentOperator, value: unknown): Compiled {
  const column = contacts.verificationResult;
  if (op === "exists" || op === "not_exists") return presence(column, op, value);
  const isResult = (item: unknown) => (VERIFICATION_RESULTS as readonly unknown[]).includes(item);
  if (op === "in") {
    return Array.isArray(value) && value.length > 0 && value.every(isResult)
      ? ok(sql`${column} IN ${jsonValues(value)}`)
      : bad("value", `Give an array of results: ${VERIFICATION_RESULTS.join(", ")}`);
  }
  if (!isResult(value)) return bad("value", `Give a result: ${VERIFICATION_RESULTS.join(", ")}`);
  // An address never verified has no result, which is not the one named: neq keeps it.
  return ok(op === "eq" ? sql`${column} = ${value}` : sql`coalesce(${column}, '') <> ${value}`);
}

/** The address's key as contacts store it (`email_key`), or why the value is not an address. */
function emailKey(value: unknown): Parsed<string> {
  if (typeof value !== "string") return { error: "Give an email address" };
  const address = contactAddress(value);
  return "error" in address ? { error: address.error } : { value: address.key };
}

function emailCondition(op: SegmentOperator, value: unknown): Compiled {
  const column = contacts.emailKey;
  if (op === "contains" || op === "starts_with" || op === "ends_with") {
    const part = text(value, 320);
    return "error" in part ? bad("value", part.error) : ok(textMatch(sql`${column}`, op, part.value.toLowerCase()));
  }
  if (op === "in") {
    if (!Array.isArray(value) || value.length === 0 || value.length > IN_MAX_VALUES)
      return bad("value", `Give an array of 1 to ${IN_MAX_VALUES} email addresses`);
    const keys = value.map(emailKey);
    const invalid = keys.findIndex((key) => "error" in key);
    if (invalid !== -1) return bad("value", `Item ${invalid}: ${(keys[invalid] as { error: string }).error}`);
    return ok(sql`${column} IN ${jsonValues(keys.map((key) => (key as { value: string }).value))}`);
  }
  const key = emailKey(value);
  if ("error" in key) return bad("value", key.error);
  return ok(op === "eq" ? sql`${column} = ${key.value}` : sql`${column} <> ${key.value}`);
}

function textCondition(column: (typeof textColumns)[ContactTextField], op: SegmentOperator, value: unknown): Compiled {
  if (op === "exists" || op === "not_exists") {
    if (!noValue(value)) return bad("value", `${op} takes no value`);
    return ok(op === "exists" ? sql`coalesce(${column}, '') <> ''` : sql`coalesce(${column}, '') = ''`);
  }
  if (op === "in") {
    const values = textList(value, CONTACT_TEXT_MAX_LENGTH);
    return "error" in values ? bad("value", values.error) : ok(sql`lower(${column}) IN ${lowerJsonValues(values.value)}`);
  }
  const given = text(value, CONTACT_TEXT_MAX_LENGTH);
  if ("error" in given) return bad("value", given.error);
  const equal = sql`lower(${column}) = lower(${given.value})`;
  if (op === "eq") return ok(equal);
  if (op === "neq") return ok(not(equal));
  return ok(textMatch(sql`${column}`, op as "contains" | "starts_with" | "ends_with", given.value));
}

function statusCondition(op: SegmentOperator, value: unknown): Compiled {
  const isStatus = (item: unknown) => (contactStatuses as readonly unknown[]).includes(item);
  if (op === "in") {
    return Array.isArray(value) && value.length > 0 && value.every(isStatus)
      ? ok(sql`${contacts.status} IN ${jsonValues(value)}`)
      : bad("value", `Give an array of statuses: ${contactStatuses.join(", ")}`);
  }
  if (!isStatus(value)) return bad("value", `Give a status: ${contactStatuses.join(", ")}`);
  return ok(op === "eq" ? sql`${contacts.status} = ${value}` : sql`${contacts.status} <> ${value}`);
}

const daysBefore = (now: Date, days: number) => new Date(now.getTime() - days * 86_400_000).toISOString();

function dateCondition(column: SQLiteColumn, op: SegmentOperator, value: unknown, now: Date): Compiled {
  // created_at and verified_at are stored as toISOString() writes them, so ISO strings compare in time order.
  if (op === "within_days") {
    const days = dayCount(value);
    return "error" in days ? bad("value", days.error) : ok(sql`${column} >= ${daysBefore(now, days.value)}`);
  }
  const date = isoDate(value);
  return "error" in date ? bad("value", date.error) : ok(sql`${column} ${comparison[op as Comparison]} ${date.value}`);
}

function customCondition(field: CustomField, op: SegmentOperator, value: unknown, now: Date): Compiled {
  switch (op) {
    case "exists":
    case "not_exists": {
      if (!noValue(value)) return bad("value", `${op} takes no value`);
      const present = sql`coalesce(${field.value}, '') <> ''`;
      return ok(op === "exists" ? present : not(present));
    }
    case "eq":
    case "neq": {
      let equal: SQL;
      if (typeof value === "number" && Number.isFinite(value)) equal = sql`${numberOf(field)} = ${value}`;
      else if (typeof value === "boolean") {
        equal = sql`(CASE ${field.type} WHEN 'true' THEN 'true' WHEN 'false' THEN 'false' WHEN 'text' THEN lower(trim(${field.value})) END) = ${String(value)}`;
      } else {
        const given = text(value, CUSTOM_VALUE_MAX_LENGTH);
        if ("error" in given) return bad("value", "Give a string, a number or a boolean");
        equal = sql`${isScalar(field)} AND lower(${field.value}) = lower(${given.value})`;
      }
      return ok(op === "eq" ? equal : not(equal));
    }
    case "contains":
    case "starts_with":
    case "ends_with": {
      const given = text(value, CUSTOM_VALUE_MAX_LENGTH);
      return "error" in given ? bad("value", given.error) : ok(sql`${isScalar(field)} AND ${textMatch(field.value, op, given.value)}`);
    }
    case "gt":
    case "gte":
    case "lt":
    case "lte": {
      if (typeof value === "number" && Number.isFinite(value)) return ok(sql`${numberOf(field)} ${comparison[op]} ${value}`);
      const date = isoDate(value);
      if ("error" in date) return bad("value", `Give a number, or ${date.error.replace(/^Give an/, "an")}`);
      return ok(sql`${dateOf(field)} ${comparison[op]} julianday(${date.value})`);
    }
    case "in": {
      const valid =
        Array.isArray(value) &&
        value.length > 0 &&
        value.length <= IN_MAX_VALUES &&
        value.every(
          (item) =>
            (typeof item === "string" && item.length > 0 && item.length <= CUSTOM_VALUE_MAX_LENGTH) ||
            (typeof item === "number" && Number.isFinite(item)),
        );
      return valid
        ? ok(sql`${isScalar(field)} AND lower(${field.value}) IN ${lowerJsonValues(value)}`)
        : bad("value", `Give an array of 1 to ${IN_MAX_VALUES} strings or numbers`);
    }
    case "within_days": {
      const days = dayCount(value);
      if ("error" in days) return bad("value", days.error);
      return ok(sql`${dateOf(field)} BETWEEN julianday(${daysBefore(now, days.value)}) AND julianday(${now.toISOString()})`);
    }
    default:
      return bad("op", `Unsupported operator for a custom field`);
  }
}

function listCondition(op: SegmentOperator, value: unknown): Compiled {
  const ids = typeof value === "string" ? text(value, 64) : textList(value, 64);
  if ("error" in ids) return bad("value", "Give a list id or an array of list ids");
  const listIds = typeof ids.value === "string" ? [ids.value] : ids.value;
  const member = sql`EXISTS (SELECT 1 FROM list_members AS segment_member
    WHERE segment_member.contact_id = ${contacts.id} AND segment_member.list_id IN ${jsonValues(listIds)})`;
  return ok(op === "in" ? member : sql`NOT ${member}`, listIds);
}

/** One bound parameter whatever the number of topics, as a list condition: the ids go in as one JSON array. */
function topicCondition(op: SegmentOperator, value: unknown): Compiled {
  const ids = typeof value === "string" ? text(value, 64) : textList(value, 64);
  if ("error" in ids) return bad("value", "Give a topic id or an array of topic ids");
  const topicIds = typeof ids.value === "string" ? [ids.value] : ids.value;
  const subscribed = sql`EXISTS (SELECT 1 FROM topics AS segment_topic
    WHERE segment_topic.id IN ${jsonValues(topicIds)}
      AND COALESCE((SELECT ct.subscribed FROM contact_topics AS ct WHERE ct.contact_id = ${contacts.id} AND ct.topic_id = segment_topic.id),
        segment_topic.default_subscribed) = 1)`;
  return ok(op === "in" ? subscribed : sql`NOT ${subscribed}`, [], topicIds);
}

/** Each condition compiled (or its problem), by index; entries whose field or op is not even a string are skipped. */
export function compileAll(conditions: unknown[]) {
  const now = new Date();
  return conditions.map((condition) => {
    if (typeof condition !== "object" || condition === null || Array.isArray(condition)) return undefined;
    const { field, op, value } = condition as Record<string, unknown>;
    return typeof field === "string" && typeof op === "string" ? compileCondition({ field, op, value }, now) : undefined;
  });
}

/**
 * What is wrong with each condition, keyed `conditions.<i>.field|op|value`, without the database (list ids are
 * checked by `createSegment`/`updateSegment`). Reads untrusted input: entries that are not objects, or whose field or
 * op is not a string, are left to the schema's own type errors.
 */
export function conditionProblems(conditions: unknown[]): FieldErrors {
  return problemsOf(compileAll(conditions));
}

/** The problems among conditions already compiled, keyed as `conditionProblems` keys them. */
export function problemsOf(compiled: ReturnType<typeof compileAll>): FieldErrors {
  const errors: FieldErrors = {};
  compiled.forEach((result, index) => {
    if (result && "problem" in result) errors[`conditions.${index}.${result.problem}`] = [result.message];
  });
  return errors;
}
