// A store written outside src/, against the package's exports only, passes the exported contract suite.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after } from 'node:test';
import { repositoryContract } from 'idempotent-consumer/contract';
import { JsonFileRepository } from '../examples/custom-store/json-file-repository.js';

const dir = mkdtempSync(join(tmpdir(), 'idem-custom-store-'));
after(() => rmSync(dir, { recursive: true, force: true }));

repositoryContract({
  name: 'custom (examples/custom-store, JSON file)',
  factory: ({ namespace }) =>
    JsonFileRepository.open({ path: join(dir, `${encodeURIComponent(namespace)}.json`) }),
  capabilities: JsonFileRepository.capabilities,
});
