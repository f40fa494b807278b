import {
  type Base,
  type Broker,
  type CallbackWithPromise,
  type Connection,
  kGetApi,
  kGetConnection,
} from '@platformatic/kafka';

/*
 * The library's symbol-keyed internals (exported, but not typed) the port sends its own requests through: a
 * pooled connection to a broker, and an API function at the version the broker and the library agreed on.
 */

/** A library client (Consumer, Admin, Producer). */
// biome-ignore lint/suspicious/noExplicitAny: the clients' option types differ; only Base's methods are used.
export type LibraryClient = Base<any>;

/** Node-style callback to promise, for the library's callback-only internals. */
function call<T>(fn: (callback: CallbackWithPromise<T>) => void): Promise<T> {
  return new Promise((resolve, reject) => {
    fn(((error: Error | null, value?: T) =>
      error ? reject(error) : resolve(value as T)) as CallbackWithPromise<T>);
  });
}

interface Internals {
  [kGetConnection](broker: Broker, callback: CallbackWithPromise<Connection>): void;
  [kGetApi]<Api>(name: string, callback: CallbackWithPromise<Api>): void;
}

/** One of the library's API functions: a connection, the request's fields in order, then a callback. */
type LibraryApi = (connection: Connection, ...fields: unknown[]) => void;

/** The client's connection to `broker` (opened when it has none). */
export function connectionTo(client: LibraryClient, broker: Broker): Promise<Connection> {
  return call<Connection>((cb) => (client as unknown as Internals)[kGetConnection](broker, cb));
}

/** Sends request `name` (its fields in the library's order, at the agreed version) over `connect`. */
export async function send<T>(
  client: LibraryClient,
  name: string,
  connect: Connection | (() => Promise<Connection>),
  ...fields: unknown[]
): Promise<T> {
  const api = await call<LibraryApi>((cb) => (client as unknown as Internals)[kGetApi](name, cb));
  const connection = typeof connect === 'function' ? await connect() : connect;
  return call<T>((cb) => api(connection, ...fields, cb));
}
