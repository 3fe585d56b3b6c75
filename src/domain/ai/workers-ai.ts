// The Workers AI binding (`AI`), for deployments on Cloudflare without an external provider. JSON mode takes the
// same JSON Schema as response_format; depending on the model the answer arrives as text or already parsed.

import { z } from "zod";
import { ProviderError, type AiProvider, type Completion, type CompletionRequest } from "./adapter";

/** The part of the `Ai` binding this adapter calls; the binding's own overloads are keyed by literal model names. */
export type AiBinding = { run(model: string, inputs: Record<string, unknown>): Promise<unknown> };

const answerSchema = z.object({
  response: z.union([z.string(), z.record(z.string(), z.unknown()), z.null()]).optional(),
  usage: z.object({ prompt_tokens: z.number(), completion_tokens: z.number() }).partial().optional(),
});

// Errors worth no second try: the model or the input is wrong (Workers AI answers these with a message, not a status).
const permanentError = /no such model|invalid input|unknown model|not found/i;

export function workersAiProvider(binding: AiBinding, model: string, timeoutMs: number): AiProvider {
  return {
    name: "workers-ai",
    async complete(request: CompletionRequest): Promise<Completion> {
      let answer: unknown;
      let timer: ReturnType<typeof setTimeout> | undefined;
      try {
        answer = await Promise.race([
          binding.run(model, {
            messages: request.messages,
            response_format: { type: "json_schema", json_schema: request.schema.schema },
            max_tokens: 8192,
          }),
          new Promise<never>((_, reject) => {
            timer = setTimeout(() => reject(new Error(`no answer within ${timeoutMs / 1000} s`)), timeoutMs);
          }),
        ]);
      } catch (error) {
        const message = error instanceof Error ? error.message : String(error);
        throw new ProviderError(`Workers AI (${model}) failed: ${message}`, !permanentError.test(message));
      } finally {
        clearTimeout(timer);
      }
      const parsed = answerSchema.safeParse(answer);
      if (!parsed.success) throw new ProviderError(`Workers AI (${model}) gave no answer in the expected shape`, true);
      const response = parsed.data.response;
      return {
        content: typeof response === "string" ? response : response ? JSON.stringify(response) : "",
        usage: { inputTokens: parsed.data.usage?.prompt_tokens ?? 0, outputTokens: parsed.data.usage?.completion_tokens ?? 0 },
      };
    },
  };
}
