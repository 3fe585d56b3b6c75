// Which pixel fetches and link follows are machines rather than people (docs/tracking.md, "Machine opens"). Opens
// by machines are counted apart (`machine_opens`) so `unique_opens` means people; clicks by scanners redirect but are
// not counted at all.

export type Client = { userAgent: string | null; ip: string | null };

export type MachineReason = "apple_mpp" | "scanner" | "prefetch";

/** An open this soon after the message was handed over is a proxy prefetching or a scanner, not a reader. */
export const prefetchWindowMs = 10_000;

// Security gateways and HTTP libraries fetch links and images of incoming mail before anyone reads it. Matched
// case-insensitively anywhere in the User-Agent. Gmail's and Yahoo's image proxies are not here: they fetch when
// the message is opened (Gmail's delivery-time prefetch is caught by the time window instead).
const scannerAgents = [
  /bot\b/i,
  /crawl/i,
  /spider/i,
  /\bcurl\//i,
  /\bwget\//i,
  /python-requests/i,
  /python-urllib/i,
  /aiohttp/i,
  /httpx/i,
  /go-http-client/i,
  /\bjava\//i,
  /okhttp/i,
  /apache-httpclient/i,
  /libwww-perl/i,
  /node-fetch/i,
  /axios\//i,
  /undici/i,
  /headlesschrome/i,
  /phantomjs/i,
  /barracuda/i,
  /mimecast/i,
  /proofpoint/i,
  /messagelabs/i,
  /symantec/i,
  /forcepoint/i,
  /trendmicro|trend micro/i,
  /fortiguard/i,
  /sophos/i,
];

/** Apple Mail Privacy Protection fetches through Apple's own network (17.0.0.0/8) with a bare `Mozilla/5.0`. */
function isAppleMpp(client: Client): boolean {
  if (client.userAgent?.trim() === "Mozilla/5.0") return true;
  const ip = client.ip
    ?.trim()
    .toLowerCase()
    .replace(/^::ffff:/, "");
  if (!ip) return false;
  const octets = ip.split(".");
  return octets.length === 4 && octets[0] === "17" && octets.every((octet) => /^\d{1,3}$/.test(octet) && Number(octet) <= 255);
}

/** A scanner or an HTTP library by its User-Agent; no User-Agent at all is a machine too (every mail client sends one). */
export function isScanner(client: Client): boolean {
  const agent = client.userAgent?.trim() ?? "";
  return agent === "" || scannerAgents.some((pattern) => pattern.test(agent));
}

/**
 * Why an open is a machine's, or undefined for a person's. `sentAt` is when the message was handed over (ISO 8601),
 * null when it was never sent.
 */
export function machineOpenReason(client: Client, sentAt: string | null, now: Date): MachineReason | undefined {
  if (isAppleMpp(client)) return "apple_mpp";
  if (isScanner(client)) return "scanner";
  const sent = sentAt ? Date.parse(sentAt) : Number.NaN;
  if (!Number.isNaN(sent) && now.getTime() - sent < prefetchWindowMs) return "prefetch";
  return undefined;
}
