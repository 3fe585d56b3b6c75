// Operator CLI over /admin/v1: `npm run admin -- <command> [options]`, prints the API's JSON answer.
import { parseArgs } from "node:util";
import { devStackUrl, readDevVars } from "./lib/dev-vars.ts";

const usage = `Usage: npm run admin -- <command> [options]

Commands:
  accounts:list [--limit 1-100] [--cursor <next_cursor>] [--plan ..] [--all]
                  (newest first, each with its balances and database; --all follows every page and adds the total)
  accounts:create --name <name> [--plan free|starter|pro|enterprise] [--send-credits N] [--verify-credits N]
                  [--daily-send-limit N] [--rate-limit N] [--ai-generations N] [--features email_api,smtp_relay,ai]
                  [--owner-email address]   (mails the owner an invitation to sign in)
  accounts:get <account id>
  accounts:update <account id> [--name ..] [--plan ..] [--daily-send-limit N] [--rate-limit N] [--ai-generations N]
                  [--features a,b]
  accounts:credits <account id> [--send N] [--verify N] [--note text]
  accounts:move <account id> <database>
                  (copies the account's rows to that account database, e.g. ACCOUNT_DB_1, pausing its writes;
                  interrupted, run it again)

Environment: WORKER_URL (default: the URL of the running \`npm run dev\` stack, read from DEV_STATE_DIR, else
http://127.0.0.1:$WORKER_PORT or :8787), ADMIN_TOKEN (default: from .dev.vars)`;

const { positionals, values } = parseArgs({
  allowPositionals: true,
  options: {
    name: { type: "string" },
    plan: { type: "string" },
    "send-credits": { type: "string" },
    "verify-credits": { type: "string" },
    "daily-send-limit": { type: "string" },
    "rate-limit": { type: "string" },
    "ai-generations": { type: "string" },
    features: { type: "string" },
    "owner-email": { type: "string" },
    send: { type: "string" },
    verify: { type: "string" },
    note: { type: "string" },
    limit: { type: "string" },
    cursor: { type: "string" },
    all: { type: "boolean" },
    help: { type: "boolean", short: "h" },
  },
});

function fail(message: string): never {
  console.error(`${message}\n\n${usage}`);
  process.exit(2);
}

function integer(flag: keyof typeof values): number | undefined {
  const raw = values[flag];
  if (raw === undefined) return undefined;
  if (typeof raw !== "string" || !/^-?\d+$/.test(raw)) fail(`--${flag} must be an integer`);
  return Number(raw);
}

const list = (raw: string | undefined) =>
  raw
    ?.split(",")
    .map((item) => item.trim())
    .filter(Boolean);

const [command, id, database] = positionals;
if (values.help || !command) {
  console.log(usage);
  process.exit(command ? 0 : 2);
}

type Request = { method: string; path: string; body?: Record<string, unknown> };

/** A page of the operator's account list; `cursor` continues after the page that gave it. */
function accountsPage(cursor: string | undefined): Request {
  const query = new URLSearchParams();
  const limit = integer("limit");
  if (limit !== undefined) query.set("limit", String(limit));
  if (values.plan) query.set("plan", values.plan);
  if (cursor) query.set("cursor", cursor);
  return { method: "GET", path: `/admin/v1/accounts${query.size ? `?${query}` : ""}` };
}

const requests: Record<string, () => Request> = {
  "accounts:list": () => accountsPage(values.cursor),
  "accounts:create": () => {
    if (!values.name) fail("accounts:create needs --name");
    return {
      method: "POST",
      path: "/admin/v1/accounts",
      body: {
        name: values.name,
        plan: values.plan,
        send_credits: integer("send-credits"),
        verify_credits: integer("verify-credits"),
        daily_send_limit: integer("daily-send-limit"),
        rate_limit_per_minute: integer("rate-limit"),
        ai_generations_per_month: integer("ai-generations"),
        features: list(values.features),
        owner_email: values["owner-email"],
      },
    };
  },
  "accounts:get": () => ({ method: "GET", path: `/admin/v1/accounts/${encodeURIComponent(id ?? fail("accounts:get needs an account id"))}` }),
  "accounts:update": () => ({
    method: "PATCH",
    path: `/admin/v1/accounts/${encodeURIComponent(id ?? fail("accounts:update needs an account id"))}`,
    body: {
      name: values.name,
      plan: values.plan,
      daily_send_limit: integer("daily-send-limit"),
      rate_limit_per_minute: integer("rate-limit"),
      ai_generations_per_month: integer("ai-generations"),
      features: list(values.features),
    },
  }),
  "accounts:credits": () => ({
    method: "POST",
    path: `/admin/v1/accounts/${encodeURIComponent(id ?? fail("accounts:credits needs an account id"))}/credits`,
    body: { send: integer("send"), verify: integer("verify"), note: values.note },
  }),
  "accounts:move": () => ({
    method: "POST",
    path: `/admin/v1/accounts/${encodeURIComponent(id ?? fail("accounts:move needs an account id"))}/move`,
    body: { database: database ?? fail("accounts:move needs the database to move to (e.g. ACCOUNT_DB_1)") },
  }),
};

const build = requests[command] ?? fail(`Unknown command: ${command}`);
const request = build();
const workerUrl = process.env.WORKER_URL ?? devStackUrl() ?? `http://127.0.0.1:${process.env.WORKER_PORT ?? 8787}`;
const adminToken = process.env.ADMIN_TOKEN ?? readDevVars().ADMIN_TOKEN;
if (!adminToken) fail("ADMIN_TOKEN is not set (env or .dev.vars)");

/** The API's answer to `request`: parsed JSON, or the text when it is not JSON. */
async function send(request: Request): Promise<{ ok: boolean; body: unknown }> {
  let response: Response;
  try {
    response = await fetch(new URL(request.path, workerUrl), {
      method: request.method,
      headers: { Authorization: `Bearer ${adminToken}`, "Content-Type": "application/json" },
      body: request.body ? JSON.stringify(request.body) : undefined,
    });
  } catch (error) {
    console.error(`Cannot reach the Worker at ${workerUrl}: ${(error as Error).message}. Is \`npm run dev\` running?`);
    process.exit(1);
  }
  const text = await response.text();
  try {
    return { ok: response.ok, body: JSON.parse(text) };
  } catch {
    return { ok: response.ok, body: text };
  }
}

const print = (body: unknown) => console.log(typeof body === "string" ? body : JSON.stringify(body, null, 2));

type Page = { data: unknown[]; next_cursor: string | null };
const isPage = (body: unknown): body is Page => typeof body === "object" && body !== null && "data" in body && Array.isArray(body.data);

if (command === "accounts:list" && values.all) {
  // Every page in turn, as one list with its total; a refusal on any page is printed as it came.
  const data: unknown[] = [];
  let next: Request | undefined = request;
  while (next) {
    const answer = await send(next);
    if (!answer.ok || !isPage(answer.body)) {
      print(answer.body);
      process.exit(1);
    }
    data.push(...answer.body.data);
    next = answer.body.next_cursor ? accountsPage(answer.body.next_cursor) : undefined;
  }
  print({ data, total: data.length });
  process.exit(0);
}

const answer = await send(request);
print(answer.body);
process.exit(answer.ok ? 0 : 1);
