import { describe, expect, it } from "vitest";
import { ADMIN_TOKEN, call, createAccount, json } from "../support/helpers";

type Balances = { send: { balance: number; reserved: number; available: number }; verify: { balance: number; available: number } };
type OperatorAccount = { id: string; name: string; plan: string; database: string; balances: Balances; created_at: string };
type Page = { data: OperatorAccount[]; has_more: boolean; next_cursor: string | null };

/**
 * The operator's account list, `limit` at a time, following `next_cursor` to the last page, or only until `enough`
 * holds: the runtime's other test files add accounts too, so walking them all in small pages costs as much as they do.
 */
async function everyPage(query: string, enough: (listed: OperatorAccount[]) => boolean = () => false): Promise<Page[]> {
  const pages: Page[] = [];
  let cursor: string | null = null;
  do {
    const response = await call(`/admin/v1/accounts?${query}${cursor ? `&cursor=${cursor}` : ""}`, { key: ADMIN_TOKEN });
    expect(response.status).toBe(200);
    const page = await json<Page>(response);
    pages.push(page);
    cursor = page.next_cursor;
  } while (cursor && !enough(pages.flatMap((page) => page.data)));
  return pages;
}

describe("the operator's list of accounts", () => {
  it("pages through every account, newest first, each with its balances and its database", async () => {
    const created: Awaited<ReturnType<typeof createAccount>>[] = [];
    for (let index = 0; index < 8; index++) {
      created.push(await createAccount({ name: `Listed ${index}`, send_credits: index * 10, verify_credits: index }));
    }
    const topUp = await call(`/admin/v1/accounts/${created[2]!.id}/credits`, { key: ADMIN_TOKEN, body: { send: 5 } });
    expect(topUp.status).toBe(200);

    const pages = await everyPage("limit=3", (listed) => created.every((account) => listed.some((item) => item.id === account.id)));
    const listed = pages.flatMap((page) => page.data);
    expect(pages.length).toBeGreaterThanOrEqual(3);
    for (const page of pages.slice(0, -1)) expect(page).toMatchObject({ has_more: true, data: { length: 3 } });
    // the last page says so
    const whole = await everyPage("limit=100");
    expect(whole.at(-1)).toMatchObject({ has_more: false, next_cursor: null });
    // no account twice, and newest first
    expect(new Set(listed.map((account) => account.id)).size).toBe(listed.length);
    const order = listed.map((account) => `${account.created_at}|${account.id}`);
    expect(order).toEqual([...order].sort().reverse());

    for (const [index, account] of created.entries()) {
      const shown = listed.find((item) => item.id === account.id);
      const send = index * 10 + (index === 2 ? 5 : 0);
      expect(shown).toMatchObject({
        name: `Listed ${index}`,
        plan: "free",
        // where the account's rows are: new accounts go to the pool (wrangler.toml's ACCOUNT_DB_<n>), never to DB
        database: expect.stringMatching(/^ACCOUNT_DB_\d+$/),
        balances: { send: { balance: send, reserved: 0, available: send }, verify: { balance: index, available: index } },
      });
      // each item is the account as GET /admin/v1/accounts/{id} shows it
      expect(shown).toEqual(await json(await call(`/admin/v1/accounts/${account.id}`, { key: ADMIN_TOKEN })));
    }
  });

  it("filters by plan", async () => {
    const pro = await createAccount({ plan: "pro" });
    const listed = (await everyPage("limit=100&plan=pro")).flatMap((page) => page.data);
    expect(listed.map((account) => account.id)).toContain(pro.id);
    expect(listed.every((account) => account.plan === "pro")).toBe(true);
  });

  it("refuses a cursor no page gave out, a limit out of range and an unknown plan, and answers 401 without the operator token", async () => {
    for (const query of ["cursor=garbage", "limit=0", "limit=101", "plan=platinum"]) {
      expect((await call(`/admin/v1/accounts?${query}`, { key: ADMIN_TOKEN })).status).toBe(422);
    }
    const badCursor = await json<{ errors?: Record<string, string[]> }>(await call("/admin/v1/accounts?cursor=garbage", { key: ADMIN_TOKEN }));
    expect(badCursor.errors?.["query.cursor"]).toEqual(["Invalid cursor; pass next_cursor from the previous page"]);
    expect((await call("/admin/v1/accounts")).status).toBe(401);
    const account = await createAccount();
    expect((await call("/admin/v1/accounts", { key: account.api_key })).status).toBe(401);
  });
});
