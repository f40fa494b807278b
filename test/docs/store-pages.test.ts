import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { repositoryPackages, repositoryTypes } from '../../src/repositories/registry.js';
import { root } from '../package/pack.js';
import { importedSubpaths, snippetsOf } from './snippets.js';

// Every store's page opens with a snippet that opens the store (snippets.test.ts type-checks it) and has an
// options table naming exactly the keys of the store's schema, as config.md's section of that store does: a key
// added to or dropped from src/repositories/<store>/options.ts fails here until both tables say so.

const pageOf = (type: string) => (type === 'kafka' ? 'kafka-repository.md' : `${type}.md`);
const entryOf = (type: string) => (type === 'kafka' ? './kafka-repository' : `./${type}`);

/** The keys of `<store>OptionsSchema`, the source of truth of a store's options. */
async function schemaKeys(type: string): Promise<string[]> {
  const module = (await import(`../../src/repositories/${type}/options.js`)) as Record<string, unknown>;
  // A schema with a transform (a renamed key's alias) is a pipe: its keys are those of the object it starts from.
  const exported = module[`${type}OptionsSchema`] as
    | { shape?: Record<string, unknown>; in?: { shape?: Record<string, unknown> } }
    | undefined;
  const schema = exported?.shape === undefined ? exported?.in : exported;
  assert.ok(
    schema?.shape,
    `src/repositories/${type}/options.ts exports ${type}OptionsSchema, an object schema`,
  );
  return Object.keys(schema.shape).sort();
}

/** The option keys the first table after `heading` names: every `name` in backticks in its first column. */
function tableKeys(text: string, heading: RegExp, where: string): string[] {
  const start = text.search(heading);
  assert.ok(start >= 0, `${where} has no section ${heading}`);
  const lines = text.slice(start).split('\n').slice(1);
  const first = lines.findIndex((line) => line.startsWith('|'));
  assert.ok(
    first >= 0 && !lines.slice(0, first).some((line) => /^#{1,6} /.test(line)),
    `${where}: no table in its section ${heading}`,
  );
  const rows: string[] = [];
  for (const line of lines.slice(first + 2)) {
    if (!line.startsWith('|')) break;
    rows.push(line.split('|')[1] ?? '');
  }
  return rows
    .flatMap((cell) => [...cell.matchAll(/`([A-Za-z][A-Za-z0-9]*)`/g)].map((m) => m[1] as string))
    .sort();
}

describe('each store page opens the store and lists its options', () => {
  for (const type of repositoryTypes) {
    const page = `docs/${pageOf(type)}`;

    it(`${page} opens with a TypeScript snippet that opens the ${type} store`, () => {
      const text = readFileSync(join(root, page), 'utf8');
      const [first] = snippetsOf(page);
      assert.ok(first, `${page} has no \`\`\`ts block`);
      const firstSection = text.search(/^## /m);
      const fence = Number(first.where.split(':')[1]);
      assert.ok(
        firstSection < 0 || fence < text.slice(0, firstSection).split('\n').length,
        `${page}: the first \`\`\`ts block (line ${fence}) comes after the first section`,
      );
      assert.ok(
        importedSubpaths(first.code).includes(entryOf(type)),
        `${first.where} does not import ${entryOf(type)}`,
      );
      assert.match(
        first.code,
        /Repository\.open\(|new MemoryRepository\(/,
        `${first.where} does not open the store`,
      );
    });

    it(`${page} has an options table naming exactly the keys of ${type}OptionsSchema`, async () => {
      const text = readFileSync(join(root, page), 'utf8');
      assert.deepEqual(tableKeys(text, /^## Options$/m, page), await schemaKeys(type));
    });

    it(`docs/config.md's type = "${type}" table names exactly the keys of ${type}OptionsSchema`, async () => {
      const text = readFileSync(join(root, 'docs/config.md'), 'utf8');
      const heading = new RegExp(`^### \`type = "${type}"\``, 'm');
      assert.deepEqual(tableKeys(text, heading, 'docs/config.md'), await schemaKeys(type));
    });
  }
});

/** Whether an installed package carries its own declarations (`types`/`typings` in its package.json). */
function shipsTypes(name: string): boolean {
  const manifest = JSON.parse(readFileSync(join(root, 'node_modules', name, 'package.json'), 'utf8')) as {
    types?: string;
    typings?: string;
  };
  return manifest.types !== undefined || manifest.typings !== undefined;
}

describe("each store page says how to get its client's types", () => {
  for (const type of repositoryTypes) {
    const page = `docs/${pageOf(type)}`;
    for (const name of repositoryPackages[type]) {
      const needed = shipsTypes(name) ? 'that it ships its own types' : `npm install -D @types/${name}`;
      it(`${page}, before its first section: npm install ${name}, and ${needed}`, () => {
        const text = readFileSync(join(root, page), 'utf8');
        const intro = text.slice(0, text.search(/^## /m));
        const install = intro.indexOf(`npm install ${name}`);
        assert.ok(install >= 0, `${page} does not say \`npm install ${name}\` before its first section`);
        // What follows the install command, up to the end of its sentence.
        const sentence = intro.slice(install).split(/\.(?:\s|$)/)[0] as string;
        if (shipsTypes(name)) assert.match(sentence, /ships its own types/, `${page}: ${sentence}`);
        else assert.ok(sentence.includes(`npm install -D @types/${name}`), `${page}: ${sentence}`);
      });
    }
  }
});
