import { ConfigError, errorMessage } from '../../errors.js';
import { asMissingDependency } from '../../util/optional-module.js';
import type { KafkaClient, KafkaClientBehaviour, KafkaClientFactory, KafkaClientSettings } from './client.js';
import { defaultKafkaClient, type KafkaClientName } from './names.js';

/** Each implementation's module (`@platformatic/kafka` an optional dependency, kafkajs an optional peer). */
const IMPLEMENTATIONS: Record<KafkaClientName, { readonly module: string; readonly package: string }> = {
  kafkajs: { module: '../kafkajs/index.js', package: 'kafkajs' },
  platformatic: { module: '../platformatic/index.js', package: '@platformatic/kafka' },
};

/**
 * The command that installs `@platformatic/kafka` on this Node: 2.x needs Node >= 22.22, and below 22.19 npm
 * leaves the optional dependency out (1.x's dependencies claim 22.19, though 1.x runs on 20.19.4+): name 1.x there.
 */
export function platformaticInstallCommand(version: string = process.versions.node): string {
  const [major = 0, minor = 0] = version.split('.').map(Number);
  const installsItself = major > 22 || (major === 22 && minor >= 19);
  return installsItself ? 'npm install @platformatic/kafka' : 'npm install @platformatic/kafka@^1.35.0';
}

/** Who chose the client, for the errors that say what to do. */
export interface KafkaClientChoice {
  /** The config key (or option) that chose the client; default `kafka.client`. */
  readonly configKey?: string;
  /** What needs the client, for a missing package (`idem node`, `the kafka store`); default `the Kafka client`. */
  readonly feature?: string;
}

/**
 * Loads the implementation of client `name` (default platformatic), only the chosen one, so a user of one client
 * never installs the other. A missing client library is a MissingDependencyError naming the package (and the
 * config key, for a client not the default); an implementation absent from this build, a ConfigError.
 */
export async function loadKafkaClientFactory(
  name: KafkaClientName | undefined,
  choice: KafkaClientChoice = {},
): Promise<KafkaClientFactory> {
  const client = name ?? defaultKafkaClient;
  const configKey = choice.configKey ?? 'kafka.client';
  const implementation = IMPLEMENTATIONS[client];
  if (implementation === undefined) {
    throw new ConfigError(
      configKey,
      `unknown Kafka client ${JSON.stringify(client)}: expected one of ${Object.keys(IMPLEMENTATIONS).join(', ')}`,
    );
  }
  let loaded: { createClient?: unknown };
  try {
    // A variable specifier: an implementation may be absent from a build, and is no compile-time dependency.
    const specifier: string = implementation.module;
    loaded = (await import(specifier)) as { createClient?: unknown };
  } catch (error) {
    const feature = choice.feature ?? 'the Kafka client';
    const missing = asMissingDependency(error, {
      feature: client === defaultKafkaClient ? feature : `${feature} with ${configKey} = "${client}"`,
      ...(client === 'platformatic' ? { install: platformaticInstallCommand() } : {}),
    });
    if (missing) throw missing;
    throw new ConfigError(
      configKey,
      `the ${client} Kafka client could not be loaded (it needs the npm package ${implementation.package}): ${errorMessage(error)}`,
      { cause: error },
    );
  }
  return loaded.createClient as KafkaClientFactory;
}

/** The one place a Kafka client is made (errors: {@link loadKafkaClientFactory}). */
export async function openKafkaClient(
  settings: KafkaClientSettings & { readonly client?: KafkaClientName | undefined },
  behaviour: KafkaClientBehaviour,
  choice: KafkaClientChoice = {},
): Promise<KafkaClient> {
  const create = await loadKafkaClientFactory(settings.client, choice);
  return create(settings, behaviour);
}
