import { describe, expect, it } from "vitest";
import { call, createAccount, json } from "../support/helpers";

type Template = { id: string; name: string; subject: string; html: string | null; text: string | null; variables: string[] };
type Page = { data: Template[]; has_more: boolean; next_cursor: string | null };

describe("templates", () => {
  it("are listed a page at a time, read, changed (variables follow the content) and deleted, within their account only", async () => {
    const account = await createAccount();
    const key = account.api_key;
    const first = await json<Template>(
      await call("/api/v1/templates", { key, body: { name: "one", subject: "Hi {{name}}", text: "Plan {{plan|free}}" } }),
    );
    const second = await json<Template>(await call("/api/v1/templates", { key, body: { name: "two", subject: "Hello", html: "<p>x</p>" } }));
    expect(first.variables).toEqual(["name", "plan"]);

    // Both may share a created_at millisecond, so only the pages' union is certain, not which comes first.
    const page = await json<Page>(await call("/api/v1/templates?limit=1", { key }));
    expect(page.has_more).toBe(true);
    const rest = await json<Page>(await call(`/api/v1/templates?limit=1&cursor=${page.next_cursor}`, { key }));
    expect(rest.has_more).toBe(false);
    expect([...page.data, ...rest.data].map((template) => template.id).sort()).toEqual([first.id, second.id].sort());
    expect(await json<Template>(await call(`/api/v1/templates/${first.id}`, { key }))).toMatchObject({ name: "one", text: "Plan {{plan|free}}" });

    const changed = await call(`/api/v1/templates/${first.id}`, {
      key,
      method: "PATCH",
      body: { subject: "Dear {{title}}", html: "<b>{{name}}</b>", text: null },
    });
    expect(changed.status).toBe(200);
    expect(await json<Template>(changed)).toMatchObject({
      name: "one",
      subject: "Dear {{title}}",
      html: "<b>{{name}}</b>",
      text: null,
      variables: ["title", "name"],
    });

    const empty = await call(`/api/v1/templates/${first.id}`, { key, method: "PATCH", body: { html: null } });
    expect(empty.status).toBe(422);
    expect(await json(empty)).toMatchObject({ code: "validation_failed", errors: { html: ["A template needs html, text or both"] } });

    const other = await createAccount();
    for (const [method, path] of [
      ["GET", `/api/v1/templates/${first.id}`],
      ["PATCH", `/api/v1/templates/${first.id}`],
      ["DELETE", `/api/v1/templates/${first.id}`],
    ] as const) {
      const response = await call(path, { key: other.api_key, method, ...(method === "PATCH" ? { body: { name: "x" } } : {}) });
      expect(response.status).toBe(404);
      expect(await json(response)).toMatchObject({ code: "not_found" });
    }

    const deleted = await call(`/api/v1/templates/${first.id}`, { key, method: "DELETE" });
    expect(await json(deleted)).toEqual({ id: first.id, deleted: true });
    expect((await call(`/api/v1/templates/${first.id}`, { key })).status).toBe(404);
    expect((await call(`/api/v1/templates/${first.id}`, { key, method: "DELETE" })).status).toBe(404);
  });
});
