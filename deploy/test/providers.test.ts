/**
 * The webhook providers are declared once (gateway/src/webhook/providers);
 * the docs' provider tables, compose and the manifests list exactly what
 * those declarations say. WRITE_PROVIDER_BLOCKS=1 rewrites what differs
 * instead of failing (docs/adding-a-provider.md).
 */
import { PROVIDERS } from '../../gateway/src/webhook/providers';
import { blockContents, PROVIDER_BLOCKS, writeBlock } from './support/provider-blocks';

const WRITE = process.env.WRITE_PROVIDER_BLOCKS === '1';

test('every provider has its own name, paths and variables', () => {
  const names = PROVIDERS.map((provider) => provider.name);
  const paths = PROVIDERS.flatMap((provider) => provider.paths);
  const variables = PROVIDERS.flatMap((provider) => provider.variables.map((variable) => variable.name));
  expect(new Set(names).size).toBe(names.length);
  expect(new Set(paths).size).toBe(paths.length);
  expect(new Set(variables).size).toBe(variables.length);
  for (const provider of PROVIDERS) {
    expect([provider.name, provider.variables.some((variable) => variable.credential)]).toEqual([provider.name, true]);
  }
});

test.each(PROVIDER_BLOCKS.map((block) => [`${block.file} (providers:${block.name})`, block] as const))(
  '%s lists the providers as declared',
  (_where, block) => {
    const { actual, expected } = blockContents(block);
    if (WRITE && actual !== expected) writeBlock(block);
    else expect(actual).toBe(expected);
  },
);
