import { DurableObject } from "cloudflare:workers";

/**
 * One per campaign: the single writer of its fan-out counters (campaigns build on it). The synchronous KV API makes
 * each increment a read-modify-write that no concurrent call can interleave with.
 */
export class CampaignProgress extends DurableObject<Env> {
  counters(): Record<string, number> {
    return this.ctx.storage.kv.get<Record<string, number>>("counters") ?? {};
  }

  increment(counter: string, by = 1): number {
    const counters = this.counters();
    counters[counter] = (counters[counter] ?? 0) + by;
    this.ctx.storage.kv.put("counters", counters);
    return counters[counter];
  }
}
