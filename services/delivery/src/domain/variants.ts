import { createHash } from 'node:crypto';

export interface WeightedVariant {
  id: string;
  weight: number;
}

/**
 * The variant of a recipient: weight / sum of weights likely, and always the
 * same for the same run and address (a resumed or reloaded run assigns it again
 * identically). The hash's first 48 bits place the address on [0, sum).
 */
export function pickVariant<V extends WeightedVariant>(variants: V[], runId: string, email: string): V {
  const total = variants.reduce((sum, variant) => sum + variant.weight, 0);
  const point = (createHash('sha256').update(`${runId}:${email}`).digest().readUIntBE(0, 6) / 2 ** 48) * total;
  let reached = 0;
  for (const variant of variants) {
    reached += variant.weight;
    if (point < reached) return variant;
  }
  return variants[variants.length - 1];
}
