import type { RepositoryType } from '../repositories/registry.js';

/**
 * URL schemes that name a store on the command line (`--store postgres://…`), and the `repository.type` each
 * selects. A store added here also needs its `idem migrate` entry when it has a schema (see migrate.ts).
 */
export const storeSchemes: Readonly<Record<string, RepositoryType>> = {
  'postgres:': 'postgres',
  'postgresql:': 'postgres',
};

/** The store a `--store` value names when it is a URL of a known scheme; undefined for anything else (a path). */
export function storeOfUrl(value: string): { type: RepositoryType; url: string } | undefined {
  const scheme = /^([a-z][a-z0-9+.-]*:)\/\//i.exec(value)?.[1]?.toLowerCase();
  const type = scheme === undefined ? undefined : storeSchemes[scheme];
  return type === undefined ? undefined : { type, url: value };
}
