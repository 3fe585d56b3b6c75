// Contact import throughput against a running stack: uploads a generated CSV (multipart, with a list and a
// custom-field mapping), polls the import to completion, then imports the same file again (every row an update).
//
// Run: WORKER_URL=http://127.0.0.1:8787 API_KEY=sk_live_… npx tsx scripts/bench/contact-import.ts [rows=100000]
// (`npm run dev` prints the demo key; the key needs the `contacts` scope.)
//
// Rows/second is rows processed / wall time from the start of the upload to the poll that saw `completed` (polls
// every 250 ms), so it includes the upload, the queue hops and the local D1; the background rate excludes the upload.
//
// D1 rows written per imported contact, from what the API reports (the import's counters and the list's
// contact_count before and after):
//   table rows  = contacts inserted (created) + contacts updated (updated) + memberships added + error rows kept
//   D1 billed   = the same rows with their index entries, as D1 counts `rows_written`: 5 per created contact (row,
//                 primary key, (account, email_key), (account, created_at), (account, lower(email_key))), 1 per
//                 updated contact (no indexed column changes), 3 per membership (row, primary key, contact_id),
//                 2 per error row kept. These per-row costs are measured with D1's meta.rows_written in
//                 test/contacts/import.test.ts ("writes 8 D1 rows per new contact …"). One progress update per
//                 2,000-row chunk (0.0005 per row) is left out.

const workerUrl = (process.env.WORKER_URL ?? "http://127.0.0.1:8787").replace(/\/$/, "");
const apiKey = process.env.API_KEY;
const rows = Number(process.argv[2] ?? process.env.ROWS ?? 100_000);
if (!apiKey) {
  process.stderr.write("Set API_KEY (and WORKER_URL if not http://127.0.0.1:8787); `npm run dev` prints a demo key.\n");
  process.exit(2);
}
if (!Number.isInteger(rows) || rows < 1) {
  process.stderr.write(`rows must be a positive integer, got ${process.argv[2]}\n`);
  process.exit(2);
}

type ContactImport = {
  id: string;
  status: "pending" | "processing" | "completed" | "failed";
  total: number;
  processed: number;
  created: number;
  updated: number;
  failed: number;
  error: string | null;
  errors: { row: number; message: string }[];
};

async function api<T>(path: string, init: RequestInit = {}): Promise<T> {
  const headers = new Headers(init.headers);
  headers.set("Authorization", `Bearer ${apiKey}`);
  if (typeof init.body === "string") headers.set("Content-Type", "application/json");
  const response = await fetch(`${workerUrl}/api/v1${path}`, { ...init, headers });
  const text = await response.text();
  if (!response.ok) throw new Error(`${init.method ?? "GET"} ${path}: ${response.status} ${text}`);
  return JSON.parse(text) as T;
}

function generateCsv(runId: string, count: number): string {
  const lines = ["email,first_name,last_name,company,plan"];
  for (let i = 0; i < count; i++) {
    // A quoted company with a comma keeps the parser's quoted path in the measurement.
    lines.push(`bench-${runId}-${i}@example.com,First${i},Last${i},"Company ${i % 1000}, Inc.",plan${i % 3}`);
  }
  return `${lines.join("\r\n")}\r\n`;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function runImport(label: string, csv: string, listId: string) {
  const form = new FormData();
  form.append("file", new Blob([csv], { type: "text/csv" }), "bench.csv");
  form.append(
    "mapping",
    JSON.stringify({ email: "email", first_name: "first_name", last_name: "last_name", company: "company", "custom_fields.plan": "plan" }),
  );
  form.append("list_id", listId);

  const before = await api<{ contact_count: number }>(`/lists/${listId}`);
  const started = performance.now();
  const accepted = await api<ContactImport>("/contacts/import", { method: "POST", body: form });
  const acceptedAt = performance.now();
  let status = accepted;
  let lastReport = acceptedAt;
  while (status.status === "pending" || status.status === "processing") {
    await sleep(250);
    status = await api<ContactImport>(`/contacts/import/${accepted.id}`);
    if (performance.now() - lastReport > 2000) {
      lastReport = performance.now();
      process.stdout.write(`  ${label}: ${status.processed.toLocaleString("en")} / ${status.total.toLocaleString("en")} rows\n`);
    }
  }
  const finished = performance.now();
  if (status.status === "failed") throw new Error(`import ${accepted.id} failed: ${status.error}`);
  const after = await api<{ contact_count: number }>(`/lists/${listId}`);

  const imported = status.created + status.updated;
  const memberships = after.contact_count - before.contact_count;
  const errorRows = status.errors.length;
  const tableRows = status.created + status.updated + memberships + errorRows;
  const billedRows = 5 * status.created + status.updated + 3 * memberships + 2 * errorRows;
  const seconds = (finished - started) / 1000;
  process.stdout.write(
    [
      `${label}: ${status.processed.toLocaleString("en")} rows (${status.created} created, ${status.updated} updated, ${status.failed} failed)`,
      `  upload accepted in ${((acceptedAt - started) / 1000).toFixed(2)} s (header check, row count, R2 put, enqueue)`,
      `  total ${seconds.toFixed(2)} s → ${Math.round(status.processed / seconds).toLocaleString("en")} rows/s` +
        ` (background only: ${Math.round(status.processed / ((finished - acceptedAt) / 1000)).toLocaleString("en")} rows/s)`,
      `  memberships added ${memberships}; table rows written per imported contact ${(tableRows / imported).toFixed(2)};` +
        ` D1 rows_written per imported contact ≈ ${(billedRows / imported).toFixed(2)}`,
      "",
    ].join("\n"),
  );
}

const runId = Date.now().toString(36);
const csv = generateCsv(runId, rows);
process.stdout.write(
  `Contact import bench: ${rows.toLocaleString("en")} rows, ${(csv.length / 1024 / 1024).toFixed(1)} MB CSV, against ${workerUrl}\n\n`,
);
const list = await api<{ id: string }>("/lists", { method: "POST", body: JSON.stringify({ name: `bench ${runId}` }) });
await runImport("first import (creates)", csv, list.id);
await runImport("same file again (updates)", csv, list.id);
process.stdout.write(
  `Bench contacts are left in the account: list ${list.id}, addresses bench-${runId}-*@example.com (delete the list with DELETE /lists/${list.id}).\n`,
);
