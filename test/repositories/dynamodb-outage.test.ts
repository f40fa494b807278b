import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { IdempotentConsumer } from '../../src/consumer/index.js';
import { RepositoryError } from '../../src/errors.js';
import { DynamoDbRepository } from '../../src/repositories/dynamodb/index.js';
import { skipUnlessEnabled } from '../helpers/stores.js';

/**
 * The test runs its OWN dynalite as a child process (on-disk, so the table and its ids survive a restart) and
 * takes it away mid-run: frozen with SIGSTOP (no answer at all: only the request timeout ends a call) and killed
 * (connection refused), then restarted on the same port and path. Only this child is ever signalled.
 */

const DYNALITE = fileURLToPath(new URL('../../node_modules/dynalite/cli.js', import.meta.url));

/** A free loopback port, asked of the OS rather than guessed. */
async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/** Our dynalite child: start, stop, freeze, always cleaned up. */
class Dynalite {
  #child: ChildProcess | undefined;
  #frozen = false;
  constructor(
    readonly port: number,
    readonly path: string,
  ) {}

  get endpoint(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  async start(): Promise<void> {
    const child = spawn(
      process.execPath,
      [
        DYNALITE,
        '--host',
        '127.0.0.1',
        '--port',
        String(this.port),
        '--path',
        this.path,
        '--createTableMs',
        '0',
      ],
      { stdio: ['ignore', 'pipe', 'inherit'] },
    );
    this.#child = child;
    // dynalite prints its "listening" line once the port is open.
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('dynalite did not start within 30 s')), 30_000);
      child.stdout?.on('data', (chunk: Buffer) => {
        if (chunk.toString().includes('listening')) {
          clearTimeout(timer);
          resolve();
        }
      });
      child.once('exit', (code) => {
        clearTimeout(timer);
        reject(new Error(`dynalite exited early with code ${code}`));
      });
    });
    child.stdout?.resume();
  }

  async kill(): Promise<void> {
    const child = this.#child;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    this.thaw();
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGKILL');
    await exited;
    this.#child = undefined;
  }

  freeze(): void {
    if (!this.#child?.pid) return;
    this.#child.kill('SIGSTOP');
    this.#frozen = true;
  }

  /** Synchronous last resort for process exit: never leave our dynalite running (or frozen) behind. */
  dispose(): void {
    const child = this.#child;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    child.kill('SIGKILL');
  }

  thaw(): void {
    if (!this.#frozen || !this.#child?.pid) return;
    this.#child.kill('SIGCONT');
    this.#frozen = false;
  }
}

type Message = { id: string };

describe('dynamodb outage (own dynalite, frozen and killed)', { skip: skipUnlessEnabled('dynamodb') }, () => {
  let dir = '';
  let server: Dynalite;
  let repo: DynamoDbRepository;
  const handled: string[] = [];
  const handler = async (message: Message) => {
    handled.push(message.id);
    return message.id;
  };

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'idem-dynalite-'));
    server = new Dynalite(await freePort(), dir);
    process.once('exit', () => server.dispose());
    await server.start();
    repo = await DynamoDbRepository.open({
      table: 'idem-outage',
      endpoint: server.endpoint,
      credentials: { accessKeyId: 'test', secretAccessKey: 'test' },
      createTable: true,
      logger: { warn: () => {} },
      // Low, so an outage turns into prompt errors rather than the defaults' long retries.
      requestTimeoutMs: 300,
      maxRetries: 1,
    });
  });

  after(async () => {
    await repo?.close();
    await server?.kill();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('storeFailure "fail": calls reject with RepositoryError and nothing runs as new; work resumes after restart', async () => {
    const consumer = new IdempotentConsumer<Message>({ repository: repo, id: 'id', storeFailure: 'fail' });
    const handle = consumer.wrap(handler);
    for (const id of ['a1', 'a2', 'a3']) assert.equal((await handle({ id })).outcome, 'processed');
    handled.length = 0;

    // No answer at all: only the request timeout can end these calls. A timed-out claim may still land once the
    // server thaws (the request was sent), so its id is not used again below.
    server.freeze();
    try {
      await assert.rejects(handle({ id: 'frozen-1' }), RepositoryError);
      await assert.rejects(repo.contains('a1'), RepositoryError);
    } finally {
      server.thaw();
    }
    // Refused connections.
    await server.kill();
    for (const id of ['a4', 'a5', 'a1']) {
      await assert.rejects(handle({ id }), (error: unknown) => {
        assert.ok(error instanceof RepositoryError, String(error));
        assert.equal(error.retryable, true);
        assert.ok(error.cause !== undefined, 'the client error is kept as cause');
        return true;
      });
    }
    assert.deepEqual(handled, [], 'a message was handled while the store was down');
    assert.equal(consumer.stats.failOpen, 0);

    await server.start();
    // On-disk dynalite: the ids confirmed before the outage are still duplicates.
    assert.equal((await handle({ id: 'a1' })).outcome, 'duplicate');
    assert.equal((await handle({ id: 'a4' })).outcome, 'processed');
    assert.equal((await handle({ id: 'a5' })).outcome, 'processed');
    assert.deepEqual(handled, ['a4', 'a5']);
    assert.equal(consumer.stats.processed, 5);
  });

  it('storeFailure "process": messages are handled as new while the store is down, and counted', async () => {
    const consumer = new IdempotentConsumer<Message>({ repository: repo, id: 'id', storeFailure: 'process' });
    const handle = consumer.wrap(handler);
    assert.equal((await handle({ id: 'b1' })).outcome, 'processed');
    handled.length = 0;

    await server.kill();
    for (const id of ['b2', 'b3', 'b1']) {
      const result = await handle({ id });
      assert.equal(result.outcome, 'processed');
      assert.equal(result.failOpen, true);
    }
    assert.deepEqual(handled, ['b2', 'b3', 'b1'], 'fail-open hands every message to the handler');
    assert.equal(consumer.stats.failOpen, 3);

    await server.start();
    // Back to normal: ids seen before the outage are duplicates again, new ones are claimed.
    assert.equal((await handle({ id: 'b1' })).outcome, 'duplicate');
    assert.equal((await handle({ id: 'b4' })).outcome, 'processed');
    assert.equal((await handle({ id: 'b4' })).outcome, 'duplicate');
    assert.equal(consumer.stats.failOpen, 3);
  });
});
