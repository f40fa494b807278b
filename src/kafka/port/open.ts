import { ConfigError } from '../../errors.js';
import {
  defaultKafkaClient,
  type KafkaClient,
  type KafkaClientBehaviour,
  type KafkaClientFactory,
  type KafkaClientName,
  type KafkaClientSettings,
} from './client.js';

/** Each implementation's module and the package it is built on (both optional peers of the package). */
const IMPLEMENTATIONS: Record<KafkaClientName, { readonly module: string; readonly package: string }> = {
  kafkajs: { module: '../kafkajs/index.js', package: 'kafkajs' },
  platformatic: { module: '../platformatic/index.js', package: '@platformatic/kafka' },
};

/** Where the choice of client was made, for the error that names it. */
export interface OpenKafkaClientOptions {
  /** The config key (or option) that chose the client; default `kafka.client`. */
  readonly configKey?: string;
}

/**
 * The one place a Kafka client is chosen: builds the `client` implementation (default kafkajs) over the
 * settings. Each implementation is loaded only when chosen, so validating a config loads no client library, and a
 * user of one client never installs the other. A missing library is a ConfigError naming `configKey` and the
 * package to install.
 */
export async function openKafkaClient(
  settings: KafkaClientSettings & { readonly client?: KafkaClientName | undefined },
  behaviour: KafkaClientBehaviour,
  options: OpenKafkaClientOptions = {},
): Promise<KafkaClient> {
  const name = settings.client ?? defaultKafkaClient;
  const configKey = options.configKey ?? 'kafka.client';
  const implementation = IMPLEMENTATIONS[name];
  if (implementation === undefined) {
    throw new ConfigError(
      configKey,
      `unknown Kafka client ${JSON.stringify(name)}: expected one of ${Object.keys(IMPLEMENTATIONS).join(', ')}`,
    );
  }
  let loaded: { createClient?: KafkaClientFactory };
  try {
    // A variable specifier: the platformatic implementation may be absent from a build, and must not be a
    // compile-time dependency of the port.
    const specifier: string = implementation.module;
    loaded = (await import(specifier)) as { createClient?: KafkaClientFactory };
  } catch (error) {
    throw new ConfigError(configKey, missing(name, implementation.package, error), { cause: error });
  }
  if (typeof loaded.createClient !== 'function') {
    throw new ConfigError(
      configKey,
      `the ${name} Kafka client implementation (${implementation.module}) exports no createClient`,
    );
  }
  return loaded.createClient(settings, behaviour);
}

/** What to do about an implementation that did not load. */
function missing(name: KafkaClientName, pkg: string, error: unknown): string {
  const code = (error as { code?: unknown })?.code;
  const text = error instanceof Error ? error.message : String(error);
  if ((code === 'ERR_MODULE_NOT_FOUND' || code === 'MODULE_NOT_FOUND') && text.includes(pkg)) {
    return `client "${name}" needs the package ${pkg}, which is not installed: npm install ${pkg}`;
  }
  if (code === 'ERR_MODULE_NOT_FOUND' || code === 'MODULE_NOT_FOUND') {
    return `client "${name}" is not available in this build of idempotent-consumer (${text})`;
  }
  return `client "${name}" could not be loaded: ${text}`;
}
