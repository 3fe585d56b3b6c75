// Signing into the dashboard (docs/dashboard.md, "Signing in"): a member asks for a mailed link (or its code), an
// invitee accepts an invitation, and an API key still signs in where the account allows it. Every form here has no
// session yet, so each carries the double-submit sign-in token.

import { accountDb } from "../db/client";
import { Hono, type Context } from "hono";
import { authenticateApiKey } from "../domain/accounts/api-keys";
import { findActiveMember, normalizeEmail } from "../domain/members/members";
import { checkSecondFactor, hasTotp } from "../domain/members/totp";
import { memberEmail } from "../domain/members/input";
import { keySignInAllowed } from "../domain/members/sessions";
import {
  SIGN_IN_TTL_MS,
  acceptInvitation,
  peekToken,
  redeemSignInCode,
  mailSignInLinks,
  redeemSignInLink,
  type SignedIn,
} from "../domain/members/sign-in";
import { actorOf } from "../domain/audit/actor";
import { sha256Hex } from "../lib/crypto";
import { origin, record } from "../middleware/audit";
import type { AuthContext } from "../types";
import { Notice, Shell, firstSection } from "./layout";
import {
  issueSignInToken,
  memberCredential,
  pendingSecondFactor,
  presentedSignInBrowser,
  readSession,
  signInBrowser,
  signInTokenMatches,
  startMemberSession,
  startSecondFactor,
  startSession,
  type DashboardEnv,
} from "./session";

export const signInPath = "/dashboard/sign-in";

type Status = 200 | 400 | 401 | 403 | 410 | 422 | 429;

function SignInPage({ token, error, email }: { token: string; error?: string; email?: string }) {
  return (
    <Shell title="Sign in">
      <section class="card narrow">
        {error ? <Notice kind="error">{error}</Notice> : null}
        <form method="post" action={signInPath} class="stack">
          <input type="hidden" name="_csrf" value={token} />
          <label for="email">Email address</label>
          <input id="email" name="email" type="email" autocomplete="email" required value={email} placeholder="you@example.com" />
          <p class="hint">Members get a sign-in link and a code by email. Open the link, or type the code, in this browser.</p>
          <button type="submit">Email me a link</button>
        </form>
      </section>
      <section class="card narrow">
        <h2>Or with an API key</h2>
        <form method="post" action={signInPath} class="stack">
          <input type="hidden" name="_csrf" value={token} />
          <label for="key">API key</label>
          <input id="key" name="key" type="password" autocomplete="current-password" required placeholder="sk_live_…" spellcheck={false} />
          <p class="hint">
            For an account without members yet, or whose owner allows it. The key stays on the server: the session cookie names the key's id and ends
            when the key is revoked or rotated. Keys with scopes see only their sections.
          </p>
          <button type="submit">Sign in</button>
        </form>
      </section>
    </Shell>
  );
}

function CheckMailPage({ token, email, error }: { token: string; email: string; error?: string }) {
  return (
    <Shell title="Check your email">
      <section class="card narrow">
        {error ? <Notice kind="error">{error}</Notice> : null}
        <p>
          If <strong>{email}</strong> belongs to a member, a sign-in link and a code are on their way. Open the link in this browser, or type the code
          here. Both work once, for 15 minutes.
        </p>
        <form method="post" action={`${signInPath}/code`} class="stack">
          <input type="hidden" name="_csrf" value={token} />
          <input type="hidden" name="email" value={email} />
          <label for="code">Code</label>
          <input id="code" name="code" inputmode="numeric" autocomplete="one-time-code" pattern="[0-9]{6}" maxlength={6} required />
          <button type="submit">Sign in</button>
        </form>
        <p>
          <a href={signInPath}>Use another address</a>
        </p>
      </section>
    </Shell>
  );
}

function MessagePage({ title, message, kind = "error" }: { title: string; message: string; kind?: "error" | "warn" }) {
  return (
    <Shell title={title}>
      <Notice kind={kind}>{message}</Notice>
      <p>
        <a href={signInPath}>Sign in</a>
      </p>
    </Shell>
  );
}

const client = (c: Context) => c.req.header("CF-Connecting-IP") ?? "local";

/** One bucket of the RateLimiter object: undefined when allowed, else the seconds to wait. */
async function limited(c: Context<DashboardEnv>, name: string, limit: number, windowSeconds: number): Promise<number | undefined> {
  const decision = await c.env.RATE_LIMITER.getByName(name).consume(limit, windowSeconds);
  if (decision.allowed) return undefined;
  c.header("Retry-After", String(decision.retryAfterSeconds));
  return decision.retryAfterSeconds;
}

// Per client address, every sign-in form together: guessing keys or codes through them costs as much as through the
// API. Per email address: links mailed (5 a quarter hour, so nobody floods a mailbox) and codes tried (5 a quarter
// hour: with at most a few live six-digit codes, guessing one takes years).
const perClient = (c: Context<DashboardEnv>) => limited(c, `dashboard-sign-in:${client(c)}`, 30, 60);
const perAddress = async (c: Context<DashboardEnv>, what: "mail" | "code", email: string) =>
  limited(c, `dashboard-sign-in-${what}:${await sha256Hex(email)}`, 5, 15 * 60);

const tooMany = (seconds: number) => `Too many attempts; try again in ${seconds} s.`;

function SecondFactorPage({ token, error }: { token: string; error?: string }) {
  return (
    <Shell title="Second factor">
      <section class="card narrow">
        {error ? <Notice kind="error">{error}</Notice> : null}
        <form method="post" action={`${signInPath}/second-factor`} class="stack">
          <input type="hidden" name="_csrf" value={token} />
          <label for="second-factor">Code from your authenticator app, or a recovery code</label>
          <input id="second-factor" name="code" autocomplete="one-time-code" required maxlength={20} spellcheck={false} />
          <button type="submit">Sign in</button>
        </form>
      </section>
    </Shell>
  );
}

/**
 * The member passed the first factor (their link, code or invitation was just used): the second factor's page when
 * they have one, else a session and their first section.
 */
async function signedIn(c: Context<DashboardEnv>, found: SignedIn) {
  if (hasTotp(found.member)) {
    await startSecondFactor(c, found.member.id);
    return c.html(<SecondFactorPage token={issueSignInToken(c)} />);
  }
  return sessionFor(c, found);
}

async function sessionFor(c: Context<DashboardEnv>, { member, account }: SignedIn) {
  await startMemberSession(c, member.id);
  const context = { id: member.id, email: member.email, role: member.role, totp: hasTotp(member) };
  const auth = { account, apiKey: memberCredential(context), member: context };
  await recordSignIn(c, auth, { type: "member", id: member.id });
  return c.redirect(firstSection(auth), 303);
}

const recordSignIn = (c: Context<DashboardEnv>, auth: AuthContext, target: { type: string; id: string }) =>
  record(accountDb(c.env, auth.account), {
    accountId: auth.account.id,
    action: `${target.type}.signed_in`,
    actor: actorOf(auth),
    target,
    via: "dashboard",
    ...origin(c),
  });

export const signInPages = new Hono<DashboardEnv>()
  .get("/sign-in", async (c) => {
    if (await readSession(c)) return c.redirect("/dashboard", 303);
    return c.html(<SignInPage token={issueSignInToken(c)} />);
  })
  .post("/sign-in", async (c) => {
    const form = await c.req.parseBody();
    const page = (status: Status, error: string, email?: string) =>
      c.html(<SignInPage token={issueSignInToken(c)} error={error} email={email} />, status);
    if (!(await signInTokenMatches(c, typeof form._csrf === "string" ? form._csrf : undefined))) return page(403, "The form expired; sign in again.");
    const wait = await perClient(c);
    if (wait !== undefined) return page(429, tooMany(wait));
    if (typeof form.key === "string") {
      const presented = form.key.trim();
      const key = await authenticateApiKey(c.var.ctx.shared, presented, (write) => c.executionCtx.waitUntil(write));
      if (!key) return page(401, "That API key is not valid: it does not exist, was revoked or was rotated.");
      if (!(await keySignInAllowed(c.var.ctx.shared, key.account))) {
        return page(403, "This account's members sign in with their email address; its owner can allow API keys again on the Members page.");
      }
      await startSession(c, key.apiKey.id, await sha256Hex(presented));
      await recordSignIn(c, key, { type: "api_key", id: key.apiKey.id });
      return c.redirect(firstSection(key), 303);
    }
    const typed = typeof form.email === "string" ? form.email : "";
    const parsed = memberEmail.safeParse(typed);
    if (!parsed.success) return page(422, "Enter your email address.", typed);
    const email = parsed.data;
    const waitAddress = await perAddress(c, "mail", email);
    if (waitAddress !== undefined) return page(429, tooMany(waitAddress), email);
    // The same page, as soon, whether or not the address is a member's: the links are made and mailed after the answer.
    c.executionCtx.waitUntil(mailSignInLinks(c.var.ctx, email, signInBrowser(c, SIGN_IN_TTL_MS / 1000)));
    return c.html(<CheckMailPage token={issueSignInToken(c)} email={email} />);
  })
  .post("/sign-in/code", async (c) => {
    const form = await c.req.parseBody();
    const email = normalizeEmail(typeof form.email === "string" ? form.email : "");
    const page = (status: Status, error: string) => c.html(<CheckMailPage token={issueSignInToken(c)} email={email} error={error} />, status);
    if (!(await signInTokenMatches(c, typeof form._csrf === "string" ? form._csrf : undefined))) return page(403, "The form expired; try again.");
    const wait = (await perClient(c)) ?? (await perAddress(c, "code", email));
    if (wait !== undefined) return page(429, tooMany(wait));
    const browser = presentedSignInBrowser(c);
    const code = typeof form.code === "string" ? form.code.trim() : "";
    const member = browser ? await redeemSignInCode(c.var.ctx, email, code, browser) : undefined;
    if (!member) return page(401, "That code is not valid: it is wrong, was used, expired, or was asked for in another browser.");
    return signedIn(c, member);
  })
  .get("/sign-in/link", async (c) => {
    const outcome = await redeemSignInLink(c.var.ctx, c.req.query("token") ?? "", presentedSignInBrowser(c));
    if (outcome === "other_browser") {
      return c.html(
        <MessagePage
          title="Open it where you asked"
          message="This link works only in the browser where you asked for it. Open it there, or type the code from the same email on that browser's sign-in page."
          kind="warn"
        />,
        403,
      );
    }
    if (outcome === "invalid") {
      return c.html(<MessagePage title="Link expired" message="This sign-in link was used already or has expired; ask for a new one." />, 410);
    }
    return signedIn(c, outcome);
  })
  .get("/invitation", async (c) => {
    const secret = c.req.query("token") ?? "";
    const found = await peekToken(c.var.ctx, secret, "invitation");
    if (!found) {
      return c.html(
        <MessagePage
          title="Invitation expired"
          message="This invitation was used already or has expired; sign in with your email address, or ask for a new one."
        />,
        410,
      );
    }
    // A button, not a sign-in on GET: mail scanners open links, and must not use the invitation up.
    return c.html(
      <Shell title={`Join ${found.accountName}`}>
        <section class="card narrow">
          <p>
            You are invited to <strong>{found.accountName}</strong> as <strong>{found.member.role}</strong>, with the address {found.member.email}.
          </p>
          <form method="post" action="/dashboard/invitation" class="stack">
            <input type="hidden" name="_csrf" value={issueSignInToken(c)} />
            <input type="hidden" name="token" value={secret} />
            <button type="submit">Accept and sign in</button>
          </form>
        </section>
      </Shell>,
    );
  })
  .post("/sign-in/second-factor", async (c) => {
    const form = await c.req.parseBody();
    const page = (status: Status, error: string) => c.html(<SecondFactorPage token={issueSignInToken(c)} error={error} />, status);
    const memberId = await pendingSecondFactor(c);
    if (!memberId)
      return c.html(<MessagePage title="Sign in again" message="Five minutes passed since your link was used; ask for a new one." />, 401);
    if (!(await signInTokenMatches(c, typeof form._csrf === "string" ? form._csrf : undefined))) return page(403, "The form expired; try again.");
    const wait = (await perClient(c)) ?? (await limited(c, `dashboard-sign-in-factor:${memberId}`, 5, 15 * 60));
    if (wait !== undefined) return page(429, tooMany(wait));
    const found = await findActiveMember(c.var.ctx.shared, memberId);
    const code = typeof form.code === "string" ? form.code : "";
    if (!found || !(await checkSecondFactor(c.var.ctx, found.member, code))) return page(401, "That code is not valid, or was used already.");
    return sessionFor(c, found);
  })
  .post("/invitation", async (c) => {
    const form = await c.req.parseBody();
    if (!(await signInTokenMatches(c, typeof form._csrf === "string" ? form._csrf : undefined))) {
      return c.html(<MessagePage title="Form expired" message="The form expired; open the invitation's link again." />, 403);
    }
    const accepted = await acceptInvitation(c.var.ctx, typeof form.token === "string" ? form.token : "");
    if (!accepted) {
      return c.html(
        <MessagePage title="Invitation expired" message="This invitation was used already or has expired; sign in with your email address." />,
        410,
      );
    }
    return signedIn(c, accepted);
  });
