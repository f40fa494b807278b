/**
 * The line (1-based) where a dotted key is set in TOML text (the parser gives lines for syntax errors only);
 * undefined when unsure (inline tables, multi-line strings).
 */
export function locateKey(text: string, path: readonly string[]): number | undefined {
  if (path.length === 0) return undefined;
  const target = path.join('.');
  const lines = text.split('\n');
  let table: string[] = [];
  let best: number | undefined;
  for (let i = 0; i < lines.length; i++) {
    const line = (lines[i] as string).trim();
    if (line === '' || line.startsWith('#')) continue;
    const header = /^\[\[?\s*([^\]]+?)\s*\]\]?/.exec(line);
    if (header) {
      table = splitKey(header[1] as string);
      if (table.join('.') === target) return i + 1;
      continue;
    }
    const assignment = /^([A-Za-z0-9_\-."' ]+?)\s*=/.exec(line);
    if (!assignment) continue;
    const full = [...table, ...splitKey(assignment[1] as string)].join('.');
    if (full === target) return i + 1;
    // A parent set inline (`repository = { ... }`) is the closest line we can name.
    if (target.startsWith(`${full}.`)) best ??= i + 1;
  }
  return best;
}

function splitKey(key: string): string[] {
  return key.split('.').map((part) => part.trim().replace(/^["']|["']$/g, ''));
}
