import { z } from "zod";
import { createMailSink } from "./mail-sink.ts";

const port = z.coerce.number().int().min(0).max(65535);
const envSchema = z.object({
  SINK_SMTP_PORT: port.default(1025),
  SINK_HTTP_PORT: port.default(8025),
  SINK_HOST: z.string().min(1).default("127.0.0.1"),
});

const env = envSchema.safeParse(process.env);
if (!env.success) {
  console.error(`dev mail sink: invalid environment\n${z.prettifyError(env.error)}`);
  process.exit(1);
}

const { SINK_SMTP_PORT, SINK_HTTP_PORT, SINK_HOST } = env.data;
const sink = createMailSink();
const ports = await sink.listen({ smtpPort: SINK_SMTP_PORT, httpPort: SINK_HTTP_PORT, host: SINK_HOST });
const urlHost = SINK_HOST.includes(":") ? `[${SINK_HOST}]` : SINK_HOST;
console.log(`dev mail sink: SMTP ${urlHost}:${ports.smtpPort}, inbox http://${urlHost}:${ports.httpPort}/api/messages`);

for (const signal of ["SIGINT", "SIGTERM"] as const) {
  process.once(signal, () => {
    void sink.close().finally(() => process.exit(0));
  });
}
