import {
  BRIDGE_SIGNATURE_HEADER,
  PROBE_CLIENT_GRACE_MS,
  PROBE_MAX_ADDRESSES,
  PROBE_MIN_BUDGET_MS,
  PROBE_PATH,
  ProbeResponse,
  signBridgeRequest,
  type ProbeAddressResult,
  type ProbeKind,
  type ProbeRequest,
} from "@mailforge/bridge-contract";
import { logWarning } from "../../lib/log.js";

// The Worker's side of the mailbox prober (smtp-bridge/src/prober/, contract in packages/bridge-contract): Workers
// cannot open port 25, so the SMTP conversation happens there and this asks for it with a signed request. A prober
// that cannot be reached, or answers late, is not an error of the check: its addresses keep their DNS-level result
// and say `mailbox_check: "unavailable"`. A prober busy reading other request bodies refuses with 503 and
// Retry-After: it is asked again after that delay with what is left of the budget.

// A Retry-After longer than this is not waited for: the prober names 1 s.
const MAX_BUSY_WAIT_MS = 5_000;

/**
 * Who asks: the prober keeps MX connections for single checks that bulk chunks cannot take, and lets accounts take
 * turns at a busy host.
 */
export interface ProbeCaller {
  kind: ProbeKind;
  accountId?: string;
}

export interface MailboxProber {
  /** The prober's evidence per address (lower-cased), or undefined when it could not be asked in time. */
  probe(addresses: readonly string[], budgetMs: number, caller: ProbeCaller): Promise<Map<string, ProbeAddressResult> | undefined>;
}

export function createMailboxProber(settings: { url: string; secret: string }): MailboxProber {
  return {
    async probe(addresses, budgetMs, caller) {
      const evidence = new Map<string, ProbeAddressResult>();
      const ask = async (slice: string[], budget: number) => {
        const request: ProbeRequest = { addresses: slice, budget_ms: budget, kind: caller.kind, account_id: caller.accountId };
        const body = JSON.stringify(request);
        return fetch(`${settings.url}${PROBE_PATH}`, {
          method: "POST",
          headers: {
            "Content-Type": "application/json",
            [BRIDGE_SIGNATURE_HEADER]: await signBridgeRequest(settings.secret, { method: "POST", path: PROBE_PATH, body }),
          },
          body,
          signal: AbortSignal.timeout(budget + PROBE_CLIENT_GRACE_MS),
        });
      };
      try {
        for (let i = 0; i < addresses.length; i += PROBE_MAX_ADDRESSES) {
          const slice = addresses.slice(i, i + PROBE_MAX_ADDRESSES);
          const deadline = Date.now() + budgetMs;
          let response = await ask(slice, budgetMs);
          while (response.status === 503 && response.headers.has("Retry-After")) {
            const waitMs = Math.min(MAX_BUSY_WAIT_MS, Number(response.headers.get("Retry-After")) * 1000 || 1_000);
            const left = deadline - Date.now() - waitMs;
            if (left < PROBE_MIN_BUDGET_MS) break;
            await response.body?.cancel();
            await new Promise((resolve) => setTimeout(resolve, waitMs));
            response = await ask(slice, left);
          }
          if (response.status !== 200) throw new Error(`prober answered ${response.status}: ${(await response.text()).slice(0, 200)}`);
          for (const result of ProbeResponse.parse(await response.json()).results) evidence.set(result.address.toLowerCase(), result);
        }
        return evidence;
      } catch (error) {
        logWarning("verification: the mailbox prober could not be asked", {
          addresses: addresses.length,
          error: error instanceof Error ? error.message : String(error),
        });
        return undefined;
      }
    },
  };
}
