import { execFileSync } from 'node:child_process';
import path from 'node:path';

export const REPO_ROOT = path.resolve(__dirname, '../../..');

export interface DeployTools {
  kustomize: string;
  /** One folder of strict JSON schemas per Kubernetes version (oldest supported first). */
  kubernetesSchemas: string[];
  composeSchema: string;
  /** deploy/test/dockerfile-check: BuildKit's parser and linter; prints the stages as JSON. */
  dockerfileCheck: string;
}

/** Installs what is missing (deploy/test/tools.sh; about a minute on a fresh machine) and says where it is. */
export function deployTools(): DeployTools {
  const output = execFileSync('bash', [path.join(REPO_ROOT, 'deploy/test/tools.sh')], {
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const tools: DeployTools = { kustomize: '', kubernetesSchemas: [], composeSchema: '', dockerfileCheck: '' };
  for (const line of output.split('\n')) {
    const [name, value] = [line.slice(0, line.indexOf('=')), line.slice(line.indexOf('=') + 1)];
    if (name === 'kustomize') tools.kustomize = value;
    if (name === 'kubernetes_schemas') tools.kubernetesSchemas.push(value);
    if (name === 'compose_schema') tools.composeSchema = value;
    if (name === 'dockerfile_check') tools.dockerfileCheck = value;
  }
  if (!tools.kustomize || tools.kubernetesSchemas.length === 0 || !tools.composeSchema || !tools.dockerfileCheck) {
    throw new Error(`deploy/test/tools.sh printed no tool paths:\n${output}`);
  }
  return tools;
}

/** `kustomize build <dir>`; throws with kustomize's own message when the kustomization is broken. */
export function kustomizeBuild(kustomize: string, dir: string): string {
  try {
    return execFileSync(kustomize, ['build', dir], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  } catch (error) {
    const stderr = (error as { stderr?: string }).stderr ?? '';
    throw new Error(`kustomize build ${path.relative(REPO_ROOT, dir)} failed: ${stderr.trim()}`);
  }
}

export interface DockerfileStage {
  name: string;
  base: string;
  /** Each instruction as BuildKit reads it, e.g. "COPY proto/package.json proto/". */
  commands: string[];
  /** Files written from heredocs (COPY <<EOF /path), by destination. */
  files: Record<string, string>;
}

/** The stages of a Dockerfile; throws with BuildKit's message when it does not parse or lint cleanly. */
export function checkDockerfile(dockerfileCheck: string, file: string): DockerfileStage[] {
  try {
    const output = execFileSync(dockerfileCheck, [file], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
    return JSON.parse(output) as DockerfileStage[];
  } catch (error) {
    const stderr = (error as { stderr?: string }).stderr ?? String(error);
    throw new Error(`${path.relative(REPO_ROOT, file)}: ${stderr.trim()}`);
  }
}
