import fs from 'node:fs';
import path from 'node:path';
import Ajv2020, { type ErrorObject, type ValidateFunction } from 'ajv/dist/2020';
import addFormats from 'ajv-formats';

/** A rendered Kubernetes object, as far as these tests look into it. */
export interface KubeObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string>; [key: string]: unknown };
  [key: string]: unknown;
}

function newAjv(): Ajv2020 {
  // strict: false because third-party schemas carry keywords ajv does not know
  // (x-kubernetes-*); that only skips those keywords, never a check.
  const ajv = new Ajv2020({ strict: false, allErrors: true });
  addFormats(ajv);
  ajv.addFormat('int32', { type: 'number', validate: (n: number) => Number.isInteger(n) && Math.abs(n) <= 2 ** 31 });
  ajv.addFormat('int64', { type: 'number', validate: (n: number) => Number.isInteger(n) });
  ajv.addFormat('double', { type: 'number', validate: () => true });
  return ajv;
}

function explain(errors: ErrorObject[] | null | undefined): string[] {
  return (errors ?? []).map((e) => `${e.instancePath || '/'} ${e.message ?? e.keyword} ${JSON.stringify(e.params)}`);
}

/**
 * Validates objects against the strict JSON schemas of one Kubernetes version
 * (generated from its OpenAPI document, with additionalProperties: false, so
 * unknown or misspelled fields are errors, as with kubectl --validate=strict).
 */
export class KubernetesValidator {
  readonly version: string;
  private readonly ajv = newAjv();
  private readonly compiled = new Map<string, ValidateFunction>();

  constructor(private readonly schemaDir: string) {
    this.version = path.basename(schemaDir).replace(/-local-strict$/, '');
    this.ajv.addSchema(JSON.parse(fs.readFileSync(path.join(schemaDir, '_definitions.json'), 'utf8')));
  }

  /** Problems of one object; empty when valid. An object whose kind has no schema is a problem too. */
  validate(object: KubeObject): string[] {
    const file = schemaFile(object);
    let validate = this.compiled.get(file);
    if (!validate) {
      const full = path.join(this.schemaDir, file);
      if (!fs.existsSync(full)) return [`no schema for ${object.apiVersion} ${object.kind} in Kubernetes ${this.version}`];
      validate = this.ajv.compile(JSON.parse(fs.readFileSync(full, 'utf8')));
      this.compiled.set(file, validate);
    }
    return validate(object) ? [] : explain(validate.errors);
  }
}

/** deployment-apps-v1.json, service-v1.json, networkpolicy-networking-v1.json, ... */
function schemaFile(object: KubeObject): string {
  const [group, version] = object.apiVersion.includes('/') ? object.apiVersion.split('/') : ['', object.apiVersion];
  const groupPart = group ? `-${group.split('.')[0]}` : '';
  return `${String(object.kind).toLowerCase()}${groupPart}-${version}.json`;
}

/** The Compose Specification schema (the one Docker Compose validates with). */
export class ComposeValidator {
  private readonly validateFn: ValidateFunction;

  constructor(schemaFile: string) {
    this.validateFn = newAjv().compile(JSON.parse(fs.readFileSync(schemaFile, 'utf8')));
  }

  /** Problems of an interpolated compose document; empty when valid. */
  validate(document: unknown): string[] {
    return this.validateFn(document) ? [] : explain(this.validateFn.errors);
  }
}
