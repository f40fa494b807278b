/** Exit codes of `idem`, documented in docs/cli.md. */
export const ExitCode = {
  ok: 0,
  /** `--invalid error` stopped at a malformed line or a line without id. */
  invalidInput: 1,
  /** Bad flags or config. */
  usage: 2,
  /** The store or an input/output file failed. */
  failure: 3,
  sigint: 130,
  sigterm: 143,
} as const;
