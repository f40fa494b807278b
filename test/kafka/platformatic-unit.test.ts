/**
 * The parts of the @platformatic/kafka implementation that need no broker: how its errors are classified (the
 * node decides to retry, fence or fail on these) and how the port's settings become the library's options.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  MultipleErrors,
  NetworkError,
  ProtocolError,
  type RecordsBatch,
  ResponseError,
  UserError,
} from '@platformatic/kafka';
import {
  platformaticErrors as errors,
  GroupRebalancingError,
  PartitionNotOwnedError,
  withBrokerDetail,
} from '../../src/kafka/platformatic/errors.js';
import { dropAborted } from '../../src/kafka/platformatic/fetch.js';
import { createClient } from '../../src/kafka/platformatic/index.js';
import { baseOptions, retryDelayMs } from '../../src/kafka/platformatic/options.js';
import type { KafkaClientSettings, KafkaLogEntry } from '../../src/kafka/port/index.js';
import { platformaticCannotRunHere } from '../helpers/kafka.js';

const settings: KafkaClientSettings = {
  brokers: ['a:9092', 'b:9093'],
  clientId: 'idem-unit',
  ssl: false,
  connectionTimeout: 4_000,
  requestTimeout: 20_000,
};

/** A broker error as the library raises it for one partition of a response, wrapped by its retries. */
function brokerError(name: string): Error {
  const response = new ResponseError(0, 9, { '/responses/0/partitions/0': [errorCode(name), null] }, {});
  return new MultipleErrors('produce failed 2 times.', [new NetworkError('Connection closed'), response]);
}

function errorCode(name: string): number {
  const codes: Record<string, number> = {
    PRODUCER_FENCED: 90,
    INVALID_PRODUCER_EPOCH: 47,
    ILLEGAL_GENERATION: 22,
    UNKNOWN_MEMBER_ID: 25,
    MESSAGE_TOO_LARGE: 10,
    RECORD_LIST_TOO_LARGE: 18,
    OFFSET_OUT_OF_RANGE: 1,
    NOT_LEADER_OR_FOLLOWER: 6,
    COORDINATOR_NOT_AVAILABLE: 15,
    UNSTABLE_OFFSET_COMMIT: 88,
  };
  return codes[name] as number;
}

describe('@platformatic/kafka errors', () => {
  it('fenced: by a newer producer of the id, or by the group (KIP-447), or a partition the member lost', () => {
    for (const name of [
      'PRODUCER_FENCED',
      'INVALID_PRODUCER_EPOCH',
      'ILLEGAL_GENERATION',
      'UNKNOWN_MEMBER_ID',
    ]) {
      assert.equal(errors.isFenced(brokerError(name)), true, name);
      assert.equal(errors.isFenced(new Error('wrapped', { cause: brokerError(name) })), true, name);
    }
    assert.equal(errors.isFenced(new PartitionNotOwnedError('lost')), true);
    assert.equal(errors.isFenced(brokerError('NOT_LEADER_OR_FOLLOWER')), false);
    assert.equal(errors.isFenced(new Error('other')), false);
  });

  it('a batch heartbeat refused in a rebalance is not fenced, whatever group error the coordinator gave', () => {
    for (const name of ['ILLEGAL_GENERATION', 'UNKNOWN_MEMBER_ID']) {
      // As the library answers a Heartbeat (API 12) that the coordinator refused.
      const answer = new ResponseError(12, 4, { '': [errorCode(name), null] }, {});
      const refused = new GroupRebalancingError('generation 1 is over', { cause: answer });
      assert.equal(errors.isFenced(refused), false, name);
      assert.equal(errors.isFenced(new Error('wrapped', { cause: refused })), false, name);
      assert.equal(errors.isBrokerUnreachable(refused), false, name);
    }
  });

  it('record errors name the broker error; others are undefined', () => {
    assert.equal(errors.recordErrorType(brokerError('MESSAGE_TOO_LARGE')), 'MESSAGE_TOO_LARGE');
    assert.equal(errors.recordErrorType(brokerError('RECORD_LIST_TOO_LARGE')), 'RECORD_LIST_TOO_LARGE');
    assert.equal(errors.recordErrorType(brokerError('NOT_LEADER_OR_FOLLOWER')), undefined);
  });

  it('an unreachable broker is never permanent; a non-retriable broker error or bad options are', () => {
    const refused = new NetworkError('Connection to a:9092 failed.', {
      cause: Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' }),
    });
    assert.equal(errors.isBrokerUnreachable(refused), true);
    assert.equal(errors.isPermanent(refused), false);
    assert.equal(errors.isBrokerUnreachable(new ProtocolError('COORDINATOR_NOT_AVAILABLE')), true);
    assert.equal(errors.isPermanent(new ProtocolError('UNSTABLE_OFFSET_COMMIT')), false);
    assert.equal(errors.isPermanent(new ProtocolError('PRODUCER_FENCED')), true);
    assert.equal(errors.isPermanent(new UserError('/options/foo must not be there')), true);
    assert.equal(errors.isBrokerUnreachable(new ProtocolError('PRODUCER_FENCED')), false);
  });

  it("an error's message names the broker's reasons and keeps the original as its cause", () => {
    const original = brokerError('MESSAGE_TOO_LARGE');
    const wrapped = withBrokerDetail(original) as Error;
    assert.match(
      wrapped.message,
      /^produce failed 2 times: MESSAGE_TOO_LARGE: .*larger than the max message size/,
    );
    assert.equal(wrapped.cause, original);
    assert.equal(errors.recordErrorType(wrapped), 'MESSAGE_TOO_LARGE');
    const plain = new Error('plain');
    assert.equal(withBrokerDetail(plain), plain);
  });

  it('offset out of range, even inside a retried response error', () => {
    assert.equal(errors.isOffsetOutOfRange(brokerError('OFFSET_OUT_OF_RANGE')), true);
    assert.equal(errors.isOffsetOutOfRange(brokerError('NOT_LEADER_OR_FOLLOWER')), false);
  });
});

describe('@platformatic/kafka options', () => {
  it('maps brokers, id, timeouts and retries; no TLS or SASL unless asked', () => {
    const options = baseOptions(settings, { retries: 7 });
    assert.deepEqual(options.bootstrapBrokers, ['a:9092', 'b:9093']);
    assert.equal(options.clientId, 'idem-unit');
    assert.equal(options.connectTimeout, 4_000);
    assert.equal(options.requestTimeout, 20_000);
    assert.equal(options.timeout, 20_000);
    assert.equal(options.retries, 7);
    assert.equal(options.autocreateTopics, false);
    assert.equal(options.tls, undefined);
    assert.equal(options.sasl, undefined);
  });

  it('TLS: true means the system CAs with SNI; a table passes its PEMs and server name', () => {
    assert.deepEqual(baseOptions({ ...settings, ssl: true }, { retries: 1 }).tls, {});
    assert.equal(baseOptions({ ...settings, ssl: true }, { retries: 1 }).tlsServerName, true);
    const custom = baseOptions(
      {
        ...settings,
        ssl: { ca: 'CA', cert: 'CERT', key: 'KEY', servername: 'kafka.example', rejectUnauthorized: false },
      },
      { retries: 1 },
    );
    assert.deepEqual(custom.tls, {
      ca: 'CA',
      cert: 'CERT',
      key: 'KEY',
      servername: 'kafka.example',
      rejectUnauthorized: false,
    });
    assert.equal(custom.tlsServerName, 'kafka.example');
  });

  it('SASL mechanisms in the library spelling', () => {
    for (const [mechanism, expected] of [
      ['plain', 'PLAIN'],
      ['scram-sha-256', 'SCRAM-SHA-256'],
      ['scram-sha-512', 'SCRAM-SHA-512'],
    ] as const) {
      const options = baseOptions(
        { ...settings, ssl: true, sasl: { mechanism, username: 'u', password: 'p', allowPlaintext: false } },
        { retries: 1 },
      );
      assert.deepEqual(options.sasl, { mechanism: expected, username: 'u', password: 'p' });
    }
  });

  it('retries back off from 300 ms, doubling, to at most 10 s', () => {
    assert.deepEqual(
      [1, 2, 3, 4, 5, 6, 7].map((attempt) => retryDelayMs(attempt)),
      [300, 600, 1200, 2400, 4800, 9600, 10_000],
    );
    const other = new MultipleErrors('addPartitionsToTransaction failed 1 times.', [
      new ProtocolError('COORDINATOR_LOAD_IN_PROGRESS'),
    ]);
    assert.equal(retryDelayMs(1, other), 300);
  });

  it('a transaction whose predecessor is still ending is retried from 20 ms, then as usual', () => {
    // What the broker answers the first request of the next transaction while the last one's markers are written.
    const concurrent = new MultipleErrors('addPartitionsToTransaction failed 1 times.', [
      new ProtocolError('CONCURRENT_TRANSACTIONS'),
    ]);
    assert.deepEqual(
      [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11].map((attempt) => retryDelayMs(attempt, concurrent)),
      [20, 40, 80, 160, 320, 640, 1280, 2560, 5120, 10_000, 10_000],
    );
    const options = baseOptions(settings, { retries: 1 });
    const delay = options.retryDelay as (c: object, o: string, a: number, r: number, e: Error) => number;
    assert.equal(delay({}, 'addPartitionsToTransaction', 1, 1, concurrent), 20);
    assert.equal(delay({}, 'produce', 1, 1, new ProtocolError('NOT_LEADER_OR_FOLLOWER')), 300);
  });
});

describe('@platformatic/kafka log', () => {
  it('a failed broker connection is one entry that says why (the socket error), and onLog can drop it', {
    skip: platformaticCannotRunHere(),
  }, async () => {
    const entries: KafkaLogEntry[] = [];
    const logged: string[] = [];
    const client = await createClient(
      { ...settings, brokers: ['127.0.0.1:1'], connectionTimeout: 2_000, requestTimeout: 3_000 },
      {
        retries: 0,
        onLog: (entry) => {
          entries.push(entry);
          return false;
        },
        logger: {
          error: (_f, m) => logged.push(m),
          warn: (_f, m) => logged.push(m),
          info: (_f, m) => logged.push(m),
          debug: (_f, m) => logged.push(m),
        },
      },
    );
    const admin = client.admin();
    await assert.rejects(admin.connect(), (error: unknown) => client.errors.isBrokerUnreachable(error));
    await admin.disconnect();
    await client.close();
    assert.ok(entries.length >= 1);
    assert.match(entries[0]?.connectionFailure ?? '', /^connection to 127\.0\.0\.1:1 failed: .*ECONNREFUSED/);
    assert.equal(entries[0]?.level, 'warn');
    assert.deepEqual(logged, []);
  });
});

describe('@platformatic/kafka read_committed filter', () => {
  /** A record batch of producer `pid` at `offset`: data (transactional) or a commit/abort marker. */
  function batch(offset: number, kind: 'data' | 'commit' | 'abort', pid = 7n): RecordsBatch {
    const marker = Buffer.alloc(4);
    marker.writeInt16BE(kind === 'commit' ? 1 : 0, 2);
    return {
      firstOffset: BigInt(offset),
      lastOffsetDelta: 0,
      attributes: kind === 'data' ? 0x10 : 0x30,
      producerId: pid,
      producerEpoch: 0,
      records: [
        {
          length: 0,
          attributes: 0,
          timestampDelta: 0n,
          offsetDelta: 0,
          key: kind === 'data' ? Buffer.from(`k${offset}`) : marker,
          value: null,
          headers: [],
        },
      ],
    } as unknown as RecordsBatch;
  }

  it('two aborted transactions of one producer id keep the committed one between them', () => {
    // abort (0-1), commit (2-3), abort (4-5) by one producer id: a transactional id's restarts keep its id.
    const batches = [
      batch(0, 'data'),
      batch(1, 'abort'),
      batch(2, 'data'),
      batch(3, 'commit'),
      batch(4, 'data'),
      batch(5, 'abort'),
    ];
    const aborted = [
      { producerId: 7n, firstOffset: 0n },
      { producerId: 7n, firstOffset: 4n },
    ];
    const kept = dropAborted(batches, aborted).map((b) => Number(b.firstOffset));
    assert.deepEqual(kept, [1, 2, 3, 5]);
  });

  it('another producer interleaved inside an aborted range is kept', () => {
    const batches = [
      batch(0, 'data', 7n),
      batch(1, 'data', 8n),
      batch(2, 'abort', 7n),
      batch(3, 'commit', 8n),
    ];
    const kept = dropAborted(batches, [{ producerId: 7n, firstOffset: 0n }]).map((b) =>
      Number(b.firstOffset),
    );
    assert.deepEqual(kept, [1, 2, 3]);
  });
});
