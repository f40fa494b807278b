import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { kafkajsErrors, recordErrorType } from '../../src/kafka/kafkajs/index.js';
import type { OutgoingMessage, ProduceRequest, RecordSender } from '../../src/kafka/port/index.js';
import { OutputWriter } from '../../src/node/output.js';
import { formatPerf, PerfLog } from '../../src/node/perf-log.js';

/** A broker error as kafkajs raises it. */
function brokerError(type: string, retriable: boolean): Error {
  return Object.assign(new Error(type), { name: 'KafkaJSProtocolError', type, retriable });
}

/**
 * A producer that writes to an in-memory log, refusing a request over `maxBytes` (value bytes) and any request
 * holding a value listed in `poison`; `failures` makes the next sends fail with a passing error.
 */
function fakeProducer(options: { maxBytes?: number; poison?: string[]; failures?: number } = {}) {
  const written: string[] = [];
  let requests = 0;
  let failures = options.failures ?? 0;
  const producer = {
    async send(record: ProduceRequest) {
      requests++;
      if (failures > 0) {
        failures--;
        throw brokerError('NOT_LEADER_FOR_PARTITION', true);
      }
      const values = record.messages.map((m) => String(m.value));
      const bytes = values.reduce((n, v) => n + v.length, 0);
      if (
        bytes > (options.maxBytes ?? Number.POSITIVE_INFINITY) ||
        values.some((v) => options.poison?.includes(v))
      ) {
        throw brokerError('MESSAGE_TOO_LARGE', false);
      }
      written.push(...values);
      return [];
    },
  } as RecordSender;
  return { producer, written, requests: () => requests };
}

const messages = (values: string[]): OutgoingMessage[] => values.map((value) => ({ value, partition: 0 }));

describe('OutputWriter', () => {
  it('cuts requests to the topic limit, so a normal chunk is never refused whole', async () => {
    const fake = fakeProducer({ maxBytes: 1000 });
    // 100 records of ~60 estimated bytes each: several requests, none refused.
    const values = Array.from({ length: 100 }, (_, i) => `v${String(i).padStart(3, '0')}`.padEnd(30, '.'));
    const writer = new OutputWriter(fake.producer, {
      topic: 'out',
      maxBatchBytes: 1000,
      sendAttempts: 1,
      retryBackoffMs: 1,
      errors: kafkajsErrors,
    });
    assert.deepEqual(await writer.write(0, messages(values)), []);
    assert.deepEqual(fake.written, values);
    assert.ok(fake.requests() > 3);
  });

  it('isolates refused records by halving, writes the rest in order', async () => {
    const values = Array.from({ length: 50 }, (_, i) => `r${i}`);
    const fake = fakeProducer({ poison: ['r7', 'r31', 'r32'] });
    const writer = new OutputWriter(fake.producer, {
      topic: 'out',
      maxBatchBytes: 1_000_000,
      sendAttempts: 3,
      retryBackoffMs: 1,
      errors: kafkajsErrors,
    });
    const refused = await writer.write(0, messages(values));
    assert.deepEqual(
      refused.map((r) => r.index),
      [7, 31, 32],
    );
    assert.ok(refused.every((r) => recordErrorType(r.error) === 'MESSAGE_TOO_LARGE' && r.attempts > 1));
    assert.deepEqual(
      fake.written,
      values.filter((v) => !['r7', 'r31', 'r32'].includes(v)),
    );
    // Halving: about 2·log2(50) requests per poison record, not one per record.
    assert.ok(fake.requests() < 40, `${fake.requests()} requests`);
  });

  it('retries a passing error a bounded number of times, then raises it', async () => {
    const retried: number[] = [];
    const options = {
      topic: 'out',
      maxBatchBytes: 1_000_000,
      sendAttempts: 3,
      retryBackoffMs: 1,
      errors: kafkajsErrors,
      onRetry: (_: unknown, attempt: number) => retried.push(attempt),
    };
    const passes = fakeProducer({ failures: 2 });
    assert.deepEqual(await new OutputWriter(passes.producer, options).write(0, messages(['a', 'b'])), []);
    assert.deepEqual(passes.written, ['a', 'b']);
    assert.deepEqual(retried, [1, 2]);

    const stuck = fakeProducer({ failures: 5 });
    await assert.rejects(new OutputWriter(stuck.producer, options).write(0, messages(['a'])), /NOT_LEADER/);
    assert.equal(stuck.requests(), 3, 'nothing is dead-lettered for an error that may pass');
    assert.deepEqual(stuck.written, []);
  });
});

describe('PerfLog', () => {
  it('splits the interval into phases, poll being the time outside the handler', async () => {
    const perf = new PerfLog();
    perf.iteration(false);
    perf.iteration(true);
    perf.enter();
    perf.add('parse', 5);
    perf.add('deliver', 20);
    perf.rows(10, 8, 2);
    await new Promise((resolve) => setTimeout(resolve, 30));
    perf.leave();
    const summary = perf.flush();
    assert.equal(summary.rowsIn, 10);
    assert.equal(summary.rowsOut, 8);
    assert.equal(summary.dropped, 2);
    assert.equal(summary.iterations, 2);
    assert.equal(summary.starved, 1);
    assert.equal(summary.phases.parse.seconds, 0.005);
    assert.ok(summary.phases.poll.seconds < summary.seconds);
    assert.match(
      formatPerf(summary),
      /^dedup perf over [\d.]+s: 10 rows in, 8 out \(2 dropped\), 2 iterations \(1 input-starved\); poll=[\d.]+s \(\d+%\) parse=0\.01s \(\d+%\) lookup=0\.00s \(0%\) produce=0\.00s \(0%\) deliver=0\.02s \(\d+%\) mark=0\.00s \(0%\) commit=0\.00s \(0%\)$/,
    );
    const next = perf.flush();
    assert.equal(next.rowsIn, 0);
  });
});
