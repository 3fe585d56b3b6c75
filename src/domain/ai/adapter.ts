// What a provider adapter (openai.ts, workers-ai.ts) implements and throws; provider.ts chooses one by configuration.

export type ChatMessage = { role: "system" | "user" | "assistant"; content: string };

export type CompletionRequest = {
  messages: ChatMessage[];
  /** What the answer must look like; `name` is the schema's name as response_format carries it. */
  schema: { name: string; schema: Record<string, unknown> };
};

export type TokenUsage = { inputTokens: number; outputTokens: number };

export type Completion = { content: string; usage: TokenUsage };

export interface AiProvider {
  readonly name: string;
  /** Throws ProviderError when there is no answer to read. */
  complete(request: CompletionRequest): Promise<Completion>;
}

/**
 * The provider gave no answer. `retryable`: a time-out, a network error, 429 or 5xx, worth asking again later (after
 * `retryAfterSeconds` when the provider said so); otherwise the request itself was refused and asking again is useless.
 */
export class ProviderError extends Error {
  override name = "ProviderError";
  constructor(
    message: string,
    readonly retryable: boolean,
    readonly retryAfterSeconds?: number,
  ) {
    super(message);
  }
}
