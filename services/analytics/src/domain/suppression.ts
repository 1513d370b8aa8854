/** Bounce tracking rules (contract, "Engagement events"). */

/** A hard bounce, an unsubscribe or a spam report suppresses at once; soft bounces need this many ... */
export const SOFT_BOUNCES_TO_SUPPRESS = 3;
/** ... within this many days, counted from the first of them to the last. */
export const SOFT_BOUNCE_WINDOW_DAYS = 30;

/** Signals that suppress at once; at the same second, the first listed names the reason. */
export const IMMEDIATE_REASONS = ['hard_bounce', 'unsubscribe', 'spam_report'] as const;

export const SUPPRESSION_REASONS = ['hard_bounce', 'soft_bounces', 'unsubscribe', 'spam_report'] as const;
export type SuppressionReason = (typeof SUPPRESSION_REASONS)[number];
