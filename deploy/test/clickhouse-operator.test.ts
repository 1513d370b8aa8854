/**
 * deploy/k8s/operators/clickhouse.yaml, the ClickHouse of the prod overlay's
 * cluster mode for the Altinity operator. No schema covers the operator's
 * resources, so this checks what the platform relies on: the cluster the
 * overlay names, with 2 shards of 2 replicas, coordinated by the Keeper
 * installation beside it, with the storage profile of deploy/clickhouse, and
 * the server names the README's CLICKHOUSE_URL lists.
 */
import fs from 'node:fs';
import path from 'node:path';
import YAML from 'yaml';
import { clickHouseReleaseLine } from '@mail/local';
import { loadCompose } from './support/compose';

const REPO_ROOT = path.resolve(__dirname, '..', '..');
const MANIFEST = path.join(REPO_ROOT, 'deploy/k8s/operators/clickhouse.yaml');

interface Resource {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string };
  spec: {
    configuration: {
      clusters: { name: string; layout: { shardsCount?: number; replicasCount?: number } }[];
      zookeeper?: { nodes: { host: string; port: number }[] };
      settings?: Record<string, unknown>;
      profiles?: Record<string, unknown>;
      users?: Record<string, unknown>;
    };
    templates: { podTemplates: { spec: { containers: { image: string }[] } }[] };
  };
}

const resources = YAML.parseAllDocuments(fs.readFileSync(MANIFEST, 'utf8'))
  .map((document) => document.toJS() as Resource | null)
  .filter((resource): resource is Resource => resource !== null);

function only(kind: string): Resource {
  const found = resources.filter((resource) => resource.kind === kind);
  expect(found).toHaveLength(1);
  return found[0];
}

/** KEY=value lines of an env file. */
function envFile(file: string): Record<string, string> {
  return Object.fromEntries(
    fs
      .readFileSync(path.join(REPO_ROOT, file), 'utf8')
      .split('\n')
      .filter((line) => /^[A-Z][A-Z0-9_]*=/.test(line))
      .map((line) => [line.slice(0, line.indexOf('=')), line.slice(line.indexOf('=') + 1)]),
  );
}

const installation = only('ClickHouseInstallation');
const keeper = only('ClickHouseKeeperInstallation');

test('the installation and its Keeper are the Altinity operator resources, in one namespace', () => {
  expect(installation.apiVersion).toBe('clickhouse.altinity.com/v1');
  expect(keeper.apiVersion).toBe('clickhouse-keeper.altinity.com/v1');
  expect(resources.map((resource) => resource.kind).sort()).toEqual(['ClickHouseInstallation', 'ClickHouseKeeperInstallation']);
  expect(installation.metadata.namespace).toBeDefined();
  expect(keeper.metadata.namespace).toBe(installation.metadata.namespace);
});

test('its cluster is the CLICKHOUSE_CLUSTER of the prod overlay, 2 shards of 2 replicas', () => {
  const cluster = envFile('deploy/k8s/overlays/prod/config.env').CLICKHOUSE_CLUSTER;
  expect(cluster).toBeTruthy();
  expect(installation.spec.configuration.clusters).toEqual([{ name: cluster, layout: { shardsCount: 2, replicasCount: 2 } }]);
  // The operator writes the macros {shard} and {replica} per server; one value for all would break replication.
  expect(Object.keys(installation.spec.configuration.settings ?? {}).filter((key) => key.startsWith('macros'))).toEqual([]);
});

test('Keeper: a quorum of three, the client Service and port the installation uses', () => {
  const [keeperCluster] = keeper.spec.configuration.clusters;
  expect(keeperCluster.layout.replicasCount).toBe(3);
  const port = Number(keeper.spec.configuration.settings?.['keeper_server/tcp_port']);
  expect(installation.spec.configuration.zookeeper?.nodes).toEqual([{ host: `keeper-${keeper.metadata.name}`, port }]);
});

test('the servers read the storage profile of deploy/clickhouse', () => {
  const profile = fs.readFileSync(path.join(REPO_ROOT, 'deploy/clickhouse/storage-profile.xml'), 'utf8');
  const blockSize = /<min_compress_block_size>(\d+)<\/min_compress_block_size>/.exec(profile)?.[1];
  expect(blockSize).toBeDefined();
  expect(String(installation.spec.configuration.profiles?.['default/min_compress_block_size'])).toBe(blockSize);
});

test('images are pinned, and the README lists every server in CLICKHOUSE_URL with the user of the installation', () => {
  for (const resource of resources) {
    for (const template of resource.spec.templates.podTemplates) {
      for (const container of template.spec.containers) expect(container.image).toMatch(/^clickhouse\/clickhouse-(server|keeper):\d+\.\d+/);
    }
  }
  const readme = fs.readFileSync(path.join(REPO_ROOT, 'deploy/k8s/README.md'), 'utf8');
  const url = /CLICKHOUSE_URL='([^']*)'/.exec(readme)?.[1] ?? '';
  const [{ name: cluster }] = installation.spec.configuration.clusters;
  const chi = installation.metadata.name;
  const namespace = installation.metadata.namespace!;
  const servers = ['0-0', '0-1', '1-0', '1-1'].map((host) => `chi-${chi}-${cluster}-${host}.${namespace}.svc:8123`);
  expect(url.split(',').map((server) => server.replace(/^http:\/\/[^@]*@/, ''))).toEqual(servers);
  for (const server of url.split(',')) expect(server).toMatch(/^http:\/\/mail:[^@]*@/);
  expect(Object.keys(installation.spec.configuration.users ?? {})).toContain('mail/password_sha256_hex');
});

test('the images here and in docker-compose.yml are of the ClickHouse release line npm test runs (deploy/local/servers/clickhouse.sh, CHDB_CORE_VERSION)', () => {
  const line = clickHouseReleaseLine();
  const images = resources.flatMap((resource) =>
    resource.spec.templates.podTemplates.flatMap((template) => template.spec.containers.map((container) => container.image)),
  );
  images.push(loadCompose(path.join(REPO_ROOT, 'docker-compose.yml')).services.clickhouse.image!);
  expect(images).toHaveLength(3);
  for (const image of images)
    expect(image).toMatch(new RegExp(`^clickhouse/clickhouse-(server|keeper):${line.replace('.', '\\.')}(\\.|$)`));
});
