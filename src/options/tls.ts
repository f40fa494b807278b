import { z } from 'zod';

/** TLS settings passed to Node's `tls.connect`: PEM contents, not file paths. Shared by every TLS client. */
export const tlsOptionsSchema = z
  .object({
    ca: z.string().optional(),
    cert: z.string().optional(),
    /** The client's private key (PEM); redacted in errors and logs. */
    key: z.string().optional(),
    servername: z.string().optional(),
    rejectUnauthorized: z.boolean().optional(),
  })
  .strict();

/** Parsed {@link tlsOptionsSchema}. */
export type TlsOptions = z.output<typeof tlsOptionsSchema>;

/** `true` for TLS with the system CAs, `false` for none, or a table of {@link tlsOptionsSchema} settings. */
export const tlsSettingSchema = z.union([z.boolean(), tlsOptionsSchema], {
  error: 'must be true, false or a table of TLS settings (ca, cert, key, servername, rejectUnauthorized)',
});
