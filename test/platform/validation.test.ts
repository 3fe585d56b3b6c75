import { describe, expect, it } from "vitest";
import { ADMIN_TOKEN, call, createAccount, json } from "../support/helpers";

type ErrorBody = { code: string; message: string; errors?: Record<string, string[]> };

async function fieldsOf(response: Response): Promise<string[]> {
  expect(response.status).toBe(422);
  const body = await json<ErrorBody>(response);
  expect(body.code).toBe("validation_failed");
  return Object.keys(body.errors ?? {}).sort();
}

// Rules across fields used to run only once every field had the right type, so a 422 named half the problems.
describe("one 422 lists every invalid field, cross-field rules included", () => {
  it.each([
    ["POST /api/v1/templates", "/api/v1/templates", { name: 5, subject: "Hi" }, ["html", "name"]],
    ["POST /api/v1/verify", "/api/v1/verify", { emit_event: "yes" }, ["email", "emit_event"]],
    [
      "POST /api/v1/lists/{id}/contacts",
      "/api/v1/lists/{list}/contacts",
      { emails: ["a@example.com"], contact_ids: "con_1" },
      ["body", "contact_ids"],
    ],
  ])("%s", async (_name, path, body, fields) => {
    const account = await createAccount();
    const list = await json<{ id: string }>(await call("/api/v1/lists", { key: account.api_key, body: { name: "l" } }));
    expect(await fieldsOf(await call(path.replace("{list}", list.id), { key: account.api_key, body }))).toEqual(fields);
  });

  it("POST /admin/v1/accounts/{id}/credits", async () => {
    const account = await createAccount();
    const response = await call(`/admin/v1/accounts/${account.id}/credits`, { key: ADMIN_TOKEN, body: { note: 5 } });
    expect(await fieldsOf(response)).toEqual(["body", "note"]);
  });
});

// The keyset decoder returns no position for a cursor no page gave out; the list routes' query schema refuses it.
describe("a list refuses a cursor it did not give out", () => {
  it.each(["/api/v1/contacts", "/api/v1/messages", "/api/v1/webhooks", "/api/v1/suppressions"])("%s", async (path) => {
    const account = await createAccount();
    for (const cursor of ["not-a-cursor!", btoa("2026-01-01T00:00:00.000Z|id|extra")]) {
      const response = await call(`${path}?cursor=${encodeURIComponent(cursor)}`, { key: account.api_key });
      expect(await fieldsOf(response.clone())).toEqual(["query.cursor"]);
      expect((await json<ErrorBody>(response)).errors?.["query.cursor"]).toEqual(["Invalid cursor; pass next_cursor from the previous page"]);
    }
  });
});
