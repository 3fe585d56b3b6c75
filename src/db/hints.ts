// What a token, link or return path made for an account carries to find that account's database again without
// asking every database: the database's short tag (`databaseTag`: "1" for ACCOUNT_DB_1, "" for DB). It is a hint, not
// a credential: each reader still checks the token's signature, and looks in the other databases when the row is not
// where the hint says (the account moved since), through `findInAccountDatabases`.

import { databaseNameOf, databaseOfTag, databaseTag, type AccountDb, type DatabaseName } from "./client";

/** The tag of the database `db` reaches, for a token made for one of its accounts. */
export const tagOf = (db: AccountDb): string => databaseTag(databaseNameOf(db));

/**
 * The database a token's tag names first. No tag at all is a token made before account databases, whose rows were in
 * `DB`; "" is `DB`'s own tag. A tag of a database no longer bound names none: every database is searched.
 */
export const hintedDatabase = (env: Env, tag: string | undefined): DatabaseName | undefined =>
  tag === undefined || tag === "" ? "DB" : databaseOfTag(env, tag);
