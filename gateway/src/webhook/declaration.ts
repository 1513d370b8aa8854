import { ConfigError, type EnvReader, type Logger } from '@mail/common';
import type { WebhookProvider } from './provider';

/** Where every provider's route lives: `/campaign-events/webhook/<name>`. */
export const WEBHOOK_PATH = '/campaign-events/webhook';

/** One environment variable of a provider, as the gateway reads it and as deployments and docs list it. */
export interface ProviderVariable<T> {
  name: string;
  /** Kept in the Secret (`mail-secrets`), else in the ConfigMap (`mail-config`). */
  secret: boolean;
  /** Set, it enables the provider (a credential); otherwise it only tunes it. */
  credential: boolean;
  /** The default as docs/configuration.md shows it ("none": unset). */
  documentedDefault: string;
  /** Its row of docs/configuration.md. */
  description: string;
  /** A well-formed value: what the tests configure the provider with. */
  example: string;
  read(env: EnvReader): T;
}

type AnyVariable = ProviderVariable<unknown>;
type Values<V extends Record<string, AnyVariable>> = { [K in keyof V]: ReturnType<V[K]['read']> };

/** The bounce classes of docs/api.md, "Bounce classes", in their order there. */
export const BOUNCE_CLASS_NAMES = [
  'invalid_address',
  'mailbox_unavailable',
  'technical',
  'content',
  'reputation',
  'frequency_or_volume',
  'unclassified',
] as const;
export type BounceClassName = (typeof BOUNCE_CLASS_NAMES)[number];

/** What the docs say of a provider: everything a reader needs to set it up, beside its variables. */
export interface ProviderDocs {
  /** As people write it: "Amazon SES". */
  title: string;
  /** How its credential verifies a request. */
  verification: string;
  /** Where its events carry the campaign's `provider_category_id`, and the variant's `variant_id`. */
  category: string;
  variant: string;
  /** The provider's field the bounce classes are read from (the column of docs/api.md's table). */
  bounceSource: string;
  /** Its codes per class; a class it never reports is left out. */
  bounceClasses: Partial<Record<BounceClassName, string>>;
}

/** A provider with the values of its variables read: what the webhook builds its route from. */
export interface ConfiguredProvider {
  name: string;
  /** Whether a credential of it is set, so that its requests are verified. */
  credentialed: boolean;
  create(logger: Logger): WebhookProvider;
}

/**
 * A provider described once: its name, variables, docs and how it is built
 * from its variables' values. The gateway's config, routes and the deployment
 * files (checked by deploy/test/providers.test.ts) all read it.
 */
export interface ProviderDeclaration {
  name: string;
  /** Where it answers; `/campaign-events/webhook/<name>` unless the declaration says more. */
  paths: string[];
  variables: AnyVariable[];
  docs: ProviderDocs;
  configure(env: EnvReader): ConfiguredProvider;
}

interface ProviderSpec<V extends Record<string, AnyVariable>> {
  name: string;
  /** Paths before its own, `/campaign-events/webhook/<name>` (SendGrid keeps the original route). */
  otherPaths?: string[];
  /** Read in this order, so that the first bad one is the one reported. */
  variables: V;
  docs: ProviderDocs;
  /** The webhook's verification and normalization, given its variables' values. */
  create(values: Values<V>, logger: Logger): Omit<WebhookProvider, 'name' | 'paths' | 'verifies'>;
}

const isSet = (value: unknown): boolean => value !== undefined && !(Array.isArray(value) && value.length === 0);

export function defineProvider<V extends Record<string, AnyVariable>>(spec: ProviderSpec<V>): ProviderDeclaration {
  const paths = [...(spec.otherPaths ?? []), `${WEBHOOK_PATH}/${spec.name}`];
  return {
    name: spec.name,
    paths,
    variables: Object.values(spec.variables),
    docs: spec.docs,
    configure: (env) => {
      const values = Object.fromEntries(Object.entries(spec.variables).map(([key, variable]) => [key, variable.read(env)])) as Values<V>;
      const credentialed = Object.entries(spec.variables).some(([key, variable]) => variable.credential && isSet(values[key]));
      return {
        name: spec.name,
        credentialed,
        create: (logger) => ({ ...spec.create(values, logger), name: spec.name, paths, verifies: credentialed }),
      };
    },
  };
}

/** A secret credential taken as it is written (a signing key). */
export function secretCredential(name: string, description: string, example: string): ProviderVariable<string | undefined> {
  return { name, secret: true, credential: true, documentedDefault: 'none', description, example, read: (env) => env.optionalString(name) };
}

/** A secret credential parsed at start-up, so that a malformed one refuses start-up instead of failing every call. */
export function parsedCredential<T>(
  name: string,
  description: string,
  example: string,
  parse: (text: string) => T,
): ProviderVariable<T | undefined> {
  return {
    name,
    secret: true,
    credential: true,
    documentedDefault: 'none',
    description,
    example,
    read: (env) => {
      const text = env.optionalString(name);
      return text === undefined ? undefined : parse(text);
    },
  };
}

/** `user:password` for HTTP Basic (checked by basicAuthGate). */
export const basicAuthCredential = (name: string, description: string): ProviderVariable<string | undefined> =>
  parsedCredential(name, description, 'user:password', (text) => {
    if (!text.includes(':')) throw new ConfigError(`${name} must look like user:password`);
    return text;
  });

/** A comma list that is not secret (SNS topic ARNs): set, it is the provider's credential. */
export function listCredential(name: string, description: string, example: string): ProviderVariable<string[]> {
  return { name, secret: false, credential: true, documentedDefault: 'none', description, example, read: (env) => env.list(name, []) };
}

/** A setting with a default, not a credential. */
export function setting<T>(name: string, fallback: string, description: string, parse: (text: string) => T): ProviderVariable<T> {
  return {
    name,
    secret: false,
    credential: false,
    documentedDefault: `\`${fallback}\``,
    description,
    example: fallback,
    read: (env) => parse(env.string(name, fallback)),
  };
}
