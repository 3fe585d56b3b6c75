import { accountDatabaseName, accountDatabaseNames, accountDb, poolDatabases } from "../db/client";
import { moveAccount, type MoveOutcome } from "../domain/accounts/move";
import {
  createAccount as addAccount,
  findAccount,
  findBalances,
  findBalancesOf,
  listAccounts,
  placeAccount,
  planNames,
  refreshDirectoryCopy,
  serializeAccount,
  topUpAccount,
  updateAccount as changeAccount,
  type Account,
  type Balances,
} from "../domain/accounts/accounts";
import { AppError, notFound, validationError } from "../errors";
import { orRefuse } from "../http/refusals";
import {
  adminRoute,
  createRouter,
  evenWithFieldErrors,
  errorResponse,
  IdParam,
  jsonBody,
  jsonResponse,
  paginated,
  PaginationQuery,
  z,
} from "../lib/openapi";
import { pageOf } from "../lib/pagination";
import { AccountSchema, FeatureSchema } from "../api/schemas";
import { operatorActor } from "../domain/audit/actor";
import { origin, record } from "../middleware/audit";
import { inviteAndMail } from "../domain/members/members";
import { memberEmail } from "../domain/members/input";

const credits = z.number().int().min(0).max(1_000_000_000);
const limits = {
  daily_send_limit: z.number().int().min(0).max(100_000_000).optional(),
  rate_limit_per_minute: z.number().int().min(1).max(1_000_000).optional(),
  ai_generations_per_month: z.number().int().min(0).max(1_000_000).optional(),
};

const CreateAccountSchema = z
  .object({
    name: z.string().trim().min(1).max(200),
    plan: z.enum(planNames).default("free"),
    send_credits: credits.default(0),
    verify_credits: credits.default(0),
    ...limits,
    features: z.array(FeatureSchema).optional().openapi({ description: "Defaults to email_api and smtp_relay" }),
    owner_email: memberEmail.optional().openapi({ description: "The account's owner: mailed an invitation (a sign-in link valid for 7 days)" }),
  })
  .strict()
  .openapi("CreateAccount");

const UpdateAccountSchema = z
  .object({
    name: z.string().trim().min(1).max(200).optional(),
    plan: z.enum(planNames).optional(),
    ...limits,
    features: z.array(FeatureSchema).optional(),
  })
  .strict()
  .openapi("UpdateAccount");

const TopUpSchema = z
  .object({ send: credits.optional(), verify: credits.optional(), note: z.string().max(500).optional() })
  .strict()
  .refine((body) => (body.send ?? 0) > 0 || (body.verify ?? 0) > 0, { message: "Give a positive `send` or `verify` amount", ...evenWithFieldErrors })
  .openapi("TopUp");

const MoveAccountSchema = z
  .object({
    database: z
      .string()
      .min(1)
      .openapi({ example: "ACCOUNT_DB_1", description: "The account database to move the account's rows to (its binding name)" }),
  })
  .strict()
  .openapi("MoveAccount");

// The operator sees where an account's rows are; the account itself (GET /api/v1/me) does not.
const OperatorAccountSchema = AccountSchema.extend({
  database: z.string().openapi({ example: "DB", description: "The D1 binding that holds the account's rows" }),
}).openapi("OperatorAccount");

const listAccountsRoute = adminRoute({
  method: "get",
  path: "/accounts",
  summary: "List every account, newest first",
  request: {
    query: PaginationQuery.extend({
      plan: z
        .enum(planNames)
        .optional()
        .openapi({ param: { name: "plan", in: "query" } }),
    }),
  },
  responses: { 200: jsonResponse(paginated(OperatorAccountSchema, "OperatorAccountList"), "A page of accounts") },
});

const createAccount = adminRoute({
  method: "post",
  path: "/accounts",
  summary: "Create an account and its first full-access API key",
  request: { body: jsonBody(CreateAccountSchema) },
  responses: {
    201: jsonResponse(
      OperatorAccountSchema.extend({
        api_key: z.string().openapi({ description: "Full-access key, shown only this once" }),
        owner: z
          .object({ id: z.string(), email: z.string(), status: z.literal("invited") })
          .optional()
          .openapi({ description: "With `owner_email`" }),
      }),
      "The account",
    ),
  },
});

const getAccount = adminRoute({
  method: "get",
  path: "/accounts/{id}",
  summary: "One account",
  request: { params: IdParam("acc") },
  responses: { 200: jsonResponse(OperatorAccountSchema, "The account"), 404: errorResponse("No such account") },
});

const updateAccount = adminRoute({
  method: "patch",
  path: "/accounts/{id}",
  summary: "Change plan, limits or features",
  description: "Changing the plan resets the limits to the plan's defaults unless they are given in the same request.",
  request: { params: IdParam("acc"), body: jsonBody(UpdateAccountSchema) },
  responses: {
    200: jsonResponse(OperatorAccountSchema, "The updated account"),
    404: errorResponse("No such account"),
    409: errorResponse("The account is being moved to another database"),
  },
});

const topUp = adminRoute({
  method: "post",
  path: "/accounts/{id}/credits",
  summary: "Add sending and/or verification credits (one ledger entry each)",
  request: { params: IdParam("acc"), body: jsonBody(TopUpSchema) },
  responses: {
    200: jsonResponse(OperatorAccountSchema, "The account with its new balances"),
    404: errorResponse("No such account"),
    409: errorResponse("The account is being moved to another database"),
  },
});

const moveAccountRoute = adminRoute({
  method: "post",
  path: "/accounts/{id}/move",
  summary: "Move the account's rows to another account database",
  description: [
    "Writes of the account are paused while it moves (its API keys and dashboard sessions get 503 with Retry-After for",
    "anything but a read, its SMTP credentials 451); its rows are copied in bounded batches, checked by counts, the",
    "directory is switched to the new database and the old rows are deleted. Refused (409) while the account has work",
    "in flight that the move would strand. Interrupted, it is retried with the same request; a move to the database",
    "the account is in finishes or abandons an interrupted one, and is otherwise refused (422).",
  ].join(" "),
  request: { params: IdParam("acc"), body: jsonBody(MoveAccountSchema) },
  responses: {
    200: jsonResponse(OperatorAccountSchema, "The account in its new database"),
    404: errorResponse("No such account"),
    409: errorResponse("A move of the account is running, it has work in flight, or its rows changed during the copy"),
  },
});

/** A move that did not happen, as the operator API answers it. */
function moveRefusal(env: Env, outcome: Exclude<MoveOutcome, { kind: "moved" }>, database: string): AppError {
  switch (outcome.kind) {
    case "not_found":
      return notFound("Account");
    case "unknown_database":
      return validationError({ database: [`${database} is not an account database of this deployment (${accountDatabaseNames(env).join(", ")})`] });
    case "same_database":
      return validationError({ database: [`The account's rows are already in ${database}`] });
    case "move_running":
      return new AppError(
        "conflict",
        `A move of this account to ${outcome.movingTo} is running (or was interrupted: retry after ${outcome.leaseEndsAt})`,
      );
    case "work_in_flight":
      return new AppError(
        "conflict",
        `The account has work in flight that a move would strand: ${outcome.work.join("; ")}. Retry once it has finished`,
      );
    case "changed_during_copy":
      return new AppError("conflict", `The account's rows changed during the copy (${outcome.tables.join(", ")}); nothing was moved. Retry`);
  }
}

/** The account as the operator API shows it: with its balances and the database its rows are in. */
const operatorAccount = (account: Account, balances: Balances) => ({
  ...serializeAccount(account, balances),
  database: accountDatabaseName(account),
});

/** The account with its balances (read from its database) as the operator API shows it, or its 404 when there is none by that id. */
async function shownAccount(env: Env, account: Account | undefined) {
  if (!account) throw notFound("Account");
  return operatorAccount(account, await findBalances(accountDb(env, account), account.id));
}

/** The balances of a page of accounts: one query per database the page's accounts are in. */
async function pageBalances(env: Env, page: Account[]): Promise<(account: Account) => Balances> {
  const byDatabase = new Map<string, Account[]>();
  for (const account of page) byDatabase.set(accountDatabaseName(account), [...(byDatabase.get(accountDatabaseName(account)) ?? []), account]);
  const lookups = await Promise.all(
    [...byDatabase].map(([database, inOne]) =>
      findBalancesOf(
        accountDb(env, { database }),
        inOne.map((account) => account.id),
      ),
    ),
  );
  const found = new Map(
    [...byDatabase.values()].flatMap((inOne, index) => inOne.map((account) => [account.id, lookups[index]!(account.id)] as const)),
  );
  return (account) => found.get(account.id)!;
}

/** The operator's own writes wait for a move too (updateAccount and topUpAccount say why). */
const accountMovingConflict = (id: string) => new AppError("conflict", `Account ${id} is being moved; change it once the move has ended`);

export const adminAccountRoutes = createRouter()
  .openapi(listAccountsRoute, async (c) => {
    const query = c.req.valid("query");
    const rows = await listAccounts(c.var.ctx.shared, query);
    const balancesOf = await pageBalances(c.env, rows.slice(0, query.limit));
    return c.json(
      pageOf(rows, query.limit, (account) => operatorAccount(account, balancesOf(account))),
      200,
    );
  })
  .openapi(createAccount, async (c) => {
    const body = c.req.valid("json");
    const database = await placeAccount(c.var.ctx.shared, poolDatabases(c.env));
    const { account, balances, key } = await addAccount(c.var.ctx.shared, (created) => accountDb(c.env, created), database, {
      name: body.name,
      plan: body.plan,
      features: body.features,
      sendCredits: body.send_credits,
      verifyCredits: body.verify_credits,
      dailySendLimit: body.daily_send_limit,
      rateLimitPerMinute: body.rate_limit_per_minute,
      aiGenerationsPerMonth: body.ai_generations_per_month,
    });
    if (!body.owner_email) return c.json({ ...operatorAccount(account, balances), api_key: key }, 201);
    // A new account has no member yet, so inviting its owner cannot be refused.
    const invited = orRefuse(
      await inviteAndMail(c.var.ctx, account, {
        email: body.owner_email,
        role: "owner",
        invitedBy: operatorActor.name,
      }),
    );
    const owner = { id: invited.member.id, email: invited.member.email, status: "invited" as const };
    await record(accountDb(c.env, account), {
      accountId: account.id,
      action: "member.invited",
      actor: operatorActor,
      target: { type: "member", id: owner.id },
      via: "operator",
      ...origin(c),
    });
    return c.json({ ...operatorAccount(account, balances), api_key: key, owner }, 201);
  })
  .openapi(getAccount, async (c) => {
    return c.json(await shownAccount(c.env, await findAccount(c.var.ctx.shared, c.req.valid("param").id)), 200);
  })
  .openapi(updateAccount, async (c) => {
    const body = c.req.valid("json");
    const account = await changeAccount(c.var.ctx.shared, c.req.valid("param").id, {
      name: body.name,
      plan: body.plan,
      features: body.features,
      dailySendLimit: body.daily_send_limit,
      rateLimitPerMinute: body.rate_limit_per_minute,
      aiGenerationsPerMonth: body.ai_generations_per_month,
    });
    if (account === "moving") throw accountMovingConflict(c.req.valid("param").id);
    // The directory changed first: a failed copy fails the request, and the operator's retry writes both again.
    if (account) await refreshDirectoryCopy(accountDb(c.env, account), account);
    return c.json(await shownAccount(c.env, account), 200);
  })
  .openapi(moveAccountRoute, async (c) => {
    const { database } = c.req.valid("json");
    const outcome = await moveAccount(c.env, c.var.ctx.shared, c.req.valid("param").id, database);
    if (outcome.kind !== "moved") throw moveRefusal(c.env, outcome, database);
    return c.json(await shownAccount(c.env, outcome.account), 200);
  })
  .openapi(topUp, async (c) => {
    const body = c.req.valid("json");
    const id = c.req.valid("param").id;
    const toppedUp = await topUpAccount(c.env, c.var.ctx.shared, id, {
      send: body.send,
      verify: body.verify,
      note: body.note ?? "operator top-up",
    });
    if (!toppedUp) throw notFound("Account");
    if (toppedUp === "moving") throw accountMovingConflict(id);
    return c.json(operatorAccount(toppedUp.account, toppedUp.balances), 200);
  });
