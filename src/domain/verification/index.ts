export { checkSyntax, dedupeKey, type SyntaxCheck, type SyntaxSubStatus } from "./syntax";
export { checkDomain, verifyEmail, verifyMany, type DomainCheck, type VerificationDeps } from "./verify";
export {
  SCORE_DEDUCTIONS,
  VERIFICATION_QUALITIES,
  VERIFICATION_RESULTS,
  VERIFICATION_STATUSES,
  verificationResultSchema,
  type VerificationQuality,
  type VerificationResult,
  type VerificationResultValue,
  type VerificationStatus,
  type VerificationSubStatus,
} from "./status";
export { isDisposableDomain, isFreeProviderDomain, isRoleBasedLocalPart } from "./address-lists";
export { suggestDomain } from "./typo";
