// Resolve hook of register.mjs: a hidden package fails exactly as a missing one does in Node's ESM resolver.
import { fileURLToPath } from 'node:url';

let hidden = new Set();

export function initialize(data) {
  hidden = new Set(data?.packages ?? []);
}

export async function resolve(specifier, context, next) {
  const parts = specifier.split('/');
  const name = specifier.startsWith('@') ? parts.slice(0, 2).join('/') : parts[0];
  if (hidden.has(name)) {
    const from = context.parentURL?.startsWith('file:')
      ? fileURLToPath(context.parentURL)
      : context.parentURL;
    const error = new Error(`Cannot find package '${name}' imported from ${from}`);
    error.code = 'ERR_MODULE_NOT_FOUND';
    throw error;
  }
  return next(specifier, context);
}
