/**
 * The significance test of variant rates, one place for the stats' leaders
 * (analytics) and the decision of a run's A/B test (delivery).
 */

/** |z| beyond this differs at 95 % confidence, two-sided. */
export const Z_95 = 1.959964;

/** One variant's successes (unique opens or unique clicks) out of its trials (delivered messages). */
export interface VariantOutcome {
  variantId: string;
  successes: number;
  trials: number;
}

/**
 * The pooled two-proportion z statistic of a against b; 0 when the pooled
 * rate is 0 or 1 (both rates equal, nothing to tell apart).
 */
export function twoProportionZ(a: Omit<VariantOutcome, 'variantId'>, b: Omit<VariantOutcome, 'variantId'>): number {
  const pooled = (a.successes + b.successes) / (a.trials + b.trials);
  const standardError = Math.sqrt(pooled * (1 - pooled) * (1 / a.trials + 1 / b.trials));
  return standardError === 0 ? 0 : (a.successes / a.trials - b.successes / b.trials) / standardError;
}

/**
 * The variant whose rate is highest and differs from every other variant's
 * at 95 % confidence, else undefined. Variants without trials have no rate
 * and take no part; fewer than two with trials have no leader.
 */
export function significantLeader(variants: VariantOutcome[]): string | undefined {
  const rated = variants.filter((variant) => variant.trials > 0);
  if (rated.length < 2) return undefined;
  const rate = (variant: VariantOutcome) => variant.successes / variant.trials;
  const best = rated.reduce((top, variant) => (rate(variant) > rate(top) ? variant : top));
  const beatsAll = rated.every((other) => other === best || (rate(best) > rate(other) && twoProportionZ(best, other) > Z_95));
  return beatsAll ? best.variantId : undefined;
}
