// Any OpenAI-compatible chat-completions API: OpenAI, Workers AI's /v1 endpoint, AI Gateway, Ollama, vLLM,
// llama.cpp's server. The answer is asked for as JSON against a schema (`response_format: json_schema`), which these
// servers enforce or at least follow; the caller validates it regardless.

import { z } from "zod";
import { ProviderError, type AiProvider, type Completion, type CompletionRequest } from "./adapter";

const completionSchema = z.object({
  choices: z
    .array(
      z.object({
        message: z.object({ content: z.string().nullable().optional(), refusal: z.string().nullable().optional() }),
        finish_reason: z.string().nullable().optional(),
      }),
    )
    .min(1),
  usage: z
    .object({ prompt_tokens: z.number().int().min(0), completion_tokens: z.number().int().min(0) })
    .partial()
    .optional(),
});

const MAX_ERROR_EXCERPT = 300;

/** Seconds from a Retry-After header (delta-seconds or an HTTP date), if it has a usable value. */
export function retryAfterSeconds(header: string | null, now = Date.now()): number | undefined {
  if (!header) return undefined;
  const seconds = Number(header);
  if (Number.isFinite(seconds) && seconds >= 0) return Math.ceil(seconds);
  const date = Date.parse(header);
  return Number.isNaN(date) ? undefined : Math.max(0, Math.ceil((date - now) / 1000));
}

/** The provider's own error message (`{error: {message}}` as OpenAI sends it), else the start of the body. */
function errorExcerpt(body: string): string {
  try {
    const parsed: unknown = JSON.parse(body);
    const message = z.object({ error: z.object({ message: z.string() }) }).safeParse(parsed);
    if (message.success) return message.data.error.message.slice(0, MAX_ERROR_EXCERPT);
  } catch {
    // not JSON: the raw start of the body below
  }
  return body.slice(0, MAX_ERROR_EXCERPT);
}

export function openAiCompatibleProvider(options: { baseUrl: string; apiKey?: string; model: string; timeoutMs: number }): AiProvider {
  const url = `${options.baseUrl.replace(/\/+$/, "")}/chat/completions`;
  return {
    name: "openai-compatible",
    async complete(request: CompletionRequest): Promise<Completion> {
      const headers: Record<string, string> = { "Content-Type": "application/json" };
      if (options.apiKey) headers.Authorization = `Bearer ${options.apiKey}`;
      let response: Response;
      try {
        response = await fetch(url, {
          method: "POST",
          headers,
          body: JSON.stringify({
            model: options.model,
            messages: request.messages,
            response_format: { type: "json_schema", json_schema: { name: request.schema.name, strict: true, schema: request.schema.schema } },
          }),
          signal: AbortSignal.timeout(options.timeoutMs),
        });
      } catch (error) {
        const timedOut = error instanceof Error && (error.name === "TimeoutError" || error.name === "AbortError");
        throw new ProviderError(
          timedOut ? `The AI provider did not answer within ${options.timeoutMs / 1000} s` : `The AI provider could not be reached: ${String(error)}`,
          true,
        );
      }
      const body = await response.text();
      if (response.status === 429 || response.status >= 500) {
        throw new ProviderError(
          `The AI provider answered ${response.status}: ${errorExcerpt(body)}`,
          true,
          retryAfterSeconds(response.headers.get("Retry-After")),
        );
      }
      if (!response.ok) throw new ProviderError(`The AI provider refused the request (${response.status}): ${errorExcerpt(body)}`, false);
      let parsed: z.infer<typeof completionSchema>;
      try {
        parsed = completionSchema.parse(JSON.parse(body));
      } catch {
        // A proxy or a server starting up may answer 200 with something else; the next attempt may get a completion.
        throw new ProviderError(`The AI provider's answer is not a chat completion: ${body.slice(0, MAX_ERROR_EXCERPT)}`, true);
      }
      const message = parsed.choices[0]!.message;
      if (message.refusal) throw new ProviderError(`The model refused: ${message.refusal.slice(0, MAX_ERROR_EXCERPT)}`, false);
      return {
        content: message.content ?? "",
        usage: { inputTokens: parsed.usage?.prompt_tokens ?? 0, outputTokens: parsed.usage?.completion_tokens ?? 0 },
      };
    },
  };
}
