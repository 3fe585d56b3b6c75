// A contact import's file as contacts: its header record, which column feeds which contact field (the mapping sent,
// or one guessed from the header's names), and each record as a contact to upsert or the reason it cannot be.
// No I/O: accepting an import (import-accept.ts) and importing its chunks (import.ts) both read the file through here.

import { addFieldError, type FieldErrors } from "../../errors";
import { newId } from "../../lib/ids";
import {
  CONTACT_TEXT_MAX_LENGTH,
  CUSTOM_FIELD_KEY_MAX_LENGTH,
  CUSTOM_FIELDS_MAX_KEYS,
  contactTextFields,
  customFieldsProblem,
  type ContactTextField,
  type ContactUpsert,
  type CustomFields,
} from "./contacts";
import { bomLength, csvRecords, detectDelimiter, type CsvRecord } from "./csv";
import { contactAddress } from "./email";

export type ImportMapping = Record<string, string>;

const CUSTOM_FIELD_PREFIX = "custom_fields.";
/** The header must fit in this many bytes; it is re-read by every chunk. */
export const HEADER_MAX_BYTES = 64 * 1024;

/** Which column of the file feeds which contact field. */
export type ImportColumns = {
  email: number;
  text: [ContactTextField, number][];
  custom: [string, number][];
  /** A column naming topics (names or ids, separated by `;`, `|` or `,`) to subscribe each contact to. */
  topics?: number;
};

const simplify = (name: string) => name.toLowerCase().replace(/[^a-z0-9]/g, "");

// Header names recognised when no mapping is sent, compared after `simplify` ("E-mail" → "email").
const headerAliases: Record<"email" | ContactTextField | "topics", string[]> = {
  email: ["email", "emailaddress", "mail"],
  first_name: ["firstname", "first", "givenname", "forename"],
  last_name: ["lastname", "last", "surname", "familyname"],
  company: ["company", "companyname", "organization", "organisation"],
  phone: ["phone", "phonenumber", "mobile", "telephone"],
  country: ["country", "countrycode"],
  topics: ["topics", "subscriptions"],
};

/** The mapping used when the request sends none: recognised header names only, other columns are not imported. */
export function guessMapping(header: string[]): ImportMapping {
  const mapping: ImportMapping = {};
  for (const [target, aliases] of Object.entries(headerAliases)) {
    const column = header.find((name) => aliases.includes(simplify(name)));
    if (column !== undefined) mapping[target] = column;
  }
  return mapping;
}

/** Resolves a mapping (`{field: header name}`) against the header: exact name first, then ignoring case. */
export function resolveColumns(header: string[], mapping: ImportMapping): ImportColumns | { errors: FieldErrors } {
  const errors: FieldErrors = {};
  const columns: ImportColumns = { email: -1, text: [], custom: [] };
  for (const [target, name] of Object.entries(mapping)) {
    const path = `mapping.${target}`;
    let index = header.indexOf(name.trim());
    if (index === -1) index = header.findIndex((column) => column.toLowerCase() === name.trim().toLowerCase());
    if (index === -1) {
      addFieldError(errors, path, `The file's header has no column "${name}" (columns: ${header.map((column) => `"${column}"`).join(", ")})`);
      continue;
    }
    if (target === "email") columns.email = index;
    else if (target === "topics") columns.topics = index;
    else if ((contactTextFields as readonly string[]).includes(target)) columns.text.push([target as ContactTextField, index]);
    else if (target.startsWith(CUSTOM_FIELD_PREFIX) && target.length > CUSTOM_FIELD_PREFIX.length) {
      const key = target.slice(CUSTOM_FIELD_PREFIX.length);
      if (key.length > CUSTOM_FIELD_KEY_MAX_LENGTH)
        addFieldError(errors, path, `Custom field names are at most ${CUSTOM_FIELD_KEY_MAX_LENGTH} characters`);
      else columns.custom.push([key, index]);
    } else {
      addFieldError(errors, path, `Unknown field; map to email, ${contactTextFields.join(", ")}, topics or custom_fields.<name>`);
    }
  }
  if (columns.custom.length > CUSTOM_FIELDS_MAX_KEYS)
    addFieldError(errors, "mapping", `At most ${CUSTOM_FIELDS_MAX_KEYS} custom fields can be mapped`);
  if (columns.email === -1 && !errors["mapping.email"]) {
    addFieldError(
      errors,
      "mapping.email",
      Object.keys(mapping).length === 0 || !("email" in mapping)
        ? `No email column: name one "email" or send mapping.email (columns: ${header.map((column) => `"${column}"`).join(", ")})`
        : "Map a column to email",
    );
  }
  return Object.keys(errors).length > 0 ? { errors } : columns;
}

type Header = { names: string[]; delimiter: number; dataStart: number };

/** The header record of a file (from its first bytes), or why there is none. */
export function readHeader(head: Uint8Array, atEnd: boolean): Header | { error: string } {
  const start = bomLength(head);
  const delimiter = detectDelimiter(head, start);
  const first = csvRecords(head, { start, delimiter, atEnd }).next();
  if (first.done) {
    return {
      error: atEnd
        ? "The file is empty: it needs a header row and at least one contact"
        : `The header row is longer than ${HEADER_MAX_BYTES / 1024} KB`,
    };
  }
  return { names: first.value.fields.map((name) => name.trim()), delimiter, dataStart: first.value.end };
}

type RowOutcome = { upsert: ContactUpsert; topicIds: string[] } | { error: string };

/** The account's topics by id and by name (without case), for the `topics` column. */
export type TopicLookup = Map<string, string>;

/** One record as a contact to upsert (and the topics it subscribes to), or the reason it cannot be imported. Empty cells are "no data". */
export function importRow(record: CsvRecord, columns: ImportColumns, topics: TopicLookup = new Map()): RowOutcome {
  if (record.unterminatedQuote) return { error: "A quoted field is never closed, so the rest of the file was read as this row" };
  const cell = (index: number) => (record.fields[index] ?? "").trim();
  const email = cell(columns.email);
  if (email === "") return { error: "The email cell is empty" };
  const address = contactAddress(email);
  if ("error" in address) return { error: address.error };

  const fields: ContactUpsert["fields"] = {};
  for (const [field, index] of columns.text) {
    const value = cell(index);
    if (value.length > CONTACT_TEXT_MAX_LENGTH) return { error: `${field} is longer than ${CONTACT_TEXT_MAX_LENGTH} characters` };
    if (value !== "") fields[field] = value;
  }
  const custom: CustomFields = {};
  for (const [key, index] of columns.custom) {
    const value = cell(index);
    if (value !== "") custom[key] = value;
  }
  const problem = customFieldsProblem(custom);
  if (problem) return { error: problem };
  const named =
    columns.topics === undefined
      ? []
      : cell(columns.topics)
          .split(/[;|,]/)
          .map((name) => name.trim())
          .filter(Boolean);
  const unknown = named.filter((name) => !topics.has(name.toLowerCase()));
  // Row errors never echo a cell (it may hold personal data): the count says enough to find it.
  if (unknown.length > 0) return { error: `${unknown.length} of the topics named is not a topic of this account (GET /topics lists them)` };
  return {
    upsert: { id: newId("con"), address, fields, ...(columns.custom.length > 0 ? { customFields: custom } : {}) },
    topicIds: [...new Set(named.map((name) => topics.get(name.toLowerCase())!))],
  };
}
