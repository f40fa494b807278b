import { z } from 'zod';
import { ConfigError } from '../errors.js';
import type { RepositoryModule } from '../repositories/module.js';
import {
  defaultRepositoryType,
  loadRepositoryModule,
  type RepositoryType,
  repositoryTypes,
  validTypes,
} from '../repositories/registry.js';
import type { IdempotentRepository } from '../repositories/types.js';
import { coerceEnvValue } from './env.js';
import { toConfigError } from './issues.js';
import { matchKey, objectShape } from './schema-walk.js';
import { type ConfigSourceInfo, configSource, sourceOf } from './sources.js';

/**
 * The `[repository]` table: `type` picks the store; the other keys are that store's options, validated by the
 * store's own schema in {@link resolveRepository} (so this schema never imports a store).
 */
export const repositorySectionSchema = z
  .object({
    type: z
      .enum(repositoryTypes, {
        error: (issue) => `unknown repository type ${JSON.stringify(issue.input)}; ${validTypes()}`,
      })
      .default(defaultRepositoryType),
  })
  .loose();

/** Parsed `[repository]` table before the store validated its options. */
export type RepositorySection = z.output<typeof repositorySectionSchema>;

/** A store chosen by config, with its validated options. */
export interface ResolvedRepository {
  readonly type: RepositoryType;
  readonly module: RepositoryModule;
  readonly options: unknown;
}

/**
 * Loads the store named by `config.repository.type` and validates the rest of the table with its
 * `optionsSchema`. Errors name `repository.<key>` and, for a config from loadConfig, the file line or env
 * variable that set it. Env keys are matched to the store's keys here, because only now is the schema known.
 */
export async function resolveRepository(config: {
  readonly repository: RepositorySection;
}): Promise<ResolvedRepository> {
  const info = configSource(config);
  const input0 = config.repository ?? {};
  const parsed = repositorySectionSchema.safeParse(input0);
  if (!parsed.success) {
    throw toConfigError(parsed.error, {
      input: input0,
      schema: repositorySectionSchema,
      prefix: ['repository'],
      ...(info ? { info } : {}),
    });
  }
  const section = parsed.data;
  const module = await loadRepositoryModule(section.type).catch((error: unknown) => {
    throw rekeySource(error, info);
  });
  const { type: _type, ...raw } = section;
  const input = info ? applyStoreEnv(raw, module.optionsSchema, info) : raw;
  const result = module.optionsSchema.safeParse(input);
  if (!result.success) {
    throw toConfigError(result.error, {
      input,
      schema: module.optionsSchema,
      prefix: ['repository'],
      ...(info ? { info } : {}),
    });
  }
  return { type: section.type, module, options: result.data };
}

/** Opens the configured repository; close it when done. */
export async function openRepository(config: {
  readonly repository: RepositorySection;
}): Promise<IdempotentRepository> {
  const { module, options } = await resolveRepository(config);
  return module.create(options);
}

/**
 * Re-keys env overrides (`KEYPREFIX` → `keyPrefix`, at any depth) and re-coerces their values for the store's
 * schema; only the tables on an override's path are copied, the loaded config is not changed.
 */
function applyStoreEnv(
  raw: Record<string, unknown>,
  schema: z.ZodType,
  info: ConfigSourceInfo,
): Record<string, unknown> {
  const input = { ...raw };
  for (const entry of info.env) {
    if (entry.known || entry.path[0] !== 'repository' || entry.path.length < 2) continue;
    let target = input;
    let current: z.ZodType | undefined = schema;
    const steps = entry.path.slice(1);
    for (let k = 0; k < steps.length; k++) {
      const guessed = steps[k] as string;
      const shape: Record<string, z.ZodType> | undefined = current && objectShape(current)?.shape;
      const key: string = (shape && matchKey(shape, guessed)) ?? guessed;
      current = shape?.[key];
      const value = target[guessed];
      if (key !== guessed) delete target[guessed];
      if (k === steps.length - 1) {
        target[key] = coerceEnvValue(entry.raw, current);
      } else {
        const next = { ...(isTable(target[key]) ? target[key] : {}), ...(isTable(value) ? value : {}) };
        target[key] = next;
        target = next;
      }
    }
  }
  return input;
}

function isTable(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

function rekeySource(error: unknown, info: ConfigSourceInfo | undefined): unknown {
  if (!(error instanceof ConfigError) || !info) return error;
  const source = sourceOf(info, ['repository', 'type']);
  const message = error.message.replace(/^repository\.type: /, '');
  return source ? new ConfigError(error.key, message, { source, cause: error.cause }) : error;
}
