import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { setTimeout as sleep } from "node:timers/promises";
import type { TestProject } from "vitest/node";
import { z } from "zod";

declare module "vitest" {
  export interface ProvidedContext {
    aiProviderUrl: string;
  }
}

// An edge fake of an OpenAI-compatible provider (as the mail sink is of an SMTP smarthost): it speaks the
// chat-completions protocol over HTTP on loopback, so the Worker's real adapter, retries and validation run
// against it. Like a strict server it wants a Bearer key and `response_format: json_schema`.
//
//   POST /v1/chat/completions   answered by the next scripted step of the request's case, else like an obedient
//                               model: exactly the variations and follow-ups the prompt asks for, text left empty
//   POST /_script {case, steps} queue answers for the requests whose prompt contains `[case:<case>]`
//   GET  /_requests?case=       the chat requests received for that case (parsed bodies, headers), oldest first
//
// A step: {status?, headers?, delay_ms?} and either `content` (the assistant message of a 200 completion) or `body`
// (the raw response body). Tests share one server, so each uses its own case id.

export const FAKE_AI_KEY = "test-ai-key";

const stepSchema = z.object({
  status: z.number().int().min(100).max(599).default(200),
  headers: z.record(z.string(), z.string()).default({}),
  delay_ms: z.number().int().min(0).max(60_000).default(0),
  content: z.string().optional(),
  body: z.string().optional(),
});
type Step = z.infer<typeof stepSchema>;
const scriptSchema = z.object({ case: z.string().min(1), steps: z.array(stepSchema).min(1) });

const chatRequestSchema = z.object({
  model: z.string().min(1),
  messages: z.array(z.object({ role: z.enum(["system", "user", "assistant"]), content: z.string() })).min(1),
  response_format: z.object({
    type: z.literal("json_schema"),
    json_schema: z.object({ name: z.string(), schema: z.record(z.string(), z.unknown()) }),
  }),
});
type ChatRequest = z.infer<typeof chatRequestSchema>;

type Received = { case: string | null; headers: Record<string, string>; body: ChatRequest };

const USAGE = { prompt_tokens: 120, completion_tokens: 80, total_tokens: 200 };

function sendJson(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  const payload = JSON.stringify(body);
  res.writeHead(status, { "Content-Type": "application/json", "Content-Length": Buffer.byteLength(payload), ...headers });
  res.end(payload);
}

async function readBody(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of req as AsyncIterable<Buffer>) chunks.push(chunk);
  return Buffer.concat(chunks).toString("utf8");
}

const completion = (content: string) => ({
  id: `chatcmpl-${Math.random().toString(36).slice(2)}`,
  object: "chat.completion",
  created: Math.floor(Date.now() / 1000),
  model: "fake",
  choices: [{ index: 0, message: { role: "assistant", content }, finish_reason: "stop" }],
  usage: USAGE,
});

/** What an obedient model writes for the brief: the counts the prompt asks for, placeholders as instructed. */
function obedientAnswer(request: ChatRequest): string {
  const brief = request.messages.find((message) => message.role === "user")?.content ?? "";
  const counts = /exactly (\d+) variation\(s\) and exactly (\d+) follow-up\(s\)/.exec(brief);
  const email = (label: string) => ({
    subject: `${label}: news for {{first_name|there}}`,
    preheader: `${label} preheader`,
    html: `<h1>Hello {{first_name|there}}</h1><p>${label} body.</p><p><a href="https://example.com/offer">See the offer</a></p><p><a href="{{unsubscribe_url}}">Unsubscribe</a></p>`,
    text: "",
  });
  return JSON.stringify({
    variations: Array.from({ length: Number(counts?.[1] ?? 1) }, (_, i) => email(`Variation ${i + 1}`)),
    followups: Array.from({ length: Number(counts?.[2] ?? 0) }, (_, i) => ({ ...email(`Follow-up ${i + 1}`), delay_days: 3 * (i + 1) })),
  });
}

export function createFakeAiProvider() {
  const scripts = new Map<string, Step[]>();
  const received: Received[] = [];
  const shutdown = new AbortController();

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? "/", "http://localhost");
    if (url.pathname === "/_script" && req.method === "POST") {
      const script = scriptSchema.parse(JSON.parse(await readBody(req)));
      scripts.set(script.case, [...(scripts.get(script.case) ?? []), ...script.steps]);
      return sendJson(res, 201, { case: script.case, queued: scripts.get(script.case)!.length });
    }
    if (url.pathname === "/_requests" && req.method === "GET") {
      const wanted = url.searchParams.get("case");
      return sendJson(res, 200, { data: received.filter((r) => r.case === wanted) });
    }
    if (url.pathname !== "/v1/chat/completions" || req.method !== "POST") return sendJson(res, 404, { error: { message: "not found" } });

    if (req.headers.authorization !== `Bearer ${FAKE_AI_KEY}`) return sendJson(res, 401, { error: { message: "Incorrect API key provided" } });
    const parsed = chatRequestSchema.safeParse(JSON.parse(await readBody(req)));
    if (!parsed.success) return sendJson(res, 400, { error: { message: `invalid request: ${parsed.error.message}` } });
    const caseId = /\[case:([\w-]+)\]/.exec(parsed.data.messages.map((m) => m.content).join("\n"))?.[1] ?? null;
    const headers: Record<string, string> = {};
    for (const [name, value] of Object.entries(req.headers)) if (typeof value === "string") headers[name] = value;
    received.push({ case: caseId, headers, body: parsed.data });

    const step = caseId ? scripts.get(caseId)?.shift() : undefined;
    if (step?.delay_ms) {
      try {
        await sleep(step.delay_ms, undefined, { signal: shutdown.signal });
      } catch {
        return; // closing
      }
    }
    if (!step) return sendJson(res, 200, completion(obedientAnswer(parsed.data)));
    if (step.body !== undefined) {
      res.writeHead(step.status, { "Content-Type": "application/json", ...step.headers });
      res.end(step.body);
      return;
    }
    return sendJson(res, step.status, completion(step.content ?? obedientAnswer(parsed.data)), step.headers);
  }

  const server = createServer((req, res) => {
    handle(req, res).catch((error: unknown) => {
      if (!res.headersSent) sendJson(res, 500, { error: { message: (error as Error).message } });
      else res.destroy();
    });
  });

  return {
    listen(port = 0, host = "127.0.0.1"): Promise<number> {
      return new Promise((resolve, reject) => {
        server.once("error", reject);
        server.listen(port, host, () => {
          server.off("error", reject);
          resolve((server.address() as AddressInfo).port);
        });
      });
    },
    close(): Promise<void> {
      shutdown.abort();
      return new Promise((resolve, reject) => {
        if (!server.listening) return resolve();
        server.close((error) => (error ? reject(error) : resolve()));
        server.closeAllConnections();
      });
    },
  };
}

export default async function setup(project: TestProject) {
  const provider = createFakeAiProvider();
  const port = await provider.listen(0, "127.0.0.1");
  project.provide("aiProviderUrl", `http://127.0.0.1:${port}`);
  return () => provider.close();
}
