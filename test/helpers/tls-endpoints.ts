import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { connect, createServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Duplex } from 'node:stream';
import { createSecureContext, TLSSocket } from 'node:tls';

/** A CA made for one test, and a server certificate it signed for `names` only. PEM contents. */
export interface TestCertificates {
  readonly ca: string;
  readonly cert: string;
  readonly key: string;
}

/**
 * Makes a CA and a server certificate it signs for `names` (DNS names; `IP:` entries as given) with openssl,
 * as scripts/stack/lib.sh does for the stack: a certificate a client trusts, issued for another host.
 */
export function makeCertificates(names: readonly string[]): TestCertificates {
  const dir = mkdtempSync(join(tmpdir(), 'idem-tls-'));
  try {
    const run = (...args: string[]) => execFileSync('openssl', args, { cwd: dir, stdio: 'pipe' });
    run(
      ...'req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=idem-test-ca'.split(' '),
      '-keyout',
      'ca.key',
      '-out',
      'ca.pem',
    );
    run(
      ...'req -newkey rsa:2048 -nodes'.split(' '),
      '-subj',
      `/CN=${names[0]}`,
      '-keyout',
      'server.key',
      '-out',
      'server.csr',
    );
    const san = names.map((name) => (name.startsWith('IP:') ? name : `DNS:${name}`)).join(',');
    writeFileSync(
      join(dir, 'ext.cnf'),
      `subjectAltName=${san}\nbasicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\n`,
    );
    run(
      ...'x509 -req -days 2 -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out server.pem -extfile ext.cnf'.split(
        ' ',
      ),
    );
    const read = (file: string) => readFileSync(join(dir, file), 'utf8');
    return { ca: read('ca.pem'), cert: read('server.pem'), key: read('server.key') };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Answers once `server` listens on `host` (a spare port); resolves its port. */
async function listen(server: Server, host: string): Promise<number> {
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, host, () => resolve());
  });
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('no TCP address');
  return address.port;
}

/** Closes a server and every socket it accepted. */
async function shut(server: Server, sockets: Set<Socket>): Promise<void> {
  for (const socket of sockets) socket.destroy();
  await new Promise<void>((resolve) => server.close(() => resolve()));
}

/**
 * A TCP relay on another loopback address (127.0.0.2 by default) to a real server: the same server, reached by
 * an address its certificate does not name.
 */
export class LoopbackRelay {
  readonly #server: Server;
  readonly #sockets = new Set<Socket>();
  port = 0;

  private constructor(target: { host: string; port: number }) {
    this.#server = createServer((client) => {
      const upstream = connect(target);
      for (const socket of [client, upstream]) {
        this.#sockets.add(socket);
        socket.on('close', () => this.#sockets.delete(socket));
        socket.on('error', () => {
          client.destroy();
          upstream.destroy();
        });
      }
      client.pipe(upstream).pipe(client);
    });
  }

  static async start(target: { host: string; port: number }, host = '127.0.0.2'): Promise<LoopbackRelay> {
    const relay = new LoopbackRelay(target);
    relay.port = await listen(relay.#server, host);
    return relay;
  }

  async close(): Promise<void> {
    await shut(this.#server, this.#sockets);
  }
}

/** One MySQL protocol packet: 3-byte length, sequence id, payload. */
function packet(sequence: number, payload: Buffer): Buffer {
  const header = Buffer.alloc(4);
  header.writeUIntLE(payload.length, 0, 3);
  header[3] = sequence;
  return Buffer.concat([header, payload]);
}

// Capability flags of the greeting (MySQL protocol): LONG_PASSWORD, CONNECT_WITH_DB, PROTOCOL_41, SSL,
// TRANSACTIONS, SECURE_CONNECTION, PLUGIN_AUTH.
const CAPABILITIES = 0x1 | 0x8 | 0x200 | 0x800 | 0x2000 | 0x8000 | 0x80000;
const SSL_REQUEST_BYTES = 4 + 32;

/** The server's first packet (protocol 10), offering TLS. */
function greeting(): Buffer {
  const caps = Buffer.alloc(4);
  caps.writeUInt32LE(CAPABILITIES);
  const connectionId = Buffer.alloc(4);
  connectionId.writeUInt32LE(1);
  return packet(
    0,
    Buffer.concat([
      Buffer.from([10]),
      Buffer.from('10.11.0-impostor\0'),
      connectionId,
      Buffer.alloc(8, 0x61), // scramble, part 1
      Buffer.from([0]),
      caps.subarray(0, 2),
      Buffer.from([45, 2, 0]), // utf8mb4, SERVER_STATUS_AUTOCOMMIT
      caps.subarray(2, 4),
      Buffer.from([21]),
      Buffer.alloc(10),
      Buffer.alloc(12, 0x62), // scramble, part 2
      Buffer.from([0]),
      Buffer.from('mysql_native_password\0'),
    ]),
  );
}

/** An ERR packet (1045, access denied), the answer to any login the impostor gets. */
function accessDenied(sequence: number): Buffer {
  const errno = Buffer.alloc(2);
  errno.writeUInt16LE(1045);
  return packet(
    sequence,
    Buffer.concat([
      Buffer.from([0xff]),
      errno,
      Buffer.from('#28000'),
      Buffer.from('the impostor got a login'),
    ]),
  );
}

/**
 * A server that speaks MySQL's greeting, takes the client's TLS request and presents `certificates` (one a
 * client trusts, issued for another host), then counts the logins that arrive over that TLS. A client that
 * checks the certificate's host name closes the handshake first, and the count stays 0.
 */
export class MySqlImpostor {
  readonly #server: Server;
  readonly #sockets = new Set<Socket>();
  /** Login packets received over TLS (each the client's user name and password hash). */
  logins = 0;
  /** TLS handshakes started by a client (the client asked for TLS and got the certificate). */
  tlsRequests = 0;
  port = 0;

  private constructor(certificates: TestCertificates) {
    const secureContext = createSecureContext({ cert: certificates.cert, key: certificates.key });
    this.#server = createServer((socket) => {
      this.#sockets.add(socket);
      socket.on('close', () => this.#sockets.delete(socket));
      socket.on('error', () => {});
      socket.write(greeting());
      let pending = Buffer.alloc(0);
      const onData = (chunk: Buffer) => {
        pending = Buffer.concat([pending, chunk]);
        if (pending.length < SSL_REQUEST_BYTES) return;
        socket.off('data', onData);
        this.tlsRequests++;
        const secure = new TLSSocket(relayAfter(socket, pending.subarray(SSL_REQUEST_BYTES)), {
          isServer: true,
          secureContext,
        });
        secure.on('error', () => socket.destroy());
        secure.on('data', (data: Buffer) => {
          this.logins++;
          secure.end(accessDenied((data[3] ?? 1) + 1));
        });
      };
      socket.on('data', onData);
    });
  }

  static async start(certificates: TestCertificates): Promise<MySqlImpostor> {
    const impostor = new MySqlImpostor(certificates);
    impostor.port = await listen(impostor.#server, '127.0.0.1');
    return impostor;
  }

  async close(): Promise<void> {
    await shut(this.#server, this.#sockets);
  }
}

/** A duplex over `socket` that first yields `already` (bytes read past the TLS request), then what follows. */
function relayAfter(socket: Socket, already: Buffer): Duplex {
  const duplex = new Duplex({
    read() {
      socket.resume();
    },
    write(chunk: Buffer, _encoding, callback) {
      socket.write(chunk, callback);
    },
    final(callback) {
      socket.end(callback);
    },
    destroy(error, callback) {
      socket.destroy();
      callback(error);
    },
  });
  if (already.length > 0) duplex.push(already);
  socket.on('data', (chunk: Buffer) => {
    if (!duplex.push(chunk)) socket.pause();
  });
  socket.on('end', () => duplex.push(null));
  socket.on('close', () => duplex.destroy());
  return duplex;
}
