// The Mailforge SDK: a typed client for every path of the API (types generated from the OpenAPI document by
// openapi-typescript, requests made by openapi-fetch) and the webhook signature check.
//
//   const mf = createClient({ baseUrl: "https://mail.example.com", apiKey: process.env.MAILFORGE_API_KEY });
//   const { data, error } = await mf.POST("/api/v1/send", { body: { from, to: [to], subject, text } });
//   if (error) throw new Error(`${error.code}: ${error.message}`);

import createFetchClient, { type Client, type ClientOptions, type FetchResponse, type MaybeOptionalInit } from "openapi-fetch";
import type { paths } from "./schema.js";

export type { components, operations, paths } from "./schema.js";
export { verifyWebhook, WEBHOOK_TOLERANCE_SECONDS, type VerifyWebhookResult, type WebhookHeaders } from "./verify-webhook.js";

type Method = "get" | "put" | "post" | "patch" | "delete";
type PathsWith<M extends Method> = { [P in keyof paths]: paths[P] extends Record<M, object> ? P : never }[keyof paths];
type Operation<P extends keyof paths, M extends Method> = paths[P] extends Record<M, infer O extends Record<string | number, unknown>> ? O : never;
type Init<P extends keyof paths, M extends Method> = MaybeOptionalInit<paths[P], M>;
type InitArgs<I> = undefined extends I ? [init?: Exclude<I, undefined>] : [init: I];

// openapi-fetch infers the request options from the argument, which turns off TypeScript's excess-property check: a
// misspelt optional field (`subjetc`) would compile and be dropped by the API. Here the options' type comes from the
// path alone, so the object literal is checked against it.
type StrictMethod<M extends Method> = <P extends PathsWith<M>>(
  url: P,
  ...init: InitArgs<Init<P, M>>
) => Promise<FetchResponse<Operation<P, M>, Init<P, M>, "application/json">>;

export type MailforgeClient = Omit<Client<paths>, "GET" | "PUT" | "POST" | "PATCH" | "DELETE"> & {
  GET: StrictMethod<"get">;
  PUT: StrictMethod<"put">;
  POST: StrictMethod<"post">;
  PATCH: StrictMethod<"patch">;
  DELETE: StrictMethod<"delete">;
};

export type CreateClientOptions = Omit<ClientOptions, "baseUrl"> & {
  /** The Worker's URL (its root, e.g. `https://mail.example.com`; paths start with `/api/v1/`). */
  baseUrl: string;
  /** A `sk_live_…` or `sk_test_…` key. */
  apiKey: string;
};

/**
 * A client whose methods (`GET`, `POST`, `PATCH`, `DELETE`, …) take the API's paths and return
 * `{ data, error, response }`: `data` is the typed answer of a 2xx, `error` the API's `{ message, code, errors? }`.
 */
export function createClient({ baseUrl, apiKey, ...options }: CreateClientOptions): MailforgeClient {
  const client = createFetchClient<paths>({ ...options, baseUrl: baseUrl.replace(/\/+$/, "") });
  client.use({
    onRequest({ request }) {
      request.headers.set("Authorization", `Bearer ${apiKey}`);
      return request;
    },
  });
  // The same functions: only their declared parameter types are narrower.
  return client as MailforgeClient;
}
