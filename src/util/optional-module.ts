import { MissingDependencyError } from '../errors.js';

/** What needs an optional package (`"idem node"`), and the fix when not `npm install <name>` (a pinned version). */
type OptionalModuleContext = Pick<MissingDependencyError, 'feature'> & { readonly install?: string };

/**
 * Imports an optional npm package (a peer or optional dependency). When it is not installed, rejects with a
 * {@link MissingDependencyError} naming the feature and `npm install <name>` instead of Node's resolver stack.
 */
export async function loadOptional<T>(name: string, context: OptionalModuleContext): Promise<T> {
  try {
    return (await import(name)) as T;
  } catch (error) {
    throw asMissingDependency(error, context) ?? error;
  }
}

/**
 * The {@link MissingDependencyError} for a failed `import()`/`require()` of an npm package that is not
 * installed, or undefined for any other failure (a syntax error, a missing file of our own).
 */
export function asMissingDependency(
  error: unknown,
  context: OptionalModuleContext,
): MissingDependencyError | undefined {
  if (error instanceof MissingDependencyError) return error;
  const { code, message } = (error ?? {}) as { code?: unknown; message?: unknown };
  if (code !== 'ERR_MODULE_NOT_FOUND' && code !== 'MODULE_NOT_FOUND') return undefined;
  const specifier = /Cannot find (?:package|module) '([^']+)'/.exec(String(message))?.[1];
  const name = specifier === undefined ? undefined : packageName(specifier);
  if (name === undefined) return undefined;
  return new MissingDependencyError(name, context.feature, { cause: error, install: context.install });
}

/**
 * The npm package a bare specifier belongs to (`@scope/pkg/sub` → `@scope/pkg`, `pkg/sub` → `pkg`); undefined
 * for relative, absolute, URL and `node:` specifiers, which no `npm install` can fix.
 */
export function packageName(specifier: string): string | undefined {
  if (/^(\.|\/|[a-zA-Z]:[\\/]|[a-zA-Z][a-zA-Z0-9+.-]*:)/.test(specifier)) return undefined;
  const parts = specifier.split('/');
  if (specifier.startsWith('@')) return parts.length >= 2 ? `${parts[0]}/${parts[1]}` : undefined;
  return parts[0] || undefined;
}
