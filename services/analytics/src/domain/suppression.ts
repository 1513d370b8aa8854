/** Bounce tracking rules (contract, "Engagement events"): @mail/common holds them, beside the SQL that applies them. */
export { SUPPRESSION_REASONS, type SuppressionReason } from '@mail/common';
