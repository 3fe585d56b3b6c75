import Papa from "papaparse";
import { validationError } from "../errors";
import { MAX_JOB_ADDRESSES } from "../domain/verification/jobs";

// POST /api/batch/upload: `file` is `data:text/csv;name=<file>;base64,<content>`. Everything here is a 422 with the
// reason under `errors.file`, never a 500: a client sends whatever its file picker produced.

const DEFAULT_NAME = "upload.csv";
const MAX_NAME_LENGTH = 255;
// What browsers and spreadsheet tools label a CSV file with (Excel on Windows says vnd.ms-excel); "" is a bare data URI.
const CSV_MEDIA_TYPES = new Set([
  "",
  "text/csv",
  "text/plain",
  "text/comma-separated-values",
  "text/x-csv",
  "application/csv",
  "application/x-csv",
  "application/vnd.ms-excel",
  "application/octet-stream",
]);
// Header cells naming the address column, compared without case, spaces, "_" and "-".
const EMAIL_HEADERS = new Set(["email", "emailaddress", "mail"]);
const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

const invalidFile = (reason: string) => validationError({ file: [reason] }, `The file cannot be read: ${reason}`);

export type DecodedFile = { name: string; text: string };

/** Splits and decodes the data URI: media type, `name=` parameter, base64 content, UTF-8 text. */
export function decodeDataUri(file: string): DecodedFile {
  const match = /^data:([^,]*),/i.exec(file);
  if (!match) throw invalidFile("not a data URI; send data:text/csv;name=<file>;base64,<content>");
  const [mediaType = "", ...parameters] = match[1]!.split(";").map((part) => part.trim());
  if (!parameters.some((parameter) => parameter.toLowerCase() === "base64")) {
    throw invalidFile("the data URI is not base64-encoded; send data:text/csv;name=<file>;base64,<content>");
  }
  if (!CSV_MEDIA_TYPES.has(mediaType.toLowerCase())) throw invalidFile(`not CSV: the data URI says ${mediaType}`);

  const content = file.slice(match[0].length).replace(/\s+/g, "");
  if (content.length % 4 !== 0 || !BASE64.test(content)) throw invalidFile("the content is not valid base64");
  let bytes: Uint8Array;
  try {
    bytes = Uint8Array.from(atob(content), (char) => char.charCodeAt(0));
  } catch {
    throw invalidFile("the content is not valid base64");
  }
  if (bytes[0] === 0x50 && bytes[1] === 0x4b && bytes[2] === 0x03 && bytes[3] === 0x04) {
    throw invalidFile("not CSV: this is a ZIP archive (an .xlsx workbook?); export the sheet as CSV");
  }
  if (bytes.includes(0)) throw invalidFile("not CSV: the content is binary");
  let text: string;
  try {
    // fatal: a Latin-1 or UTF-16 file is refused rather than read with replacement characters in the addresses.
    text = new TextDecoder("utf-8", { fatal: true, ignoreBOM: false }).decode(bytes);
  } catch {
    throw invalidFile("not CSV: the content is not UTF-8 text");
  }
  return { name: fileName(parameters), text: text.replace(/^\uFEFF/, "") };
}

function fileName(parameters: string[]): string {
  const raw = parameters.find((parameter) => /^name=/i.test(parameter))?.slice("name=".length).replace(/^"(.*)"$/, "$1");
  if (!raw) return DEFAULT_NAME;
  let name = raw;
  try {
    name = decodeURIComponent(raw);
  } catch {
    // a stray % is kept as written
  }
  name = name.replace(/[\r\n\t]/g, " ").trim();
  return name ? name.slice(0, MAX_NAME_LENGTH) : DEFAULT_NAME;
}

const isEmailHeader = (cell: string) => EMAIL_HEADERS.has(cell.trim().toLowerCase().replace(/[\s_-]+/g, ""));

/**
 * The address column of a CSV (quoted fields, CRLF or LF, any delimiter Papa Parse detects). The column is the one
 * whose header reads email / e-mail / email address, else the first. `firstRowIsHeader` undefined: the first row
 * is a header when one of its cells reads like that. Blank lines are skipped; a row with an empty address cell is
 * kept (it is reported as bad syntax, free), so results line up with the file's rows.
 */
export function readEmailColumn(text: string, firstRowIsHeader: boolean | undefined): string[] {
  if (text.trim() === "") throw invalidFile("the file is empty");
  const parsed = Papa.parse<string[]>(text, { skipEmptyLines: "greedy" });
  // "Delimiter" only means a one-column file (no delimiter to guess); ragged rows ("FieldMismatch") are fine too.
  const broken = parsed.errors.filter((error) => error.type === "Quotes");
  if (broken.length > 0) {
    const first = broken[0]!;
    throw invalidFile(`not CSV: ${first.message}${first.row === undefined ? "" : ` (row ${first.row + 1})`}`);
  }
  const rows = parsed.data;
  const firstRow = rows[0] ?? [];
  const hasHeader = firstRowIsHeader ?? firstRow.some(isEmailHeader);
  const column = hasHeader ? Math.max(0, firstRow.findIndex(isEmailHeader)) : 0;
  const dataRows = hasHeader ? rows.slice(1) : rows;
  if (dataRows.length === 0) throw invalidFile(hasHeader ? "the file has a header but no rows" : "the file has no rows");
  if (dataRows.length > MAX_JOB_ADDRESSES) {
    throw invalidFile(`the file has ${dataRows.length} rows; a batch takes at most ${MAX_JOB_ADDRESSES}`);
  }
  return dataRows.map((row) => (row[column] ?? "").trim());
}
