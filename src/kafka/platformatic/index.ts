import { Admin, connectionsConnectsChannel, FindCoordinatorKeyTypes } from '@platformatic/kafka';
import {
  type KafkaClient,
  type KafkaClientBehaviour,
  type KafkaClientFactory,
  type KafkaClientSettings,
  logThrough,
} from '../port/index.js';
import { PlatformaticAdmin } from './admin.js';
import { PlatformaticGroupConsumer } from './consumer.js';
import { platformaticErrors } from './errors.js';
import { baseOptions, type ClientContext, type Warn } from './options.js';
import { PlatformaticPartitionReader } from './partition-reader.js';
import { PlatformaticProducer } from './producer.js';
import { stepLimitMs, timeLimited } from './time-limit.js';

// The port over @platformatic/kafka; beyond kafkajs, its offsets carry the generation (KIP-447).

/** Why each connection failed: the pool's `failed` event has no reason, the diagnostics channel has. */
const connectErrors = new WeakMap<object, Error>();
connectionsConnectsChannel.error.subscribe((message: unknown) => {
  const { connection, error } = message as { connection?: object; error?: Error };
  if (connection && error) connectErrors.set(connection, error);
});

/** The innermost message of an error's cause chain (the socket's own error). */
function rootMessage(error: Error | undefined): string | undefined {
  let e = error;
  for (let depth = 1; depth < 5 && e?.cause instanceof Error; depth++) e = e.cause;
  return e?.message;
}

export const createClient: KafkaClientFactory = (
  settings: KafkaClientSettings,
  behaviour: KafkaClientBehaviour,
) => {
  const base = baseOptions(settings, behaviour);
  const warn: Warn = (message, fields) =>
    logThrough(behaviour, {
      level: 'warn',
      namespace: 'client',
      message,
      fields: { kafka: 'platformatic', ...fields },
    });
  const context: ClientContext = {
    base,
    retries: behaviour.retries,
    limited: (step, work, warnThrough = warn) =>
      timeLimited(step, work, { limitMs: stepLimitMs(base.requestTimeout), warn: warnThrough }),
    watch: (client) => {
      client.on('client:broker:failed', ({ broker, connection }) => {
        const where = `${broker.host}:${broker.port}`;
        const reason = rootMessage(connectErrors.get(connection));
        const failure = `connection to ${where} failed${reason === undefined ? '' : `: ${reason}`}`;
        logThrough(behaviour, {
          level: 'warn',
          namespace: 'connection',
          message: `Kafka broker ${failure}`,
          fields: { kafka: 'platformatic', broker: where },
          connectionFailure: failure,
        });
      });
      return client;
    },
  };
  // For offsets sent for a group this client does not consume with: one admin, opened on first use.
  let admin: Admin | undefined;
  const groupCoordinator = async (groupId: string): Promise<number> => {
    admin ??= new Admin({ ...context.base, clientId: `${settings.clientId}-coordinator` });
    const [found] = await admin.findCoordinator({ keyType: FindCoordinatorKeyTypes.GROUP, keys: [groupId] });
    if (found === undefined) throw new Error(`no coordinator found for group ${groupId}`);
    return found.nodeId;
  };
  const client: KafkaClient = {
    name: 'platformatic',
    capabilities: { fencesByGroup: true },
    errors: platformaticErrors,
    consumer: (options) => new PlatformaticGroupConsumer(context, options, behaviour.logger),
    producer: (options = {}) => new PlatformaticProducer(context, options, groupCoordinator),
    admin: () => new PlatformaticAdmin(context),
    partitionReader: () => new PlatformaticPartitionReader(context),
    close: async () => {
      await admin?.close();
      admin = undefined;
    },
  };
  return client;
};
