import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { setTimeout as sleep } from "node:timers/promises";
import { z } from "zod";

// A programmable webhook receiver for tests and benchmarks: it records every request it gets (headers, raw body,
// arrival time) and answers according to rules, so retries, timeouts and slow endpoints can be produced on demand.
//
//   POST   /_rules      {path?, status, delay_ms?, times?, body?}  add a rule (first match wins, in order added)
//   GET    /_rules      the rules, with what is left of `times`
//   DELETE /_rules      remove all rules
//   GET    /_requests   recorded requests (?path= filters on the exact path), oldest first
//   DELETE /_requests   forget them (?path= only those)
//   any other request   recorded, then answered by the first matching rule, or 200 {"ok":true}
//
// Tests share one receiver, so each test uses its own path (e.g. /hooks/<random>) and matches rules on it.

const MAX_BODY_BYTES = 1024 * 1024;

const ruleSchema = z.object({
  /** Exact request path the rule applies to; omitted: every path. */
  path: z.string().startsWith("/").optional(),
  status: z.number().int().min(100).max(599),
  /** Wait this long before answering (a slow endpoint). */
  delay_ms: z.number().int().min(0).max(120_000).default(0),
  /** Answer this many matching requests, then stop matching; omitted: until the rules are deleted. */
  times: z.number().int().positive().optional(),
  body: z
    .string()
    .max(64 * 1024)
    .default(""),
});
type RuleInput = z.infer<typeof ruleSchema>;
type Rule = RuleInput & { id: number; remaining: number };

export interface ReceivedRequest {
  id: number;
  method: string;
  path: string;
  /** lower-case names, as Node delivers them */
  headers: Record<string, string>;
  /** the body exactly as received, decoded as UTF-8 */
  body: string;
  /** when the request was complete, ISO 8601 and epoch milliseconds */
  received_at: string;
  received_at_ms: number;
  /** the status this receiver answered with */
  answered_status: number;
}

export interface WebhookReceiver {
  listen(port?: number, host?: string): Promise<number>;
  close(): Promise<void>;
  requests(path?: string): ReceivedRequest[];
}

function sendJson(res: ServerResponse, status: number, body: unknown): void {
  const payload = JSON.stringify(body);
  res.writeHead(status, { "Content-Type": "application/json", "Content-Length": Buffer.byteLength(payload) });
  res.end(payload);
}

async function readBody(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > MAX_BODY_BYTES) throw new Error("request body too large");
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString("utf8");
}

export function createWebhookReceiver(): WebhookReceiver {
  let received: ReceivedRequest[] = [];
  let rules: Rule[] = [];
  let nextRequestId = 1;
  let nextRuleId = 1;
  const shutdown = new AbortController();

  function takeRule(path: string): Rule | undefined {
    const rule = rules.find((r) => (r.path === undefined || r.path === path) && r.remaining > 0);
    if (rule) rule.remaining -= 1;
    return rule;
  }

  const describe = (rule: Rule) => ({ ...rule, remaining: Number.isFinite(rule.remaining) ? rule.remaining : null });

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? "/", "http://localhost");
    const method = req.method ?? "GET";
    const pathFilter = url.searchParams.get("path");

    if (url.pathname === "/_rules") {
      if (method === "GET") return sendJson(res, 200, { data: rules.map(describe) });
      if (method === "DELETE") {
        rules = [];
        res.writeHead(204).end();
        return;
      }
      if (method === "POST") {
        let input: unknown;
        try {
          input = JSON.parse(await readBody(req));
        } catch (error) {
          return sendJson(res, 400, { message: `request body is not JSON: ${(error as Error).message}` });
        }
        const parsed = ruleSchema.safeParse(input);
        if (!parsed.success) return sendJson(res, 422, { message: "invalid rule", errors: z.flattenError(parsed.error).fieldErrors });
        const rule: Rule = { ...parsed.data, id: nextRuleId++, remaining: parsed.data.times ?? Number.POSITIVE_INFINITY };
        rules.push(rule);
        return sendJson(res, 201, describe(rule));
      }
      return sendJson(res, 405, { message: "use GET, POST or DELETE" });
    }

    if (url.pathname === "/_requests") {
      if (method === "GET") return sendJson(res, 200, { data: pathFilter ? received.filter((r) => r.path === pathFilter) : received });
      if (method === "DELETE") {
        received = pathFilter ? received.filter((r) => r.path !== pathFilter) : [];
        res.writeHead(204).end();
        return;
      }
      return sendJson(res, 405, { message: "use GET or DELETE" });
    }

    const body = await readBody(req);
    const now = Date.now();
    const rule = takeRule(url.pathname);
    const status = rule?.status ?? 200;
    const headers: Record<string, string> = {};
    for (const [name, value] of Object.entries(req.headers)) {
      if (value !== undefined) headers[name] = Array.isArray(value) ? value.join(", ") : value;
    }
    // Recorded on arrival, before any delay, so a test sees when the request came, not when it was answered.
    received.push({
      id: nextRequestId++,
      method,
      path: url.pathname,
      headers,
      body,
      received_at: new Date(now).toISOString(),
      received_at_ms: now,
      answered_status: status,
    });
    if (rule && rule.delay_ms > 0) {
      try {
        await sleep(rule.delay_ms, undefined, { signal: shutdown.signal });
      } catch {
        return; // closing
      }
    }
    const answer = rule ? rule.body : JSON.stringify({ ok: true });
    res.writeHead(status, { "Content-Type": rule ? "text/plain" : "application/json", "Content-Length": Buffer.byteLength(answer) });
    res.end(answer);
  }

  const server = createServer((req, res) => {
    handle(req, res).catch((error: unknown) => {
      if (!res.headersSent) sendJson(res, 500, { message: (error as Error).message });
      else res.destroy();
    });
  });

  return {
    listen(port = 0, host = "127.0.0.1") {
      return new Promise((resolve, reject) => {
        server.once("error", reject);
        server.listen(port, host, () => {
          server.off("error", reject);
          resolve((server.address() as AddressInfo).port);
        });
      });
    },
    close() {
      shutdown.abort();
      return new Promise((resolve, reject) => {
        if (!server.listening) return resolve();
        server.close((error) => (error ? reject(error) : resolve()));
        server.closeAllConnections();
      });
    },
    requests(path) {
      return path ? received.filter((r) => r.path === path) : [...received];
    },
  };
}
