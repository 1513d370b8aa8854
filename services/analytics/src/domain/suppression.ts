/** Bounce tracking rules (docs/api.md, "Bounce tracking"): @mail/event-store holds them, beside the SQL that applies them. */
export { SUPPRESSION_REASONS, type SuppressionReason } from '@mail/event-store';
