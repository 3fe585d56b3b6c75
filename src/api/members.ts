import { actorOf } from "../domain/audit/actor";
import { changeRole, findMember, inviteAndMail, listMembers, removeMember, serializeMember } from "../domain/members/members";
import { memberChangeInput, memberInput, roleInput } from "../domain/members/input";
import { notFound } from "../errors";
import { orRefuse } from "../http/refusals";
import { createRouter, errorResponse, IdParam, jsonBody, jsonResponse, keyedRoute, paginated, PaginationQuery, Timestamp, z } from "../lib/openapi";
import { pageOf } from "../lib/pagination";

const MemberSchema = z
  .object({
    id: z.string().openapi({ example: "mem_5Hq2mZ0bX1c4VnL7pT3dR8" }),
    email: z.string(),
    role: roleInput,
    status: z.enum(["invited", "active"]).openapi({ description: "`invited` until the member first signs in" }),
    invited_by: z.string().nullable(),
    last_signed_in_at: Timestamp.nullable(),
    totp: z.boolean().openapi({ description: "Signs in with a second factor (TOTP)" }),
    created_at: Timestamp,
    updated_at: Timestamp,
  })
  .openapi("Member");

const listRoute = keyedRoute("full_access", {
  method: "get",
  path: "/members",
  tags: ["Members"],
  summary: "List the account's members, newest first",
  request: { query: PaginationQuery },
  responses: { 200: jsonResponse(paginated(MemberSchema, "MemberList"), "A page of members") },
});

const inviteRoute = keyedRoute("full_access", {
  method: "post",
  path: "/members",
  tags: ["Members"],
  summary: "Invite a member: mails them a sign-in link valid for 7 days",
  description:
    "An address already invited gets a new link (200; earlier links stop working). `owner` only while the account has no owner: " +
    "afterwards the owner hands ownership over in the dashboard.",
  request: { body: jsonBody(memberInput) },
  responses: {
    201: jsonResponse(MemberSchema, "The member, invited"),
    200: jsonResponse(MemberSchema, "The invitation sent again"),
    409: errorResponse("The address is an active member already, or the account has an owner"),
  },
});

const getRoute = keyedRoute("full_access", {
  method: "get",
  path: "/members/{id}",
  tags: ["Members"],
  summary: "One member",
  request: { params: IdParam("mem") },
  responses: { 200: jsonResponse(MemberSchema, "The member"), 404: errorResponse("No such member") },
});

const changeRoute = keyedRoute("full_access", {
  method: "patch",
  path: "/members/{id}",
  tags: ["Members"],
  summary: "Change a member's role; it applies to their next request",
  request: { params: IdParam("mem"), body: jsonBody(memberChangeInput) },
  responses: {
    200: jsonResponse(MemberSchema, "The member with the new role"),
    404: errorResponse("No such member"),
    409: errorResponse("The owner's role, or making someone owner: ownership is handed over by the owner in the dashboard"),
  },
});

const removeRoute = keyedRoute("full_access", {
  method: "delete",
  path: "/members/{id}",
  tags: ["Members"],
  summary: "Remove a member: their open sessions end at once",
  request: { params: IdParam("mem") },
  responses: {
    200: jsonResponse(MemberSchema, "The removed member"),
    404: errorResponse("No such member"),
    409: errorResponse("The owner cannot be removed"),
  },
});

export const memberRoutes = createRouter()
  .openapi(listRoute, async (c) => {
    const query = c.req.valid("query");
    const rows = await listMembers(c.var.ctx.shared, c.get("auth").account.id, query);
    return c.json(pageOf(rows, query.limit, serializeMember), 200);
  })
  .openapi(inviteRoute, async (c) => {
    const auth = c.get("auth");
    const invited = orRefuse(
      await inviteAndMail(c.var.ctx, auth.account, {
        ...c.req.valid("json"),
        invitedBy: actorOf(auth).name,
      }),
    );
    return c.json(serializeMember(invited.member), invited.created ? 201 : 200);
  })
  .openapi(getRoute, async (c) => {
    const member = await findMember(c.var.ctx.shared, c.get("auth").account.id, c.req.valid("param").id);
    if (!member) throw notFound("Member");
    return c.json(serializeMember(member), 200);
  })
  .openapi(changeRoute, async (c) => {
    const changed = orRefuse(await changeRole(c.var.ctx.shared, c.get("auth").account.id, c.req.valid("param").id, c.req.valid("json").role));
    return c.json(serializeMember(changed.member), 200);
  })
  .openapi(removeRoute, async (c) => {
    const removed = orRefuse(await removeMember(c.var.ctx.shared, c.get("auth").account.id, c.req.valid("param").id));
    return c.json(serializeMember(removed), 200);
  });
