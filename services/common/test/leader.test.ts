import { significantLeader, twoProportionZ, Z_95, type VariantOutcome } from '../src/leader';

/**
 * Pearson's chi-square of the 2x2 table (success/failure by variant), without
 * continuity correction: it equals the square of the pooled two-proportion z,
 * so it checks the z-test by another route. 3.841459 = 1.959964².
 */
function chiSquare(a: VariantOutcome, b: VariantOutcome): number {
  const table = [
    [a.successes, a.trials - a.successes],
    [b.successes, b.trials - b.successes],
  ];
  const total = a.trials + b.trials;
  const columns = [table[0][0] + table[1][0], table[0][1] + table[1][1]];
  const rows = [a.trials, b.trials];
  let sum = 0;
  for (const row of [0, 1]) {
    for (const column of [0, 1]) {
      const expected = (rows[row] * columns[column]) / total;
      sum += (table[row][column] - expected) ** 2 / expected;
    }
  }
  return sum;
}

const CRITICAL_CHI_SQUARE = 3.841459;

const variant = (variantId: string, successes: number, trials: number): VariantOutcome => ({ variantId, successes, trials });

describe('twoProportionZ', () => {
  it.each([
    [variant('a', 300, 1000), variant('b', 250, 1000)],
    [variant('a', 30, 100), variant('b', 20, 100)],
    [variant('a', 7, 40), variant('b', 19, 55)],
  ])('squares to the chi-square of the 2x2 table (%o, %o)', (a, b) => {
    expect(twoProportionZ(a, b) ** 2).toBeCloseTo(chiSquare(a, b), 9);
    expect(Math.sign(twoProportionZ(a, b))).toBe(Math.sign(a.successes / a.trials - b.successes / b.trials));
  });

  it('computes the textbook value', () => {
    // p1 = 0.3, p2 = 0.25, pooled 0.275: z = 0.05 / sqrt(0.275 * 0.725 * 0.002).
    expect(twoProportionZ(variant('a', 300, 1000), variant('b', 250, 1000))).toBeCloseTo(0.05 / Math.sqrt(0.275 * 0.725 * 0.002), 12);
  });

  it('is 0 when both rates are 0 or both are 1', () => {
    expect(twoProportionZ(variant('a', 0, 10), variant('b', 0, 20))).toBe(0);
    expect(twoProportionZ(variant('a', 10, 10), variant('b', 20, 20))).toBe(0);
  });

  it('uses the 95 % two-sided critical value', () => {
    expect(Z_95 ** 2).toBeCloseTo(CRITICAL_CHI_SQUARE, 5);
  });
});

describe('significantLeader', () => {
  it('names the highest rate when it beats every other variant at 95 %', () => {
    const variants = [variant('a', 300, 1000), variant('b', 250, 1000), variant('c', 200, 1000)];
    expect(chiSquare(variants[0], variants[1])).toBeGreaterThan(CRITICAL_CHI_SQUARE);
    expect(significantLeader(variants)).toBe('a');
    expect(significantLeader([...variants].reverse())).toBe('a');
  });

  it('names none when the best does not beat the runner-up at 95 %', () => {
    const variants = [variant('a', 30, 100), variant('b', 25, 100), variant('c', 5, 100)];
    expect(chiSquare(variants[0], variants[1])).toBeLessThan(CRITICAL_CHI_SQUARE);
    expect(chiSquare(variants[0], variants[2])).toBeGreaterThan(CRITICAL_CHI_SQUARE);
    expect(significantLeader(variants)).toBeUndefined();
  });

  it('names none on a tie, for a single variant, or when only one has deliveries', () => {
    expect(significantLeader([variant('a', 500, 1000), variant('b', 500, 1000)])).toBeUndefined();
    expect(significantLeader([variant('a', 500, 1000)])).toBeUndefined();
    expect(significantLeader([variant('a', 500, 1000), variant('b', 0, 0)])).toBeUndefined();
    expect(significantLeader([])).toBeUndefined();
  });

  it('leaves variants without deliveries out of the comparison', () => {
    expect(significantLeader([variant('a', 300, 1000), variant('b', 200, 1000), variant('c', 0, 0)])).toBe('a');
  });
});
