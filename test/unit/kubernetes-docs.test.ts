import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import { loadAll } from 'js-yaml';
import { compileConfig, loadStage, type RawConfig } from '../../src/index.js';
import { BrokerNames } from '../../src/wire.js';

/** The repository root (this file runs as dist/test/unit/...). */
const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
const read = (file: string): string => readFileSync(path.join(ROOT, file), 'utf8');

// ---------------------------------------------------------------------------------------------
// The image's filesystem, as the Dockerfile builds it.

interface DockerStage {
  name: string;
  workdir: string;
  /** COPY lines: destination in the image, source in the build context or in another stage. */
  copies: Array<{ dest: string; from?: string; source: string }>;
  env: Map<string, string>;
}

/**
 * The Dockerfile's stages with their WORKDIR, ENV and COPY lines (one source per COPY, as this
 * Dockerfile writes them). Destinations are made absolute against the WORKDIR in force.
 */
function dockerStages(dockerfile: string): DockerStage[] {
  const stages: DockerStage[] = [];
  for (const raw of dockerfile.replace(/\\\n/g, ' ').split('\n')) {
    const line = raw.trim();
    const from = /^FROM\s+\S+(?:\s+AS\s+(\S+))?$/i.exec(line);
    if (from) {
      stages.push({ name: from[1] ?? String(stages.length), workdir: '/', copies: [], env: new Map() });
      continue;
    }
    const stage = stages.at(-1);
    if (stage === undefined) continue;
    const workdir = /^WORKDIR\s+(\S+)$/i.exec(line);
    if (workdir) stage.workdir = path.posix.resolve(stage.workdir, workdir[1] as string);
    const env = /^ENV\s+([A-Z_]+)=(\S+)$/i.exec(line);
    if (env) stage.env.set(env[1] as string, env[2] as string);
    const copy = /^COPY\s+(?:--from=(\S+)\s+)?(\S+)\s+(\S+)$/i.exec(line);
    if (copy) {
      const dest = path.posix.resolve(stage.workdir, copy[3] as string);
      stage.copies.push({ dest, source: copy[2] as string, ...(copy[1] === undefined ? {} : { from: copy[1] }) });
    }
  }
  return stages;
}

const STAGES = dockerStages(read('Dockerfile'));
const IMAGE = STAGES.at(-1) as DockerStage;

/**
 * Where a path of the final image comes from in this checkout, or undefined when the image has
 * nothing there. A COPY from the context maps to the repository; a COPY `--from=<stage>` maps to
 * that stage's WORKDIR, which holds the repository's files and what the stage built there: its
 * `npx tsc` writes `dist/` as `npm run build:all` does here (tsconfig.json's outDir).
 */
function repoPathOf(imagePath: string): string | undefined {
  const within = (file: string, dir: string): string | undefined =>
    file === dir ? '' : file.startsWith(`${dir.replace(/\/$/, '')}/`) ? file.slice(dir.replace(/\/$/, '').length + 1) : undefined;
  // The last COPY wins, as in the image.
  for (const copy of [...IMAGE.copies].reverse()) {
    const rest = within(imagePath, copy.dest);
    if (rest === undefined) continue;
    if (copy.from === undefined) return path.join(ROOT, copy.source, rest);
    const stage = STAGES.find((s) => s.name === copy.from);
    if (stage === undefined) return undefined;
    const inStage = path.posix.join(path.posix.resolve(stage.workdir, copy.source), rest);
    const fromWorkdir = within(inStage, stage.workdir);
    return fromWorkdir === undefined ? undefined : path.join(ROOT, fromWorkdir);
  }
  return undefined;
}

interface ConfigFile {
  prefix?: string;
  stages?: Record<string, { module: string }>;
  payloads?: { store?: { kind: string; dir?: string } };
}

/** Each stage module of `config`, loaded from `configPath` in the image: where it resolves, and its file here. */
function stageModules(config: ConfigFile, configPath: string): Array<{ stage: string; imagePath: string; repoPath?: string }> {
  return Object.entries(config.stages ?? {}).map(([stage, { module }]) => {
    const imagePath = path.posix.resolve(path.posix.dirname(configPath), module);
    const repoPath = repoPathOf(imagePath);
    return { stage, imagePath, ...(repoPath === undefined ? {} : { repoPath }) };
  });
}

function expectModulesExist(config: ConfigFile, configPath: string, where: string): void {
  const modules = stageModules(config, configPath);
  expect(modules.length, `${where} configures stages`).to.be.above(0);
  for (const { stage, imagePath, repoPath } of modules) {
    const shown = `${where}: stage ${stage} loads ${imagePath} (config ${configPath})`;
    expect(repoPath, `${shown}, which nothing in the image provides`).to.be.a('string');
    expect(existsSync(repoPath as string), `${shown} = ${path.relative(ROOT, repoPath as string)} here, which does not exist`).to.equal(
      true,
    );
  }
}

// ---------------------------------------------------------------------------------------------
// The Kubernetes objects the docs show.

interface K8sObject {
  kind?: string;
  metadata?: { name?: string; labels?: Record<string, string> };
  data?: Record<string, string>;
  spec?: Record<string, unknown>;
}
interface Container {
  name: string;
  args?: string[];
  env?: Array<{ name: string; value?: string; valueFrom?: { secretKeyRef?: { name: string; key: string } } }>;
  volumeMounts?: Array<{ name: string; mountPath: string }>;
}
interface PodSpec {
  containers: Container[];
  volumes?: Array<{ name: string; configMap?: { name: string }; persistentVolumeClaim?: { claimName: string } }>;
}

/** Every YAML document of every ```yaml block of a Markdown file that is a Kubernetes object. */
function yamlObjects(markdown: string): K8sObject[] {
  const objects: K8sObject[] = [];
  for (const block of markdown.matchAll(/^```ya?ml\n([\s\S]*?)^```$/gm)) {
    for (const doc of loadAll(block[1] as string)) {
      if (doc !== null && typeof doc === 'object' && !Array.isArray(doc) && 'kind' in doc) objects.push(doc as K8sObject);
    }
  }
  return objects;
}

/** The pod spec of a workload (Deployment, Job, StatefulSet..., and a CronJob's job), if it has one. */
function podSpecOf(object: K8sObject): PodSpec | undefined {
  const jobTemplate = object.spec?.jobTemplate as { spec?: { template?: { spec?: PodSpec } } } | undefined;
  const template = (object.spec?.template ?? jobTemplate?.spec?.template) as { spec?: PodSpec } | undefined;
  return template?.spec;
}

/** Each container that loads a configuration (STAGECOACH_CONFIG), with the file it reads from a mounted ConfigMap. */
function mountedConfigs(
  objects: K8sObject[],
): Array<{ workload: string; container: Container; pod: PodSpec; configPath: string; config: ConfigFile }> {
  const configMaps = new Map(objects.filter((o) => o.kind === 'ConfigMap').map((o) => [o.metadata?.name, o.data ?? {}]));
  const found = [];
  for (const object of objects) {
    const pod = podSpecOf(object);
    if (pod === undefined) continue;
    const workload = `${object.kind} ${object.metadata?.name}`;
    for (const container of pod.containers) {
      const configPath = container.env?.find((e) => e.name === 'STAGECOACH_CONFIG')?.value;
      expect(configPath, `${workload}: STAGECOACH_CONFIG`).to.be.a('string');
      const mount = container.volumeMounts?.find((m) => path.posix.dirname(configPath as string) === path.posix.normalize(m.mountPath));
      expect(mount, `${workload}: ${configPath} is in a mounted volume`).not.to.equal(undefined);
      const mapName = pod.volumes?.find((v) => v.name === mount?.name)?.configMap?.name;
      const data = configMaps.get(mapName);
      const text = data?.[path.posix.basename(configPath as string)];
      expect(text, `${workload}: ConfigMap ${mapName} holds ${path.posix.basename(configPath as string)}`).to.be.a('string');
      found.push({ workload, container, pod, configPath: configPath as string, config: JSON.parse(text as string) as ConfigFile });
    }
  }
  return found;
}

const KUBERNETES_DOC = 'docs/kubernetes.md';

describe('Kubernetes docs against the image', () => {
  it('reads the layout from the Dockerfile: the compiled stages are in /app/dist/stages', () => {
    expect(IMAGE.workdir).to.equal('/app');
    expect(repoPathOf('/app/dist/stages/converter.stage.js')).to.equal(path.join(ROOT, 'dist/stages/converter.stage.js'));
    expect(repoPathOf('/app/config/pipeline.json')).to.equal(path.join(ROOT, 'config/pipeline.json'));
    expect(repoPathOf('/dist/stages/converter.stage.js')).to.equal(undefined);
  });

  it("the image's own configuration (ENV STAGECOACH_CONFIG) loads stages the image has", () => {
    const configPath = IMAGE.env.get('STAGECOACH_CONFIG');
    expect(configPath, 'the Dockerfile sets STAGECOACH_CONFIG').to.be.a('string');
    const repoPath = repoPathOf(configPath as string);
    expect(repoPath !== undefined && existsSync(repoPath), `${configPath} is in the image`).to.equal(true);
    expectModulesExist(JSON.parse(readFileSync(repoPath as string, 'utf8')) as ConfigFile, configPath as string, 'Dockerfile');
  });

  it(`every workload of ${KUBERNETES_DOC} loads stage modules that exist in the image`, () => {
    const configs = mountedConfigs(yamlObjects(read(KUBERNETES_DOC)));
    expect(configs.length, 'workloads with a configuration').to.be.at.least(2);
    for (const { workload, configPath, config, container } of configs) {
      expectModulesExist(config, configPath, `${KUBERNETES_DOC} ${workload}`);
      // `run <stage>` names a configured stage.
      if (container.args?.[0] === 'run') expect(Object.keys(config.stages ?? {}), `${workload} runs`).to.include(container.args[1]);
    }
  });

  it('every pod that runs stages or sweeps payloads mounts a ReadWriteMany claim at the fs payload store, and a CronJob sweeps', () => {
    const objects = yamlObjects(read(KUBERNETES_DOC));
    const claims = new Map(
      objects
        .filter((o) => o.kind === 'PersistentVolumeClaim')
        .map((o) => [o.metadata?.name, (o.spec?.accessModes ?? []) as string[]] as const),
    );
    const users = mountedConfigs(objects).filter(({ container }) =>
      ['run', 'dev', 'admin', 'payloads'].includes(container.args?.[0] ?? ''),
    );
    expect(users.length, 'workloads that use the payload store').to.be.at.least(3);
    for (const { workload, container, pod, configPath, config } of users) {
      const store = config.payloads?.store;
      expect(store?.kind, `${workload}: payloads.store`).to.equal('fs');
      const dir = path.posix.resolve(path.posix.dirname(configPath), store?.dir ?? './payloads');
      const mount = container.volumeMounts?.find((m) => path.posix.normalize(m.mountPath) === dir);
      expect(mount, `${workload}: ${dir} (payloads.store.dir) is a mounted volume`).not.to.equal(undefined);
      const claim = pod.volumes?.find((v) => v.name === mount?.name)?.persistentVolumeClaim?.claimName;
      expect(claims.get(claim), `${workload}: ${dir} is the claim ${claim}, ReadWriteMany`).to.include('ReadWriteMany');
    }
    const sweeps = objects.filter(
      (o) => o.kind === 'CronJob' && podSpecOf(o)?.containers.some((c) => c.args?.join(' ') === 'payloads sweep'),
    );
    expect(sweeps, 'a CronJob running `payloads sweep`').to.have.length(1);
  });

  it("no Deployment's selector matches another Deployment's pods: a variant's Deployment has its own `variant` label", () => {
    const deployments = yamlObjects(read(KUBERNETES_DOC))
      .filter((o) => o.kind === 'Deployment')
      .map((o) => {
        const spec = o.spec as {
          selector?: { matchLabels?: Record<string, string> };
          template?: { metadata?: { labels?: Record<string, string> } };
        };
        return {
          name: o.metadata?.name as string,
          selector: spec.selector?.matchLabels ?? {},
          labels: spec.template?.metadata?.labels ?? {},
          args: podSpecOf(o)?.containers[0]?.args ?? [],
        };
      });
    const selects = (selector: Record<string, string>, labels: Record<string, string>): boolean =>
      Object.entries(selector).every(([key, value]) => labels[key] === value);
    // A pdf Deployment of a tenant beside the tenant's main one: the case where the selectors overlapped.
    const pdf = deployments.find((d) => d.args[0] === 'run' && d.args.includes('--variant') && !d.args.includes('--all-tenants'));
    expect(pdf, 'a Deployment of a variant (`run <stage> --variant pdf`)').not.to.equal(undefined);
    for (const d of deployments) {
      expect(Object.keys(d.selector), `Deployment ${d.name}: a selector`).not.to.have.length(0);
      expect(selects(d.selector, d.labels), `Deployment ${d.name}: its selector matches its own pods`).to.equal(true);
      if (d.args[0] === 'run') {
        const variant = d.args.includes('--variant') ? d.args[d.args.indexOf('--variant') + 1] : 'default';
        expect(d.selector, `Deployment ${d.name}: selector`).to.include({ variant });
      }
      for (const other of deployments.filter((o) => o !== d)) {
        expect(selects(d.selector, other.labels), `Deployment ${d.name}'s selector matches the pods of ${other.name}`).to.equal(false);
      }
    }
  });

  it('every pooled Deployment (--all-tenants) has the management API, which lists the provisioned tenants at its start', () => {
    const pooled = yamlObjects(read(KUBERNETES_DOC)).filter(
      (o) => o.kind === 'Deployment' && podSpecOf(o)?.containers.some((c) => c.args?.includes('--all-tenants')),
    );
    expect(pooled.length, 'pooled Deployments').to.be.at.least(1);
    for (const object of pooled) {
      for (const container of (podSpecOf(object) as PodSpec).containers) {
        const management = container.env?.find((e) => e.name === 'STAGECOACH_MANAGEMENT_URL');
        expect(management, `Deployment ${object.metadata?.name}: STAGECOACH_MANAGEMENT_URL`).not.to.equal(undefined);
        expect(management?.value ?? management?.valueFrom?.secretKeyRef?.key, `Deployment ${object.metadata?.name}: its value`).to.be.a(
          'string',
        );
      }
    }
  });

  it('a module path relative to the image layout, from a ConfigMap mounted at /config, does not resolve (the reported bug)', () => {
    const [old] = stageModules({ stages: { converter: { module: '../dist/stages/converter.stage.js' } } }, '/config/pipeline.json');
    expect(old?.imagePath).to.equal('/dist/stages/converter.stage.js');
    expect(old?.repoPath).to.equal(undefined);
  });
});

// ---------------------------------------------------------------------------------------------
// docker-compose.yml and docker-compose.cluster.yml: the payload store is a named volume that every
// stage shares, stages get the time to drain, the broker is published on loopback only.

interface ComposeService {
  command?: string[];
  environment?: Record<string, string>;
  volumes?: string[];
  ports?: string[];
  stop_grace_period?: string;
  '<<'?: ComposeService;
}
interface ComposeFile {
  services: Record<string, ComposeService>;
  volumes?: Record<string, unknown>;
  configs?: Record<string, { content?: string; file?: string }>;
}

/** A service with its `<<: *anchor` merged in, as compose does it (js-yaml reads YAML 1.2: no merge keys). */
function merged(service: ComposeService): ComposeService {
  const { '<<': base, ...own } = service;
  return { ...base, ...own };
}

/** A compose duration (`45s`, `1m30s`, `500ms`) in seconds. */
function composeSeconds(duration: string): number {
  const parts = [...duration.matchAll(/(\d+(?:\.\d+)?)(h|ms|m|s|us)/g)];
  expect(parts.map((p) => p[0]).join(''), `duration ${duration}`).to.equal(duration);
  const unit: Record<string, number> = { h: 3600, m: 60, s: 1, ms: 0.001, us: 0.000001 };
  return parts.reduce((sum, p) => sum + Number(p[1]) * (unit[p[2] as string] as number), 0);
}

const COMPOSE_FILES: Array<{ file: string; users: string[] }> = [
  { file: 'docker-compose.yml', users: ['explorer', 'converter-acme', 'converter-globex-pdf', 'matcher-globex', 'exporter', 'admin'] },
  { file: 'docker-compose.cluster.yml', users: ['explorer', 'converter-acme', 'converter-globex-pdf', 'matcher-globex', 'exporter'] },
];

for (const { file, users: expectedUsers } of COMPOSE_FILES) {
  describe(`${file}: payload store, stop grace period, published ports`, () => {
    const compose = loadAll(read(file))[0] as ComposeFile;
    const services = Object.entries(compose.services).map(([name, service]) => [name, merged(service)] as const);
    /** The configuration a service loads (its STAGECOACH_CONFIG, else the image's). */
    const configOf = (service: ComposeService): { configPath: string; config: ConfigFile & { gracePeriod?: number } } => {
      const configPath = service.environment?.STAGECOACH_CONFIG ?? (IMAGE.env.get('STAGECOACH_CONFIG') as string);
      return {
        configPath,
        config: JSON.parse(readFileSync(repoPathOf(configPath) as string, 'utf8')) as ConfigFile & { gracePeriod?: number },
      };
    };

    it('mounts one named volume at payloads.store.dir in every service that runs stages or admin, and the image makes it for its user', () => {
      const users = services.filter(([, service]) => ['run', 'admin'].includes(service.command?.[0] ?? ''));
      expect(users.map(([name]) => name)).to.include.members(expectedUsers);
      const dirs = new Set<string>();
      for (const [name, service] of users) {
        const { configPath, config } = configOf(service);
        expect(config.payloads?.store?.kind, `${name}: payloads.store in ${configPath}`).to.equal('fs');
        const dir = path.posix.resolve(path.posix.dirname(configPath), config.payloads?.store?.dir ?? './payloads');
        dirs.add(dir);
        const mount = service.volumes?.find((volume) => volume.split(':')[1] === dir);
        expect(mount, `${name}: ${dir} (payloads.store.dir) is a mounted volume`).to.be.a('string');
        const source = (mount as string).split(':')[0] as string;
        expect(compose.volumes ?? {}, `${name}: ${source} is a named volume, shared by every service`).to.have.property(source);
      }
      expect([...dirs], 'one directory for all').to.have.length(1);
      // A new named volume takes the owner of the image's folder: the stages run as `node`.
      const [dir] = [...dirs];
      expect(read('Dockerfile')).to.match(new RegExp(`mkdir -p ${dir} && chown node:node ${dir}`));
    });

    it("gives every stage a stop_grace_period longer than its configuration's gracePeriod (Docker's default is 10 s)", () => {
      const stages = services.filter(([, service]) => service.command?.[0] === 'run');
      expect(stages.length).to.be.at.least(expectedUsers.length - 1);
      for (const [name, service] of stages) {
        const gracePeriod = configOf(service).config.gracePeriod ?? 30;
        expect(service.stop_grace_period, `${name}: stop_grace_period`).to.be.a('string');
        expect(composeSeconds(service.stop_grace_period as string), `${name}: stop_grace_period`).to.be.above(gracePeriod);
      }
    });

    it('publishes ports on 127.0.0.1 only, and needs no inline configs (Compose 2.23.1)', () => {
      const ports = services.flatMap(([name, service]) => (service.ports ?? []).map((port) => [name, port] as const));
      expect(ports.length).to.be.at.least(1);
      for (const [name, port] of ports) expect(port, `${name} publishes ${port}`).to.match(/^127\.0\.0\.1:/);
      for (const [name, config] of Object.entries(compose.configs ?? {}))
        expect(config.content, `configs.${name}.content`).to.equal(undefined);
      // Files mounted from the repository exist (a missing source would become an empty folder).
      for (const [name, service] of services) {
        for (const volume of service.volumes ?? []) {
          const source = volume.split(':')[0] as string;
          if (source.startsWith('./') && source !== './results')
            expect(existsSync(path.join(ROOT, source)), `${name}: ${source}`).to.equal(true);
        }
      }
    });
  });
}

// ---------------------------------------------------------------------------------------------
// KEDA's queue name regex for pooled workers.

interface RabbitTrigger {
  type: string;
  metadata: Record<string, string>;
}

/**
 * KEDA hands `queueName` to the management API (`use_regex=true`), which runs it with Erlang's
 * `re` anywhere in the name; these patterns (anchors, escaped dots, `[^.]`, alternation) mean the
 * same to JavaScript's RegExp.
 */
const matches = (pattern: string, name: string): boolean => new RegExp(pattern).test(name);

/** Tenant slugs of every shape `^[a-z0-9][a-z0-9_-]{0,62}$` allows. */
const TENANTS = ['acme', 'globex', 'a', '7', 't00042', 'big-co_2', `x${'y'.repeat(62)}`];

/** The queues a pooled `run` of a stage consumes, and every other queue name of the broker that must not count. */
function queueNames(prefix: string, input: string, variants: string[], variant: string | undefined, tenants: string[] | undefined) {
  const names = new BrokerNames(prefix);
  const served = (t: string): boolean => tenants === undefined || tenants.includes(t);
  const consumed = TENANTS.filter(served).map((t) => names.queue(input, t, variant));
  const others = [
    ...TENANTS.filter((t) => !served(t)).map((t) => names.queue(input, t, variant)),
    ...TENANTS.flatMap((t) => [
      ...(variant === undefined ? variants.map((v) => names.queue(input, t, v)) : [names.queue(input, t)]),
      names.dueQueue(input, t, variant),
      names.suspectQueue(input, t, variant),
      names.deadQueue(input, t),
      names.queue(`${input}_old`, t, variant),
      names.queue('representations', t, variant),
      new BrokerNames(`${prefix}2`).queue(input, t, variant),
      new BrokerNames(`x${prefix}`).queue(input, t, variant),
    ]),
    names.queue(input),
    names.dueQueue(input),
    names.unroutable,
  ];
  return { consumed, others };
}

describe('KEDA scaling of pooled workers in docs/kubernetes.md', () => {
  const objects = yamlObjects(read(KUBERNETES_DOC));
  const scaled = objects.filter((o) => o.kind === 'ScaledObject');

  it('has a ScaledObject with a rabbitmq trigger over the management API: QueueLength, useRegex, sum', () => {
    expect(scaled.length).to.be.at.least(1);
    for (const object of scaled) {
      const triggers = (object.spec?.triggers ?? []) as RabbitTrigger[];
      expect(triggers.map((t) => t.type)).to.include('rabbitmq');
      for (const trigger of triggers.filter((t) => t.type === 'rabbitmq')) {
        // KEDA's metadata values are strings.
        expect(trigger.metadata).to.include({ protocol: 'http', mode: 'QueueLength', useRegex: 'true', operation: 'sum' });
        expect(Number(trigger.metadata.pageSize)).to.be.within(1, 500);
      }
    }
  });

  it("each regex matches the queue of every tenant its Deployment's `run` consumes, and no other queue (names from BrokerNames)", async () => {
    const configs = mountedConfigs(objects);
    for (const object of scaled) {
      const target = (object.spec?.scaleTargetRef as { name: string }).name;
      const deployment = configs.find((c) => c.workload === `Deployment ${target}`);
      expect(deployment, `the Deployment ${target} the ScaledObject scales`).not.to.equal(undefined);
      const { config, configPath, container } = deployment!;
      const args = container.args ?? [];
      expect(args.slice(0, 2)).to.have.length(2);
      expect(args[0]).to.equal('run');
      const all = args.includes('--all-tenants');
      const list = args.includes('--tenants') ? args[args.indexOf('--tenants') + 1]?.split(',') : undefined;
      expect(all || list !== undefined, `${target} is a pooled worker (--all-tenants or --tenants)`).to.equal(true);
      const variant = args.includes('--variant') ? args[args.indexOf('--variant') + 1] : undefined;

      // The stage's input, from its @Stage decorator, loaded from the module the image has.
      const raw = JSON.parse(JSON.stringify(config)) as RawConfig & { stages: Record<string, { module: string }> };
      for (const { stage, repoPath } of stageModules(config, configPath)) raw.stages[stage]!.module = repoPath as string;
      const compiled = compileConfig(raw, path.join(ROOT, 'docs/pipeline.json'));
      const stage = await loadStage(compiled, args[1] as string);
      const input = stage.metadata.input;
      const variants = Object.keys(compiled.queues.get(input)?.variants?.values ?? {});

      const { consumed, others } = queueNames(compiled.prefix, input, variants, variant, list);
      for (const trigger of ((object.spec?.triggers ?? []) as RabbitTrigger[]).filter((t) => t.type === 'rabbitmq')) {
        const pattern = trigger.metadata.queueName as string;
        for (const name of consumed) expect(matches(pattern, name), `${pattern} matches ${name}`).to.equal(true);
        for (const name of others) expect(matches(pattern, name), `${pattern} leaves out ${name}`).to.equal(false);
      }
    }
  });

  it('the regexes the text gives for a variant pool and for a list of tenants name the right queues', () => {
    const doc = read(KUBERNETES_DOC);
    const variantPattern = String.raw`^ojs\.queue\.conversions\.[^.]+\.pdf$`;
    const listPattern = String.raw`^ojs\.queue\.conversions\.(acme|globex)$`;
    expect(doc).to.include(`'${variantPattern}'`);
    expect(doc).to.include(`'${listPattern}'`);
    const variant = queueNames('ojs', 'conversions', ['pdf'], 'pdf', undefined);
    for (const name of variant.consumed) expect(matches(variantPattern, name), name).to.equal(true);
    for (const name of variant.others) expect(matches(variantPattern, name), name).to.equal(false);
    const listed = queueNames('ojs', 'conversions', ['pdf'], undefined, ['acme', 'globex']);
    expect(listed.consumed).to.have.length(2);
    for (const name of listed.consumed) expect(matches(listPattern, name), name).to.equal(true);
    for (const name of listed.others) expect(matches(listPattern, name), name).to.equal(false);
  });
});
