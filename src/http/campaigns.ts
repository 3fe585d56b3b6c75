// What the API and the dashboard both answer for a campaign's refusals: one wording, whichever door it came through.

import type { SaveOutcome, SendOutcome } from "../domain/campaigns/campaigns";
import { AppError, notFound, validationError } from "../errors";

/** Why a campaign was not sent, as the error both the API and the dashboard answer with. */
export function sendRefusal(outcome: Exclude<SendOutcome, { kind: "started" }>): AppError {
  switch (outcome.kind) {
    case "not_found":
      return notFound("Campaign");
    case "not_draft":
      return new AppError("campaign_not_draft", `The campaign is ${outcome.status}; only a draft can be sent`);
    case "invalid":
      return validationError(outcome.errors, "The campaign cannot be sent");
    case "insufficient_credits":
      return new AppError("insufficient_credits", `Not enough sending credits: the audience is ${outcome.needed}, ${outcome.available} available`);
    case "insufficient_verification_credits":
      return new AppError(
        "insufficient_credits",
        `Not enough verification credits: checking the audience before sending needs ${outcome.needed} (one per address without a fresh result), ${outcome.available} available`,
      );
    case "reputation_hold":
      return new AppError(
        "domain_reputation_hold",
        `The sending domain ${outcome.domain} is on hold: ${outcome.reason ?? "its bounce or complaint rate is over the limit"}. New campaigns from it are refused until an operator clears the hold`,
      );
    case "unavailable":
      return new AppError("upstream_unavailable", "The campaign could not be started; it failed and its credits were released");
  }
}

/** A saved draft, or the error both the API and the dashboard answer with. */
export function savedOrThrow(outcome: SaveOutcome) {
  if (outcome.kind === "saved") return outcome.campaign;
  if (outcome.kind === "invalid") throw validationError(outcome.errors);
  if (outcome.kind === "not_draft") throw new AppError("campaign_not_draft", `The campaign is ${outcome.status}; only a draft can be changed`);
  throw notFound("Campaign");
}
