import { createApp } from "./app";

export { CampaignProgress } from "./durable-objects/campaign-progress";
export { RateLimiter } from "./durable-objects/rate-limiter";

const app = createApp();

export default {
  fetch: app.fetch,
} satisfies ExportedHandler<Env>;
