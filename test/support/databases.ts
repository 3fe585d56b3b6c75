import { env } from "cloudflare:workers";
import { poolDatabases } from "../../src/db/client";

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
