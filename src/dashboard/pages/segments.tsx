// Segments: a condition builder over the fields and operators the API offers, all/any, the live count of
// GET /segments/{id}/count, and list, edit, delete. Forms are parsed with the API's request schemas and saved
// through the same domain functions; deleting a segment a campaign still targets is refused as the API refuses it.
import { Hono, type Context } from "hono";
import { deleteSegmentOrThrow } from "../../http/contacts";
import { segmentChangeInput, segmentInput } from "../../domain/segments/input";
import { countAudience } from "../../domain/campaigns/audience";
import { conditionProblems } from "../../domain/segments/conditions";
import {
  countSegmentRow,
  createSegment,
  findSegment,
  listSegments,
  segmentAudienceWhere,
  updateSegment,
  type SegmentCondition,
  type SegmentRow,
} from "../../domain/segments/segments";
import { contactTextFields } from "../../domain/contacts/contacts";
import { listLists } from "../../domain/contacts/lists";
import { notFound, validationError } from "../../errors";
import { liveKeyOnly, parsedOrThrow } from "../guard";
import { ConditionRows, MatchSelect, conditionsOf, type Form } from "../components/conditions";
import { PostButton } from "../components/post-button";
import { Table } from "../components/table";
import { Csrf, Empty, Notice, Shell, formatTime } from "../layout";
import type { DashboardEnv } from "../session";

type Page = Context<DashboardEnv>;

const fieldChoices = ["email", ...contactTextFields, "status", "created_at", "list", "custom_fields."];
const blankRows = 3;
function Builder({ segment, csrfToken, countUrl }: { segment?: SegmentRow; csrfToken: string; countUrl: string }) {
  const rows: (SegmentCondition | undefined)[] = [...(segment?.conditions ?? []), ...Array.from({ length: blankRows }, () => undefined)];
  return (
    <form method="post" action={segment ? `/dashboard/segments/${segment.id}` : "/dashboard/segments"} class="stack">
      <Csrf token={csrfToken} />
      <label for="seg-name">Name</label>
      <input id="seg-name" name="name" type="text" required maxlength={200} value={segment?.name ?? ""} />
      <label for="seg-match">Contacts must match</label>
      <MatchSelect id="seg-match" match={segment?.match} />
      <datalist id="segment-fields">
        {fieldChoices.map((choice) => (
          <option value={choice} />
        ))}
      </datalist>
      <fieldset class="conditions" hx-get={countUrl} hx-trigger="change delay:300ms" hx-include="closest form" hx-target="next .segment-count">
        <legend>Conditions (a custom field is custom_fields.key; list takes list ids, comma separated)</legend>
        <ConditionRows rows={rows} suggestions="segment-fields" />
      </fieldset>
      <p class="segment-count hint" aria-live="polite" data-testid="segment-count">
        The matching contacts are counted as you change the conditions.
      </p>
      <button type="submit">{segment ? "Save segment" : "Create segment"}</button>
    </form>
  );
}

async function ownedSegment(c: Page): Promise<SegmentRow> {
  const segment = await findSegment(c.var.ctx.db, c.get("auth").account.id, c.req.param("id") ?? "");
  if (!segment) throw notFound("Segment");
  return segment;
}

export const segmentPages = new Hono<DashboardEnv>()
  .get("/segments", async (c) => {
    const auth = c.get("auth");
    const rows = (await listSegments(c.var.ctx.db, auth.account.id, { limit: 100 })).slice(0, 100);
    return c.html(
      <Shell title="Segments" auth={auth} csrfToken={c.get("csrfToken")} current="/dashboard/segments">
        {c.req.query("deleted") ? <Notice kind="ok">Segment deleted.</Notice> : null}
        <section class="card">
          <h2>Segments</h2>
          <Table
            head={["Name", "Conditions", "Updated"]}
            rows={rows}
            empty="No segments yet. Build one below from contact fields, custom fields and list membership; campaigns can then target it."
            row={(segment) => (
              <tr>
                <td class="wrap">
                  <a href={`/dashboard/segments/${segment.id}`}>{segment.name}</a>
                </td>
                <td>
                  {segment.conditions.length} ({segment.match === "all" ? "all must match" : "any may match"})
                </td>
                <td>{formatTime(segment.updatedAt)}</td>
              </tr>
            )}
          />
        </section>
        <section class="card">
          <h2>New segment</h2>
          <Builder csrfToken={c.get("csrfToken")} countUrl="/dashboard/segments/count" />
        </section>
      </Shell>,
    );
  })
  // The builder's live count (htmx): the conditions as typed, checked as the API checks them, then counted.
  .get("/segments/count", async (c) => {
    const accountId = c.get("auth").account.id;
    const conditions = conditionsOf(c.req.queries() as Form);
    if (conditions.length === 0) return c.html(<>Add a condition to count the matching contacts.</>);
    const problems = conditionProblems(conditions);
    if (Object.keys(problems).length > 0)
      return c.html(
        <span class="field-error">
          {Object.entries(problems)
            .map(([path, messages]) => `Condition ${Number(path.split(".")[1]) + 1}: ${messages.join(", ")}`)
            .join("; ")}
        </span>,
      );
    const match = c.req.query("match") === "any" ? "any" : "all";
    const total = await countAudience(c.var.ctx.db, segmentAudienceWhere(accountId, { match, conditions }));
    return c.html(
      <>
        <strong>{total.toLocaleString("en")}</strong> subscribed contacts match
      </>,
    );
  })
  .post("/segments", liveKeyOnly("Creating a segment"), async (c) => {
    const form = (await c.req.parseBody({ all: true })) as Form;
    const body = parsedOrThrow(
      segmentInput,
      { name: typeof form.name === "string" ? form.name : "", match: form.match, conditions: conditionsOf(form) },
      "The segment cannot be saved",
    );
    const outcome = await createSegment(c.var.ctx.db, c.get("auth").account.id, body);
    if (outcome.kind === "invalid") throw validationError(outcome.errors, "The segment cannot be saved");
    return c.redirect(`/dashboard/segments/${outcome.segment.id}`, 303);
  })
  .get("/segments/:id", async (c) => {
    const auth = c.get("auth");
    const segment = await ownedSegment(c);
    const [counted, lists] = await Promise.all([
      countSegmentRow(c.var.ctx.db, segment, { preview: true }),
      listLists(c.var.ctx.db, auth.account.id, { limit: 100 }),
    ]);
    const csrfToken = c.get("csrfToken");
    return c.html(
      <Shell title={segment.name} auth={auth} csrfToken={csrfToken} current="/dashboard/segments">
        <div class="grid two">
          <section class="card">
            <h2>Conditions</h2>
            <Builder segment={segment} csrfToken={csrfToken} countUrl="/dashboard/segments/count" />
            <PostButton action={`/dashboard/segments/${segment.id}/delete`} csrfToken={csrfToken} tone="danger" layout="inline">
              Delete segment
            </PostButton>
          </section>
          <section class="card">
            <h2>Who matches now</h2>
            <p data-testid="segment-total">
              <strong>{counted.count.toLocaleString("en")}</strong> subscribed contacts match.
            </p>
            {counted.contacts && counted.contacts.length > 0 ? (
              <ul class="plain">
                {counted.contacts.map((contact) => (
                  <li>
                    <a href={`/dashboard/contacts/${contact.id}`}>{contact.email}</a>
                    {contact.firstName ? ` (${contact.firstName})` : ""}
                  </li>
                ))}
              </ul>
            ) : (
              <Empty>No contact matches yet.</Empty>
            )}
            <h3>
              List ids for <code>list</code> conditions
            </h3>
            <ul class="plain">
              {lists.slice(0, 100).map((list) => (
                <li>
                  {list.name}: <code>{list.id}</code>
                </li>
              ))}
            </ul>
          </section>
        </div>
        <a href="/dashboard/segments">← Segments</a>
      </Shell>,
    );
  })
  .post("/segments/:id", liveKeyOnly("Changing a segment"), async (c) => {
    const segment = await ownedSegment(c);
    const form = (await c.req.parseBody({ all: true })) as Form;
    const body = parsedOrThrow(
      segmentChangeInput,
      { name: typeof form.name === "string" ? form.name : undefined, match: form.match, conditions: conditionsOf(form) },
      "The segment cannot be saved",
    );
    const outcome = await updateSegment(c.var.ctx.db, segment.accountId, segment.id, body);
    if (outcome.kind === "not_found") throw notFound("Segment");
    if (outcome.kind === "invalid") throw validationError(outcome.errors, "The segment cannot be saved");
    return c.redirect(`/dashboard/segments/${segment.id}`, 303);
  })
  .post("/segments/:id/delete", liveKeyOnly("Deleting a segment"), async (c) => {
    await deleteSegmentOrThrow(c.var.ctx.db, c.get("auth").account.id, c.req.param("id"));
    return c.redirect("/dashboard/segments?deleted=1", 303);
  });
