import { DurableObject } from "cloudflare:workers";

// One per campaign: the single writer for fan-out counters and completion (campaigns build on it).
export class CampaignProgress extends DurableObject<Env> {
  async counters(): Promise<Record<string, number>> {
    return (await this.ctx.storage.get<Record<string, number>>("counters")) ?? {};
  }

  async increment(counter: string, by = 1): Promise<number> {
    const counters = await this.counters();
    counters[counter] = (counters[counter] ?? 0) + by;
    await this.ctx.storage.put("counters", counters);
    return counters[counter];
  }
}
