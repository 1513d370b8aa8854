import fs from 'node:fs';
import path from 'node:path';
import { BOUNCE_CLASS_NAMES, type ProviderDeclaration } from '../../../gateway/src/webhook/declaration';
import { PROVIDERS } from '../../../gateway/src/webhook/providers';
import { REPO_ROOT } from './tools';

/**
 * The parts of docs and deployment files that list the webhook providers,
 * written from their declarations (gateway/src/webhook/providers). Each sits
 * between a `begin providers:<name>` and an `end providers:<name>` line (a
 * YAML or HTML comment); deploy/test/providers.test.ts checks them, and
 * rewrites them with WRITE_PROVIDER_BLOCKS=1 (docs/adding-a-provider.md).
 */
export interface ProviderBlock {
  file: string;
  name: string;
  /** The lines between the markers, indented like the `begin` line. */
  render(indent: string): string[];
}

const variables = (): { provider: ProviderDeclaration; variable: ProviderDeclaration['variables'][number] }[] =>
  PROVIDERS.flatMap((provider) => provider.variables.map((variable) => ({ provider, variable })));

const code = (text: string): string => `\`${text}\``;

function kubernetesKind(variable: ProviderDeclaration['variables'][number]): string {
  const where = variable.secret ? 'Secret' : 'config';
  return variable.credential ? `${where} (optional)` : where;
}

export const PROVIDER_BLOCKS: ProviderBlock[] = [
  {
    file: 'docker-compose.yml',
    name: 'gateway-environment',
    render: (indent) => variables().map(({ variable }) => `${indent}${variable.name}: \${${variable.name}:-}`),
  },
  {
    file: 'deploy/k8s/base/processes/gateway.yaml',
    name: 'gateway-env',
    render: (indent) =>
      variables().flatMap(({ variable }) => [
        `${indent}- name: ${variable.name}`,
        `${indent}  valueFrom:`,
        ...(variable.secret
          ? [
              `${indent}    secretKeyRef:`,
              `${indent}      name: mail-secrets`,
              `${indent}      key: ${variable.name}`,
              `${indent}      optional: true`,
            ]
          : [`${indent}    configMapKeyRef:`, `${indent}      name: mail-config`, `${indent}      key: ${variable.name}`]),
      ]),
  },
  {
    file: 'deploy/k8s/base/kustomization.yaml',
    name: 'config',
    render: (indent) => variables().flatMap(({ variable }) => (variable.secret ? [] : [`${indent}- ${variable.name}=`])),
  },
  {
    file: 'deploy/k8s/README.md',
    name: 'secrets',
    render: () => [
      '| key | used by | |',
      '|---|---|---|',
      ...variables().flatMap(({ provider, variable }) =>
        variable.secret ? [`| ${code(variable.name)} | gateway | optional (${provider.docs.title}) |`] : [],
      ),
    ],
  },
  {
    file: 'docs/configuration.md',
    name: 'variables',
    render: () => [
      '| Variable | Default | Read by | Kubernetes | Meaning |',
      '|---|---|---|---|---|',
      ...variables().map(
        ({ variable }) =>
          `| ${code(variable.name)} | ${variable.documentedDefault} | gateway | ${kubernetesKind(variable)} | ${variable.description} |`,
      ),
    ],
  },
  {
    file: 'docs/configuration.md',
    name: 'providers',
    render: () => [
      '| Provider | Route | Credential (any one enables it) | Verification | Campaign (`provider_category_id`) | Variant (`variant_id`) |',
      '|---|---|---|---|---|---|',
      ...PROVIDERS.map((provider) => {
        const credentials = provider.variables.filter((variable) => variable.credential).map((variable) => code(variable.name));
        return `| ${provider.docs.title} | ${provider.paths.map(code).join(', ')} | ${credentials.join(' or ')} | ${provider.docs.verification} | ${provider.docs.category} | ${provider.docs.variant} |`;
      }),
    ],
  },
  {
    file: 'docs/api.md',
    name: 'bounce-classes',
    render: () => [
      `| class | ${PROVIDERS.map((provider) => `${provider.docs.title} ${provider.docs.bounceSource}`).join(' | ')} |`,
      `|---|${PROVIDERS.map(() => '---|').join('')}`,
      ...BOUNCE_CLASS_NAMES.map(
        (name) => `| ${code(name)} | ${PROVIDERS.map((provider) => provider.docs.bounceClasses[name] ?? '').join(' | ')} |`,
      ),
    ],
  },
];

interface Located {
  lines: string[];
  begin: number;
  end: number;
  indent: string;
}

function locate(block: ProviderBlock): Located {
  const lines = fs.readFileSync(path.join(REPO_ROOT, block.file), 'utf8').split('\n');
  const begin = lines.findIndex(
    (line) => line.includes(`begin providers:${block.name} `) || line.endsWith(`begin providers:${block.name}`),
  );
  const end = lines.findIndex((line, i) => i > begin && line.includes(`end providers:${block.name}`));
  if (begin < 0 || end < 0)
    throw new Error(`${block.file}: the lines "begin providers:${block.name}" and "end providers:${block.name}" are gone`);
  const indent = /^\s*/.exec(lines[begin])![0];
  // Markdown's markers are HTML comments: its blocks are whole tables, not indented.
  return { lines, begin, end, indent: block.file.endsWith('.md') ? '' : indent };
}

/** The block as the file has it, and as the declarations say it should be. */
export function blockContents(block: ProviderBlock): { actual: string; expected: string } {
  const { lines, begin, end, indent } = locate(block);
  return { actual: lines.slice(begin + 1, end).join('\n'), expected: block.render(indent).join('\n') };
}

/** Rewrites the block from the declarations. */
export function writeBlock(block: ProviderBlock): void {
  const { lines, begin, end, indent } = locate(block);
  lines.splice(begin + 1, end - begin - 1, ...block.render(indent));
  fs.writeFileSync(path.join(REPO_ROOT, block.file), lines.join('\n'));
}
