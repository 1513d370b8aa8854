/**
 * The container deployment, checked offline: the Kubernetes overlays rendered
 * by kustomize and validated against the strict JSON schemas of the oldest and
 * newest Kubernetes we support, docker-compose.yml against the Compose
 * Specification schema, and the project's own rules on both (every process
 * deployed with probes and resources, every variable a process reads set where
 * it runs and documented, the network policy, the Dockerfile's workspace list).
 * Each validator is also shown a broken input and must reject it.
 * Tools come from deploy/test/tools.sh (installed once under .state/tools).
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import YAML from 'yaml';
import { PROVIDERS } from '../../gateway/src/webhook/providers';
import { ComposeValidator, KubernetesValidator, type KubeObject } from './support/schemas';
import { composeEnvironment, interpolate, loadCompose, type ComposeFile } from './support/compose';
import { checkDockerfile, deployTools, kustomizeBuild, REPO_ROOT, type DeployTools, type DockerfileStage } from './support/tools';
import {
  configurationTable,
  PROCESSES,
  readByMentions,
  SERVICES,
  variablesByProcess,
  variablesDeclaredByConventions,
  variablesReadByCode,
  type ProcessName,
  type ServiceName,
  type VariableRead,
} from './support/variables';

const K8S_DIR = path.join(REPO_ROOT, 'deploy/k8s');
const OVERLAYS = fs.readdirSync(path.join(K8S_DIR, 'overlays')).sort();
const COMPOSE_FILE = path.join(REPO_ROOT, 'docker-compose.yml');

/** docs/CONVENTIONS.md ports. */
const GRPC_PORTS: Record<ServiceName, number> = {
  identity: 50051,
  campaign: 50052,
  'brand-guide': 50053,
  analytics: 50054,
  ingestion: 50055,
  delivery: 50056,
};
const OPS_PORTS: Record<ProcessName, number> = {
  gateway: 9100,
  identity: 9101,
  campaign: 9102,
  'brand-guide': 9103,
  analytics: 9104,
  ingestion: 9105,
  delivery: 9106,
};
const GATEWAY_PORT = 8080;
const AUTOSCALED: readonly ProcessName[] = ['gateway', 'ingestion', 'analytics'];
/** The Secret every overlay references and nobody commits; the keys the processes may take from it. */
const SECRET_NAME = 'mail-secrets';
const SECRET_KEYS = [
  'DATABASE_URL',
  'CLICKHOUSE_URL',
  ...PROVIDERS.flatMap((provider) => provider.variables.filter((variable) => variable.secret).map((variable) => variable.name)),
  'RECIPIENTS_DATABASE_URL',
  'SMTP_URL',
  'UNSUBSCRIBE_SIGNING_KEY',
  'TRACKING_SIGNING_KEY',
  'RECIPIENTS_ENCRYPTION_KEY',
  'BOUNCE_MAILBOX_URL',
];
/** Read by a process only in a one-shot Job, never set on its Deployment or in compose. */
const JOB_ONLY_VARIABLES: Record<string, string> = { MIGRATE_ONLY: 'db-migrate' };
/** Who may reach each service's gRPC port (NetworkPolicy). */
const GRPC_CALLERS: Record<ServiceName, string[]> = {
  identity: ['gateway'],
  campaign: ['gateway', 'ingestion', 'delivery'],
  'brand-guide': ['gateway'],
  analytics: ['gateway', 'delivery'],
  ingestion: [],
  delivery: ['gateway'],
};

interface Container {
  name: string;
  image?: string;
  env?: { name: string; value?: string; valueFrom?: Record<string, { name?: string; key: string; optional?: boolean }> }[];
  envFrom?: { configMapRef?: { name: string }; secretRef?: { name: string } }[];
  ports?: { name?: string; containerPort: number }[];
  readinessProbe?: Probe;
  livenessProbe?: Probe;
  startupProbe?: Probe;
  resources?: { requests?: Record<string, string>; limits?: Record<string, string> };
  securityContext?: { runAsNonRoot?: boolean; readOnlyRootFilesystem?: boolean; allowPrivilegeEscalation?: boolean };
}
interface Probe {
  grpc?: { port: number | string };
  httpGet?: { path: string; port: number | string };
}
interface PodSpec {
  containers: Container[];
  securityContext?: { runAsNonRoot?: boolean; runAsUser?: number };
}
type Workload = KubeObject & {
  spec: {
    replicas?: number;
    selector?: { matchLabels: Record<string, string> };
    template: { metadata: { labels: Record<string, string> }; spec: PodSpec };
  };
};
type LabelSelector = { matchLabels?: Record<string, string>; matchExpressions?: { key: string; operator: string; values?: string[] }[] };

let tools: DeployTools;
let validators: KubernetesValidator[];
const rendered = new Map<string, KubeObject[]>();

beforeAll(() => {
  tools = deployTools();
  validators = tools.kubernetesSchemas.map((dir) => new KubernetesValidator(dir));
  for (const overlay of OVERLAYS) rendered.set(overlay, render(path.join(K8S_DIR, 'overlays', overlay)));
}, 15 * 60_000);

function render(dir: string): KubeObject[] {
  return YAML.parseAllDocuments(kustomizeBuild(tools.kustomize, dir))
    .map((document) => document.toJS() as KubeObject | null)
    .filter((object): object is KubeObject => object !== null);
}

function objectsOf(overlay: string): KubeObject[] {
  return rendered.get(overlay)!;
}

function find<T extends KubeObject = KubeObject>(objects: KubeObject[], kind: string, name: string): T | undefined {
  return objects.find((o) => o.kind === kind && o.metadata.name === name) as T | undefined;
}

function workloads(objects: KubeObject[]): Workload[] {
  return objects.filter((o) => o.kind === 'Deployment' || o.kind === 'Job') as Workload[];
}

function deployment(objects: KubeObject[], name: string): Workload {
  const found = find<Workload>(objects, 'Deployment', name);
  if (!found) throw new Error(`no Deployment ${name}`);
  return found;
}

/** Problems of every object against every supported Kubernetes version, plus the project's rules. */
function problems(objects: KubeObject[]): string[] {
  const found: string[] = [];
  for (const object of objects) {
    const where = `${object.kind}/${object.metadata?.name}`;
    for (const validator of validators) {
      for (const problem of validator.validate(object)) found.push(`${where} (Kubernetes ${validator.version}): ${problem}`);
    }
    for (const problem of ruleViolations(object)) found.push(`${where}: ${problem}`);
  }
  return found;
}

/** What the schema allows but this project does not. */
function ruleViolations(object: KubeObject): string[] {
  if (object.kind !== 'Deployment' && object.kind !== 'Job') return [];
  const pod = (object as Workload).spec?.template?.spec;
  const found: string[] = [];
  if (!pod?.securityContext?.runAsNonRoot) found.push('pod securityContext.runAsNonRoot is not true');
  for (const container of pod?.containers ?? []) {
    if (!container.image) found.push(`container ${container.name} has no image`);
    const security = container.securityContext ?? {};
    if (security.readOnlyRootFilesystem !== true) found.push(`container ${container.name}: readOnlyRootFilesystem is not true`);
    if (security.allowPrivilegeEscalation !== false) found.push(`container ${container.name}: allowPrivilegeEscalation is not false`);
    for (const kind of ['requests', 'limits'] as const) {
      for (const resource of ['cpu', 'memory']) {
        if (!container.resources?.[kind]?.[resource]) found.push(`container ${container.name} has no ${kind}.${resource}`);
      }
    }
  }
  return found;
}

function envNames(container: Container, objects: KubeObject[]): Set<string> {
  const names = new Set((container.env ?? []).map((entry) => entry.name));
  for (const source of container.envFrom ?? []) {
    const configMap = source.configMapRef && find(objects, 'ConfigMap', source.configMapRef.name);
    for (const key of Object.keys((configMap?.data as Record<string, string> | undefined) ?? {})) names.add(key);
  }
  return names;
}

/** The value a container sees for a variable: a literal, or the referenced ConfigMap entry. */
function envValue(container: Container, objects: KubeObject[], variable: string): string | undefined {
  const entry = container.env?.find((e) => e.name === variable);
  if (!entry) return undefined;
  if (entry.value !== undefined) return entry.value;
  const ref = entry.valueFrom?.configMapKeyRef;
  if (ref) return (find(objects, 'ConfigMap', ref.name!)?.data as Record<string, string> | undefined)?.[ref.key];
  return undefined;
}

function selects(selector: LabelSelector | undefined, labels: Record<string, string>): boolean {
  if (!selector) return false;
  const byLabels = Object.entries(selector.matchLabels ?? {}).every(([key, value]) => labels[key] === value);
  const byExpressions = (selector.matchExpressions ?? []).every((e) => {
    if (e.operator === 'In') return e.values!.includes(labels[e.key]);
    if (e.operator === 'NotIn') return !e.values!.includes(labels[e.key]);
    if (e.operator === 'Exists') return e.key in labels;
    return !(e.key in labels);
  });
  return byLabels && byExpressions;
}

type IngressRule = {
  from?: { podSelector?: LabelSelector; namespaceSelector?: LabelSelector; ipBlock?: unknown }[];
  ports?: { port?: string | number }[];
};
type NetworkPolicy = KubeObject & { spec: { podSelector: LabelSelector; policyTypes: string[]; ingress?: IngressRule[] } };

/** The NetworkPolicies restricting ingress to pods labelled `labels`. */
function ingressPolicies(objects: KubeObject[], labels: Record<string, string>): NetworkPolicy[] {
  return (objects.filter((o) => o.kind === 'NetworkPolicy') as NetworkPolicy[]).filter(
    (p) => selects(p.spec.podSelector, labels) && p.spec.policyTypes.includes('Ingress'),
  );
}

/** Whether `rule` lets traffic through to the port called `name`, numbered `number`. */
function coversPort(rule: IngressRule, name: string, number: number): boolean {
  return !rule.ports || rule.ports.some((p) => p.port === undefined || p.port === name || p.port === number);
}

function allReads(): VariableRead[] {
  return [...variablesReadByCode(), ...variablesDeclaredByConventions()];
}

/** process -> variables that must be set where it runs (job-only variables excluded). */
function requiredByProcess(): Map<ProcessName, Set<string>> {
  const byProcess = variablesByProcess(allReads());
  for (const set of byProcess.values()) for (const variable of Object.keys(JOB_ONLY_VARIABLES)) set.delete(variable);
  return byProcess;
}

function sources(variable: string, process: ProcessName): string {
  const found = allReads().filter((r) => r.variable === variable && r.processes.includes(process));
  return [...new Set(found.map((r) => r.source))].join(', ');
}

describe('Kubernetes manifests (kustomize overlays)', () => {
  test('the tools validate against at least two Kubernetes versions, and every overlay renders', () => {
    expect(validators.length).toBeGreaterThanOrEqual(2);
    expect(OVERLAYS).toEqual(expect.arrayContaining(['dev', 'prod']));
    for (const overlay of OVERLAYS) expect(objectsOf(overlay).length).toBeGreaterThan(20);
  });

  test.each(OVERLAYS)('%s: every object is valid against the strict Kubernetes schemas and the project rules', (overlay) => {
    expect(problems(objectsOf(overlay))).toEqual([]);
  });

  test('the validation rejects broken objects', () => {
    const broken = (mutate: (d: Workload) => void): string[] => {
      const copy = structuredClone(deployment(objectsOf('prod'), 'identity'));
      mutate(copy);
      return problems([copy]);
    };
    const container = (d: Workload): Container => d.spec.template.spec.containers[0];
    // A probe port given as a string where the API wants an integer.
    expect(broken((d) => (container(d).readinessProbe!.grpc!.port = '50051')).join('\n')).toMatch(/grpc\/port must be integer/);
    // An unknown (misspelled) field.
    expect(broken((d) => ((d.spec as Record<string, unknown>).replica = 2)).join('\n')).toMatch(/additional properties.*"replica"/);
    // A container without its required name.
    expect(broken((d) => delete (container(d) as Partial<Container>).name).join('\n')).toMatch(/required.*"name"/);
    // A container without image: valid for the API, refused by the project rules.
    expect(broken((d) => delete container(d).image)).toContainEqual(expect.stringMatching(/has no image/));
    // A wrong type in a kind we only use in Jobs and HPAs.
    const hpa = structuredClone(
      find<KubeObject & { spec: Record<string, unknown> }>(objectsOf('prod'), 'HorizontalPodAutoscaler', 'gateway')!,
    );
    hpa.spec.maxReplicas = 'ten';
    expect(problems([hpa]).join('\n')).toMatch(/maxReplicas must be integer/);
    // A kind no schema knows.
    expect(problems([{ apiVersion: 'apps/v1', kind: 'Deploymnet', metadata: { name: 'x' } }]).join('\n')).toMatch(/no schema/);
  });

  test('a broken overlay fails: kustomize errors surface, and a bad patch is caught after rendering', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'mail-k8s-'));
    try {
      const base = path.relative(dir, path.join(K8S_DIR, 'base'));
      fs.writeFileSync(
        path.join(dir, 'kustomization.yaml'),
        YAML.stringify({
          resources: [base],
          patches: [
            {
              target: { kind: 'Deployment', name: 'campaign' },
              patch: YAML.stringify([{ op: 'replace', path: '/spec/template/spec/containers/0/readinessProbe/grpc/port', value: 'grpc' }]),
            },
          ],
        }),
      );
      expect(problems(render(dir)).join('\n')).toMatch(/Deployment\/campaign .*grpc\/port must be integer/);

      fs.writeFileSync(path.join(dir, 'kustomization.yaml'), YAML.stringify({ resources: [base], patches: [{ path: 'missing.yaml' }] }));
      expect(() => render(dir)).toThrow(/kustomize build .* failed/);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  test.each(OVERLAYS)('%s: every process has a Deployment and a Service, with probes, resources and its ports', (overlay) => {
    const objects = objectsOf(overlay);
    for (const process of PROCESSES) {
      const d = deployment(objects, process);
      const [container] = d.spec.template.spec.containers;
      const podLabels = d.spec.template.metadata.labels;
      expect(selects(d.spec.selector, podLabels)).toBe(true);
      expect(envValue(container, objects, 'SERVICE')).toBe(process);
      expect(container.resources?.requests).toEqual(expect.objectContaining({ cpu: expect.any(String), memory: expect.any(String) }));
      expect(container.resources?.limits).toEqual(expect.objectContaining({ cpu: expect.any(String), memory: expect.any(String) }));

      const service = find<
        KubeObject & { spec: { selector: Record<string, string>; ports: { port: number; targetPort: string | number }[] } }
      >(objects, 'Service', process);
      expect(service).toBeDefined();
      expect(selects({ matchLabels: service!.spec.selector }, podLabels)).toBe(true);
      const portNames = new Set((container.ports ?? []).map((p) => p.name));
      for (const port of service!.spec.ports) expect(portNames).toContain(port.targetPort);

      const portNumber = (name: string): number | undefined => container.ports?.find((p) => p.name === name)?.containerPort;
      expect(portNumber('ops')).toBe(OPS_PORTS[process]);
      expect(envValue(container, objects, 'OPS_PORT')).toBe(String(OPS_PORTS[process]));
      if (process === 'gateway') {
        expect(portNumber('http')).toBe(GATEWAY_PORT);
        expect(envValue(container, objects, 'PORT')).toBe(String(GATEWAY_PORT));
        expect(container.readinessProbe?.httpGet).toEqual({ path: '/readyz', port: 'http' });
        expect(container.livenessProbe?.httpGet).toEqual({ path: '/healthz', port: 'http' });
        // /metrics is served on the ops port only, which the gateway's Service does not expose.
        expect(service!.spec.ports.map((port) => port.targetPort)).not.toContain('ops');
      } else {
        const grpcPort = GRPC_PORTS[process];
        expect(portNumber('grpc')).toBe(grpcPort);
        const addressVariable = `${process.toUpperCase().replace('-', '_')}_GRPC_ADDR`;
        expect(envValue(container, objects, addressVariable)).toBe(`0.0.0.0:${grpcPort}`);
        expect(container.readinessProbe?.grpc).toEqual({ port: grpcPort });
        expect(container.startupProbe?.grpc).toEqual({ port: grpcPort });
        expect(container.livenessProbe?.httpGet).toEqual({ path: '/healthz', port: 'ops' });
      }
    }
  });

  test.each(OVERLAYS)('%s: the addresses a process dials name a Service port that leads to the right container', (overlay) => {
    const objects = objectsOf(overlay);
    for (const process of PROCESSES) {
      const container = deployment(objects, process).spec.template.spec.containers[0];
      for (const service of SERVICES) {
        const variable = `${service.toUpperCase().replace('-', '_')}_GRPC_ADDR`;
        const value = envValue(container, objects, variable);
        if (value === undefined || process === service) continue;
        const target = find<KubeObject & { spec: { ports: { name: string; port: number }[] } }>(objects, 'Service', service);
        expect(`${process} ${variable}=${value}`).toBe(`${process} ${variable}=${service}:${GRPC_PORTS[service]}`);
        expect(target?.spec.ports).toContainEqual(expect.objectContaining({ name: 'grpc', port: GRPC_PORTS[service] }));
      }
    }
  });

  test.each(OVERLAYS)(
    "%s: the Services dialled over gRPC are headless, so clients balance over the pods; the gateway's is not",
    (overlay) => {
      const objects = objectsOf(overlay);
      const addressVariable = (service: ServiceName): string => `${service.toUpperCase().replace('-', '_')}_GRPC_ADDR`;
      const dialled = SERVICES.filter((service) =>
        PROCESSES.some(
          (process) =>
            process !== service &&
            envValue(deployment(objects, process).spec.template.spec.containers[0], objects, addressVariable(service)),
        ),
      );
      expect([...dialled].sort()).toEqual(['analytics', 'brand-guide', 'campaign', 'delivery', 'identity']);
      type ServiceSpec = { clusterIP?: string; ports: { port: number; targetPort: string | number }[] };
      for (const service of dialled) {
        const { spec } = find<KubeObject & { spec: ServiceSpec }>(objects, 'Service', service)!;
        expect(`${service} clusterIP: ${spec.clusterIP}`).toBe(`${service} clusterIP: None`);
        // A headless Service maps no ports: clients reach the container's port under the Service's number.
        const container = deployment(objects, service).spec.template.spec.containers[0];
        for (const port of spec.ports) expect(port.port).toBe(container.ports?.find((p) => p.name === port.targetPort)?.containerPort);
      }
      // The gateway's Service keeps its virtual IP, which maps port 80 to the container's 8080.
      expect(find<KubeObject & { spec: ServiceSpec }>(objects, 'Service', 'gateway')!.spec.clusterIP).toBeUndefined();
    },
  );

  test.each(OVERLAYS)('%s: autoscalers, disruption budgets and replica counts', (overlay) => {
    const objects = objectsOf(overlay);
    for (const process of PROCESSES) {
      const d = deployment(objects, process);
      const pdb = objects.find(
        (o) =>
          o.kind === 'PodDisruptionBudget' && selects((o.spec as { selector: LabelSelector }).selector, d.spec.template.metadata.labels),
      );
      expect(`${process}: ${pdb ? 'has' : 'has no'} PodDisruptionBudget`).toBe(`${process}: has PodDisruptionBudget`);
      const hpa = objects.find(
        (o) => o.kind === 'HorizontalPodAutoscaler' && (o.spec as { scaleTargetRef: { name: string } }).scaleTargetRef.name === process,
      ) as (KubeObject & { spec: { minReplicas: number; maxReplicas: number; scaleTargetRef: { kind: string } } }) | undefined;
      if (AUTOSCALED.includes(process)) {
        expect(hpa?.apiVersion).toBe('autoscaling/v2');
        expect(hpa?.spec.scaleTargetRef.kind).toBe('Deployment');
        expect(hpa!.spec.maxReplicas).toBeGreaterThanOrEqual(hpa!.spec.minReplicas);
        // The autoscaler owns the count; a replicas field would reset it at every apply.
        expect(`${process} replicas: ${d.spec.replicas}`).toBe(`${process} replicas: undefined`);
      } else {
        expect(hpa).toBeUndefined();
        expect(d.spec.replicas).toBeGreaterThanOrEqual(1);
      }
    }
    // A consumer group never uses more consumers than the topic has partitions.
    const config = objects.find((o) => o.kind === 'ConfigMap')!.data as Record<string, string>;
    const ingestionHpa = find(objects, 'HorizontalPodAutoscaler', 'ingestion')!.spec as { maxReplicas: number };
    expect(ingestionHpa.maxReplicas).toBeLessThanOrEqual(Number(config.KAFKA_TOPIC_PARTITIONS));
  });

  test.each(OVERLAYS)('%s: only the gateway reaches the gRPC ports (and ingestion reaches campaign)', (overlay) => {
    const objects = objectsOf(overlay);
    const podLabels = (name: string): Record<string, string> => deployment(objects, name).spec.template.metadata.labels;
    for (const service of SERVICES) {
      const applying = ingressPolicies(objects, podLabels(service));
      expect(applying.length).toBeGreaterThan(0); // otherwise everything may connect
      const rules = applying.flatMap((p) => p.spec.ingress ?? []);
      const callers = new Set<string>();
      for (const rule of rules.filter((r) => coversPort(r, 'grpc', GRPC_PORTS[service]))) {
        if (!rule.from || rule.from.length === 0) callers.add('anyone');
        for (const peer of rule.from ?? []) {
          if (peer.ipBlock || peer.namespaceSelector || !peer.podSelector) {
            callers.add('outside the namespace');
            continue;
          }
          for (const process of PROCESSES) if (selects(peer.podSelector, podLabels(process))) callers.add(process);
        }
      }
      expect(`${service} gRPC callers: ${[...callers].sort().join(', ')}`).toBe(
        `${service} gRPC callers: ${[...GRPC_CALLERS[service]].sort().join(', ')}`,
      );
    }
  });

  test.each(OVERLAYS)("%s: only the monitoring namespace reaches the ops ports (/metrics), the gateway's included", (overlay) => {
    const objects = objectsOf(overlay);
    const monitoring = { 'kubernetes.io/metadata.name': 'monitoring' };
    for (const process of PROCESSES) {
      const rules = ingressPolicies(objects, deployment(objects, process).spec.template.metadata.labels).flatMap(
        (p) => p.spec.ingress ?? [],
      );
      const callers = new Set<string>();
      for (const rule of rules.filter((r) => coversPort(r, 'ops', OPS_PORTS[process]))) {
        if (!rule.from || rule.from.length === 0) callers.add('anyone');
        for (const peer of rule.from ?? []) {
          const onlyMonitoring = !peer.ipBlock && !peer.podSelector && selects(peer.namespaceSelector, monitoring);
          callers.add(onlyMonitoring && !selects(peer.namespaceSelector, { 'kubernetes.io/metadata.name': 'x' }) ? 'monitoring' : 'others');
        }
      }
      expect(`${process} ops callers: ${[...callers].sort().join(', ')}`).toBe(`${process} ops callers: monitoring`);
    }
  });

  test.each(OVERLAYS)(
    '%s: configuration comes from the generated ConfigMap and the Secret mail-secrets, which git never holds',
    (overlay) => {
      const objects = objectsOf(overlay);
      expect(objects.filter((o) => o.kind === 'Secret')).toEqual([]);
      for (const workload of workloads(objects)) {
        for (const container of workload.spec.template.spec.containers) {
          for (const entry of container.env ?? []) {
            const where = `${workload.kind}/${workload.metadata.name} ${container.name} ${entry.name}`;
            const configRef = entry.valueFrom?.configMapKeyRef;
            if (configRef) {
              const configMap = find(objects, 'ConfigMap', configRef.name!);
              expect(`${where}: ${configMap ? 'found' : 'missing'} ConfigMap ${configRef.name}`).toBe(
                `${where}: found ConfigMap ${configRef.name}`,
              );
              expect(Object.keys(configMap!.data as object)).toContain(configRef.key);
            }
            const secretRef = entry.valueFrom?.secretKeyRef;
            if (secretRef)
              expect(`${where}: ${secretRef.name}/${secretRef.key}`).toMatch(new RegExp(`: ${SECRET_NAME}/(${SECRET_KEYS.join('|')})$`));
            if (SECRET_KEYS.includes(entry.name))
              expect(`${where} from a Secret: ${Boolean(secretRef)}`).toBe(`${where} from a Secret: true`);
          }
        }
      }
    },
  );

  test('prod runs NODE_ENV=production without dev auth, on a pinned image; dev auth appears only outside prod', () => {
    const prod = objectsOf('prod');
    const gateway = deployment(prod, 'gateway').spec.template.spec.containers[0];
    expect(envValue(gateway, prod, 'NODE_ENV')).toBe('production');
    expect(['', '0', 'false', 'no', 'off', undefined]).toContain(envValue(gateway, prod, 'DEV_AUTH_ENABLED')?.toLowerCase());
    for (const workload of workloads(prod)) {
      for (const container of workload.spec.template.spec.containers) {
        expect(`${container.name}: ${container.image}`).toMatch(/^[^:]+: \S+(:(?!latest$)[\w.-]+|@sha256:[0-9a-f]{64})$/);
        expect(['', '0', 'false', 'no', 'off', undefined]).toContain(envValue(container, prod, 'DEV_AUTH_ENABLED')?.toLowerCase());
      }
    }
    for (const overlay of OVERLAYS) {
      const objects = objectsOf(overlay);
      const container = deployment(objects, 'gateway').spec.template.spec.containers[0];
      // The gateway refuses this combination at start-up; the manifests must not ship it.
      const devAuth = ['1', 'true', 'yes', 'on'].includes(envValue(container, objects, 'DEV_AUTH_ENABLED')?.toLowerCase() ?? '');
      expect(`${overlay}: dev auth ${devAuth}, NODE_ENV ${envValue(container, objects, 'NODE_ENV')}`).not.toMatch(
        /dev auth true, NODE_ENV production/,
      );
    }
  });

  test.each(OVERLAYS)('%s: every variable a process reads is set on its Deployment', (overlay) => {
    const objects = objectsOf(overlay);
    const missing: string[] = [];
    for (const [process, variables] of requiredByProcess()) {
      const names = envNames(deployment(objects, process).spec.template.spec.containers[0], objects);
      for (const variable of variables) {
        if (!names.has(variable))
          missing.push(`${process} reads ${variable} (${sources(variable, process)}) but its Deployment does not set it`);
      }
    }
    expect(missing).toEqual([]);
  });

  test.each(OVERLAYS)(
    '%s: the setup Jobs: migrations (MIGRATE_ONLY=1) for each PostgreSQL service, Kafka topics, ClickHouse schema',
    (overlay) => {
      const objects = objectsOf(overlay);
      const postgresServices = [...requiredByProcess()].filter(([, v]) => v.has('DATABASE_URL')).map(([p]) => p);
      expect(postgresServices.length).toBeGreaterThan(0);
      const migrate = find<Workload>(objects, 'Job', JOB_ONLY_VARIABLES.MIGRATE_ONLY);
      const containers = migrate!.spec.template.spec.containers;
      expect(containers.map((c) => envValue(c, objects, 'SERVICE')).sort()).toEqual([...postgresServices].sort());
      for (const container of containers) {
        expect(envValue(container, objects, 'MIGRATE_ONLY')).toBe('1');
        expect(envNames(container, objects)).toContain('DATABASE_URL');
      }
      const topics = find<Workload>(objects, 'Job', 'kafka-topics')!.spec.template.spec.containers[0];
      expect(topics.image).toMatch(/^apache\/kafka:/);
      expect(JSON.stringify(topics)).toContain('kafka-topics.sh');
      for (const variable of ['KAFKA_BROKERS', 'KAFKA_EVENTS_TOPIC', 'KAFKA_DLQ_TOPIC'])
        expect(envNames(topics, objects)).toContain(variable);
      const clickhouse = find<Workload>(objects, 'Job', 'clickhouse-schema')!.spec.template.spec.containers[0];
      expect(JSON.stringify(clickhouse)).toContain('ensureEventSchema');
      for (const variable of ['CLICKHOUSE_URL', 'CLICKHOUSE_DATABASE']) expect(envNames(clickhouse, objects)).toContain(variable);
    },
  );
});

describe('docker-compose.yml', () => {
  let validator: ComposeValidator;
  let compose: ComposeFile;

  beforeAll(() => {
    validator = new ComposeValidator(tools.composeSchema);
    // As Docker Compose reads it with none of the variables set in the shell.
    compose = loadCompose(COMPOSE_FILE);
  });

  test('is valid against the Compose Specification schema, with and without the variables set', () => {
    expect(validator.validate(compose)).toEqual([]);
    const everything = Object.fromEntries(
      [...fs.readFileSync(COMPOSE_FILE, 'utf8').matchAll(/\$\{([A-Z][A-Z0-9_]*)/g)].map(([, name]) => [name, '1']),
    );
    expect(validator.validate(loadCompose(COMPOSE_FILE, everything))).toEqual([]);
  });

  test('the validation rejects broken files', () => {
    const broken = (mutate: (c: ComposeFile) => void): string[] => {
      const copy = structuredClone(compose);
      mutate(copy);
      return validator.validate(copy);
    };
    expect(broken((c) => (c.services.gateway.restart_policy = 'always'))).not.toEqual([]);
    expect(broken((c) => ((c.services.gateway.healthcheck as Record<string, unknown>).interval = 5)).join('\n')).toMatch(
      /interval must be string/,
    );
    expect(
      broken((c) => ((c.services.gateway.depends_on as Record<string, { condition: string }>).identity.condition = 'service_ready')),
    ).not.toEqual([]);
    expect(() => interpolate('${UNCLOSED', {})).toThrow(/unclosed/);
    expect(interpolate('${A:-${B:-x}}-$$HOME', {})).toBe('x-$HOME');
  });

  test('runs every process and the servers, each with a health check, started in dependency order', () => {
    const services = compose.services;
    for (const name of [...PROCESSES, 'postgres', 'kafka', 'clickhouse']) {
      expect(`${name}: ${services[name]?.healthcheck?.test ? 'health check' : 'none'}`).toBe(`${name}: health check`);
    }
    expect(services.postgres.image).toMatch(/^postgres:/);
    expect(services.kafka.image).toMatch(/^apache\/kafka:/);
    expect(services.clickhouse.image).toMatch(/^clickhouse\/clickhouse-server:/);
    for (const process of PROCESSES) {
      expect(composeEnvironment(services[process]).SERVICE).toBe(process);
      const dependsOn = services[process].depends_on as Record<string, { condition?: string }>;
      expect(Object.keys(dependsOn ?? {}).length).toBeGreaterThan(0);
      for (const [target, { condition }] of Object.entries(dependsOn)) {
        expect(Object.keys(services)).toContain(target);
        expect(['service_healthy', 'service_completed_successfully']).toContain(condition);
        if (condition === 'service_healthy') expect(services[target].healthcheck?.test).toBeDefined();
      }
    }
    for (const service of SERVICES) expect(Object.keys(services.gateway.depends_on ?? {}).concat('ingestion')).toContain(service);
  });

  test('ClickHouse reads the storage profile that deploy/local/infra.sh installs', () => {
    const mount = (compose.services.clickhouse.volumes as string[]).find((volume) => volume.includes('storage-profile.xml'));
    expect(mount).toBe('./deploy/clickhouse/storage-profile.xml:/etc/clickhouse-server/users.d/storage-profile.xml:ro');
    expect(fs.existsSync(path.join(REPO_ROOT, 'deploy/clickhouse/storage-profile.xml'))).toBe(true);
  });

  test('services bind 0.0.0.0 on their ports and the dialled addresses name compose services', () => {
    for (const process of PROCESSES) {
      const env = composeEnvironment(compose.services[process]);
      for (const service of SERVICES) {
        const variable = `${service.toUpperCase().replace('-', '_')}_GRPC_ADDR`;
        if (env[variable] === undefined) continue;
        expect(`${process} ${variable}=${env[variable]}`).toBe(
          `${process} ${variable}=${process === service ? '0.0.0.0' : service}:${GRPC_PORTS[service]}`,
        );
      }
      expect(env.OPS_PORT).toBe(String(OPS_PORTS[process]));
    }
    expect(composeEnvironment(compose.services.gateway).PORT).toBe(String(GATEWAY_PORT));
  });

  test('every variable a process reads is set on its compose service', () => {
    const missing: string[] = [];
    for (const [process, variables] of requiredByProcess()) {
      const env = composeEnvironment(compose.services[process]);
      for (const variable of variables) {
        if (!(variable in env))
          missing.push(`${process} reads ${variable} (${sources(variable, process)}) but docker-compose.yml does not set it`);
      }
    }
    expect(missing).toEqual([]);
  });
});

describe('Dockerfile', () => {
  const dockerfile = path.join(REPO_ROOT, 'Dockerfile');
  let stages: DockerfileStage[];

  beforeAll(() => {
    stages = checkDockerfile(tools.dockerfileCheck, dockerfile);
  });

  const stage = (name: string): DockerfileStage => {
    const found = stages.find((s) => s.name === name);
    if (!found) throw new Error(`the Dockerfile has no stage ${name}`);
    return found;
  };

  test('parses and lints cleanly with BuildKit, which rejects a broken Dockerfile', () => {
    expect(stages.map((s) => s.name)).toEqual(expect.arrayContaining(['manifests', 'deps', 'build', 'runtime']));
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'mail-dockerfile-'));
    try {
      const broken = (from: string, to: string): string => {
        const file = path.join(dir, 'Dockerfile');
        const text = fs.readFileSync(dockerfile, 'utf8');
        expect(text).toContain(from);
        fs.writeFileSync(file, text.replace(from, to));
        return file;
      };
      expect(() => checkDockerfile(tools.dockerfileCheck, broken('COPY --from=deps', 'COPY --form=deps'))).toThrow(/unknown flag: --form/);
      expect(() => checkDockerfile(tools.dockerfileCheck, broken('COPY --from=deps', 'COPY --from=dep'))).toThrow(/names no earlier stage/);
      expect(() => checkDockerfile(tools.dockerfileCheck, broken('type=cache', 'type=cash'))).toThrow(/mount type/);
      expect(() => checkDockerfile(tools.dockerfileCheck, broken('EOF\n\nCOPY --from=deps', '\nCOPY --from=deps'))).toThrow(/heredoc/);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  test('copies the package.json of every workspace before npm ci, and ships every process', () => {
    const workspaces = (JSON.parse(fs.readFileSync(path.join(REPO_ROOT, 'package.json'), 'utf8')) as { workspaces: string[] }).workspaces;
    for (const workspace of workspaces) expect(stage('manifests').commands).toContain(`COPY ${workspace}/package.json ${workspace}/`);
    expect(stage('deps').commands.join('\n')).toMatch(/npm ci --omit=dev/);
    expect(stage('build').commands.join('\n')).toMatch(/npm run build/);
    const copyLoop = /for ws in ([^;]*);/.exec(stage('build').commands.join('\n'))?.[1].split(/\s+/) ?? [];
    const start = stage('runtime').files['/usr/local/bin/mail-process'];
    expect(start).toBeDefined();
    for (const process of PROCESSES) {
      expect(copyLoop).toContain(process === 'gateway' ? 'gateway' : `services/${process}`);
      // A case branch of the start script names the process.
      expect(start).toMatch(new RegExp(`^\\s*(\\S+ \\| )*${process}( \\| \\S+)*\\)`, 'm'));
    }
  });

  test('the build context leaves out dependencies, build output, local state and secrets', () => {
    const ignored = fs
      .readFileSync(path.join(REPO_ROOT, '.dockerignore'), 'utf8')
      .split('\n')
      .map((line) => line.trim());
    for (const pattern of ['.git', '.state', '**/node_modules', '**/dist', '.env']) expect(ignored).toContain(pattern);
  });

  test('the runtime stage runs as a non-root user, with a health check and no package manager', () => {
    const last = stages[stages.length - 1];
    expect(last.name).toBe('runtime');
    const users = last.commands.filter((c) => c.startsWith('USER '));
    expect(users.at(-1)).toMatch(/^USER (?!0\b|root\b)\S+/);
    expect(last.commands.some((c) => c.startsWith('HEALTHCHECK'))).toBe(true);
    expect(last.commands.join('\n')).toMatch(/rm -rf .*\/usr\/local\/bin\/npm/);
  });
});

describe('the configuration table of docs/configuration.md', () => {
  test('lists every variable, with the processes that read it and the default of the code', () => {
    const { file, rows } = configurationTable();
    const problemsFound: string[] = [];
    const reads = allReads();
    for (const [process, variables] of variablesByProcess(reads)) {
      for (const variable of variables) {
        const row = rows.get(variable);
        if (!row)
          problemsFound.push(`${variable} (read by ${process}: ${sources(variable, process)}) is missing from the table in ${file}`);
        else if (!readByMentions(row.readByCell, process)) problemsFound.push(`${file}: ${variable} does not say that ${process} reads it`);
      }
    }
    for (const read of reads) {
      const row = rows.get(read.variable);
      if (row && read.codeDefault !== undefined && read.codeDefault !== '' && !row.defaultCell.includes(read.codeDefault)) {
        problemsFound.push(
          `${file}: the default of ${read.variable} is ${read.codeDefault} in ${read.source}, the table says ${row.defaultCell}`,
        );
      }
    }
    expect(problemsFound).toEqual([]);
  });
});
