/**
 * One line of a command's error output: `<command>: <message>`, unless the message already names the command
 * (a MissingDependencyError reads `idem node needs the npm package ...`).
 */
export function commandLine(command: string, message: string): string {
  const named = message.startsWith(`${command} `) || message.startsWith(`${command}:`);
  return named ? message : `${command}: ${message}`;
}
