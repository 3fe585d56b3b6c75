import { Hono, type Context } from "hono";
import { roles } from "../../access";
import { actorOf } from "../../domain/audit/actor";
import { allMembers, changeRole, inviteAndMail, removeMember, setSignInSettings, transferOwnership, type Member } from "../../domain/members/members";
import { memberChangeInput, memberInput } from "../../domain/members/input";
import { AppError } from "../../errors";
import { orRefuse } from "../../http/refusals";
import { PostButton } from "../components/post-button";
import { Table } from "../components/table";
import { field, parsedOrThrow } from "../guard";
import { Csrf, Notice, Shell, StatusBadge, formatTime } from "../layout";
import type { DashboardEnv } from "../session";

type Page = Context<DashboardEnv>;

function RoleForm({ member, csrfToken }: { member: Member; csrfToken: string }) {
  return (
    <form method="post" action={`/dashboard/members/${member.id}`} class="inline-button">
      <Csrf token={csrfToken} />
      <select name="role" aria-label={`Role of ${member.email}`}>
        {roles
          .filter((role) => role !== "owner")
          .map((role) => (
            <option value={role} selected={role === member.role}>
              {role}
            </option>
          ))}
      </select>
      <button type="submit" class="secondary">
        Change role
      </button>
    </form>
  );
}

async function membersPage(c: Page, notice?: string, status: 200 | 201 = 200) {
  const auth = c.get("auth");
  const csrfToken = c.get("csrfToken");
  const people = await allMembers(c.var.ctx.shared, auth.account.id);
  const isOwner = auth.member?.role === "owner";
  const hasOwner = people.some((member) => member.role === "owner");
  return c.html(
    <Shell title="Members" auth={auth} csrfToken={csrfToken} current="/dashboard/members">
      {notice ? <Notice kind="ok">{notice}</Notice> : null}
      <section class="card">
        <h2>People</h2>
        <Table
          head={["Email", "Role", "Status", "Second factor", "Last sign-in", "Actions"]}
          rows={people}
          empty="No members yet: invite the first below. Until someone signs in, API keys sign into the dashboard."
          row={(member) => (
            <tr>
              <td>
                {member.email}
                {member.id === auth.member?.id ? <span class="badge">you</span> : null}
              </td>
              <td>{member.role}</td>
              <td>
                <StatusBadge status={member.status} />
              </td>
              <td>{member.totpEnabledAt ? "TOTP" : "—"}</td>
              <td>{formatTime(member.lastSignedInAt)}</td>
              <td class="actions">
                {member.role === "owner" ? null : <RoleForm member={member} csrfToken={csrfToken} />}
                {member.status === "invited" ? (
                  <PostButton
                    action="/dashboard/members"
                    csrfToken={csrfToken}
                    tone="secondary"
                    fields={{ email: member.email, role: member.role }}
                    label={`Send ${member.email} a new invitation`}
                  >
                    Invite again
                  </PostButton>
                ) : null}
                {isOwner && member.role !== "owner" && member.status === "active" ? (
                  <PostButton
                    action={`/dashboard/members/${member.id}/transfer-ownership`}
                    csrfToken={csrfToken}
                    tone="secondary"
                    label={`Make ${member.email} the owner`}
                  >
                    Make owner
                  </PostButton>
                ) : null}
                {member.role === "owner" ? null : (
                  <PostButton action={`/dashboard/members/${member.id}/delete`} csrfToken={csrfToken} tone="danger" label={`Remove ${member.email}`}>
                    Remove
                  </PostButton>
                )}
              </td>
            </tr>
          )}
        />
      </section>
      <section class="card">
        <h2>Invite someone</h2>
        <form method="post" action="/dashboard/members" class="stack">
          <Csrf token={csrfToken} />
          <label for="member-email">Email address</label>
          <input id="member-email" name="email" type="email" required maxlength={320} placeholder="ann@example.com" />
          <label for="member-role">Role</label>
          <select id="member-role" name="role">
            {roles
              .filter((role) => role !== "owner" || !hasOwner)
              .map((role) => (
                <option value={role} selected={role === "developer"}>
                  {role}
                </option>
              ))}
          </select>
          <p class="hint">
            They get a link valid for 7 days. Admins do everything but hand ownership over; developers keys, SMTP, domains, webhooks, messages and
            inbound mail; marketers contacts, templates, campaigns and automations; viewers read and change nothing.
          </p>
          <button type="submit">Send invitation</button>
        </form>
      </section>
      {isOwner ? (
        <section class="card">
          <h2>Signing in</h2>
          <form method="post" action="/dashboard/members/settings" class="stack">
            <Csrf token={csrfToken} />
            <label>
              <input type="checkbox" name="key_sign_in" value="on" checked={auth.account.keySignIn} /> API keys may sign into the dashboard
            </label>
            <p class="hint">Off: once a member has signed in, people sign in with their email address only. Keys keep working on the API.</p>
            <label>
              <input type="checkbox" name="require_totp" value="on" checked={auth.account.requireTotp} /> Every member signs in with a second factor
            </label>
            <p class="hint">
              Members without one set it up (Security) before anything else. API keys have no second factor: leave their sign-in off with this on.
            </p>
            <button type="submit">Save</button>
          </form>
        </section>
      ) : null}
    </Shell>,
    status,
  );
}

export const memberPages = new Hono<DashboardEnv>()
  .get("/members", async (c) => {
    return membersPage(c);
  })
  .post("/members", async (c) => {
    const form = await c.req.parseBody();
    const body = parsedOrThrow(memberInput, { email: field(form, "email"), role: field(form, "role") }, "The invitation cannot be sent");
    const auth = c.get("auth");
    const invited = orRefuse(await inviteAndMail(c.var.ctx, auth.account, { ...body, invitedBy: actorOf(auth).name }));
    return membersPage(c, `Invitation sent to ${invited.member.email}.`, invited.created ? 201 : 200);
  })
  // Before /members/:id, which would take "settings" for an id.
  .post("/members/settings", async (c) => {
    if (c.get("auth").member?.role !== "owner") throw new AppError("forbidden", "Only the owner changes how the account signs in");
    const form = await c.req.parseBody();
    await setSignInSettings(c.var.ctx.shared, c.get("auth").account.id, {
      keySignIn: field(form, "key_sign_in") === "on",
      requireTotp: field(form, "require_totp") === "on",
    });
    return c.redirect("/dashboard/members", 303);
  })
  .post("/members/:id", async (c) => {
    const form = await c.req.parseBody();
    const body = parsedOrThrow(memberChangeInput, { role: field(form, "role") }, "The role cannot be changed");
    orRefuse(await changeRole(c.var.ctx.shared, c.get("auth").account.id, c.req.param("id"), body.role));
    return c.redirect("/dashboard/members", 303);
  })
  .post("/members/:id/transfer-ownership", async (c) => {
    const me = c.get("auth").member;
    if (me?.role !== "owner") throw new AppError("forbidden", "Only the owner hands ownership over");
    orRefuse(await transferOwnership(c.var.ctx.shared, c.get("auth").account.id, me.id, c.req.param("id")));
    return c.redirect("/dashboard/members", 303);
  })
  .post("/members/:id/delete", async (c) => {
    orRefuse(await removeMember(c.var.ctx.shared, c.get("auth").account.id, c.req.param("id")));
    return c.redirect(c.req.param("id") === c.get("auth").member?.id ? "/dashboard/sign-in" : "/dashboard/members", 303);
  });
