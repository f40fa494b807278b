/**
 * A PostgreSQL cluster owned by one test or chaos run (never the shared stack's server): `initdb` into a temporary
 * directory, then `postgres` on a spare loopback port, from Debian's binaries (POSTGRES_BIN_DIR, default
 * /usr/lib/postgresql/15/bin, as scripts/stack/lib.sh). PostgreSQL refuses to run as root: as root, the cluster
 * belongs to the `postgres` OS user (setpriv, as the stack does). Loopback connections are trusted (`postgres`
 * role, `postgres` database): the cluster lives only as long as its owner and serves only 127.0.0.1.
 *
 *   const server = await OwnPostgres.start();
 *   await server.crash();    // SIGQUIT: immediate shutdown, crash recovery on the next start
 *   await server.restart();  // the same data and port
 *   await server.destroy();
 */
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { once } from 'node:events';
import { rmSync } from 'node:fs';
import { chmod, chown, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import pg from 'pg';
import { sparePort } from './redis-server.js';

const execFileAsync = promisify(execFile);

const BIN_DIR = process.env.POSTGRES_BIN_DIR ?? '/usr/lib/postgresql/15/bin';
const OS_USER = process.env.STACK_POSTGRES_USER ?? 'postgres';

/** The command prefix that runs a server binary as the cluster's OS user (nothing unless we are root). */
function asOwner(): string[] {
  return userInfo().uid === 0
    ? ['setpriv', `--reuid=${OS_USER}`, `--regid=${OS_USER}`, '--init-groups', '--reset-env']
    : [];
}

/** Runs a command to its end; a non-zero exit rejects with the end of its stderr. */
export async function run(command: readonly string[], what: string): Promise<void> {
  const [file, ...args] = command as [string, ...string[]];
  const child = spawn(file, args, { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr?.setEncoding('utf8').on('data', (text: string) => {
    stderr = (stderr + text).slice(-4_000);
  });
  const [code] = (await once(child, 'exit')) as [number | null];
  if (code !== 0) throw new Error(`${what} exited with ${code}: ${stderr.trim()}`);
}

export class OwnPostgres {
  #child: ChildProcess | undefined;
  #log = '';

  private constructor(
    readonly dir: string,
    readonly port: number,
  ) {}

  /** `postgres://postgres@127.0.0.1:<port>/postgres`. */
  get url(): string {
    return `postgres://postgres@127.0.0.1:${this.port}/postgres`;
  }

  get running(): boolean {
    return this.#child !== undefined && this.#child.exitCode === null && this.#child.signalCode === null;
  }

  /** initdb into a fresh temporary directory and start the server on a spare port (bounded, ~60 s). */
  static async start(): Promise<OwnPostgres> {
    const dir = await mkdtemp(join(tmpdir(), 'idem-own-postgres-'));
    const server = new OwnPostgres(dir, await sparePort());
    try {
      const owner = asOwner();
      if (owner.length > 0) {
        const { uid, gid } = await osUser(OS_USER);
        await chown(dir, uid, gid);
      }
      await chmod(dir, 0o700);
      // One initdb per process, copied for each cluster: initdb takes seconds on a busy machine, a copy does not.
      await run(['cp', '-a', await template(), server.data], 'copying the initdb template');
      await server.restart();
      return server;
    } catch (error) {
      await server.destroy();
      throw error;
    }
  }

  get data(): string {
    return join(this.dir, 'data');
  }

  /** Starts the server on the existing data (after {@link crash} or {@link stop}) and waits until it answers. */
  async restart(): Promise<void> {
    if (this.running) return;
    const command: string[] = [
      ...asOwner(),
      join(BIN_DIR, 'postgres'),
      '-D',
      this.data,
      '-c',
      'listen_addresses=127.0.0.1',
      '-c',
      `port=${this.port}`,
      '-c',
      `unix_socket_directories=${this.dir}`,
      // Throwaway data: a crash of the server process still loses nothing committed; only an OS crash would.
      '-c',
      'fsync=off',
      '-c',
      'full_page_writes=off',
      '-c',
      'max_connections=200',
    ];
    const [file, ...args] = command as [string, ...string[]];
    const child = spawn(file, args, { stdio: ['ignore', 'ignore', 'pipe'] });
    this.#child = child;
    child.stderr?.setEncoding('utf8').on('data', (text: string) => {
      this.#log = (this.#log + text).slice(-8_000);
    });
    const deadline = Date.now() + 60_000;
    for (;;) {
      if (!this.running) throw new Error(`postgres on ${this.port} exited at start: ${this.#log.trim()}`);
      const client = new pg.Client({ connectionString: this.url, connectionTimeoutMillis: 2_000 });
      client.on('error', () => {});
      try {
        await client.connect();
        await client.query('SELECT 1');
        return;
      } catch (error) {
        if (Date.now() > deadline)
          throw new Error(`postgres on ${this.port} did not answer in 60 s`, { cause: error });
        await sleep(200);
      } finally {
        await client.end().catch(() => undefined);
      }
    }
  }

  /** SIGQUIT: the postmaster's immediate shutdown, no checkpoint; the next start runs crash recovery. */
  crash(): Promise<void> {
    return this.#signal('SIGQUIT');
  }

  /** SIGINT: a fast shutdown (open transactions rolled back, a checkpoint written). */
  stop(): Promise<void> {
    return this.#signal('SIGINT');
  }

  /** Stops the server (SIGKILL after 10 s) and removes its directory. */
  async destroy(): Promise<void> {
    if (this.running) await stopChild(this.#child as ChildProcess, 'SIGQUIT');
    await rm(this.dir, { recursive: true, force: true });
  }

  async #signal(signal: NodeJS.Signals): Promise<void> {
    const child = this.#child;
    if (!child || !this.running) return;
    const exited = once(child, 'exit');
    child.kill(signal);
    await exited;
  }
}

/** Sends `signal` to a running server and waits for its exit, sending SIGKILL after 10 s. */
export async function stopChild(child: ChildProcess, signal: NodeJS.Signals): Promise<void> {
  const exited = once(child, 'exit');
  child.kill(signal);
  const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
  await exited;
  clearTimeout(timer);
}

let templateDir: Promise<string> | undefined;

/** A cluster made by initdb once per process (removed at exit), the data directory each {@link OwnPostgres} copies. */
function template(): Promise<string> {
  templateDir ??= (async () => {
    const dir = await mkdtemp(join(tmpdir(), 'idem-own-postgres-template-'));
    process.once('exit', () => rmSync(dir, { recursive: true, force: true }));
    const owner = asOwner();
    if (owner.length > 0) {
      const { uid, gid } = await osUser(OS_USER);
      await chown(dir, uid, gid);
    }
    const data = join(dir, 'data');
    await run(
      [...owner, join(BIN_DIR, 'initdb'), '-D', data, '-U', 'postgres', '--auth=trust', '-E', 'UTF8'],
      'initdb',
    );
    return data;
  })();
  return templateDir;
}

async function osUser(name: string): Promise<{ uid: number; gid: number }> {
  // execFile resolves once the output is closed: waiting for 'exit' and then reading stdout can read nothing yet,
  // and Number('') is 0, which chowned the cluster's directory to root ("could not access directory: Permission
  // denied" at the cluster's start).
  const read = async (flag: '-u' | '-g'): Promise<number> => {
    let out: string;
    try {
      ({ stdout: out } = await execFileAsync('id', [flag, name]));
    } catch {
      throw new Error(`no OS user ${name} for the PostgreSQL cluster (apt-get install postgresql)`);
    }
    const id = out.trim();
    if (!/^\d+$/.test(id))
      throw new Error(`\`id ${flag} ${name}\` printed ${JSON.stringify(id)}, not a number`);
    return Number(id);
  };
  return { uid: await read('-u'), gid: await read('-g') };
}
