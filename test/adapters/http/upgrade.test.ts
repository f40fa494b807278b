/**
 * Records an earlier version of the adapter kept still answer after an upgrade: their fingerprint is the digest of
 * the request's digest (the engine digested the adapter's fingerprint again), and their response is JSON with the
 * body in base64. The adapter now keeps the request's digest as it is and a text body as text; a retry of a
 * request the earlier version answered must still replay (not 422), and one with another body must still be 422.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import { describe, it, type TestContext } from 'node:test';
import express from 'express';
import { decodeResponse, encodeResponse } from '../../../src/adapters/http/codec.js';
import { idempotencyKey, requestFingerprint, scopedId } from '../../../src/adapters/http/index.js';
import { IdempotentConsumer } from '../../../src/consumer/idempotent-consumer.js';
import { MemoryRepository } from '../../../src/repositories/memory/index.js';

/** What earlier versions kept as a response: JSON, the body in base64. */
function encodeBefore(response: { status: number; headers: Record<string, string>; body: Buffer }): string {
  const { status, headers, body } = response;
  return JSON.stringify({ v: 1, status, headers, body: body.toString('base64') });
}

const USER = 'alice';

async function start(t: TestContext, repository: MemoryRepository) {
  let runs = 0;
  const app = express();
  app.post('/charges', express.json(), idempotencyKey({ repository, scope: () => USER }), (req, res) => {
    runs++;
    res.status(201).location('/charges/ch_new').json({ id: 'ch_new', request: req.body });
  });
  const server = app.listen(0, '127.0.0.1');
  await once(server, 'listening');
  t.after(() => {
    server.closeAllConnections();
    server.close();
  });
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/charges`;
  const post = async (key: string, body: unknown) => {
    const response = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'idempotency-key': key },
      body: JSON.stringify(body),
    });
    return { response, text: await response.text() };
  };
  return { post, runs: () => runs };
}

describe('HTTP records kept by an earlier version', () => {
  it('replay after the upgrade, and a reused key with another body is still 422', async (t) => {
    const repository = new MemoryRepository();
    const key = randomUUID();
    const body = { amount: 5, note: 'café' };
    // The earlier adapter's consumer: the engine digests the request fingerprint once more.
    const before = new IdempotentConsumer<{ key: string; method: string; target: string; body: unknown }>({
      repository,
      id: 'key',
      mode: 'eager',
      fingerprint: requestFingerprint,
      storeResult: { serialize: (value) => encodeBefore(value as Parameters<typeof encodeBefore>[0]) },
    });
    const stored = {
      status: 201,
      headers: { 'content-type': 'application/json; charset=utf-8', location: '/charges/ch_old' },
      body: Buffer.from('{"id":"ch_old"}'),
    };
    const id = scopedId('POST', '/charges', USER, key);
    const kept = await before.process({ key: id, method: 'POST', target: '/charges', body }, () => stored);
    assert.equal(kept.outcome, 'processed');

    const app = await start(t, repository);
    const retry = await app.post(key, { note: 'café', amount: 5 });
    assert.equal(retry.response.status, 201, retry.text);
    assert.equal(retry.response.headers.get('idempotent-replayed'), 'true');
    assert.equal(retry.response.headers.get('location'), '/charges/ch_old');
    assert.equal(retry.text, '{"id":"ch_old"}');
    const reused = await app.post(key, { amount: 6 });
    assert.equal(reused.response.status, 422, reused.text);
    assert.equal(app.runs(), 0);
  });

  it('the adapter now keeps the request digest as it is, and a text body as text', async (t) => {
    const repository = new MemoryRepository();
    const app = await start(t, repository);
    const key = randomUUID();
    const body = { amount: 7 };
    const first = await app.post(key, body);
    assert.equal(first.response.status, 201, first.text);
    const record = await repository.get(scopedId('POST', '/charges', USER, key));
    assert.equal(record?.fingerprint, requestFingerprint({ method: 'POST', target: '/charges', body }));
    assert.ok(record?.result?.includes(`\n\n${first.text}`), record?.result);
    const retry = await app.post(key, body);
    assert.equal(retry.response.headers.get('idempotent-replayed'), 'true');
    assert.equal(retry.text, first.text);
    assert.equal(app.runs(), 1);
  });
});

describe('stored responses in text form', () => {
  it('round-trip textual UTF-8 bodies, repeated and latin1 header values, and an empty body', () => {
    const cases: { status: number; headers: Record<string, string | string[]>; body: string }[] = [
      {
        status: 201,
        headers: { 'content-type': 'application/json', location: '/a' },
        body: '{"a":"café ☕"}',
      },
      {
        status: 200,
        headers: { 'content-type': 'text/plain', 'set-cookie': ['a=1', 'b=2'], 'x-v': 'caf\u00e9: x' },
        body: 'line\n\nbreaks\n',
      },
      { status: 201, headers: { 'content-type': 'application/problem+json' }, body: '' },
      {
        status: 200,
        headers: JSON.parse('{"content-type":"text/html","__proto__":"p","constructor":["c1","c2"]}'),
        body: '<p>',
      },
      { status: 404, headers: { 'content-type': 'application/xml; q=1', 'x-empty': '' }, body: '2 200\n\n' },
    ];
    for (const { status, headers, body } of cases) {
      const text = encodeResponse({ status, headers, body: Buffer.from(body) });
      assert.ok(text.startsWith('2 '), text);
      const back = decodeResponse(text);
      assert.equal(back.status, status);
      assert.deepEqual(back.headers, headers);
      assert.equal(back.body.toString(), body);
    }
  });

  it('keep other media types, and bodies that are not UTF-8 or hold NUL, in the earlier JSON form', () => {
    const cases: [string | undefined, number[]][] = [
      ['application/json', [0xc3, 0x28]],
      ['text/plain', [0x61, 0, 0x62]],
      ['application/octet-stream', [0x61]],
      ['application/jsonx', [0x61]],
      [undefined, [0x61]],
    ];
    for (const [type, bytes] of cases) {
      const body = Buffer.from(bytes);
      const headers: Record<string, string> = type === undefined ? {} : { 'content-type': type };
      const text = encodeResponse({ status: 200, headers, body });
      assert.ok(text.startsWith('{"v":1,'), text);
      assert.ok(decodeResponse(text).body.equals(body));
    }
    assert.throws(() => decodeResponse('2 x\n\n'));
    assert.throws(() => decodeResponse('2 200\nno-colon\n\n'));
  });
});
