import { env, exports } from "cloudflare:workers";
import { beforeAll, describe, expect, it } from "vitest";
import { ADMIN_TOKEN, call, createAccount, createKey, json } from "../support/helpers";
import { verifiedDomain } from "../support/sending";
import { errorStatus, type ErrorCode } from "../../src/errors";

/*
 * A fuzzer driven by the OpenAPI document the Worker serves. For every operation it builds a plausible request from
 * the schema and then breaks it: wrong types, huge and odd unicode strings, nulls, missing and extra fields, bodies
 * that do not parse or come with the wrong content type, garbage path parameters and another resource's id, with
 * and without a key. Every answer must be below 500, carry a request id, and every 4xx must be `{message, code,
 * errors?}` with `errors` on every 422 and nowhere else.
 *
 * Deterministic: each request is generated from (SEED, its index). A failure prints both and the whole request; change
 * SEED to explore other inputs.
 */
const SEED = 1835100524;
// `npm test` sends 5 a operation (about 450 requests); `npm run test:full` and CI send the full 70 (about 6,000).
const REQUESTS_PER_OPERATION = Number(env.TEST_FUZZ_REQUESTS_PER_OPERATION);
const CONCURRENCY = 8;

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
type Schema = {
  $ref?: string;
  type?: string | string[];
  properties?: Record<string, Schema>;
  required?: string[];
  items?: Schema;
  additionalProperties?: boolean | Schema;
  anyOf?: Schema[];
  oneOf?: Schema[];
  allOf?: Schema[];
  enum?: Json[];
  const?: Json;
  example?: Json;
  default?: Json;
  format?: string;
  minimum?: number;
  maximum?: number;
  minLength?: number;
};
type Parameter = { name: string; in: "path" | "query" | "header"; required?: boolean; schema?: Schema };
type Operation = {
  method: string;
  path: string;
  parameters: Parameter[];
  body?: { contentTypes: string[]; schema?: Schema };
  security: "apiKey" | "verifyApiKey" | "adminToken" | "postmarkServerToken";
};
type OpenApiDocument = {
  paths: Record<
    string,
    Record<
      string,
      { parameters?: Parameter[]; requestBody?: { content: Record<string, { schema?: Schema }> }; security?: Record<string, string[]>[] }
    >
  >;
  components?: { schemas?: Record<string, Schema> };
};

// mulberry32: small, fast and good enough to pick test inputs.
function prng(seed: number) {
  let state = seed >>> 0;
  const next = () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const int = (n: number) => Math.floor(next() * n);
  return { next, int, pick: <T>(items: readonly T[]): T => items[int(items.length)]!, chance: (p: number) => next() < p };
}
type Rng = ReturnType<typeof prng>;

const oddStrings = [
  "",
  " ",
  "\u0000",
  "a\u0000b",
  "\uD800",
  "x\uDFFFy",
  "\uDBFF\uDBFF",
  "\u202Egnp.exe",
  "\u200F\u200E\u2066abc\u2069",
  "\uFEFF",
  "\u00A0\u2028\u2029",
  "e\u0301\u0301\u0301\u0301",
  "😀👩‍👩‍👧‍👦",
  "𝔘𝔫𝔦𝔠𝔬𝔡𝔢",
  "Ünïcödé@exämple.com",
  "ann@xn--exmple-cua.com",
  "Ann <ann@example.org>",
  '"quoted, name" <q@example.org>',
  "a\r\nBcc: victim@example.net",
  "../../etc/passwd",
  "%00%2e%2e%2f",
  "<script>alert(1)</script>",
  "' OR 1=1 --",
  "Robert'); DROP TABLE contacts;--",
  "${7*7}{{7*7}}",
  "{{first_name}}{{#each}}{{",
  "null",
  "true",
  "-1",
  "1e309",
  "NaN",
  "__proto__",
  "constructor",
  "http://127.0.0.1:1/latest/meta-data/",
  "https://[::1]:0/",
  "data:text/csv;base64,!!!",
  "data:text/csv;base64,ZW1haWwKYUBiLmMK",
  "2026-13-45T25:61:61Z",
  "sk_live_00000000000000000000000000000000",
];
const hugeNumbers = [0, -1, -0.5, 1.5, 2 ** 31, 2 ** 53 + 2, -(2 ** 63), 1e308, -1e308, 5e-324, 1e21];

function randomUnicode(rng: Rng, length: number): string {
  let out = "";
  for (let i = 0; i < length; i++) {
    const roll = rng.int(10);
    out +=
      roll < 4
        ? String.fromCharCode(0x20 + rng.int(95))
        : roll < 6
          ? String.fromCharCode(rng.int(0x20))
          : roll < 8
            ? String.fromCharCode(0xd800 + rng.int(0x800)) // lone surrogates
            : String.fromCodePoint(0x80 + rng.int(0x10ff7f - 0x80));
  }
  return out;
}

/** `huge`: may return strings of tens of thousands of characters; only where one such value goes in a body. */
function junkString(rng: Rng, ids: string[], huge = false): string {
  const roll = rng.int(10);
  if (roll < 4) return rng.pick(oddStrings);
  if (roll < 6) return randomUnicode(rng, 1 + rng.int(40));
  if (roll < 7) return rng.pick(ids);
  if (roll < 8)
    return rng.pick(["a", "\u00e9", "\u{1F600}", "\u0000", "\uD800"]).repeat(rng.pick(huge ? [256, 1_000, 70_000, 1_100_000] : [256, 1_000]));
  if (roll < 9) return "x".repeat(rng.pick([64, 65, 200, 201, 255, 256, 320, 321, 998, 999, 5_001]));
  return `${randomUnicode(rng, 3)}@${randomUnicode(rng, 5)}`;
}

function junkValue(rng: Rng, ids: string[], depth = 0): Json {
  switch (rng.int(depth > 1 ? 6 : 9)) {
    case 0:
    case 1:
      return junkString(rng, ids, depth === 0);
    case 2:
      return rng.pick(hugeNumbers);
    case 3:
      return null;
    case 4:
      return rng.chance(0.5);
    case 5:
      return rng.pick<Json>([[], {}, "", 0]);
    case 6:
      return depth > 0
        ? [junkValue(rng, ids, depth + 1)]
        : Array.from({ length: rng.pick([1, 3, 60, 1_001]) }, () => rng.pick<Json>([1, "a", null, {}]));
    case 7:
      return Object.fromEntries(Array.from({ length: 1 + rng.int(4) }, () => [junkString(rng, ids).slice(0, 80), junkValue(rng, ids, depth + 1)]));
    default: {
      // Deep nesting: parsers and validators that recurse should not fall over.
      let value: Json = 1;
      for (let i = 0; i < rng.pick([50, 500]); i++) value = rng.chance(0.5) ? [value] : { a: value };
      return value;
    }
  }
}

class Fuzzer {
  constructor(
    private readonly document: OpenApiDocument,
    private readonly ids: string[],
    /** Known-valid bodies by operation, so a single mutation lands past validation more often than the schema alone gets there. */
    private readonly corpus: Record<string, Json[]>,
  ) {}

  body(rng: Rng, operation: string, schema: Schema | undefined): Json {
    const valid = this.corpus[operation];
    return valid && rng.chance(0.6) ? structuredClone(rng.pick(valid)) : this.plausible(rng, schema);
  }

  resolve(schema: Schema | undefined): Schema {
    let current = schema ?? {};
    for (let hops = 0; current.$ref && hops < 20; hops++) {
      current = this.document.components?.schemas?.[current.$ref.replace("#/components/schemas/", "")] ?? {};
    }
    return current;
  }

  /** A value the schema probably accepts; the mutations start from it so they reach past the first check. */
  plausible(rng: Rng, raw: Schema | undefined, depth = 0): Json {
    const schema = this.resolve(raw);
    // Loopback only: a URL that is accepted may be called (webhook tests), so it points at the local receiver.
    if (schema.format === "uri") return env.TEST_WEBHOOK_RECEIVER_URL;
    if (schema.example !== undefined && rng.chance(0.5)) return schema.example;
    if (schema.const !== undefined) return schema.const;
    if (schema.enum) return rng.pick(schema.enum);
    if (schema.default !== undefined && rng.chance(0.5)) return schema.default;
    const options = schema.anyOf ?? schema.oneOf;
    if (options) return this.plausible(rng, rng.pick(options), depth);
    if (schema.allOf) return Object.assign({}, ...schema.allOf.map((part) => this.plausible(rng, part, depth)));
    const type = Array.isArray(schema.type) ? rng.pick(schema.type.filter((t) => t !== "null")) : schema.type;
    switch (type ?? (schema.properties ? "object" : undefined)) {
      case "object": {
        if (depth > 4) return {};
        const out: Record<string, Json> = {};
        for (const [name, property] of Object.entries(schema.properties ?? {})) {
          if (schema.required?.includes(name) || rng.chance(0.5)) out[name] = this.plausible(rng, property, depth + 1);
        }
        return out;
      }
      case "array":
        return depth > 4 ? [] : Array.from({ length: 1 + rng.int(2) }, () => this.plausible(rng, schema.items, depth + 1));
      case "integer":
      case "number":
        return schema.minimum ?? 1;
      case "boolean":
        return rng.chance(0.5);
      case "string":
        if (schema.format === "email") return "fuzz@example.com";
        if (schema.format === "date-time") return "2026-01-01T00:00:00.000Z";
        return rng.pick(this.ids.concat(["fuzz@example.com", "hello", "Hello {{first_name}}"]));
      default:
        return "x";
    }
  }

  /** One change to a JSON value at a random depth: a wrong type, null, a dropped required field or an extra one. */
  mutate(rng: Rng, value: Json, raw: Schema | undefined, depth = 0): Json {
    const schema = this.resolve(raw);
    const isObject = typeof value === "object" && value !== null && !Array.isArray(value);
    if (isObject && depth < 4 && rng.chance(0.75)) {
      const copy: Record<string, Json> = { ...value };
      const names = [...new Set([...Object.keys(copy), ...Object.keys(schema.properties ?? {})])];
      const roll = rng.int(10);
      if (roll < 2 && (schema.required?.length ?? 0) > 0) {
        delete copy[rng.pick(schema.required!)];
      } else if (roll < 3 || names.length === 0) {
        copy[rng.pick(["extra", "__proto__", "constructor", "id", "account_id", junkString(rng, this.ids).slice(0, 40)])] = junkValue(rng, this.ids);
      } else {
        const name = rng.pick(names);
        copy[name] = name in copy && rng.chance(0.5) ? this.mutate(rng, copy[name]!, schema.properties?.[name], depth + 1) : junkValue(rng, this.ids);
      }
      return copy;
    }
    if (Array.isArray(value) && value.length > 0 && rng.chance(0.6)) {
      const copy = [...value];
      const i = rng.int(copy.length);
      copy[i] = this.mutate(rng, copy[i]!, schema.items, depth + 1);
      return copy;
    }
    return junkValue(rng, this.ids);
  }
}

type Auth = "full" | "test" | "scoped" | "none" | "bogus";
type Keys = { full: string; test: string; scoped: string };
type FuzzRequest = {
  index: number;
  operation: string;
  auth: Auth;
  method: string;
  url: string;
  headers: Record<string, string>;
  body?: string | FormData;
};

const percentGarbage = ["%", "%zz", "%00", "%ED%A0%80", "%C0%AF", "%2F..%2F", "..", "%20", "a%2Fb", "%F0%9F%98%80"];

function pathValue(rng: Rng, ids: string[]): string {
  const roll = rng.int(10);
  if (roll < 4) return encodeURIComponent(rng.pick(ids));
  if (roll < 6) return rng.pick(percentGarbage);
  if (roll < 7) return "x".repeat(rng.pick([65, 2_000, 10_000]));
  // encodeURIComponent refuses lone surrogates; those are covered by %ED%A0%80 above.
  const text = junkString(rng, ids)
    .replace(/[\uD800-\uDFFF]/g, "?")
    .slice(0, 300);
  return text === "" ? rng.pick(percentGarbage) : encodeURIComponent(text);
}

function queryValue(rng: Rng, fuzzer: Fuzzer, schema: Schema | undefined, ids: string[]): string {
  if (rng.chance(0.3)) {
    const plausible = fuzzer.plausible(rng, schema);
    return typeof plausible === "string" ? plausible : JSON.stringify(plausible);
  }
  const junk = junkValue(rng, ids);
  return typeof junk === "string" ? junk : JSON.stringify(junk);
}

function buildRequest(index: number, operation: Operation, fuzzer: Fuzzer, ids: string[], keys: Keys): FuzzRequest {
  const rng = prng(SEED ^ Math.imul(index + 1, 0x9e3779b1));
  const auth: Auth = rng.pick(["full", "full", "full", "full", "full", "full", "full", "test", "scoped", "none", "bogus"] as const);
  const headers: Record<string, string> = {};
  const query = new URLSearchParams();

  // POST /send with a full key uses the test-mode key, so an input that happens to be valid is simulated, not mailed.
  // The compatibility surfaces' sends likewise (docs/migrating.md).
  const sends = operation.path === "/api/v1/send" || (operation.path.startsWith("/compat/") && operation.method === "POST");
  const sendingKey = sends && auth === "full" ? keys.test : undefined;
  const secret =
    auth === "none"
      ? undefined
      : auth === "bogus"
        ? rng.pick(["sk_live_bogus", "Bearer", "sk_test_", "x".repeat(500), ADMIN_TOKEN, `${keys.full}x`])
        : operation.security === "adminToken"
          ? auth === "full"
            ? ADMIN_TOKEN
            : keys[auth]
          : (sendingKey ?? keys[auth]);
  if (secret !== undefined) {
    if (operation.security === "verifyApiKey") query.set("apikey", secret);
    else if (operation.security === "postmarkServerToken") headers["X-Postmark-Server-Token"] = secret;
    else headers.Authorization = rng.chance(0.95) ? `Bearer ${secret}` : `Basic ${secret}`;
  }

  let path = operation.path;
  for (const parameter of operation.parameters) {
    if (parameter.in === "path") {
      path = path.replace(`{${parameter.name}}`, pathValue(rng, ids));
    } else if (parameter.in === "query") {
      if (parameter.required || rng.chance(0.6)) query.append(parameter.name, queryValue(rng, fuzzer, parameter.schema, ids));
      if (rng.chance(0.1)) query.append(parameter.name, queryValue(rng, fuzzer, parameter.schema, ids));
    } else if (parameter.in === "header" && rng.chance(0.5)) {
      headers[parameter.name] = rng.pick(["", "k", "x".repeat(256), "x".repeat(5_000), "\t spaced \t", "idem-1", "k\u0001"]);
    }
  }
  if (rng.chance(0.1))
    query.append(
      junkString(rng, ids)
        .replace(/[\uD800-\uDFFF]/g, "?")
        .slice(0, 50),
      "1",
    );

  let body: string | FormData | undefined;
  if (operation.body) {
    const schema = operation.body.schema;
    const roll = rng.int(20);
    const value = fuzzer.body(rng, `${operation.method} ${operation.path}`, schema);
    if (roll < 12) {
      // Mostly a single change, so the request gets past the other fields' checks to the one under test.
      let mutated = value;
      for (let changes = rng.chance(0.6) ? 1 : 2 + rng.int(3); changes > 0; changes--) mutated = fuzzer.mutate(rng, mutated, schema);
      body = JSON.stringify(mutated);
      headers["Content-Type"] = "application/json";
    } else if (roll < 13) {
      body = JSON.stringify(value);
      headers["Content-Type"] = "application/json";
    } else if (roll < 15) {
      // JSON that does not parse, or parses to something odd (Infinity, deep nesting).
      const text = JSON.stringify(value);
      body = rng.pick([
        text.slice(0, Math.max(1, text.length - 1 - rng.int(5))),
        `${text},`,
        "{",
        "nul",
        "\u0000",
        `\uFEFF${text}`,
        "{'a': 1}",
        `{"a": 1e999999}`,
        "[".repeat(20_000),
      ]);
      headers["Content-Type"] = "application/json";
    } else if (roll < 18) {
      // The body in the wrong dress.
      const text = JSON.stringify(rng.chance(0.5) ? value : junkValue(rng, ids));
      const contentType = rng.pick([
        "text/plain",
        "application/x-www-form-urlencoded",
        "multipart/form-data",
        "multipart/form-data; boundary=zz",
        "application/xml",
        "",
        "application/json; charset=utf-16",
        "application/merge-patch+json",
        "APPLICATION/JSON",
      ]);
      body = contentType.startsWith("application/x-www-form") ? `a=${encodeURIComponent(text)}&a=2&%zz=1` : text;
      if (contentType !== "") headers["Content-Type"] = contentType;
    } else {
      // A real multipart body with odd fields, whether or not the route takes one.
      const form = new FormData();
      const plausible = typeof value === "object" && value !== null && !Array.isArray(value) ? value : {};
      for (const [name, field] of Object.entries(plausible)) {
        if (rng.chance(0.8)) form.append(name, typeof field === "string" ? field : JSON.stringify(field));
      }
      if (rng.chance(0.5))
        form.append(
          "file",
          new File([rng.pick(["email\na@x.com\n", "", "\u0000\u0001", `email\n${"e@x.co\n".repeat(10_000)}`])], "a.csv", { type: "text/csv" }),
        );
      // workerd's FormData refuses to encode a field name ending in a backslash, so the client could not send it.
      if (rng.chance(0.3)) form.append(junkString(rng, ids).slice(0, 30).replace(/\\+$/, ""), junkString(rng, ids));
      body = form;
    }
  }
  const search = query.toString();
  return {
    index,
    operation: `${operation.method} ${operation.path}`,
    auth,
    method: operation.method,
    url: `http://localhost${path}${search ? `?${search}` : ""}`,
    headers,
    body,
  };
}

function describeRequest(request: FuzzRequest): string {
  const body =
    request.body === undefined
      ? "(none)"
      : typeof request.body === "string"
        ? JSON.stringify(request.body.length > 600 ? `${request.body.slice(0, 600)}… (${request.body.length} chars)` : request.body)
        : `multipart ${JSON.stringify([...request.body.entries()].map(([name, value]) => [name, typeof value === "string" ? value.slice(0, 100) : `file ${value.size} bytes`]))}`;
  const url = request.url.length > 400 ? `${request.url.slice(0, 400)}… (${request.url.length} chars)` : request.url;
  return `seed ${SEED} request #${request.index} (${request.operation}, auth ${request.auth}): ${request.method} ${url}\n  headers ${JSON.stringify(request.headers).slice(0, 300)}\n  body ${body}`;
}

/** What is wrong with one answer, or undefined when it is as the API promises. */
/** The compatibility surfaces answer in their peer's error shape (docs/migrating.md), which their clients read. */
const peerShapes: Record<string, (error: Record<string, unknown>, status: number) => string[]> = {
  "/compat/resend/": (error, status) => [
    ...(error.statusCode !== status ? [`statusCode ${String(error.statusCode)} on status ${status}`] : []),
    ...(typeof error.name !== "string" || typeof error.message !== "string" ? ["not {statusCode, name, message}"] : []),
  ],
  "/compat/postmark/": (error, status) =>
    typeof error.ErrorCode !== "number" || typeof error.Message !== "string" || ![401, 404, 422, 429].includes(status)
      ? [`not {ErrorCode, Message} with 401, 404, 422 or 429`]
      : [],
  "/compat/sendgrid/": (error) =>
    Array.isArray(error.errors) &&
    error.errors.length > 0 &&
    error.errors.every((entry) => typeof (entry as { message?: unknown }).message === "string")
      ? []
      : ["not {errors: [{message, field, help}]}"],
};

async function checkAnswer(response: Response, path = ""): Promise<string | undefined> {
  const text = await response.text();
  if (response.status >= 500) return `status ${response.status}: ${text.slice(0, 300)}`;
  if (!response.headers.get("X-Request-Id")) return `status ${response.status} without X-Request-Id`;
  if (response.status < 400) return undefined;
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    return `status ${response.status} with a body that is not JSON: ${text.slice(0, 200)}`;
  }
  const problems: string[] = [];
  if (typeof body !== "object" || body === null || Array.isArray(body))
    return `status ${response.status} with a body that is not an object: ${text.slice(0, 200)}`;
  const error = body as Record<string, unknown>;
  const peer = Object.entries(peerShapes).find(([prefix]) => path.startsWith(prefix))?.[1];
  if (peer) {
    const wrong = peer(error, response.status);
    return wrong.length > 0 ? `status ${response.status} ${wrong.join("; ")}: ${text.slice(0, 300)}` : undefined;
  }
  if (typeof error.message !== "string" || error.message === "") problems.push("no message");
  if (typeof error.code !== "string" || !(error.code in errorStatus)) problems.push("a code that is not one of the documented error codes");
  // One code, one status (src/errors.ts): a 400 or a 422 without validation_failed means a framework error leaked.
  else if (errorStatus[error.code as ErrorCode] !== response.status) problems.push(`code ${error.code} on status ${response.status}`);
  const extra = Object.keys(error).filter((key) => !["message", "code", "errors"].includes(key));
  if (extra.length > 0) problems.push(`unexpected keys ${extra.join(", ")}`);
  if (response.status === 422 && error.errors === undefined) problems.push("a 422 without errors");
  if (error.errors !== undefined) {
    if (response.status !== 422) problems.push("errors on a status other than 422");
    const fields = error.errors;
    const wellFormed =
      typeof fields === "object" &&
      fields !== null &&
      !Array.isArray(fields) &&
      Object.values(fields).every((messages) => Array.isArray(messages) && messages.length > 0 && messages.every((m) => typeof m === "string"));
    if (!wellFormed) problems.push("errors is not a record of string arrays");
  }
  return problems.length > 0 ? `status ${response.status} ${problems.join("; ")}: ${text.slice(0, 300)}` : undefined;
}

function operationsOf(document: OpenApiDocument): Operation[] {
  const operations: Operation[] = [];
  for (const [path, item] of Object.entries(document.paths)) {
    for (const [method, operation] of Object.entries(item)) {
      const content = operation.requestBody?.content;
      const security = Object.keys(operation.security?.[0] ?? {})[0];
      operations.push({
        method: method.toUpperCase(),
        path,
        parameters: operation.parameters ?? [],
        body: content
          ? { contentTypes: Object.keys(content), schema: (content["application/json"] ?? Object.values(content)[0])?.schema }
          : undefined,
        security: security === "adminToken" || security === "verifyApiKey" || security === "postmarkServerToken" ? security : "apiKey",
      });
    }
  }
  return operations;
}

describe("OpenAPI-driven fuzzing", () => {
  let document: OpenApiDocument;
  let keys: Keys;
  // Ids of real resources of every type, created for this run, so a path gets the right type's id, another type's,
  // or garbage. Nothing here is the fuzzing account itself or one of its keys, so deleting them is harmless.
  const ids: string[] = [];
  let corpus: Record<string, Json[]> = {};

  beforeAll(async () => {
    const response = await call("/api/v1/openapi.json");
    expect(response.status).toBe(200);
    document = await json<OpenApiDocument>(response);

    const account = await createAccount({
      send_credits: 1_000,
      verify_credits: 1_000,
      rate_limit_per_minute: 1_000_000,
      features: ["email_api", "smtp_relay", "campaigns"],
    });
    const test = await createKey(account.api_key, { name: "fuzz test mode", mode: "test" });
    const scoped = await createKey(account.api_key, { name: "fuzz verify only", scopes: ["verify"] });
    keys = { full: account.api_key, test: test.key, scoped: scoped.key };

    const victim = await createAccount({ name: "fuzz victim" });
    const victimKey = await createKey(account.api_key, { name: "fuzz victim key" });
    const created = async (path: string, body: unknown) => {
      const answer = await call(path, { key: account.api_key, body });
      return answer.status < 300 ? ((await json<{ id: string }>(answer)).id as string) : undefined;
    };
    const made = await Promise.all([
      created("/api/v1/contacts", { email: "fuzz-contact@example.com" }),
      created("/api/v1/lists", { name: "fuzz list" }),
      created("/api/v1/templates", { name: "fuzz", subject: "Hi", text: "Hello" }),
      created("/api/v1/webhooks", { url: env.TEST_WEBHOOK_RECEIVER_URL, events: ["relay.sent"] }),
      created("/api/v1/domains", { name: "fuzz-domain.example" }),
      created("/api/v1/campaigns", { name: "fuzz campaign", subject: "Hi", text: "Hello" }),
    ]);
    // A verified domain lets a plausible POST /send reach the acceptance (simulated: it goes with the test-mode key).
    const domain = await verifiedDomain(account.api_key);
    const from = `Fuzz <hello@${domain.name}>`;
    const sent = await call("/api/v1/send", { key: test.key, body: { from, to: ["delivered@example.com"], subject: "fuzz", text: "x" } });
    expect(sent.status).toBe(202);
    const credential = await created("/api/v1/smtp-credentials", { name: "fuzz" });
    // A sender needs the verified domain, and a segment on a list needs the list.
    const sender = await created("/api/v1/senders", { name: "Fuzz", email: `news@${domain.name}` });
    const segment = await created("/api/v1/segments", {
      name: "fuzz",
      match: "all",
      conditions: [{ field: "list", op: "in", value: made[1] ?? "lst_x" }],
    });
    ids.push(
      victim.id,
      victimKey.id,
      from,
      (await json<{ id: string }>(sent)).id,
      ...[...made, credential, sender, segment].filter((id): id is string => id !== undefined),
    );
    const csv = "data:text/csv;base64,ZW1haWwsZmlyc3RfbmFtZQphQGV4YW1wbGUuY29tLEFubgo="; // "email,first_name\na@example.com,Ann\n"
    corpus = {
      "POST /api/v1/send": [
        {
          from,
          to: ["Ann <ann@example.org>", "bob@example.org"],
          subject: "Hi {{first_name}}",
          html: "<p>Hi</p>",
          text: "Hi",
          variables: { first_name: "Ann" },
          tags: ["t"],
          metadata: { k: "v" },
        },
        {
          from,
          to: "ann@example.org",
          reply_to: "r@example.org",
          subject: "x",
          text: "x",
          attachments: [{ filename: "a.txt", content: "aGk=", content_type: "text/plain" }],
        },
        { from, to: ["ann@example.org"], template_id: made[2] ?? "tpl_x", variables: { first_name: "Ann" } },
      ],
      "POST /api/v1/send/batch": [
        [
          { from, to: "ann@example.org", subject: "x", text: "x" },
          { from, to: ["bob@example.org"], subject: "y", html: "<p>y</p>", scheduled_at: new Date(Date.now() + 3_600_000).toISOString() },
        ],
      ],
      "PATCH /api/v1/messages/{id}": [{ scheduled_at: new Date(Date.now() + 3_600_000).toISOString() }],
      "POST /api/v1/contacts": [
        { email: "c@example.com", first_name: "C", custom_fields: { plan: "pro", seats: 3 }, lists: made[1] ? [made[1]] : [] },
      ],
      "PATCH /api/v1/contacts/{id}": [
        { email: "fuzz-contact@example.com", first_name: "D", custom_fields: { plan: null } },
        { status: "unsubscribed" },
      ],
      "POST /api/v1/contacts/import": [
        { file: csv },
        { file: csv, mapping: { email: "email", first_name: "first_name" }, list_id: made[1] ?? "lst_x" },
      ],
      "POST /api/v1/lists/{id}/contacts": [{ emails: ["a@example.com"] }, { contact_ids: made[0] ? [made[0]] : [] }],
      "POST /api/v1/webhooks": [{ url: env.TEST_WEBHOOK_RECEIVER_URL, events: ["*"] }],
      "POST /api/v1/webhooks/{id}/test": [{ type: "relay.sent" }, {}],
      "POST /api/v1/templates": [{ name: "t", subject: "Hi {{name|friend}}", html: "<p>{{name}}</p>" }],
      "POST /api/v1/verify": [{ email: "jane@example.com" }, { emails: ["a@example.com", "b@example.org"] }],
      "POST /api/batch/upload": [{ file: csv }],
      "POST /api/v1/suppressions": [{ email: "s@example.com", reason: "manual" }],
      "POST /api/v1/campaigns": [
        { name: "c", subject: "Hi {{first_name|there}}", html: "<p>Hi</p>", lists: made[1] ? [made[1]] : [], variables: { a: "b" }, tags: ["t"] },
      ],
      "PATCH /api/v1/campaigns/{id}": [{ name: "renamed", exclude_lists: made[1] ? [made[1]] : [] }],
      "POST /api/v1/campaigns/{id}/send": [{}, { send_at: new Date(Date.now() + 3_600_000).toISOString() }],
      "POST /api/v1/senders": [{ name: "News", email: `news@${domain.name}`, reply_to: "r@example.org" }],
      "PATCH /api/v1/senders/{id}": [{ name: "Renamed", email: `hello@${domain.name}` }, { reply_to: null }],
      "POST /api/v1/segments": [
        {
          name: "s",
          match: "any",
          conditions: [
            { field: "custom_fields.seats", op: "gt", value: 3 },
            { field: "list", op: "not_in", value: [made[1] ?? "lst_x"] },
            { field: "created_at", op: "within_days", value: 30 },
            { field: "email", op: "ends_with", value: "@example.com" },
          ],
        },
      ],
      "PATCH /api/v1/segments/{id}": [{ match: "all", conditions: [{ field: "first_name", op: "in", value: ["Ann", "Bob"] }] }, { name: "renamed" }],
      "POST /admin/v1/accounts": [{ name: "Fuzz", send_credits: 1, features: ["email_api"] }],
      "POST /admin/v1/accounts/{id}/credits": [{ send: 1, note: "fuzz" }],
    };
    ids.push("msg_00000000000000000000", "imp_0000", "vj_0000", "smtp_0000", "con_", "0", "-1", "fuzz@example.com");
  });

  it("answers broken requests to every operation without a 5xx, each with a request id and the error shape", async () => {
    const fuzzer = new Fuzzer(document, ids, corpus);
    const operations = operationsOf(document);
    expect(operations.length).toBeGreaterThan(40);
    const total = operations.length * REQUESTS_PER_OPERATION;
    const failures: string[] = [];
    const statuses = new Map<number, number>();
    let next = 0;
    const worker = async () => {
      while (next < total) {
        // Built when sent, not all up front: together they would not fit in the isolate's memory.
        const index = next++;
        const request = buildRequest(index, operations[Math.floor(index / REQUESTS_PER_OPERATION)]!, fuzzer, ids, keys);
        let problem: string | undefined;
        try {
          const response = await exports.default.fetch(
            new Request(request.url, { method: request.method, headers: request.headers, body: request.body }),
          );
          statuses.set(response.status, (statuses.get(response.status) ?? 0) + 1);
          problem = await checkAnswer(response, new URL(request.url).pathname);
        } catch (error) {
          problem = `threw ${String(error)}`;
        }
        if (problem) failures.push(`${describeRequest(request)}\n  → ${problem}`);
      }
    };
    await Promise.all(Array.from({ length: CONCURRENCY }, worker));

    expect(total).toBeGreaterThanOrEqual(operations.length * REQUESTS_PER_OPERATION);
    expect(failures.length, `${failures.length} of ${total} answers broke the contract:\n${failures.slice(0, 15).join("\n")}`).toBe(0);
    // The run reached past the key checks into validation and real answers, not only 401s.
    expect(statuses.get(422) ?? 0).toBeGreaterThan(total / 4);
    expect([...statuses.keys()].some((status) => status < 300)).toBe(true);
    // A hang guard, not a speed check: the full run's ~6,000 requests take about two minutes beside other test files.
  }, 240_000);
});

// Answers the fuzzer found wrong, replayed exactly so they stay fixed whatever the seed explores.
describe("cases found by the fuzzer", () => {
  it("a PATCH moving a contact onto another contact's address is a 409 without field errors (errors belong to 422s)", async () => {
    const account = await createAccount();
    const contact = async (email: string) =>
      (await json<{ id: string }>(await call("/api/v1/contacts", { key: account.api_key, body: { email } }))).id;
    await contact("taken@example.com");
    const mover = await contact("mover@example.com");
    const response = await call(`/api/v1/contacts/${mover}`, { key: account.api_key, method: "PATCH", body: { email: "Taken@Example.com" } });
    expect(response.status).toBe(409);
    expect(await checkAnswer(response)).toBeUndefined();
  });

  it("a multipart body that does not parse is a 422 validation_failed, not a framework 400", async () => {
    const account = await createAccount();
    const response = await call("/api/v1/contacts/import", {
      key: account.api_key,
      headers: { "Content-Type": "multipart/form-data; boundary=zz" },
      body: '{"file":"x"}',
    });
    expect(response.status).toBe(422);
    expect(await checkAnswer(response)).toBeUndefined();
  });
});
