/**
 * A MariaDB server owned by one test (never the shared stack's): `mariadb-install-db` into a temporary directory,
 * then `mariadbd` on a spare loopback port with the server options the test needs (for example `--autocommit=0`),
 * from Debian's binaries as scripts/stack/lib.sh runs them. User `idem` (password `idem`) owns database `idem`.
 *
 *   const server = await OwnMariadb.start(['--autocommit=0']);
 *   server.url;              // mysql://idem:idem@127.0.0.1:<port>/idem
 *   await server.destroy();
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { createConnection } from 'mysql2/promise';
import { run, stopChild } from './own-postgres.js';
import { sparePort } from './redis-server.js';

/** mariadbd drops to this OS user when started as root (`--user`), as the stack does. */
const OS_USER = 'mysql';

async function chownToServer(...paths: string[]): Promise<void> {
  if (userInfo().uid !== 0) return;
  for (const path of paths) await run(['chown', '-R', `${OS_USER}:${OS_USER}`, path], `chown ${path}`);
}

export class OwnMariadb {
  #child: ChildProcess | undefined;
  #log = '';

  private constructor(
    readonly dir: string,
    readonly port: number,
  ) {}

  get url(): string {
    return `mysql://idem:idem@127.0.0.1:${this.port}/idem`;
  }

  get running(): boolean {
    return this.#child !== undefined && this.#child.exitCode === null && this.#child.signalCode === null;
  }

  /** A fresh data directory and a server on a spare port with `serverArgs` added, answering (bounded, ~90 s). */
  static async start(serverArgs: readonly string[] = []): Promise<OwnMariadb> {
    const dir = await mkdtemp(join(tmpdir(), 'idem-own-mariadb-'));
    const server = new OwnMariadb(dir, await sparePort());
    try {
      await server.#start(serverArgs);
      return server;
    } catch (error) {
      await server.destroy();
      throw error;
    }
  }

  async #start(serverArgs: readonly string[]): Promise<void> {
    const data = join(this.dir, 'data');
    await mkdir(data);
    const runAs = userInfo().uid === 0 ? [`--user=${OS_USER}`] : [];
    await chownToServer(this.dir);
    await run(
      [
        'mariadb-install-db',
        '--no-defaults',
        ...runAs,
        `--datadir=${data}`,
        '--skip-test-db',
        '--auth-root-authentication-method=socket',
      ],
      'mariadb-install-db',
    );
    // Runs before the server accepts connections.
    const init = join(this.dir, 'init.sql');
    await writeFile(
      init,
      [
        'CREATE DATABASE IF NOT EXISTS idem CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;',
        "CREATE USER IF NOT EXISTS 'idem'@'127.0.0.1' IDENTIFIED BY 'idem';",
        "GRANT ALL PRIVILEGES ON idem.* TO 'idem'@'127.0.0.1';",
        '',
      ].join('\n'),
    );
    await chownToServer(this.dir);
    const child = spawn(
      'mariadbd',
      [
        '--no-defaults',
        ...runAs,
        `--datadir=${data}`,
        `--socket=${join(this.dir, 'mysqld.sock')}`,
        `--pid-file=${join(this.dir, 'mysqld.pid')}`,
        '--bind-address=127.0.0.1',
        `--port=${this.port}`,
        '--skip-name-resolve',
        `--init-file=${init}`,
        '--character-set-server=utf8mb4',
        '--collation-server=utf8mb4_bin',
        '--innodb-buffer-pool-size=32M',
        '--innodb-flush-log-at-trx-commit=2',
        ...serverArgs,
      ],
      { stdio: ['ignore', 'ignore', 'pipe'] },
    );
    this.#child = child;
    child.stderr?.setEncoding('utf8').on('data', (text: string) => {
      this.#log = (this.#log + text).slice(-8_000);
    });
    const deadline = Date.now() + 90_000;
    for (;;) {
      if (!this.running) throw new Error(`mariadbd on ${this.port} exited at start: ${this.#log.trim()}`);
      try {
        const connection = await createConnection({ uri: this.url, connectTimeout: 2_000 });
        await connection.end();
        return;
      } catch (error) {
        if (Date.now() > deadline)
          throw new Error(`mariadbd on ${this.port} did not answer in 90 s`, { cause: error });
        await sleep(200);
      }
    }
  }

  /** Stops the server (SIGKILL after 10 s) and removes its directory. */
  async destroy(): Promise<void> {
    if (this.running) await stopChild(this.#child as ChildProcess, 'SIGTERM');
    await rm(this.dir, { recursive: true, force: true });
  }
}
