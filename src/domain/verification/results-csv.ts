import type { AccountDb } from "../../db/client";
import Papa from "papaparse";
import { listJobResults, type ResultRow } from "./job-rows";

export type CsvCell = string | number | boolean | null;

/** The columns of GET /verify/{id}?format=csv and the dashboard's download, one row per distinct input. */
export const jobCsvColumns = [
  "position",
  "email",
  "normalized",
  "account",
  "domain",
  "result",
  "status",
  "sub_status",
  "mx_found",
  "mx_record",
  "disposable",
  "role_based",
  "free_provider",
  "did_you_mean",
  "score",
  "quality",
  "syntax_valid",
  "checked_at",
] as const;

export const jobCsvRow = ({ position, result }: ResultRow): CsvCell[] =>
  jobCsvColumns.map((column) => (column === "position" ? position : (result[column] ?? null)));

// A page is one D1 read; 1,000 rows of ~500 bytes keeps each read small while a 50,000-row file is 50 reads.
const ROWS_PER_PAGE = 1_000;

/**
 * A job's results as CSV (RFC 4180: CRLF, quoted where needed), in input order, streamed page by page so a
 * 50,000-row file never sits in memory. Cells that a spreadsheet would run as a formula (`=`, `+`, `-`, `@`) are
 * prefixed with `'` (CSV injection), the usual defence; addresses are otherwise written as verified.
 */
export function jobResultsCsv(
  db: AccountDb,
  jobId: string,
  columns: readonly string[],
  toRow: (row: ResultRow) => CsvCell[],
): ReadableStream<Uint8Array> {
  const encoder = new TextEncoder();
  let after = -1;
  let headerSent = false;
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      const rows = await listJobResults(db, jobId, after, ROWS_PER_PAGE);
      const lines = Papa.unparse({ fields: [...columns], data: rows.map(toRow) }, { header: !headerSent, newline: "\r\n", escapeFormulae: true });
      headerSent = true;
      if (lines) controller.enqueue(encoder.encode(`${lines}\r\n`));
      const last = rows.at(-1);
      if (!last || rows.length < ROWS_PER_PAGE) controller.close();
      else after = last.position;
    },
  });
}
