import {
  BRIDGE_SIGNATURE_HEADER,
  PROBE_CLIENT_GRACE_MS,
  PROBE_MAX_ADDRESSES,
  PROBE_PATH,
  ProbeResponse,
  signBridgeRequest,
  type ProbeAddressResult,
  type ProbeKind,
  type ProbeRequest,
} from "@mailforge/bridge-contract";
import { logWarning } from "../../lib/log";

// The Worker's side of the mailbox prober (smtp-bridge/src/prober/, contract in packages/bridge-contract): Workers
// cannot open port 25, so the SMTP conversation happens there and this asks for it with a signed request. A prober
// that cannot be reached, or answers late, is not an error of the check: its addresses keep their DNS-level result
// and say `mailbox_check: "unavailable"`.

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
      try {
        for (let i = 0; i < addresses.length; i += PROBE_MAX_ADDRESSES) {
          const request: ProbeRequest = {
            addresses: addresses.slice(i, i + PROBE_MAX_ADDRESSES),
            budget_ms: budgetMs,
            kind: caller.kind,
            account_id: caller.accountId,
          };
          const body = JSON.stringify(request);
          const response = await fetch(`${settings.url}${PROBE_PATH}`, {
            method: "POST",
            headers: {
              "Content-Type": "application/json",
              [BRIDGE_SIGNATURE_HEADER]: await signBridgeRequest(settings.secret, { method: "POST", path: PROBE_PATH, body }),
            },
            body,
            signal: AbortSignal.timeout(budgetMs + PROBE_CLIENT_GRACE_MS),
          });
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
