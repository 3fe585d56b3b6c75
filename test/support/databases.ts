import { env } from "cloudflare:workers";
import { accountDatabaseNames, poolDatabases } from "../../src/db/client";
import { createAccount, d1Of, type CreatedAccount } from "./helpers";

/** The last account database of the pool: the one the checks name (`ACCOUNT_DB_1` in the tests). */
export const lastAccountDatabase = () => poolDatabases(env).at(-1)!;

/** Another account database than `database`, as a stale hint names after a move. */
export const otherAccountDatabase = (database: string) => [...poolDatabases(env), "DB"].find((name) => name !== database)!;

/**
 * Makes accounts with `create` until one is placed in `database`: new accounts go to the pool database with the fewest
 * accounts, so a few tries reach each of them.
 */
export async function createdIn<T extends { database: string }>(database: string, create: () => Promise<T>): Promise<T> {
  for (let attempt = 0; attempt < 8; attempt++) {
    const made = await create();
    if (made.database === database) return made;
  }
  throw new Error(`no account was placed in ${database}`);
}

/** A new account placed in `database` (`overrides` are createAccount's). */
export const accountIn = (database: string, overrides: Record<string, unknown> = {}): Promise<CreatedAccount> =>
  createdIn(database, () => createAccount(overrides));

/**
 * Every D1 database that may hold accounts' rows, for helpers given a row's id but not its account: an account's
 * rows are all in one of them, so reading each and joining the results finds them.
 */
export const accountD1s = (): D1Database[] => accountDatabaseNames(env).map((database) => d1Of({ database }));

/** The rows `sql` finds in every account database, one after the other. */
export async function allAccountRows<T>(sql: string, ...params: unknown[]): Promise<T[]> {
  const found = await Promise.all(
    accountD1s().map((d1) =>
      d1
        .prepare(sql)
        .bind(...params)
        .all<T>(),
    ),
  );
  return found.flatMap(({ results }) => results);
}
