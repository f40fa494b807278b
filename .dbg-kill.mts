import { spawn } from 'node:child_process';
import { writeFileSync, mkdtempSync } from 'node:fs';
import { Kafka, logLevel } from 'kafkajs';
const kafka = new Kafka({ clientId: 'dbg', brokers: ['127.0.0.1:9092'], logLevel: logLevel.NOTHING });
const admin = kafka.admin(); await admin.connect();
const s = Date.now().toString(36);
const topic = 'dbg-in-' + s, output = 'dbg-out-' + s, dlq = 'dbg-dlq-' + s;
await admin.createTopics({ topics: [{ topic, numPartitions: 3 }], waitForLeaders: true });
const p = kafka.producer(); await p.connect();
for (let k = 0; k < 10; k++) await p.send({ topic, messages: Array.from({ length: 5000 }, (_, i) => ({ value: JSON.stringify({ uid: 'u' + (k * 5000 + i) }), partition: i % 3 })) });
const dir = mkdtempSync('/tmp/eos/dbg-');
writeFileSync(dir + '/node.toml', `[kafka]\nbrokers=["127.0.0.1:9092"]\nsessionTimeout="6s"\n[input]\ntopic="${topic}"\ngroupId="g-${s}"\nbatchSize=500\nbatchTimeout="200ms"\n[output]\ntopic="${output}"\nguarantee="exactly-once"\n[dlq]\ntopic="${dlq}"\n[dedup]\nid="uid"\n[repository]\ntype="rocksdb"\npath="${dir}/store"\n[metrics]\nenabled=false\n[perf]\ninterval="1s"\n`);
for (let round = 0; round < 3; round++) {
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/node/bin.ts', '--config', dir + '/node.toml'], { stdio: ['ignore', 'pipe', 'pipe'] });
  const t0 = Date.now();
  let forwarding = false;
  child.stdout.setEncoding('utf8').on('data', (text: string) => { for (const line of text.split('\n')) { if (!line) continue; try { const l = JSON.parse(line); if (l.perf && l.perf.rowsOut > 0) forwarding = true; if (!l.perf || l.perf.rowsOut > 0) console.log(round, ((Date.now() - t0) / 1000).toFixed(1), l.level, l.msg.slice(0, 200)); } catch { console.log(round, line.slice(0, 200)); } } });
  child.stderr.setEncoding('utf8').on('data', (t: string) => console.log('ERR', t.slice(0, 300)));
  while (!forwarding && Date.now() - t0 < 60000) await new Promise((r) => setTimeout(r, 100));
  await new Promise((r) => setTimeout(r, 700));
  child.kill('SIGKILL');
  await new Promise((r) => child.once('exit', r));
  console.log('killed', round);
}
await p.disconnect(); await admin.deleteTopics({ topics: [topic, output, dlq] }); await admin.disconnect();
