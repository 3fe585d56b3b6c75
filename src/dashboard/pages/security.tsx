import { Hono, type Context } from "hono";
import { renderSVG } from "uqr";
import { findMember, type Member } from "../../domain/members/members";
import { checkSecondFactor, confirmTotp, disableTotp, hasTotp, startTotp } from "../../domain/members/totp";
import { AppError, notFound } from "../../errors";
import { bytesToBase64 } from "../../lib/crypto";
import { field } from "../guard";
import { Csrf, Notice, Shell, formatTime } from "../layout";
import type { DashboardEnv } from "../session";

type Page = Context<DashboardEnv>;

const encoder = new TextEncoder();

/** The signed-in member's own row: the page is about the person, so a key (which has no second factor) has none. */
async function me(c: Page): Promise<Member> {
  const { member, account } = c.get("auth");
  if (!member) throw new AppError("forbidden", "An API key has no second factor: this page is for members");
  const row = await findMember(c.var.ctx.shared, account.id, member.id);
  if (!row) throw notFound("Member");
  return row;
}

function CodeForm({ action, label, button, csrfToken }: { action: string; label: string; button: string; csrfToken: string }) {
  return (
    <form method="post" action={action} class="stack">
      <Csrf token={csrfToken} />
      <label for="totp-code">{label}</label>
      <input id="totp-code" name="code" autocomplete="one-time-code" required maxlength={20} spellcheck={false} />
      <button type="submit">{button}</button>
    </form>
  );
}

async function securityPage(c: Page, member: Member, error?: string) {
  const auth = c.get("auth");
  const csrfToken = c.get("csrfToken");
  const required = auth.account.requireTotp;
  if (hasTotp(member)) {
    return c.html(
      <Shell title="Security" auth={auth} csrfToken={csrfToken} current="/dashboard/security">
        {error ? <Notice kind="error">{error}</Notice> : null}
        <section class="card narrow">
          <p>
            Your sign-ins ask for a code from your authenticator app since {formatTime(member.totpEnabledAt)}. Recovery codes left:{" "}
            {member.recoveryCodes?.length ?? 0}.
          </p>
          {required ? (
            <p class="hint">This account requires a second factor, so it stays on.</p>
          ) : (
            <CodeForm action="/dashboard/security/totp/delete" label="A code, to turn it off" button="Turn off" csrfToken={csrfToken} />
          )}
        </section>
      </Shell>,
      error ? 401 : 200,
    );
  }
  const { uri, secret } = await startTotp(c.var.ctx, member);
  const qr = `data:image/svg+xml;base64,${bytesToBase64(encoder.encode(renderSVG(uri)))}`;
  return c.html(
    <Shell title="Security" auth={auth} csrfToken={csrfToken} current="/dashboard/security">
      {required ? <Notice kind="warn">This account requires a second factor: set it up to go on.</Notice> : null}
      {error ? <Notice kind="error">{error}</Notice> : null}
      <section class="card narrow">
        <h2>Second factor</h2>
        <p>Scan this with an authenticator app (any that reads TOTP codes), or type the key, then enter the code it shows.</p>
        <img src={qr} alt="QR code of the authenticator key" width={200} height={200} />
        <p>
          Key: <code data-testid="totp-secret">{secret}</code>
        </p>
        <CodeForm action="/dashboard/security/totp" label="Code from the app" button="Turn on" csrfToken={csrfToken} />
      </section>
    </Shell>,
    error ? 401 : 200,
  );
}

export const securityPages = new Hono<DashboardEnv>()
  .get("/security", async (c) => securityPage(c, await me(c)))
  .post("/security/totp", async (c) => {
    const member = await me(c);
    const codes = await confirmTotp(c.var.ctx, member, field(await c.req.parseBody(), "code"));
    if (!codes) return securityPage(c, member, "That code is not the one the app shows now; scan again and retry.");
    return c.html(
      <Shell title="Second factor on" auth={c.get("auth")} csrfToken={c.get("csrfToken")} current="/dashboard/security">
        <section class="card narrow">
          <p>Keep these recovery codes somewhere safe: each signs you in once without the app. They are shown only now.</p>
          <ul data-testid="recovery-codes">
            {codes.map((code) => (
              <li>
                <code>{code}</code>
              </li>
            ))}
          </ul>
          <p>
            <a href="/dashboard">Continue</a>
          </p>
        </section>
      </Shell>,
      201,
    );
  })
  .post("/security/totp/delete", async (c) => {
    const member = await me(c);
    if (c.get("auth").account.requireTotp) throw new AppError("forbidden", "This account requires a second factor");
    if (!(await checkSecondFactor(c.var.ctx, member, field(await c.req.parseBody(), "code")))) {
      return securityPage(c, member, "That code is not valid, or was used already.");
    }
    await disableTotp(c.var.ctx, member.id);
    return c.redirect("/dashboard/security", 303);
  });
