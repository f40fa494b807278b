import assert from 'node:assert/strict';
import { request } from 'node:http';
import { networkInterfaces } from 'node:os';
import { describe, it } from 'node:test';
import { loadConfig } from '../../src/config/load.js';
import { NodeMetrics } from '../../src/node/metrics.js';
import { nodeConfigSchema } from '../../src/node/options.js';

const CONFIG = `
[kafka]
brokers = ["127.0.0.1:9092"]
[input]
topic = "in"
[output]
topic = "out"
[dlq]
topic = "dlq"
[dedup]
id = "uid"
[repository]
type = "memory"
[metrics]
port = 0
`;

/** This machine's first non-loopback IPv4 address: where another host would scrape from. */
function externalAddress(): string {
  for (const addresses of Object.values(networkInterfaces())) {
    for (const a of addresses ?? []) if (a.family === 'IPv4' && !a.internal) return a.address;
  }
  return assert.fail('this test needs a non-loopback IPv4 interface');
}

/** The status of `GET http://host:port/metrics`, or the connection error's code. */
function scrape(host: string, port: number): Promise<number | string> {
  return new Promise((resolve) => {
    const req = request({ host, port, path: '/metrics', timeout: 5_000 }, (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    req.on('timeout', () => req.destroy(Object.assign(new Error('timeout'), { code: 'TIMEOUT' })));
    req.on('error', (error: NodeJS.ErrnoException) => resolve(error.code ?? String(error)));
    req.end();
  });
}

async function served(env: Record<string, string>, check: (port: number) => Promise<void>): Promise<void> {
  const config = await loadConfig(nodeConfigSchema, { text: CONFIG, env });
  const metrics = new NodeMetrics();
  const port = await metrics.listen(config.metrics.port, config.metrics.host);
  try {
    await check(port);
  } finally {
    await metrics.close();
  }
}

describe('/metrics is on loopback unless opened', () => {
  it('by default answers on 127.0.0.1 and refuses connections to the network address', async () => {
    const external = externalAddress();
    await served({}, async (port) => {
      assert.equal(await scrape('127.0.0.1', port), 200);
      assert.equal(await scrape(external, port), 'ECONNREFUSED');
    });
  });

  it('metrics.host = "0.0.0.0" (here IDEM__METRICS__HOST) opens it to the network', async () => {
    const external = externalAddress();
    await served({ IDEM__METRICS__HOST: '0.0.0.0' }, async (port) => {
      assert.equal(await scrape(external, port), 200);
    });
  });
});
