import type { IdempotentConsumer } from './idempotent-consumer.js';

/** Options of {@link idempotent}. */
export interface IdempotentMethodOptions<M> {
  /** The message the method's arguments stand for; the first argument by default. */
  readonly message?: (...args: never[]) => M;
}

/** A method the decorator can wrap. */
// biome-ignore lint/suspicious/noExplicitAny: a decorator accepts any method signature.
type AnyMethod = (this: any, ...args: any[]) => any;

/** The decorator {@link idempotent} returns: a TC39 standard method decorator, or a legacy one. */
export interface IdempotentDecorator {
  /** TC39 (stage 3) standard decorator: `(method, context)`. */
  <F extends AnyMethod>(method: F, context: ClassMethodDecoratorContext): F;
  /** Legacy `experimentalDecorators` form: `(prototype, name, descriptor)`. */
  <D extends PropertyDescriptor>(target: object, key: string | symbol, descriptor: D): D;
}

/**
 * Makes a class method idempotent through `consumer`, as Powertools' `@idempotent`: each message (the first
 * argument, or `options.message(...args)`) runs it once; a duplicate resolves to the kept value (`storeResult`)
 * or undefined. It rejects as `process` does, and on a conflict (a method call has no outcome to report it in).
 */
export function idempotent<M>(
  consumer: IdempotentConsumer<M>,
  options: IdempotentMethodOptions<M> = {},
): IdempotentDecorator {
  const toMessage = (options.message ?? ((first: M) => first)) as (...args: unknown[]) => M;
  const wrap = (method: AnyMethod): AnyMethod =>
    async function (this: unknown, ...args: unknown[]) {
      const outcome = await consumer.process(toMessage(...args), () => method.apply(this, args));
      if (outcome.outcome === 'conflict') throw outcome.error;
      return outcome.result;
    };
  return ((target: unknown, context: unknown, descriptor?: PropertyDescriptor) => {
    if (descriptor !== undefined) {
      // Legacy form: replace the descriptor's function.
      if (typeof descriptor.value !== 'function') {
        throw new TypeError(`@idempotent applies to methods; ${String(context)} is not one`);
      }
      return { ...descriptor, value: wrap(descriptor.value as AnyMethod) };
    }
    const ctx = context as Partial<ClassMethodDecoratorContext> | undefined;
    if (typeof target !== 'function' || ctx?.kind !== 'method') {
      throw new TypeError(`@idempotent applies to methods; got a ${ctx?.kind ?? typeof target}`);
    }
    return wrap(target as AnyMethod);
  }) as IdempotentDecorator;
}
