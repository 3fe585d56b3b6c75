// One interface in front of every model provider: chat messages and a JSON Schema in, the model's text and token
// counts out. Adapters: any OpenAI-compatible chat-completions API (openai.ts) and the Workers AI binding
// (workers-ai.ts). Which one serves is configuration; with neither, there is no provider and no generation.

import { config } from "../../config";
import { openAiCompatibleProvider } from "./openai";
import { workersAiProvider, type AiBinding } from "./workers-ai";
import type { AiProvider } from "./adapter";

/** Workers AI's default when the `AI` binding serves and AI_MODEL is not set. */
export const DEFAULT_WORKERS_AI_MODEL = "@cf/meta/llama-3.3-70b-instruct-fp8-fast";

export type ProviderChoice = { kind: "configured"; provider: AiProvider } | { kind: "not_configured"; reason: string };

/**
 * The configured provider: an OpenAI-compatible endpoint when AI_BASE_URL is set, else the `AI` binding when the
 * deployment has one. The binding is not in wrangler.toml (it needs a Cloudflare account even in `wrangler dev`), so
 * it is read as an optional extra of `env`.
 */
export function chooseProvider(env: Env): ProviderChoice {
  const ai = config(env).ai;
  if (ai.baseUrl) {
    if (!ai.model) return { kind: "not_configured", reason: "AI_BASE_URL is set but AI_MODEL is not" };
    return {
      kind: "configured",
      provider: openAiCompatibleProvider({ baseUrl: ai.baseUrl, apiKey: ai.apiKey, model: ai.model, timeoutMs: ai.timeoutMs }),
    };
  }
  const binding = (env as Env & { AI?: AiBinding }).AI;
  if (binding) return { kind: "configured", provider: workersAiProvider(binding, ai.model ?? DEFAULT_WORKERS_AI_MODEL, ai.timeoutMs) };
  return { kind: "not_configured", reason: "neither AI_BASE_URL nor an `AI` Workers AI binding is configured" };
}
