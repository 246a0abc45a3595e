import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { CompiledConfig, RawConfig } from '../../src/config/config.types.js';
import { withTestConfig } from '../../src/testing/test-config.js';

const FIXTURES = path.join(path.dirname(fileURLToPath(import.meta.url)), '../fixtures/config.json');

/**
 * The three-stage fan-out of test/fixtures/batch-stages.ts (scanner on the shared `scans` queue,
 * reader and sink per tenant) for acme and globex, under a fresh test prefix; `stages` adds more.
 */
export function batchPipelineConfig(stages: NonNullable<RawConfig['stages']> = {}): CompiledConfig {
  return withTestConfig(
    {
      tenants: ['acme', 'globex'],
      queues: { _default: { default_retry: { max_attempts: 3, initial_interval: 'PT1S' } }, scans: { scope: 'shared' } },
      stages: {
        scanner: { module: './batch-stages.js', concurrency: 4 },
        reader: { module: './batch-stages.js', concurrency: 4 },
        sink: { module: './batch-stages.js', concurrency: 4 },
        ...stages,
      },
    },
    FIXTURES,
  );
}
