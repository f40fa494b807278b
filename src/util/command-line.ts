/**
 * One line of a command's error output: `<command>: <message>`, unless the message already begins with the
 * command's name. Some messages name the command themselves (a MissingDependencyError for the feature
 * "idem node" reads `idem node needs the npm package ...`), and prefixing those again printed
 * `idem node: idem node needs ...`. Every place `idem` prints an error goes through here.
 */
export function commandLine(command: string, message: string): string {
  const named = message.startsWith(`${command} `) || message.startsWith(`${command}:`);
  return named ? message : `${command}: ${message}`;
}
