/**
 * deploy/k8s/operators/kafka.yaml, the Strimzi Kafka the README points to,
 * checked offline against what the platform and its tests assume (the schema
 * validation of manifests.test.ts has no CRDs): three nodes, each broker and
 * controller, topics with three replicas and two in sync, the bootstrap
 * address of KAFKA_BROKERS, and the same settings as the local cluster the
 * broker-loss test runs (deploy/local/servers/kafka-cluster.sh).
 */
import fs from 'node:fs';
import path from 'node:path';
import YAML from 'yaml';
import { REPO_ROOT } from './support/tools';

interface Resource<Spec = unknown> {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace: string; labels?: Record<string, string>; annotations?: Record<string, string> };
  spec: Spec;
}

interface KafkaSpec {
  kafka: { config: Record<string, unknown>; listeners: { name: string; port: number; type: string; tls: boolean }[] };
}

interface NodePoolSpec {
  replicas: number;
  roles: string[];
  template: { pod: { affinity: { podAntiAffinity: { requiredDuringSchedulingIgnoredDuringExecution: unknown[] } } } };
}

const resources = YAML.parseAllDocuments(fs.readFileSync(path.join(REPO_ROOT, 'deploy/k8s/operators/kafka.yaml'), 'utf8')).map(
  (document) => document.toJS() as Resource,
);
const kafka = resources.find((resource) => resource.kind === 'Kafka') as Resource<KafkaSpec>;
const pools = resources.filter((resource) => resource.kind === 'KafkaNodePool') as Resource<NodePoolSpec>[];

/** The literals of the base ConfigMap mail-config. */
function baseConfig(): Record<string, string> {
  const kustomization = YAML.parse(fs.readFileSync(path.join(REPO_ROOT, 'deploy/k8s/base/kustomization.yaml'), 'utf8')) as {
    configMapGenerator: { name: string; literals: string[] }[];
  };
  const literals = kustomization.configMapGenerator.find((generator) => generator.name === 'mail-config')!.literals;
  return Object.fromEntries(literals.map((literal) => [literal.slice(0, literal.indexOf('=')), literal.slice(literal.indexOf('=') + 1)]));
}

test('one Kafka and its node pool of three KRaft nodes, each broker and controller, one per machine', () => {
  expect(resources.map((resource) => `${resource.apiVersion} ${resource.kind}`).sort()).toEqual([
    'kafka.strimzi.io/v1beta2 Kafka',
    'kafka.strimzi.io/v1beta2 KafkaNodePool',
  ]);
  expect(kafka.metadata.annotations).toMatchObject({ 'strimzi.io/node-pools': 'enabled', 'strimzi.io/kraft': 'enabled' });
  expect(pools).toHaveLength(1);
  const [pool] = pools;
  expect(pool.metadata.labels?.['strimzi.io/cluster']).toBe(kafka.metadata.name);
  expect(pool.metadata.namespace).toBe(kafka.metadata.namespace);
  expect(pool.spec.replicas).toBe(3);
  expect([...pool.spec.roles].sort()).toEqual(['broker', 'controller']);
  const antiAffinity = pool.spec.template.pod.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution;
  expect(antiAffinity).toEqual([
    expect.objectContaining({
      topologyKey: 'kubernetes.io/hostname',
      labelSelector: { matchLabels: { 'strimzi.io/cluster': kafka.metadata.name, 'strimzi.io/pool-name': pool.metadata.name } },
    }),
  ]);
});

test('topics get the replication factor and min.insync.replicas the platform creates its topics with', () => {
  const config = baseConfig();
  expect(kafka.spec.kafka.config).toMatchObject({
    'default.replication.factor': Number(config.KAFKA_TOPIC_REPLICATION_FACTOR),
    'min.insync.replicas': Number(config.KAFKA_TOPIC_MIN_INSYNC_REPLICAS),
    'unclean.leader.election.enable': false,
  });
  expect([config.KAFKA_TOPIC_REPLICATION_FACTOR, config.KAFKA_TOPIC_MIN_INSYNC_REPLICAS]).toEqual(['3', '2']);
});

test('its bootstrap Service is the KAFKA_BROKERS of the overlays', () => {
  const listener = kafka.spec.kafka.listeners.find((candidate) => candidate.type === 'internal' && !candidate.tls)!;
  const bootstrap = `${kafka.metadata.name}-kafka-bootstrap.${kafka.metadata.namespace}.svc:${listener.port}`;
  const prod = fs.readFileSync(path.join(REPO_ROOT, 'deploy/k8s/overlays/prod/config.env'), 'utf8');
  expect(prod).toContain(`\nKAFKA_BROKERS=${bootstrap}\n`);
  const dev = fs.readFileSync(path.join(REPO_ROOT, 'deploy/k8s/overlays/dev/kustomization.yaml'), 'utf8');
  expect(dev).toContain(`- KAFKA_BROKERS=${bootstrap}\n`);
});

test('the local cluster of the fault tests has the same shape: three nodes, three replicas, two in sync', () => {
  const script = fs.readFileSync(path.join(REPO_ROOT, 'deploy/local/servers/kafka-cluster.sh'), 'utf8');
  expect(script).toMatch(/^KAFKA_CLUSTER_NODES=\(1 2 3\)$/m);
  expect(script).toMatch(/^ {4}kafka_write_config "\$n" "\$voters" 3 2$/m);
});
