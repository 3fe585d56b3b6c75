import Papa from "papaparse";
import { validationError } from "../errors";
import { csvBytesProblem, decodeBase64DataUri, UploadError, type DecodedDataUri } from "../lib/csv-upload";
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

const invalidFile = (reason: string) => validationError({ file: [reason] }, `The file cannot be read: ${reason}`);

export type DecodedFile = { name: string; text: string };

/** Decodes the data URI (shared with the contacts import): media type, `name=` parameter, UTF-8 text. */
export function decodeDataUri(file: string): DecodedFile {
  let decoded: DecodedDataUri;
  try {
    decoded = decodeBase64DataUri(file);
  } catch (error) {
    if (error instanceof UploadError) throw invalidFile(error.message);
    throw error;
  }
  if (!CSV_MEDIA_TYPES.has(decoded.mediaType)) throw invalidFile(`not CSV: the data URI says ${decoded.mediaType}`);
  const problem = csvBytesProblem(decoded.bytes);
  if (problem) throw invalidFile(problem);
  const text = new TextDecoder("utf-8").decode(decoded.bytes).replace(/^\uFEFF/, "");
  const name = decoded.name
    ?.replace(/[\r\n\t]/g, " ")
    .trim()
    .slice(0, MAX_NAME_LENGTH);
  return { name: name || DEFAULT_NAME, text };
}

const isEmailHeader = (cell: string) =>
  EMAIL_HEADERS.has(
    cell
      .trim()
      .toLowerCase()
      .replace(/[\s_-]+/g, ""),
  );

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
