import { significantLeader } from '@mail/common';

/**
 * A run's A/B test (docs/api.md, "A/B test, then the winner"): `testing`
 * while the test recipients are loaded and sent, `waiting` from the last test
 * message's hand-over until `decide_at`, `sending_winner` once the winner is
 * picked and the other recipients are released with its variant, `done` when
 * the run has completed.
 */
export const AB_PHASES = ['testing', 'waiting', 'sending_winner', 'done'] as const;
export type AbPhase = (typeof AB_PHASES)[number];

export type AbMetric = 'open_rate' | 'click_rate';
export type DecidedBy = 'significance' | 'best_rate' | 'manual';

/** The campaign's A/B test settings, fixed in the run's plan. */
export interface AbTestPlan {
  testFraction: number;
  waitMinutes: number;
  metric: AbMetric;
}

/**
 * How many of `valid` recipients are test recipients: the fraction, rounded,
 * and at least one of a run that has any.
 */
export function testSize(valid: number, fraction: number): number {
  return valid === 0 ? 0 : Math.min(valid, Math.max(1, Math.round(valid * fraction)));
}

/**
 * Each variant's upper bound on [0, 1]: the test recipient at position p of k
 * (in the order of its keyed hash) gets the first variant whose bound exceeds
 * (p - 0.5) / k, so the test is split by weight exactly, up to rounding.
 */
export function variantBounds(variants: { id: string; weight: number }[]): { id: string; upto: number }[] {
  const total = variants.reduce((sum, variant) => sum + variant.weight, 0);
  let reached = 0;
  return variants.map((variant, index) => {
    reached += variant.weight;
    return { id: variant.id, upto: index === variants.length - 1 ? 1 : reached / total };
  });
}

/** One variant's test figures: its test recipients sent, and of them those with a human open and click. */
export interface VariantFigures {
  variantId: string;
  sent: number;
  opens: number;
  clicks: number;
}

export const successesOf = (figures: VariantFigures, metric: AbMetric): number => (metric === 'open_rate' ? figures.opens : figures.clicks);

/** The metric's rate: opens or clicks over sent; null when none was sent. */
export const rateOf = (figures: VariantFigures, metric: AbMetric): number | null =>
  figures.sent === 0 ? null : successesOf(figures, metric) / figures.sent;

/** The variant that beats every other at 95 % confidence (two-proportion z-test), if one does. */
export function leaderOf(figures: VariantFigures[], metric: AbMetric): string | undefined {
  return significantLeader(figures.map((f) => ({ variantId: f.variantId, successes: successesOf(f, metric), trials: f.sent })));
}

/**
 * The winner: the significant leader if there is one (`significance`), else
 * the highest rate (`best_rate`; of equal rates the first in the plan's
 * order, which is also the pick when nothing was sent).
 */
export function decideWinner(figures: VariantFigures[], metric: AbMetric): { winner: string; decidedBy: Exclude<DecidedBy, 'manual'> } {
  const leader = leaderOf(figures, metric);
  if (leader !== undefined) return { winner: leader, decidedBy: 'significance' };
  const best = figures.reduce((top, f) => ((rateOf(f, metric) ?? -1) > (rateOf(top, metric) ?? -1) ? f : top));
  return { winner: best.variantId, decidedBy: 'best_rate' };
}
