import { DurableObject } from "cloudflare:workers";
import type { WebhookDeliveryMessage } from "../domain/webhooks/dispatch";
import { deliverWebhookMessages } from "../queues/webhooks";

// Attempts one alarm run takes on; more wait for the next run, which is scheduled at once.
const attemptsPerRun = 50;
// When D1 or the queue failed around an attempt, it runs again after this pause.
const againAfterMs = 30_000;

const key = (delivery: WebhookDeliveryMessage) => `attempt:${delivery.event_id}:${delivery.attempt}`;

/**
 * One per webhook endpoint: the attempts to that endpoint, stored durably until they are done. Each endpoint
 * delivers from its own alarm, so one that answers slowly or not at all never holds up another endpoint's events.
 */
export class WebhookEndpointQueue extends DurableObject<Env> {
  async enqueue(deliveries: WebhookDeliveryMessage[]): Promise<void> {
    for (const delivery of deliveries) this.ctx.storage.kv.put(key(delivery), delivery);
    if ((await this.ctx.storage.getAlarm()) === null) await this.ctx.storage.setAlarm(Date.now());
  }

  pending(limit?: number): WebhookDeliveryMessage[] {
    return [...this.ctx.storage.kv.list<WebhookDeliveryMessage>({ prefix: "attempt:", limit })].map(([, delivery]) => delivery);
  }

  override async alarm(): Promise<void> {
    const batch = this.pending(attemptsPerRun);
    if (batch.length === 0) return;
    const outcomes = await deliverWebhookMessages(this.env, batch);
    let again = false;
    batch.forEach((delivery, i) => {
      if (outcomes[i] === "done") this.ctx.storage.kv.delete(key(delivery));
      else again = true;
    });
    // A failure around D1 or the queue pauses this endpoint's attempts instead of spinning on them.
    if (this.pending(1).length > 0) await this.ctx.storage.setAlarm(Date.now() + (again ? againAfterMs : 0));
  }
}
