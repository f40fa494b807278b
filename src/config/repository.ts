import { z } from 'zod';
import { ConfigError } from '../errors.js';
import { type OptionsOrigin, parseOptions } from '../options/issues.js';
import { looseKey, matchKey, objectShape, unwrap } from '../options/schema-walk.js';
import { type ConfigSourceInfo, configSource, sourceOf } from '../options/sources.js';
import type { RepositoryModule } from '../repositories/module.js';
import {
  defaultRepositoryType,
  loadRepositoryModule,
  type RepositoryType,
  repositoryTypes,
  validTypes,
} from '../repositories/registry.js';
import type { IdempotentRepository } from '../store/types.js';
import { coerceEnvValue } from './env.js';

/**
 * The `[repository]` table: `type` picks the store; the other keys are that store's options, validated by the
 * store's own schema in {@link resolveRepository} (so this schema never imports a store).
 */
export const repositorySectionSchema = z
  .object({
    type: z
      .enum(repositoryTypes, { error: `unknown repository type; ${validTypes()}` })
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

/** Options of {@link resolveRepository} and {@link openRepository}. */
export interface ResolveRepositoryOptions {
  /** Receives config warnings (keys ignored after a store switch); default `process.emitWarning`. */
  readonly onWarning?: (message: string) => void;
}

/**
 * Loads the store `config.repository.type` names and validates the rest of the table with its `optionsSchema`
 * (errors name the key and where it was set). Keys the file wrote for another store are ignored with a warning
 * when env or a flag chose this one (`IDEM__REPOSITORY__TYPE=memory` over a Redis file).
 */
export async function resolveRepository(
  config: { readonly repository: RepositorySection },
  options: ResolveRepositoryOptions = {},
): Promise<ResolvedRepository> {
  return resolveSection(config.repository, configSource(config), options);
}

/** What the store's options get wrong in a config that failed elsewhere, for loadConfig to report too. */
export async function storeProblems(
  schema: z.ZodType,
  input: Record<string, unknown>,
  info: ConfigSourceInfo,
): Promise<string | undefined> {
  const table = objectShape(schema)?.shape.repository;
  if (table === undefined || unwrap(table) !== repositorySectionSchema) return undefined;
  const section = input.repository;
  // Without a key of the store's (nothing written for it), nothing is the user's to fix yet: what the store
  // needs may still be given by the caller (the CLI's --store) before the store is opened.
  if (!isTable(section) || Object.keys(section).every((key) => key === 'type')) return undefined;
  if (!repositorySectionSchema.safeParse(section).success) return undefined;
  try {
    await resolveSection(section as RepositorySection, info, { onWarning: () => {} });
    return undefined;
  } catch (error) {
    return error instanceof ConfigError ? error.message : undefined;
  }
}

async function resolveSection(
  repository: RepositorySection | undefined,
  info: ConfigSourceInfo | undefined,
  options: ResolveRepositoryOptions,
): Promise<ResolvedRepository> {
  const origin: OptionsOrigin = { kind: 'config', info, prefix: ['repository'] };
  const section = parseOptions(repositorySectionSchema, repository ?? {}, origin);
  const module = await loadRepositoryModule(section.type).catch((error: unknown) => {
    throw rekeySource(error, info);
  });
  const { type: _type, ...raw } = section;
  let input = info ? applyStoreEnv(raw, module.optionsSchema, info) : raw;
  if (info) input = dropOtherStoreKeys(input, section.type, module.optionsSchema, info, options);
  // `type` is checked above, so the store's schema does not know it: an unknown key may be `type` misspelt.
  const storeOrigin: OptionsOrigin = {
    ...origin,
    siblingKeys: ['type'],
    validKeysNote: typeGiven(repository, info)
      ? undefined
      : `valid keys here (repository.type is not set, so the default store, ${section.type}, is used)`,
  };
  return { type: section.type, module, options: parseOptions(module.optionsSchema, input, storeOrigin) };
}

/** True when `repository.type` was set (file, env or flag), not filled in by the default. */
function typeGiven(section: RepositorySection | undefined, info: ConfigSourceInfo | undefined): boolean {
  if (info === undefined) return section?.type !== undefined;
  const fileSection = info.fileData?.repository;
  return (
    (isTable(fileSection) && fileSection.type !== undefined) ||
    setOutsideFile(info, 'type') ||
    info.overrides.some((o) => o.key === 'repository')
  );
}

function dropOtherStoreKeys(
  input: Record<string, unknown>,
  type: RepositoryType,
  schema: z.ZodType,
  info: ConfigSourceInfo,
  options: ResolveRepositoryOptions,
): Record<string, unknown> {
  const fileSection = info.fileData?.repository;
  if (!isTable(fileSection)) return input;
  const fileType = typeof fileSection.type === 'string' ? fileSection.type : defaultRepositoryType;
  if (fileType === type) return input;
  const known = objectShape(schema)?.shape ?? {};
  const kept = { ...input };
  const ignored: string[] = [];
  for (const key of Object.keys(fileSection)) {
    if (key === 'type' || Object.hasOwn(known, key) || !Object.hasOwn(kept, key)) continue;
    if (setOutsideFile(info, key)) continue;
    delete kept[key];
    ignored.push(`repository.${key}`);
  }
  if (ignored.length > 0) {
    const where = sourceOf(info, ['repository', 'type']) ?? 'the config';
    const warn =
      options.onWarning ?? ((message: string) => process.emitWarning(message, 'IdemConfigWarning'));
    warn(
      `${info.file ?? '<config>'}: ignoring ${ignored.join(', ')}: written for the ${fileType} store, ` +
        `but ${where} selects ${type}`,
    );
  }
  return kept;
}

/** Opens the configured repository; close it when done. */
export async function openRepository(
  config: { readonly repository: RepositorySection },
  options: ResolveRepositoryOptions = {},
): Promise<IdempotentRepository> {
  const { module, options: storeOptions } = await resolveRepository(config, options);
  return module.create(storeOptions);
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
      // Own keys only, so names such as CONSTRUCTOR never reach Object.prototype.
      current = shape && Object.hasOwn(shape, key) ? shape[key] : undefined;
      const value = Object.hasOwn(target, guessed) ? target[guessed] : undefined;
      if (key !== guessed) delete target[guessed];
      if (k === steps.length - 1) {
        target[key] = coerceEnvValue(entry.raw, current);
      } else {
        const existing = Object.hasOwn(target, key) ? target[key] : undefined;
        const next = { ...(isTable(existing) ? existing : {}), ...(isTable(value) ? value : {}) };
        target[key] = next;
        target = next;
      }
    }
  }
  return input;
}

/** True when env or a flag (re)set `repository.<key>`, so it is the user's choice for this store. */
function setOutsideFile(info: ConfigSourceInfo, key: string): boolean {
  const loose = looseKey(key);
  return (
    info.env.some(
      (e) => e.path[0] === 'repository' && e.path[1] !== undefined && looseKey(e.path[1]) === loose,
    ) || info.overrides.some((o) => o.key.split('.')[0] === 'repository' && o.key.split('.')[1] === key)
  );
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
