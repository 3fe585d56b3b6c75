import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { ADMIN_TOKEN, call, createAccount, d1Of, json, type CreatedAccount } from "../support/helpers";
import { eventually, messageOf, sendBalance, verifiedDomain } from "../support/sending";

// Accounts past one D1 (issue #43): each account's rows are in the account database its directory row names, and the
// directory (`DB`) keeps only what is found before the account is known.

type Listed = { id: string; database: string };
type Page = { data: Listed[]; has_more: boolean; next_cursor: string | null };

/** The tables that stay in `DB` for every account: the directory, and what a key, credential or session is found by. */
const directoryTables = new Set([
  "accounts",
  "api_keys",
  "smtp_credentials",
  "domains",
  "members",
  "sign_in_tokens",
  "member_sessions",
  "dashboard_sessions",
]);

/** The operator's list, page by page, until every one of `ids` was seen (other files add accounts meanwhile). */
async function operatorListing(ids: string[]): Promise<Map<string, Listed>> {
  const seen = new Map<string, Listed>();
  let cursor: string | null = null;
  do {
    const response = await call(`/admin/v1/accounts?limit=100${cursor ? `&cursor=${cursor}` : ""}`, { key: ADMIN_TOKEN });
    expect(response.status).toBe(200);
    const page = await json<Page>(response);
    for (const account of page.data) if (ids.includes(account.id)) seen.set(account.id, account);
    cursor = page.next_cursor;
  } while (cursor && seen.size < ids.length);
  return seen;
}

/** Every table of `d1` with an `account_id` column: the rows an account owns (directory tables aside). */
async function accountOwnedTables(d1: D1Database): Promise<string[]> {
  const tables = await d1
    .prepare(
      // D1 refuses pragma_table_info; a column's name is in its table's CREATE statement.
      "SELECT name FROM sqlite_master WHERE type = 'table' AND sql LIKE '%`account_id`%' ORDER BY name",
    )
    .all<{ name: string }>();
  return tables.results.map((table) => table.name).filter((name) => !directoryTables.has(name));
}

/** The rows of `d1` in each account-owned table that belong to one of `accountIds`, by table (tables with none left out). */
async function ownedRows(d1: D1Database, accountIds: string[]): Promise<Record<string, number>> {
  const counts: Record<string, number> = {};
  for (const table of await accountOwnedTables(d1)) {
    const row = await d1
      .prepare(`SELECT count(*) AS n FROM "${table}" WHERE account_id IN (SELECT value FROM json_each(?1))`)
      .bind(JSON.stringify(accountIds))
      .first<{ n: number }>();
    if (row!.n > 0) counts[table] = row!.n;
  }
  return counts;
}

const messageRows = async (d1: D1Database, id: string) => ({
  messages: (await d1.prepare("SELECT count(*) AS n FROM messages WHERE id = ?1").bind(id).first<{ n: number }>())!.n,
  recipients: (await d1.prepare("SELECT count(*) AS n FROM message_recipients WHERE message_id = ?1").bind(id).first<{ n: number }>())!.n,
  tags: (await d1.prepare("SELECT count(*) AS n FROM message_tags WHERE message_id = ?1").bind(id).first<{ n: number }>())!.n,
});

describe("account databases", () => {
  it("places eight new accounts in more than one database; each sends and is charged there, and DB holds none of their rows", async () => {
    const accounts: CreatedAccount[] = [];
    for (let i = 0; i < 8; i++) accounts.push(await createAccount({ name: `Placed ${i}`, send_credits: 10 }));
    const ids = accounts.map((account) => account.id);

    // The operator sees where each one is, as its creation said; new accounts go to the pool, never to DB.
    const listed = await operatorListing(ids);
    expect([...listed.keys()].sort()).toEqual([...ids].sort());
    for (const account of accounts) {
      expect(listed.get(account.id)).toMatchObject({ database: account.database });
      expect(account.database).toMatch(/^ACCOUNT_DB_\d+$/);
    }
    expect(new Set(accounts.map((account) => account.database)).size).toBeGreaterThanOrEqual(2);

    const sent = new Map<string, string>();
    for (const account of accounts) {
      const key = account.api_key;
      const domain = await verifiedDomain(key);
      const response = await call("/api/v1/send", {
        key,
        body: { from: `hello@${domain.name}`, to: [`reader-${account.id.slice(-6)}@example.org`], subject: "Hi", text: "Hello", tags: ["placed"] },
      });
      expect(response.status).toBe(202);
      const { id } = await json<{ id: string }>(response);
      sent.set(account.id, id);
      expect(await sendBalance(key)).toBe(9);
      const listedMessages = await json<{ data: { id: string }[] }>(await call("/api/v1/messages", { key }));
      expect(listedMessages.data.map((message) => message.id)).toEqual([id]);
    }
    // Delivered by the send queue's consumer, which finds each message in its account's database.
    for (const account of accounts) {
      await eventually(async () => ((await messageOf(account.api_key, sent.get(account.id)!)).status === "sent" ? true : undefined), 15_000);
    }

    for (const account of accounts) {
      const id = sent.get(account.id)!;
      expect(await messageRows(d1Of(account), id)).toEqual({ messages: 1, recipients: 1, tags: 1 });
      expect(await messageRows(env.DB, id)).toEqual({ messages: 0, recipients: 0, tags: 0 });
      // Another account database has none of them either.
      for (const other of new Set(accounts.map((each) => each.database))) {
        if (other !== account.database) expect(await messageRows(d1Of({ database: other }), id)).toEqual({ messages: 0, recipients: 0, tags: 0 });
      }
      const charged = await d1Of(account)
        .prepare("SELECT kind, amount FROM credit_ledger WHERE account_id = ?1 AND reference_id = ?2")
        .bind(account.id, id)
        .all();
      expect(charged.results).toEqual([{ kind: "charge", amount: -1 }]);
    }

    // Each account database holds its accounts' rows (balances, ledger, messages, events, ...); DB holds none of them.
    for (const database of new Set(accounts.map((account) => account.database))) {
      const own = accounts.filter((account) => account.database === database).map((account) => account.id);
      expect(await ownedRows(d1Of({ database }), own)).toMatchObject({
        account_balances: own.length,
        // the initial send and verify credits, and the send's charge
        credit_ledger: own.length * 3,
        messages: own.length,
        message_recipients: own.length,
      });
    }
    expect(await ownedRows(env.DB, ids)).toEqual({});
  }, 90_000);
});
