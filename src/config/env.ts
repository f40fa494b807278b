import type { z } from 'zod';
import { ConfigError } from '../errors.js';
import { camelCase, matchKey, objectShape } from '../options/schema-walk.js';
import type { EnvOverride } from '../options/sources.js';

const NUMBER = /^-?(?:\d+|\d*\.\d+)(?:[eE][+-]?\d+)?$/;

/**
 * Collects `<prefix>__A__B=value` variables. Segments match schema keys ignoring case and `_`, so
 * `IDEM__CONSUMER__SKIP_DUPLICATE` sets `consumer.skipDuplicate`.
 */
export function readEnvOverrides(
  schema: z.ZodType,
  env: Readonly<Record<string, string | undefined>>,
  prefix: string,
): EnvOverride[] {
  const marker = `${prefix.toUpperCase()}__`;
  const overrides: EnvOverride[] = [];
  for (const variable of Object.keys(env).sort()) {
    const raw = env[variable];
    if (raw === undefined || !variable.toUpperCase().startsWith(marker)) continue;
    const segments = variable.slice(marker.length).split('__');
    if (segments.some((s) => s === '')) {
      throw new ConfigError(variable, 'empty key segment; separate keys with exactly two underscores', {
        label: `env ${variable}`,
      });
    }
    // Past the first segment the schema does not know, `current` stays undefined and keys are guesses.
    let current: z.ZodType | undefined = schema;
    const path = segments.map((segment) => {
      const shape = current && objectShape(current)?.shape;
      const key = shape && matchKey(shape, segment);
      current = key === undefined ? undefined : shape?.[key];
      return key ?? camelCase(segment);
    });
    overrides.push({ variable, path, raw, known: current !== undefined });
  }
  return overrides;
}

/**
 * Turns an env string into the value the schema wants: the first of boolean, number, JSON, the string itself
 * or a comma-separated list that the leaf schema accepts; without a schema, the first of these.
 */
export function coerceEnvValue(raw: string, leaf: z.ZodType | undefined): unknown {
  const text = raw.trim();
  const candidates: unknown[] = [];
  if (/^(true|false)$/i.test(text)) candidates.push(text.toLowerCase() === 'true');
  if (NUMBER.test(text)) candidates.push(Number(text));
  if (text.startsWith('[') || text.startsWith('{')) {
    try {
      candidates.push(JSON.parse(text));
    } catch {
      // Not JSON after all: the plain string stays a candidate.
    }
  }
  candidates.push(raw);
  if (text !== '') candidates.push(text.split(',').map((part) => part.trim()));
  if (!leaf) return candidates[0];
  // No candidate is undefined (JSON.parse only sees `[` or `{` text), so `??` falls back only when none fits.
  return candidates.find((candidate) => leaf.safeParse(candidate).success) ?? raw;
}
