// The verification refusals both verification surfaces and the dashboard answer.

import type { InsufficientCredits } from "../domain/verification/jobs";
import { AppError } from "../errors";

/** The 402 of a verification the balance cannot pay for (both verification surfaces answer it). */
export const insufficientVerifyCredits = ({ needed, available }: InsufficientCredits) =>
  new AppError("insufficient_credits", `Not enough verification credits: this needs ${needed}, ${Math.max(0, available)} available`);

/** The 503 of a job the queue refused (it was failed and refunded at once). */
export const verificationQueueUnavailable = () =>
  new AppError("upstream_unavailable", "The verification queue is unavailable; the job was cancelled and refunded, retry shortly", {
    headers: { "Retry-After": "5" },
  });
